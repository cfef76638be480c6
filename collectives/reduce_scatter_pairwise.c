/* Pairwise-exchange reduce-scatter (per-rank counts).
 *
 * Algorithm: p - 1 steps; at step s rank r sends its input block r + s to rank r + s and
 *   receives rank r - s's input block r, accumulating acc = acc OP received, starting from its
 *   own block: out_r = ((x_r OP x_{r-1}) OP x_{r-2}) ... OP x_{r+1} (indices mod p).
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH reduce_scatter pairwise).
 * Restrictions: none. In place the result's place (the start of recvbuf) holds input blocks
 *   still to be sent, and every other element of recvbuf is the caller's input, which MPI's in
 *   place leaves alone: the running result stays in scratch until the last block under its
 *   place has been sent, and from that step on reduces into place.
 * Cost: (p-1) alpha + (p-1)/p n (beta + gamma). */
#include "schedule_build.h"

/* In place: the first step whose reduction may write recvbuf's first `mine` bytes (p or more:
 * none; the result is copied there at the end).
 * That is the step that sends the last input block under them (its reduction waits for the
 * send), or step 2 when the own block, read at step 1, overlaps them without starting there. */
static int first_step_into_place(const size_t *counts, const size_t *off, int p, int me, size_t mine) {
    int first = 1;
    for (int j = 0; j < p; j++) {
        if (!counts[j] || off[j] >= mine) continue; /* block j is not under the result's place */
        int s = j != me ? mdc_i_mod(j - me, p) : off[j] ? 2 : 1;
        if (s > first) first = s;
    }
    return first;
}

mdc_status mdc_reduce_scatter_pairwise(const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t, mdc_op op,
                                       mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t), mine = counts[me] * esz;
    int inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
    const char *src = inplace ? recvbuf : sendbuf;
    size_t *off = malloc(sizeof(size_t) * (size_t)p), o = 0;
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "reduce_scatter pairwise: offsets");
    for (int i = 0; i < p; i++) {
        off[i] = o * esz;
        o += counts[i];
    }
    char *rtmp = NULL;
    mdc_status st = MDC_OK;
    if (o == 0) goto done;
    if (p == 1) {
        if (!inplace) memcpy(recvbuf, src, mine);
        goto done;
    }
    int first = inplace ? first_step_into_place(counts, off, p, me, mine) : 1;
    /* Scratch: the incoming block, and while the result waits for its place a second one, so
     * that a step reduces into the block it received and the next receives into the other. */
    if ((st = mdc_i_alloc((void **)&rtmp, (first > 1 ? 2 : 1) * mine, "reduce_scatter pairwise"))) goto done;
    char *rbuf = rtmp, *spare = rtmp + (first > 1 ? mine : 0);
    const char *acc = src + off[me]; /* the running result; before step 1 the own block */
    for (int s = 1; s < p && !st; s++) {
        int dst = (me + s) % p, from = mdc_i_mod(me - s, p);
        char *out = s >= first ? (char *)recvbuf : rbuf;
        st = mdc_i_xchg_reduce(g, src + off[dst], counts[dst] * esz, dst, rbuf, counts[me], from, acc, out, 0, t, op,
                               MDC_I_TAG(MDC_COLL_REDUCE_SCATTER, 16));
        acc = out;
        if (out == rbuf) rbuf = rbuf == rtmp ? spare : rtmp;
    }
    if (!st && acc != (char *)recvbuf && mine) memcpy(recvbuf, acc, mine); /* first >= p */
    if (!st) mdc_reduce_finish(recvbuf, counts[me], t, op, p);
done:
    mdc_i_free(rtmp);
    free(off);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

/* Pairwise: step k = 1 .. p-1: send block r+k to rank r+k, receive own block from r-k and
 * reduce own OP incoming. */
static mdc_status schedule(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), total = mdc_i_sched_total(s);
    mdc_i_sched_formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total) return MDC_OK;
    size_t *off;
    MDC_I_TRY(mdc_i_sched_offsets(s, 1, 0, &off));
    mdc_status st = MDC_OK;
    for (int k = 1; k < p && !st; k++) {
        mdc_i_sched_phase(s, k - 1, "exchange at distance %d", k);
        for (int r = 0; r < p && !st; r++) {
            int dst = (r + k) % p;
            if (!s->counts[dst]) continue;
            st = mdc_i_sched_add(s, k - 1, r, dst, s->counts[dst] * esz, MDC_SCHED_OWN_OP_IN, off[dst], s->counts[dst],
                                 "block %d", dst);
        }
    }
    free(off);
    return st;
}

/* The ring's cost: the same messages and bytes. */
static double cost(const mdc_i_cost_in *x) { return (x->P - 1) * x->a + x->f * x->n * (x->b + x->g); }

const mdc_i_algo mdc_i_algo_reduce_scatter_pairwise = {
    .info = {"pairwise", "mdc_reduce_scatter_pairwise", "p-1 steps: send block r+s to r+s, receive from r-s",
             "(p-1) a + (p-1)/p n (b + g)"},
    .coll = MDC_COLL_REDUCE_SCATTER,
    /* On the host's clock the tie with the ring goes here: pairwise sends inputs, so no step
     * waits for a neighbour's previous step, and it reduces into its own block; with ranks
     * sharing cores it was 10-25% faster (docs/performance.md, item 18). The device's choice
     * keeps the ring (NCCL's order). */
    .flags = MDC_I_HOST_WINS_TIE,
    .cost = cost,
    .schedule = schedule,
    .run.reduce_scatter = mdc_reduce_scatter_pairwise,
};
