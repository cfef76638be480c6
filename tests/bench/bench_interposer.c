/* A plain MPI program that times a few collectives, for tools/bench_interposer.sh, which runs it
 * with and without LD_PRELOAD=libminidc_mpi.so and prints the ratio. Per row: the median over
 * iterations of the slowest rank's time for one call, each call after an MPI_Barrier (under
 * the library, minidc's polite one). Rows: back-to-back 8-byte MPI_Allreduce calls (time per
 * call, the slowest rank's), MPI_Allreduce of doubles (small, medium, large), the
 * same broadcast with a predefined type and with a strided vector type (which the library
 * packs), an all-to-all, and a gather and a scatter of 4 MiB at root 0 and at the last rank.
 * Prints "name bytes us" per row on rank 0. Calls MPI collectives:
 * it is a benchmark comparison (docs/design.md rule 1). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over iterations of the slowest rank's time (us); `call` is one collective. */
#define TIME(name, bytes, call)                                                           \
    do {                                                                                  \
        for (int it = 0; it < iters + 2; it++) {                                          \
            MPI_Barrier(MPI_COMM_WORLD);                                                  \
            double t0 = MPI_Wtime();                                                      \
            call;                                                                         \
            double dt = (MPI_Wtime() - t0) * 1e6, mx = 0;                                 \
            MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);              \
            if (it >= 2) t[it - 2] = mx; /* two warm-up calls */                          \
        }                                                                                 \
        qsort(t, (size_t)iters, sizeof *t, cmp);                                          \
        if (me == 0) printf("%-24s %10zu %12.1f\n", name, (size_t)(bytes), t[iters / 2]); \
    } while (0)

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    if (iters < 1 || iters > 100000) {
        if (me == 0) fprintf(stderr, "usage: bench_interposer [ITERS 1..100000]\n");
        MPI_Finalize();
        return 2;
    }
    double *t = malloc(sizeof(double) * (size_t)iters);
    const size_t big = (size_t)4 << 20, n = big / sizeof(double);
    double *a = malloc(2 * big), *b = malloc(2 * big);
    if (!t || !a || !b) MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t i = 0; i < 2 * n; i++) a[i] = (double)(i % 7), b[i] = 0;
    /* Back to back, no barrier between calls: the per-call cost of a small collective. As many
     * calls as fit in about 0.3 s by a 10-call pilot (at most 20000: MPICH with more ranks
     * than cores takes milliseconds per call), the same count on every rank. */
    {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime(), pilot = 0;
        for (int i = 0; i < 10; i++) MPI_Allreduce(a, b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double per = (MPI_Wtime() - t0) / 10;
        MPI_Allreduce(&per, &pilot, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        int loop = pilot > 0 ? (int)(0.3 / pilot) : 20000;
        loop = loop < 10 ? 10 : loop > 20000 ? 20000 : loop;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < loop; i++) MPI_Allreduce(a, b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double dt = (MPI_Wtime() - t0) / loop * 1e6, mx = 0;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (me == 0) printf("%-24s %10d %12.2f\n", "allreduce loop", 8, mx);
    }
    TIME("allreduce f64", 8, MPI_Allreduce(a, b, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    TIME("allreduce f64", 65536, MPI_Allreduce(a, b, 8192, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    TIME("allreduce f64", big, MPI_Allreduce(a, b, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    /* 1 MiB broadcast: contiguous doubles, then every other double of a 2 MiB array */
    const int m = 1 << 17;
    MPI_Datatype every2;
    MPI_Type_vector(m, 1, 2, MPI_DOUBLE, &every2);
    MPI_Type_commit(&every2);
    TIME("bcast contiguous", (size_t)m * 8, MPI_Bcast(a, m, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    TIME("bcast strided", (size_t)m * 8, MPI_Bcast(a, 1, every2, 0, MPI_COMM_WORLD));
    MPI_Type_free(&every2);
    TIME("alltoall bytes", (size_t)65536 * np, MPI_Alltoall(a, 65536, MPI_BYTE, b, 65536, MPI_BYTE, MPI_COMM_WORLD));
    /* 4 MiB gathered to / scattered from rank 0 and the last rank (a root other than 0 rotates
     * its blocks in MPICH's and, before 2026-11-30, in minidc's binomial tree) */
    const int blk = (int)(big / (size_t)np);
    TIME("gather root0", big, MPI_Gather(a, blk, MPI_BYTE, b, blk, MPI_BYTE, 0, MPI_COMM_WORLD));
    TIME("gather rootlast", big, MPI_Gather(a, blk, MPI_BYTE, b, blk, MPI_BYTE, np - 1, MPI_COMM_WORLD));
    TIME("scatter root0", big, MPI_Scatter(a, blk, MPI_BYTE, b, blk, MPI_BYTE, 0, MPI_COMM_WORLD));
    TIME("scatter rootlast", big, MPI_Scatter(a, blk, MPI_BYTE, b, blk, MPI_BYTE, np - 1, MPI_COMM_WORLD));
    free(t);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
