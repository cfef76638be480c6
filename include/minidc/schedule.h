/* Schedules: what a collective algorithm does, message by message, computed without MPI.
 *
 * A schedule lists every message of one call (step, sender, receiver, bytes, the elements it
 * carries and whether the receiver reduces them). `minidc explain` prints it; the test
 * tests/mesh/test_explain.c records the real algorithm's messages (mdc_transport_set_trace) and
 * compares them with the schedule rank by rank, and evaluates the schedule's summation
 * expressions in float against the real results bit for bit, so the explanation and the code
 * cannot drift apart.
 *
 * The data model of reductions: every rank r holds a "logical vector" of `vec` elements, at
 * first its own input x_r (allreduce and reduce: `count` elements; reduce_scatter: all p
 * blocks). A message carries elements [off, off + len) of the sender's vector as they were at
 * the start of the step; the receiver stores them, or reduces them into its own. The result is, for allreduce, every rank's vector; for
 * reduce, the root's; for reduce_scatter, block r of rank r's. Data-movement collectives use
 * the same messages with `what` naming the blocks they carry. */
#ifndef MINIDC_SCHEDULE_H
#define MINIDC_SCHEDULE_H

#include <stddef.h>

#include "minidc/algorithms.h"
#include "minidc/collectives.h"
#include "minidc/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the receiver does with a message: stores it, or reduces it as incoming OP own (a
 * ring's partial arriving first) or own OP incoming (a tree's lower half first). The operand
 * order does not change a value (the ops are commutative) but it is printed as the code does it. */
enum { MDC_SCHED_STORE = 0, MDC_SCHED_IN_OP_OWN = 1, MDC_SCHED_OWN_OP_IN = 2 };

typedef struct {
    int step;        /* 0-based; messages of one step happen together */
    int src, dst;    /* group ranks */
    size_t bytes;    /* payload bytes */
    int reduce;      /* MDC_SCHED_STORE, MDC_SCHED_IN_OP_OWN or MDC_SCHED_OWN_OP_IN */
    size_t off, len; /* elements of the logical vector carried (reductions; len 0 otherwise) */
    char what[64];   /* what it carries, for people: "chunk 3 [6,8)", "blocks 2,3" */
} mdc_sched_msg;

typedef struct {
    mdc_coll coll;
    char algo[32];
    int p, root;
    size_t count;   /* the call's count argument (elements) */
    size_t *counts; /* per-rank counts (reduce_scatter, allgather, alltoallv), p entries */
    mdc_dtype t;
    mdc_op op;
    size_t chunk_bytes; /* ring allreduce chunk (0: one chunk per rank) */
    int ranks_per_node; /* hierarchical: ranks r / ranks_per_node share a node */
    size_t vec;         /* elements of the logical vector (reductions) */
    int nsteps, phase_cap;
    char (*phase)[80]; /* nsteps labels: "reduce-scatter 1/3" (phase_cap allocated) */
    mdc_sched_msg *msgs;
    size_t nmsgs, cap;
    char bytes_formula[96];     /* bytes sent per rank, as a formula of p and n (text) */
    double bytes_formula_value; /* its value for this call (the busiest rank) */
    char note[256];             /* partition or special case, for people */
} mdc_schedule;

/* Builds the schedule of `algo` ("ring", ... as mdc_coll_algo_at lists them) for a call of
 * collective c on p ranks with `count` elements per rank (the call's count argument: per block
 * for reduce_scatter/allgather/alltoall, the vector for allreduce/bcast/reduce/gather/scatter)
 * of type t and op (reductions), at `root` (rooted collectives), with the ring chunk size and
 * the virtual node size (hierarchical). `counts` (p entries, may be NULL) gives per-rank counts
 * for the v-variants; alltoallv takes counts[i] as what every rank sends to rank i. Owns
 * everything it allocates: free with mdc_schedule_free. Fails with MDC_ERR_INVALID naming the
 * argument (unknown algorithm, p < 1, root out of range). */
mdc_status mdc_schedule_build(mdc_schedule *s, mdc_coll c, const char *algo, int p, size_t count, const size_t *counts,
                              mdc_dtype t, mdc_op op, int root, size_t chunk_bytes, int ranks_per_node);
void mdc_schedule_free(mdc_schedule *s); /* zeroes *s; freeing a zeroed schedule is a no-op */

/* True for allreduce, reduce_scatter and reduce. */
int mdc_coll_is_reduction(mdc_coll c);

/* The summation expression of element `elem` of the logical vector as rank `rank` holds it
 * at the end, e.g. "((x2 + x3) + x0) + x1" (x_r is rank r's input; AVG appends " / p").
 * Writes at most len bytes (truncating with "..."); returns MDC_ERR_INVALID if elem or rank
 * is out of range or the collective is not a reduction. */
mdc_status mdc_schedule_expr(const mdc_schedule *s, int rank, size_t elem, char *buf, size_t len);

/* The rank that holds the result of element `elem` (allreduce: 0; reduce: the root;
 * reduce_scatter: the owner of elem's block). */
int mdc_schedule_result_rank(const mdc_schedule *s, size_t elem);

/* Evaluates an expression from mdc_schedule_expr in float, in exactly its order, with
 * x[r] for x_r (r < nx). Returns 0 on success, -1 on a syntax error. */
int mdc_expr_eval_f32(const char *expr, const float *x, int nx, float *out);

/* Bytes sent and received by one rank, and messages it sends. */
size_t mdc_schedule_bytes_sent(const mdc_schedule *s, int rank);
size_t mdc_schedule_bytes_recv(const mdc_schedule *s, int rank);
size_t mdc_schedule_msgs_sent(const mdc_schedule *s, int rank);

/* Time of the schedule under the alpha-beta-gamma model (algorithms.h; ranks r and q share a
 * node if r / ranks_per_node == q / ranks_per_node, else the _inter link applies): the sum over
 * steps of the slowest rank's time in that step; a rank's time in a step is the larger of its
 * send and receive sides (each: the largest alpha of its messages plus beta x bytes summed)
 * plus gamma x the bytes it reduces. */
double mdc_schedule_time(const mdc_schedule *s, const mdc_cost_params *m);

/* A schedule holds at most this many messages (about 100 MB): beyond it, listing them teaches
 * nothing and a laptop runs out of memory (e.g. a ring allreduce of 16 M elements in 4-byte
 * chunks). */
#define MDC_SCHEDULE_MAX_MSGS ((size_t)1 << 20)

/* Makes steps 0..step exist (empty labels for new ones), growing the labels geometrically:
 * a schedule can have hundreds of thousands of steps. MDC_ERR_OOM_HOST on failure. */
mdc_status mdc_schedule_step(mdc_schedule *s, int step);

/* Appends a message (builders, tests). Grows the arrays; MDC_ERR_OOM_HOST on failure,
 * MDC_ERR_INVALID past MDC_SCHEDULE_MAX_MSGS. */
mdc_status mdc_schedule_add(mdc_schedule *s, int step, int src, int dst, size_t bytes, int reduce, size_t off,
                            size_t len, const char *what);

#ifdef __cplusplus
}
#endif
#endif
