/* Binomial-tree gather.
 *
 * Algorithm: ranks relative to the root (rel = (r - root) mod p). A rank first receives, at
 *   the same time, the subtrees of its children rel + d (d = 1, 2, ... below lowbit(rel); each
 *   subtree's blocks are contiguous in relative order), then sends its whole subtree to
 *   rel - lowbit(rel). The root receives into its buffer directly when root = 0, else into a
 *   scratch buffer in relative order that it rotates into place; a leaf sends its block from
 *   its send buffer, an inner rank gathers its subtree in scratch.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH gather binomial).
 * Restrictions: none (every root, in place at the root).
 * Cost: lg p alpha + (p-1)/p n beta, n = the root's full buffer. */
#include "coll_internal.h"

static size_t span_bytes(const size_t *off, const size_t *len, int a, int b) {
    return off[b - 1] + len[b - 1] - off[a];
}

mdc_status mdc_i_binomial_gather(mdc_group *g, int root, void *base, const size_t *off,
                                 const size_t *len, int tag) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    char *b = base;
    mdc_request *reqs[32];
    int n = 0;
    mdc_status st = MDC_OK;
    int mask = 1;
    for (; mask < p && !(rel & mask); mask <<= 1) {
        int child = rel + mask;
        if (child >= p) continue;
        int end = child + mask < p ? child + mask : p;
        size_t bytes = span_bytes(off, len, child, end);
        if (!bytes) continue;
        st = mdc_irecv(b + off[child] - off[rel], bytes, mdc_i_mod(child + root, p), tag, g, &reqs[n]);
        if (st) break;
        n++;
    }
    mdc_status st2 = mdc_waitall(reqs, n);
    if (st) return st;
    if (st2) return st2;
    if (rel) {
        int end = rel + mask < p ? rel + mask : p;
        size_t bytes = span_bytes(off, len, rel, end);
        if (bytes) st = mdc_send(b, bytes, mdc_i_mod(rel - mask + root, p), tag, g);
    }
    return st;
}

mdc_status mdc_gather_binomial(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t,
                               int root, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    size_t bs = count * mdc_dtype_size(t);
    if (bs == 0) return MDC_OK;
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "gather binomial: offsets");
    size_t *len = off + p;
    for (int i = 0; i < p; i++) {
        off[i] = (size_t)i * bs;
        len[i] = bs;
    }
    int sub = rel ? (rel & -rel) : p; /* subtree size (clipped below) */
    if (rel + sub > p) sub = p - rel;
    char *base = NULL;
    mdc_status st = MDC_OK;
    int inplace = me == root && (sendbuf == MDC_IN_PLACE || sendbuf == recvbuf);
    const void *mine = inplace ? (char *)recvbuf + (size_t)root * bs : sendbuf;
    if (me == root && root == 0) {
        base = recvbuf;
    } else if (sub == 1) { /* a leaf sends its own block from where it is */
        base = (char *)mine;
    } else if ((st = mdc_i_alloc((void **)&base, (size_t)sub * bs, "gather binomial"))) {
        goto done;
    }
    if (mine != base) memcpy(base, mine, bs);
    st = mdc_i_binomial_gather(g, root, base, off, len, MDC_I_TAG(MDC_COLL_GATHER, 0));
    if (!st && me == root && root != 0) { /* relative order -> rank order */
        memcpy((char *)recvbuf + (size_t)root * bs, base, (size_t)(p - root) * bs);
        memcpy(recvbuf, base + (size_t)(p - root) * bs, (size_t)root * bs);
    }
done:
    if (base != recvbuf && base != mine) mdc_i_free(base);
    free(off);
    return st;
}
