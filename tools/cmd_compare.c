/* minidc compare A B: two safetensors files (weights, checkpoints, minidc forward dumps, a GPU
 * run's tensors) or --dump-dir directories (reassembled by mdc_dump_read; NAME:pre, a tensor
 * before a communication point, meets the other side's NAME when it has none) tensor by tensor. Tensors pair by name (a "transformer." prefix and the ".weight"
 * of wte and wpe do not matter, so Hugging Face and minidc names meet); for each pair the max and
 * mean absolute error, the largest distance in float32 ULPs, and the elements outside
 * |a - b| <= atol + rtol |b|, with the tolerances of the coarser dtype (torch.testing's:
 * F64 1e-7/1e-7, F32 1.3e-6/1e-5, F16 1e-3/1e-5, BF16 1.6e-2/1e-5) unless --rtol/--atol say.
 * The first tensor that differs is named in A's order (a dump's order is its execution order),
 * with its first element outside the tolerance. Exit 0 when every tensor of A is in B and
 * within the tolerance (and B has no others), 1 when not (or a dump's copies disagree or leave a
 * hole), 2 on bad usage or an unreadable file. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/dump.h"
#include "minidc/tensorfile.h"
#include "minidc/weights.h"

/* the table name, keeping a dump's "grad." or "final." in front */
static void canonical(const char *name, char *buf, size_t cap) {
    const char *prefixes[2] = {"grad.", "final."}, *pre = "";
    for (int i = 0; i < 2; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) pre = prefixes[i], name += strlen(pre);
    char table[512];
    snprintf(buf, cap, "%s%s", pre, mdc_gpt2_canonical_name(name, table, sizeof table));
}

static const mdc_tensor *find_exact(const mdc_tensorfile *tf, const char *want) {
    char a[512], b[512];
    canonical(want, a, sizeof a);
    for (int i = 0; i < tf->count; i++) {
        canonical(tf->tensors[i].name, b, sizeof b);
        if (!strcmp(a, b)) return &tf->tensors[i];
    }
    return NULL;
}

/* A dump's tensor before a communication point (NAME:pre) is compared with NAME on a side
 * that has none (a serial run, another framework). */
static int is_pre(const char *name) {
    size_t n = strlen(name);
    return n > 4 && !strcmp(name + n - 4, ":pre");
}
static const mdc_tensor *find(const mdc_tensorfile *tf, const char *want) {
    const mdc_tensor *t = find_exact(tf, want);
    if (t || !is_pre(want)) return t;
    char base[512];
    snprintf(base, sizeof base, "%.*s", (int)(strlen(want) - 4), want);
    return find_exact(tf, base);
}

static int is_float(mdc_tdtype t) { return t == MDC_TD_F32 || t == MDC_TD_F16 || t == MDC_TD_BF16 || t == MDC_TD_F64; }

/* the coarser dtype's tolerances */
static void tolerances(mdc_tdtype a, mdc_tdtype b, double *rtol, double *atol) {
    int ra = a == MDC_TD_BF16 ? 3 : a == MDC_TD_F16 ? 2 : a == MDC_TD_F32 ? 1 : 0;
    int rb = b == MDC_TD_BF16 ? 3 : b == MDC_TD_F16 ? 2 : b == MDC_TD_F32 ? 1 : 0, r = ra > rb ? ra : rb;
    static const double rt[4] = {1e-7, 1.3e-6, 1e-3, 1.6e-2}, at[4] = {1e-7, 1e-5, 1e-5, 1e-5};
    *rtol = rt[r], *atol = at[r];
}

/* float bits as an integer that orders like the values: the ULP distance is the difference */
static int64_t ordered(float x) {
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

typedef struct {
    double max_abs, mean_abs, max_ulp;
    size_t bad, first_bad;
    float fa, fb;
} diff;

static mdc_status compare(const mdc_tensor *a, const mdc_tensor *b, double rtol, double atol, diff *d) {
    memset(d, 0, sizeof *d);
    d->first_bad = SIZE_MAX;
    size_t n = a->numel;
    float *x = malloc(sizeof(float) * (n ? n : 1)), *y = malloc(sizeof(float) * (n ? n : 1));
    mdc_status st = x && y ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "compare: %zu elements", n);
    if (!st) st = mdc_tensor_to_f32(a, x, n);
    if (!st) st = mdc_tensor_to_f32(b, y, n);
    for (size_t i = 0; !st && i < n; i++) {
        double e = fabs((double)x[i] - (double)y[i]);
        int same = x[i] == y[i] || (isnan(x[i]) && isnan(y[i]));
        if (same) e = 0;
        double u = same ? 0 : isfinite(x[i]) && isfinite(y[i]) ? fabs((double)(ordered(x[i]) - ordered(y[i]))) : INFINITY;
        if (!(e <= d->max_abs)) d->max_abs = e;
        if (u > d->max_ulp) d->max_ulp = u;
        d->mean_abs += e / (double)n;
        if (!same && !(e <= atol + rtol * fabs((double)y[i]))) {
            if (d->bad++ == 0) d->first_bad = i, d->fa = x[i], d->fb = y[i];
        }
    }
    free(x), free(y);
    return st;
}

static void shape_text(const mdc_tensor *t, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->ndim && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* The running verdict: the first differing tensor in A's order and why ("" while none). */
typedef struct {
    int quiet;
    double rtol, atol;
    int differ;
    char why[1024];
} verdict;

/* One row: a (A's) against b (B's, or NULL: missing); 2 on an error, else 0. */
static int pair(verdict *v, const char *label, const mdc_tensor *a, const mdc_tensor *b) {
    char sa[96], sb[96], line[640];
    shape_text(a, sa, sizeof sa);
    if (!b || a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim)) {
        if (b) shape_text(b, sb, sizeof sb);
        if (b) snprintf(line, sizeof line, "%s: shape %s in A, %s in B", label, sa, sb);
        else snprintf(line, sizeof line, "%s: not in B", label);
        if (!v->quiet) printf("%-40s %s\n", label, line + strlen(label) + 2);
        if (!v->why[0]) snprintf(v->why, sizeof v->why, "%s", line);
        v->differ = 1;
        return 0;
    }
    if (!is_float(a->dtype) || !is_float(b->dtype)) { /* integers: equal or not */
        int same = a->nbytes == b->nbytes && a->dtype == b->dtype && !memcmp(a->data, b->data, a->nbytes);
        if (!v->quiet) printf("%-40s %-10s %-16s %s\n", label, mdc_tdtype_name(a->dtype), sa, same ? "equal" : "DIFFERS");
        if (!same && !v->why[0]) snprintf(v->why, sizeof v->why, "%s: integer values differ", label);
        v->differ |= !same;
        return 0;
    }
    double rt, at;
    tolerances(a->dtype, b->dtype, &rt, &at);
    if (v->rtol >= 0) rt = v->rtol;
    if (v->atol >= 0) at = v->atol;
    diff d;
    if (compare(a, b, rt, at, &d)) {
        fprintf(stderr, "minidc compare: %s\n", mdc_detail());
        return 2;
    }
    char dt[24];
    snprintf(dt, sizeof dt, "%s/%s", mdc_tdtype_name(a->dtype), mdc_tdtype_name(b->dtype));
    if (!v->quiet)
        printf("%-40s %-10s %-16s %12.4g %12.4g %10.0f %10zu%s\n", label, dt, sa, d.max_abs, d.mean_abs, d.max_ulp, d.bad,
               d.bad ? "  DIFFERS" : "");
    if (d.bad && !v->why[0]) {
        snprintf(v->why, sizeof v->why, "%s: element %zu is %.9g in A, %.9g in B (rtol %g, atol %g); %zu of %zu outside",
                 label, d.first_bad, d.fa, d.fb, rt, at, d.bad, a->numel);
    }
    v->differ |= d.bad > 0;
    return 0;
}

int mdc_cmd_compare(int argc, char **argv) {
    const char *pa = NULL, *pb = NULL;
    double rtol = -1, atol = -1;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: minidc compare A B [--rtol R] [--atol A] [--quiet]\n"
                   "  A, B: safetensors files, or dump directories of --dump-dir (reassembled into global\n"
                   "  tensors first; a tensor before a communication point, NAME:pre, meets the other's NAME)\n"
                   "  pairs the tensors by name; tolerances by the coarser dtype (F32 rtol 1.3e-6 atol 1e-5,\n"
                   "  BF16 1.6e-2/1e-5, F16 1e-3/1e-5, F64 1e-7/1e-7) unless given; --quiet: only the verdict and\n"
                   "  the first differing tensor. Exit 0 equal within the tolerance, 1 not, 2 bad usage.\n");
            return 0;
        }
        if (!strcmp(a, "--quiet")) { quiet = 1; continue; }
        if (!strcmp(a, "--rtol") || !strcmp(a, "--atol")) {
            double *dst = a[2] == 'r' ? &rtol : &atol;
            char *end;
            *dst = v ? strtod(v, &end) : -1;
            if (!v || *end || !(*dst >= 0) || *dst > 1e6) {
                fprintf(stderr, "minidc compare: %s needs a number in [0, 1e6], got '%s'\n", a, v ? v : "");
                return 2;
            }
            i++;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "minidc compare: unknown option %s (minidc compare --help)\n", a);
            return 2;
        }
        if (!pa) pa = a;
        else if (!pb) pb = a;
        else {
            fprintf(stderr, "minidc compare: one pair of files, got a third: %s\n", a);
            return 2;
        }
    }
    if (!pa || !pb) {
        fprintf(stderr, "minidc compare: give two files (minidc compare --help)\n");
        return 2;
    }
    mdc_tensorfile *A = NULL, *B = NULL;
    mdc_status rs = mdc_dump_read(pa, &A);
    if (!rs) rs = mdc_dump_read(pb, &B);
    if (rs) { /* copies that disagree or a hole is a finding (1); an unreadable input is bad usage (2) */
        fprintf(stderr, "minidc compare: %s\n", mdc_detail());
        mdc_tensorfile_free(A);
        return rs == MDC_ERR_MISMATCH ? 1 : 2;
    }
    verdict v = {quiet, rtol, atol, 0, ""};
    if (!quiet) printf("%-40s %-10s %-16s %12s %12s %10s %10s\n", "tensor (A's order)", "dtypes", "shape", "max |a-b|", "mean |a-b|", "max ULP", "outside");
    int pairs = 0, rc = 0;
    for (int i = 0; i < A->count && !rc; i++) {
        const mdc_tensor *a = &A->tensors[i];
        char pre[512];
        snprintf(pre, sizeof pre, "%s:pre", a->name);
        const mdc_tensor *bp = is_pre(a->name) || find_exact(A, pre) ? NULL : find_exact(B, pre);
        if (bp) rc = pair(&v, pre, a, bp), pairs++; /* B's tensor before its communication point */
        if (!rc) rc = pair(&v, a->name, a, find(B, a->name)), pairs++;
    }
    for (int i = 0; i < B->count && !rc; i++) {
        const char *n = B->tensors[i].name;
        if (find(A, n)) continue;
        if (!quiet) printf("%-40s only in B\n", n);
        if (!v.why[0]) snprintf(v.why, sizeof v.why, "%s: only in B", n);
        v.differ = 1;
    }
    if (!rc) {
        if (v.differ) printf("DIFFERENT: first differing tensor %s\n", v.why);
        else printf("EQUAL: %d tensors within the tolerance\n", pairs);
        rc = v.differ;
    }
    mdc_tensorfile_free(A), mdc_tensorfile_free(B);
    return rc;
}
