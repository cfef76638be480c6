/* minidc compare A B: two safetensors files (weights, checkpoints, minidc forward dumps, a GPU
 * run's tensors) or --dump-dir directories (reassembled by mdc_dump_read; NAME:pre, a tensor
 * before a communication point, meets the other side's NAME when it has none) tensor by tensor.
 * Tensors pair by name (after a dump's "step<N>." and a "grad." or "final.", a "transformer."
 * prefix and the ".weight" of wte and wpe do not matter, so Hugging Face and minidc names meet; a file holding one tensor under both is refused, so no
 * tensor is compared twice); for each pair the max and mean absolute error, the largest distance
 * in float32 ULPs, and the elements outside |a - b| <= atol + rtol |b|, with the tolerances of
 * the coarser dtype (torch.testing's: F64 1e-7/1e-7, F32 1.3e-6/1e-5, F16 1e-3/1e-5, BF16
 * 1.6e-2/1e-5) unless --rtol/--atol say. Values are compared as float64. A NaN, an infinity
 * against a finite value and infinities of opposite sign are outside every tolerance; equal
 * infinities are equal, and NaN against NaN only with --nan-equal. Integer tensors are equal or
 * not, and only with the same dtype. The first tensor that differs is named in A's order (a
 * dump's order is its execution order), with its first element outside the tolerance. Exit 0
 * when every tensor of A is in B and within the tolerance (and B has no others), 1 when not (or
 * a dump's copies disagree or leave a hole), 2 on bad usage or an unreadable file. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/dump.h"
#include "minidc/tensorfile.h"

/* A name as pairing sees it, pointing into the name (no copy, so no length limit): a dump's
 * "grad." or "final." kept in front, then "transformer." dropped and wte.weight, wpe.weight
 * taken as minidc's wte, wpe (mdc_gpt2_canonical_name's rules). */
typedef struct {
    const char *pre, *body;
    size_t npre, nbody;
} cname;

static cname cname_of(const char *s, size_t n) {
    cname k = {s, s, 0, n};
    size_t d = 0; /* a dump's "step<N>." first */
    if (n > 5 && !memcmp(s, "step", 4)) {
        for (d = 4; d < n && s[d] >= '0' && s[d] <= '9';) d++;
        d = d > 4 && d < n && s[d] == '.' ? d + 1 : 0;
    }
    if (n >= d + 5 && !memcmp(s + d, "grad.", 5)) d += 5;
    else if (n >= d + 6 && !memcmp(s + d, "final.", 6)) d += 6;
    k.npre = d;
    s += k.npre, n -= k.npre;
    if (n >= 12 && !memcmp(s, "transformer.", 12)) s += 12, n -= 12;
    if (n == 10 && (!memcmp(s, "wte.weight", 10) || !memcmp(s, "wpe.weight", 10))) n = 3;
    k.body = s, k.nbody = n;
    return k;
}

static int bytes_cmp(const char *a, size_t na, const char *b, size_t nb) {
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : na < nb ? -1 : na > nb;
}

static int cname_cmp(const cname *a, const cname *b) {
    int c = bytes_cmp(a->pre, a->npre, b->pre, b->npre);
    return c ? c : bytes_cmp(a->body, a->nbody, b->body, b->nbody);
}

/* One side's tensors sorted by their pairing name: a lookup is a binary search. */
typedef struct {
    cname k;
    const mdc_tensor *t;
} entry;
typedef struct {
    entry *e;
    int n;
} names;

static int entry_cmp(const void *a, const void *b) {
    const entry *x = a, *y = b;
    int c = cname_cmp(&x->k, &y->k);
    return c ? c : x->t < y->t ? -1 : x->t > y->t;
}

/* Sorts tf's names into *ix; 2 (printed) when two of them pair as one, else 0. */
static int names_build(names *ix, const mdc_tensorfile *tf, const char *path) {
    ix->n = tf->count;
    ix->e = malloc(sizeof *ix->e * (size_t)(tf->count ? tf->count : 1));
    if (!ix->e) {
        fprintf(stderr, "minidc compare: %s: out of host memory for %d names\n", path, tf->count);
        return 2;
    }
    for (int i = 0; i < tf->count; i++)
        ix->e[i].t = &tf->tensors[i], ix->e[i].k = cname_of(tf->tensors[i].name, strlen(tf->tensors[i].name));
    qsort(ix->e, (size_t)ix->n, sizeof *ix->e, entry_cmp);
    for (int i = 1; i < ix->n; i++) {
        const entry *a = &ix->e[i - 1], *b = &ix->e[i];
        if (cname_cmp(&a->k, &b->k)) continue;
        fprintf(stderr,
                "minidc compare: %s: tensors '%s' and '%s' are one tensor under two names (both pair as "
                "'%.*s%.*s': minidc's and Hugging Face's); keep one, so that no tensor is compared twice\n",
                path, a->t->name, b->t->name, (int)a->k.npre, a->k.pre, (int)a->k.nbody, a->k.body);
        return 2;
    }
    return 0;
}

static const mdc_tensor *lookup(const names *ix, const char *s, size_t n) {
    cname k = cname_of(s, n);
    for (int lo = 0, hi = ix->n; lo < hi;) {
        int mid = lo + (hi - lo) / 2, c = cname_cmp(&k, &ix->e[mid].k);
        if (!c) return ix->e[mid].t;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

/* A dump's tensor before a communication point (NAME:pre) is compared with NAME on a side
 * that has none (a serial run, another framework). */
static int is_pre(const char *name) {
    size_t n = strlen(name);
    return n > 4 && !strcmp(name + n - 4, ":pre");
}
static const mdc_tensor *find(const names *ix, const char *want) {
    size_t n = strlen(want);
    const mdc_tensor *t = lookup(ix, want, n);
    return t || !is_pre(want) ? t : lookup(ix, want, n - 4);
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

/* Element i of a floating-point tensor, exactly (F64 is not rounded to float). */
static double value(const mdc_tensor *t, size_t i) {
    const unsigned char *p = t->data;
    uint16_t h;
    float f;
    double d;
    switch (t->dtype) {
    case MDC_TD_F64: memcpy(&d, p + 8 * i, 8); return d;
    case MDC_TD_F16: memcpy(&h, p + 2 * i, 2); return mdc_f16_to_f32(h);
    case MDC_TD_BF16: memcpy(&h, p + 2 * i, 2); return mdc_bf16_to_f32(h);
    default: memcpy(&f, p + 4 * i, 4); return f;
    }
}

typedef struct {
    double max_abs, mean_abs, max_ulp, fa, fb;
    size_t bad, first_bad;
} diff;

/* One pass over the elements, nothing allocated. */
static void compare(const mdc_tensor *a, const mdc_tensor *b, double rtol, double atol, int nan_equal, diff *d) {
    memset(d, 0, sizeof *d);
    d->first_bad = SIZE_MAX;
    for (size_t i = 0; i < a->numel; i++) {
        double x = value(a, i), y = value(b, i), e = fabs(x - y), u = INFINITY;
        int bad = 1;
        if (x == y || (nan_equal && isnan(x) && isnan(y))) { /* equal infinities too */
            e = u = 0, bad = 0;
        } else if (isfinite(x) && isfinite(y)) { /* a NaN or an infinity is outside every tolerance */
            double lim = atol + rtol * fabs(y);
            bad = !(e <= lim);
            if (!isfinite(e) || !isfinite(lim)) /* F64 near its largest values: long double's range */
                bad = !(fabsl((long double)x - y) <= (long double)atol + (long double)rtol * fabsl((long double)y));
            float fx = (float)x, fy = (float)y;
            if (isfinite(fx) && isfinite(fy)) u = fabs((double)(ordered(fx) - ordered(fy)));
        }
        if (isnan(e) || e > d->max_abs) d->max_abs = e; /* a NaN stays */
        if (u > d->max_ulp) d->max_ulp = u;
        d->mean_abs += e / (double)a->numel;
        if (bad && d->bad++ == 0) d->first_bad = i, d->fa = x, d->fb = y;
    }
}

/* Integer element i as text. */
static const char *int_text(const mdc_tensor *t, size_t i, char *buf, size_t cap) {
    const unsigned char *p = (const unsigned char *)t->data + i * mdc_tdtype_size(t->dtype);
    int64_t s = 0;
    uint64_t u = 0;
    int8_t s8;
    int16_t s16;
    int32_t s32;
    uint16_t u16;
    uint32_t u32;
    switch (t->dtype) {
    case MDC_TD_I64: memcpy(&s, p, 8); break;
    case MDC_TD_I32: memcpy(&s32, p, 4), s = s32; break;
    case MDC_TD_I16: memcpy(&s16, p, 2), s = s16; break;
    case MDC_TD_I8: memcpy(&s8, p, 1), s = s8; break;
    case MDC_TD_U64: memcpy(&u, p, 8); break;
    case MDC_TD_U32: memcpy(&u32, p, 4), u = u32; break;
    case MDC_TD_U16: memcpy(&u16, p, 2), u = u16; break;
    default: u = p[0]; break; /* U8, BOOL */
    }
    if (t->dtype <= MDC_TD_I8) snprintf(buf, cap, "%lld", (long long)s);
    else snprintf(buf, cap, "%llu", (unsigned long long)u);
    return buf;
}

static void shape_text(const mdc_tensor *t, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* The running verdict: the first differing tensor in A's order and why ("" while none). */
typedef struct {
    int quiet, nan_equal;
    double rtol, atol;
    int differ;
    char why[1024];
} verdict;

static void differs(verdict *v, const char *label, const char *what) {
    if (!v->why[0]) snprintf(v->why, sizeof v->why, "%s: %s", label, what);
    v->differ = 1;
}

/* One row: a (A's) against b (B's, or NULL: missing). */
static void pair(verdict *v, const char *label, const mdc_tensor *a, const mdc_tensor *b) {
    char sa[192], sb[192], dt[24], x[64], y[64], w[512];
    shape_text(a, sa, sizeof sa);
    if (!b) {
        if (!v->quiet) printf("%-40s not in B\n", label);
        differs(v, label, "not in B");
        return;
    }
    shape_text(b, sb, sizeof sb);
    if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim)) {
        snprintf(w, sizeof w, "shape %s in A, %s in B", sa, sb);
        if (!v->quiet) printf("%-40s %s\n", label, w);
        differs(v, label, w);
        return;
    }
    snprintf(dt, sizeof dt, "%s/%s", mdc_tdtype_name(a->dtype), mdc_tdtype_name(b->dtype));
    if (a->dtype != b->dtype && !(is_float(a->dtype) && is_float(b->dtype))) { /* no common scale to compare on */
        if (!v->quiet) printf("%-40s %-10s %-16s DIFFERS (dtypes)\n", label, dt, sa);
        snprintf(w, sizeof w, "dtypes differ: %s vs %s (integers are compared only with the same dtype)",
                 mdc_tdtype_name(a->dtype), mdc_tdtype_name(b->dtype));
        differs(v, label, w);
        return;
    }
    if (!is_float(a->dtype)) { /* integers: equal or not */
        size_t es = mdc_tdtype_size(a->dtype), bad = 0, first = 0;
        for (size_t i = 0; i < a->numel; i++)
            if (memcmp((const char *)a->data + i * es, (const char *)b->data + i * es, es) && !bad++) first = i;
        if (!v->quiet) printf("%-40s %-10s %-16s %s\n", label, dt, sa, bad ? "DIFFERS" : "equal");
        if (!bad) return;
        snprintf(w, sizeof w, "element %zu is %s in A, %s in B; %zu of %zu differ", first,
                 int_text(a, first, x, sizeof x), int_text(b, first, y, sizeof y), bad, a->numel);
        differs(v, label, w);
        return;
    }
    double rt, at;
    tolerances(a->dtype, b->dtype, &rt, &at);
    if (v->rtol >= 0) rt = v->rtol;
    if (v->atol >= 0) at = v->atol;
    diff d;
    compare(a, b, rt, at, v->nan_equal, &d);
    if (!v->quiet)
        printf("%-40s %-10s %-16s %12.4g %12.4g %10.0f %10zu%s\n", label, dt, sa, d.max_abs, d.mean_abs, d.max_ulp,
               d.bad, d.bad ? "  DIFFERS" : "");
    if (!d.bad) return;
    int digits = a->dtype == MDC_TD_F64 || b->dtype == MDC_TD_F64 ? 17 : 9;
    const char *why = isnan(d.fa) && isnan(d.fb)           ? "; NaN on both sides is equal only with --nan-equal"
                      : !isfinite(d.fa) || !isfinite(d.fb) ? "; a NaN or an infinity against another value is "
                                                             "outside every tolerance"
                                                           : "";
    snprintf(w, sizeof w, "element %zu is %.*g in A, %.*g in B (rtol %g, atol %g%s); %zu of %zu outside", d.first_bad,
             digits, d.fa, digits, d.fb, rt, at, why, d.bad, a->numel);
    differs(v, label, w);
}

int mdc_cmd_compare(int argc, char **argv) {
    const char *pa = NULL, *pb = NULL;
    double rtol = -1, atol = -1;
    int quiet = 0, nan_equal = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: minidc compare A B [--rtol R] [--atol A] [--nan-equal] [--quiet]\n"
                   "  A, B: safetensors files, or dump directories of --dump-dir (reassembled into global\n"
                   "  tensors first; a tensor before a communication point, NAME:pre, meets the other's NAME)\n"
                   "  pairs the tensors by name; tolerances by the coarser dtype (F32 rtol 1.3e-6 atol 1e-5,\n"
                   "  BF16 1.6e-2/1e-5, F16 1e-3/1e-5, F64 1e-7/1e-7) unless given. A NaN, an infinity against\n"
                   "  a finite value and infinities of opposite sign differ at every tolerance; equal infinities\n"
                   "  are equal; --nan-equal: a NaN in both at the same element is equal too. Integer tensors\n"
                   "  must match exactly, in the same dtype. --quiet: only the verdict and the first differing\n"
                   "  tensor. Exit 0 equal within the tolerance, 1 not, 2 bad usage or an unreadable file.\n");
            return 0;
        }
        if (!strcmp(a, "--quiet")) {
            quiet = 1;
            continue;
        }
        if (!strcmp(a, "--nan-equal")) {
            nan_equal = 1;
            continue;
        }
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
        fprintf(stderr, "minidc compare: %s%s\n", rs == MDC_ERR_OOM_HOST ? "out of host memory: " : "", mdc_detail());
        mdc_tensorfile_free(A);
        return rs == MDC_ERR_MISMATCH ? 1 : 2;
    }
    names ia = {0}, ib = {0};
    int rc = names_build(&ia, A, pa);
    if (!rc) rc = names_build(&ib, B, pb);
    verdict v = {quiet, nan_equal, rtol, atol, 0, ""};
    if (!rc && !quiet)
        printf("%-40s %-10s %-16s %12s %12s %10s %10s\n", "tensor (A's order)", "dtypes", "shape", "max |a-b|",
               "mean |a-b|", "max ULP", "outside");
    int pairs = 0;
    for (int i = 0; i < A->count && !rc; i++) {
        const mdc_tensor *a = &A->tensors[i];
        size_t n = strlen(a->name);
        char *pre = malloc(n + 5);
        if (!pre) {
            fprintf(stderr, "minidc compare: out of host memory for a name of %zu bytes\n", n);
            rc = 2;
            break;
        }
        memcpy(pre, a->name, n), memcpy(pre + n, ":pre", 5);
        const mdc_tensor *bp = is_pre(a->name) || lookup(&ia, pre, n + 4) ? NULL : lookup(&ib, pre, n + 4);
        if (bp) pair(&v, pre, a, bp), pairs++; /* B's tensor before its communication point */
        pair(&v, a->name, a, find(&ib, a->name)), pairs++;
        free(pre);
    }
    for (int i = 0; i < B->count && !rc; i++) {
        const char *n = B->tensors[i].name;
        if (find(&ia, n)) continue;
        if (!quiet) printf("%-40s only in B\n", n);
        differs(&v, n, "only in B");
    }
    if (!rc) {
        if (v.differ) printf("DIFFERENT: first differing tensor %s\n", v.why);
        else printf("EQUAL: %d tensors within the tolerance\n", pairs);
        rc = v.differ;
    }
    free(ia.e), free(ib.e);
    mdc_tensorfile_free(A), mdc_tensorfile_free(B);
    return rc;
}
