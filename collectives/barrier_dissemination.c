/* Dissemination barrier.
 *
 * Algorithm: ceil(lg p) rounds; in round k rank r sends an empty message to r + 2^k and waits
 *   for one from r - 2^k. After the last round every rank has heard, directly or through a
 *   chain, from every other rank, so none leaves before all have entered.
 * Source: Hensgen, Finkel & Manber 1988; MPICH barrier (dissemination).
 * Restrictions: none (any p).
 * Cost: ceil(lg p) alpha. */
#include "schedule_build.h"

mdc_status mdc_barrier_dissemination(mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    char s = 0, r = 0;
    int k = 0;
    for (int d = 1; d < p; d <<= 1, k++) {
        mdc_status st = mdc_sendrecv(&s, 0, (me + d) % p, &r, 0, mdc_i_mod(me - d, p), MDC_I_TAG(MDC_COLL_BARRIER, k),
                                     g);
        if (st) return st;
    }
    return MDC_OK;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, k = 0;
    mdc_i_sched_formula(s, 0, "0 (empty messages)");
    for (int d = 1; d < p; d <<= 1, k++) {
        mdc_i_sched_phase(s, k, "distance %d", d);
        for (int r = 0; r < p; r++) MDC_I_TRY(mdc_i_sched_add(s, k, r, (r + d) % p, 0, MDC_SCHED_STORE, 0, 0, "empty"));
    }
    return MDC_OK;
}

static double cost(const mdc_i_cost_in *x) { return x->lg * x->a; }

const mdc_i_algo mdc_i_algo_barrier_dissemination = {
    .info = {"dissemination", "mdc_barrier_dissemination", "ceil(lg p) rounds: signal r+2^k, wait for r-2^k", "lg p a"},
    .coll = MDC_COLL_BARRIER,
    .cost = cost,
    .schedule = schedule,
    .run.barrier = mdc_barrier_dissemination,
};
