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
#include "schedule_build.h"

mdc_status mdc_reduce_rs_gather(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, int root,
                                mdc_group *g) {
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

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

/* Ring reduce-scatter over the ranks in relative order (block j to rank root + j), then a
 * binomial gather of the reduced blocks to the root. */
static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    int m = mdc_i_largest_subtree(p);
    mdc_i_sched_formula(s, (double)(p - 1 + m) / p * (double)n,
                        "(p-1+m)/p n  (ring (p-1)/p n, then the gather's "
                        "largest subtree, m = %d blocks)",
                        m);
    if (!s->count) return MDC_OK;
    size_t *off;
    int *mem;
    MDC_I_TRY(mdc_i_sched_root_blocks(s, &off, &mem));
    size_t *len = off + p;
    mdc_status st = mdc_i_sched_ring_rs(s, &step, mem, p, off, len, "");
    if (!st) st = mdc_i_sched_binomial_gather(s, &step, s->root, off, len, 1, "");
    snprintf(s->note, sizeof s->note,
             "block j (balanced) belongs to rank root + j = (%d + j) mod %d; "
             "the ring runs in that order",
             s->root, p);
    free(off);
    free(mem);
    return st;
}

static double cost(const mdc_i_cost_in *x) {
    return (x->P - 1 + x->lg) * x->a + 2 * x->f * x->n * x->b + x->f * x->n * x->g;
}

const mdc_i_algo mdc_i_algo_reduce_rs_gather = {
    .info = {"rs_gather", "mdc_reduce_rs_gather", "ring reduce-scatter + binomial gather to the root (Rabenseifner)",
             "(p-1 + lg p) a + 2(p-1)/p n b + (p-1)/p n g"},
    .coll = MDC_COLL_REDUCE,
    .cost = cost,
    .schedule = schedule,
    .run.reduce = mdc_reduce_rs_gather,
};
