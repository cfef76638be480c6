/* Binomial-tree broadcast.
 *
 * Algorithm: ranks relative to the root (rel = (r - root) mod p). A rank receives the whole
 *   buffer from rel - lowbit(rel), then sends it to rel + d for d = lowbit(rel)/2, ..., 2, 1
 *   (the root: the largest power of two below p down to 1), largest subtree first.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH bcast binomial).
 * Restrictions: none; every step moves the whole vector.
 * Cost: lg p (alpha + n beta). */
#include "coll_internal.h"

mdc_status mdc_bcast_binomial(void *buf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    size_t bytes = count * mdc_dtype_size(t);
    const int tag = MDC_I_TAG(MDC_COLL_BCAST, 0);
    if (p == 1 || bytes == 0) return MDC_OK;
    int top = mdc_i_pow2_floor(p);
    if (top < p) top *= 2; /* the root's children are rel + d for d < top */
    int mask = rel ? (rel & -rel) : top;
    if (rel) {
        mdc_status st = mdc_recv(buf, bytes, mdc_i_mod(rel - mask + root, p), tag, g);
        if (st) return st;
    }
    mdc_request *reqs[32];
    int n = 0;
    for (int d = mask / 2; d >= 1; d /= 2) {
        if (rel + d >= p) continue;
        mdc_status st = mdc_isend(buf, bytes, mdc_i_mod(rel + d + root, p), tag, g, &reqs[n]);
        if (st) {
            mdc_waitall(reqs, n);
            return st;
        }
        n++;
    }
    return mdc_waitall(reqs, n);
}
