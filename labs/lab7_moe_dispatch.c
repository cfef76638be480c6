/* Lab 7: the all-to-all dispatch and combine of expert parallelism (docs/course/lab7-moe-dispatch.md).
 *
 * A MoE layer has E experts spread over the p ranks of group g: rank r owns the El = E/p experts
 * [r El, (r+1) El) (E is a multiple of p). Each rank has T tokens of d floats, x (T x d, row-major),
 * and for each token t the k experts its router chose, expert[t k + s] for slot s = 0..k-1 (k
 * distinct ids), with their gates gate[t k + s]. A token's row must travel to its experts' ranks
 * and the experts' outputs back.
 *
 * lab_moe_dispatch:
 *   1. count: send_counts[j] = the slots (t, s) with expert j, for j = 0..E-1. Rank q's El counts
 *      are send_counts[q El .. (q+1) El), so ONE mdc_alltoall of El MDC_I32 per rank gives
 *      recv_counts (p x El): recv_counts[q El + j] = the rows rank q sends to your local expert j
 *      (global id me El + j);
 *   2. pack the rows by expert (expert 0's tokens, then expert 1's, ..., each in token order):
 *      the rows for rank q are then one contiguous block, and ONE mdc_alltoallv (MDC_F32; counts
 *      and displacements in floats: rows x d) sends every rank its block. The block for your own
 *      experts never leaves the rank (the all-to-all copies it).
 *   The rows land in recv (room for cap rows) in the canonical order the grade checks row by row:
 *   by source rank q, then local expert j, then the source's token order. *nrecv = their number.
 * lab_moe_combine: y holds the experts' outputs, one row of d per received row, in that same
 *   order, and recv_counts is dispatch's. Send each row back to its source with the reverse
 *   mdc_alltoallv (the send and receive counts swap roles), then, for every token,
 *     out[t] = gate[t k + 0] y(t, 0) + gate[t k + 1] y(t, 1) + ...   (added in slot order)
 *   where y(t, s) is the row that came back for slot s. Recompute the send layout from expert:
 *   combine must not rely on anything dispatch left behind.
 *
 * Cost (the grade traces it, with mdc_alltoall forced to its pairwise algorithm): dispatch sends
 * (p-1) El 4 bytes of counts + (rows for other ranks) d 4 bytes; combine sends (rows received
 * from other ranks) d 4 bytes. A row for this rank's own experts costs nothing.
 *
 * What you have (minidc/collectives.h):
 *   mdc_group_rank(g), mdc_group_size(g)
 *   mdc_alltoall(sendbuf, recvbuf, count, MDC_I32, g)  -- count ints to and from every rank
 *   mdc_alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, MDC_F32, g)
 *       -- size_t arrays of p: what goes to / comes from each rank, in elements, and where
 *   malloc / free for scratch; return MDC_OK, the status a call gave you, or
 *   mdc_fail(MDC_ERR_INVALID, "why", ...) (e.g. more than cap rows would arrive).
 *
 * Grade it: make lab N=7 */
#include <stdlib.h>
#include <string.h>

#include "minidc/collectives.h"

mdc_status lab_moe_dispatch(float *recv, int *recv_counts, int *nrecv, int cap, const float *x, const int *expert,
                            int T, int d, int k, int E, mdc_group *g);
mdc_status lab_moe_combine(float *out, const float *y, const int *recv_counts, const float *gate, const int *expert,
                           int T, int d, int k, int E, mdc_group *g);

/* recv (cap x d): the rows for this rank's experts, by source, local expert, token;
 * recv_counts (p x El); *nrecv: the rows received */
mdc_status lab_moe_dispatch(float *recv, int *recv_counts, int *nrecv, int cap, const float *x, const int *expert,
                            int T, int d, int k, int E, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), El = E / p;
    (void)recv, (void)recv_counts, (void)nrecv, (void)cap, (void)x, (void)expert, (void)T, (void)d, (void)k;
    (void)me, (void)El;

    /* ---- your code: the counts' all-to-all, then the rows' all-to-allv ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 7: lab_moe_dispatch is not written yet (labs/lab7_moe_dispatch.c)");
}

/* out (T x d) = per token, the gate-weighted sum of its k rows back from the experts (y, in
 * dispatch's receive order) */
mdc_status lab_moe_combine(float *out, const float *y, const int *recv_counts, const float *gate, const int *expert,
                           int T, int d, int k, int E, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), El = E / p;
    (void)out, (void)y, (void)recv_counts, (void)gate, (void)expert, (void)T, (void)d, (void)k;
    (void)me, (void)El;

    /* ---- your code: the reverse all-to-allv, then the weighted sum in slot order ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 7: lab_moe_combine is not written yet (labs/lab7_moe_dispatch.c)");
}
