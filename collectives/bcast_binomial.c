/* Binomial-tree broadcast.
 *
 * Algorithm: ranks relative to the root (rel = (r - root) mod p). A rank receives the whole
 *   buffer from rel - lowbit(rel), then sends it to rel + d for d = lowbit(rel)/2, ..., 2, 1
 *   (the root: the largest power of two below p down to 1), largest subtree first.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH bcast binomial).
 * Restrictions: none; every step moves the whole vector.
 * Cost: lg p (alpha + n beta). */
#include "schedule_build.h"

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

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int step = 0;
    size_t n = s->count * mdc_dtype_size(s->t);
    mdc_i_sched_formula(s, (double)n * mdc_i_lg_ceil(s->p), "ceil(lg p) n  (the root)");
    if (s->p == 1 || !n) return MDC_OK;
    return mdc_i_sched_binomial_bcast(s, &step, s->root, n, 0, "");
}

static double cost(const mdc_i_cost_in *x) { return x->lg * (x->a + x->n * x->b); }

const mdc_i_algo mdc_i_algo_bcast_binomial = {
    .info = {"binomial", "mdc_bcast_binomial", "binomial tree from the root, whole buffer per step", "lg p (a + n b)"},
    .coll = MDC_COLL_BCAST,
    .cost = cost,
    .schedule = schedule,
    .run.bcast = mdc_bcast_binomial,
};
