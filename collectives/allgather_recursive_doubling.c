/* Recursive-doubling allgather (per-rank counts).
 *
 * Algorithm: fold a non-power-of-two group onto p2 ranks (even rank 2i gives its block to
 *   2i+1, new rank i). Then lg p2 steps with distance 1, 2, 4, ...: new rank i exchanges all the
 *   blocks it holds (a contiguous range, doubling each step) with i XOR 2^k. Finally each odd
 *   folded rank sends the whole result to its even partner. Works on a packed copy when the
 *   displacements are not packed.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH allgather recursive doubling); the fold is
 *   Rabenseifner's.
 * Restrictions: none.
 * Cost: lg p alpha + (p-1)/p n beta; a non-power of two adds 2 alpha + n beta (+ n/p beta). */
#include "coll_internal.h"

mdc_status mdc_i_doubling_ag(mdc_group *g, int rem, int p2, int nr, void *buf, const size_t *bnd, int tag) {
    char *b = buf;
    for (int mask = 1; mask < p2; mask <<= 1) {
        int pnr = nr ^ mask, peer = mdc_i_oldrank(pnr, rem);
        int mylo = nr & ~(mask - 1), plo = pnr & ~(mask - 1);
        mdc_status st = mdc_i_xchg(g, b + bnd[mylo], bnd[mylo + mask] - bnd[mylo], peer,
                                   b + bnd[plo], bnd[plo + mask] - bnd[plo], peer, tag);
        if (st) return st;
    }
    return MDC_OK;
}

mdc_status mdc_allgather_recursive_doubling(const void *sendbuf, void *recvbuf, const size_t *counts,
                                            const size_t *displs, mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    const int tag = MDC_I_TAG(MDC_COLL_ALLGATHER, 8);
    int p2 = mdc_i_pow2_floor(p), rem = p - p2;
    size_t *off = malloc(sizeof(size_t) * (size_t)(p + p2 + 1));
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "allgather recursive doubling: offsets");
    size_t *bnd = off + p, total = 0;
    int packed = 1;
    for (int i = 0; i < p; i++) {
        off[i] = total * esz;
        if (displs && displs[i] != total) packed = 0;
        total += counts[i];
    }
    for (int i = 0; i < p2; i++) bnd[i] = off[mdc_i_first_old(i, rem)];
    bnd[p2] = total * esz;
    int inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
    const char *mine = inplace ? (char *)recvbuf + (displs ? displs[me] : off[me] / esz) * esz : sendbuf;
    char *pk = recvbuf;
    mdc_status st = MDC_OK;
    if (!packed && (st = mdc_i_alloc((void **)&pk, total * esz, "allgather recursive doubling")))
        goto done;
    if (mine != pk + off[me] && counts[me]) memmove(pk + off[me], mine, counts[me] * esz);
    if (me < 2 * rem && me % 2 == 0) {
        st = mdc_send(pk + off[me], counts[me] * esz, me + 1, tag, g);
        if (!st) st = mdc_recv(pk, total * esz, me + 1, tag + 2, g);
    } else {
        if (me < 2 * rem) st = mdc_recv(pk + off[me - 1], counts[me - 1] * esz, me - 1, tag, g);
        if (!st) st = mdc_i_doubling_ag(g, rem, p2, mdc_i_newrank(me, rem), pk, bnd, tag + 1);
        if (!st && me < 2 * rem) st = mdc_send(pk, total * esz, me - 1, tag + 2, g);
    }
    if (!st && !packed)
        for (int i = 0; i < p; i++)
            if (counts[i]) memcpy((char *)recvbuf + displs[i] * esz, pk + off[i], counts[i] * esz);
done:
    if (pk != recvbuf) mdc_i_free(pk);
    free(off);
    return st;
}
