/* What MPI point-to-point does on this machine, measured by a plain MPI program (no minidc):
 * the facts behind the doorbells (collectives/doorbell.c) and the rate of a plain exchange
 * pattern, a yardstick for collectives built from messages (docs/performance.md). Both are in
 * `make bench`.
 *
 *   mpiexec.mpich -n 4 build/tests/bench_p2p yield [MiB]      (default 64)
 *   mpiexec.mpich -n P build/tests/bench_p2p exchange [MiB]   (P even; default 32)
 *   mpiexec.mpich -n 2 build/tests/bench_p2p copy [MiB]       (default 64)
 *
 * yield: rank 2 receives one message from rank 0; under MPICH's rendezvous the receiver copies
 * it out of the sender's memory (CMA), inside its MPI_Test calls. Meanwhile ranks 0, 1 and 3
 * wait, either by MPI_Test + sched_yield (minidc's wait before doorbells) or by MPI_Test + a
 * 200 us nanosleep (what a doorbell sleep amounts to for the copier: the waiter is off the run
 * queue); rank 2 always polls with yields, as it must to drive the copy. Prints the copy's time
 * for each way of waiting, alternating. If yields were free, both would match.
 *
 * exchange: ranks pair up (r with r XOR 1) and exchange S bytes both ways at the same moment
 * (every rank copies, so all wait with yields). Prints the slowest rank's time and the bytes
 * all ranks received per second: a yardstick, not a ceiling (an 8-rank allgather of 64 MiB,
 * whose messages are 8-32 MiB, received 7.3-8.1 GB/s where 32 MiB pairs received 5.7).
 *
 * copy: rank 1 moves S bytes of rank 0's buffer into its own three ways, in turn: one MPI
 * message (under MPICH's rendezvous, the receiver's CMA copy), the same copy made directly
 * with process_vm_readv (no MPI), and a memcpy of S bytes within rank 1. Prints each one's
 * rate: the speed limit of any collective whose time is one message's copy (a 2-rank
 * broadcast, or each direction of a 2-rank all-to-all), in minidc and MPICH alike, next to
 * the memcpy speed the `floor` column of `minidc bench` assumes.
 *
 * Times are medians over REPS rounds (of the slowest rank for exchange). */
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { REPS = 9 };

static void wait_all(MPI_Request *q, int n, int sleeping) {
    MPI_Status st[2]; /* not MPI_STATUSES_IGNORE: gcc 12 misreads its size */
    int done = 0;
    while (!done) {
        MPI_Testall(n, q, &done, st);
        if (done) break;
        if (sleeping) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t) {
    qsort(t, REPS, sizeof t[0], cmp);
    return t[REPS / 2];
}

static void yield_vs_sleep(int r, char *buf, size_t n) {
    double t[2][REPS];
    for (int rep = 0; rep < REPS; rep++)
        for (int sleeping = 0; sleeping < 2; sleeping++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Request q;
            char token = 0;
            if (r == 0) {
                MPI_Isend(buf, (int)n, MPI_BYTE, 2, 0, MPI_COMM_WORLD, &q);
                wait_all(&q, 1, sleeping);
            } else if (r == 2) {
                MPI_Irecv(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &q);
                wait_all(&q, 1, 0);
                t[sleeping][rep] = MPI_Wtime() - t0;
                for (int k = 1; k <= 3; k += 2) MPI_Send(&token, 1, MPI_BYTE, k, 1, MPI_COMM_WORLD);
            } else {
                MPI_Irecv(&token, 1, MPI_BYTE, 2, 1, MPI_COMM_WORLD, &q);
                wait_all(&q, 1, sleeping);
            }
        }
    if (r == 2) {
        double y = median(t[0]), s = median(t[1]);
        printf("# one %zu-byte message, rank 0 -> rank 2, 4 ranks; median of %d\n", n, REPS);
        printf("waiters yield: %8.2f ms\nwaiters sleep: %8.2f ms\nratio         : %8.2f\n", y * 1e3, s * 1e3, y / s);
    }
}

static void exchange(int r, int p, char *s, size_t n) {
    char *d = malloc(n ? n : 1);
    memset(d, 0, n);
    double t[REPS];
    for (int it = 0; it < REPS; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Request q[2];
        MPI_Irecv(d, (int)n, MPI_BYTE, r ^ 1, 0, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(s, (int)n, MPI_BYTE, r ^ 1, 0, MPI_COMM_WORLD, &q[1]);
        wait_all(q, 2, 0);
        double dt = MPI_Wtime() - t0;
        MPI_Allreduce(&dt, &t[it], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    double m = median(t);
    if (r == 0)
        printf("%d ranks exchange %zu bytes in pairs at once: %.2f ms, %.2f GB/s received by all ranks\n", p, n,
               m * 1e3, p * (double)n / m / 1e9);
    free(d);
}

static void copy_rates(int r, char *buf, size_t n) {
    /* Rank 1 learns where rank 0's buffer is, to read it with process_vm_readv (rank 0 allows
     * it, for Yama's ptrace_scope 1). */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    unsigned long long where[2] = {(unsigned long long)getpid(), (unsigned long long)(uintptr_t)buf};
    if (r == 0) MPI_Send(where, 2, MPI_UNSIGNED_LONG_LONG, 1, 2, MPI_COMM_WORLD);
    else MPI_Recv(where, 2, MPI_UNSIGNED_LONG_LONG, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    char *d = malloc(n ? n : 1), *own = malloc(n ? n : 1);
    memset(d, 0, n);
    memset(own, 7, n);
    double t[3][REPS];
    int failed = 0;
    for (int rep = 0; rep < REPS; rep++)
        for (int way = 0; way < 3; way++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (way == 0 && r == 0) MPI_Send(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            if (r != 1) continue;
            if (way == 0) {
                MPI_Request q;
                MPI_Irecv(d, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &q);
                wait_all(&q, 1, 0);
            } else if (way == 1) {
                struct iovec local = {d, n}, remote = {(void *)(uintptr_t)where[1], n};
                failed |= process_vm_readv((pid_t)where[0], &local, 1, &remote, 1, 0) != (ssize_t)n;
            } else {
                memcpy(d, own, n);
            }
            t[way][rep] = MPI_Wtime() - t0;
        }
    if (r == 1) {
        static const char *name[3] = {"one MPI message", "process_vm_readv", "memcpy"};
        double m[3];
        for (int w = 0; w < 3; w++) m[w] = median(t[w]);
        printf("# rank 1 moves %zu bytes into its buffer; median of %d, one way after another\n", n, REPS);
        for (int w = 0; w < 3; w++)
            if (w != 1 || !failed)
                printf("%-17s %8.2f ms %6.2f GB/s  %.2f x memcpy\n", name[w], m[w] * 1e3, (double)n / m[w] / 1e9,
                       m[2] / m[w]);
        if (failed) /* Yama's ptrace_scope 2 or 3, or a container without the permission */
            printf(
                "# process_vm_readv is not permitted here (see /proc/sys/kernel/yama/ptrace_scope): no row for it\n");
    }
    free(d);
    free(own);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    const char *mode = argc > 1 ? argv[1] : "";
    int yield = !strcmp(mode, "yield"), xchg = !strcmp(mode, "exchange"), copy = !strcmp(mode, "copy");
    const char *bad = !yield && !xchg && !copy ? "usage: bench_p2p yield|exchange|copy [MiB]"
                      : yield && p != 4        ? "bench_p2p yield: run with 4 ranks"
                      : xchg && p % 2          ? "bench_p2p exchange: needs an even number of ranks"
                      : copy && p != 2         ? "bench_p2p copy: run with 2 ranks"
                                               : NULL;
    if (bad) {
        if (r == 0) fprintf(stderr, "%s (got %d ranks)\n", bad, p);
        MPI_Finalize();
        return 2;
    }
    size_t n = (size_t)(argc > 2 ? atof(argv[2]) : xchg ? 32 : 64) * (1u << 20);
    char *buf = malloc(n ? n : 1);
    memset(buf, r, n);
    if (yield) yield_vs_sleep(r, buf, n);
    else if (copy) copy_rates(r, buf, n);
    else exchange(r, p, buf, n);
    free(buf);
    MPI_Finalize();
    return 0;
}
