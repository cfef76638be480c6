/* The transport: the only code in minidc that calls MPI point-to-point.
 *
 * A message goes to a rank of a group (group.c) with a user tag; the group gives the peer's
 * rank in the transport's communicator and the tag space that keeps the MPI tag apart from
 * other groups' messages.
 *
 * Each message carries the sender's virtual-time stamp (mdc_msg_stamp) so the receiver's
 * emulated clock can become max(own, arrival). Small messages pack stamp and payload into one
 * MPI message; large ones send a header (stamp and payload size) first, then the payload in
 * pieces, with the same tag (MPI's non-overtaking rule keeps them in order). Without a device
 * (the interposer) no stamps travel, and only sliced messages carry a header. A receiver checks
 * the header's size before waiting for the pieces, so a size mismatch is an error, not a wait
 * for a piece that never comes.
 *
 * Waiting is polite: MPI_Testall, then sched_yield, then short sleeps, so runs with more ranks
 * than cores stay fast (MPICH's own waits busy-poll). A wait longer than the timeout, or an
 * abort message from a failing peer, ends the wait with an error instead of a hang. */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../device/platform.h"
#include "transport_internal.h"

static mdc_transport *default_transport;

void mdc_transport_set_default(mdc_transport *t) { default_transport = t; }
mdc_transport *mdc_transport_default(void) { return default_transport; }

/* How long a wait busy-polls, then yields, before it sleeps. All ranks of a minidc run are on
 * one host (the emulated nodes are virtual), so the ranks sharing this host's cores are
 * MPICH's MPI_LOCALNRANKS (set by Hydra's mpiexec), else the communicator's size. With no more
 * ranks than online cores a waiting rank's core is its own: a 50 us busy poll catches a reply
 * that is microseconds away without a trip through the scheduler. With more ranks than cores
 * it yields at once: a spinning rank would hold the core the rank it waits for needs.
 * Both then sched_yield until the wait is 20 ms old, and only then sleep (5..100 us): a
 * yield hands the core straight to a runnable peer, while a sleeping rank wakes a timer tick
 * late at every hop (4 ranks on 2 cores: a 64-byte allreduce took 3 ms with sleeps after 32
 * yields, 19 us with yields only). The sleeps bound the cost of a long wait on a computing
 * peer. MINIDC_SPIN_US and MINIDC_YIELD_US override the two phases.
 * With more ranks than cores, a wait older than 100 us (MINIDC_DOOR_US) sleeps on the
 * rank's doorbell instead (doorbell.c) whenever the peers it waits for have nothing under
 * way: a yielding rank can take half the core from a peer copying a large message. */
/* Opens the doorbell segment where every rank is on this host and maps each rank of the
 * transport's communicator to its MPI_COMM_WORLD rank, by which the segment is indexed (t->door;
 * left NULL without a segment). Waits sleep on the bells when `want` (more ranks than cores) or
 * MINIDC_DOORBELL=1; otherwise the segment only tells a timed-out wait whether the peer's process
 * runs, is stopped or has exited. MINIDC_DOORBELL=0: no segment. `lr`: MPI_LOCALNRANKS, or 0. */
static void door_map(mdc_transport *t, long lr, int want) {
    int wr = 0, ws = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    long wlocal = lr > 0 ? lr : ws;
    const char *e = getenv("MINIDC_DOORBELL");
    t->door_sleep = e && *e ? mdc_i_env_num("MINIDC_DOORBELL", want, 0, 1) != 0 : want;
    if (!mdc_i_door_open(wr, ws, (int)wlocal, 1)) return; /* (MINIDC_DOORBELL=0 keeps it closed) */
    t->door = malloc((size_t)t->size * sizeof *t->door);
    int *ids = malloc((size_t)t->size * sizeof *ids);
    MPI_Group mine, world;
    MPI_Comm_group(t->comm, &mine);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int i = 0; ids && i < t->size; i++) ids[i] = i;
    if (!t->door || !ids || MPI_Group_translate_ranks(mine, t->size, ids, world, t->door) != MPI_SUCCESS) {
        free(t->door);
        t->door = NULL;
    }
    free(ids);
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
}

static void wait_policy(mdc_transport *t) {
    long cores = mdc_plat_cores_online();
    long lr = mdc_plat_local_ranks();
    long local = lr > 0 ? lr : t->size;
    int own_core = cores > 0 && local <= cores;
    /* Only where every rank of the job is on this host (MPI_LOCALNRANKS = the world's size):
     * then all ranks see the same figures, so an algorithm picked by them agrees everywhere. */
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    t->per_core = lr > 0 && local == world && cores > 0 ? (double)local / (double)cores : 0;
    t->spin_s = own_core ? 50e-6 : 0;
    t->yield_s = 20e-3;
    t->spin_s = mdc_i_env_num("MINIDC_SPIN_US", t->spin_s * 1e6, 0, 1e9) * 1e-6;
    t->yield_s = mdc_i_env_num("MINIDC_YIELD_US", t->yield_s * 1e6, 0, 1e9) * 1e-6;
    t->door_s = mdc_i_env_num("MINIDC_DOOR_US", 100, 0, 1e9) * 1e-6;
    mdc_i_fault_init(t); /* fault injection for tests (collectives/transport_fault.c) */
    door_map(t, lr, !own_core);
}

mdc_status mdc_transport_create(mdc_transport **out, const void *mpi_comm, mdc_device *dev, int gpus_per_node) {
    *out = NULL;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) return mdc_fail(MDC_ERR_MPI, "mdc_transport_create: MPI is not initialized");
    if (gpus_per_node < 1) return mdc_fail(MDC_ERR_INVALID, "--gpus-per-node must be >= 1 (got %d)", gpus_per_node);
    mdc_transport *t = calloc(1, sizeof *t);
    if (!t) return mdc_fail(MDC_ERR_OOM_HOST, "transport");
    t->comm = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    MPI_Comm_rank(t->comm, &t->rank);
    MPI_Comm_size(t->comm, &t->size);
    t->mpi_size = t->size;
    t->dev = dev;
    t->gpus_per_node = gpus_per_node;
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(t->comm, MPI_TAG_UB, &ub, &flag);
    long tag_ub = flag && ub ? *ub : 32767;
    if (tag_ub < (long)TAG_REGION + 1) {
        free(t);
        return mdc_fail(MDC_ERR_MPI, "MPI_TAG_UB is %ld; minidc needs at least %d", tag_ub, TAG_REGION + 1);
    }
    /* minidc's tags sit at the top of the tag range, away from an application's own. */
    t->tag_base = (int)(tag_ub - TAG_REGION);
    t->timeout = 120.0;
    t->timeout = mdc_i_env_num("MINIDC_TIMEOUT", t->timeout, 1e-3, 1e9);
    wait_policy(t);
    /* Short sleeps should be short: the default 50 us timer slack would dominate them. */
    mdc_plat_short_sleeps();
    *out = t;
    return MDC_OK;
}

static void request_free(mdc_request *r);
static int request_quiesce(mdc_request *r, double seconds);

void mdc_transport_free(mdc_transport *t) {
    if (!t) return;
    if (default_transport == t) default_transport = NULL;
    while (t->parked) {
        mdc_request *r = t->parked;
        t->parked = r->next_parked;
        /* Still held by MPI after a last chance: leak it rather than let MPI write freed memory. */
        if (request_quiesce(r, 0.1)) request_free(r);
    }
    free(t->door);
    free(t->rep_mpi);
    free(t->rep);
    free(t);
    mdc_i_scratch_release();
}

void mdc_transport_set_trace(mdc_transport *t, mdc_trace_fn fn, void *ctx) {
    t->trace = fn;
    t->trace_ctx = ctx;
}

int mdc_transport_rank(const mdc_transport *t) { return t->rank; }
int mdc_transport_size(const mdc_transport *t) { return t->size; }
mdc_device *mdc_transport_device(const mdc_transport *t) { return t->dev; }
double mdc_i_ranks_per_core(const mdc_transport *t) { return t->per_core; }
void mdc_transport_set_timeout(mdc_transport *t, double seconds) { t->timeout = seconds; }
void mdc_transport_set_traffic(mdc_transport *t, int tag_space, mdc_traffic k) {
    if (tag_space >= 0 && tag_space < MDC_MAX_TAG_SPACES) t->traffic[tag_space] = (unsigned char)k;
}

mdc_link mdc_transport_link(const mdc_transport *t, int a, int b) {
    return a / t->gpus_per_node == b / t->gpus_per_node ? MDC_LINK_NVLINK : MDC_LINK_NET;
}

/* ---- point-to-point -------------------------------------------------------------------- */

static mdc_status check_p2p(const void *buf, size_t bytes, int peer, int tag, const mdc_group *g, const char *what) {
    if (!g) return mdc_fail(MDC_ERR_INVALID, "%s: NULL group", what);
    int n = mdc_group_size(g);
    if (peer < 0 || peer >= n)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: peer %d outside group of %d", what, mdc_group_transport(g)->rank,
                        peer, n);
    if (tag < 0 || tag >= TAGS_PER_SPACE)
        return mdc_fail(MDC_ERR_INVALID, "%s: tag %d outside 0..%d", what, tag, TAGS_PER_SPACE - 1);
    if (!buf && bytes)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: NULL buffer with %zu bytes", what, mdc_group_transport(g)->rank,
                        bytes);
    return MDC_OK;
}

static int mpi_tag(const mdc_group *g, int tag) {
    return mdc_group_transport(g)->tag_base + mdc_i_group_tag_space(g) * TAGS_PER_SPACE + tag;
}

/* slice > 0: the payload travels in pieces of `slice` bytes (at least one piece, even of 0
 * bytes) that a receiver can consume one by one (mdc_i_wait_piece). */
static mdc_request *request_new(mdc_group *g, int peer, size_t bytes, int is_send, size_t slice) {
    mdc_transport *t = mdc_group_transport(g);
    int packed = !slice && bytes <= PACK_LIMIT; /* one MPI message, with the stamp if any */
    size_t total = t->dry ? sizeof(dry_header) : sizeof(mdc_msg_stamp) + bytes; /* dry: the header alone */
    size_t inl = (packed || t->dry) && t->dev && total <= PACK_INLINE ? total : 0;
    mdc_request *r = malloc(sizeof *r + inl); /* not calloc: the inline buffer needs no zeroing */
    if (!r) return NULL;
    memset(r, 0, offsetof(mdc_request, inl));
    r->inl_cap = inl;
    r->t = t;
    r->is_send = is_send;
    r->peer_world = mdc_group_world_rank(g, peer);
    r->mpi_peer = t->dry ? mdc_i_dry_mpi_peer(t, r->peer_world) : r->peer_world;
    r->state_peer = t->door ? t->door[r->mpi_peer] : -1;
    r->door_peer = t->door_sleep ? r->state_peer : -1;
    r->bytes = bytes;
    r->link = mdc_transport_link(t, t->rank, r->peer_world);
    r->traffic = t->traffic[mdc_i_group_tag_space(g)];
    r->piece = slice ? (slice < PIECE_BYTES ? slice : PIECE_BYTES) : PIECE_BYTES;
    r->npieces = packed ? 0 : (int)((bytes + r->piece - 1) / r->piece);
    if (slice && r->npieces == 0) r->npieces = 1;
    r->hdr = !t->dry && r->npieces && (t->dev || slice);
    r->mreq = t->dry || r->npieces + 1 <= 2 ? r->mreq_inl : calloc((size_t)r->npieces + 1, sizeof *r->mreq);
    if (!r->mreq) {
        free(r);
        return NULL;
    }
    if (++t->inflight > t->inflight_hwm) t->inflight_hwm = t->inflight;
    return r;
}

size_t mdc_transport_requests_hwm(const mdc_transport *t) { return t ? t->inflight_hwm : 0; }
void mdc_transport_reset_requests_hwm(mdc_transport *t) {
    if (t) t->inflight_hwm = t->inflight;
}

static void request_free(mdc_request *r) {
    if (!r) return;
    r->t->inflight--;
    if (r->pack != r->inl) free(r->pack);
    if (r->mreq != r->mreq_inl) free(r->mreq);
    free(r->fault_copy);
    free(r);
}

/* After a failed wait: cancels the request's MPI operations that are still pending and waits
 * up to `seconds` for them to finish (a cancelled receive finishes at once; one already
 * matched finishes when its data is in). Returns 1 when MPI no longer uses the buffers. */
static int request_quiesce(mdc_request *r, double seconds) {
    int left = 0;
    for (int j = 0; j < r->nmreq; j++)
        if (r->mreq[j] != MPI_REQUEST_NULL) {
            int done = 0;
            MPI_Test(&r->mreq[j], &done, MPI_STATUS_IGNORE);
            if (!done) MPI_Cancel(&r->mreq[j]);
        }
    double end = mdc_wall_time() + seconds;
    do {
        left = 0;
        for (int j = 0; j < r->nmreq; j++)
            if (r->mreq[j] != MPI_REQUEST_NULL) {
                int done = 0;
                MPI_Test(&r->mreq[j], &done, MPI_STATUS_IGNORE);
                left += !done;
            }
        if (left) sched_yield();
    } while (left && mdc_wall_time() < end);
    return left == 0;
}

/* Payload bytes of piece i of a request in pieces. */
static size_t piece_len(const mdc_request *r, int i) {
    size_t off = (size_t)i * r->piece;
    return r->bytes - off < r->piece ? r->bytes - off : r->piece;
}

/* Posts the receive of piece i into its place (mdc_i_piece_data: its slot with a window). */
static int post_recv_piece(mdc_request *r, int i) {
    return MPI_Irecv(mdc_i_piece_data(r, i), (int)piece_len(r, i), MPI_BYTE, r->mpi_peer, r->mpi_tag, r->t->comm,
                     &r->mreq[r->hdr + i]);
}

/* Posts the MPI operations of a request: either one packed message, or the header (when
 * there is one) then the payload in pieces of r->piece bytes. */
static mdc_status request_post(mdc_request *r, void *payload, int tag) {
    mdc_transport *t = r->t;
    int stamps = t->dev != NULL;
    size_t hdr = stamps ? sizeof(mdc_msg_stamp) : 0;
    int rc = MPI_SUCCESS;
    /* Before posting: a receive the peer completes after this moment changes the count. */
    if (r->is_send) r->door_mark = mdc_i_door_mark(r->door_peer);
    if (t->dry) {
        rc = mdc_i_dry_post(r, tag);
    } else if (r->npieces == 0) {
        size_t total = hdr + r->bytes;
        if (stamps) {
            r->pack = total <= r->inl_cap ? r->inl : malloc(total ? total : 1);
            if (!r->pack) return mdc_fail(MDC_ERR_OOM_HOST, "message buffer of %zu bytes", total);
        }
        if (r->is_send) {
            const void *src = payload;
            if (stamps) {
                memcpy(r->pack, &r->stamp, hdr);
                if (r->bytes) memcpy(r->pack + hdr, payload, r->bytes);
                src = r->pack;
            }
            rc = MPI_Isend(src, (int)total, MPI_BYTE, r->mpi_peer, tag, t->comm, &r->mreq[0]);
        } else {
            rc = MPI_Irecv(stamps ? (void *)r->pack : payload, (int)total, MPI_BYTE, r->mpi_peer, tag, t->comm,
                           &r->mreq[0]);
        }
        r->nmreq = 1;
    } else {
        int k = 0;
        if (r->hdr) {
            r->ph.stamp = r->stamp;
            r->ph.bytes = r->bytes;
            if (r->is_send)
                rc = MPI_Isend(&r->ph, (int)sizeof r->ph, MPI_BYTE, r->mpi_peer, tag, t->comm, &r->mreq[k++]);
            else rc = MPI_Irecv(&r->ph, (int)sizeof r->ph, MPI_BYTE, r->mpi_peer, tag, t->comm, &r->mreq[k++]);
        }
        int first = r->window && r->window < r->npieces ? r->window : r->npieces; /* posted now */
        r->mpi_tag = tag;
        for (int i = 0; rc == MPI_SUCCESS && i < first; i++)
            rc = r->is_send ? MPI_Isend((char *)payload + (size_t)i * r->piece, (int)piece_len(r, i), MPI_BYTE,
                                        r->mpi_peer, tag, t->comm, &r->mreq[k + i])
                            : post_recv_piece(r, i);
        r->posted = first;
        for (int i = first; i < r->npieces; i++) r->mreq[k + i] = MPI_REQUEST_NULL; /* posted later */
        r->nmreq = k + r->npieces;
    }
    if (rc != MPI_SUCCESS)
        return mdc_fail(MDC_ERR_MPI, "rank %d: MPI %s to/from rank %d failed", t->rank, r->is_send ? "Isend" : "Irecv",
                        r->peer_world);
    if (r->is_send) mdc_i_door_posted(r->door_peer, r->nmreq);
    return MDC_OK;
}

static mdc_status isend(const void *buf, size_t bytes, size_t slice, int peer, int tag, mdc_group *g,
                        mdc_request **req) {
    *req = NULL;
    mdc_status st = check_p2p(buf, bytes, peer, tag, g, "mdc_isend");
    if (st) return st;
    mdc_transport *t = mdc_group_transport(g);
    mdc_i_fault_delay(t);
    mdc_request *r = request_new(g, peer, bytes, 1, slice);
    if (!r) return mdc_fail(MDC_ERR_OOM_HOST, "send request");
    if (t->trace) t->trace(t->trace_ctx, 1, mdc_group_rank(g), peer, bytes, tag);
    if (t->dev) r->stamp = mdc_dev_msg_depart(t->dev, (double)bytes, r->link);
    buf = mdc_i_fault_payload(t, r, buf, bytes);
    st = request_post(r, (void *)buf, mpi_tag(g, tag));
    if (st) {
        request_free(r);
        return st;
    }
    *req = r;
    return MDC_OK;
}

static mdc_status irecv(void *buf, size_t bytes, size_t slice, int window, int peer, int tag, mdc_group *g,
                        mdc_request **req) {
    *req = NULL;
    mdc_status st = check_p2p(buf, bytes, peer, tag, g, "mdc_irecv");
    if (st) return st;
    mdc_request *r = request_new(g, peer, bytes, 0, slice);
    if (!r) return mdc_fail(MDC_ERR_OOM_HOST, "receive request");
    if (r->npieces) r->window = window;
    mdc_transport *t = mdc_group_transport(g);
    if (t->trace) t->trace(t->trace_ctx, 0, mdc_group_rank(g), peer, bytes, tag);
    r->user = buf;
    st = request_post(r, buf, mpi_tag(g, tag));
    if (st) {
        request_free(r);
        return st;
    }
    *req = r;
    return MDC_OK;
}

mdc_status mdc_isend(const void *buf, size_t bytes, int peer, int tag, mdc_group *g, mdc_request **req) {
    return isend(buf, bytes, 0, peer, tag, g, req);
}
mdc_status mdc_irecv(void *buf, size_t bytes, int peer, int tag, mdc_group *g, mdc_request **req) {
    return irecv(buf, bytes, 0, 0, peer, tag, g, req);
}
mdc_status mdc_i_isend_sliced(const void *buf, size_t bytes, size_t slice, int peer, int tag, mdc_group *g,
                              mdc_request **req) {
    return isend(buf, bytes, slice ? slice : 1, peer, tag, g, req);
}
mdc_status mdc_i_irecv_sliced(void *buf, size_t bytes, size_t slice, int peer, int tag, mdc_group *g,
                              mdc_request **req) {
    return irecv(buf, bytes, slice ? slice : 1, 0, peer, tag, g, req);
}
mdc_status mdc_i_irecv_window(void *slots, size_t bytes, size_t slice, int window, int peer, int tag, mdc_group *g,
                              mdc_request **req) {
    if (window < 1)
        return mdc_fail(MDC_ERR_INVALID, "rank %d: mdc_i_irecv_window from group rank %d with %d slots",
                        g ? mdc_transport_rank(mdc_group_transport(g)) : -1, peer, window);
    return irecv(slots, bytes, slice ? slice : 1, window, peer, tag, g, req);
}

/* Completes a finished request: unpack, charge the device, free. */
static mdc_status request_finish(mdc_request *r) {
    mdc_transport *t = r->t;
    mdc_status st = MDC_OK;
    if (t->dry && !r->is_send) r->stamp = mdc_i_dry_stamp(r);
    else if (!r->is_send && r->npieces == 0 && r->pack) {
        memcpy(&r->stamp, r->pack, sizeof r->stamp);
        if (r->bytes) memcpy(r->user, r->pack + sizeof r->stamp, r->bytes);
    }
    if (!r->is_send && r->hdr) r->stamp = r->ph.stamp;
    if (t->dev) {
        mdc_dev_set_traffic(t->dev, (mdc_traffic)r->traffic);
        if (r->is_send) mdc_dev_msg_sent(t->dev, r->stamp.done);
        else mdc_dev_msg_arrive(t->dev, r->stamp, (double)r->bytes, r->link);
    }
    request_free(r);
    return st;
}

static size_t status_bytes(MPI_Status *s) {
    int c = 0;
    MPI_Get_count(s, MPI_BYTE, &c);
    return c > 0 ? (size_t)c : 0;
}

void mdc_i_abandon(mdc_request **reqs, int n) {
    /* MPI may still write into a pending receive's buffer (the inline pack is inside the
     * request): cancel what is pending before freeing; what MPI will not let go of is parked
     * on the transport and freed with it. */
    for (int i = 0; i < n; i++)
        if (reqs[i]) {
            mdc_transport *t = reqs[i]->t;
            if (request_quiesce(reqs[i], 1.0)) {
                request_free(reqs[i]);
            } else {
                reqs[i]->next_parked = t->parked;
                t->parked = reqs[i];
            }
            reqs[i] = NULL;
        }
}

/* Bytes of the message that are not payload: the stamp of a packed message, or the header. */
static size_t header_bytes(const mdc_request *r) {
    if (r->npieces) return r->hdr ? sizeof(piece_header) : 0;
    return r->t->dev ? sizeof(mdc_msg_stamp) : 0;
}

static mdc_status size_mismatch(const mdc_request *r, size_t got) {
    return mdc_fail(MDC_ERR_MISMATCH,
                    "rank %d: expected %zu bytes from rank %d, got %zu "
                    "(sizes differ between ranks?)",
                    r->t->rank, r->bytes, r->peer_world, got);
}

/* Receive in pieces: waits for the header and checks the size it announces. */
static mdc_status check_header(mdc_request *r) {
    if (r->is_send || !r->hdr || r->hdr_checked) return MDC_OK;
    MPI_Status s;
    mdc_status st = mdc_i_wait_mpi(r->t, &r->mreq[0], 1, &s, &r);
    if (st) return st;
    size_t n = status_bytes(&s);
    r->got += n;
    if (n != sizeof r->ph || r->ph.bytes != r->bytes)
        return size_mismatch(r, n == sizeof r->ph ? (size_t)r->ph.bytes : 0);
    r->hdr_checked = 1;
    return MDC_OK;
}

int mdc_i_request_pieces(const mdc_request *r) { return r->npieces ? r->npieces : 1; }

void *mdc_i_piece_data(const mdc_request *r, int k) {
    size_t slot = r->window ? (size_t)(k % r->window) : (size_t)k;
    return (char *)r->user + slot * r->piece;
}

mdc_status mdc_i_wait_piece(mdc_request *r, int k) {
    if (r->npieces == 0 || k < 0 || k >= r->npieces)
        return mdc_fail(MDC_ERR_INVALID, "rank %d: piece %d of a message to/from rank %d that has %d", r->t->rank, k,
                        r->peer_world, r->npieces);
    mdc_status st = check_header(r);
    if (st) return st;
    /* A window: pieces before k are done with, so their slots take the next pieces. */
    while (r->window && r->posted < r->npieces && r->posted < k + r->window) {
        if (post_recv_piece(r, r->posted) != MPI_SUCCESS)
            return mdc_fail(MDC_ERR_MPI, "rank %d: MPI Irecv of piece %d from rank %d failed", r->t->rank, r->posted,
                            r->peer_world);
        r->posted++;
    }
    if (k >= r->posted)
        return mdc_fail(MDC_ERR_INVALID, "rank %d: piece %d from rank %d waited on before piece %d was done with",
                        r->t->rank, k, r->peer_world, k - r->window);
    MPI_Request *m = &r->mreq[r->t->dry ? 0 : r->hdr + k]; /* dry: one header for every piece */
    if (*m == MPI_REQUEST_NULL) return MDC_OK;
    MPI_Status s;
    st = mdc_i_wait_mpi(r->t, m, 1, &s, &r);
    if (st == MDC_OK && !r->is_send) r->got += status_bytes(&s);
    return st;
}

mdc_status mdc_waitall(mdc_request **reqs, int n) {
    /* A receive through a window whose later pieces are not posted yet: only waiting on its
     * pieces one by one can take them (each lands in a slot an earlier one used). Refused,
     * with the requests left as they are. */
    for (int i = 0; i < n; i++)
        if (reqs[i] && reqs[i]->posted < reqs[i]->npieces)
            return mdc_fail(MDC_ERR_INVALID,
                            "rank %d: a receive from rank %d waited on whole with %d of "
                            "its %d pieces still to be waited on one by one",
                            reqs[i]->t->rank, reqs[i]->peer_world, reqs[i]->npieces - reqs[i]->posted,
                            reqs[i]->npieces);
    mdc_transport *t = NULL;
    int total = 0;
    for (int i = 0; i < n; i++)
        if (reqs[i]) {
            t = reqs[i]->t;
            total += reqs[i]->nmreq;
        }
    if (!t) return MDC_OK;
    MPI_Request stackbuf[64];
    MPI_Status stackstat[64]; /* not MPI_STATUSES_IGNORE: gcc 12 misreads its size */
    mdc_request *stackown[64];
    MPI_Request *all = total <= 64 ? stackbuf : malloc((size_t)total * sizeof *all);
    MPI_Status *stat = total <= 64 ? stackstat : malloc((size_t)total * sizeof *stat);
    mdc_request **own = total <= 64 ? stackown : malloc((size_t)total * sizeof *own);
    if (!all || !stat || !own) {
        if (all != stackbuf) free(all);
        if (stat != stackstat) free(stat);
        if (own != stackown) free(own);
        return mdc_fail(MDC_ERR_OOM_HOST, "waitall of %d requests", total);
    }
    mdc_status st = MDC_OK;
    for (int i = 0; i < n && st == MDC_OK; i++)
        if (reqs[i]) st = check_header(reqs[i]);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (reqs[i])
            for (int j = 0; j < reqs[i]->nmreq; j++) {
                own[k] = reqs[i];
                all[k++] = reqs[i]->mreq[j];
            }
    if (st == MDC_OK) st = mdc_i_wait_mpi(t, all, total, stat, own);
    if (st == MDC_OK) {
        /* MPI reports a message longer than its receive, not a shorter one: compare what
         * arrived with what each receive expected, so a size mismatch never passes silently.
         * (A request already complete has an empty status: its bytes are in ->got.) */
        k = 0;
        for (int i = 0; i < n && st == MDC_OK; i++) {
            if (!reqs[i]) continue;
            if (!reqs[i]->is_send) {
                size_t got = reqs[i]->got;
                for (int j = 0; j < reqs[i]->nmreq; j++) got += status_bytes(&stat[k + j]);
                size_t hdr = header_bytes(reqs[i]), want = reqs[i]->bytes + hdr;
                if (t->dry) st = mdc_i_dry_check(t, reqs[i], (const dry_header *)reqs[i]->pack, got);
                else if (got != want) st = size_mismatch(reqs[i], got > hdr ? got - hdr : 0);
            }
            k += reqs[i]->nmreq;
        }
    }
    k = 0;
    for (int i = 0; i < n; i++)
        if (reqs[i])
            for (int j = 0; j < reqs[i]->nmreq; j++) reqs[i]->mreq[j] = all[k++];
    if (st == MDC_OK) {
        /* Charge in the order given: the clock is a max, so only the idle/comm split could
         * depend on the order, and it is fixed by the caller's order. */
        for (int i = 0; i < n; i++)
            if (reqs[i]) {
                request_finish(reqs[i]);
                reqs[i] = NULL;
            }
    } else {
        mdc_i_abandon(reqs, n);
    }
    if (all != stackbuf) free(all);
    if (stat != stackstat) free(stat);
    if (own != stackown) free(own);
    return st;
}

mdc_status mdc_send(const void *buf, size_t bytes, int peer, int tag, mdc_group *g) {
    mdc_request *r;
    mdc_status st = mdc_isend(buf, bytes, peer, tag, g, &r);
    return st ? st : mdc_waitall(&r, 1);
}

mdc_status mdc_recv(void *buf, size_t bytes, int peer, int tag, mdc_group *g) {
    mdc_request *r;
    mdc_status st = mdc_irecv(buf, bytes, peer, tag, g, &r);
    return st ? st : mdc_waitall(&r, 1);
}

mdc_status mdc_sendrecv(const void *sendbuf, size_t sendbytes, int dst, void *recvbuf, size_t recvbytes, int src,
                        int tag, mdc_group *g) {
    mdc_request *r[2] = {NULL, NULL};
    mdc_status st = mdc_irecv(recvbuf, recvbytes, src, tag, g, &r[0]);
    if (!st) st = mdc_isend(sendbuf, sendbytes, dst, tag, g, &r[1]);
    if (st) {
        request_free(r[0]); /* never wait on half a pair: the peer may not be sending */
        return st;
    }
    return mdc_waitall(r, 2);
}
