/* Bruck allgather (per-rank counts).
 *
 * Algorithm: rank r keeps the blocks in rotated order (position j holds block (r + j) mod p),
 *   starting with its own at 0. At distance d = 1, 2, 4, ... it sends its first min(d, p - d)
 *   blocks to r - d and receives as many from r + d into positions d, d+1, ...; after
 *   ceil(lg p) steps it has every block and un-rotates them into place.
 * Source: Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005 (MPICH allgather bruck).
 * Restrictions: none (any p, not only powers of two); one scratch buffer of the full output.
 * Cost: ceil(lg p) alpha + (p-1)/p n beta + (p+1)/p n c: local copies of the own block into
 *   the rotated scratch and of every block out of it. */
#include "coll_internal.h"

mdc_status mdc_allgather_bruck(const void *sendbuf, void *recvbuf, const size_t *counts,
                               const size_t *displs, mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    size_t *pos = malloc(sizeof(size_t) * (size_t)(2 * p + 1));
    if (!pos) return mdc_fail(MDC_ERR_OOM_HOST, "allgather bruck: offsets");
    size_t *dsp = pos + p + 1, o = 0;
    for (int i = 0; i < p; i++) {
        dsp[i] = (displs ? displs[i] : o) * esz;
        o += counts[i];
    }
    pos[0] = 0;
    for (int j = 0; j < p; j++) pos[j + 1] = pos[j] + counts[(me + j) % p] * esz;
    size_t total = pos[p];
    char *rb = NULL;
    mdc_status st = MDC_OK;
    if (total == 0 || p == 1) {
        if (p == 1 && sendbuf != MDC_IN_PLACE && sendbuf != recvbuf && total)
            memmove((char *)recvbuf + dsp[0], sendbuf, total);
        goto done;
    }
    if ((st = mdc_i_alloc((void **)&rb, total, "allgather bruck"))) goto done;
    const char *mine = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf ? (char *)recvbuf + dsp[me] : sendbuf;
    if (pos[1]) memcpy(rb, mine, pos[1]);
    for (int d = 1; d < p && !st; d <<= 1) {
        int cnt = d < p - d ? d : p - d;
        st = mdc_i_xchg(g, rb, pos[cnt], mdc_i_mod(me - d, p), rb + pos[d], pos[d + cnt] - pos[d],
                        (me + d) % p, MDC_I_TAG(MDC_COLL_ALLGATHER, 16));
    }
    if (!st)
        for (int j = 0; j < p; j++) {
            int b = (me + j) % p;
            if (pos[j + 1] > pos[j]) memcpy((char *)recvbuf + dsp[b], rb + pos[j], pos[j + 1] - pos[j]);
        }
done:
    mdc_i_free(rb);
    free(pos);
    return st;
}
