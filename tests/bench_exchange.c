/* How fast can MPI point-to-point messages move bytes on this machine when every rank moves
 * them at once? The ceiling of any collective built from them (docs/performance.md).
 *
 *   mpiexec.mpich -n P build/tests/bench_exchange [MiB]      (P even; default 32 MiB)
 *
 * Ranks pair up (r with r XOR 1) and exchange S bytes both ways at the same moment: one
 * MPI_Isend and one MPI_Irecv each, waited with MPI_Test + sched_yield (every rank is copying,
 * so no one has reason to sleep). Under MPICH's rendezvous each receiver copies its S bytes out
 * of its partner's memory (CMA). Prints the median over 9 rounds of the slowest rank's time
 * and the bytes all ranks received per second. A plain MPI program: no minidc. */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    if (p % 2) {
        if (r == 0) fprintf(stderr, "bench_exchange: needs an even number of ranks (got %d)\n", p);
        MPI_Finalize();
        return 2;
    }
    size_t n = (size_t)(argc > 1 ? atof(argv[1]) : 32) * (1u << 20);
    char *s = malloc(n ? n : 1), *d = malloc(n ? n : 1);
    memset(s, r, n);
    memset(d, 0, n);
    enum { REPS = 9 };
    double t[REPS];
    for (int it = 0; it < REPS; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Request q[2];
        MPI_Status st[2]; /* not MPI_STATUSES_IGNORE: gcc 12 misreads its size */
        MPI_Irecv(d, (int)n, MPI_BYTE, r ^ 1, 0, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(s, (int)n, MPI_BYTE, r ^ 1, 0, MPI_COMM_WORLD, &q[1]);
        int done = 0;
        while (!done) {
            MPI_Testall(2, q, &done, st);
            if (!done) sched_yield();
        }
        double dt = MPI_Wtime() - t0, mx = 0;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[it] = mx;
    }
    qsort(t, REPS, sizeof t[0], cmp);
    if (r == 0)
        printf("%d ranks exchange %zu bytes in pairs at once: %.2f ms, %.2f GB/s received by all ranks\n", p, n,
               t[REPS / 2] * 1e3, p * (double)n / t[REPS / 2] / 1e9);
    free(s);
    free(d);
    MPI_Finalize();
    return 0;
}
