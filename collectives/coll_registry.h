/* The algorithm registry (as MPICH's coll_algorithms list): one descriptor per collective
 * algorithm, defined at the end of the algorithm's own file (collectives/<coll>_<algo>.c), with
 * everything the rest of the code needs to know about it: its name and listing text, its
 * collective, its entry point, its restrictions, its alpha-beta-gamma cost and the builder of
 * the schedule `minidc explain` prints. The listing (mdc_coll_algo_at), forcing, the cost model
 * (coll_select.c), the dispatchers (allreduce.c, ...) and mdc_schedule_build all read it, so an
 * algorithm is added by writing its file and one line of MDC_I_ALGORITHMS. Not installed. */
#ifndef MINIDC_COLL_REGISTRY_H
#define MINIDC_COLL_REGISTRY_H

#include "coll_internal.h"
#include "minidc/schedule.h"

/* What a cost function sees: the call (p ranks, n bytes as mdc_coll_cost_params counts them)
 * and the links, with the terms the formulas share computed once, in docs/design.md's notation.
 * Only called for p > 1. */
typedef struct {
    int p, p2, fold;          /* ranks; p2 the largest power of two <= p; fold: p != p2 */
    double P, n;              /* p and the bytes, as doubles */
    double lg, lg2, f;        /* ceil(lg p), ceil(lg p2), (p-1)/p */
    double a, b, g, cp;       /* alpha and beta (the network's once the group spans nodes), gamma, and
                         * c = 2/3 gamma: a local copy reads and writes each byte where a
                         * reduction moves 3 */
    const mdc_cost_params *m; /* both link classes and the node size (hierarchical) */
} mdc_i_cost_in;

/* Restrictions and preferences (the descriptor's flags). */
enum {
    /* Its cost applies only to a group of several virtual nodes of equal size, more than one
     * rank each (elsewhere the cost is HUGE_VAL, so `auto` never picks it). */
    MDC_I_NEEDS_NODES = 1,
    /* On the host's clock it wins a tie of the cost model against the algorithms listed
     * before it (the reason is in the algorithm's file). */
    MDC_I_HOST_WINS_TIE = 2,
    /* Its members do different things (a tree's root, inner members and leaves), so predict
     * cannot mirror it over a folded group: it replays the schedule there (replay.c). */
    MDC_I_ASYMMETRIC = 4,
};

typedef struct {
    mdc_algo_info info; /* name, function, summary and the cost formula as text */
    mdc_coll coll;
    unsigned flags; /* MDC_I_NEEDS_NODES, MDC_I_HOST_WINS_TIE */
    /* On the host's clock, with three or more ranks to a core, calls of at least this many
     * bytes take this algorithm whatever the cost model says (0: never). */
    size_t host_crowded_min;
    double (*cost)(const mdc_i_cost_in *x);  /* seconds; the code of info.cost */
    mdc_status (*schedule)(mdc_schedule *s); /* fills the messages of s (mdc_schedule_build) */
    union {                                  /* the entry point, by the collective's signature (algorithms.h) */
        mdc_status (*allreduce)(const void *, void *, size_t, mdc_dtype, mdc_op, mdc_group *);
        mdc_status (*reduce_scatter)(const void *, void *, const size_t *, mdc_dtype, mdc_op, mdc_group *);
        mdc_status (*allgather)(const void *, void *, const size_t *, const size_t *, mdc_dtype, mdc_group *);
        mdc_status (*bcast)(void *, size_t, mdc_dtype, int, mdc_group *);
        mdc_status (*reduce)(const void *, void *, size_t, mdc_dtype, mdc_op, int, mdc_group *);
        mdc_status (*gather)(const void *, void *, size_t, mdc_dtype, int, mdc_group *);
        mdc_status (*scatter)(const void *, void *, size_t, mdc_dtype, int, mdc_group *);
        mdc_status (*alltoall)(const void *, void *, size_t, mdc_dtype, mdc_group *);
        mdc_status (*alltoallv)(const void *, const size_t *, const size_t *, void *, const size_t *, const size_t *,
                                mdc_dtype, mdc_group *);
        mdc_status (*barrier)(mdc_group *);
    } run;
} mdc_i_algo;

/* Every algorithm, grouped by collective, in listing order: the order `--list` prints and
 * mdc_coll_algo_at counts, and the order ties of the cost model go by (the first listed wins). */
/* clang-format off */
#define MDC_I_ALGORITHMS(X) \
    X(allreduce_ring) \
    X(allreduce_recursive_doubling) \
    X(allreduce_rabenseifner) \
    X(allreduce_reduce_bcast) \
    X(allreduce_hierarchical) \
    X(allreduce_tree) \
    X(reduce_scatter_ring) \
    X(reduce_scatter_recursive_halving) \
    X(reduce_scatter_pairwise) \
    X(allgather_ring) \
    X(allgather_recursive_doubling) \
    X(allgather_bruck) \
    X(allgather_direct) \
    X(bcast_binomial) \
    X(bcast_scatter_allgather) \
    X(bcast_pipeline) \
    X(reduce_binomial) \
    X(reduce_rs_gather) \
    X(gather_binomial) \
    X(scatter_binomial) \
    X(alltoall_pairwise) \
    X(alltoall_bruck) \
    X(alltoallv_pairwise) \
    X(barrier_dissemination)
/* clang-format on */

#define MDC_I_DECLARE_ALGO(name) extern const mdc_i_algo mdc_i_algo_##name;
MDC_I_ALGORITHMS(MDC_I_DECLARE_ALGO)
#undef MDC_I_DECLARE_ALGO

/* The i-th algorithm of collective c, or the one named `name` (NULL if none; name may be NULL). */
const mdc_i_algo *mdc_i_algo_at(mdc_coll c, int i);
const mdc_i_algo *mdc_i_algo_named(mdc_coll c, const char *name);

/* Dispatcher support (coll_select.c): the algorithm to run for a call of `bytes` on g, after
 * forcing (mdc_coll_set_algo, MINIDC_ALGO_<COLL>) and otherwise by the cost model. */
const mdc_i_algo *mdc_i_pick(mdc_coll c, size_t bytes, const mdc_group *g);

/* Predict (replay.c): 1 when g's other members are all folded and a cannot be mirrored (its
 * schedule is replayed instead), -1 when only some are (it cannot be timed), 0 otherwise; and the
 * replay, charged to this rank's device. */
int mdc_i_replay_wanted(const mdc_group *g, const mdc_i_algo *a);
mdc_status mdc_i_replay_allreduce(const mdc_i_algo *a, size_t count, mdc_dtype t, mdc_group *g);

/* The pieces the alltoallv shares with the all-to-all's pairwise exchange (alltoall_pairwise.c):
 * the same messages per step and the same cost. */
double mdc_i_alltoall_pairwise_cost(const mdc_i_cost_in *x);
mdc_status mdc_i_alltoall_pairwise_schedule(mdc_schedule *s);

#endif
