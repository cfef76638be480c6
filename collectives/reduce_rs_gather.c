/* Reduce as a ring reduce-scatter followed by a binomial gather (Rabenseifner's reduce).
 *
 * Algorithm: the vector is cut into p balanced blocks; block j belongs to relative rank j
 *   (rank (root + j) mod p). A ring reduce-scatter over the ranks in relative order leaves
 *   relative rank j with block j reduced in NCCL's ring order (started by relative rank j+1,
 *   ending at j); a binomial gather brings the blocks to the root, straight into its buffer.
 * Source: Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005 (MPICH reduce
 *   reduce_scatter_gather, here with a ring reduce-scatter for any p).
 * Restrictions: none; pays off for long vectors.
 * Cost: (p - 1 + lg p) alpha + 2(p-1)/p n beta + (p-1)/p n gamma. */
#include "coll_internal.h"

mdc_status mdc_reduce_rs_gather(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t,
                                mdc_op op, int root, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    size_t esz = mdc_dtype_size(t);
    if (count == 0) return MDC_OK;
    if (sendbuf == MDC_IN_PLACE || sendbuf == recvbuf) sendbuf = recvbuf;
    size_t *off = malloc(4 * sizeof(size_t) * (size_t)p);
    int *mem = malloc(sizeof(int) * (size_t)p);
    char *base = NULL;
    mdc_status st = MDC_OK;
    if (!off || !mem) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "reduce rs_gather: offsets");
        goto done;
    }
    size_t *len = off + p, *offb = len + p, *lenb = offb + p;
    mdc_i_partition(count, p, off, len);
    for (int j = 0; j < p; j++) {
        offb[j] = off[j] * esz;
        lenb[j] = len[j] * esz;
        mem[j] = (root + j) % p;
    }
    if (rel == 0) {
        base = recvbuf;
    } else {
        int end = rel + (rel & -rel) < p ? rel + (rel & -rel) : p;
        if ((st = mdc_i_alloc((void **)&base, offb[end - 1] + lenb[end - 1] - offb[rel], "reduce rs_gather")))
            goto done;
    }
    st = mdc_i_ring_rs(g, mem, p, rel, sendbuf, NULL, base, off, len, t, op, MDC_I_TAG(MDC_COLL_REDUCE, 8));
    if (!st) st = mdc_i_binomial_gather(g, root, base, offb, lenb, MDC_I_TAG(MDC_COLL_REDUCE, 9));
    if (!st && rel == 0) mdc_reduce_finish(recvbuf, count, t, op, p);
done:
    if (base != recvbuf) mdc_i_free(base);
    free(off);
    free(mem);
    return st;
}
