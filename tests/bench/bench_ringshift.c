/* The copy rate MPI point-to-point gives on this host (docs/performance.md, "What still limits
 * it"): every rank sends S MiB to the next and receives from the previous, waiting politely
 * (test + sched_yield, as minidc's transport does). Prints the median over 9 shifts of the
 * slowest rank's time. Not part of minidc: a plain MPI program that measures MPI itself, the
 * reference the benchmark's figures are read against, so it lives with the tests (docs/design.md
 * rule 1: MPI called directly only there and in benchmark comparisons). make builds it.
 *   make build/tests/bench_ringshift
 *   mpiexec.mpich -n 2 build/tests/bench_ringshift 16; mpiexec.mpich -n 4 build/tests/bench_ringshift 16 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void wait_all(int n, MPI_Request *r) {
    MPI_Status st[2]; /* not MPI_STATUSES_IGNORE: gcc 12 misreads its size */
    for (int done = 0; MPI_Testall(n, r, &done, st), !done;) sched_yield();
}
static int cmp(const void *a, const void *b) {
    double x = *(double *)a, y = *(double *)b;
    return (x > y) - (x < y);
}
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    size_t S = (size_t)atoi(argc > 1 ? argv[1] : "16") << 20;
    char *s = malloc(S), *r = malloc(S);
    memset(s, 1, S), memset(r, 0, S);
    double t[9];
    for (int it = 0; it < 9; it++) {
        MPI_Request q[2];
        MPI_Ibarrier(MPI_COMM_WORLD, &q[0]);
        wait_all(1, q);
        double t0 = MPI_Wtime();
        MPI_Irecv(r, (int)S, MPI_BYTE, (me + p - 1) % p, 0, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(s, (int)S, MPI_BYTE, (me + 1) % p, 0, MPI_COMM_WORLD, &q[1]);
        wait_all(2, q);
        double dt = MPI_Wtime() - t0;
        MPI_Allreduce(&dt, &t[it], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    qsort(t, 9, sizeof *t, cmp);
    if (me == 0)
        printf("%d ranks, %zu MiB ring shift: %.2f ms (%.2f GB/s per rank)\n", p, S >> 20, t[4] * 1e3, S / t[4] / 1e9);
    MPI_Finalize();
    return 0;
}
