/* Binomial-tree reduce.
 *
 * Algorithm: ranks relative to the root (rel = (r - root) mod p). At distance d = 1, 2, 4, ...
 *   a rank with bit d set sends its partial to rel - d and stops; otherwise it receives rel + d's
 *   partial (if that rank exists) and computes own OP child. So the partial of the subtree
 *   [r, r+2d) is partial([r, r+d)) OP partial([r+d, r+2d)): a balanced tree in relative order.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH reduce binomial).
 * Restrictions: none; every step moves the whole vector.
 * Cost: lg p (alpha + n beta + n gamma). */
#include "schedule_build.h"

mdc_status mdc_i_binomial_reduce(mdc_group *g, int root, const void *src, void *acc, size_t count, mdc_dtype t,
                                 mdc_op op, int tag) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    size_t esz = mdc_dtype_size(t), bytes = count * esz;
    char *tmp = NULL, *own = NULL;
    const char *cur = src;
    mdc_status st = MDC_OK;
    for (int mask = 1; mask < p; mask <<= 1) {
        if (rel & mask) {
            st = mdc_i_send_to_reduce(g, cur, bytes, mdc_i_mod(rel - mask + root, p), t, tag);
            break;
        }
        if (rel + mask >= p) continue;
        if (!tmp && (st = mdc_i_alloc((void **)&tmp, bytes, "binomial reduce"))) break;
        if (!acc && !own && (st = mdc_i_alloc((void **)&own, bytes, "binomial reduce"))) break;
        char *out = acc ? acc : own;
        st = mdc_i_recv_reduce(g, tmp, count, mdc_i_mod(rel + mask + root, p), cur, out, 0, t, op, tag);
        if (st) break;
        cur = out;
    }
    if (!st && rel == 0 && cur != acc && bytes) memcpy(acc, cur, bytes);
    mdc_i_free(tmp);
    mdc_i_free(own);
    return st;
}

mdc_status mdc_reduce_binomial(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, int root,
                               mdc_group *g) {
    int me = mdc_group_rank(g), p = mdc_group_size(g);
    if (count == 0) return MDC_OK;
    if (sendbuf == MDC_IN_PLACE || sendbuf == recvbuf) sendbuf = recvbuf; /* root's data in recvbuf */
    mdc_status st = mdc_i_binomial_reduce(g, root, sendbuf, me == root ? recvbuf : NULL, count, t, op,
                                          MDC_I_TAG(MDC_COLL_REDUCE, 0));
    if (!st && me == root) mdc_reduce_finish(recvbuf, count, t, op, p);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int step = 0;
    mdc_i_sched_formula(s, s->p > 1 ? (double)(s->count * mdc_dtype_size(s->t)) : 0, "n  (one message per non-root)");
    if (!s->count) return MDC_OK;
    return mdc_i_sched_binomial_reduce(s, &step, s->root, s->count, "");
}

static double cost(const mdc_i_cost_in *x) { return x->lg * (x->a + x->n * x->b + x->n * x->g); }

const mdc_i_algo mdc_i_algo_reduce_binomial = {
    .info = {"binomial", "mdc_reduce_binomial", "binomial tree to the root, whole buffer per step",
             "lg p (a + n b + n g)"},
    .coll = MDC_COLL_REDUCE,
    .cost = cost,
    .schedule = schedule,
    .run.reduce = mdc_reduce_binomial,
};
