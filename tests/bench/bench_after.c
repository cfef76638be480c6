/* What a collective call leaves behind for the call after it: the reason `minidc bench` times
 * each library in blocks of its own calls (tools/bench_coll.c, time_calls; docs/performance.md
 * "How the two are timed"). In `make bench`.
 *
 *   mpiexec.mpich -n P build/tests/bench_after [KiB] [SEQUENCE] [ROUNDS]
 *       (defaults: 32 KiB per rank, MMMdddd, 2000 rounds)
 *
 * Runs SEQUENCE ROUNDS times; before every step all ranks meet in minidc's barrier. Steps:
 *   M  MPI_Allgather of KiB per rank (MPICH's own)
 *   d  mdc_allgather of the same buffers (minidc, its `auto` choice)
 *   A  MPI_Alltoall, KiB from every rank to every rank
 *   a  mdc_alltoall of the same buffers
 *   F  every rank writes 64 MiB of another buffer (pushes the buffers out of the caches)
 * Prints each step's median over rounds of the max over ranks, in microseconds. If a call
 * left nothing behind, an M (or d) would take the same time wherever it stands. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/collectives.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(int rank, const char *what) {
    fprintf(stderr, "bench_after: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    double kib = argc > 1 ? atof(argv[1]) : 32;
    const char *seq = argc > 2 ? argv[2] : "MMMdddd";
    int rounds = argc > 3 ? atoi(argv[3]) : 2000;
    size_t n = (size_t)(kib * 1024), steps = strlen(seq), flush = (size_t)64 << 20;
    if (kib <= 0 || kib > 1024.0 * 1024 || rounds < 1 || steps == 0 || strspn(seq, "MdAaF") != steps)
        die(me, "usage: bench_after [KiB per rank, 0 < KiB <= 1 GiB] [SEQUENCE of M d A a F] [ROUNDS >= 1]");
    mdc_transport *t;
    mdc_group *g;
    if (mdc_transport_create(&t, NULL, NULL, 8) || mdc_group_world(&g, t)) die(me, mdc_detail());
    char *s = malloc(n * (size_t)p), *r = malloc(n * (size_t)p), *f = strchr(seq, 'F') ? malloc(flush) : NULL;
    double *tm = malloc(sizeof *tm * steps * (size_t)rounds), *mx = malloc(sizeof *mx * steps * (size_t)rounds);
    if (!s || !r || !tm || !mx || (strchr(seq, 'F') && !f)) die(me, "out of memory");
    memset(s, me + 1, n * (size_t)p);
    memset(r, 0, n * (size_t)p);
    for (int k = 0; k < rounds; k++)
        for (size_t j = 0; j < steps; j++) {
            if (mdc_barrier(g)) die(me, mdc_detail());
            double t0 = MPI_Wtime();
            if (seq[j] == 'M') {
                if (MPI_Allgather(s, (int)n, MPI_BYTE, r, (int)n, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS)
                    die(me, "MPI_Allgather failed");
            } else if (seq[j] == 'd') {
                if (mdc_allgather(s, r, n, MDC_U8, g)) die(me, mdc_detail());
            } else if (seq[j] == 'A') {
                if (MPI_Alltoall(s, (int)n, MPI_BYTE, r, (int)n, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS)
                    die(me, "MPI_Alltoall failed");
            } else if (seq[j] == 'a') {
                if (mdc_alltoall(s, r, n, MDC_U8, g)) die(me, mdc_detail());
            } else {
                memset(f, k + (int)j, flush);
            }
            tm[j * (size_t)rounds + (size_t)k] = MPI_Wtime() - t0;
        }
    for (int q = 0; q < p; q++) /* every block received holds its sender's byte */
        if (r[(size_t)q * n] != (char)(q + 1) || r[(size_t)q * n + n - 1] != (char)(q + 1))
            die(me, "a wrong block arrived");
    MPI_Allreduce(tm, mx, (int)(steps * (size_t)rounds), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0) {
        printf("%d ranks, %g KiB per rank, %d rounds of %s; median of the max over ranks (us):", p, kib, rounds, seq);
        for (size_t j = 0; j < steps; j++) {
            qsort(mx + j * (size_t)rounds, (size_t)rounds, sizeof *mx, cmp);
            printf(" %c %.2f", seq[j], mx[j * (size_t)rounds + (size_t)rounds / 2] * 1e6);
        }
        printf("\n");
    }
    free(f);
    free(s);
    free(r);
    free(tm);
    free(mx);
    mdc_group_free(g);
    mdc_transport_free(t);
    MPI_Finalize();
    return 0;
}
