/* Lab 5's reference solution (the grader's check in tests/cli/labs_cli.sh): sequence
 * parallelism's all-gather and reduce-scatter along T. One collective each on the rank-major
 * layout [p][B][T/p][C], permuted to and from (B, T, C) in one scratch buffer of B T C floats
 * (with B = 1 the two layouts are the same: no scratch, no copy). */
#include <stdlib.h>
#include <string.h>

#include "minidc/collectives.h"

mdc_status lab_sp_allgather(float *full, const float *local, int B, int T, int C, mdc_group *g);
mdc_status lab_sp_reduce_scatter(float *local, const float *partial_full, int B, int T, int C, mdc_group *g);

/* Slab (q, b), T/p C floats: at ((q B + b) T/p) C in the blocks, at (b T + q T/p) C in (B, T, C). */
static void permute(float *dst, const float *src, int p, int B, int T, int C, int to_blocks) {
    size_t Tl = (size_t)(T / p), slab = Tl * (size_t)C;
    for (int q = 0; q < p; q++)
        for (int b = 0; b < B; b++) {
            size_t blk = ((size_t)q * B + b) * slab, seq = ((size_t)b * T + q * Tl) * (size_t)C;
            if (to_blocks) memcpy(dst + blk, src + seq, slab * sizeof(float));
            else memcpy(dst + seq, src + blk, slab * sizeof(float));
        }
}

mdc_status lab_sp_allgather(float *full, const float *local, int B, int T, int C, mdc_group *g) {
    int p = mdc_group_size(g);
    size_t n = (size_t)B * T * C;
    float *blocks = B > 1 ? malloc(n * sizeof(float)) : full;
    if (!blocks) return mdc_fail(MDC_ERR_OOM_HOST, "lab 5: all-gather scratch of %zu floats", n);
    mdc_status st = mdc_allgather(local, blocks, n / (size_t)p, MDC_F32, g);
    if (!st && blocks != full) permute(full, blocks, p, B, T, C, 0);
    if (blocks != full) free(blocks);
    return st;
}

mdc_status lab_sp_reduce_scatter(float *local, const float *partial_full, int B, int T, int C, mdc_group *g) {
    int p = mdc_group_size(g);
    size_t n = (size_t)B * T * C;
    float *blocks = NULL;
    if (B > 1) {
        if (!(blocks = malloc(n * sizeof(float))))
            return mdc_fail(MDC_ERR_OOM_HOST, "lab 5: reduce-scatter scratch of %zu floats", n);
        permute(blocks, partial_full, p, B, T, C, 1);
    }
    mdc_status st = mdc_reduce_scatter(blocks ? blocks : partial_full, local, n / (size_t)p, MDC_F32, MDC_SUM, g);
    free(blocks);
    return st;
}
