/* Dissemination barrier.
 *
 * Algorithm: ceil(lg p) rounds; in round k rank r sends an empty message to r + 2^k and waits
 *   for one from r - 2^k. After the last round every rank has heard, directly or through a
 *   chain, from every other rank, so none leaves before all have entered.
 * Source: Hensgen, Finkel & Manber 1988; MPICH barrier (dissemination).
 * Restrictions: none (any p).
 * Cost: ceil(lg p) alpha. */
#include "coll_internal.h"

mdc_status mdc_barrier_dissemination(mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    char s = 0, r = 0;
    int k = 0;
    for (int d = 1; d < p; d <<= 1, k++) {
        mdc_status st = mdc_sendrecv(&s, 0, (me + d) % p, &r, 0, mdc_i_mod(me - d, p),
                                     MDC_I_TAG(MDC_COLL_BARRIER, k), g);
        if (st) return st;
    }
    return MDC_OK;
}
