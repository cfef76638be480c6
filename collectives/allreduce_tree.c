/* Allreduce over NCCL's trees: a chain inside each node, a double binary tree across nodes.
 *
 * Algorithm: the vector is cut in two halves, each reduced up one tree and broadcast back down
 *   it, in chunks of the pipeline chunk (mdc_coll_ring_chunk, else 1 MiB). With G members on each
 *   of N nodes, tree h's member (k, i) (node k, local index i) passes partial sums along its node's
 *   chain towards the head (local 0 for tree 0, G-1 for tree 1), and the heads form a binary tree
 *   over the nodes: the in-order tree of positions 1..N (position v's children v -+ lowbit(v)/2),
 *   node k at position k+1 in tree 0 and, in tree 1, at N-k (N even: the mirror) or k+2 mod N
 *   (odd: the shift), so a node that is a leaf of one tree is inner in the other and every link
 *   carries about the same bytes. A member adds its children's partials into its own (own OP
 *   chain child OP left OP right), the root of each tree holds that half's sum, and the sum goes
 *   back down unchanged: every rank ends with the root's bits.
 *   The chunks move in lock steps: with D the deeper tree's depth and d a member's depth, chunk s
 *   (the halves' chunks interleaved) goes up from depth d at step s + D - d and down from depth d
 *   at step s + D + d, so a link carries a new chunk every step in both directions.
 * Source: NCCL's tree algorithm (Sanders, Speck, Traeff 2009: two binary trees, each inner in the
 *   other's leaves, for full bandwidth), chain inside the node as NCCL builds it.
 * Restrictions: none; unequal or unknown nodes: every member is a node of its own.
 * Cost: (m + 2D - 1)(a + 2 c b) + n g, m chunks of c bytes, D = G - 1 + the node tree's depth. */
#include <math.h>

#include "schedule_build.h"

enum { TAG_UP = 40, TAG_DOWN = 42 }; /* + the tree */

/* The two trees over p members: per tree and member its parent, depth and three children (the
 * chain's, then the node tree's left and right; -1: none), D the largest depth. */
typedef struct {
    int p, D;
    int *parent[2], *depth[2], *child[2];
} trees;

static int lowbit(int v) { return v & -v; }

/* The right child of position v in the in-order tree of 1..n (0: none), its subtree's first
 * position that exists. */
static int right_of(int v, int n) {
    int r = v + lowbit(v) / 2;
    while (r > n && lowbit(r) > 1) r -= lowbit(r) / 2;
    return lowbit(v) > 1 && r <= n ? r : 0;
}

static int node_at(int h, int v, int n) { return h == 0 ? v - 1 : n % 2 == 0 ? n - v : (v + n - 2) % n; }
static int pos_of(int h, int k, int n) { return h == 0 ? k + 1 : n % 2 == 0 ? n - k : (k + 1) % n + 1; }

static void trees_free(trees *t) { free(t->parent[0]); }

/* mem[k G + i]: the group index of node k's i-th member. */
static mdc_status trees_build(trees *t, int p, int G, const int *mem) {
    int N = p / G, *all = malloc(sizeof(int) * ((size_t)p * 10 + (size_t)N * 2));
    if (!all) return mdc_fail(MDC_ERR_OOM_HOST, "allreduce tree: the trees");
    t->p = p, t->D = 0;
    int *ndepth = all + (size_t)p * 10, *npar = ndepth + N;
    for (int h = 0; h < 2; h++) {
        t->parent[h] = all + (size_t)p * 5 * h, t->depth[h] = t->parent[h] + p, t->child[h] = t->depth[h] + p;
        for (int k = 0; k < N; k++) npar[k] = -1;
        for (int v = 1; v <= N; v++) {
            int l = lowbit(v) > 1 ? v - lowbit(v) / 2 : 0, r = right_of(v, N);
            if (l) npar[node_at(h, l, N)] = node_at(h, v, N);
            if (r) npar[node_at(h, r, N)] = node_at(h, v, N);
        }
        for (int k = 0; k < N; k++) { /* the depth of node k: its path to the root */
            ndepth[k] = 0;
            for (int a = k; npar[a] >= 0; a = npar[a]) ndepth[k]++;
        }
        int head = h == 0 ? 0 : G - 1, up = h == 0 ? -1 : 1; /* towards the head */
        for (int k = 0; k < N; k++)
            for (int i = 0; i < G; i++) {
                int m = mem[k * G + i], *c = t->child[h] + 3 * m, v = pos_of(h, k, N);
                c[0] = c[1] = c[2] = -1;
                int away = i - up;
                if (away >= 0 && away < G) c[0] = mem[k * G + away];
                if (i != head) {
                    t->parent[h][m] = mem[k * G + i + up];
                } else {
                    t->parent[h][m] = npar[k] >= 0 ? mem[npar[k] * G + head] : -1;
                    int l = lowbit(v) > 1 ? v - lowbit(v) / 2 : 0, r = right_of(v, N);
                    if (l) c[1] = mem[node_at(h, l, N) * G + head];
                    if (r) c[2] = mem[node_at(h, r, N) * G + head];
                }
                t->depth[h][m] = abs(i - head) + ndepth[k];
                if (t->depth[h][m] > t->D) t->D = t->depth[h][m];
            }
    }
    return MDC_OK;
}

/* The chunks: the halves' chunks interleaved (half 0's k-th, then half 1's); slot s is chunk
 * [off[s], off[s] + len[s]) of the vector, going over tree tree[s]. */
typedef struct {
    int S;
    size_t *off, *len;
    int *tree;
} slots;

static mdc_status slots_build(slots *sl, size_t count, size_t chunk) {
    size_t hoff[2], hlen[2], m[2];
    mdc_i_partition(count, 2, hoff, hlen);
    for (int h = 0; h < 2; h++) m[h] = (hlen[h] + chunk - 1) / chunk;
    size_t S = m[0] + m[1];
    sl->off = malloc(S * (2 * sizeof(size_t) + sizeof(int)) + 1);
    if (!sl->off) return mdc_fail(MDC_ERR_OOM_HOST, "allreduce tree: %zu chunks", S);
    sl->len = sl->off + S, sl->tree = (int *)(sl->len + S), sl->S = 0;
    for (size_t k = 0; k < (m[0] > m[1] ? m[0] : m[1]); k++)
        for (int h = 0; h < 2; h++)
            if (k < m[h]) {
                size_t lo = k * chunk, hi = lo + chunk < hlen[h] ? lo + chunk : hlen[h];
                sl->off[sl->S] = hoff[h] + lo, sl->len[sl->S] = hi - lo, sl->tree[sl->S++] = h;
            }
    return MDC_OK;
}

static int slot_ok(const slots *sl, long s, int h) { return s >= 0 && s < sl->S && sl->tree[s] == h; }

/* The group's nodes: mem lists node 0's members, then node 1's, ...; *G per node (1: every
 * member a node of its own, where the nodes are unequal or unknown). */
static mdc_status group_nodes(const mdc_group *g, int **mem, int *G) {
    int p = mdc_group_size(g), *node_of = malloc(sizeof(int) * (size_t)p * 2);
    if (!node_of) return mdc_fail(MDC_ERR_OOM_HOST, "allreduce tree: nodes");
    int N = mdc_i_node_layout(g, G, node_of), n = 0;
    *mem = node_of + p;
    if (N < 1) N = p, *G = 1;
    for (int k = 0; k < N; k++)
        for (int i = 0; i < p; i++)
            if (*G == 1 ? i == k : node_of[i] == k) (*mem)[n++] = i;
    memmove(node_of, *mem, sizeof(int) * (size_t)p);
    *mem = node_of;
    return MDC_OK;
}

mdc_status mdc_allreduce_tree(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    if (mdc_i_allreduce_trivial(sendbuf, recvbuf, count, t, g)) return MDC_OK;
    int p = mdc_group_size(g), me = mdc_group_rank(g), G = 1, *mem = NULL;
    size_t esz = mdc_dtype_size(t), chunk = mdc_i_pipeline_chunk(mdc_coll_ring_chunk(), esz) / esz;
    char *rb = recvbuf, *tmp = NULL;
    if (sendbuf != recvbuf && !mdc_host_dry()) memcpy(recvbuf, sendbuf, count * esz);
    trees tr = {0};
    slots sl = {0};
    mdc_status st = group_nodes(g, &mem, &G);
    if (st) return st;
    if (!(st = trees_build(&tr, p, G, mem)) && !(st = slots_build(&sl, count, chunk)))
        st = mdc_i_alloc((void **)&tmp, 6 * chunk * esz, "allreduce tree");
    for (long T = 0; !st && T < sl.S + 2L * tr.D - 1; T++) {
        mdc_request *rq[8] = {NULL}, *sq[8] = {NULL};
        int nr = 0, ns = 0;
        for (int h = 0; h < 2 && !st; h++) { /* the children's partials of the chunk going up */
            long s = T - tr.D + tr.depth[h][me] + 1;
            for (int j = 0; j < 3 && !st && slot_ok(&sl, s, h); j++)
                if (tr.child[h][3 * me + j] >= 0)
                    st = mdc_irecv(tmp + (size_t)(3 * h + j) * chunk * esz, sl.len[s] * esz, tr.child[h][3 * me + j],
                                   MDC_I_TAG(MDC_COLL_ALLREDUCE, TAG_UP + h), g, &rq[nr++]);
        }
        for (int h = 0; h < 2 && !st; h++) { /* the sum coming down */
            long s = T - tr.D - tr.depth[h][me] + 1;
            if (tr.parent[h][me] >= 0 && slot_ok(&sl, s, h))
                st = mdc_irecv(rb + sl.off[s] * esz, sl.len[s] * esz, tr.parent[h][me],
                               MDC_I_TAG(MDC_COLL_ALLREDUCE, TAG_DOWN + h), g, &rq[nr++]);
        }
        for (int h = 0; h < 2 && !st; h++) { /* this member's partial up */
            long s = T - tr.D + tr.depth[h][me];
            if (tr.parent[h][me] >= 0 && slot_ok(&sl, s, h))
                st = mdc_isend(rb + sl.off[s] * esz, sl.len[s] * esz, tr.parent[h][me],
                               MDC_I_TAG(MDC_COLL_ALLREDUCE, TAG_UP + h), g, &sq[ns++]);
        }
        for (int h = 0; h < 2 && !st; h++) { /* the sum down to the children */
            long s = T - tr.D - tr.depth[h][me];
            for (int j = 0; j < 3 && !st && slot_ok(&sl, s, h); j++)
                if (tr.child[h][3 * me + j] >= 0)
                    st = mdc_isend(rb + sl.off[s] * esz, sl.len[s] * esz, tr.child[h][3 * me + j],
                                   MDC_I_TAG(MDC_COLL_ALLREDUCE, TAG_DOWN + h), g, &sq[ns++]);
        }
        if (st) mdc_i_abandon(rq, nr);
        mdc_status w = st ? MDC_OK : mdc_waitall(rq, nr), w2 = mdc_waitall(sq, ns);
        st = st ? st : w ? w : w2;
        for (int h = 0; h < 2 && !st; h++) { /* own OP chain child OP left OP right */
            long s = T - tr.D + tr.depth[h][me] + 1;
            for (int j = 0; j < 3 && slot_ok(&sl, s, h); j++)
                if (tr.child[h][3 * me + j] >= 0)
                    mdc_i_reduce(g, rb + sl.off[s] * esz, rb + sl.off[s] * esz, tmp + (size_t)(3 * h + j) * chunk * esz,
                                 sl.len[s], t, op);
        }
    }
    if (!st) mdc_reduce_finish(recvbuf, count, t, op, p);
    mdc_i_free(tmp);
    free(sl.off);
    trees_free(&tr);
    free(mem);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

/* The code's steps: in step T, the partials going up (tree 0, then 1; each receiver's children
 * in order), then the sums coming down, so every rank's sends and receives come in the order the
 * code posts them. Nodes: ranks r / ranks_per_node share one (unequal: each rank its own). */
static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, rpn = s->ranks_per_node, G = rpn >= p ? p : p % rpn == 0 ? rpn : 1;
    size_t esz = mdc_dtype_size(s->t);
    if (p == 1 || !s->count) {
        mdc_i_sched_formula(s, 0, "n/2 up each tree, n/2 down to each child");
        return MDC_OK;
    }
    int *mem = malloc(sizeof(int) * (size_t)p);
    trees tr = {0};
    slots sl = {0};
    mdc_status st = mem ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    for (int i = 0; !st && i < p; i++) mem[i] = i;
    if (!st && !(st = trees_build(&tr, p, G, mem)))
        st = slots_build(&sl, s->count, mdc_i_pipeline_chunk(s->chunk_bytes, esz) / esz);
    for (long T = 0; !st && T < sl.S + 2L * tr.D - 1; T++) {
        mdc_i_sched_phase(s, (int)T, "chunks up and down the two trees");
        for (int h = 0; h < 2; h++) /* up: receiver y, its children in order */
            for (int y = 0; y < p && !st; y++)
                for (int j = 0; j < 3 && !st; j++) {
                    int c = tr.child[h][3 * y + j];
                    long sc = c >= 0 ? T - tr.D + tr.depth[h][c] : -1;
                    if (c >= 0 && slot_ok(&sl, sc, h))
                        st = mdc_i_sched_add(s, (int)T, c, y, sl.len[sc] * esz, MDC_SCHED_OWN_OP_IN, sl.off[sc],
                                             sl.len[sc], "tree %d up [%zu,%zu)", h, sl.off[sc],
                                             sl.off[sc] + sl.len[sc]);
                }
        for (int h = 0; h < 2; h++) /* down: sender x, its children in order */
            for (int x = 0; x < p && !st; x++) {
                long sc = T - tr.D - tr.depth[h][x];
                for (int j = 0; j < 3 && !st && slot_ok(&sl, sc, h); j++)
                    if (tr.child[h][3 * x + j] >= 0)
                        st = mdc_i_sched_add(s, (int)T, x, tr.child[h][3 * x + j], sl.len[sc] * esz, MDC_SCHED_STORE,
                                             sl.off[sc], sl.len[sc], "tree %d down [%zu,%zu)", h, sl.off[sc],
                                             sl.off[sc] + sl.len[sc]);
            }
    }
    double most = 0; /* the busiest rank's bytes: its halves up, and down to each child */
    for (int r = 0; !st && r < p; r++) {
        double b = 0;
        for (size_t k = 0; k < s->nmsgs; k++) b += s->msgs[k].src == r ? (double)s->msgs[k].bytes : 0;
        if (b > most) most = b;
    }
    mdc_i_sched_formula(s, most, "n/2 up each tree, n/2 down to each child  (the busiest rank)");
    if (!st)
        snprintf(s->note, sizeof s->note,
                 "%d node(s) of %d; %d chunk(s) of up to %zu bytes, half 0 over tree 0, half 1 over tree 1; "
                 "depth %d",
                 p / G, G, sl.S, mdc_i_pipeline_chunk(s->chunk_bytes, esz), tr.D);
    free(sl.off);
    trees_free(&tr);
    free(mem);
    return st;
}

/* m chunks of c bytes (the pipeline chunk), D = G - 1 + ceil(lg N) on G ranks per node, N nodes:
 * the lock steps of the code, each a latency and at most two chunks through a rank's link. */
static double cost(const mdc_i_cost_in *x) {
    int rpn = x->m->ranks_per_node, G = rpn <= 0 || rpn >= x->p ? x->p : x->p % rpn == 0 ? rpn : 1, N = x->p / G;
    double c = (double)mdc_i_pipeline_chunk(mdc_coll_ring_chunk(), 1), m = ceil(x->n / c);
    if (m < 2) m = 2;
    double D = G - 1 + mdc_i_lg_ceil(N), per = x->n / m;
    return (m + 2 * D - 1) * (x->a + 2 * per * x->b) + x->n * x->g;
}

const mdc_i_algo mdc_i_algo_allreduce_tree = {
    .info = {"tree", "mdc_allreduce_tree",
             "NCCL's trees: a chain in each node, a double binary tree across nodes, halves pipelined in chunks",
             "(m + 2D - 1)(a + 2 n/m b) + n g, m chunks, D = G - 1 + lg N"},
    .coll = MDC_COLL_ALLREDUCE,
    .flags = MDC_I_ASYMMETRIC,
    .cost = cost,
    .schedule = schedule,
    .run.allreduce = mdc_allreduce_tree,
};
