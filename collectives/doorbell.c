/* Doorbells: a waiting rank sleeps in the kernel until the peer it waits for rings it.
 *
 * Why: with more ranks than cores, a rank that waits by sched_yield still takes its share of
 * the core. On this host's kernel (EEVDF scheduler, Linux 6.x) a yielding task stays
 * runnable and keeps getting picked while its virtual runtime is behind, so a rank copying a
 * large message at 4 ranks on 2 cores shares its core with a yielding neighbour: one 64 MiB
 * MPI message took 15 ms with the copying rank pinned alone on its core and 27-33 ms pinned
 * next to a yielding rank (docs/performance.md, item 11); unpinned, 27-33 ms with yielding waiters and 16-22 ms with sleeping
 * ones in 13 of 20 runs, equal in the rest (tests/bench/bench_p2p.c yield, in make bench). A
 * sleeping rank takes nothing.
 *
 * How: the ranks on this host share one small segment (shm_open, named after the launcher
 * process that started them, which Hydra's proxy is for all ranks of a job on a host; names
 * left by dead jobs are removed at start-up, remove_stale). It
 * holds, per ordered pair of world ranks, the MPI messages the first has posted to the second
 * (`sent`) and the messages the first has received from the second (`rcvd`), each row written
 * by one rank only, and per rank a word to sleep on (`bell`) and a `sleeping` flag. A rank that
 * waits may sleep only while nothing it waits for can be under way:
 *   - a receive from p: every message p posted to us has been received (sent[p][me] ==
 *     rcvd[me][p]); when p posts the next one it rings us;
 *   - a send to p: p has completed no receive from us since we posted (rcvd[p][me] == the
 *     value before posting); under MPICH's rendezvous the receiver copies the payload out of
 *     the sender's memory (CMA) and the sender only needs to notice the end, and p rings us
 *     when its receive completes.
 * A ring sets the counter first and then, only if the peer sleeps, bumps its bell and wakes
 * it (Dekker-style ordering with sequentially consistent atomics, so a ring is never lost).
 * MPI sometimes needs the sleeping side after all: UCX connects a pair's endpoints lazily,
 * with a handshake both ways, so a sender sleeping on its first message to a peer stalled its
 * receiver. A receive that stays pending therefore nudges its sender every 200 us (a wake
 * for one round of progress; transport.c). A sleep also ends after DOOR_SLEEP_US without a
 * ring, so a peer outside the segment costs that much, never a hang.
 * The sleep itself is platform.c's: a futex on Linux; elsewhere (and under make PORTABLE=1) the
 * sleeper re-reads its bell every 50..200 us, still off the core, a ring then late by that much.
 *
 * Owns: the mapping, for the life of the process. No MPI calls here. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll_internal.h"
#include "minidc/collectives.h"
#include "../device/platform.h"

#define DOOR_MAGIC 0x6d646364u /* "mdcd" */
#define DOOR_MAX_RANKS 1024    /* two 1024 x 1024 counter matrices: 8 MiB of /dev/shm */
#define DOOR_SLEEP_US 1000     /* longest sleep without a ring (MINIDC_DOOR_SLEEP_US) */
#define LINE 64

typedef struct {
    uint32_t magic;
    uint32_t registered; /* ranks that mapped the segment; the last one unlinks the name */
} door_header;

typedef struct {
    uint32_t bell;     /* bumped by a ring (mdc_plat_wait's word) */
    uint32_t sleeping; /* 1 while the owner sleeps on bell */
    int32_t pid;       /* the owner's pid once it joined (0: not in this segment) */
} door_slot;

static struct {
    int state; /* 0 = not tried, 1 = on, -1 = off */
    int me, n;
    size_t row; /* counters per row, padded to a cache line */
    door_header *hdr;
    door_slot *slot; /* one per line */
    uint32_t *sent, *rcvd;
    long sleep_us;
    char name[96];
    unsigned long long sleeps, rung, timed_out;
} D;

static door_slot *slot_of(int r) { return (door_slot *)((char *)D.slot + (size_t)r * LINE); }
static uint32_t *sent_at(int from, int to) { return &D.sent[(size_t)from * D.row + (size_t)to]; }
static uint32_t *rcvd_at(int at, int from) { return &D.rcvd[(size_t)at * D.row + (size_t)from]; }

static void unlink_name(void) { shm_unlink(D.name); }

/* Removes this user's segments whose launcher is gone. A job killed before all its ranks
 * joined (an MPI_Abort during start-up, a crash) leaves its name behind: the launcher's pid
 * and start time in the name tell whether that job can still be running. (Where segments
 * are not files in /dev/shm, as on macOS, none can be listed and any left stay.) */
static void remove_stale(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = 0, n = 0;
        unsigned long long st = 0;
        char path[300];
        struct stat sb;
        if (sscanf(e->d_name, "minidc-door-%d-%llu-%d", &pid, &st, &n) != 3 || pid <= 0) continue;
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        if (lstat(path, &sb) != 0 || sb.st_uid != geteuid()) continue;
        /* That launcher still runs: the same start time, or where start times are unknown
         * (the name then holds 0), a process with its pid. */
        unsigned long long now = mdc_plat_proc_start(pid);
        if (now ? now == st : mdc_plat_proc_state(pid) != MDC_PLAT_GONE) continue;
        snprintf(path, sizeof path, "/%s", e->d_name);
        shm_unlink(path);
    }
    closedir(d);
}

int mdc_i_door_open(int world_rank, int world_size, int local_ranks, int want) {
    if (D.state) return D.state > 0;
    D.state = -1;
    const char *e = getenv("MINIDC_DOORBELL");
    if (e && *e) want = mdc_i_env_num("MINIDC_DOORBELL", want, 0, 1) != 0;
    /* Every rank must be on this host (the segment is per host), and one rank has no peer. */
    if (!want || world_size < 2 || world_size > DOOR_MAX_RANKS || local_ranks != world_size) return 0;
    remove_stale();
    pid_t pp = getppid();
    char name[96];
    /* (macOS allows 31 characters: with the fallback's start time 0 the name has at most 25.) */
    snprintf(name, sizeof name, "/minidc-door-%d-%llu-%d", (int)pp, mdc_plat_proc_start(pp), world_size);
    D.n = world_size;
    D.me = world_rank;
    D.sleep_us = (long)mdc_i_env_num("MINIDC_DOOR_SLEEP_US", DOOR_SLEEP_US, 1, 1e9);
    D.row = ((size_t)world_size * 4 + LINE - 1) / LINE * (LINE / 4);
    size_t slots = (size_t)world_size * LINE, rows = D.row * 4 * (size_t)world_size;
    size_t bytes = LINE + slots + 2 * rows;
    int fd = shm_open(name, O_CREAT | O_RDWR | MDC_PLAT_SHM_OFLAGS, 0600);
    if (fd < 0) return 0;
    /* Only a segment of our own: another user's could only slow our waits (doorbells carry
     * no data), but there is no reason to let it. */
    struct stat sb;
    if (fstat(fd, &sb) != 0 || sb.st_uid != geteuid()) {
        close(fd);
        return 0;
    }
    /* Every rank sets the same size; a fresh segment reads as zeros. Reserving the pages now
     * turns a full /dev/shm into "no doorbells" instead of a SIGBUS on first touch. */
    if (mdc_plat_shm_size(fd, bytes) != 0) {
        close(fd);
        return 0;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return 0;
    D.hdr = m;
    D.slot = (door_slot *)((char *)m + LINE);
    D.sent = (uint32_t *)((char *)m + LINE + slots);
    D.rcvd = D.sent + D.row * (size_t)world_size;
    uint32_t zero = 0;
    __atomic_compare_exchange_n(&D.hdr->magic, &zero, DOOR_MAGIC, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    if (D.hdr->magic != DOOR_MAGIC || slot_of(world_rank)->pid != 0) {
        munmap(m, bytes); /* someone else's: the name is this launcher's, so never expected */
        return 0;
    }
    __atomic_store_n(&slot_of(world_rank)->pid, (int32_t)getpid(), __ATOMIC_SEQ_CST);
    /* The last rank to join removes the name; the mapping lives on in every rank. A rank
     * launched through a wrapper that did not exec has another parent: it gets a segment of
     * its own, sees no registered peers, and never sleeps on them; its name goes at exit. */
    snprintf(D.name, sizeof D.name, "%s", name);
    if (__atomic_add_fetch(&D.hdr->registered, 1, __ATOMIC_SEQ_CST) == (uint32_t)world_size) shm_unlink(name);
    else atexit(unlink_name);
    D.state = 1;
    return 1;
}

/* Wakes rank r if it sleeps. Call after changing a counter r reads. */
static void ring(int r) {
    door_slot *s = slot_of(r);
    if (__atomic_load_n(&s->sleeping, __ATOMIC_SEQ_CST)) {
        __atomic_add_fetch(&s->bell, 1, __ATOMIC_SEQ_CST);
        mdc_plat_wake(&s->bell);
    }
}

void mdc_i_door_posted(int to, int n) {
    if (D.state <= 0 || to < 0 || to >= D.n) return;
    uint32_t *c = sent_at(D.me, to);
    __atomic_store_n(c, *c + (uint32_t)n, __ATOMIC_SEQ_CST); /* only we write our row */
    ring(to);
}

void mdc_i_door_received(int from, int n) {
    if (D.state <= 0 || from < 0 || from >= D.n) return;
    uint32_t *c = rcvd_at(D.me, from);
    __atomic_store_n(c, *c + (uint32_t)n, __ATOMIC_SEQ_CST);
    ring(from);
}

void mdc_i_door_nudge(int peer) {
    if (D.state > 0 && peer >= 0 && peer < D.n && peer != D.me) ring(peer);
}

uint32_t mdc_i_door_mark(int peer) {
    if (D.state <= 0 || peer < 0 || peer >= D.n) return 0;
    return __atomic_load_n(rcvd_at(peer, D.me), __ATOMIC_SEQ_CST);
}

int mdc_i_door_idle(int peer, int is_send, uint32_t mark) {
    if (D.state <= 0 || peer < 0 || peer >= D.n || peer == D.me) return 0;
    if (!__atomic_load_n(&slot_of(peer)->pid, __ATOMIC_SEQ_CST)) return 0; /* it could not ring us */
    if (is_send) return __atomic_load_n(rcvd_at(peer, D.me), __ATOMIC_SEQ_CST) == mark;
    return __atomic_load_n(sent_at(peer, D.me), __ATOMIC_SEQ_CST) ==
           __atomic_load_n(rcvd_at(D.me, peer), __ATOMIC_SEQ_CST);
}

void mdc_i_door_sleep(int (*idle)(void *), void *ctx) {
    door_slot *s = slot_of(D.me);
    __atomic_store_n(&s->sleeping, 1, __ATOMIC_SEQ_CST);
    uint32_t v = __atomic_load_n(&s->bell, __ATOMIC_SEQ_CST);
    if (idle(ctx)) { /* checked after announcing the sleep: a ring from now on wakes us */
        D.sleeps++;
        if (mdc_plat_wait(&s->bell, v, D.sleep_us)) D.rung++; /* woken, or the bell had changed already */
        else D.timed_out++;
    }
    __atomic_store_n(&s->sleeping, 0, __ATOMIC_SEQ_CST);
}

void mdc_wait_stats_get(mdc_wait_stats *out) {
    out->on = D.state > 0;
    out->sleeps = D.sleeps;
    out->rung = D.rung;
    out->timed_out = D.timed_out;
}

int mdc_i_door_peer_state(int world_rank, int *pid) {
    if (pid) *pid = 0;
    if (D.state != 1 || world_rank < 0 || world_rank >= D.n) return -1;
    int p = slot_of(world_rank)->pid;
    if (pid) *pid = p;
    if (p <= 0) return -1;
    return mdc_plat_proc_state(p);
}

void mdc_i_door_others(char *buf, size_t cap, int skip) {
    if (D.state != 1 || !cap) return;
    int named = 0, more = 0;
    for (int r = 0; r < D.n; r++) {
        if (r == D.me || r == skip) continue;
        int p = slot_of(r)->pid, s = p > 0 ? mdc_plat_proc_state(p) : -1;
        if (s != MDC_PLAT_STOPPED && s != MDC_PLAT_GONE) continue;
        if (named == 8) { /* the message stays readable; the count says how many more */
            more++;
            continue;
        }
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "; rank %d (pid %d) %s", r, p,
                 s == MDC_PLAT_STOPPED ? "is stopped (SIGSTOP or a debugger)" : "has exited");
        named++;
    }
    if (more) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "; and %d more rank(s) stopped or exited", more);
    }
}

void mdc_i_door_ring_all(void) {
    if (D.state <= 0) return;
    for (int r = 0; r < D.n; r++)
        if (r != D.me) {
            door_slot *s = slot_of(r);
            __atomic_add_fetch(&s->bell, 1, __ATOMIC_SEQ_CST);
            mdc_plat_wake(&s->bell);
        }
}
