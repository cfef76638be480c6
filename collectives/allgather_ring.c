/* Ring allgather.
 *
 * Algorithm: p - 1 steps around the ring 0 -> 1 -> ... -> p-1 -> 0. At step s rank r sends
 *   block (r - s) mod p to r + 1 and receives block (r - s - 1) mod p from r - 1, straight into
 *   its place in the receive buffer (no scratch, no copies but the own block). Step 0 sends
 *   the own block from the send buffer and copies it into place while the messages travel.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH allgather ring); NCCL's ring allgather.
 * Restrictions: none (any p, per-rank counts and displacements, in place).
 * Cost: (p-1) alpha + (p-1)/p n beta, n = the full output. */
#include "schedule_build.h"

mdc_status mdc_i_ring_ag(mdc_group *g, const int *mem, int n, int pos, void *buf, const size_t *off, const size_t *len,
                         const void *own, int tag) {
    char *b = buf;
    if (n == 1) {
        if (own && len[pos] && own != b + off[pos]) memmove(b + off[pos], own, len[pos]);
        return MDC_OK;
    }
    int next = mdc_i_member(mem, (pos + 1) % n), prev = mdc_i_member(mem, (pos - 1 + n) % n);
    for (int step = 0; step < n - 1; step++) {
        int sb = mdc_i_mod(pos - step, n), rb = mdc_i_mod(pos - step - 1, n);
        int first = step == 0 && own; /* sb == pos: the own block, sent from `own` */
        const void *from = first ? own : b + off[sb];
        mdc_status st = mdc_i_xchg_copy(g, from, len[sb], next, b + off[rb], len[rb], prev, tag, b + off[pos], from,
                                        first ? len[pos] : 0);
        if (st) return st;
    }
    return MDC_OK;
}

mdc_status mdc_allgather_ring(const void *sendbuf, void *recvbuf, const size_t *counts, const size_t *displs,
                              mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "allgather ring: offsets");
    size_t *len = off + p, o = 0;
    for (int i = 0; i < p; i++) {
        off[i] = (displs ? displs[i] : o) * esz;
        len[i] = counts[i] * esz;
        o += counts[i];
    }
    const void *own = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf ? NULL : sendbuf;
    mdc_status st = mdc_i_ring_ag(g, NULL, p, me, recvbuf, off, len, own, MDC_I_TAG(MDC_COLL_ALLGATHER, 0));
    free(off);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), total = mdc_i_sched_total(s);
    mdc_i_sched_formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    size_t *off;
    MDC_I_TRY(mdc_i_sched_offsets(s, esz, p, &off));
    size_t *len = off + p;
    for (int i = 0; i < p; i++) len[i] = s->counts[i] * esz;
    mdc_status st = mdc_i_sched_ring_ag(s, &step, NULL, p, off, len, 0, "", "block of rank");
    free(off);
    return st;
}

static double cost(const mdc_i_cost_in *x) { return (x->P - 1) * x->a + x->f * x->n * x->b; }

const mdc_i_algo mdc_i_algo_allgather_ring = {
    .info = {"ring", "mdc_allgather_ring", "p-1 steps around the ring, blocks received in place",
             "(p-1) a + (p-1)/p n b"},
    .coll = MDC_COLL_ALLGATHER,
    .cost = cost,
    .schedule = schedule,
    .run.allgather = mdc_allgather_ring,
};
