/* Recursive-halving reduce-scatter (per-rank counts).
 *
 * Algorithm: fold a non-power-of-two group onto p2 ranks (even rank 2i sends its whole input
 *   to 2i+1, which reduces even OP odd and carries both blocks as new rank i). Then lg p2 steps
 *   with distance p2/2, p2/4, ..., 1: each new rank keeps the half of its current range that
 *   holds its own blocks, sends the other half to its partner and reduces what it receives
 *   (lower new rank OP higher). Finally odd folded ranks hand the even rank its block.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH reduce_scatter recursive halving).
 * Restrictions: none. Halves may be unequal when counts differ.
 * Cost: lg p alpha + (p-1)/p n (beta + gamma) + n/p c (the own block is reduced in scratch and
 *   copied out; c = 2/3 gamma); a non-power of two adds 2 alpha + n beta + n gamma. */
#include "schedule_build.h"

mdc_status mdc_i_halving_rs(mdc_group *g, int rem, int p2, int nr, const void *src, void *work, void *tmp,
                            const size_t *bnd, mdc_dtype t, mdc_op op, int tag) {
    size_t esz = mdc_dtype_size(t);
    const char *cur = src;
    char *w = work;
    int lo = 0;
    for (int mask = p2 / 2; mask >= 1; mask >>= 1) {
        int pnr = nr ^ mask, peer = mdc_i_oldrank(pnr, rem);
        int keep = nr < lo + mask ? lo : lo + mask, give = nr < lo + mask ? lo + mask : lo;
        size_t k0 = bnd[keep], kn = bnd[keep + mask] - k0;
        size_t g0 = bnd[give], gn = bnd[give + mask] - g0;
        /* The lower new rank's data is the left operand. */
        mdc_status st = mdc_i_xchg_reduce(g, cur + g0 * esz, gn * esz, peer, tmp, kn, peer, cur + k0 * esz,
                                          w + k0 * esz, nr > pnr, t, op, tag);
        if (st) return st;
        cur = w;
        lo = keep;
    }
    return MDC_OK;
}

mdc_status mdc_reduce_scatter_recursive_halving(const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t,
                                                mdc_op op, mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    const int tag = MDC_I_TAG(MDC_COLL_REDUCE_SCATTER, 8);
    int p2 = mdc_i_pow2_floor(p), rem = p - p2;
    size_t *off = malloc(sizeof(size_t) * (size_t)(p + p2 + 1));
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "reduce_scatter recursive halving: offsets");
    size_t *bnd = off + p, total = 0;
    for (int i = 0; i < p; i++) {
        off[i] = total;
        total += counts[i];
    }
    for (int i = 0; i < p2; i++) bnd[i] = off[mdc_i_first_old(i, rem)];
    bnd[p2] = total;
    char *work = NULL, *tmp = NULL;
    mdc_status st = MDC_OK;
    if (total == 0) goto done;
    if (p == 1) {
        if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, total * esz);
        goto done;
    }
    if (me < 2 * rem && me % 2 == 0) {
        st = mdc_i_send_to_reduce(g, sendbuf, total * esz, me + 1, t, tag);
        if (!st) st = mdc_recv(recvbuf, counts[me] * esz, me + 1, tag + 2, g);
        goto done;
    }
    if ((st = mdc_i_alloc((void **)&work, total * esz, "reduce_scatter recursive halving")) ||
        (st = mdc_i_alloc((void **)&tmp, total * esz, "reduce_scatter recursive halving")))
        goto done;
    const char *cur = sendbuf;
    if (me < 2 * rem) {
        st = mdc_i_recv_reduce(g, tmp, total, me - 1, sendbuf, work, 1, t, op, tag);
        if (st) goto done;
        cur = work;
    }
    st = mdc_i_halving_rs(g, rem, p2, mdc_i_newrank(me, rem), cur, work, tmp, bnd, t, op, tag + 1);
    if (st) goto done;
    if (me < 2 * rem) st = mdc_send(work + off[me - 1] * esz, counts[me - 1] * esz, me - 1, tag + 2, g);
    if (!st && counts[me]) memcpy(recvbuf, work + off[me] * esz, counts[me] * esz);
done:
    if (!st) mdc_reduce_finish(recvbuf, counts[me], t, op, p);
    mdc_i_free(work);
    mdc_i_free(tmp);
    free(off);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, p2 = mdc_i_pow2_floor(p), rem = p - p2, step = 0;
    size_t esz = mdc_dtype_size(s->t), total = mdc_i_sched_total(s);
    if (rem) /* no rank both folds and halves: the folding ones send the most */
        mdc_i_sched_formula(s, (double)(total * esz),
                            "n  (the even ranks below 2(p-p2) fold all of it; the rest "
                            "(p-1)/p n)");
    else mdc_i_sched_formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total || p == 1) return MDC_OK;
    size_t *off;
    MDC_I_TRY(mdc_i_sched_offsets(s, 1, p2 + 1, &off));
    size_t *bnd = off + p;
    for (int i = 0; i < p2; i++) bnd[i] = off[mdc_i_first_old(i, rem)];
    bnd[p2] = total;
    mdc_status st = mdc_i_sched_fold_in(s, &step, rem, total);
    if (!st) st = mdc_i_sched_halving_rs(s, &step, rem, p2, bnd, "");
    if (!st && rem) {
        mdc_i_sched_phase(s, step, "unfold: odd ranks hand the even rank its block");
        for (int i = 0; i < rem && !st; i++)
            st = mdc_i_sched_add(s, step, 2 * i + 1, 2 * i, s->counts[2 * i] * esz, MDC_SCHED_STORE, off[2 * i],
                                 s->counts[2 * i], "block %d", 2 * i);
        step++;
    }
    free(off);
    return st;
}

/* Halving reduces into scratch (its ranges are not the caller's block) and copies the block
 * out at the end (the c term); a non-power of two adds the fold. */
static double cost(const mdc_i_cost_in *x) {
    return x->lg2 * x->a + x->f * x->n * (x->b + x->g) + x->n / x->P * x->cp +
           (x->fold ? 2 * x->a + x->n * x->b + x->n * x->g : 0);
}

const mdc_i_algo mdc_i_algo_reduce_scatter_recursive_halving = {
    .info = {"recursive_halving", "mdc_reduce_scatter_recursive_halving",
             "lg p steps, halving the range exchanged (fold for p != 2^k)", "lg p a + (p-1)/p n (b + g) + n/p c"},
    .coll = MDC_COLL_REDUCE_SCATTER,
    .cost = cost,
    .schedule = schedule,
    .run.reduce_scatter = mdc_reduce_scatter_recursive_halving,
};
