/* Recursive-doubling allreduce.
 *
 * Algorithm: fold a non-power-of-two group onto p2 ranks (the first 2*rem ranks pair up; the
 *   even one sends its vector to the odd one, which reduces even OP odd). Then lg p2 steps: new
 *   rank i exchanges its whole vector with i XOR 2^k and both compute lower OP higher, so every
 *   rank holds bit-identical partials. Finally each odd folded rank returns the result.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH allreduce recursive doubling).
 * Restrictions: none; best for short vectors (every step moves the whole vector).
 * Cost: lg p (alpha + n beta + n gamma); a non-power of two adds 2 (alpha + n beta) + n gamma. */
#include "schedule_build.h"

mdc_status mdc_allreduce_recursive_doubling(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op,
                                            mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t), bytes = count * esz;
    if (mdc_i_allreduce_trivial(sendbuf, recvbuf, count, t, g)) return MDC_OK;
    const int tag = MDC_I_TAG(MDC_COLL_ALLREDUCE, 8);
    int p2 = mdc_i_pow2_floor(p), rem = p - p2;
    char *tmp;
    mdc_status st = mdc_i_alloc((void **)&tmp, bytes, "allreduce recursive doubling");
    if (st) return st;
    if (me < 2 * rem && me % 2 == 0) {
        st = mdc_i_send_to_reduce(g, sendbuf, bytes, me + 1, t, tag);
        if (!st) st = mdc_recv(recvbuf, bytes, me + 1, tag + 2, g);
        goto done;
    }
    if (me < 2 * rem) {
        st = mdc_i_recv_reduce(g, tmp, count, me - 1, sendbuf, recvbuf, 1, t, op, tag);
        if (st) goto done;
    } else if (sendbuf != recvbuf) {
        memcpy(recvbuf, sendbuf, bytes);
    }
    int nr = mdc_i_newrank(me, rem);
    for (int mask = 1; mask < p2 && !st; mask <<= 1) {
        int pnr = nr ^ mask, peer = mdc_i_oldrank(pnr, rem);
        st = mdc_i_xchg(g, recvbuf, bytes, peer, tmp, bytes, peer, tag + 1);
        if (st) break;
        if (nr < pnr) mdc_i_reduce(g, recvbuf, recvbuf, tmp, count, t, op);
        else mdc_i_reduce(g, recvbuf, tmp, recvbuf, count, t, op);
    }
    if (!st && me < 2 * rem) st = mdc_send(recvbuf, bytes, me - 1, tag + 2, g);
done:
    if (!st) mdc_reduce_finish(recvbuf, count, t, op, p);
    mdc_i_free(tmp);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, p2 = mdc_i_pow2_floor(p), rem = p - p2, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    mdc_i_sched_formula(s, (double)n * (mdc_i_lg_ceil(p2) + (rem ? 1 : 0)), "lg p2 n%s  (p2 = %d)",
                        rem ? " + n (unfold)" : "", p2);
    if (p == 1 || s->count == 0) return MDC_OK;
    MDC_I_TRY(mdc_i_sched_fold_in(s, &step, rem, s->count));
    int k = 0;
    for (int mask = 1; mask < p2; mask <<= 1, k++) {
        mdc_i_sched_phase(s, step + k, "exchange at distance %d (new ranks)", mask);
        for (int nr = 0; nr < p2; nr++) {
            int pnr = nr ^ mask;
            MDC_I_TRY(mdc_i_sched_add(s, step + k, mdc_i_oldrank(nr, rem), mdc_i_oldrank(pnr, rem), n,
                                      pnr < nr ? MDC_SCHED_IN_OP_OWN : MDC_SCHED_OWN_OP_IN, 0, s->count,
                                      "the whole vector"));
        }
    }
    step += k;
    MDC_I_TRY(mdc_i_sched_fold_out(s, &step, rem, s->count));
    if (rem) snprintf(s->note, sizeof s->note, "%d ranks fold onto %d: pairs (2i, 2i+1), i < %d", p, p2, rem);
    return MDC_OK;
}

/* A non-power of two adds the fold: the vector in, the result back. */
static double cost(const mdc_i_cost_in *x) {
    return x->lg2 * (x->a + x->n * x->b + x->n * x->g) + (x->fold ? 2 * (x->a + x->n * x->b) + x->n * x->g : 0);
}

const mdc_i_algo mdc_i_algo_allreduce_recursive_doubling = {
    .info = {"recursive_doubling", "mdc_allreduce_recursive_doubling",
             "lg p exchanges of the whole vector with rank XOR 2^k (fold for p != 2^k)", "lg p (a + n b + n g)"},
    .coll = MDC_COLL_ALLREDUCE,
    .cost = cost,
    .schedule = schedule,
    .run.allreduce = mdc_allreduce_recursive_doubling,
};
