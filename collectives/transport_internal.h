/* Shared by the transport's two files: collectives/transport.c (requests, messages, the API)
 * and collectives/transport_wait.c (polite waiting, aborts, timeouts, dead peers). Nothing
 * else includes it: only the transport calls MPI point-to-point (docs/design.md rule 1). */
#ifndef MINIDC_TRANSPORT_INTERNAL_H
#define MINIDC_TRANSPORT_INTERNAL_H

#include <mpi.h>
#include <stdint.h>

#include "coll_internal.h"
#include "minidc/collectives.h"

/* Payloads up to this travel in one MPI message with their stamp. Packing costs a copy at
 * each end, a separate header costs one more small message: on this host (2026-11-30) a
 * 16 KiB payload packed took 9.5 us for a 2-rank allgather, sent as header + payload 6.8-7.1 us
 * (MPICH 5.7); 8 KiB and below were equal either way. */
#define PACK_LIMIT (4u << 10)
#define PACK_INLINE 1024          /* packed messages up to this use the request's own buffer */
#define DOOR_MIN_BYTES (1u << 20) /* waits on smaller messages never sleep on the doorbell */
#define NUDGE_S 200e-6            /* a pending receive wakes its sleeping sender this often */
#define PIECE_BYTES (1u << 30)    /* MPI counts are int: larger payloads go in pieces */
#define TAGS_PER_SPACE 4096       /* user tags per group tag space */
#define TAG_REGION (MDC_MAX_TAG_SPACES * TAGS_PER_SPACE)

struct mdc_transport {
    MPI_Comm comm;
    int rank, size;
    mdc_device *dev;
    int gpus_per_node;
    int tag_base; /* first tag minidc uses; the abort tag is tag_base + TAG_REGION */
    double timeout;
    double spin_s;   /* busy-poll this long before the first yield (0 when oversubscribed) */
    double per_core; /* the job's ranks per online core when all are on this host, else 0 */
    double yield_s;  /* then yield (no sleeps) until this much of the wait has passed */
    double door_s;   /* with doorbells: sleep on the bell once the wait is this old */
    double fault_s;  /* MINIDC_FAULT_DELAY: each send first waits up to this long (0: off) */
    uint64_t fault_rng;
    long corrupt_at; /* MINIDC_FAULT_CORRUPT=RANK:N on this rank: the N-th send (from 1) of 4 or more
                          bytes travels with one bit flipped (0: off); sends counts them */
    long sends;
    int *door;                  /* doorbell (MPI_COMM_WORLD) rank of each rank of comm; NULL: none */
    int door_sleep;             /* 1: waits sleep on the doorbells (more ranks than cores); 0: the segment
                          only names the peers' processes (their pids, for a wait that times out) */
    int aborted;                /* a peer told us it failed */
    struct mdc_request *parked; /* failed requests MPI still holds (freed with the transport) */
    mdc_trace_fn trace;
    void *trace_ctx;
    size_t inflight, inflight_hwm;             /* requests posted and not yet freed, and their most at once */
    int mpi_size;                              /* the communicator's (rank and size are the mesh's under set_dry) */
    int dry;                                   /* mdc_transport_set_dry: header-only messages */
    int *rep_mpi;                              /* dry: the MPI rank of each mesh rank's representative */
    int *rep;                                  /* dry: each mesh rank's representative */
    double fold_mismatch;                      /* bytes by which mirrored messages differed from their receives */
    unsigned char traffic[MDC_MAX_TAG_SPACES]; /* each tag space's mdc_traffic class */
};

/* A dry message: the stamp, the size it stands for, who sent it and whether it mirrors a
 * folded rank's message (transport_dry.c). */
typedef struct {
    mdc_msg_stamp stamp;
    uint64_t bytes;
    int32_t from, mirror;
} dry_header;

/* The first MPI message of a message sent in pieces. */
typedef struct {
    mdc_msg_stamp stamp;
    uint64_t bytes;
} piece_header;

struct mdc_request {
    mdc_transport *t;
    int is_send, peer_world, npieces;
    int mpi_peer;       /* the MPI rank messages go to or come from (peer_world but under set_dry) */
    int door_peer;      /* the peer's doorbell rank when waits sleep on them (-1: none) */
    int state_peer;     /* the peer's rank in the segment, for its process state (-1: none) */
    uint32_t door_mark; /* send: the peer's receive count from us before posting */
    size_t piece;       /* payload bytes per piece when npieces > 0 */
    size_t got;         /* receive: bytes of pieces already completed by a piece wait */
    int hdr;            /* pieces mode: mreq[0] is the header */
    int window;         /* receive in pieces: W slots of `piece` bytes reused in turn (0: none) */
    int posted;         /* pieces whose MPI receive is posted (all of them without a window) */
    int mpi_tag;        /* the MPI tag the pieces travel with */
    int hdr_checked;    /* receive: the header arrived and its size matched */
    piece_header ph;
    MPI_Request *mreq; /* npieces (+hdr) MPI requests */
    int nmreq;
    void *user;              /* receive: where the payload goes */
    unsigned char *pack;     /* packed message buffer (small messages): inl or malloc'ed */
    MPI_Request mreq_inl[2]; /* mreq when at most 2 are needed (no malloc per message) */
    size_t bytes;
    mdc_msg_stamp stamp; /* send: our stamp; receive: filled by the message */
    mdc_link link;
    int traffic; /* the group's mdc_traffic class */
    struct mdc_request *next_parked;
    void *fault_copy; /* send: the corrupted copy of the payload that travels (fault injection) */
    size_t inl_cap;   /* bytes of inl */
    /* A packed message up to PACK_INLINE bytes lives here: the request is allocated with just
     * the room it needs, so a small request stays small (malloc's per-thread cache serves it,
     * where a fixed 1 KiB buffer made every request a slow-path allocation). */
    unsigned char inl[];
};

/* collectives/transport_dry.c: the MPI rank of a mesh rank; a dry request's one MPI operation,
 * the header alone whether the payload would travel in pieces or not (returns MPI's code); the
 * stamp a received header carries; the check of one received (MDC_ERR_MISMATCH when it is not
 * the message the receive stands for). */
int mdc_i_dry_mpi_peer(const mdc_transport *t, int peer);
int mdc_i_dry_post(mdc_request *r, int tag);
mdc_msg_stamp mdc_i_dry_stamp(const mdc_request *r);
mdc_status mdc_i_dry_check(mdc_transport *t, const mdc_request *r, const dry_header *h, size_t got);

/* Waits politely until the `n` MPI requests in `all` are complete (transport_wait.c; statuses
 * in `stat`); MPI request i belongs to own[i]. */
mdc_status mdc_i_wait_mpi(mdc_transport *t, MPI_Request *all, int n, MPI_Status *stat, mdc_request *const *own);

/* collectives/transport_fault.c: the test faults' settings from the environment, the delay
 * before a send, and the payload a send posts (a corrupted copy when this is the chosen one). */
void mdc_i_fault_init(mdc_transport *t);
void mdc_i_fault_delay(mdc_transport *t);
const void *mdc_i_fault_payload(mdc_transport *t, mdc_request *r, const void *buf, size_t bytes);

#endif
