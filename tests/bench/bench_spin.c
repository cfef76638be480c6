/* A busy MPICH program for tools/bench_load.sh: every rank waits in MPI_Recv (MPICH polls)
 * until rank 0, probing in a loop, has waited argv[1] seconds. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n, x = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    double s = argc > 1 ? atof(argv[1]) : 10, t0 = MPI_Wtime();
    if (r == 0) {
        while (MPI_Wtime() - t0 < s) {
            int f;
            MPI_Iprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &f, MPI_STATUS_IGNORE);
        }
        for (int k = 1; k < n; k++) MPI_Send(&x, 1, MPI_INT, k, 1, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
