/* Recursive-doubling allgather (per-rank counts).
 *
 * Algorithm: fold a non-power-of-two group onto p2 ranks (even rank 2i gives its block to
 *   2i+1, new rank i). Then lg p2 steps with distance 1, 2, 4, ...: new rank i exchanges all the
 *   blocks it holds (a contiguous range, doubling each step) with i XOR 2^k. Finally each odd
 *   folded rank sends the whole result to its even partner. Works on a packed copy when the
 *   displacements are not packed.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH allgather recursive doubling); the fold is
 *   Rabenseifner's.
 * Restrictions: none.
 * Cost: lg p alpha + (p-1)/p n beta; a non-power of two adds 2 alpha + n beta (+ n/p beta). */
#include "schedule_build.h"

mdc_status mdc_i_doubling_ag(mdc_group *g, int rem, int p2, int nr, void *buf, const size_t *bnd, int tag) {
    char *b = buf;
    for (int mask = 1; mask < p2; mask <<= 1) {
        int pnr = nr ^ mask, peer = mdc_i_oldrank(pnr, rem);
        int mylo = nr & ~(mask - 1), plo = pnr & ~(mask - 1);
        mdc_status st = mdc_i_xchg(g, b + bnd[mylo], bnd[mylo + mask] - bnd[mylo], peer, b + bnd[plo],
                                   bnd[plo + mask] - bnd[plo], peer, tag);
        if (st) return st;
    }
    return MDC_OK;
}

mdc_status mdc_allgather_recursive_doubling(const void *sendbuf, void *recvbuf, const size_t *counts,
                                            const size_t *displs, mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    const int tag = MDC_I_TAG(MDC_COLL_ALLGATHER, 8);
    int p2 = mdc_i_pow2_floor(p), rem = p - p2;
    size_t *off = malloc(sizeof(size_t) * (size_t)(p + p2 + 1));
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "allgather recursive doubling: offsets");
    size_t *bnd = off + p, total = 0;
    int packed = 1;
    for (int i = 0; i < p; i++) {
        off[i] = total * esz;
        if (displs && displs[i] != total) packed = 0;
        total += counts[i];
    }
    for (int i = 0; i < p2; i++) bnd[i] = off[mdc_i_first_old(i, rem)];
    bnd[p2] = total * esz;
    int inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
    const char *mine = inplace ? (char *)recvbuf + (displs ? displs[me] : off[me] / esz) * esz : sendbuf;
    char *pk = recvbuf;
    mdc_status st = MDC_OK;
    if (!packed && (st = mdc_i_alloc((void **)&pk, total * esz, "allgather recursive doubling"))) goto done;
    if (mine != pk + off[me] && counts[me]) memmove(pk + off[me], mine, counts[me] * esz);
    if (me < 2 * rem && me % 2 == 0) {
        st = mdc_send(pk + off[me], counts[me] * esz, me + 1, tag, g);
        if (!st) st = mdc_recv(pk, total * esz, me + 1, tag + 2, g);
    } else {
        if (me < 2 * rem) st = mdc_recv(pk + off[me - 1], counts[me - 1] * esz, me - 1, tag, g);
        if (!st) st = mdc_i_doubling_ag(g, rem, p2, mdc_i_newrank(me, rem), pk, bnd, tag + 1);
        if (!st && me < 2 * rem) st = mdc_send(pk, total * esz, me - 1, tag + 2, g);
    }
    if (!st && !packed)
        for (int i = 0; i < p; i++)
            if (counts[i]) memcpy((char *)recvbuf + displs[i] * esz, pk + off[i], counts[i] * esz);
done:
    if (pk != recvbuf) mdc_i_free(pk);
    free(off);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, p2 = mdc_i_pow2_floor(p), rem = p - p2, step = 0;
    size_t esz = mdc_dtype_size(s->t), total = mdc_i_sched_total(s);
    /* Survivor 0 sends the most: it starts with two blocks (its own and the folded one), and at
     * distance d its group holds d + min(d, rem) blocks; then it unfolds n to its even rank. */
    int f = 0;
    for (int d = 1; d < p2; d *= 2) f += d < rem ? d : rem;
    if (rem)
        mdc_i_sched_formula(s, (double)(p2 - 1 + f) / p * (double)(total * esz) + (double)(total * esz),
                            "(p2-1+f)/p n + n  (p2 = %d, f = %d folded blocks, unfold; equal blocks)", p2, f);
    else mdc_i_sched_formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    size_t *off;
    MDC_I_TRY(mdc_i_sched_offsets(s, esz, p2 + 1, &off));
    size_t *bnd = off + p;
    for (int i = 0; i < p2; i++) bnd[i] = off[mdc_i_first_old(i, rem)];
    bnd[p2] = total * esz;
    mdc_status st = MDC_OK;
    if (rem) { /* mdc_send/mdc_recv: empty blocks travel as empty messages */
        mdc_i_sched_phase(s, step, "fold: even ranks below 2 x %d give their block to the odd one", rem);
        for (int i = 0; i < rem && !st; i++)
            st = mdc_i_sched_add(s, step, 2 * i, 2 * i + 1, s->counts[2 * i] * esz, MDC_SCHED_STORE, 0, 0,
                                 "block of rank %d", 2 * i);
        step++;
    }
    if (!st) st = mdc_i_sched_doubling_ag(s, &step, rem, p2, bnd, 0, "");
    if (!st && rem) {
        mdc_i_sched_phase(s, step, "unfold: odd ranks send everything to the even one");
        for (int i = 0; i < rem && !st; i++)
            st = mdc_i_sched_add(s, step, 2 * i + 1, 2 * i, total * esz, MDC_SCHED_STORE, 0, 0, "every block");
        step++;
    }
    free(off);
    return st;
}

/* A non-power of two adds the fold: the own block in, everything back. */
static double cost(const mdc_i_cost_in *x) {
    return x->lg2 * x->a + x->f * x->n * x->b + (x->fold ? 2 * x->a + x->n * x->b : 0);
}

const mdc_i_algo mdc_i_algo_allgather_recursive_doubling = {
    .info = {"recursive_doubling", "mdc_allgather_recursive_doubling",
             "lg p exchanges with rank XOR 2^k, doubling the range (fold for p != 2^k)", "lg p a + (p-1)/p n b"},
    .coll = MDC_COLL_ALLGATHER,
    .cost = cost,
    .schedule = schedule,
    .run.allgather = mdc_allgather_recursive_doubling,
};
