/* minidc explain exact: one gradient element's summation, in default mode on two meshes and in
 * exact mode (docs/exactness.md). Default mode: each data-parallel rank's product over its
 * tokens (one sgemm per micro-batch, OpenBLAS's order inside, which depends on the call's
 * shape), the micro-batches added in turn, then the ring allreduce's order over ranks, printed
 * from the collective's own schedule (mdc_schedule_expr, the order the code adds in). Exact
 * mode: the canonical token blocks, which rank holds which, and their exact combination. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/collectives.h"
#include "minidc/schedule.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minidc explain exact [--config tiny|small|gpt2] [--batch B] [--seq T] [--dp D]... [--accum K]\n"
            "                            [--exact-block N] [--tensor NAME] [--index I]\n"
            "       minidc explain exact [--config C] [--seq T] --meshes \"MESH MESH ...\"\n"
            "  one element of a gradient: its summation order in default mode on each --dp given (default: 2\n"
            "  and 3), and the canonical blocks of exact mode that make every mesh give the same bits\n"
            "  --tensor NAME   a weight, bias or LayerNorm (default h.0.mlp.c_fc.weight); --index I its flat element\n"
            "  --meshes        the token blocks valid on every mesh listed, and the largest; a mesh is\n"
            "                  comma-separated parts: tpN, sp, cpN, contiguous (the cp layout), dpN, ppN,\n"
            "                  e.g. --meshes \"tp2,sp cp2 tp2,sp,cp2\"\n");
}

/* One mesh of --meshes: "tp2,sp,cp2". 0, or 2 after naming the bad part. */
typedef struct {
    char name[64];
    int tp, sp, cp, contiguous;
} mesh_spec;
static int parse_mesh(const char *text, size_t len, mesh_spec *m) {
    *m = (mesh_spec){{0}, 1, 0, 1, 0};
    snprintf(m->name, sizeof m->name, "%.*s", (int)len, text);
    for (const char *p = text, *end = text + len; p < end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t n = comma ? (size_t)(comma - p) : (size_t)(end - p);
        char part[32];
        snprintf(part, sizeof part, "%.*s", (int)n, p);
        int v = 0, *dst = NULL, k = 0;
        if (!strcmp(part, "sp")) m->sp = v = 1;
        else if (!strcmp(part, "contiguous")) m->contiguous = v = 1;
        else if (sscanf(part, "tp%d%n", &v, &k) == 1 && k == (int)n) dst = &m->tp;
        else if (sscanf(part, "cp%d%n", &v, &k) == 1 && k == (int)n) dst = &m->cp;
        else if ((sscanf(part, "dp%d%n", &v, &k) == 1 || sscanf(part, "pp%d%n", &v, &k) == 1) && k == (int)n) v = 1;
        else v = -1;
        if (dst) *dst = v;
        if (v < 1 || v > 1024) {
            fprintf(stderr,
                    "minidc explain exact: --meshes: '%s' in mesh '%s' is not tpN, sp, cpN, contiguous, dpN or "
                    "ppN (N in 1..1024)\n",
                    part, m->name);
            return 2;
        }
        p += n + (comma ? 1 : 0);
    }
    if (m->sp && m->tp < 2) {
        fprintf(stderr, "minidc explain exact: --meshes: mesh '%s': sp needs tp2 or more\n", m->name);
        return 2;
    }
    return 0;
}

static int gcd_int(int a, int b) { return b ? gcd_int(b, a % b) : a; }

/* --meshes: per mesh the positions a block must divide; the blocks that fit all of them. */
static int mesh_blocks(const char *meshes, int T, const char *config) {
    int g = T, n = 0, dflt = mdc_exact_default_block(T), bad = 0;
    printf("exact mode's token block for --seq %d (config %s): it must divide, on each mesh, the positions each "
           "rank holds of a sequence and, with cp, one chunk of the layout\n",
           T, config);
    for (const char *p = meshes; *p;) {
        p += strspn(p, " \t");
        size_t len = strcspn(p, " \t");
        if (!len) break;
        mesh_spec m;
        if (parse_mesh(p, len, &m)) return 2;
        int piece = mdc_exact_piece(T, m.cp, m.contiguous, m.tp, m.sp);
        if (!piece) {
            printf("  %-24s does not split --seq %d evenly (the run refuses it)\n", m.name, T);
            bad = 1;
        } else {
            printf("  %-24s %4d positions%s\n", m.name, piece,
                   piece % dflt ? "  (the default block does not fit)" : "");
            g = gcd_int(g, piece);
        }
        n++, p += len;
    }
    if (!n) {
        fprintf(stderr, "minidc explain exact: --meshes needs at least one mesh, e.g. \"tp2,sp cp2\"\n");
        return 2;
    }
    int best = g;
    while (best > MDC_EXACT_DEFAULT_BLOCK) { /* the largest divisor of g up to the default's cap */
        int d = best - 1;
        while (g % d) d--;
        best = d;
    }
    printf("valid blocks: the divisors of %d; the largest up to %d: --exact-block %d\n", g, MDC_EXACT_DEFAULT_BLOCK,
           best);
    printf("the default for --seq %d is %d: %s\n", T, dflt,
           bad        ? "some mesh above cannot run at this --seq"
           : g % dflt ? "it does not fit every mesh above: give the same --exact-block on every run you compare"
                      : "it fits every mesh above");
    return bad;
}

/* Sequences [a, b) as text. */
static const char *seqs(char *buf, size_t n, int a, int b) {
    if (b - a == 1) snprintf(buf, n, "sequence %d", a);
    else snprintf(buf, n, "sequences %d-%d", a, b - 1);
    return buf;
}

static void default_order(const mdc_gpt2_config *c, const mdc_param_tensor *t, size_t index, int B, int T, int dp,
                          int K) {
    char s1[48];
    int rows = B / dp / K;
    printf("\ndefault mode, dp %d x %d micro-batch(es) of %d sequence(s):\n", dp, K, rows);
    for (int r = 0; r < dp && r < 4; r++) {
        printf("  rank %d:", r);
        for (int k = 0; k < K; k++) {
            int a = (r * K + k) * rows;
            printf("%s %s: one sgemm over %d tokens", k ? " +" : "", seqs(s1, sizeof s1, a, a + rows), rows * T);
        }
        printf("%s\n", K > 1 ? " (added in turn)" : "");
    }
    if (dp > 4) printf("  ... (ranks 4-%d alike)\n", dp - 1);
    if (dp == 1) {
        printf("  one rank: no reduction\n");
        return;
    }
    /* the whole local gradient as one bucket: the element's place in it picks the ring's chunk */
    size_t psi = mdc_gpt2_param_floats(c), elem = t->offset + index, count = (psi + (size_t)dp - 1) / dp * dp;
    mdc_schedule s;
    char e[512];
    if (mdc_schedule_build(&s, MDC_COLL_ALLREDUCE, "ring", dp, count, NULL, MDC_F32, MDC_SUM, 0, 0, 8) ||
        mdc_schedule_expr(&s, 0, elem, e, sizeof e)) {
        printf("  (the ring's order could not be built: %s)\n", mdc_detail());
        return;
    }
    mdc_schedule_free(&s);
    printf("  then the ring allreduce over the %d ranks (x_r = rank r's sum; the gradient as one bucket of %zu floats, "
           "the element at %zu):\n    g = %s\n",
           dp, count, elem, e);
}

int mdc_explain_exact(int argc, char **argv) {
    const char *config = "tiny", *tensor = "h.0.mlp.c_fc.weight";
    int B = 0, T = 0, K = 1, blk = 0, exact = 1, ndp = 0, dps[8];
    const char *meshes = NULL;
    long long index = 0;
    for (int i = 1; i < argc; i += 2) { /* an option and its value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        if (!strcmp(a, "--config") && v) config = v;
        else if (!strcmp(a, "--tensor") && v) tensor = v;
        else if (!strcmp(a, "--meshes") && v) meshes = v;
        else if (!strcmp(a, "--batch")) ok = mdc_arg_int("explain exact", a, v, 1, 1 << 20, &B);
        else if (!strcmp(a, "--seq")) ok = mdc_arg_int("explain exact", a, v, 1, 1 << 20, &T);
        else if (!strcmp(a, "--accum")) ok = mdc_arg_int("explain exact", a, v, 1, 1 << 20, &K);
        else if (!strcmp(a, "--exact-block")) ok = mdc_arg_int("explain exact", a, v, 1, 1 << 20, &blk);
        else if (!strcmp(a, "--index")) ok = mdc_arg_ll("explain exact", a, v, 0, 1LL << 40, &index);
        else if (!strcmp(a, "--dp") && ndp < 8) ok = mdc_arg_int("explain exact", a, v, 1, 1024, &dps[ndp++]);
        else {
            fprintf(stderr, "minidc explain exact: unknown option or missing value: %s\n", a);
            return usage(stderr), 2;
        }
        if (!ok) return 2;
    }
    mdc_gpt2_config c;
    int defB;
    mdc_status st = mdc_gpt2_config_named(config, &c, &defB);
    if (!st) st = mdc_gpt2_config_check(&c);
    if (!B) B = defB;
    if (!T) T = c.T;
    if (!ndp) dps[0] = 2, dps[1] = 3, ndp = 2;
    if (!st && T > c.T) st = mdc_fail(MDC_ERR_INVALID, "--seq %d must be in [1, %d] (the context)", T, c.T);
    if (!st && meshes) return mesh_blocks(meshes, T, config);
    for (int k = 0; !st && k < ndp; k++)
        if (B % (dps[k] * K))
            st = mdc_fail(MDC_ERR_INVALID, "--batch %d is not divisible by --dp %d x --accum %d", B, dps[k], K);
    if (!st) st = mdc_exact_options(&exact, &blk, &c, T, 1, 1, 0);
    int ti = st ? -1 : mdc_gpt2_tensor_find(&c, tensor);
    mdc_param_tensor t;
    if (!st && ti < 0) st = mdc_fail(MDC_ERR_INVALID, "--tensor %s: no such tensor in config %s", tensor, config);
    if (!st) st = mdc_gpt2_tensor_at(&c, ti, &t);
    if (!st && ti < 2)
        st = mdc_fail(MDC_ERR_INVALID,
                      "--tensor %s: the embeddings' rows sum token by token; pick a weight, bias or "
                      "LayerNorm",
                      tensor);
    if (!st && (size_t)index >= t.numel)
        st = mdc_fail(MDC_ERR_INVALID, "--index %lld: %s has %zu elements", index, tensor, t.numel);
    if (st) {
        fprintf(stderr, "minidc explain exact: %s\n", mdc_detail());
        return 2;
    }
    printf("%s[%lld]: its gradient is a sum over the global batch's %d x %d = %d tokens (config %s)\n", tensor, index,
           B, T, B * T, config);
    for (int k = 0; k < ndp; k++) default_order(&c, &t, (size_t)index, B, T, dps[k], K);
    printf("  -> the meshes group and order the %d terms differently, so the float results may differ in the last "
           "bits; neither is wrong\n",
           B * T);
    int per = T / blk, nb = B * per;
    printf("\nexact mode, blocks of %d positions (--exact-block %d): %d canonical blocks, block j = sequence j / %d, "
           "positions %d (j %% %d) .. +%d; the same on every mesh\n",
           blk, blk, nb, per, blk, per, blk - 1);
    printf("  each block's partial p_j: one float chain over its %d tokens in position order (kernels/exact_blocks.c), "
           "whichever rank computes it\n",
           blk);
    for (int k = 0; k < ndp; k++) {
        int rows = B / dps[k] / K;
        printf("  dp %d:", dps[k]);
        for (int r = 0; r < dps[k] && r < 4; r++)
            printf("%s rank %d blocks %d-%d", r ? "," : "", r, r * K * rows * per, (r + 1) * K * rows * per - 1);
        printf("%s (in %d micro-batch(es) each)\n", dps[k] > 4 ? ", ..." : "", K);
    }
    printf("  the partials are added exactly (a double while the sum fits in 53 bits, else an 80-byte accumulator), "
           "summed over ranks as MDC_EXACT accumulators (any order, any algorithm: the same integer sum), and "
           "rounded to float once:\n    g = round(p_0 + p_1 + ... + p_%d), the same bits on every mesh and in serial\n",
           nb - 1);
    printf("  a row-parallel product's element (attn.c_proj, mlp.c_proj) sums over %d head blocks of %d (attention) "
           "or %d of %d (MLP) the same way, whichever tp rank holds the heads\n",
           c.H, c.C / c.H, c.H, 4 * c.C / c.H);
    return 0;
}
