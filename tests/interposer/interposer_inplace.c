/* A plain MPI program for tests/interposer/interposer.sh: MPI_Reduce_scatter and MPI_Reduce_scatter_block
 * with MPI_IN_PLACE, as mpi4py's TestCCOBufInplace*.testReduceScatter calls them (counts
 * 1..p), with zero counts among uneven ones, and with blocks above minidc's 256 KiB slice.
 * Each rank checks its block, that every other element of the buffer still holds its input
 * (MPI's in place leaves them alone) and that the elements after the buffer still hold their
 * pattern. Rank 0 prints "ok: <case>" per case when every rank found it right; a wrong
 * element is printed by its rank, and the exit status is 1. Uses only MPI. Run under the
 * library only: MPICH 4.0.2's own in-place MPI_Reduce_scatter of 320 KiB blocks fails an
 * overlapping-memcpy assertion in its pack code. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define TAIL 8 /* pattern elements after the buffer */
#define PATTERN (-12345.0)

static int me, p;

static double input(int r, long i) { return (double)((r * 7 + i * 3 + 1) % 9 - 4); }

/* One in-place call: block sizes cnt (block = 1: MPI_Reduce_scatter_block of cnt[0]), op sum
 * or max, on doubles or ints. Returns 1 when every rank found it right. */
static int run_case(const char *what, const int *cnt, int block, MPI_Op op, int ints) {
    long total = 0, off = 0;
    for (int i = 0; i < p; i++) total += cnt[i], off += i < me ? cnt[i] : 0;
    double *d = malloc(sizeof(double) * (size_t)(total + TAIL));
    int *n = malloc(sizeof(int) * (size_t)(total + TAIL)), bad = 0;
    if (!d || !n) MPI_Abort(MPI_COMM_WORLD, 2);
    for (long i = 0; i < total + TAIL; i++) {
        d[i] = i < total ? input(me, i) : PATTERN;
        n[i] = (int)d[i];
    }
    if (block)
        MPI_Reduce_scatter_block(MPI_IN_PLACE, ints ? (void *)n : (void *)d, cnt[0], ints ? MPI_INT : MPI_DOUBLE, op,
                                 MPI_COMM_WORLD);
    else
        MPI_Reduce_scatter(MPI_IN_PLACE, ints ? (void *)n : (void *)d, cnt, ints ? MPI_INT : MPI_DOUBLE, op,
                           MPI_COMM_WORLD);
    for (long i = 0; i < total + TAIL && !bad; i++) {
        double want = i >= total ? PATTERN : input(me, i), got = ints ? n[i] : d[i];
        if (i < cnt[me]) {
            want = input(0, off + i);
            for (int r = 1; r < p; r++) {
                double x = input(r, off + i);
                want = op == MPI_MAX ? (x > want ? x : want) : want + x;
            }
        }
        if (got != want) {
            printf("rank %d: %s: element %ld (%s) is %g, want %g\n", me, what, i,
                   i < cnt[me] ? "its block"
                   : i < total ? "not its block"
                               : "after the buffer",
                   got, want);
            bad = 1;
        }
    }
    free(d);
    free(n);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!bad && me == 0) printf("ok: %s\n", what);
    return !bad;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int *cnt = malloc(sizeof(int) * (size_t)p), good = 1;
    if (!cnt) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < p; i++) cnt[i] = i + 1; /* mpi4py's counts */
    good &= run_case("MPI_Reduce_scatter counts 1..p, double sum", cnt, 0, MPI_SUM, 0);
    good &= run_case("MPI_Reduce_scatter counts 1..p, int max", cnt, 0, MPI_MAX, 1);
    for (int i = 0; i < p; i++) cnt[i] = (i * 3 + 1) % 4; /* zeros among them */
    good &= run_case("MPI_Reduce_scatter counts (3i+1)%4, double sum", cnt, 0, MPI_SUM, 0);
    for (int i = 0; i < p; i++) cnt[i] = 40000 + 7 * i; /* 320 KiB blocks: sliced */
    good &= run_case("MPI_Reduce_scatter counts 40000+7i, double sum", cnt, 0, MPI_SUM, 0);
    const int blocks[] = {5, 1, 50000};
    const char *names[] = {"MPI_Reduce_scatter_block 5, double sum", "MPI_Reduce_scatter_block 1, int sum",
                           "MPI_Reduce_scatter_block 50000, double max"};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < p; i++) cnt[i] = blocks[k];
        good &= run_case(names[k], cnt, 1, k == 2 ? MPI_MAX : MPI_SUM, k == 1);
    }
    free(cnt);
    MPI_Finalize();
    return good ? 0 : 1;
}
