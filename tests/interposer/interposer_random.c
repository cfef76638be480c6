/* A plain MPI program for tests/interposer/interposer.sh: 60 random data-movement calls (broadcast,
 * gather, scatter, allgather, all-to-all, all-to-all-v) where every rank decides on its own,
 * for each side, whether to pass k plain MPI_INTs or one strided vector of k ints (the same
 * type signature, as MPI allows), with random k, stride and root. The sequence is fixed by the
 * seed (argv[1]); each rank prints one hash of all it received, which must be the same with and
 * without LD_PRELOAD=libminidc_mpi.so. Uses only MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned long long hash = 1469598103934665603ull;

static void mix(const void *buf, size_t bytes) {
    const unsigned char *p = buf;
    for (size_t i = 0; i < bytes; i++) hash = (hash ^ p[i]) * 1099511628211ull;
}

static unsigned next(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    unsigned seed = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
    if (p > 64) MPI_Abort(MPI_COMM_WORLD, 2);
    const int cap = 40 * 3 * 64 + 64; /* ints: k <= 40, stride <= 3, p <= 64 blocks */
    int *a = malloc(sizeof(int) * (size_t)cap), *b = malloc(sizeof(int) * (size_t)cap);
    if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int call = 0; call < 60; call++) {
        unsigned shared = seed * 7919u + (unsigned)call * 104729u; /* the same on every rank */
        unsigned own = shared + (unsigned)me * 31u;                /* this rank's own choices */
        int k = 1 + (int)(next(&shared) % 40), stride = 1 + (int)(next(&shared) % 3);
        int root = (int)(next(&shared) % (unsigned)p), kind = (int)(next(&shared) % 6);
        MPI_Datatype vec, strided; /* k ints, `stride` apart; extent k * stride ints */
        MPI_Type_vector(k, 1, stride, MPI_INT, &vec);
        MPI_Type_create_resized(vec, 0, (MPI_Aint)((size_t)k * (size_t)stride * sizeof(int)), &strided);
        MPI_Type_commit(&strided);
        int sder = next(&own) % 2, rder = next(&own) % 2;
        MPI_Datatype st = sder ? strided : MPI_INT, rt = rder ? strided : MPI_INT;
        int sc = sder ? 1 : k, rc = rder ? 1 : k, sstep = sder ? 1 : k * stride, rstep = rder ? 1 : k * stride;
        for (int i = 0; i < cap; i++) a[i] = me * 100000 + i, b[i] = -1;
        switch (kind) {
        case 0:
            if (me == root) MPI_Bcast(a, sc, st, root, MPI_COMM_WORLD);
            else MPI_Bcast(b, rc, rt, root, MPI_COMM_WORLD);
            break;
        case 1: MPI_Gather(a, sc, st, b, rc, rt, root, MPI_COMM_WORLD); break;
        case 2: MPI_Scatter(a, sc, st, b, rc, rt, root, MPI_COMM_WORLD); break;
        case 3: MPI_Allgather(a, sc, st, b, rc, rt, MPI_COMM_WORLD); break;
        case 4: MPI_Alltoall(a, sc, st, b, rc, rt, MPI_COMM_WORLD); break;
        default: { /* blocks received in reverse rank order */
            int scs[64], sds[64], rcs[64], rds[64];
            for (int i = 0; i < p; i++) scs[i] = sc, sds[i] = i * sstep, rcs[i] = rc, rds[i] = (p - 1 - i) * rstep;
            MPI_Alltoallv(a, scs, sds, st, b, rcs, rds, rt, MPI_COMM_WORLD);
        }
        }
        mix(b, sizeof(int) * (size_t)(k * stride * p));
        MPI_Type_free(&strided);
        MPI_Type_free(&vec);
    }
    printf("rank %d seed %u hash %016llx\n", me, seed, hash);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
