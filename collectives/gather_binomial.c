/* Binomial-tree gather.
 *
 * Algorithm: ranks relative to the root (rel = (r - root) mod p). A rank first receives, at
 *   the same time, the subtrees of its children rel + d (d = 1, 2, ... below lowbit(rel); each
 *   subtree's blocks are contiguous in relative order), then sends its whole subtree to
 *   rel - lowbit(rel). The root receives each subtree straight into its place in recvbuf
 *   (with root != 0, the one subtree whose ranks wrap past p - 1 goes through scratch); a
 *   leaf sends its block from its send buffer, an inner rank gathers its subtree in scratch.
 * Source: Thakur, Rabenseifner & Gropp 2005 (MPICH gather binomial).
 * Restrictions: none (every root, in place at the root).
 * Cost: lg p alpha + (p-1)/p n beta, n = the root's full buffer. */
#include "schedule_build.h"

static size_t span_bytes(const size_t *off, const size_t *len, int a, int b) {
    return off[b - 1] + len[b - 1] - off[a];
}

mdc_status mdc_i_binomial_gather(mdc_group *g, int root, void *base, const size_t *off, const size_t *len, int tag) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    char *b = base;
    mdc_request *reqs[32];
    int n = 0;
    mdc_status st = MDC_OK;
    int mask = 1;
    for (; mask < p && !(rel & mask); mask <<= 1) {
        int child = rel + mask;
        if (child >= p) continue;
        int end = child + mask < p ? child + mask : p;
        size_t bytes = span_bytes(off, len, child, end);
        if (!bytes) continue;
        st = mdc_irecv(b + off[child] - off[rel], bytes, mdc_i_mod(child + root, p), tag, g, &reqs[n]);
        if (st) break;
        n++;
    }
    mdc_status st2 = mdc_waitall(reqs, n);
    if (st) return st;
    if (st2) return st2;
    if (rel) {
        int end = rel + mask < p ? rel + mask : p;
        size_t bytes = span_bytes(off, len, rel, end);
        if (bytes) st = mdc_send(b, bytes, mdc_i_mod(rel - mask + root, p), tag, g);
    }
    return st;
}

/* The root of a gather: each child's subtree (relative ranks [c, e)) lands straight at its
 * place in recvbuf when its ranks do not wrap past p - 1 (always with root 0), else in
 * scratch and then in two pieces; the own block is copied once the receives are posted. The same
 * messages, in the same order, as mdc_i_binomial_gather at relative rank 0. */
static mdc_status gather_root(mdc_group *g, int root, char *recvbuf, const void *mine, size_t bs, int tag) {
    int p = mdc_group_size(g), n = 0, wc = 0, we = 0;
    mdc_request *reqs[32];
    char *wrap = NULL;
    mdc_status st = MDC_OK;
    for (int mask = 1; mask < p && !st; mask <<= 1) {
        int c = mask, e = c + mask < p ? c + mask : p, r0 = (c + root) % p;
        size_t bytes = (size_t)(e - c) * bs;
        char *dst = recvbuf + (size_t)r0 * bs;
        if (r0 + (e - c) > p) { /* wraps: at most one subtree does */
            if ((st = mdc_i_alloc((void **)&wrap, bytes, "gather binomial"))) break;
            dst = wrap, wc = c, we = e;
        }
        if (!(st = mdc_irecv(dst, bytes, r0, tag, g, &reqs[n]))) n++;
    }
    if (!st && mine != recvbuf + (size_t)root * bs) memcpy(recvbuf + (size_t)root * bs, mine, bs);
    mdc_status st2 = mdc_waitall(reqs, n);
    if (!st && !st2 && wrap) {
        size_t head = (size_t)(p - (wc + root) % p); /* blocks up to rank p - 1 */
        memcpy(recvbuf + (size_t)((wc + root) % p) * bs, wrap, head * bs);
        memcpy(recvbuf, wrap + head * bs, ((size_t)(we - wc) - head) * bs);
    }
    mdc_i_free(wrap);
    return st ? st : st2;
}

mdc_status mdc_gather_binomial(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    size_t bs = count * mdc_dtype_size(t);
    if (bs == 0) return MDC_OK;
    if (me == root) { /* in place: the own block is already at its place */
        int inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
        return gather_root(g, root, recvbuf, inplace ? (char *)recvbuf + (size_t)root * bs : sendbuf, bs,
                           MDC_I_TAG(MDC_COLL_GATHER, 0));
    }
    size_t *off;
    char *base;
    mdc_status st = mdc_i_binomial_nonroot(p, rel, bs, (void *)sendbuf, &off, &base, "gather binomial");
    if (st) return st;
    if (base != sendbuf) memcpy(base, sendbuf, bs); /* a leaf sends its own block from where it is */
    st = mdc_i_binomial_gather(g, root, base, off, off + p, MDC_I_TAG(MDC_COLL_GATHER, 0));
    if (base != sendbuf) mdc_i_free(base);
    free(off);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int m = mdc_i_largest_subtree(s->p);
    size_t bs = s->count * mdc_dtype_size(s->t);
    mdc_i_sched_formula(s, (double)m * (double)bs,
                        "m/p n  (m = %d: the root's largest subtree; the root "
                        "receives (p-1)/p n)",
                        m);
    return mdc_i_sched_binomial_blocks(s, 0);
}

static double cost(const mdc_i_cost_in *x) { return x->lg * x->a + x->f * x->n * x->b; }

const mdc_i_algo mdc_i_algo_gather_binomial = {
    .info = {"binomial", "mdc_gather_binomial", "binomial tree to the root, subtrees concatenated",
             "lg p a + (p-1)/p n b"},
    .coll = MDC_COLL_GATHER,
    .cost = cost,
    .schedule = schedule,
    .run.gather = mdc_gather_binomial,
};
