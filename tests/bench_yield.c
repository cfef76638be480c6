/* Does a yielding waiter slow down a rank that copies? The measurement behind doorbell.c.
 *
 *   mpiexec.mpich -n 4 build/tests/bench_yield [MiB]
 *
 * Rank 2 receives one message (default 64 MiB) from rank 0; under MPICH's rendezvous the
 * receiver copies it out of the sender's memory (CMA), inside its MPI_Test calls. Meanwhile
 * ranks 0, 1 and 3 wait: either by MPI_Test + sched_yield (minidc's polite wait before
 * doorbells), or by MPI_Test + a 200 us nanosleep (what a doorbell sleep amounts to for the
 * copier: the waiter is off the run queue). Rank 2 always polls with yields, as it must to
 * drive the copy. Prints the copy's time for each way of waiting, median of 7, alternating.
 * With more ranks than cores the copier shares a core; if yields were free, both columns
 * would match. A plain MPI program (no minidc), so it measures the scheduler, not our code. */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void wait_req(MPI_Request *q, int sleeping) {
    int done = 0;
    while (!done) {
        MPI_Test(q, &done, MPI_STATUS_IGNORE);
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

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (p != 4) {
        if (r == 0) fprintf(stderr, "bench_yield: run with 4 ranks (got %d)\n", p);
        MPI_Finalize();
        return 2;
    }
    size_t n = (size_t)(argc > 1 ? atof(argv[1]) : 64) * (1u << 20);
    char *buf = malloc(n ? n : 1);
    memset(buf, r, n);
    enum { REPS = 7 };
    double t[2][REPS];
    for (int rep = 0; rep < REPS; rep++)
        for (int sleeping = 0; sleeping < 2; sleeping++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Request q;
            char token = 0;
            if (r == 0) {
                MPI_Isend(buf, (int)n, MPI_BYTE, 2, 0, MPI_COMM_WORLD, &q);
                wait_req(&q, sleeping);
            } else if (r == 2) {
                MPI_Irecv(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &q);
                wait_req(&q, 0);
                t[sleeping][rep] = MPI_Wtime() - t0;
                for (int k = 1; k <= 3; k += 2) MPI_Send(&token, 1, MPI_BYTE, k, 1, MPI_COMM_WORLD);
            } else {
                MPI_Irecv(&token, 1, MPI_BYTE, 2, 1, MPI_COMM_WORLD, &q);
                wait_req(&q, sleeping);
            }
        }
    if (r == 2) {
        qsort(t[0], REPS, sizeof(double), cmp);
        qsort(t[1], REPS, sizeof(double), cmp);
        printf("# one %zu-byte message, rank 0 -> rank 2, 4 ranks; median of %d\n", n, REPS);
        printf("waiters yield: %8.2f ms\nwaiters sleep: %8.2f ms\nratio         : %8.2f\n", t[0][REPS / 2] * 1e3,
               t[1][REPS / 2] * 1e3, t[0][REPS / 2] / t[1][REPS / 2]);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
