/* Doorbells (collectives/doorbell.c): a wait on a large message sleeps until its peer rings.
 * Forced on, sleeping from the first moment of a wait, and with a 20 s limit per sleep: a
 * ring that is lost, or one that a protocol needed and nobody sent, shows as a wait of 20 s
 * (the checks on elapsed time and timed-out sleeps fail, or the harness's timeout does).
 * Cases: a receiver that sleeps until the sender posts (200 ms after the receiver said it
 * waits); a sender that sleeps until the receiver has copied (200 ms late); a transport on a reordered communicator (doorbells are indexed by
 * MPI_COMM_WORLD rank); collectives whose trees leave ranks idle, checked element by element;
 * a segment left by a dead launcher is removed, one of a live launcher is kept. */
#include <fcntl.h>
#include <mpi.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define BIG (2u << 20) /* bytes: above the doorbell's 1 MiB threshold */

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&ts, NULL);
}

static void fill(unsigned *v, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) v[i] = seed * 2654435761u + (unsigned)i;
}

static size_t count_bad(const unsigned *v, size_t n, unsigned seed) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += v[i] != seed * 2654435761u + (unsigned)i;
    return bad;
}

/* Every rank: the collective `c` forced to `algo` on 1 Mi floats of integer values. */
static void collective(mdc_group *w, mdc_coll c, const char *algo, float *a, float *b, size_t n) {
    int r = mdc_group_rank(w), p = mdc_group_size(w);
    MDC_CHECK(mdc_coll_set_algo(c, algo));
    size_t bad = 0;
    if (c == MDC_COLL_BCAST) {
        int root = p - 1;
        for (size_t i = 0; i < n; i++) b[i] = r == root ? (float)(i % 1000) : -1.0f;
        MDC_CHECK(mdc_bcast(b, n, MDC_F32, root, w));
        for (size_t i = 0; i < n; i++) bad += b[i] != (float)(i % 1000);
    } else {
        for (size_t i = 0; i < n; i++) a[i] = (float)((size_t)r + i % 7);
        MDC_CHECK(mdc_allreduce(a, b, n, MDC_F32, MDC_SUM, w));
        for (size_t i = 0; i < n; i++) bad += b[i] != (float)(p * (p - 1) / 2 + p * (int)(i % 7));
    }
    TU_CHECK(bad == 0, "%s %s: %zu wrong elements on rank %d", mdc_coll_name(c), algo, bad, r);
    MDC_CHECK(mdc_coll_set_algo(c, "auto"));
}

/* Field 22 of /proc/self/stat: this process's start time, as doorbell.c reads a launcher's. */
static unsigned long long my_start_time(void) {
    char buf[1024] = "";
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long st = 0;
    if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &st);
    return st;
}

static int shm_exists(const char *name) {
    int fd = shm_open(name, O_RDWR, 0600);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

int main(int argc, char **argv) {
    /* Before start-up: a segment named after a launcher that is gone (a child that exited)
     * and one named after a live one (this process), both with this pid as their "size". */
    char stale[96], live[96];
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    snprintf(stale, sizeof stale, "/minidc-door-%d-%llu-%d", (int)child, 12345ULL, (int)getpid());
    snprintf(live, sizeof live, "/minidc-door-%d-%llu-%d", (int)getpid(), my_start_time(), (int)getpid());
    close(shm_open(stale, O_CREAT | O_RDWR, 0600));
    close(shm_open(live, O_CREAT | O_RDWR, 0600));
    setenv("MINIDC_DOORBELL", "1", 1);
    setenv("MINIDC_DOOR_US", "0", 1);
    setenv("MINIDC_DOOR_SLEEP_US", "20000000", 1);
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    mdc_group *w = rt.world;
    int r = rt.rank, p = rt.size;
    mdc_wait_stats ws;
    mdc_wait_stats_get(&ws);
    TU_CHECK(ws.on == (p > 1), "doorbells %s at %d ranks", ws.on ? "on" : "off", p);
    if (p > 1) {
        TU_CHECK(!shm_exists(stale), "rank %d: %s (its launcher is gone) was not removed", r, stale);
        TU_CHECK(shm_exists(live), "rank %d: %s (its launcher runs) was removed", r, live);
    }
    shm_unlink(stale);
    shm_unlink(live);
    size_t n = BIG / sizeof(unsigned);
    unsigned *buf = malloc(BIG);
    double t0 = mdc_wall_time();

    if (p > 1 && r < 2) {
        /* Two cases between ranks 0 and 1, each with the wall times that say whether the
         * waiter really started waiting before its peer acted (CLOCK_MONOTONIC is shared by
         * the processes of one host); under heavy load a rank can be off its core for the
         * whole 200 ms, and then its wait had nothing to sleep on, so that attempt is not
         * judged and the pair tries again (at most ATTEMPTS times). */
        enum { ATTEMPTS = 5 };
        const double MARGIN = 0.05; /* s the waiter must have been waiting before the peer acted */
        int judged[2] = {0, 0};
        for (int attempt = 0; attempt < ATTEMPTS && !(judged[0] && judged[1]); attempt++) {
            char token = 0;
            mdc_request *q;
            double mine[2] = {0, 0}, theirs[2]; /* per case: rank 0 post, wait; rank 1 wait, copy */
            mdc_wait_stats before, after;
            /* 1. The receiver (rank 1) sleeps until rank 0 posts: rank 1 posts its receive,
             * tells rank 0 so with a small message, and waits; rank 0 sends 200 ms later. */
            mdc_wait_stats_get(&before);
            if (r == 0) {
                MDC_CHECK(mdc_recv(&token, 1, 1, 2, w));
                pause_ms(200);
                fill(buf, n, 1);
                mine[0] = mdc_wall_time();
                MDC_CHECK(mdc_send(buf, BIG, 1, 0, w));
            } else {
                memset(buf, 0, BIG);
                MDC_CHECK(mdc_irecv(buf, BIG, 0, 0, w, &q));
                MDC_CHECK(mdc_send(&token, 1, 0, 2, w));
                mine[0] = mdc_wall_time();
                MDC_CHECK(mdc_waitall(&q, 1));
                TU_CHECK(count_bad(buf, n, 1) == 0, "received message 1 differs");
            }
            unsigned long long slept[2], rung[2]; /* per case, this rank's */
            mdc_wait_stats_get(&after);
            slept[0] = after.sleeps - before.sleeps, rung[0] = after.rung - before.rung;
            /* 2. The sender (rank 0) sleeps until rank 1 has copied: rank 1 says it is ready,
             * rank 0 sends, and rank 1 receives 200 ms after saying so. (No message of rank
             * 0's to rank 1 may follow the large one: a send sleeps only while its peer has
             * completed no receive from it since the send was posted, and a later small
             * message completes first. Under load that race kept rank 0 awake.) */
            before = after;
            if (r == 0) {
                MDC_CHECK(mdc_recv(&token, 1, 1, 3, w));
                fill(buf, n, 2);
                MDC_CHECK(mdc_isend(buf, BIG, 1, 1, w, &q));
                mine[1] = mdc_wall_time();
                MDC_CHECK(mdc_waitall(&q, 1));
            } else {
                MDC_CHECK(mdc_send(&token, 1, 0, 3, w));
                pause_ms(200);
                mine[1] = mdc_wall_time();
                MDC_CHECK(mdc_recv(buf, BIG, 0, 1, w));
                TU_CHECK(count_bad(buf, n, 2) == 0, "received message 2 differs");
            }
            mdc_wait_stats_get(&after);
            slept[1] = after.sleeps - before.sleeps, rung[1] = after.rung - before.rung;
            MDC_CHECK(mdc_sendrecv(mine, sizeof mine, 1 - r, theirs, sizeof theirs, 1 - r, 4, w));
            /* Case 1 is judged on rank 1, case 2 on rank 0; both ranks compute both verdicts
             * from the same four times, so they agree on whether to try again. */
            static const char *who[2] = {"receiver", "sender"}, *act[2] = {"send", "copy"};
            for (int c = 0; c < 2; c++) {
                int waiter = 1 - c; /* case c's waiting rank: 1 (receives), then 0 (sends) */
                double waited = waiter == r ? mine[c] : theirs[c], acted = waiter == r ? theirs[c] : mine[c];
                if (judged[c] || acted <= waited + MARGIN) continue;
                judged[c] = 1;
                if (r == waiter)
                    TU_CHECK(slept[c] >= 1 && rung[c] >= 1,
                             "rank %d: the %s waited %.0f ms before the %s, "
                             "but slept %llu times, rung %llu: the wait did not sleep",
                             r, who[c], (acted - waited) * 1e3, act[c], slept[c], rung[c]);
            }
        }
        TU_CHECK(judged[0] && judged[1],
                 "rank %d: in %d attempts a waiter never started %.0f ms "
                 "before its peer acted (receiver %s, sender %s): the machine is too loaded to judge",
                 r, ATTEMPTS, MARGIN * 1e3, judged[0] ? "judged" : "not judged", judged[1] ? "judged" : "not judged");
    }

    /* A transport on a communicator in reverse order: its rank i is world rank p-1-i. */
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, p - 1 - r, &rev);
    mdc_transport *t2;
    mdc_group *g2;
    MDC_CHECK(mdc_transport_create(&t2, &rev, NULL, 1));
    MDC_CHECK(mdc_group_world(&g2, t2));
    if (p > 1) {
        int me = mdc_group_rank(g2), next = (me + 1) % p, prev = (me + p - 1) % p;
        unsigned *in = malloc(BIG);
        fill(buf, n, 100u + (unsigned)me);
        if (me == 0) pause_ms(30); /* the others sleep until it sends */
        MDC_CHECK(mdc_sendrecv(buf, BIG, next, in, BIG, prev, 2, g2));
        TU_CHECK(count_bad(in, n, 100u + (unsigned)prev) == 0,
                 "ring on the reversed communicator: "
                 "rank %d got wrong data from %d",
                 me, prev);
        free(in);
    }
    mdc_group_free(g2);
    mdc_transport_free(t2);
    MPI_Comm_free(&rev);

    /* Trees leave ranks idle while others copy. */
    size_t nf = (4u << 20) / sizeof(float);
    float *a = malloc(nf * sizeof *a), *b = malloc(nf * sizeof *b);
    collective(w, MDC_COLL_BCAST, "binomial", a, b, nf);
    collective(w, MDC_COLL_BCAST, "scatter_allgather", a, b, nf);
    collective(w, MDC_COLL_ALLREDUCE, "reduce_bcast", a, b, nf);
    collective(w, MDC_COLL_ALLREDUCE, "rabenseifner", a, b, nf);
    collective(w, MDC_COLL_ALLREDUCE, "ring", a, b, nf);
    free(a);
    free(b);

    double el = mdc_wall_time() - t0;
    mdc_wait_stats_get(&ws);
    TU_CHECK(ws.timed_out == 0, "rank %d: %llu of %llu sleeps ran out their 20 s", r, ws.timed_out, ws.sleeps);
    TU_CHECK(el < 15, "rank %d: took %.1f s: a sleep was not rung", r, el);
    if (r == 0) printf("doorbell: %d ranks, %.2f s; rank 0 slept %llu times, %llu rung\n", p, el, ws.sleeps, ws.rung);
    free(buf);
    int rc = tu_finish("test_doorbell");
    mdc_runtime_finalize(&rt);
    return rc;
}
