/* The exact sum over a group of one value per element and rank, rounded once (minidc/exact.h),
 * in two passes so that the common case costs a double per element on the wire, not an
 * 80-byte accumulator:
 *   1. the values as doubles, summed by dtype MDC_EXACT_F64: each element's result is its exact
 *      sum, or NaN where some addition on the way was not exact or a rank's value needs an
 *      accumulator (a NaN going in);
 *   2. only if any rank saw a NaN: a byte per element (max over the group) marks the union of
 *      those elements, which every rank then sends as accumulators (the caller's fetch), and
 *      MDC_EXACT sums them exactly.
 * Either way each element's result is its exact sum; rounding it once gives the same bits as
 * any other order of the same additions, whatever the algorithm of either pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/collectives.h"
#include "minidc/exact.h"

double mdc_exact_reduce_bytes(size_t n, int p, int scatter, const mdc_exact_reduce_stats *s) {
    double f = (double)(p - 1) / p, b = (scatter ? f : 2 * f) * 8.0 * (double)n + 16.0 * (p - 1);
    if (s && s->map) b += 2 * f * (double)n + 2 * f * 80.0 * (double)s->padded;
    return b;
}

/* counts NULL: an allreduce of n; else a reduce-scatter of blocks of counts[q] (sum n), this
 * rank's block first in v after the first pass */
static mdc_status reduce(double *v, size_t n, const size_t *counts, float *out, mdc_exact_fetch_fn fetch, void *ctx,
                         mdc_group *g, mdc_exact_reduce_stats *stats) {
    int p = mdc_group_size(g), r = mdc_group_rank(g);
    size_t blk = counts ? counts[r] : n, base = 0;
    for (int q = 0; counts && q < r; q++) base += counts[q];
    mdc_exact_reduce_stats none;
    if (!stats) stats = &none;
    memset(stats, 0, sizeof *stats);
    mdc_status st = counts ? mdc_reduce_scatterv(MDC_IN_PLACE, v, counts, MDC_EXACT_F64, MDC_SUM, g)
                           : mdc_allreduce(MDC_IN_PLACE, v, n, MDC_EXACT_F64, MDC_SUM, g);
    if (st) return st;
    int64_t *cnt = calloc((size_t)p, sizeof *cnt); /* p slots: the ring's bytes are exactly 2(p-1)/p of them */
    if (!cnt) return mdc_fail(MDC_ERR_OOM_HOST, "exact reduction: %d counts", p);
    for (size_t i = 0; i < blk; i++) cnt[0] += v[i] != v[i];
    st = mdc_allreduce(MDC_IN_PLACE, cnt, (size_t)p, MDC_I64, MDC_SUM, g);
    int64_t nan = cnt[0];
    free(cnt);
    if (st) return st;
    for (size_t i = 0; i < blk; i++) out[i] = (float)v[i]; /* an exact double rounds once */
    if (!nan) return MDC_OK;
    uint8_t *map = calloc(n ? n : 1, 1);
    if (!map) return mdc_fail(MDC_ERR_OOM_HOST, "exact reduction: a map of %zu elements", n);
    for (size_t i = 0; i < blk; i++) map[base + i] = v[i] != v[i];
    st = mdc_allreduce(MDC_IN_PLACE, map, n, MDC_U8, MDC_MAX, g);
    size_t m = 0;
    for (size_t i = 0; !st && i < n; i++) m += map[i];
    size_t mp = (m + (size_t)p - 1) / (size_t)p * (size_t)p; /* padded with empty sums, as the counts */
    mdc_exact *acc = st ? NULL : calloc(mp ? mp : 1, sizeof *acc);
    if (!st && !acc) st = mdc_fail(MDC_ERR_OOM_HOST, "exact reduction: %zu accumulators", mp);
    for (size_t i = 0, k = 0; !st && i < n; i++)
        if (map[i]) fetch(ctx, i, &acc[k++]);
    if (!st) st = mdc_allreduce(MDC_IN_PLACE, acc, mp, MDC_EXACT, MDC_SUM, g);
    for (size_t i = 0, k = 0; !st && i < n; i++)
        if (map[i]) {
            if (i >= base && i < base + blk) out[i - base] = mdc_exact_to_f32(&acc[k]);
            k++;
        }
    stats->map = 1, stats->marked = m, stats->padded = mp;
    free(acc);
    free(map);
    return st;
}

mdc_status mdc_exact_reduce(double *v, size_t n, int scatter, float *out, mdc_exact_fetch_fn fetch, void *ctx,
                            mdc_group *g, mdc_exact_reduce_stats *stats) {
    if (!scatter) return reduce(v, n, NULL, out, fetch, ctx, g, stats);
    int p = mdc_group_size(g);
    size_t *counts = malloc((size_t)p * sizeof *counts);
    if (!counts) return mdc_fail(MDC_ERR_OOM_HOST, "exact reduction: %d counts", p);
    for (int q = 0; q < p; q++) counts[q] = n / (size_t)p;
    mdc_status st = reduce(v, n, counts, out, fetch, ctx, g, stats);
    free(counts);
    return st;
}

mdc_status mdc_exact_reduce_scatterv(double *v, const size_t *counts, float *out, mdc_exact_fetch_fn fetch, void *ctx,
                                     mdc_group *g, mdc_exact_reduce_stats *stats) {
    size_t n = 0;
    for (int q = 0; q < mdc_group_size(g); q++) n += counts[q];
    return reduce(v, n, counts, out, fetch, ctx, g, stats);
}
