/* Allreduce as a binomial reduce to rank 0 followed by a binomial broadcast.
 *
 * Algorithm: binomial reduce (mdc_reduce_binomial's tree: at distance 1, 2, 4, ... rank r
 *   receives r + d's partial and computes own OP child, or sends to r - d), accumulating in
 *   recvbuf on every rank; then rank 0 broadcasts the result down the binomial tree.
 * Source: the textbook composition (MPICH's fallback for user ops).
 * Restrictions: none; 2 lg p latency and the whole vector on every step.
 * Cost: 2 lg p (alpha + n beta) + lg p n gamma. */
#include "coll_internal.h"

mdc_status mdc_allreduce_reduce_bcast(const void *sendbuf, void *recvbuf, size_t count,
                                      mdc_dtype t, mdc_op op, mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    int p = mdc_group_size(g);
    if (count == 0) return MDC_OK;
    mdc_status st = mdc_i_binomial_reduce(g, 0, sendbuf, recvbuf, count, t, op,
                                          MDC_I_TAG(MDC_COLL_ALLREDUCE, 24));
    if (!st) st = mdc_bcast_binomial(recvbuf, count, t, 0, g);
    if (!st) mdc_reduce_finish(recvbuf, count, t, op, p);
    return st;
}
