/* Direct allgather.
 *
 * Algorithm: one step: rank r posts a receive from every other rank, straight into that
 *   rank's place in the receive buffer (from r-1, r-2, ... in turn), and sends its own block
 *   to every other rank (to r+1, r+2, ...), then copies its own block into place while the
 *   messages travel. No message depends on another, so no rank waits for a peer to forward
 *   anything: on a host where the receiver copies each message out of the sender's memory and
 *   ranks share cores, the copies run back to back (docs/performance.md, item 24).
 * Source: the direct (one-step) exchange; MPICH posts its "scattered" all-to-all the same way
 *   (Thakur, Rabenseifner & Gropp 2005).
 * Restrictions: none (any p, per-rank counts and displacements, in place); 2(p-1) requests in
 *   flight per rank, so large p is for large blocks.
 * Cost: (p-1) alpha + (p-1)/p n beta (every message pays its own alpha on a single port). */
#include "schedule_build.h"

mdc_status mdc_allgather_direct(const void *sendbuf, void *recvbuf, const size_t *counts, const size_t *displs,
                                mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), tag = MDC_I_TAG(MDC_COLL_ALLGATHER, 3);
    size_t esz = mdc_dtype_size(t);
    size_t *off = malloc(sizeof(size_t) * (size_t)p);
    mdc_request **r = calloc(2 * (size_t)p, sizeof *r);
    mdc_status st = MDC_OK;
    if (!off || !r) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "allgather direct: requests");
        goto done;
    }
    size_t o = 0;
    for (int i = 0; i < p; i++) {
        off[i] = (displs ? displs[i] : o) * esz;
        o += counts[i];
    }
    char *b = recvbuf;
    int inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
    const char *own = inplace ? b + off[me] : sendbuf;
    size_t mine = counts[me] * esz;
    int n = 0;
    for (int k = 1; k < p && !st; k++) {
        int from = (me - k + p) % p;
        if (counts[from]) st = mdc_irecv(b + off[from], counts[from] * esz, from, tag, g, &r[n++]);
    }
    for (int k = 1; k < p && !st; k++)
        if (mine) st = mdc_isend(own, mine, (me + k) % p, tag, g, &r[n++]);
    if (st) { /* a failed post leaves the transport unusable; what was posted is let go */
        mdc_i_abandon(r, n);
        goto done;
    }
    if (!inplace && mine) memcpy(b + off[me], own, mine);
    st = mdc_waitall(r, n);
done:
    free(off);
    free(r);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), total = mdc_i_sched_total(s);
    mdc_i_sched_formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total || p == 1) return MDC_OK;
    mdc_i_sched_phase(s, 0, "every rank sends its block to every other rank, all at once");
    /* Distance k outer: rank r's sends go to r+1, r+2, ... and its receives come from r-1,
     * r-2, ..., the order the code posts them. */
    for (int k = 1; k < p; k++)
        for (int r = 0; r < p; r++) {
            if (!s->counts[r]) continue;
            MDC_I_TRY(mdc_i_sched_add(s, 0, r, (r + k) % p, s->counts[r] * esz, MDC_SCHED_STORE, 0, 0,
                                      "block of rank %d", r));
        }
    return MDC_OK;
}

static double cost(const mdc_i_cost_in *x) { return (x->P - 1) * x->a + x->f * x->n * x->b; }

const mdc_i_algo mdc_i_algo_allgather_direct = {
    .info = {"direct", "mdc_allgather_direct", "one step: every rank sends its block to every other rank at once",
             "(p-1) a + (p-1)/p n b"},
    .coll = MDC_COLL_ALLGATHER,
    /* The model cannot tell it from the others (every rank receives the same bytes), but its
     * messages depend on no earlier step, and with ranks taking turns on a core each dependent
     * step costs a wait for a peer's turn; so on the host's clock, with three or more ranks to
     * a core, the allgather of 1 MiB or more goes direct: 8 ranks on 2 cores, 64 MiB,
     * 49.5-52.2 ms against 62.2-72.3 for recursive doubling, 1 MiB 570-703 us against 739-847;
     * at 4 ranks (2 to a core) within noise (docs/performance.md, item 24). */
    .host_crowded_min = (size_t)1 << 20,
    .cost = cost,
    .schedule = schedule,
    .run.allgather = mdc_allgather_direct,
};
