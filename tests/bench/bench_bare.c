/* A collective's bare cost on this host: the copies (and additions) its schedule must make,
 * done with process_vm_readv (the kernel copy under MPICH's rendezvous) and plain loops, with
 * no MPI messages and no waiting, next to minidc's collective and MPICH's on the same buffers.
 * The yardstick for the collectives' 64 MiB speed targets (docs/performance.md "Bare cost"). In `make bench`.
 *
 *   mpiexec.mpich -n P build/tests/bench_bare COLL [MiB]    (COLL: reduce_scatter, allreduce,
 *                                                           alltoall, allgather; default 64)
 *
 * S = MiB per rank (the send buffer of reduce_scatter, allreduce and alltoall, the receive
 * buffer of allgather), in P blocks of S/P. The ways:
 *   reduce_scatter (f32 sum)
 *     bare steps    for s = 1 .. P-1: copy block `me` of rank me-s's send buffer, 256 KiB at a
 *                   time through a 4-slot window, straight out of its memory, and add each
 *                   piece into the result as it lands: minidc's pairwise order;
 *     bare pieces   the same copies and additions piece by piece across the P-1 peers, so each
 *                   256 KiB of the result stays in cache while the P-1 pieces are added (the
 *                   same order per element, bit for bit);
 *     minidc        mdc_reduce_scatter forced to pairwise;   mpich  MPI_Reduce_scatter_block.
 *   allreduce (f32 sum)
 *     bare          the bare reduce-scatter's steps into this rank's block of the result, a
 *                   barrier (the blocks must be complete before anyone reads them), then every
 *                   other rank's block copied from its result: reduce-scatter plus allgather,
 *                   the least data any allreduce moves (Rabenseifner's bound);
 *     minidc        mdc_allreduce (auto, host's clock);       mpich  MPI_Allreduce.
 *   alltoall / allgather (bytes)
 *     bare          copy the own block, then each peer's block for this rank straight from the
 *                   peer's send buffer into place;
 *     minidc        mdc_alltoall / mdc_allgather (auto, on this host's clock as `minidc bench`);
 *                   mpich  MPI_Alltoall / MPI_Allgather.
 * Every schedule built from messages moves at least these bytes: each of a block's P-1 other
 * contributions crosses into the receiver once. The bare ways never wait for a peer (the send
 * buffers do not change), so they are the least this host's copies and additions cost, with
 * nothing for messages, waiting or scheduling. Times: median over calls of the max over
 * ranks, each way timed in blocks of its own calls (PASSES blocks of ROUNDS / PASSES, each
 * after one untimed call, the ways taking turns); every result is checked. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "minidc/algorithms.h"
#include "minidc/collectives.h"

enum { ROUNDS = 9, PASSES = 3, MAXWAYS = 4, SLOTS = 4 }; /* ROUNDS a multiple of PASSES */
#define PIECE ((size_t)256 << 10)

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(int rank, const char *what) {
    fprintf(stderr, "bench_bare: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* out = a + b, n floats (out may be a). */
static void add(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* Copies `len` bytes at byte `off` of rank `from`'s send buffer into `dst`. */
static void fetch(int me, const unsigned long long *where, int from, size_t off, void *dst, size_t len) {
    struct iovec local = {dst, len}, remote = {(void *)(uintptr_t)(where[2 * from + 1] + off), len};
    if (process_vm_readv((pid_t)where[2 * from], &local, 1, &remote, 1, 0) != (ssize_t)len)
        die(me, "process_vm_readv failed (ptrace not permitted between the ranks?)");
}

/* The pairwise reduce-scatter's copies and additions, step-major or piece-major. */
static void bare_rs(int piece_major, int me, int p, const char *send, float *res, float *window,
                    const unsigned long long *where, size_t blk) {
    const float *own = (const float *)(send + (size_t)me * blk);
    size_t npieces = (blk + PIECE - 1) / PIECE;
    if (p == 1) memcpy(res, own, blk);
    for (size_t outer = 0; outer < (piece_major ? npieces : (size_t)p - 1); outer++)
        for (size_t inner = 0; inner < (piece_major ? (size_t)p - 1 : npieces); inner++) {
            size_t k = piece_major ? outer : inner;
            int s = (int)(piece_major ? inner : outer) + 1, from = (me - s + p) % p;
            size_t off = k * PIECE, len = blk - off < PIECE ? blk - off : PIECE;
            float *slot = window + (piece_major ? (size_t)s : k) % SLOTS * (PIECE / sizeof(float));
            fetch(me, where, from, (size_t)me * blk + off, slot, len);
            float *r = res + off / sizeof(float);
            add(r, s == 1 ? own + off / sizeof(float) : r, slot, len / sizeof(float));
        }
}

/* Every block for this rank into place: alltoall takes block `me` of each peer's send
 * buffer, allgather the peer's whole send buffer (one block). */
static void bare_copy(int gather, int me, int p, const char *send, char *recv, const unsigned long long *where,
                      size_t blk) {
    memcpy(recv + (size_t)me * blk, send + (gather ? 0 : (size_t)me * blk), blk);
    for (int s = 1; s < p; s++) {
        int from = (me - s + p) % p;
        fetch(me, where, from, gather ? 0 : (size_t)me * blk, recv + (size_t)from * blk, blk);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, p;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    const char *coll = argc > 1 ? argv[1] : "";
    int rs = !strcmp(coll, "reduce_scatter"), ar = !strcmp(coll, "allreduce"), a2a = !strcmp(coll, "alltoall"),
        ag = !strcmp(coll, "allgather");
    int sum = rs || ar; /* f32 sums; the others move bytes */
    double mib = argc > 2 ? atof(argv[2]) : 64;
    if (!(rs || ar || a2a || ag) || !(mib > 0 && mib <= 4096))
        die(me, "usage: bench_bare reduce_scatter|allreduce|alltoall|allgather [MiB per rank, 0 < MiB <= 4096]");
    size_t count = (size_t)(mib * (1 << 20)) / sizeof(float) / (size_t)p; /* floats per block */
    if (count == 0) die(me, "too few bytes for this many ranks");
    size_t blk = count * sizeof(float), total = blk * (size_t)p;
    size_t sbytes = ag ? blk : total, rbytes = rs ? blk : total;
    int ways = rs ? 4 : 3;
    mdc_transport *t;
    mdc_group *g;
    if (mdc_transport_create(&t, NULL, NULL, 8) || mdc_group_world(&g, t)) die(me, mdc_detail());
    if (rs && mdc_coll_set_algo(MDC_COLL_REDUCE_SCATTER, "pairwise")) die(me, mdc_detail());
    mdc_coll_set_pick("host"); /* as `minidc bench`: this host's clock */
    char *send = malloc(sbytes), *recv = malloc(rbytes), *want = malloc(rbytes);
    float *window = malloc(SLOTS * PIECE);
    unsigned long long mine[2] = {(unsigned long long)getpid(), (unsigned long long)(uintptr_t)send};
    unsigned long long mine_r[2] = {(unsigned long long)getpid(), (unsigned long long)(uintptr_t)recv};
    unsigned long long *where = malloc(2 * sizeof *where * (size_t)p), *rwhere = malloc(2 * sizeof *rwhere * (size_t)p);
    double *tm = malloc(sizeof *tm * MAXWAYS * ROUNDS), *mx = malloc(sizeof *mx * MAXWAYS * ROUNDS);
    if (!send || !recv || !want || !window || !where || !rwhere || !tm || !mx) die(me, "out of memory");
    /* Values: f32 integers (exact in any order) for reduce_scatter; for the copies, the byte
     * (sender, position) pattern, so a block from the wrong place shows. */
    if (sum) {
        float *s = (float *)send, *w = (float *)want;
        size_t first = rs ? (size_t)me * count : 0; /* the result's first element of the whole vector */
        for (size_t i = 0; i < total / sizeof(float); i++) s[i] = (float)((i + (size_t)me) % 7);
        for (size_t i = 0; i < rbytes / sizeof(float); i++) {
            w[i] = 0;
            for (int q = 0; q < p; q++) w[i] += (float)((first + i + (size_t)q) % 7);
        }
    } else {
        for (size_t i = 0; i < sbytes; i++) send[i] = (char)(me * 31 + (int)(i % 251));
        for (int q = 0; q < p; q++) /* block q of the result comes from rank q */
            for (size_t i = 0; i < blk; i++)
                want[(size_t)q * blk + i] = (char)(q * 31 + (int)(((ag ? 0 : (size_t)me * blk) + i) % 251));
    }
    memset(window, 0, SLOTS * PIECE);
    /* Under Yama's ptrace_scope 1 (Ubuntu's default) a process may read another's memory only
     * if that one allows it; the ranks allow each other. Then every rank tries one read of its
     * left neighbour, and without permission the program says so and stops cleanly. */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    MPI_Allgather(mine, 2, MPI_UNSIGNED_LONG_LONG, where, 2, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    MPI_Allgather(mine_r, 2, MPI_UNSIGNED_LONG_LONG, rwhere, 2, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    char probe;
    int from = (me + p - 1) % p, can = 1, all_can = 0;
    struct iovec pl = {&probe, 1}, pr = {(void *)(uintptr_t)where[2 * from + 1], 1};
    if (p > 1) can = process_vm_readv((pid_t)where[2 * from], &pl, 1, &pr, 1, 0) == 1;
    MPI_Allreduce(&can, &all_can, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_can) {
        if (me == 0)
            printf("# %s: process_vm_readv between the ranks is not permitted here (see "
                   "/proc/sys/kernel/yama/ptrace_scope): no bare cost to show\n",
                   coll);
        MPI_Finalize();
        return 0;
    }
    size_t wrong = 0;
    /* Each way in blocks of its own calls, every block after one untimed call (as `minidc
     * bench` times the two libraries: a call leaves the caches to the next one), the blocks
     * taking turns PASSES times. */
    for (int pass = 0; pass < PASSES; pass++)
        for (int w = 0; w < ways; w++)
            for (int j = -1; j < ROUNDS / PASSES; j++) { /* j = -1: the untimed call */
                /* No rank clears its result while another may still read it (the bare allreduce
                 * reads its peers' results), then every call starts together. */
                if (mdc_barrier(g)) die(me, mdc_detail());
                memset(recv, 0xff, rbytes); /* (NaN for floats): a result left unwritten is wrong */
                if (mdc_barrier(g)) die(me, mdc_detail());
                double t0 = MPI_Wtime();
                int mpich = w == ways - 1, minidc = w == ways - 2;
                mdc_status st = MDC_OK;
                int rc = MPI_SUCCESS;
                if (rs && w < 2) bare_rs(w, me, p, send, (float *)recv, window, where, blk);
                else if (ar && w == 0) {
                    bare_rs(0, me, p, send, (float *)(recv + (size_t)me * blk), window, where, blk);
                    if (mdc_barrier(g)) die(me, mdc_detail());
                    for (int s2 = 1; s2 < p; s2++) {
                        int peer = (me - s2 + p) % p;
                        fetch(me, rwhere, peer, (size_t)peer * blk, recv + (size_t)peer * blk, blk);
                    }
                } else if (!sum && w == 0) bare_copy(ag, me, p, send, recv, where, blk);
                else if (minidc && rs) st = mdc_reduce_scatter(send, recv, count, MDC_F32, MDC_SUM, g);
                else if (minidc && ar) st = mdc_allreduce(send, recv, total / sizeof(float), MDC_F32, MDC_SUM, g);
                else if (mpich && ar)
                    rc = MPI_Allreduce(send, recv, (int)(total / sizeof(float)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                else if (minidc && a2a) st = mdc_alltoall(send, recv, blk, MDC_U8, g);
                else if (minidc) st = mdc_allgather(send, recv, blk, MDC_U8, g);
                else if (mpich && rs)
                    rc = MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                else if (mpich && a2a)
                    rc = MPI_Alltoall(send, (int)blk, MPI_BYTE, recv, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
                else rc = MPI_Allgather(send, (int)blk, MPI_BYTE, recv, (int)blk, MPI_BYTE, MPI_COMM_WORLD);
                if (j >= 0) tm[w * ROUNDS + pass * (ROUNDS / PASSES) + j] = MPI_Wtime() - t0;
                if (st) die(me, mdc_detail());
                if (rc != MPI_SUCCESS) die(me, "the MPI collective failed");
                if (sum)
                    for (size_t i = 0; i < rbytes / sizeof(float); i++)
                        wrong += ((float *)recv)[i] != ((float *)want)[i];
                else
                    for (size_t i = 0; i < rbytes; i++) wrong += recv[i] != want[i];
            }
    MPI_Allreduce(tm, mx, MAXWAYS * ROUNDS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    unsigned long long bad = wrong, allbad = 0;
    MPI_Allreduce(&bad, &allbad, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) {
        static const char *rs_names[] = {"bare steps", "bare pieces", "minidc pairwise", "mpich"};
        static const char *copy_names[] = {"bare", "minidc", "mpich"};
        const char *const *name = rs ? rs_names : copy_names;
        double med[MAXWAYS];
        for (int w = 0; w < ways; w++) {
            qsort(mx + w * ROUNDS, ROUNDS, sizeof *mx, cmp);
            med[w] = mx[w * ROUNDS + ROUNDS / 2];
        }
        printf("# %s, %zu bytes per rank%s, %d ranks; median of %d calls of the max over ranks (in blocks)\n", coll,
               ag ? total : sbytes, sum ? " (f32 sum)" : "", p, ROUNDS);
        for (int w = 0; w < ways; w++)
            printf("%-16s %9.2f ms   mpich / this %5.2f\n", name[w], med[w] * 1e3, med[ways - 1] / med[w]);
        printf("# %llu wrong elements\n", allbad);
    }
    mdc_group_free(g);
    mdc_transport_free(t);
    free(send);
    free(recv);
    free(want);
    free(window);
    free(where);
    free(rwhere);
    free(tm);
    free(mx);
    MPI_Finalize();
    return allbad != 0;
}
