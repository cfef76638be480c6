/* Binomial-tree scatter.
 *
 * Algorithm: ranks relative to the root (rel = (r - root) mod p). A rank receives its subtree's
 *   blocks (contiguous in relative order) from rel - lowbit(rel), then sends each child rel + d
 *   (d = lowbit(rel)/2, ..., 1; the root: from the largest power of two below p) that child's
 *   subtree, all at once, and keeps its own block. A root other than 0 first rotates its buffer
 *   into relative order; a leaf receives straight into its receive buffer, an inner rank into
 *   scratch.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH scatter binomial).
 * Restrictions: none (every root; in place at the root: recvbuf == MDC_IN_PLACE or sendbuf).
 * Cost: lg p alpha + (p-1)/p n beta, n = the root's full buffer. */
#include "coll_internal.h"

mdc_status mdc_i_binomial_scatter(mdc_group *g, int root, void *base, const size_t *off,
                                  const size_t *len, int tag) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    char *b = base;
    int top = mdc_i_pow2_floor(p);
    if (top < p) top *= 2;
    int mask = rel ? (rel & -rel) : top;
    mdc_status st = MDC_OK;
    if (rel) {
        int end = rel + mask < p ? rel + mask : p;
        size_t bytes = off[end - 1] + len[end - 1] - off[rel];
        if (bytes) st = mdc_recv(b, bytes, mdc_i_mod(rel - mask + root, p), tag, g);
        if (st) return st;
    }
    mdc_request *reqs[32];
    int n = 0;
    for (int d = mask / 2; d >= 1; d /= 2) {
        int child = rel + d;
        if (child >= p) continue;
        int end = child + d < p ? child + d : p;
        size_t bytes = off[end - 1] + len[end - 1] - off[child];
        if (!bytes) continue;
        st = mdc_isend(b + off[child] - off[rel], bytes, mdc_i_mod(child + root, p), tag, g, &reqs[n]);
        if (st) break;
        n++;
    }
    mdc_status st2 = mdc_waitall(reqs, n);
    return st ? st : st2;
}

mdc_status mdc_scatter_binomial(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t,
                                int root, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    size_t bs = count * mdc_dtype_size(t);
    if (bs == 0) return MDC_OK;
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "scatter binomial: offsets");
    size_t *len = off + p;
    for (int i = 0; i < p; i++) {
        off[i] = (size_t)i * bs;
        len[i] = bs;
    }
    int sub = rel ? (rel & -rel) : p;
    if (rel + sub > p) sub = p - rel;
    char *base = NULL;
    mdc_status st = MDC_OK;
    int inplace = me == root && (recvbuf == MDC_IN_PLACE || sendbuf == recvbuf);
    if (me == root && root == 0) {
        base = (char *)sendbuf;
    } else if (sub == 1 && me != root) { /* a leaf receives its block where it goes */
        base = recvbuf;
    } else {
        if ((st = mdc_i_alloc((void **)&base, (size_t)sub * bs, "scatter binomial"))) goto done;
        if (me == root) { /* rank order -> relative order */
            memcpy(base, (const char *)sendbuf + (size_t)root * bs, (size_t)(p - root) * bs);
            memcpy(base + (size_t)(p - root) * bs, sendbuf, (size_t)root * bs);
        }
    }
    st = mdc_i_binomial_scatter(g, root, base, off, len, MDC_I_TAG(MDC_COLL_SCATTER, 0));
    if (!st && !inplace && base != recvbuf) memcpy(recvbuf, base, bs);
done:
    if (base != sendbuf && base != recvbuf) mdc_i_free(base);
    free(off);
    return st;
}
