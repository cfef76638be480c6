/* Lab 5: sequence parallelism's two collectives (docs/course/lab5-sequence-parallel.md).
 *
 * Megatron's sequence parallelism keeps the residual stream of the p ranks of a tensor-parallel
 * group g split along the sequence: activations are (B, T, C) row-major, and rank r holds the
 * positions [r T/p, (r+1) T/p) of every batch row, local (B, T/p, C) (T is a multiple of p):
 *   local[b][tl][c] = X[b][r T/p + tl][c].
 * It replaces tensor parallelism's all-reduce after a row-parallel linear by a reduce-scatter
 * along the sequence, and the identity before a column-parallel linear by an all-gather. Write:
 *   lab_sp_allgather:      every rank ends with the whole full (B, T, C) from the p locals;
 *   lab_sp_reduce_scatter: partial_full (B, T, C) is this rank's partial sums; local (B, T/p, C)
 *                          gets the sum over the p ranks of its own positions.
 * The catch: with B > 1 a rank's positions are B slabs of T/p C floats, one per batch row, not
 * one block. mdc_allgather and mdc_reduce_scatter move blocks in rank order, [p][count]: run on
 * the flat (B, T, C) buffer, block r is not rank r's positions. Either pack/unpack the slabs to
 * and from the rank-major layout [p][B][T/p][C] in a scratch buffer around one collective, or
 * run one collective per batch row (row b's (T, C) slab is rank-major already), or write the
 * sends yourself.
 * The grade checks: the results bit for bit (integers: exact in any order; random floats: the
 * all-gather moves bits, the sum within p roundings) at 1 to 4 ranks with B = 1 and B > 1,
 * naming the first wrong (b, t, c) and whose position it is; each function sends
 * (p-1)/p x B T C x 4 bytes per rank (traced; the two together are one all-reduce's bytes); and
 * each holds at most one full (B, T, C) buffer of heap scratch at a time (SP is there to save
 * activation memory: a rank keeps 1/p of the stream).
 *
 * What you have (minidc/collectives.h):
 *   mdc_group_rank(g), mdc_group_size(g)
 *   mdc_allgather(send, recv, count, MDC_F32, g)               -- recv gets p blocks of count
 *                                                                 floats, block q from rank q
 *   mdc_reduce_scatter(send, recv, count, MDC_F32, MDC_SUM, g) -- send holds p blocks of count
 *                                                                 floats; recv gets block
 *                                                                 `rank`, summed over the group
 *   mdc_sendrecv / mdc_isend, mdc_irecv, mdc_waitall           -- your own messages
 *   malloc / free, memcpy; return MDC_OK, or the status a call gave you.
 *
 * Grade it: make lab N=5 */
#include <stdlib.h>
#include <string.h>

#include "minidc/collectives.h"

mdc_status lab_sp_allgather(float *full, const float *local, int B, int T, int C, mdc_group *g);
mdc_status lab_sp_reduce_scatter(float *local, const float *partial_full, int B, int T, int C, mdc_group *g);

/* full (B, T, C) on every rank from each rank's local (B, T/p, C) */
mdc_status lab_sp_allgather(float *full, const float *local, int B, int T, int C, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), Tl = T / p;
    (void)full, (void)local, (void)B, (void)C, (void)me, (void)Tl;

    /* ---- your code: one all-gather of B T/p C floats a rank, in (B, T, C) order ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 5: lab_sp_allgather is not written yet (labs/lab5_sequence_parallel.c)");
}

/* local (B, T/p, C) = this rank's positions of the sum over the group of partial_full (B, T, C) */
mdc_status lab_sp_reduce_scatter(float *local, const float *partial_full, int B, int T, int C, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), Tl = T / p;
    (void)local, (void)partial_full, (void)B, (void)C, (void)me, (void)Tl;

    /* ---- your code: one reduce-scatter, this rank's T/p positions of every batch row ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 5: lab_sp_reduce_scatter is not written yet (labs/lab5_sequence_parallel.c)");
}
