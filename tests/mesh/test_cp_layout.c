/* Context parallelism's layouts (ref/parallel/cp/cp_pairs.c) on c ranks: each rank's global
 * positions are ascending, its chunks the layout's (zig-zag: r and 2c-1-r of 2c chunks;
 * contiguous: r of c), and over the ranks they cover [0, T) once; mdc_cp_slice takes exactly
 * those tokens; the attention work per rank (the pairs formula) is balanced for zig-zag and
 * Ulysses and has max/mean (2c-1)/c for contiguous chunks; every algorithm's bytes formula is
 * positive with c > 1; and the bad configurations are refused naming the option. */
#include "testutil.h"

#include "minidc/cp.h"
#include "minidc/runtime.h"

static void check_layout(mdc_runtime *rt, const char *layout, const char *algo, int T) {
    int c = rt->size, r = rt->rank, zig = !strcmp(layout, "zigzag"), Tc = T / c, B = 2, Hl = 2 * c, hs = 4;
    mdc_cp *cp;
    MDC_CHECK(mdc_cp_create(&cp, rt->world, rt->dev, T, B, Hl, Hl, hs, layout, algo));
    const mdc_gpt2_cp *mc = mdc_cp_model(cp);
    TU_CHECK(mc->c == c && mc->T == T, "%s: c %d T %d", layout, mc->c, mc->T);
    int L = zig ? T / (2 * c) : Tc, bad = 0;
    for (int i = 0; i < Tc && !bad; i++) {
        int a = i / L, chunk = a == 0 ? r : 2 * c - 1 - r; /* the layout's chunk of local position i */
        int want = chunk * L + i % L;
        if (mc->pos[i] != want || (i && mc->pos[i] <= mc->pos[i - 1])) bad = 1;
        TU_CHECK(!bad, "%s c %d rank %d: local position %d at global %d, want %d", layout, c, r, i, mc->pos[i], want);
    }
    /* over the ranks: every global position once */
    int *all = malloc(sizeof(int) * (size_t)T), *seen = calloc((size_t)T, sizeof(int));
    MDC_CHECK(mdc_allgather(mc->pos, all, (size_t)Tc, MDC_I32, rt->world));
    for (int i = 0; i < T; i++)
        if (all[i] >= 0 && all[i] < T) seen[all[i]]++;
    for (int i = 0; i < T; i++)
        TU_CHECK(seen[i] == 1, "%s c %d: global position %d held %d times", layout, c, i, seen[i]);
    /* the slice: rank r's tokens are those at its positions */
    int *tok = malloc(sizeof(int) * (size_t)B * T), *mine = malloc(sizeof(int) * (size_t)B * Tc);
    for (int i = 0; i < B * T; i++) tok[i] = 1000 * (i / T) + i % T;
    mdc_cp_slice(cp, mine, tok, B);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tc; i++)
            TU_CHECK(mine[b * Tc + i] == 1000 * b + mc->pos[i], "%s: slice row %d position %d", layout, b, i);
    /* the work formula per rank: zig-zag and Ulysses balanced, contiguous (2c-1)/c */
    double f[4], *work = malloc(sizeof(double) * (size_t)c);
    mdc_cp_figures(cp, f);
    MDC_CHECK(mdc_allgather(&f[1], work, 1, MDC_F64, rt->world));
    double mx = 0, sum = 0;
    for (int q = 0; q < c; q++) mx = work[q] > mx ? work[q] : mx, sum += work[q];
    /* contiguous: chunk q's rows see q L + (l+1) keys, L^2 q + L(L+1)/2 pairs, so max/mean is
     * ((c-1) L + (L+1)/2) / ((c-1) L/2 + (L+1)/2), (2c-1)/c as L grows; zig-zag's two chunks
     * q and 2c-1-q give every rank L^2 (2c-1) + L(L+1) */
    double ratio = mx / (sum / c), want = 1.0;
    if (!zig && strcmp(algo, "ulysses"))
        want = ((c - 1) * (double)L + 0.5 * (L + 1)) / ((c - 1) * 0.5 * L + 0.5 * (L + 1));
    TU_NEAR(ratio, want, 1e-12);
    TU_CHECK(c == 1 || f[3] > 0, "%s %s: bytes formula %g", layout, algo, f[3]);
    free(all), free(seen), free(tok), free(mine), free(work);
    mdc_cp_free(cp);
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    int c = rt.size, T = 8 * c;
    static const char *algos[] = {"ring", "allgather", "ulysses"};
    for (int k = 0; k < 3; k++) {
        check_layout(&rt, "zigzag", algos[k], T);
        check_layout(&rt, "contiguous", algos[k], T);
    }
    TU_STATUS(mdc_cp_check(c, T, 2 * c, 2 * c, "diagonal", "ring"), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "--cp-layout");
    TU_STATUS(mdc_cp_check(c, T, 2 * c, 2 * c, "zigzag", "tree"), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "--cp-algo tree");
    if (c > 1) {
        TU_STATUS(mdc_cp_check(c, 2 * c + 1, 2 * c, 2 * c, "zigzag", "ring"), MDC_ERR_INVALID);
        TU_CONTAINS(mdc_detail(), "--seq");
        TU_STATUS(mdc_cp_check(c, T, 2 * c + 1, 2 * c + 1, "zigzag", "ulysses"), MDC_ERR_INVALID);
        TU_CONTAINS(mdc_detail(), "ulysses");
    }
    int rc = tu_finish("test_cp_layout");
    mdc_runtime_finalize(&rt);
    return rc;
}
