/* Pairwise-exchange all-to-all.
 *
 * Algorithm: p - 1 steps: at step s rank r sends its block for r + s to r + s and receives
 *   r - s's block for r, straight into place; the own block is copied during step 1. In
 *   place, the p - 1 blocks for the other ranks are first copied to scratch (each is
 *   overwritten by an arriving block, possibly before it is sent); the own block stays where
 *   it is.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH alltoall pairwise).
 * Restrictions: none.
 * Cost: (p-1) a + (p-1)/p n b + n/p c, n = one rank's send buffer (p blocks; its own block is copied). */
#include "schedule_build.h"

mdc_status mdc_alltoall_pairwise(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t bs = count * mdc_dtype_size(t);
    if (bs == 0) return MDC_OK;
    int inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
    char *tmp = NULL, *out = recvbuf;
    /* Block j of what this rank sends: in place, block j > me sits one block earlier in tmp,
     * which holds the p - 1 blocks without the own one. */
    const char *src = sendbuf;
    if (inplace) {
        if (p == 1) return MDC_OK;
        mdc_status st = mdc_i_alloc((void **)&tmp, (size_t)(p - 1) * bs, "alltoall pairwise");
        if (st) return st;
        memcpy(tmp, out, (size_t)me * bs);
        memcpy(tmp + (size_t)me * bs, out + (size_t)(me + 1) * bs, (size_t)(p - 1 - me) * bs);
    }
    char *mine = out + (size_t)me * bs;
    if (p == 1) memcpy(mine, src, bs);
    mdc_status st = MDC_OK;
    for (int s = 1; s < p && !st; s++) {
        int dst = (me + s) % p, from = mdc_i_mod(me - s, p);
        const char *sb = inplace ? tmp + (size_t)(dst - (dst > me)) * bs : src + (size_t)dst * bs;
        st = mdc_i_xchg_copy(g, sb, bs, dst, out + (size_t)from * bs, bs, from, MDC_I_TAG(MDC_COLL_ALLTOALL, 0), mine,
                             inplace ? mine : src + (size_t)me * bs, s == 1 && !inplace ? bs : 0);
    }
    mdc_i_free(tmp);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

mdc_status mdc_i_alltoall_pairwise_schedule(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t);
    size_t all = 0;
    for (int i = 0; i < p; i++) all += s->counts[i];
    mdc_i_sched_formula(s, (double)(p - 1) / p * (double)(all * esz), "(p-1)/p n");
    for (int k = 1; k < p; k++) {
        mdc_i_sched_phase(s, k - 1, "exchange at distance %d", k);
        for (int r = 0; r < p; r++) {
            int dst = (r + k) % p;
            if (!s->counts[dst]) continue;
            MDC_I_TRY(mdc_i_sched_add(s, k - 1, r, dst, s->counts[dst] * esz, MDC_SCHED_STORE, 0, 0,
                                      "block for rank %d", dst));
        }
    }
    return MDC_OK;
}

/* The own block is copied, not sent. The alltoallv shares this cost and schedule. */
double mdc_i_alltoall_pairwise_cost(const mdc_i_cost_in *x) {
    return (x->P - 1) * x->a + x->f * x->n * x->b + x->n / x->P * x->cp;
}

const mdc_i_algo mdc_i_algo_alltoall_pairwise = {
    .info = {"pairwise", "mdc_alltoall_pairwise", "p-1 steps: send to r+s, receive from r-s",
             "(p-1) a + (p-1)/p n b + n/p c"},
    .coll = MDC_COLL_ALLTOALL,
    .cost = mdc_i_alltoall_pairwise_cost,
    .schedule = mdc_i_alltoall_pairwise_schedule,
    .run.alltoall = mdc_alltoall_pairwise,
};
