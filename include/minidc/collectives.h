/* Collectives built from point-to-point messages.
 *
 * The transport (collectives/transport.c) is the only code that calls MPI point-to-point.
 * Groups are minidc's own: an ordered list of world ranks plus a tag space; creating one is
 * local. Every message is charged to both ranks' emulated devices on the link class given by
 * their virtual nodes (ranks r / gpus_per_node share a node: NVLink inside, network across). */
#ifndef MINIDC_COLLECTIVES_H
#define MINIDC_COLLECTIVES_H

#include <stddef.h>
#include <stdint.h>

#include "minidc/device.h"
#include "minidc/exact.h"
#include "minidc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- data types and reduction ops --------------------------------------------------------- */

/* MDC_DTYPE_COUNT counts the element-wise types, on which every op is defined. The exact types
 * follow them, reduced only by MDC_SUM, with no MPI type:
 *   MDC_EXACT: one exact accumulator (mdc_exact, minidc/exact.h), summed exactly, so every
 *     algorithm gives the same bits;
 *   MDC_EXACT_F64: a double holding an exact sum of floats; a sum of two is their sum when that
 *     is exact (TwoSum's error is 0), else NaN, which every later sum keeps: the result is the
 *     exact sum or NaN, never a rounded value (exact mode's cheap first pass, mdc_exact_reduce).
 * MDC_DTYPE_END is one past the last dtype. */
typedef enum {
    MDC_F32 = 0,
    MDC_F64,
    MDC_F16,
    MDC_BF16,
    MDC_I32,
    MDC_I64,
    MDC_U8,
    MDC_DTYPE_COUNT,
    MDC_EXACT = MDC_DTYPE_COUNT,
    MDC_EXACT_F64,
    MDC_DTYPE_END
} mdc_dtype;
typedef enum { MDC_SUM = 0, MDC_PROD, MDC_MIN, MDC_MAX, MDC_AVG, MDC_OP_COUNT } mdc_op;

size_t mdc_dtype_size(mdc_dtype t);
const char *mdc_dtype_name(mdc_dtype t);
const char *mdc_op_name(mdc_op op);
/* Element i of a buffer of type t, read as / written from a double (f16/bf16 through f32 with
 * round-to-nearest-even; integers by C conversion, u8 via int; exact: get rounds the sum to
 * the nearest double, set stores an accumulator holding v, mdc_exact_add_f64). For tests,
 * tools, benchmarks. */
double mdc_dtype_get(const void *buf, mdc_dtype t, size_t i);
void mdc_dtype_set(void *buf, mdc_dtype t, size_t i, double v);
/* Parses "f32", "bf16", ..., "exact"; "sum", "avg", ...; returns -1 if unknown. */
int mdc_dtype_parse(const char *s);
int mdc_op_parse(const char *s);

/* inout[i] = inout[i] OP in[i] for count elements (AVG reduces as SUM; the division by the
 * group size happens once at the end: mdc_reduce_finish). f16/bf16 are widened to f32, reduced,
 * and rounded to nearest-even each call, as a GPU ring does; exact adds accumulators (SUM only:
 * other ops leave inout as it is). Deterministic, no threads. */
void mdc_reduce_local(void *inout, const void *in, size_t count, mdc_dtype t, mdc_op op);
/* For AVG: buf[i] /= n (integers: truncating division). No-op for other ops. */
void mdc_reduce_finish(void *buf, size_t count, mdc_dtype t, mdc_op op, int n);

/* ---- transport ---------------------------------------------------------------------------- */

/* The per-process transport context: the MPI communicator it sends on (MPI_COMM_WORLD for
 * minidc programs; any intracommunicator for the interposer), this process's device (may be
 * NULL: no accounting) and the virtual node size. Opaque. */
typedef struct mdc_transport mdc_transport;

/* `mpi_comm` is an MPI_Comm passed as a pointer to avoid mpi.h here (MPI_Comm *). The
 * transport copies the handle; the device is borrowed (not freed). MPI must be initialized. */
mdc_status mdc_transport_create(mdc_transport **out, const void *mpi_comm, mdc_device *dev, int gpus_per_node);
void mdc_transport_free(mdc_transport *t); /* NULL is a no-op */
int mdc_transport_rank(const mdc_transport *t);
int mdc_transport_size(const mdc_transport *t);
mdc_device *mdc_transport_device(const mdc_transport *t);
/* The most requests (mdc_isend/mdc_irecv, each at most one MPI request per GiB) this rank had
 * posted and not yet completed at once since the transport began or the last reset: every
 * collective keeps it at or below MDC_REQUESTS_BOUND(p) for a group of p, whatever the message
 * size, chunk or slice setting (docs/collectives.md). */
#define MDC_REQUESTS_BOUND(p) (2 * (size_t)(p) + 8)
size_t mdc_transport_requests_hwm(const mdc_transport *t);
void mdc_transport_reset_requests_hwm(mdc_transport *t);
/* Link class between two world ranks (same virtual node: NVLINK, else NET). */
mdc_link mdc_transport_link(const mdc_transport *t, int world_a, int world_b);
/* Predict's transport (collectives/transport_dry.c): messages carry their size and stamps and no
 * payload (each is one small MPI message), and the world is the mesh `dims` (axes fastest
 * first, e.g. tp cp ep dp pp) of which only one rank per role runs: the ranks whose coordinates
 * on the axes in `folded` (bit i: axis i) are 0. This process becomes the mesh rank its MPI
 * rank names among those representatives (in rank order); mdc_transport_rank and _size give the
 * mesh's. A message to a folded rank goes to its representative, which takes it where it
 * receives from a rank of the sender's role: on a mesh symmetric over the folded axes it is
 * the message the folded rank would have received, at the same virtual time. The MPI size must
 * equal the number of representatives. Call before creating any group. */
mdc_status mdc_transport_set_dry(mdc_transport *t, int naxes, const int *dims, unsigned folded);
/* The representative of mesh rank r (r itself without folding). */
int mdc_transport_rep(const mdc_transport *t, int r);
/* Mirrored messages whose size differed from the receive that took them (a ring's uneven chunks:
 * the folded prediction is then approximate by that many bytes); 0 when exact. */
double mdc_transport_fold_mismatch(const mdc_transport *t);
/* The traffic class of the messages of tag space `tag_space` (default MDC_TRAFFIC_OTHER): each
 * message's time is charged to its class (mdc_dev_counters.t_comm_by, t_idle_by). */
void mdc_transport_set_traffic(mdc_transport *t, int tag_space, mdc_traffic k);
/* Bound on waiting for a peer, seconds (default 120; MINIDC_TIMEOUT env). A wait that exceeds
 * it returns MDC_ERR_TIMEOUT naming the peer, so a dead rank never hangs the others. */
void mdc_transport_set_timeout(mdc_transport *t, double seconds);
/* Sends this rank's failure to every other rank (best effort) so peers stop with MDC_ERR_PEER
 * instead of waiting for the timeout. */
void mdc_transport_abort_peers(mdc_transport *t, const char *why);

/* How this process's waits slept on their doorbells (collectives/doorbell.c): with more
 * ranks than cores, a wait on a large message sleeps until the peer it waits for rings,
 * instead of yielding. on: doorbells are in use (MINIDC_DOORBELL=0/1 forces); sleeps: sleeps
 * started; rung: sleeps a peer's ring ended; timed_out: sleeps that ended after their limit
 * (1 ms, MINIDC_DOOR_SLEEP_US) without a ring. */
typedef struct {
    int on;
    unsigned long long sleeps, rung, timed_out;
} mdc_wait_stats;
void mdc_wait_stats_get(mdc_wait_stats *out);

/* Fault injection: this rank's next send of 4 bytes or more travels with one exponent bit flipped,
 * as MINIDC_FAULT_CORRUPT's (a planted fault's "message" kind, include/minidc/fault.h). */
void mdc_transport_fault_corrupt_next(mdc_transport *t);

/* Tracing (explain tests, debugging): when set, called for every message this rank posts,
 * with group indices and the user tag. NULL turns it off. */
typedef void (*mdc_trace_fn)(void *ctx, int is_send, int group_rank, int peer, size_t bytes, int tag);
void mdc_transport_set_trace(mdc_transport *t, mdc_trace_fn fn, void *ctx);

/* Default transport for minidc programs (set by mdc_runtime_init in tools). */
void mdc_transport_set_default(mdc_transport *t);
mdc_transport *mdc_transport_default(void);

/* ---- groups ------------------------------------------------------------------------------- */

typedef struct mdc_group mdc_group;

/* A group of `n` world ranks in the given order; this process must be one of them. `tag_space`
 * (0..MDC_MAX_TAG_SPACES-1) keeps concurrent groups apart: two groups that share a pair of ranks
 * and may run collectives concurrently must use different tag spaces. Local, no messages. */
#define MDC_MAX_TAG_SPACES 4096
mdc_status mdc_group_create(mdc_group **out, mdc_transport *t, const int *world_ranks, int n, int tag_space);
/* All ranks of the transport, in order, tag space 0. */
mdc_status mdc_group_world(mdc_group **out, mdc_transport *t);
void mdc_group_free(mdc_group *g);      /* NULL is a no-op */
int mdc_group_rank(const mdc_group *g); /* this process's index in the group */
int mdc_group_size(const mdc_group *g);
int mdc_group_world_rank(const mdc_group *g, int i); /* world rank of group index i */
mdc_transport *mdc_group_transport(const mdc_group *g);

/* ---- point-to-point (group indices) --------------------------------------------------------- */

/* Nonblocking requests; at most MDC_MAX_REQS outstanding per wait call. */
typedef struct mdc_request mdc_request;
mdc_status mdc_isend(const void *buf, size_t bytes, int peer, int tag, mdc_group *g, mdc_request **req);
mdc_status mdc_irecv(void *buf, size_t bytes, int peer, int tag, mdc_group *g, mdc_request **req);
/* Waits politely (MPI_Test, sched_yield, then short sleeps) for all requests; frees them and
 * sets them to NULL. NULL entries are skipped. Charges devices when each completes. */
mdc_status mdc_waitall(mdc_request **reqs, int n);

mdc_status mdc_send(const void *buf, size_t bytes, int peer, int tag, mdc_group *g);
mdc_status mdc_recv(void *buf, size_t bytes, int peer, int tag, mdc_group *g);
mdc_status mdc_sendrecv(const void *sendbuf, size_t sendbytes, int dst, void *recvbuf, size_t recvbytes, int src,
                        int tag, mdc_group *g);

/* ---- collectives -------------------------------------------------------------------------- */
/* Conventions: counts are elements; sendbuf == recvbuf (or sendbuf == MDC_IN_PLACE) means
 * in place, with MPI's meaning of in place for each collective; every rank passes the same
 * count, dtype, op and root, else MDC_ERR_INVALID or MDC_ERR_MISMATCH. The dispatcher
 * (`mdc_allreduce`) chooses an algorithm by the cost model, or the one forced by
 * mdc_coll_set_algo / MINIDC_ALGO_<COLL>=name. */
#define MDC_IN_PLACE ((const void *)1)

typedef enum {
    MDC_COLL_ALLREDUCE = 0,
    MDC_COLL_REDUCE_SCATTER,
    MDC_COLL_ALLGATHER,
    MDC_COLL_BCAST,
    MDC_COLL_REDUCE,
    MDC_COLL_GATHER,
    MDC_COLL_SCATTER,
    MDC_COLL_ALLTOALL,
    MDC_COLL_ALLTOALLV,
    MDC_COLL_BARRIER,
    MDC_COLL_COUNT
} mdc_coll;
const char *mdc_coll_name(mdc_coll c);
/* The collective check: every collective call through the dispatchers is compared across its
 * group first (the call's number, collective, count, dtype, op, root); a member calling
 * something else fails the call on every member with MDC_ERR_MISMATCH naming both (one gather
 * and one broadcast of 6 numbers per call). Off by default; MINIDC_CHECK_COLLECTIVES=1 turns it
 * on. */
void mdc_coll_set_check(int on);
int mdc_coll_check_enabled(void);
int mdc_coll_parse(const char *s);
/* Forces an algorithm ("auto" or NULL restores the cost model; allreduce also takes "nccl", see
 * mdc_coll_prefer_nccl); MDC_ERR_INVALID if unknown. */
mdc_status mdc_coll_set_algo(mdc_coll c, const char *algo);
/* Ring allreduce, reduce-scatter and allgather unless MINIDC_ALGO_<COLL> says otherwise: the
 * bandwidth-optimal algorithms whose bytes equal the textbook formulas, and whose allreduce
 * gives every rank the same bits (training uses them). */
void mdc_coll_prefer_ring(void);
/* The same with allreduce "nccl" (unless MINIDC_ALGO_ALLREDUCE says otherwise): ring or tree,
 * whichever costs less on the group's links, as NCCL's tuning model chooses (predict's default;
 * mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "nccl") or MINIDC_ALGO_ALLREDUCE=nccl anywhere). */
void mdc_coll_prefer_nccl(void);
/* The all-reduce calls this process timed by replaying their schedule (predict: the tree over a
 * folded group, collectives/replay.c). */
unsigned long long mdc_coll_replayed_calls(void);
/* The algorithm the dispatcher would choose for this call (for reports and tests). */
const char *mdc_coll_choose(mdc_coll c, size_t bytes, const mdc_group *g);
/* Ring allreduce chunk size in bytes (0 = one chunk per rank); MINIDC_RING_CHUNK env. */
void mdc_coll_set_ring_chunk(size_t bytes);
size_t mdc_coll_ring_chunk(void);
/* Slice size of reducing exchange steps (bytes; MINIDC_SLICE, default MDC_DEFAULT_SLICE): a
 * message larger than this travels in slices reduced as they land. Results do not depend on it. */
#define MDC_DEFAULT_SLICE (256u << 10)
void mdc_coll_set_slice(size_t bytes);
size_t mdc_coll_slice(void);

mdc_status mdc_allreduce(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g);
/* recvbuf gets block `rank` of `count` elements; sendbuf holds size*count (in place: recvbuf
 * holds size*count and the result lands in its first count elements, as MPI). */
mdc_status mdc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g);
/* Per-rank counts: rank i gets counts[i] elements, blocks laid out in rank order. */
mdc_status mdc_reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t, mdc_op op,
                               mdc_group *g);
mdc_status mdc_allgather(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_group *g);
/* recvbuf: counts[i] elements from rank i at displs[i] (NULL displs = packed in rank order). */
mdc_status mdc_allgatherv(const void *sendbuf, void *recvbuf, const size_t *counts, const size_t *displs, mdc_dtype t,
                          mdc_group *g);
mdc_status mdc_bcast(void *buf, size_t count, mdc_dtype t, int root, mdc_group *g);
mdc_status mdc_reduce(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, int root, mdc_group *g);
mdc_status mdc_gather(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g);
mdc_status mdc_scatter(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g);
mdc_status mdc_alltoall(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_group *g);
mdc_status mdc_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                         const size_t *recvcounts, const size_t *rdispls, mdc_dtype t, mdc_group *g);
mdc_status mdc_barrier(mdc_group *g);

/* ---- exact sums over a group (collectives/exact_reduce.c, minidc/exact.h) ---------------------- */
/* Element i's exact local value as an accumulator (for the elements whose double is NaN). */
typedef void (*mdc_exact_fetch_fn)(void *ctx, size_t i, mdc_exact *out);
typedef struct {
    int map;       /* 1 if the second pass ran (some sum was not exact on some rank) */
    size_t marked; /* elements it summed as accumulators */
    size_t padded; /* the same padded to a multiple of p (the accumulators sent) */
} mdc_exact_reduce_stats;
/* The exact sum over g of n values per rank, rounded once to float. v: this rank's values as
 * doubles (exact sums of floats; NaN where fetch must give the accumulator), overwritten.
 * scatter 0: an allreduce, out gets n floats; 1: a reduce-scatter of p blocks of n/p, out gets
 * this rank's block. Two passes: the doubles (MDC_EXACT_F64, 8 bytes an element), then, only if
 * some sum was not exact, a byte map of those elements and their accumulators (MDC_EXACT).
 * *stats (may be NULL): what the second pass did. Every rank of g calls it. */
mdc_status mdc_exact_reduce(double *v, size_t n, int scatter, float *out, mdc_exact_fetch_fn fetch, void *ctx,
                            mdc_group *g, mdc_exact_reduce_stats *stats);
/* The same as a reduce-scatter of unequal blocks: v holds the blocks of counts[q] elements in
 * rank order (their sum n), out gets this rank's block (counts[rank] floats); fetch's i runs
 * over the n. */
mdc_status mdc_exact_reduce_scatterv(double *v, const size_t *counts, float *out, mdc_exact_fetch_fn fetch, void *ctx,
                                     mdc_group *g, mdc_exact_reduce_stats *stats);
/* The bytes a rank sends in one mdc_exact_reduce with ring algorithms (the training runs'):
 * the doubles (2(p-1)/p x 8n, reduce-scatter (p-1)/p x 8n), the NaN counts (p int64, 16(p-1)),
 * and with the second pass the map (2(p-1)/p x n bytes) and the accumulators (2(p-1)/p x 80
 * x padded). */
double mdc_exact_reduce_bytes(size_t n, int p, int scatter, const mdc_exact_reduce_stats *s);

#ifdef __cplusplus
}
#endif
#endif
