/* Binomial-tree scatter.
 *
 * Algorithm: ranks relative to the root (rel = (r - root) mod p). A rank receives its subtree's
 *   blocks (contiguous in relative order) from rel - lowbit(rel), then sends each child rel + d
 *   (d = lowbit(rel)/2, ..., 1; the root: from the largest power of two below p) that child's
 *   subtree, all at once, and keeps its own block. The root sends each subtree from its place
 *   in sendbuf (with root != 0, the one subtree whose ranks wrap past p - 1 from scratch); a
 *   leaf receives straight into its receive buffer, an inner rank into scratch.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH scatter binomial).
 * Restrictions: none (every root; in place at the root: recvbuf == MDC_IN_PLACE or sendbuf).
 * Cost: lg p alpha + (p-1)/p n beta, n = the root's full buffer. */
#include "schedule_build.h"

mdc_status mdc_i_binomial_scatter(mdc_group *g, int root, void *base, const size_t *off, const size_t *len, int tag) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    char *b = base;
    int top = mdc_i_pow2_floor(p);
    if (top < p) top *= 2;
    int mask = rel ? (rel & -rel) : top;
    mdc_status st = MDC_OK;
    if (rel) {
        int end = rel + mask < p ? rel + mask : p;
        size_t bytes = off[end - 1] + len[end - 1] - off[rel];
        if (bytes) st = mdc_recv(b, bytes, mdc_i_mod(rel - mask + root, p), tag, g);
        if (st) return st;
    }
    mdc_request *reqs[32];
    int n = 0;
    for (int d = mask / 2; d >= 1; d /= 2) {
        int child = rel + d;
        if (child >= p) continue;
        int end = child + d < p ? child + d : p;
        size_t bytes = off[end - 1] + len[end - 1] - off[child];
        if (!bytes) continue;
        st = mdc_isend(b + off[child] - off[rel], bytes, mdc_i_mod(child + root, p), tag, g, &reqs[n]);
        if (st) break;
        n++;
    }
    mdc_status st2 = mdc_waitall(reqs, n);
    return st ? st : st2;
}

/* The root of a scatter: each child's subtree (relative ranks [c, e), largest first) goes
 * straight from its place in sendbuf when its ranks do not wrap past p - 1 (always with root
 * 0), else from scratch it is first copied to in relative order; the own block is copied once
 * the sends are posted. The same messages, in the same order, as mdc_i_binomial_scatter at
 * relative rank 0. */
static mdc_status scatter_root(mdc_group *g, int root, const char *sendbuf, void *mine, size_t bs, int tag) {
    int p = mdc_group_size(g), n = 0, top = mdc_i_pow2_floor(p);
    if (top < p) top *= 2;
    mdc_request *reqs[32];
    char *wrap = NULL;
    mdc_status st = MDC_OK;
    for (int d = top / 2; d >= 1 && !st; d /= 2) {
        int c = d, e = c + d < p ? c + d : p, r0 = (c + root) % p;
        if (c >= p) continue;
        size_t bytes = (size_t)(e - c) * bs;
        const char *src = sendbuf + (size_t)r0 * bs;
        if (r0 + (e - c) > p) { /* wraps: at most one subtree does */
            size_t head = (size_t)(p - r0);
            if ((st = mdc_i_alloc((void **)&wrap, bytes, "scatter binomial"))) break;
            memcpy(wrap, src, head * bs);
            memcpy(wrap + head * bs, sendbuf, bytes - head * bs);
            src = wrap;
        }
        if (!(st = mdc_isend(src, bytes, r0, tag, g, &reqs[n]))) n++;
    }
    if (!st && mine != sendbuf + (size_t)root * bs) memcpy(mine, sendbuf + (size_t)root * bs, bs);
    mdc_status st2 = mdc_waitall(reqs, n);
    mdc_i_free(wrap);
    return st ? st : st2;
}

mdc_status mdc_scatter_binomial(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    size_t bs = count * mdc_dtype_size(t);
    if (bs == 0) return MDC_OK;
    if (me == root) { /* in place: the own block stays in sendbuf */
        int inplace = recvbuf == MDC_IN_PLACE || sendbuf == recvbuf;
        return scatter_root(g, root, sendbuf, inplace ? (char *)sendbuf + (size_t)root * bs : recvbuf, bs,
                            MDC_I_TAG(MDC_COLL_SCATTER, 0));
    }
    size_t *off;
    char *base;
    mdc_status st = mdc_i_binomial_nonroot(p, rel, bs, recvbuf, &off, &base, "scatter binomial");
    if (st) return st;
    st = mdc_i_binomial_scatter(g, root, base, off, off + p, MDC_I_TAG(MDC_COLL_SCATTER, 0));
    if (!st && base != recvbuf) memcpy(recvbuf, base, bs); /* a leaf receives its block where it goes */
    if (base != recvbuf) mdc_i_free(base);
    free(off);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    size_t bs = s->count * mdc_dtype_size(s->t);
    mdc_i_sched_formula(s, (double)(s->p - 1) * (double)bs, "(p-1)/p n  (the root sends)");
    return mdc_i_sched_binomial_blocks(s, 1);
}

static double cost(const mdc_i_cost_in *x) { return x->lg * x->a + x->f * x->n * x->b; }

const mdc_i_algo mdc_i_algo_scatter_binomial = {
    .info = {"binomial", "mdc_scatter_binomial", "binomial tree from the root, subtrees split", "lg p a + (p-1)/p n b"},
    .coll = MDC_COLL_SCATTER,
    .cost = cost,
    .schedule = schedule,
    .run.scatter = mdc_scatter_binomial,
};
