/* Process groups: minidc's own, not MPI communicators (docs/design.md rule 1). A group is an
 * ordered list of the transport's ranks and a tag space; a member's index in the list is its
 * rank in the group. Creating one is local (no message), which is why the mesh can build all
 * its groups without a collective; concurrent groups that share ranks keep apart by their tag
 * spaces. The transport (transport.c) reaches a group's members through the accessors below,
 * and the dispatcher keeps its per-group memory here (coll_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "minidc/collectives.h"

struct mdc_group {
    mdc_transport *t;
    int n, me, tag_space;
    int *ranks;
    int nodes, per_node;                  /* mdc_i_node_layout, computed at creation */
    mdc_i_pick_memo memo[MDC_COLL_COUNT]; /* the dispatcher's last picks */
    unsigned long long calls;             /* collectives called on it (coll_check.c) */
};

unsigned long long mdc_i_group_next_call(mdc_group *g) { return ++g->calls; }

mdc_status mdc_group_create(mdc_group **out, mdc_transport *t, const int *world_ranks, int n, int tag_space) {
    *out = NULL;
    if (!t) return mdc_fail(MDC_ERR_INVALID, "mdc_group_create: no transport");
    int size = mdc_transport_size(t), rank = mdc_transport_rank(t);
    if (n < 1 || !world_ranks) return mdc_fail(MDC_ERR_INVALID, "mdc_group_create: empty group");
    if (tag_space < 0 || tag_space >= MDC_MAX_TAG_SPACES)
        return mdc_fail(MDC_ERR_INVALID, "mdc_group_create: tag space %d outside 0..%d", tag_space,
                        MDC_MAX_TAG_SPACES - 1);
    int me = -1;
    for (int i = 0; i < n; i++) {
        if (world_ranks[i] < 0 || world_ranks[i] >= size)
            return mdc_fail(MDC_ERR_INVALID, "mdc_group_create: rank %d: member %d is world rank %d, outside 0..%d",
                            rank, i, world_ranks[i], size - 1);
        for (int j = 0; j < i; j++)
            if (world_ranks[j] == world_ranks[i])
                return mdc_fail(MDC_ERR_INVALID, "mdc_group_create: world rank %d listed twice", world_ranks[i]);
        if (world_ranks[i] == rank) me = i;
    }
    if (me < 0) return mdc_fail(MDC_ERR_INVALID, "mdc_group_create: rank %d is not a member", rank);
    mdc_group *g = calloc(1, sizeof *g);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (!g || !ranks) {
        free(g);
        free(ranks);
        return mdc_fail(MDC_ERR_OOM_HOST, "group of %d", n);
    }
    memcpy(ranks, world_ranks, (size_t)n * sizeof *ranks);
    g->t = t;
    g->n = n;
    g->me = me;
    g->tag_space = tag_space;
    g->ranks = ranks;
    g->nodes = mdc_i_node_layout(g, &g->per_node, NULL);
    *out = g;
    return MDC_OK;
}

mdc_status mdc_group_world(mdc_group **out, mdc_transport *t) {
    *out = NULL;
    if (!t) return mdc_fail(MDC_ERR_INVALID, "mdc_group_world: no transport");
    int size = mdc_transport_size(t);
    int *ranks = malloc((size_t)size * sizeof *ranks);
    if (!ranks) return mdc_fail(MDC_ERR_OOM_HOST, "world group");
    for (int i = 0; i < size; i++) ranks[i] = i;
    mdc_status st = mdc_group_create(out, t, ranks, size, 0);
    free(ranks);
    return st;
}

void mdc_group_free(mdc_group *g) {
    if (!g) return;
    free(g->ranks);
    free(g);
}

int mdc_group_rank(const mdc_group *g) { return g->me; }
int mdc_group_size(const mdc_group *g) { return g->n; }
int mdc_group_world_rank(const mdc_group *g, int i) { return g->ranks[i]; }
mdc_transport *mdc_group_transport(const mdc_group *g) { return g->t; }
/* The memo is a cache: it changes under a const group without changing what the group is. */
mdc_i_pick_memo *mdc_i_group_memo(const mdc_group *g, mdc_coll c) {
    return (unsigned)c < MDC_COLL_COUNT ? (mdc_i_pick_memo *)&g->memo[c] : NULL;
}
int mdc_i_group_tag_space(const mdc_group *g) { return g->tag_space; }
int mdc_i_group_nodes(const mdc_group *g, int *per_node) {
    *per_node = g->per_node;
    return g->nodes;
}
