/* Pairwise-exchange all-to-all with per-pair counts.
 *
 * Algorithm: copy the own block; then p - 1 steps: at step s rank r sends sendcounts[r+s]
 *   elements from sdispls[r+s] to r + s and receives recvcounts[r-s] elements from r - s at
 *   rdispls[r-s]; empty messages are skipped (both ends know the count). In place (MPI's
 *   meaning: recvcounts/rdispls describe both), the send data is first copied to scratch.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH alltoallv pairwise).
 * Restrictions: counts must agree pairwise (sendcounts[j] on i == recvcounts[i] on j), else
 *   the transport reports a mismatch, or a skipped message ends in a timeout.
 * Cost: (p-1) alpha + n beta, n = one rank's send buffer. */
#include "coll_internal.h"

mdc_status mdc_alltoallv_pairwise(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                                  void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                                  mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    char *tmp = NULL, *out = recvbuf;
    const char *src = sendbuf;
    if (sendbuf == MDC_IN_PLACE || sendbuf == recvbuf) {
        sendcounts = recvcounts;
        sdispls = rdispls;
        size_t ext = 0;
        for (int i = 0; i < p; i++)
            if (recvcounts[i] && (rdispls[i] + recvcounts[i]) * esz > ext) ext = (rdispls[i] + recvcounts[i]) * esz;
        if (p > 1) {
            mdc_status st = mdc_i_alloc((void **)&tmp, ext, "alltoallv pairwise");
            if (st) return st;
            if (ext) memcpy(tmp, recvbuf, ext);
        }
        src = p > 1 ? tmp : recvbuf;
    }
    size_t mine = recvcounts[me] < sendcounts[me] ? recvcounts[me] : sendcounts[me];
    if (mine && out + rdispls[me] * esz != src + sdispls[me] * esz)
        memmove(out + rdispls[me] * esz, src + sdispls[me] * esz, mine * esz);
    mdc_status st = MDC_OK;
    for (int s = 1; s < p && !st; s++) {
        int dst = (me + s) % p, from = mdc_i_mod(me - s, p);
        st = mdc_i_xchg(g, src + sdispls[dst] * esz, sendcounts[dst] * esz, dst,
                        out + rdispls[from] * esz, recvcounts[from] * esz, from,
                        MDC_I_TAG(MDC_COLL_ALLTOALLV, 0));
    }
    mdc_i_free(tmp);
    return st;
}
