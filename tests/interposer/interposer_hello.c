/* The program of docs/interposer.md: one MPI_Allreduce of 4 doubles and one MPI_Bcast, rank 0
 * prints the results. A plain MPI program (not part of minidc, so it lives with the tests), run
 * with and without LD_PRELOAD=build/libminidc_mpi.so:
 *   make build/tests/interposer_hello
 *   mpiexec.mpich -n 4 build/tests/interposer_hello */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    double x[4] = {r, 2 * r, 1, r == 3 ? -6 : 0}, s[4];
    int b = r == 0 ? 42 : 0;
    MPI_Allreduce(x, s, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (r == 0) printf("sum = %g %g %g %g, bcast %d\n", s[0], s[1], s[2], s[3], b);
    MPI_Finalize();
    return 0;
}
