/* Ring reduce-scatter.
 *
 * Algorithm: p - 1 steps around the ring 0 -> 1 -> ... -> p-1 -> 0. At step s rank r sends
 *   block (r - s - 1) mod p (its own input at s = 0, else the partial it just computed) to r + 1
 *   and receives block (r - s - 2) mod p from r - 1, which it reduces as partial OP own. Block c
 *   is thus started by rank c + 1 and accumulated one rank at a time, ending at rank c:
 *   out_c = ((x_{c+1} OP x_{c+2}) OP ...) OP x_c, NCCL's ring order.
 * Source: Patarasuk & Yuan 2009; NCCL's ring (src/device/all_reduce.h, reduce-scatter half).
 * Restrictions: none (any p, any per-rank counts, in place). Bandwidth-optimal, latency linear.
 * Cost: (p-1) alpha + (p-1)/p n (beta + gamma), n = the full input (all blocks). */
#include "schedule_build.h"

mdc_status mdc_i_ring_rs(mdc_group *g, const int *mem, int n, int pos, const void *src, void *work, void *dst,
                         const size_t *off, const size_t *len, mdc_dtype t, mdc_op op, int tag) {
    size_t esz = mdc_dtype_size(t);
    const char *s = src;
    if (n == 1) {
        if (len[0] && (const char *)dst != s + off[0] * esz) memmove(dst, s + off[0] * esz, len[0] * esz);
        return MDC_OK;
    }
    size_t maxlen = 0;
    for (int c = 0; c < n; c++)
        if (len[c] > maxlen) maxlen = len[c];
    char *tmp;
    /* The incoming block lands in scratch (xchg_reduce reduces it piece by piece as it lands).
     * When partials live in scratch too, two more blocks: send the partial of one step while
     * reducing into the other. */
    mdc_status st = mdc_i_alloc((void **)&tmp, (work ? 1 : 3) * maxlen * esz, "ring reduce-scatter");
    if (st) return st;
    int next = mdc_i_member(mem, (pos + 1) % n), prev = mdc_i_member(mem, (pos - 1 + n) % n);
    const char *sendp = s + off[mdc_i_mod(pos - 1, n)] * esz;
    char *rbuf = tmp + (work ? 0 : 2 * maxlen * esz);
    for (int step = 0; step < n - 1; step++) {
        int sb = mdc_i_mod(pos - step - 1, n), rb = mdc_i_mod(pos - step - 2, n);
        char *part = work ? rbuf : tmp + (size_t)(step & 1) * maxlen * esz; /* a partial in scratch */
        const char *own = s + off[rb] * esz;
        char *out;
        if (step == n - 2) { /* rb == pos: the finished block goes to dst */
            out = dst;
            size_t b = len[rb] * esz;
            if (out != own && out < own + b && own < out + b) out = part; /* partial overlap */
        } else {
            out = work ? (char *)work + off[rb] * esz : part;
        }
        st = mdc_i_xchg_reduce(g, sendp, len[sb] * esz, next, rbuf, len[rb], prev, own, out, 1, t, op, tag);
        if (st) break;
        if (step == n - 2 && out != (char *)dst) memmove(dst, out, len[rb] * esz);
        sendp = out;
    }
    mdc_i_free(tmp);
    return st;
}

mdc_status mdc_reduce_scatter_ring(const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t, mdc_op op,
                                   mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t *off = malloc(sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "reduce_scatter ring: offsets");
    size_t o = 0;
    for (int i = 0; i < p; i++) {
        off[i] = o;
        o += counts[i];
    }
    mdc_status st = MDC_OK;
    if (o)
        st = mdc_i_ring_rs(g, NULL, p, me, sendbuf, NULL, recvbuf, off, counts, t, op,
                           MDC_I_TAG(MDC_COLL_REDUCE_SCATTER, 0));
    if (!st) mdc_reduce_finish(recvbuf, counts[me], t, op, p);
    free(off);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), total = mdc_i_sched_total(s);
    mdc_i_sched_formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total) return MDC_OK;
    size_t *off;
    MDC_I_TRY(mdc_i_sched_offsets(s, 1, 0, &off));
    mdc_status st = mdc_i_sched_ring_rs(s, &step, NULL, p, off, s->counts, "");
    free(off);
    return st;
}

/* Reduces straight into place: no copy. */
static double cost(const mdc_i_cost_in *x) { return (x->P - 1) * x->a + x->f * x->n * (x->b + x->g); }

const mdc_i_algo mdc_i_algo_reduce_scatter_ring = {
    .info = {"ring", "mdc_reduce_scatter_ring",
             "p-1 steps around the ring, NCCL order (block c starts at c+1, ends at c)", "(p-1) a + (p-1)/p n (b + g)"},
    .coll = MDC_COLL_REDUCE_SCATTER,
    .cost = cost,
    .schedule = schedule,
    .run.reduce_scatter = mdc_reduce_scatter_ring,
};
