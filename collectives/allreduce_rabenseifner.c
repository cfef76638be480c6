/* Rabenseifner's allreduce: recursive-halving reduce-scatter + recursive-doubling allgather.
 *
 * Algorithm: fold a non-power-of-two group onto p2 ranks (even rank 2i sends its vector to 2i+1,
 *   which reduces even OP odd). The vector is cut into p2 balanced blocks; recursive halving
 *   (distance p2/2 ... 1, lower new rank OP higher) leaves new rank i with block i reduced;
 *   recursive doubling (distance 1 ... p2/2) gathers every block everywhere; odd folded ranks
 *   return the result to their even partner.
 * Source: Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005 (MPICH allreduce reduce_scatter
 *   allgather).
 * Restrictions: none.
 * Cost: 2 lg p alpha + 2(p-1)/p n beta + (p-1)/p n gamma; a non-power of two adds
 *   2 (alpha + n beta) + n gamma. */
#include "schedule_build.h"

mdc_status mdc_allreduce_rabenseifner(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op,
                                      mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t), bytes = count * esz;
    if (mdc_i_allreduce_trivial(sendbuf, recvbuf, count, t, g)) return MDC_OK;
    const int tag = MDC_I_TAG(MDC_COLL_ALLREDUCE, 16);
    int p2 = mdc_i_pow2_floor(p), rem = p - p2;
    size_t *off = malloc(sizeof(size_t) * (size_t)(4 * p2 + 2));
    char *tmp = NULL;
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "allreduce rabenseifner: offsets");
    mdc_status st = mdc_i_alloc((void **)&tmp, bytes, "allreduce rabenseifner");
    if (st) {
        free(off);
        return st;
    }
    size_t *len = off + p2, *bnd = len + p2, *bndb = bnd + p2 + 1;
    mdc_i_partition(count, p2, off, len);
    for (int i = 0; i < p2; i++) {
        bnd[i] = off[i];
        bndb[i] = off[i] * esz;
    }
    bnd[p2] = count;
    bndb[p2] = bytes;
    if (me < 2 * rem && me % 2 == 0) {
        st = mdc_i_send_to_reduce(g, sendbuf, bytes, me + 1, t, tag);
        if (!st) st = mdc_recv(recvbuf, bytes, me + 1, tag + 3, g);
        goto done;
    }
    const void *cur = sendbuf;
    if (me < 2 * rem) {
        st = mdc_i_recv_reduce(g, tmp, count, me - 1, sendbuf, recvbuf, 1, t, op, tag);
        if (st) goto done;
        cur = recvbuf;
    }
    int nr = mdc_i_newrank(me, rem);
    st = mdc_i_halving_rs(g, rem, p2, nr, cur, recvbuf, tmp, bnd, t, op, tag + 1);
    if (!st) st = mdc_i_doubling_ag(g, rem, p2, nr, recvbuf, bndb, tag + 2);
    if (!st && me < 2 * rem) st = mdc_send(recvbuf, bytes, me - 1, tag + 3, g);
done:
    if (!st) mdc_reduce_finish(recvbuf, count, t, op, p);
    mdc_i_free(tmp);
    free(off);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, p2 = mdc_i_pow2_floor(p), rem = p - p2, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    mdc_i_sched_formula(s, 2.0 * (p2 - 1) / p2 * (double)n + (rem ? (double)n : 0), "2(p2-1)/p2 n%s  (p2 = %d)",
                        rem ? " + n (unfold)" : "", p2);
    if (p == 1 || s->count == 0) return MDC_OK;
    size_t *off = malloc(sizeof(size_t) * (size_t)(3 * p2 + 1));
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t *len = off + p2, *bnd = len + p2;
    mdc_i_partition(s->count, p2, off, len);
    for (int i = 0; i < p2; i++) bnd[i] = off[i];
    bnd[p2] = s->count;
    mdc_status st = mdc_i_sched_fold_in(s, &step, rem, s->count);
    if (!st) st = mdc_i_sched_halving_rs(s, &step, rem, p2, bnd, "");
    if (!st) st = mdc_i_sched_doubling_ag(s, &step, rem, p2, bnd, 1, "");
    if (!st) st = mdc_i_sched_fold_out(s, &step, rem, s->count);
    snprintf(s->note, sizeof s->note, "the vector is cut into %d balanced blocks%s", p2,
             rem ? "; ranks fold onto a power of two first: pairs (2i, 2i+1)" : "");
    free(off);
    return st;
}

/* Halving and doubling run among p2 ranks; a non-power of two adds the fold. */
static double cost(const mdc_i_cost_in *x) {
    double f2 = (double)(x->p2 - 1) / x->p2;
    return 2 * x->lg2 * x->a + 2 * f2 * x->n * x->b + f2 * x->n * x->g +
           (x->fold ? 2 * (x->a + x->n * x->b) + x->n * x->g : 0);
}

const mdc_i_algo mdc_i_algo_allreduce_rabenseifner = {
    .info = {"rabenseifner", "mdc_allreduce_rabenseifner",
             "recursive-halving reduce-scatter + recursive-doubling allgather (fold for p != 2^k)",
             "2 lg p a + 2(p-1)/p n b + (p-1)/p n g"},
    .coll = MDC_COLL_ALLREDUCE,
    .cost = cost,
    .schedule = schedule,
    .run.allreduce = mdc_allreduce_rabenseifner,
};
