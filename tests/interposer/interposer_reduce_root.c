/* A plain MPI program for tests/interposer/interposer.sh: MPI_Reduce with MPI_IN_PLACE at the last rank
 * (root != 0) on 8192 ints, sum, five times; the root checks the result itself and prints
 * "ok" or the first wrong element; exit status 1 if wrong. MPICH 4.0.2's own MPI_Reduce
 * crashes on this call (pmodels/mpich#6540, its reduce-scatter-gather path reads the send
 * buffer MPI_IN_PLACE stands for; fixed after 4.1.1); under LD_PRELOAD=libminidc_mpi.so it
 * runs on minidc's reduce. Uses only MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, p, n = 8192, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int root = p - 1, *x = malloc(sizeof(int) * (size_t)n);
    if (!x) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < n; i++) x[i] = me + i % 7;
    for (int k = 0; k < 5; k++) /* the root's vector takes every other rank's five times */
        MPI_Reduce(me == root ? MPI_IN_PLACE : x, me == root ? x : NULL, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
    if (me == root) {
        for (int i = 0; i < n && !bad; i++) {
            long want = root + i % 7;
            for (int r = 0; r < p - 1; r++) want += 5L * (r + i % 7);
            if (x[i] != want) {
                printf("rank %d: element %d is %d, want %ld\n", me, i, x[i], want);
                bad = 1;
            }
        }
        if (!bad) printf("ok: in-place reduce at root %d of %d ranks\n", root, p);
    }
    free(x);
    MPI_Finalize();
    return bad;
}
