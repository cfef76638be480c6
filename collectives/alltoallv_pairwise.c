/* Pairwise-exchange all-to-all with per-pair counts.
 *
 * Algorithm: copy the own block; then p - 1 steps: at step s rank r sends sendcounts[r+s]
 *   elements from sdispls[r+s] to r + s and receives recvcounts[r-s] elements from r - s at
 *   rdispls[r-s]; empty messages are skipped (both ends know the count). In place (MPI's
 *   meaning: recvcounts/rdispls describe both), the blocks for the other ranks are first
 *   copied to scratch, packed (each is overwritten by an arriving block, possibly before it
 *   is sent); the own block stays where it is.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH alltoallv pairwise).
 * Restrictions: counts must agree pairwise (sendcounts[j] on i == recvcounts[i] on j), else
 *   the transport reports a mismatch, or a skipped message ends in a timeout.
 * Cost: (p-1) a + (p-1)/p n b + n/p c, n = one rank's send buffer (the pairwise alltoall's). */
#include "schedule_build.h"

mdc_status mdc_alltoallv_pairwise(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                                  const size_t *recvcounts, const size_t *rdispls, mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    char *tmp = NULL, *out = recvbuf;
    const char *src = sendbuf;
    size_t *toff = NULL; /* in place: where block j (j != me) waits in tmp, bytes */
    int inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
    if (inplace) {
        if (p == 1) return MDC_OK; /* the own block is already in place */
        sendcounts = recvcounts;
        sdispls = rdispls;
        size_t total = 0;
        for (int j = 0; j < p; j++)
            if (j != me) total += recvcounts[j] * esz;
        toff = malloc(sizeof *toff * (size_t)p);
        if (!toff) return mdc_fail(MDC_ERR_OOM_HOST, "alltoallv pairwise: offsets");
        mdc_status st = mdc_i_alloc((void **)&tmp, total, "alltoallv pairwise");
        if (st) {
            free(toff);
            return st;
        }
        /* Only the blocks for the other ranks, packed: the own block stays where it is. */
        size_t o = 0;
        for (int j = 0; j < p; j++) {
            if (j == me) continue;
            toff[j] = o;
            if (recvcounts[j]) memcpy(tmp + o, out + rdispls[j] * esz, recvcounts[j] * esz);
            o += recvcounts[j] * esz;
        }
    }
    size_t mine = recvcounts[me] < sendcounts[me] ? recvcounts[me] : sendcounts[me];
    if (!inplace && mine && out + rdispls[me] * esz != src + sdispls[me] * esz)
        memmove(out + rdispls[me] * esz, src + sdispls[me] * esz, mine * esz);
    mdc_status st = MDC_OK;
    for (int s = 1; s < p && !st; s++) {
        int dst = (me + s) % p, from = mdc_i_mod(me - s, p);
        const char *sb = inplace ? tmp + toff[dst] : src + sdispls[dst] * esz;
        st = mdc_i_xchg(g, sb, sendcounts[dst] * esz, dst, out + rdispls[from] * esz, recvcounts[from] * esz, from,
                        MDC_I_TAG(MDC_COLL_ALLTOALLV, 0));
    }
    free(toff);
    mdc_i_free(tmp);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

/* The messages per step and the cost are the all-to-all's (alltoall_pairwise.c): counts[i] is
 * what every rank sends to rank i. */
const mdc_i_algo mdc_i_algo_alltoallv_pairwise = {
    .info = {"pairwise", "mdc_alltoallv_pairwise", "p-1 steps: send to r+s, receive from r-s",
             "(p-1) a + (p-1)/p n b + n/p c"},
    .coll = MDC_COLL_ALLTOALLV,
    .cost = mdc_i_alltoall_pairwise_cost,
    .schedule = mdc_i_alltoall_pairwise_schedule,
    .run.alltoallv = mdc_alltoallv_pairwise,
};
