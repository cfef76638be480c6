/* Allreduce as a binomial reduce to rank 0 followed by a binomial broadcast.
 *
 * Algorithm: binomial reduce (mdc_reduce_binomial's tree: at distance 1, 2, 4, ... rank r
 *   receives r + d's partial and computes own OP child, or sends to r - d), accumulating in
 *   recvbuf on every rank; then rank 0 broadcasts the result down the binomial tree.
 * Source: the textbook composition (MPICH's fallback for user ops).
 * Restrictions: none; 2 lg p latency and the whole vector on every step.
 * Cost: 2 lg p (alpha + n beta) + lg p n gamma. */
#include "schedule_build.h"

mdc_status mdc_allreduce_reduce_bcast(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op,
                                      mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    int p = mdc_group_size(g);
    if (count == 0) return MDC_OK;
    mdc_status st = mdc_i_binomial_reduce(g, 0, sendbuf, recvbuf, count, t, op, MDC_I_TAG(MDC_COLL_ALLREDUCE, 24));
    if (!st) st = mdc_bcast_binomial(recvbuf, count, t, 0, g);
    if (!st) mdc_reduce_finish(recvbuf, count, t, op, p);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    mdc_i_sched_formula(s, (double)n * mdc_i_lg_ceil(p), "ceil(lg p) n  (rank 0 broadcasting)");
    if (s->count == 0) return MDC_OK;
    MDC_I_TRY(mdc_i_sched_binomial_reduce(s, &step, 0, s->count, ""));
    if (p > 1) MDC_I_TRY(mdc_i_sched_binomial_bcast(s, &step, 0, n, s->count, ""));
    return MDC_OK;
}

static double cost(const mdc_i_cost_in *x) { return 2 * x->lg * (x->a + x->n * x->b) + x->lg * x->n * x->g; }

const mdc_i_algo mdc_i_algo_allreduce_reduce_bcast = {
    .info = {"reduce_bcast", "mdc_allreduce_reduce_bcast", "binomial reduce to rank 0 + binomial broadcast",
             "2 lg p (a + n b) + lg p n g"},
    .coll = MDC_COLL_ALLREDUCE,
    .cost = cost,
    .schedule = schedule,
    .run.allreduce = mdc_allreduce_reduce_bcast,
};
