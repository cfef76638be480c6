/* Hierarchical allreduce: reduce-scatter inside the node, allreduce across nodes, allgather
 * inside the node.
 *
 * Algorithm: the group's members are split by virtual node (mdc_transport_link: NVLink inside
 *   a node); with G members on each of N nodes, the vector is cut into G balanced blocks.
 *   1. ring reduce-scatter among the node's members (NCCL order): local index i gets block i;
 *   2. ring allreduce (NCCL order) of block i among the N members with local index i, one per
 *      node, over the network;  3. ring allgather of the G blocks inside the node.
 *   out[e in block i] = the node-level ring sums, combined across nodes in ring order.
 * Source: NCCL's tree/ring split across NVLink and network; Jia et al. 2018 (hierarchical).
 * Restrictions: needs the same number of members on every node; with one node, one member per
 *   node or unequal nodes it runs mdc_allreduce_ring instead.
 * Cost: 2(G-1) a_nvl + 2(G-1)/G n b_nvl + 2(N-1) a_net + 2(N-1)/(N G) n b_net
 *   + ((G-1)/G + (N-1)/(N G)) n gamma. */
#include "schedule_build.h"

int mdc_i_node_layout(const mdc_group *g, int *per_node, int *node_of) {
    int p = mdc_group_size(g);
    const mdc_transport *t = mdc_group_transport(g);
    int *leader = malloc(sizeof(int) * (size_t)p), *cnt = calloc((size_t)p, sizeof(int));
    if (!leader || !cnt) {
        free(leader);
        free(cnt);
        return -1;
    }
    int nodes = 0;
    for (int i = 0; i < p; i++) {
        int wi = mdc_group_world_rank(g, i), k = 0;
        while (k < nodes && mdc_transport_link(t, mdc_group_world_rank(g, leader[k]), wi) != MDC_LINK_NVLINK) k++;
        if (k == nodes) leader[nodes++] = i;
        cnt[k]++;
        if (node_of) node_of[i] = k;
    }
    int per = cnt[0];
    for (int k = 1; k < nodes; k++)
        if (cnt[k] != per) per = -1;
    free(leader);
    free(cnt);
    *per_node = per;
    return per < 0 ? -1 : nodes;
}

mdc_status mdc_allreduce_hierarchical(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op,
                                      mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    int *node_of = malloc(sizeof(int) * (size_t)p * 3);
    if (!node_of) return mdc_fail(MDC_ERR_OOM_HOST, "allreduce hierarchical: layout");
    int G = 0, N = mdc_i_node_layout(g, &G, node_of);
    if (N <= 1 || G <= 1 || count == 0) {
        free(node_of);
        return mdc_allreduce_ring(sendbuf, recvbuf, count, t, op, g);
    }
    int *intra = node_of + p, *inter = intra + p;
    int li = -1, ni = node_of[me], n_in = 0;
    for (int i = 0; i < p; i++)
        if (node_of[i] == ni) {
            if (i == me) li = n_in;
            intra[n_in++] = i;
        }
    /* inter[k] = the member with local index li on node k */
    for (int k = 0; k < N; k++) {
        int seen = 0;
        for (int i = 0; i < p; i++)
            if (node_of[i] == k && seen++ == li) inter[k] = i;
    }
    size_t *off = malloc(sizeof(size_t) * (size_t)(4 * G + 4 * N));
    if (!off) {
        free(node_of);
        return mdc_fail(MDC_ERR_OOM_HOST, "allreduce hierarchical: offsets");
    }
    size_t *len = off + G, *offb = len + G, *lenb = offb + G;
    size_t *o2 = lenb + G, *l2 = o2 + N, *o2b = l2 + N, *l2b = o2b + N;
    mdc_i_partition(count, G, off, len);
    for (int i = 0; i < G; i++) {
        offb[i] = off[i] * esz;
        lenb[i] = len[i] * esz;
    }
    mdc_i_partition(len[li], N, o2, l2);
    for (int k = 0; k < N; k++) {
        o2[k] += off[li];
        o2b[k] = o2[k] * esz;
        l2b[k] = l2[k] * esz;
    }
    char *rb = recvbuf;
    mdc_status st = mdc_i_ring_rs(g, intra, G, li, sendbuf, recvbuf, rb + offb[li], off, len, t, op,
                                  MDC_I_TAG(MDC_COLL_ALLREDUCE, 32));
    if (!st && len[li]) {
        st = mdc_i_ring_rs(g, inter, N, ni, recvbuf, recvbuf, rb + o2b[ni], o2, l2, t, op,
                           MDC_I_TAG(MDC_COLL_ALLREDUCE, 33));
        if (!st) st = mdc_i_ring_ag(g, inter, N, ni, recvbuf, o2b, l2b, NULL, MDC_I_TAG(MDC_COLL_ALLREDUCE, 34));
    }
    if (!st) st = mdc_i_ring_ag(g, intra, G, li, recvbuf, offb, lenb, NULL, MDC_I_TAG(MDC_COLL_ALLREDUCE, 35));
    if (!st) mdc_reduce_finish(recvbuf, count, t, op, p);
    free(off);
    free(node_of);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

/* Hierarchical: ring reduce-scatter inside each node, allreduce of the node's block across
 * nodes (members with the same local index), ring allgather inside the node. */
static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, G = s->ranks_per_node < p ? s->ranks_per_node : p, N = (p + G - 1) / G, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    if (N <= 1 || G <= 1 || p % G || !s->count) {
        mdc_status st = mdc_i_algo_allreduce_ring.schedule(s);
        snprintf(s->note, sizeof s->note,
                 "%s: runs the ring (needs several nodes of equal size, "
                 "more than one rank each)",
                 N <= 1   ? "one node"
                 : G <= 1 ? "one rank per node"
                          : "unequal nodes");
        return st;
    }
    mdc_i_sched_formula(s, 2.0 * (G - 1) / G * (double)n + 2.0 * (N - 1) / ((double)N * G) * (double)n,
                        "2(G-1)/G n NVLink + 2(N-1)/(N G) n network  (G = %d per node, N = %d nodes)", G, N);
    size_t *off = malloc(sizeof(size_t) * (size_t)(2 * G + 2 * N));
    int *mem = malloc(sizeof(int) * (size_t)(G > N ? G : N));
    if (!off || !mem) {
        free(off);
        free(mem);
        return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    }
    size_t *len = off + G, *o2 = len + G, *l2 = o2 + N;
    mdc_i_partition(s->count, G, off, len);
    mdc_status st = MDC_OK;
    /* 1. ring reduce-scatter inside every node (all nodes at once) */
    int s0 = step;
    for (int k = 0; k < N && !st; k++) {
        step = s0;
        for (int i = 0; i < G; i++) mem[i] = k * G + i;
        char lab[32];
        snprintf(lab, sizeof lab, "inside nodes: ");
        st = mdc_i_sched_ring_rs(s, &step, mem, G, off, len, lab);
    }
    /* 2. ring allreduce of block li across the nodes, one ring per local index */
    int s1 = step;
    for (int li = 0; li < G && !st; li++) {
        step = s1;
        if (!len[li]) continue;
        mdc_i_partition(len[li], N, o2, l2);
        for (int k = 0; k < N; k++) o2[k] += off[li], mem[k] = k * G + li;
        st = mdc_i_sched_ring_rs(s, &step, mem, N, o2, l2, "across nodes: ");
        if (!st) st = mdc_i_sched_ring_ag(s, &step, mem, N, o2, l2, 1, "across nodes: ", "piece");
    }
    step = s1 + 2 * (N - 1);
    /* 3. ring allgather inside every node */
    int s2 = step;
    for (int k = 0; k < N && !st; k++) {
        step = s2;
        for (int i = 0; i < G; i++) mem[i] = k * G + i;
        st = mdc_i_sched_ring_ag(s, &step, mem, G, off, len, 1, "inside nodes: ", "block");
    }
    snprintf(s->note, sizeof s->note,
             "%d nodes of %d ranks (ranks r / %d share a node); block i of "
             "the %d balanced blocks is reduced across nodes by the ranks with local index i",
             N, G, G, G);
    free(off);
    free(mem);
    return st;
}

/* G ranks on each of N nodes (MDC_I_NEEDS_NODES: only then does the cost apply): NVLink inside,
 * the network across. */
static double cost(const mdc_i_cost_in *x) {
    const mdc_cost_params *m = x->m;
    int G = m->ranks_per_node, Nn = x->p / G;
    double fg = (G - 1.0) / G, fn = (Nn - 1.0) / ((double)Nn * G);
    return 2 * (G - 1) * m->alpha + 2 * fg * x->n * m->beta + 2 * (Nn - 1) * m->alpha_inter +
           2 * fn * x->n * m->beta_inter + (fg + fn) * x->n * x->g;
}

const mdc_i_algo mdc_i_algo_allreduce_hierarchical = {
    .info = {"hierarchical", "mdc_allreduce_hierarchical",
             "ring reduce-scatter in the node, ring allreduce across nodes, ring allgather in the node",
             "2(G-1) a + 2(G-1)/G n b + 2(N-1) a' + 2(N-1)/(NG) n b' + ((G-1)/G + (N-1)/(NG)) n g"},
    .coll = MDC_COLL_ALLREDUCE,
    .flags = MDC_I_NEEDS_NODES,
    .cost = cost,
    .schedule = schedule,
    .run.allreduce = mdc_allreduce_hierarchical,
};
