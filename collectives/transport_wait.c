/* The transport's waiting (collectives/transport_internal.h): polite, so runs with more ranks
 * than cores stay fast; a peer's abort message, the timeout and a peer that has exited end a
 * wait with an error naming the rank, never a hang. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport_internal.h"

/* Polite pause number `n` of a wait (after the busy-poll phase): yield, then once the wait
 * is past the yield phase (at least 32 yields), sleep 5..100 us. */
static void pause_politely(long n, int yielding) {
    if (n < 32 || yielding) {
        sched_yield();
        return;
    }
    long us = n < 64 ? 5 : n < 256 ? 20 : 100;
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* Returns 1 if a peer sent an abort message (and records it in the detail). */
static int peer_aborted(mdc_transport *t) {
    int flag = 0;
    MPI_Status s;
    MPI_Iprobe(MPI_ANY_SOURCE, t->tag_base + TAG_REGION, t->comm, &flag, &s);
    if (!flag) return 0;
    char msg[256] = "";
    MPI_Recv(msg, sizeof msg, MPI_CHAR, s.MPI_SOURCE, t->tag_base + TAG_REGION, t->comm, &s);
    msg[sizeof msg - 1] = '\0';
    mdc_fail(MDC_ERR_PEER, "rank %d: rank %d failed: %s", t->rank, s.MPI_SOURCE, msg);
    t->aborted = 1;
    return 1;
}

/* The requests a wait is on: MPI request i belongs to own[i]. */
typedef struct {
    MPI_Request *all;
    mdc_request *const *own;
    int n;
} wait_set;

/* 1 when no pending request of the wait can progress before one of its peers rings us. */
static int wait_idle(void *ctx) {
    const wait_set *w = ctx;
    for (int i = 0; i < w->n; i++)
        if (w->all[i] != MPI_REQUEST_NULL &&
            !mdc_i_door_idle(w->own[i]->door_peer, w->own[i]->is_send, w->own[i]->door_mark))
            return 0;
    return 1;
}

/* A receive that is still pending wakes its sender now and then: a sleeping sender does one
 * round of MPI progress per wake, which is what MPI needs from it when the pair has not
 * talked before (UCX connects endpoints lazily, with a handshake in both directions) or a
 * send could not be started at once. Without it such a send waited out the sleep limit. */
static void wait_nudge(const wait_set *w) {
    for (int i = 0; i < w->n; i++)
        if (w->all[i] != MPI_REQUEST_NULL && !w->own[i]->is_send) mdc_i_door_nudge(w->own[i]->door_peer);
}

/* 1 when a pending request of the wait carries a large payload: only then is the wait long
 * enough for a sleep to pay. A woken rank may wait for the running one's time slice, so
 * sleeping through the short waits of small collectives made them slower (4 ranks on 2 cores,
 * 64-byte allreduce 38 -> 52 us, all-to-all 46 us -> 1.9 ms). */
static int wait_is_large(const wait_set *w) {
    for (int i = 0; i < w->n; i++)
        if (w->all[i] != MPI_REQUEST_NULL && w->own[i]->bytes >= DOOR_MIN_BYTES) return 1;
    return 0;
}

/* The first request still pending: which rank, what, and that rank's process state where known. */
static mdc_status waited_for(const mdc_transport *t, const MPI_Request *all, mdc_request *const *own, int n,
                             const char *fmt, double secs) {
    char head[96], state[640] = "";
    snprintf(head, sizeof head, fmt, secs);
    for (int i = 0; i < n; i++) {
        if (all[i] == MPI_REQUEST_NULL) continue;
        const mdc_request *r = own[i];
        int pid, s = mdc_i_door_peer_state(r->state_peer, &pid);
        if (s >= 0)
            snprintf(state, sizeof state, "; rank %d (pid %d) %s", r->peer_world, pid,
                     s == 0   ? "is running (busy, or itself waiting on another rank)"
                     : s == 1 ? "is stopped (SIGSTOP or a debugger)"
                     : s == 2 ? "has exited"
                              : "is running or stopped (this system does not tell which)");
        mdc_i_door_others(state, sizeof state, r->state_peer);
        return mdc_fail(MDC_ERR_TIMEOUT, "rank %d: %s for rank %d to %s %zu bytes (tag %d)%s", t->rank, head,
                        r->peer_world, r->is_send ? "take" : "send", r->bytes,
                        (r->mpi_tag - t->tag_base) % TAGS_PER_SPACE, state);
    }
    return mdc_fail(MDC_ERR_TIMEOUT, "rank %d: %s for a peer", t->rank, head);
}

/* MDC_ERR_PEER naming a peer of a pending request whose process has exited (where known). */
static mdc_status peers_alive(const mdc_transport *t, const MPI_Request *all, mdc_request *const *own, int n) {
    for (int i = 0; i < n; i++) {
        if (all[i] == MPI_REQUEST_NULL) continue;
        int pid;
        if (mdc_i_door_peer_state(own[i]->state_peer, &pid) == 2)
            return mdc_fail(MDC_ERR_PEER,
                            "rank %d: rank %d (pid %d) has exited while this rank waited for it to %s %zu "
                            "bytes (tag %d)",
                            t->rank, own[i]->peer_world, pid, own[i]->is_send ? "take" : "send", own[i]->bytes,
                            (own[i]->mpi_tag - t->tag_base) % TAGS_PER_SPACE);
    }
    return MDC_OK;
}

/* Waits politely until the `n` MPI requests in `all` are complete (statuses in `stat`, an
 * empty one for a request that was already complete): busy poll while the core is this
 * rank's own, then yield, then sleep (on the doorbell when there is one); probes for a
 * peer's abort message and the timeout now and then. MPI request i belongs to own[i]: each
 * receive is counted for the doorbells as it completes, which wakes its sender. On failure
 * the requests may still be pending. */
mdc_status mdc_i_wait_mpi(mdc_transport *t, MPI_Request *all, int n, MPI_Status *stat, mdc_request *const *own) {
    int idx_stack[64];
    MPI_Status st_stack[64];
    int *idx = n <= 64 ? idx_stack : malloc((size_t)n * sizeof *idx);
    MPI_Status *got = n <= 64 ? st_stack : malloc((size_t)n * sizeof *got);
    mdc_status st = MDC_OK;
    if (!idx || !got) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "wait on %d requests", n);
        goto done;
    }
    memset(stat, 0, (size_t)n * sizeof *stat); /* MPI_Get_count of an empty status is 0 */
    wait_set ws = {all, own, n};
    double start = mdc_wall_time(), nudged = 0, checked = 0;
    long pauses = 0;
    for (;;) {
        int outc = 0;
        if (MPI_Testsome(n, all, &outc, idx, got) != MPI_SUCCESS) {
            st = mdc_fail(MDC_ERR_MISMATCH,
                          "rank %d: a message did not match its receive "
                          "(sizes differ between ranks?)",
                          t->rank);
            goto done;
        }
        if (outc == MPI_UNDEFINED) break; /* nothing was pending */
        for (int j = 0; j < outc; j++) {
            stat[idx[j]] = got[j];
            if (!own[idx[j]]->is_send) mdc_i_door_received(own[idx[j]]->door_peer, 1);
        }
        int left = 0;
        for (int i = 0; i < n && !left; i++) left = all[i] != MPI_REQUEST_NULL;
        if (!left) break;
        double waited = mdc_wall_time() - start;
        if (waited < t->spin_s) continue;        /* busy poll: this rank's core is its own */
        if (pauses > 64 && (pauses & 15) == 0) { /* a short wait never probes for aborts */
            if (t->aborted || peer_aborted(t)) {
                st = MDC_ERR_PEER;
                goto done;
            }
            if (waited > t->timeout) {
                st = waited_for(t, all, own, n, "waited %.0f s (MINIDC_TIMEOUT)", t->timeout);
                goto done;
            }
            if (waited - checked >= 1.0) { /* a peer that exited will never answer: say so now */
                checked = waited;
                if ((st = peers_alive(t, all, own, n))) goto done;
            }
        }
        if (t->door && t->door_sleep && waited >= t->door_s && wait_is_large(&ws) && wait_idle(&ws)) {
            mdc_i_door_sleep(wait_idle, &ws);
            pauses++;
            continue;
        }
        if (t->door && t->door_sleep && waited - nudged >= NUDGE_S) { /* see wait_nudge */
            nudged = waited;
            wait_nudge(&ws);
        }
        pause_politely(pauses++, waited < t->yield_s);
    }
done:
    if (idx != idx_stack) free(idx);
    if (got != st_stack) free(got);
    return st;
}

void mdc_transport_abort_peers(mdc_transport *t, const char *why) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", why ? why : "");
    int me = 0;
    MPI_Comm_rank(t->comm, &me);
    for (int r = 0; r < t->mpi_size; r++) {
        if (r == me) continue;
        MPI_Request req;
        /* Best effort: the message is small (eager), we do not wait for it to be received. */
        if (MPI_Isend(msg, (int)strlen(msg) + 1, MPI_CHAR, r, t->tag_base + TAG_REGION, t->comm, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
    mdc_i_door_ring_all(); /* a sleeping peer should see the message now, not in a while */
}
