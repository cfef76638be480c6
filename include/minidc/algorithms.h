/* Every collective algorithm, callable directly (tests, `minidc explain`, `minidc bench`), the
 * per-collective algorithm listing and the alpha-beta-gamma cost model the dispatchers use.
 *
 * Each algorithm lives in collectives/<coll>_<algo>.c, whose header comment gives the schedule,
 * its source, restrictions and cost, and which ends with the algorithm's registry entry
 * (collectives/coll_registry.h): what mdc_coll_algo_at lists, its cost function and schedule. Algorithms take the same arguments as their dispatcher
 * (collectives.h) but assume they were validated: the dispatchers (mdc_allreduce, ...) check
 * arguments, choose an algorithm and call one of these. Every algorithm works for any group
 * size from 1, any count (0 and counts not divisible by the group size), in place (sendbuf ==
 * recvbuf or MDC_IN_PLACE, MPI's meaning) and every root; reductions apply the AVG division
 * themselves. The same inputs and algorithm give bit-identical results, and every rank of an
 * allreduce ends with bit-identical results. Failures: transport errors (mismatch, timeout,
 * peer failure) and MDC_ERR_OOM_HOST for scratch space; nothing is left allocated. */
#ifndef MINIDC_ALGORITHMS_H
#define MINIDC_ALGORITHMS_H

#include "minidc/collectives.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- allreduce ------------------------------------------------------------------------------ */
mdc_status mdc_allreduce_ring(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g);
mdc_status mdc_allreduce_recursive_doubling(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op,
                                            mdc_group *g);
mdc_status mdc_allreduce_rabenseifner(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op,
                                      mdc_group *g);
mdc_status mdc_allreduce_reduce_bcast(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op,
                                      mdc_group *g);
mdc_status mdc_allreduce_hierarchical(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op,
                                      mdc_group *g);
mdc_status mdc_allreduce_tree(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g);

/* Ring allreduce partition (docs/collectives.md): the buffer is cut into loops of at most
 * p * chunk elements (chunk = ring chunk bytes / element size, at least 1; a ring chunk of 0
 * means one loop). In a loop starting at element `base` with `rem` elements left, the real
 * chunk is q = min(chunk, ceil(rem / p)) and chunk c covers [base + c q, base + min(rem, (c+1) q)),
 * possibly empty. chunk_elems = 0: one loop. Returns the number of loops (0 if count is 0). */
size_t mdc_allreduce_ring_loops(size_t count, int p, size_t chunk_elems);
/* Offset and length of chunk c (0..p-1) of loop `loop`. */
void mdc_allreduce_ring_chunk(size_t count, int p, size_t chunk_elems, size_t loop, int c, size_t *off, size_t *len);

/* ---- reduce_scatter (per-rank counts; the equal-block form passes counts[i] = count) ------------ */
mdc_status mdc_reduce_scatter_ring(const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t, mdc_op op,
                                   mdc_group *g);
mdc_status mdc_reduce_scatter_recursive_halving(const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t,
                                                mdc_op op, mdc_group *g);
mdc_status mdc_reduce_scatter_pairwise(const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t, mdc_op op,
                                       mdc_group *g);

/* ---- allgather (per-rank counts; displs NULL = packed in rank order) ---------------------------- */
mdc_status mdc_allgather_ring(const void *sendbuf, void *recvbuf, const size_t *counts, const size_t *displs,
                              mdc_dtype t, mdc_group *g);
mdc_status mdc_allgather_recursive_doubling(const void *sendbuf, void *recvbuf, const size_t *counts,
                                            const size_t *displs, mdc_dtype t, mdc_group *g);
mdc_status mdc_allgather_bruck(const void *sendbuf, void *recvbuf, const size_t *counts, const size_t *displs,
                               mdc_dtype t, mdc_group *g);
mdc_status mdc_allgather_direct(const void *sendbuf, void *recvbuf, const size_t *counts, const size_t *displs,
                                mdc_dtype t, mdc_group *g);

/* ---- rooted ------------------------------------------------------------------------------------ */
mdc_status mdc_bcast_binomial(void *buf, size_t count, mdc_dtype t, int root, mdc_group *g);
mdc_status mdc_bcast_scatter_allgather(void *buf, size_t count, mdc_dtype t, int root, mdc_group *g);
mdc_status mdc_bcast_pipeline(void *buf, size_t count, mdc_dtype t, int root, mdc_group *g);
mdc_status mdc_reduce_binomial(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, int root,
                               mdc_group *g);
mdc_status mdc_reduce_rs_gather(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, int root,
                                mdc_group *g);
mdc_status mdc_gather_binomial(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g);
mdc_status mdc_scatter_binomial(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g);

/* ---- all-to-all and barrier ---------------------------------------------------------------------- */
mdc_status mdc_alltoall_pairwise(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_group *g);
mdc_status mdc_alltoall_bruck(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_group *g);
mdc_status mdc_alltoallv_pairwise(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                                  const size_t *recvcounts, const size_t *rdispls, mdc_dtype t, mdc_group *g);
mdc_status mdc_barrier_dissemination(mdc_group *g);

/* ---- listing and cost model ------------------------------------------------------------------- */

typedef struct {
    const char *name;     /* "ring", as mdc_coll_set_algo and MINIDC_ALGO_<COLL> take it */
    const char *function; /* "mdc_allreduce_ring" */
    const char *summary;  /* one line: the schedule */
    const char *cost;     /* the alpha-beta-gamma formula, as text */
} mdc_algo_info;

/* Number of algorithms of a collective and the i-th one (NULL if out of range). */
int mdc_coll_algo_count(mdc_coll c);
const mdc_algo_info *mdc_coll_algo_at(mdc_coll c, int i);
/* Index of an algorithm by name, -1 if unknown. */
int mdc_coll_algo_find(mdc_coll c, const char *name);
/* Adds an allreduce algorithm at run time (a user's own, a course lab's): it is listed after the
 * built-in ones and runs where it is forced by name (mdc_coll_set_algo, MINIDC_ALGO_ALLREDUCE);
 * `auto` never picks it (it has no cost model) and explain has no builder for it. The name must
 * be new; the strings are copied. MDC_ERR_INVALID otherwise (at most 16 are added). */
mdc_status mdc_coll_register_allreduce(const char *name, const char *summary,
                                       mdc_status (*fn)(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t,
                                                        mdc_op op, mdc_group *g));
/* The forced algorithm's name, or "auto". */
const char *mdc_coll_get_algo(mdc_coll c);

/* Link parameters of the cost model: alpha s/message, beta s/byte, gamma s/byte reduced; the
 * _inter pair is the link between virtual nodes; ranks_per_node >= p means one node. */
typedef struct {
    double alpha, beta, gamma;
    double alpha_inter, beta_inter;
    int ranks_per_node;
} mdc_cost_params;

/* Modelled time (s) of `algo` for p ranks and `bytes` (docs/design.md: allreduce, bcast, reduce: the
 * vector; reduce_scatter, allgather: the full buffer S = p blocks; gather, scatter: the root's
 * buffer; alltoall(v): one rank's send buffer). Returns -1 for an unknown algorithm, and a
 * huge value where the algorithm does not apply (hierarchical on one node). lg p is ceil(log2 p);
 * non-powers of two add the fold's two steps to recursive doubling/halving and Rabenseifner. */
double mdc_coll_cost_params(mdc_coll c, const char *algo, int p, size_t bytes, const mdc_cost_params *m);
/* One link class for every pair (one node). */
double mdc_coll_cost(mdc_coll c, const char *algo, int p, size_t bytes, double alpha, double beta, double gamma);
/* The parameters the dispatcher uses for group g: the device's NVLink and network figures
 * (mdc_device_get_spec), gamma = 3 / HBM bandwidth; without a device, a laptop's: alpha 2 us,
 * beta 1/(8 GB/s), gamma 1/(4 GB/s). */
void mdc_coll_group_params(const mdc_group *g, mdc_cost_params *out);
/* The host's parameters for p ranks on this machine (alpha 2 us, beta 1/(8 GB/s), gamma
 * 1/(4 GB/s), one link class): fixed, so every rank makes the same choice. */
void mdc_coll_host_params(int p, mdc_cost_params *out);
/* What `auto` optimizes: "device" (default: the group's links, i.e. the emulated device's
 * NVLink/network figures, the choice a GPU run would make; the host's figures when there is no
 * device) or "host" (this machine's wall clock, mdc_coll_host_params, whatever the device).
 * MINIDC_PICK=host|device sets it from the environment. */
void mdc_coll_set_pick(const char *basis);
const char *mdc_coll_get_pick(void);

#ifdef __cplusplus
}
#endif
#endif
