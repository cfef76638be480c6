/* Internal helpers shared by the collective algorithms (not installed, not public API).
 * Names start with mdc_i_. Every helper returns mdc_status and frees what it allocates. */
#ifndef MINIDC_COLL_INTERNAL_H
#define MINIDC_COLL_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/algorithms.h"
#include "minidc/collectives.h"

/* Tags: each collective owns 64 tags (coll * 64 + phase) so phases of composite algorithms
 * (hierarchical, reduce + broadcast) never match each other's messages. */
#define MDC_I_TAG(coll, phase) ((int)(coll)*64 + (phase))

/* out[i] = a[i] OP b[i] (a is the left operand); out may equal a or b, never overlap partly. */
void mdc_i_reduce3(void *out, const void *a, const void *b, size_t n, mdc_dtype t, mdc_op op);
/* The same, charged to the group's device as a local reduction (gamma term). */
void mdc_i_reduce(mdc_group *g, void *out, const void *a, const void *b, size_t n, mdc_dtype t, mdc_op op);

/* Scratch memory: large blocks come from a small process-wide cache (coll_util.c), so a
 * collective called again with the same sizes reuses pages that are already mapped instead of
 * paying a page fault per 4 KiB of fresh scratch on every call. Records MDC_ERR_OOM_HOST in the
 * detail on failure. Free with mdc_i_free (which also takes plain malloc'ed pointers and NULL). */
mdc_status mdc_i_alloc(void **out, size_t bytes, const char *what);
/* A non-root rank of a binomial gather or scatter of p blocks of bs bytes (rel: its rank
 * relative to the root): the block table (*off: block i at i bs, then p lengths of bs) and its
 * subtree's staging buffer (*base: own itself for a leaf, else allocated; mdc_i_free it when it
 * is not own, free *off). */
mdc_status mdc_i_binomial_nonroot(int p, int rel, size_t bs, void *own, size_t **off, char **base, const char *what);
/* MINIDC_* tuning read strictly (a bad value is named on stderr and `dflt` used). */
double mdc_i_env_num(const char *name, double dflt, double lo, double hi);
size_t mdc_i_env_bytes(const char *name, size_t dflt, size_t hi);
void mdc_i_free(void *p);
/* Frees the cached scratch blocks not in use (mdc_transport_free calls it). */
void mdc_i_scratch_release(void);

/* Sends sbytes to dst and receives rbytes from src at the same time; a side with 0 bytes is
 * skipped (both ends know the size, so the schedule stays matched). */
mdc_status mdc_i_xchg(mdc_group *g, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src,
                      int tag);
/* mdc_i_xchg that also copies cbytes from csrc to cdst (the own block of an allgather or an
 * all-to-all) once both messages are posted, so the copy runs while the peers' handshakes and
 * copies are under way instead of before them. cdst must not overlap sbuf or rbuf. */
mdc_status mdc_i_xchg_copy(mdc_group *g, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src,
                           int tag, void *cdst, const void *csrc, size_t cbytes);

/* Sliced messages (transport.c): the payload travels as one logical message (one stamp, one
 * trace entry, one device charge) in MPI pieces of `slice` bytes, so a receiver can use each
 * piece as it lands (mdc_i_wait_piece) while the next is in flight. Both ends must slice the
 * same way. mdc_i_abandon cancels and frees requests after a failed wait. */
mdc_status mdc_i_isend_sliced(const void *buf, size_t bytes, size_t slice, int peer, int tag, mdc_group *g,
                              mdc_request **req);
mdc_status mdc_i_irecv_sliced(void *buf, size_t bytes, size_t slice, int peer, int tag, mdc_group *g,
                              mdc_request **req);
/* A sliced receive into `window` slots of `slice` bytes at `slots` (room for min(window,
 * pieces) of them) instead of the whole payload: piece k lands in slot k % window
 * (mdc_i_piece_data). Pieces must be waited on in order, and waiting on piece k gives the slots
 * of the pieces before it to the pieces that follow: a receiver that reduces each piece as it
 * lands reads it while it is still in cache. mdc_waitall refuses such a receive (MDC_ERR_INVALID,
 * the requests left as they were) until its last piece has been posted. */
mdc_status mdc_i_irecv_window(void *slots, size_t bytes, size_t slice, int window, int peer, int tag, mdc_group *g,
                              mdc_request **req);
int mdc_i_request_pieces(const mdc_request *r);
mdc_status mdc_i_wait_piece(mdc_request *r, int k);
void *mdc_i_piece_data(const mdc_request *r, int k); /* where piece k of a receive landed */
void mdc_i_abandon(mdc_request **reqs, int n);
/* The job's ranks per online core when every rank is on this host (MPI_LOCALNRANKS equals
 * the world's size), else 0: what the host's pick of an algorithm may look at, the same on
 * every rank. */
double mdc_i_ranks_per_core(const mdc_transport *t);
/* The pipelined broadcast's chunk (bcast_pipeline.c; also its cost and its schedule):
 * chunk_bytes (the ring chunk) if non-zero, else 1 MiB, cut to whole elements of esz bytes
 * (at least one). */
size_t mdc_i_pipeline_chunk(size_t chunk_bytes, size_t esz);

/* Doorbells (doorbell.c): lets a waiting rank sleep until the peer it waits for rings. Ranks
 * are MPI_COMM_WORLD ranks; every call is a no-op (idle: 0) until mdc_i_door_open succeeded.
 * open: once per process, only when `want` (MINIDC_DOORBELL=0/1 overrides) and every rank is
 * on this host; returns 1 when the segment is open (the transport opens it for the peers' pids
 * even where its waits do not sleep on the bells, and then passes them no peer). posted/received: after posting n MPI sends
 * to `to` / completing n MPI receives from `from` (wakes that peer if it sleeps). mark: the
 * peer's count of receives from us, taken before posting a send. idle: 1 when a pending
 * send/receive with `peer` cannot progress until the peer rings. sleep: sleeps (1 ms at most)
 * unless idle(ctx) turns 0 meanwhile. ring_all: wakes every rank (an abort). */
int mdc_i_door_open(int world_rank, int world_size, int local_ranks, int want);
void mdc_i_door_posted(int to, int n);
void mdc_i_door_received(int from, int n);
void mdc_i_door_nudge(int peer); /* wakes peer if it sleeps: one round of MPI progress */
uint32_t mdc_i_door_mark(int peer);
int mdc_i_door_idle(int peer, int is_send, uint32_t mark);
void mdc_i_door_sleep(int (*idle)(void *), void *ctx);
void mdc_i_door_ring_all(void);
/* The state of world rank r's process where the doorbell segment knows its pid (ranks on this
 * host): -1 unknown, 0 running, 1 stopped (SIGSTOP, a debugger), 2 exited, 3 running or
 * stopped (platform.c's fallback cannot tell which). *pid its pid or 0. */
int mdc_i_door_peer_state(int world_rank, int *pid);
/* Appends to buf (NUL-terminated, cap bytes) "; rank R (pid P) is stopped ..." for every other
 * rank of the segment, except `skip`, whose process is stopped or has exited: a rank waited
 * on may be running only because it waits on the one that stopped. */
void mdc_i_door_others(char *buf, size_t cap, int skip);

/* An exchange step of a reducing algorithm: sends sbytes of sbuf to dst while receiving rcount
 * elements from src into tmp, and reduces them as they land: out[i] = tmp[i] OP own[i] when
 * incoming_left, else own[i] OP tmp[i] (the same per-element order as exchanging first and
 * reducing after). Messages above the slice size (mdc_coll_slice) travel sliced, so each slice
 * is reduced while it is still in cache; both ends decide by the message's size alone. out may
 * equal tmp or own; if it overlaps sbuf, the reduction waits for the send. Charges one
 * reduction of rcount elements. */
mdc_status mdc_i_xchg_reduce(mdc_group *g, const void *sbuf, size_t sbytes, int dst, void *tmp, size_t rcount, int src,
                             const void *own, void *out, int incoming_left, mdc_dtype t, mdc_op op, int tag);
/* The two halves of a one-way reducing step: the sender's side and the receiver's side. */
static inline mdc_status mdc_i_send_to_reduce(mdc_group *g, const void *buf, size_t bytes, int dst, mdc_dtype t,
                                              int tag) {
    return mdc_i_xchg_reduce(g, buf, bytes, dst, NULL, 0, dst, NULL, NULL, 0, t, MDC_SUM, tag);
}
static inline mdc_status mdc_i_recv_reduce(mdc_group *g, void *tmp, size_t count, int src, const void *own, void *out,
                                           int incoming_left, mdc_dtype t, mdc_op op, int tag) {
    return mdc_i_xchg_reduce(g, NULL, 0, src, tmp, count, src, own, out, incoming_left, t, op, tag);
}

/* An allreduce with one rank or nothing to reduce: the result is the input (copied unless in
 * place, sendbuf already resolved from MDC_IN_PLACE). Returns 1 when that applied. */
static inline int mdc_i_allreduce_trivial(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_group *g) {
    if (mdc_group_size(g) > 1 && count > 0) return 0;
    if (sendbuf != recvbuf && count) memcpy(recvbuf, sendbuf, count * mdc_dtype_size(t));
    return 1;
}

/* Group index of member i of a member list (NULL list = the group in order). */
static inline int mdc_i_member(const int *mem, int i) { return mem ? mem[i] : i; }
static inline int mdc_i_mod(long a, int n) { return (int)(((a % n) + n) % n); }

/* Ring reduce-scatter over the n members `mem` (this rank is member `pos`), in NCCL's order:
 * block c (elements [off[c], off[c]+len[c]) of src) starts at member c+1 and is accumulated
 * one member at a time around the ring (partial OP own), ending at member c, where the result
 * goes to dst (len[pos] elements). Partial results of forwarded blocks go to work + off[b] when
 * work is not NULL (allreduce: the receive buffer), else to internal scratch. src may equal
 * work; dst may overlap src (in-place reduce_scatter). n == 1 copies src block 0 to dst. */
mdc_status mdc_i_ring_rs(mdc_group *g, const int *mem, int n, int pos, const void *src, void *work, void *dst,
                         const size_t *off, const size_t *len, mdc_dtype t, mdc_op op, int tag);
/* Ring allgather over members: member c's block is off[c], len[c] BYTES of buf. Step s: send
 * block pos-s to the next member, receive pos-s-1. Each member holds its own block already,
 * or (own != NULL) has it at `own`: step 0 then sends from there and copies it into place
 * during the exchange. */
mdc_status mdc_i_ring_ag(mdc_group *g, const int *mem, int n, int pos, void *buf, const size_t *off, const size_t *len,
                         const void *own, int tag);

/* Binomial tree on ranks relative to root (rel = (rank - root) mod p). Block j (BYTES off[j],
 * len[j], contiguous and increasing in j) belongs to relative rank j; the subtree of rel covers
 * relative ranks [rel, rel + lowbit(rel)) clipped to p (the root covers all). `base` holds this
 * rank's subtree: byte off[j] - off[rel] of base is block j. Gather: every rank already holds
 * its own block there; the root ends with all. Scatter: the root holds all; every rank ends
 * with its subtree's blocks. */
mdc_status mdc_i_binomial_gather(mdc_group *g, int root, void *base, const size_t *off, const size_t *len, int tag);
mdc_status mdc_i_binomial_scatter(mdc_group *g, int root, void *base, const size_t *off, const size_t *len, int tag);
/* Binomial reduce to `root` without the AVG division: acc (count elements, may be NULL on
 * non-roots: scratch is used) gets the partial result over this rank's subtree, combined in
 * relative rank order: acc(subtree [r, r+2m)) = acc([r, r+m)) OP acc([r+m, r+2m)). */
mdc_status mdc_i_binomial_reduce(mdc_group *g, int root, const void *src, void *acc, size_t count, mdc_dtype t,
                                 mdc_op op, int tag);

/* Balanced partition of count elements into n blocks: block c has count/n elements, plus one
 * for c < count % n; off/len get element offsets and lengths (n entries each). */
void mdc_i_partition(size_t count, int n, size_t *off, size_t *len);
/* *out = a malloc'ed array of the group size, every entry `count` (the equal-block forms of
 * the per-rank-count collectives); `what` names the caller in the out-of-memory detail. */
mdc_status mdc_i_equal_counts(const char *what, const mdc_group *g, size_t count, size_t **out);

/* Folding a non-power-of-two group onto p2 = largest power of two <= p (Rabenseifner): the
 * first 2*rem ranks pair up (2i, 2i+1), the even one hands its data to the odd one, which
 * becomes new rank i; rank r >= 2*rem becomes new rank r - rem. */
static inline int mdc_i_pow2_floor(int p) {
    int p2 = 1;
    while (p2 * 2 <= p) p2 *= 2;
    return p2;
}
/* ceil(log2 p): the rounds of a binomial tree or of Bruck's algorithms. */
static inline int mdc_i_lg_ceil(int p) {
    int k = 0;
    while ((1 << k) < p) k++;
    return k;
}
static inline int mdc_i_newrank(int r, int rem) { return r < 2 * rem ? (r % 2 ? r / 2 : -1) : r - rem; }
static inline int mdc_i_oldrank(int nr, int rem) { return nr < rem ? 2 * nr + 1 : nr + rem; }
/* First original rank whose data new rank nr carries (nr == p2 gives p). */
static inline int mdc_i_first_old(int nr, int rem) { return nr < rem ? 2 * nr : nr + rem; }

/* Recursive halving among the p2 new ranks: element range of new rank i is [bnd[i], bnd[i+1]).
 * Starts from src (full vector), partial results in work (full size); at the end work holds new
 * rank nr's range reduced over all p2. Pairs combine lower new rank OP higher. tmp: scratch of
 * at least half the vector (the largest half range). */
mdc_status mdc_i_halving_rs(mdc_group *g, int rem, int p2, int nr, const void *src, void *work, void *tmp,
                            const size_t *bnd, mdc_dtype t, mdc_op op, int tag);
/* Recursive doubling allgather among the p2 new ranks on buf; new rank i's range is the BYTES
 * [bnd[i], bnd[i+1]); each holds its own range. */
mdc_status mdc_i_doubling_ag(mdc_group *g, int rem, int p2, int nr, void *buf, const size_t *bnd, int tag);

/* Virtual-node layout of a group: returns the number of nodes when every node holds the same
 * number of members (*per_node), else -1; node_of[i] (may be NULL) gets member i's node index,
 * nodes numbered by first appearance. */
int mdc_i_node_layout(const mdc_group *g, int *per_node, int *node_of);

/* What a group remembers for the dispatcher (held in the group, group.c): its node layout,
 * computed once when the group is created (it depends only on the members and the transport's
 * placement), and each collective's last `auto` pick with the byte count and the settings
 * generation (coll_select.c) it was made under, so a loop of identical calls does not rerun
 * the cost model. The cost model is deterministic, so a remembered pick is the pick every rank
 * computes. A group runs one collective at a time (as an MPI communicator does). */
typedef struct {
    size_t bytes;
    unsigned gen; /* 0: nothing remembered */
    int pick;
} mdc_i_pick_memo;
mdc_i_pick_memo *mdc_i_group_memo(const mdc_group *g, mdc_coll c);
/* mdc_i_node_layout's result without node_of, as computed at creation. */
int mdc_i_group_nodes(const mdc_group *g, int *per_node);
/* The group's tag space (mdc_group_create), for the transport's MPI tags. */
int mdc_i_group_tag_space(const mdc_group *g);
/* The number of this collective call on g, from 1 (coll_check.c). */
unsigned long long mdc_i_group_next_call(mdc_group *g);
/* The collective check (coll_check.c): with it on, every member of g compares its call (c, the
 * count or -1 when counts may differ, dtype, op or -1, root or -1) with group rank 0's;
 * MDC_ERR_MISMATCH naming both calls on every member when one differs. */
mdc_status mdc_i_check_call(const char *what, mdc_group *g, mdc_coll c, long long count, mdc_dtype t, int op, int root);

/* Dispatcher support (coll_select.c; the choice itself is mdc_i_pick, coll_registry.h).
 * After a failed algorithm: on a mismatch, tell the peers so they stop instead of waiting. */
mdc_status mdc_i_after(mdc_group *g, mdc_status st);
/* Shared argument checks; `what` names the collective in the detail. */
mdc_status mdc_i_check_group(const char *what, const mdc_group *g);
mdc_status mdc_i_check_count(const char *what, const mdc_group *g, const char *arg, size_t count, mdc_dtype t,
                             size_t times);
mdc_status mdc_i_check_dtype_op(const char *what, const mdc_group *g, mdc_dtype t, int op);
mdc_status mdc_i_check_root(const char *what, const mdc_group *g, int root);
mdc_status mdc_i_check_buf(const char *what, const mdc_group *g, const char *arg, const void *buf, size_t count);

#endif
