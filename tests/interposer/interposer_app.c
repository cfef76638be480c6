/* A plain MPI program for tests/interposer/interposer.sh: calls the twelve collectives the interposer
 * takes over (every type it maps, every op, in place and out of place, several roots, a
 * sub-communicator; derived datatypes mixed with predefined ones in data movement), plus
 * calls it must hand to MPICH (a user op, op/type pairs it leaves out), and writes each rank's
 * results to DIR/rank<R>.txt. Inputs are integer-valued, so every result is exact whatever the
 * summation order: the files must be identical with and without LD_PRELOAD=libminidc_mpi.so.
 * `--bad KIND` makes one erroneous call instead (a negative count, counts that differ between
 * ranks, a send size that differs from the receive block). Uses only MPI (no minidc). */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;
static int me, np;

static void put(const char *name, const void *buf, size_t bytes) {
    const unsigned char *b = buf;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ b[i]) * 1099511628211ull;
    fprintf(out, "%-40s %6zu bytes  fnv %016llx  first:", name, bytes, (unsigned long long)h);
    for (size_t i = 0; i < bytes && i < 8; i++) fprintf(out, " %02x", b[i]);
    fprintf(out, "\n");
}

/* Counts attribute copies: the interposer's private communicators must not copy the program's
 * attributes (only the program's own MPI_Comm_dup does, the same with and without it). */
static int copies;
static int count_copy(MPI_Comm c, int kv, void *extra, void *val_in, void *val_out, int *flag) {
    (void)c, (void)kv, (void)extra;
    copies++;
    *(void **)val_out = val_in;
    *flag = 1;
    return MPI_SUCCESS;
}

static void my_sum(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* Integer-valued input of rank r, element i, small enough that products of 8 stay exact. */
static double val(int r, int i, int prod) { return prod ? 1 + (r + i) % 2 : (r * 7 + i * 3) % 17 - 8; }

#define FILL(T, buf, n, prod) \
    for (int i_ = 0; i_ < (n); i_++) (buf)[i_] = (T)val(me, i_, prod)

static void reductions(MPI_Comm comm, const char *tag) {
    int p, r;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &r);
    const int n = 37;
    MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    const char *opn[4] = {"sum", "prod", "min", "max"};
    char name[96];
    for (int o = 0; o < 4; o++) {
        int prod = o == 1;
        float f[64], fo[64];
        double d[64], dd[64];
        int32_t i32[64], i32o[64];
        int64_t i64[64], i64o[64];
        long l[64], lo[64];
        long long ll[64], llo[64];
        int ii[64], iio[64];
        uint8_t u8[64], u8o[64];
        FILL(float, f, n, prod);
        FILL(double, d, n, prod);
        FILL(int32_t, i32, n, prod);
        FILL(int64_t, i64, n, prod);
        FILL(long, l, n, prod);
        FILL(long long, ll, n, prod);
        FILL(int, ii, n, prod);
        for (int i = 0; i < n; i++) u8[i] = (uint8_t)((me * 7 + i * 3) % 17);
        snprintf(name, sizeof name, "%s allreduce float %s", tag, opn[o]);
        MPI_Allreduce(f, fo, n, MPI_FLOAT, ops[o], comm), put(name, fo, sizeof(float) * n);
        snprintf(name, sizeof name, "%s allreduce double %s", tag, opn[o]);
        MPI_Allreduce(d, dd, n, MPI_DOUBLE, ops[o], comm), put(name, dd, sizeof(double) * n);
        snprintf(name, sizeof name, "%s allreduce int32 %s", tag, opn[o]);
        MPI_Allreduce(i32, i32o, n, MPI_INT32_T, ops[o], comm), put(name, i32o, 4 * n);
        snprintf(name, sizeof name, "%s allreduce int64 %s", tag, opn[o]);
        MPI_Allreduce(i64, i64o, n, MPI_INT64_T, ops[o], comm), put(name, i64o, 8 * n);
        snprintf(name, sizeof name, "%s allreduce long %s", tag, opn[o]);
        MPI_Allreduce(l, lo, n, MPI_LONG, ops[o], comm), put(name, lo, sizeof(long) * n);
        snprintf(name, sizeof name, "%s allreduce long long %s", tag, opn[o]);
        MPI_Allreduce(ll, llo, n, MPI_LONG_LONG, ops[o], comm), put(name, llo, sizeof(long long) * n);
        snprintf(name, sizeof name, "%s allreduce uint8 %s", tag, opn[o]);
        MPI_Allreduce(u8, u8o, n, MPI_UINT8_T, ops[o], comm), put(name, u8o, n);
        snprintf(name, sizeof name, "%s allreduce int in place %s", tag, opn[o]);
        memcpy(iio, ii, sizeof ii);
        MPI_Allreduce(MPI_IN_PLACE, iio, n, MPI_INT, ops[o], comm), put(name, iio, sizeof(int) * n);
        for (int root = 0; root<p; root += p> 2 ? p - 1 : 1) {
            memset(fo, 0, sizeof fo);
            snprintf(name, sizeof name, "%s reduce float %s root %d", tag, opn[o], root);
            MPI_Reduce(f, fo, n, MPI_FLOAT, ops[o], root, comm);
            if (r == root) put(name, fo, sizeof(float) * n);
            memcpy(iio, ii, sizeof ii);
            snprintf(name, sizeof name, "%s reduce int in place %s root %d", tag, opn[o], root);
            MPI_Reduce(r == root ? MPI_IN_PLACE : iio, r == root ? iio : NULL, n, MPI_INT, ops[o], root, comm);
            if (r == root) put(name, iio, sizeof(int) * n);
        }
    }
    /* reduce_scatter_block and reduce_scatter (uneven counts, some zero). */
    int blk = 5, tot = 0, rc[64];
    for (int i = 0; i < p; i++) rc[i] = (i * 3 + 1) % 4, tot += rc[i];
    double *d = malloc(sizeof(double) * (size_t)(p * blk + tot + 1));
    double *dd = malloc(sizeof(double) * (size_t)(p * blk + tot + 1));
    for (int i = 0; i < p * blk; i++) d[i] = val(me, i, 0);
    snprintf(name, sizeof name, "%s reduce_scatter_block double", tag);
    MPI_Reduce_scatter_block(d, dd, blk, MPI_DOUBLE, MPI_SUM, comm), put(name, dd, sizeof(double) * blk);
    snprintf(name, sizeof name, "%s reduce_scatter_block in place", tag);
    MPI_Reduce_scatter_block(MPI_IN_PLACE, d, blk, MPI_DOUBLE, MPI_MAX, comm), put(name, d, sizeof(double) * blk);
    for (int i = 0; i < tot; i++) d[i] = val(me, i, 0);
    snprintf(name, sizeof name, "%s reduce_scatter double", tag);
    MPI_Reduce_scatter(d, dd, rc, MPI_DOUBLE, MPI_SUM, comm), put(name, dd, sizeof(double) * rc[r]);
    snprintf(name, sizeof name, "%s reduce_scatter in place", tag);
    MPI_Reduce_scatter(MPI_IN_PLACE, d, rc, MPI_DOUBLE, MPI_MIN, comm), put(name, d, sizeof(double) * rc[r]);
    free(d);
    free(dd);
}

/* The other predefined types minidc reduces (Fortran names, unsigned and 1-byte integers by
 * their wrapping sum and prod, complex sums as pairs of floats), and combinations it hands to
 * MPICH (max of unsigned, prod of complex). Wrapping sums are exact in any order, so values
 * near the top of the range test the wrap-around too. */
static void more_types(MPI_Comm comm, const char *tag) {
    int p, r;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &r);
    enum { N = 23 };
    char name[96];
    float rf[2 * N], rfo[2 * N];
    double rd[2 * N], rdo[2 * N];
    int32_t ia[N], iao[N];
    int64_t ib[N], ibo[N];
    uint32_t ua[N], uao[N];
    uint64_t ub[N], ubo[N];
    int8_t ic[N], ico[N];
    MPI_Aint ad[N], ado[N];
    for (int i = 0; i < N; i++) {
        ia[i] = (int32_t)val(me, i, 0);
        ib[i] = (int64_t)val(me, i, 0) * 1024;
        ua[i] = 4294967295u - (uint32_t)(me * 5 + i);
        ub[i] = 18446744073709551615ull - (uint64_t)(me * 3 + i * 7);
        ic[i] = (int8_t)(120 + (me + i) % 7);
        ad[i] = (MPI_Aint)val(me, i, 0) * 1000;
    }
    struct {
        const char *n;
        MPI_Datatype t;
        void *in, *out;
        size_t sz;
    } ts[] = {
        {"REAL", MPI_REAL, rf, rfo, sizeof(float)},
        {"DOUBLE PRECISION", MPI_DOUBLE_PRECISION, rd, rdo, sizeof(double)},
        {"INTEGER", MPI_INTEGER, ia, iao, 4},
        {"INTEGER8", MPI_INTEGER8, ib, ibo, 8},
        {"aint", MPI_AINT, ad, ado, sizeof(MPI_Aint)},
        {"unsigned", MPI_UNSIGNED, ua, uao, 4},
        {"uint64", MPI_UINT64_T, ub, ubo, 8},
        {"int8", MPI_INT8_T, ic, ico, 1},
        {"signed char", MPI_SIGNED_CHAR, ic, ico, 1},
        {"float complex", MPI_C_FLOAT_COMPLEX, rf, rfo, 2 * sizeof(float)},
        {"double complex", MPI_C_DOUBLE_COMPLEX, rd, rdo, 2 * sizeof(double)},
        {"COMPLEX", MPI_COMPLEX, rf, rfo, 2 * sizeof(float)},
        {"DOUBLE COMPLEX", MPI_DOUBLE_COMPLEX, rd, rdo, 2 * sizeof(double)},
    };
    MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    const char *opn[4] = {"sum", "prod", "min", "max"};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        int cplx = strstr(ts[k].n, "omplex") || strstr(ts[k].n, "OMPLEX");
        for (int o = 0; o < 4; o++) {
            if (cplx && (o == 2 || o == 3)) continue; /* MPI defines no min/max of complex */
            /* Floats: integer values, small ones for products, so any order is exact. */
            for (int i = 0; i < 2 * N; i++) rf[i] = (float)val(me, i, o == 1), rd[i] = val(me, i + 5, o == 1);
            memset(ts[k].out, 0, ts[k].sz * N);
            snprintf(name, sizeof name, "%s allreduce %s %s", tag, ts[k].n, opn[o]);
            MPI_Allreduce(ts[k].in, ts[k].out, N, ts[k].t, ops[o], comm);
            put(name, ts[k].out, ts[k].sz * N);
            int root = p - 1;
            memset(ts[k].out, 0, ts[k].sz * N);
            snprintf(name, sizeof name, "%s reduce %s %s root %d", tag, ts[k].n, opn[o], root);
            MPI_Reduce(ts[k].in, ts[k].out, N, ts[k].t, ops[o], root, comm);
            if (r == root) put(name, ts[k].out, ts[k].sz * N);
        }
        /* Uneven blocks, some empty: the element count scales per block for complex. */
        int rc[64], tot = 0;
        for (int i = 0; i < p; i++) rc[i] = (i * 2 + 1) % 3, tot += rc[i];
        if (tot <= N) {
            memset(ts[k].out, 0, ts[k].sz * N);
            snprintf(name, sizeof name, "%s reduce_scatter %s sum", tag, ts[k].n);
            MPI_Reduce_scatter(ts[k].in, ts[k].out, rc, ts[k].t, MPI_SUM, comm);
            put(name, ts[k].out, ts[k].sz * (size_t)rc[r]);
        }
        if (p <= N) {
            memset(ts[k].out, 0, ts[k].sz * N);
            snprintf(name, sizeof name, "%s reduce_scatter_block %s sum", tag, ts[k].n);
            MPI_Reduce_scatter_block(ts[k].in, ts[k].out, N / p, ts[k].t, MPI_SUM, comm);
            put(name, ts[k].out, ts[k].sz * (size_t)(N / p));
        }
    }
}

static void movement(MPI_Comm comm, const char *tag) {
    int p, r;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &r);
    char name[96];
    const int n = 11;
    int *a = malloc(sizeof(int) * (size_t)(n * p * 2 + 64)), *b = malloc(sizeof(int) * (size_t)(n * p * 2 + 64));
    for (int i = 0; i < n * p * 2 + 64; i++) a[i] = me * 1000 + i, b[i] = -1;
    /* bcast with each type size class */
    for (int root = 0; root<p; root += p> 2 ? p - 1 : 1) {
        double dv[13];
        for (int i = 0; i < 13; i++) dv[i] = r == root ? me + i * 0.5 : -1;
        snprintf(name, sizeof name, "%s bcast double root %d", tag, root);
        MPI_Bcast(dv, 13, MPI_DOUBLE, root, comm), put(name, dv, sizeof dv);
        char cv[7];
        for (int i = 0; i < 7; i++) cv[i] = (char)(r == root ? 'a' + i : 0);
        snprintf(name, sizeof name, "%s bcast char root %d", tag, root);
        MPI_Bcast(cv, 7, MPI_CHAR, root, comm), put(name, cv, sizeof cv);
        /* gather, gather in place, scatter, scatter in place */
        memset(b, 0xff, sizeof(int) * (size_t)(n * p));
        snprintf(name, sizeof name, "%s gather int root %d", tag, root);
        MPI_Gather(a, n, MPI_INT, b, n, MPI_INT, root, comm);
        if (r == root) put(name, b, sizeof(int) * (size_t)(n * p));
        for (int i = 0; i < n * p; i++) b[i] = r * 100 + i;
        snprintf(name, sizeof name, "%s gather in place root %d", tag, root);
        MPI_Gather(r == root ? MPI_IN_PLACE : b + r * n, n, MPI_INT, b, n, MPI_INT, root, comm);
        if (r == root) put(name, b, sizeof(int) * (size_t)(n * p));
        snprintf(name, sizeof name, "%s scatter bytes root %d", tag, root);
        memset(b, 0, sizeof(int) * (size_t)n);
        MPI_Scatter(a, n * 4, MPI_BYTE, b, n, MPI_INT, root, comm), put(name, b, sizeof(int) * n);
        for (int i = 0; i < n * p; i++) b[i] = r * 100 + i;
        snprintf(name, sizeof name, "%s scatter in place root %d", tag, root);
        MPI_Scatter(b, n, MPI_INT, r == root ? MPI_IN_PLACE : b, n, MPI_INT, root, comm);
        put(name, b, sizeof(int) * (size_t)(r == root ? n * p : n));
    }
    snprintf(name, sizeof name, "%s allgather int", tag);
    MPI_Allgather(a, n, MPI_INT, b, n, MPI_INT, comm), put(name, b, sizeof(int) * (size_t)(n * p));
    for (int i = 0; i < n * p; i++) b[i] = i / n == r ? me * 7 + i : -1;
    snprintf(name, sizeof name, "%s allgather in place", tag);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, n, MPI_INT, comm), put(name, b, sizeof(int) * (size_t)(n * p));
    int rc[64], dsp[64], tot = 0;
    for (int i = 0; i < p; i++) rc[i] = (i * 2 + 1) % 5, dsp[i] = tot + i, tot += rc[i] + 1;
    memset(b, 0, sizeof(int) * (size_t)tot);
    snprintf(name, sizeof name, "%s allgatherv int", tag);
    MPI_Allgatherv(a, rc[r], MPI_INT, b, rc, dsp, MPI_INT, comm), put(name, b, sizeof(int) * (size_t)tot);
    /* Blocks placed in reverse rank order, with gaps; then the same in place. */
    for (int i = p - 1, o = 0; i >= 0; i--) dsp[i] = o, o += rc[i] + 2;
    int span = dsp[0] + rc[0] + 2;
    memset(b, 0, sizeof(int) * (size_t)span);
    snprintf(name, sizeof name, "%s allgatherv reversed", tag);
    MPI_Allgatherv(a, rc[r], MPI_INT, b, rc, dsp, MPI_INT, comm), put(name, b, sizeof(int) * (size_t)span);
    for (int i = 0; i < span; i++) b[i] = i >= dsp[r] && i < dsp[r] + rc[r] ? me * 3 + i : 0;
    snprintf(name, sizeof name, "%s allgatherv in place", tag);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, rc, dsp, MPI_INT, comm);
    put(name, b, sizeof(int) * (size_t)span);
    snprintf(name, sizeof name, "%s alltoall int", tag);
    MPI_Alltoall(a, n, MPI_INT, b, n, MPI_INT, comm), put(name, b, sizeof(int) * (size_t)(n * p));
    for (int i = 0; i < n * p; i++) b[i] = me * 1000 + i;
    snprintf(name, sizeof name, "%s alltoall in place", tag);
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, n, MPI_INT, comm), put(name, b, sizeof(int) * (size_t)(n * p));
    int sc[64], sd[64], rcv[64], rd[64], so = 0, ro = 0;
    for (int i = 0; i < p; i++) {
        sc[i] = (r + i) % 3;
        sd[i] = so, so += sc[i] + 2;
        rcv[i] = (i + r) % 3;
        rd[i] = ro, ro += rcv[i] + 1;
    }
    memset(b, 0, sizeof(int) * (size_t)ro);
    snprintf(name, sizeof name, "%s alltoallv int", tag);
    MPI_Alltoallv(a, sc, sd, MPI_INT, b, rcv, rd, MPI_INT, comm), put(name, b, sizeof(int) * (size_t)ro);
    /* In place: the counts are symmetric ((i + r) % 3 both ways), as MPI requires. */
    for (int i = 0; i < ro; i++) b[i] = me * 100 + i;
    snprintf(name, sizeof name, "%s alltoallv in place", tag);
    MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, b, rcv, rd, MPI_INT, comm);
    put(name, b, sizeof(int) * (size_t)ro);
    snprintf(name, sizeof name, "%s barrier", tag);
    MPI_Barrier(comm), put(name, "", 0);
    free(a);
    free(b);
}

/* Derived datatypes in data movement: minidc packs them, so a rank with a derived type and a
 * rank with a predefined one (the same type signature, as MPI allows) meet in one call.
 * Gaps in derived receive layouts must stay untouched (-1). Also negative displacements. */
static void derived(MPI_Comm comm, const char *tag) {
    int p, r;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &r);
    enum { K = 5 };
    char name[96];
    int *a = malloc(sizeof(int) * (size_t)(4 * K * p + 64)), *b = malloc(sizeof(int) * (size_t)(4 * K * p + 64));
    const size_t span = (size_t)(4 * K * p + 64);
#define RESET(x, v) \
    for (size_t i_ = 0; i_ < span; i_++) (x)[i_] = (v)
    /* every other int: K of them spread over 2K (extent resized to 2K ints) */
    MPI_Datatype every2, strided;
    MPI_Type_vector(K, 1, 2, MPI_INT, &every2);
    MPI_Type_create_resized(every2, 0, (MPI_Aint)(2 * K * sizeof(int)), &strided);
    MPI_Type_commit(&strided);
    MPI_Type_free(&every2);
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    for (int root = 0; root<p; root += p> 2 ? p - 1 : 1) {
        /* bcast: the root's data is strided, the others receive K plain ints */
        RESET(a, -1);
        for (int i = 0; i < 2 * K; i++) a[i] = r == root ? me * 100 + i : -1;
        if (r == root) MPI_Bcast(a, 1, strided, root, comm);
        else MPI_Bcast(a, K, MPI_INT, root, comm);
        snprintf(name, sizeof name, "%s bcast mixed root %d", tag, root);
        put(name, a, sizeof(int) * 2 * K);
        /* gather: plain senders, the root receives each block strided */
        RESET(b, -1);
        for (int i = 0; i < K; i++) a[i] = me * 10 + i;
        MPI_Gather(a, K, MPI_INT, b, 1, strided, root, comm);
        snprintf(name, sizeof name, "%s gather into strided root %d", tag, root);
        if (r == root) put(name, b, sizeof(int) * (size_t)(2 * K * p));
        /* gather in place at a root with a derived receive type */
        RESET(b, -1);
        for (int i = 0; i < 2 * K * p; i++) b[i] = r * 1000 + i;
        MPI_Gather(r == root ? MPI_IN_PLACE : b, r == root ? 0 : K, MPI_INT, b, 1, strided, root, comm);
        snprintf(name, sizeof name, "%s gather in place strided root %d", tag, root);
        if (r == root) put(name, b, sizeof(int) * (size_t)(2 * K * p));
        /* scatter: the root sends strided blocks, the others receive plain ints */
        RESET(a, -1);
        for (int i = 0; i < 2 * K * p; i++) a[i] = me * 1000 + i;
        RESET(b, -1);
        MPI_Scatter(a, 1, strided, b, K, MPI_INT, root, comm);
        snprintf(name, sizeof name, "%s scatter from strided root %d", tag, root);
        put(name, b, sizeof(int) * K);
    }
    /* allgather: pairs sent, ints received; then in place with a strided receive type */
    for (int i = 0; i < 2 * K; i++) a[i] = me * 100 + i;
    RESET(b, -1);
    MPI_Allgather(a, K, pair, b, 2 * K, MPI_INT, comm);
    snprintf(name, sizeof name, "%s allgather pairs", tag);
    put(name, b, sizeof(int) * (size_t)(2 * K * p));
    RESET(b, -1);
    for (int i = 0; i < 2 * K; i++) b[2 * K * r + i] = me * 100 + i;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 1, strided, comm);
    snprintf(name, sizeof name, "%s allgather in place strided", tag);
    put(name, b, sizeof(int) * (size_t)(2 * K * p));
    /* alltoall: strided send blocks, plain receive; in place strided */
    for (int i = 0; i < 2 * K * p; i++) a[i] = me * 1000 + i;
    RESET(b, -1);
    MPI_Alltoall(a, 1, strided, b, K, MPI_INT, comm);
    snprintf(name, sizeof name, "%s alltoall from strided", tag);
    put(name, b, sizeof(int) * (size_t)(K * p));
    for (int i = 0; i < 2 * K * p; i++) b[i] = i % 2 ? -1 : me * 1000 + i;
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 1, strided, comm);
    snprintf(name, sizeof name, "%s alltoall in place strided", tag);
    put(name, b, sizeof(int) * (size_t)(2 * K * p));
    /* v-collectives: negative displacements (the buffer pointer is in the middle), and a
     * strided receive type */
    int rc[64], dsp[64], sc[64], sd[64];
    for (int i = 0; i < p; i++) rc[i] = 1 + i % 2, dsp[i] = -3 * (i + 1);
    int *mid = b + 3 * (p + 1);
    RESET(b, -1);
    for (int i = 0; i < K; i++) a[i] = me * 10 + i;
    if (p > 1) { /* MPICH 4.0.2's 1-rank MPI_Allgatherv ignores displs[0] (its bug) */
        MPI_Allgatherv(a, rc[r], MPI_INT, mid, rc, dsp, MPI_INT, comm);
        snprintf(name, sizeof name, "%s allgatherv negative displs", tag);
        put(name, b, sizeof(int) * (size_t)(3 * (p + 1)));
    }
    for (int i = 0; i < p; i++) rc[i] = 1, dsp[i] = p - 1 - i;
    RESET(b, -1);
    MPI_Allgatherv(a, K, MPI_INT, b, rc, dsp, strided, comm);
    snprintf(name, sizeof name, "%s allgatherv strided reversed", tag);
    put(name, b, sizeof(int) * (size_t)(2 * K * p));
    RESET(b, -1);
    for (int i = 0; i < 2 * K; i++) b[2 * K * dsp[r] + i] = me * 7 + i;
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, rc, dsp, strided, comm);
    snprintf(name, sizeof name, "%s allgatherv in place strided", tag);
    put(name, b, sizeof(int) * (size_t)(2 * K * p));
    for (int i = 0; i < p; i++) sc[i] = (r + i) % 3, sd[i] = -4 * (i + 1), rc[i] = (i + r) % 3, dsp[i] = 2 * i;
    for (int i = 0; i < 4 * (p + 1); i++) a[i] = me * 100 + i;
    RESET(b, -1);
    MPI_Alltoallv(a + 4 * (p + 1), sc, sd, MPI_INT, b, rc, dsp, MPI_INT, comm);
    snprintf(name, sizeof name, "%s alltoallv negative send displs", tag);
    put(name, b, sizeof(int) * (size_t)(2 * p));
    /* alltoallv with a strided receive type: block i is rc[i] strided elements at element i */
    for (int i = 0; i < p; i++) sc[i] = K * ((r + i) % 2), sd[i] = K * i, rc[i] = (i + r) % 2, dsp[i] = i;
    for (int i = 0; i < K * p; i++) a[i] = me * 100 + i;
    RESET(b, -1);
    MPI_Alltoallv(a, sc, sd, MPI_INT, b, rc, dsp, strided, comm);
    snprintf(name, sizeof name, "%s alltoallv into strided", tag);
    put(name, b, sizeof(int) * (size_t)(2 * K * p));
    /* a struct with a hole (int then double: 12 bytes of data in a 16-byte extent) */
    struct rec {
        int i;
        double d;
    } st[3];
    MPI_Datatype sty;
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {offsetof(struct rec, i), offsetof(struct rec, d)};
    MPI_Datatype tys[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Type_create_struct(2, bl, disp, tys, &sty);
    MPI_Type_commit(&sty);
    memset(st, 0, sizeof st);
    for (int i = 0; i < 3; i++) st[i].i = r == 0 ? 40 + i : -1, st[i].d = r == 0 ? 0.5 * i : -1;
    MPI_Bcast(st, 3, sty, 0, comm);
    int si[3];
    double sdv[3];
    for (int i = 0; i < 3; i++) si[i] = st[i].i, sdv[i] = st[i].d;
    snprintf(name, sizeof name, "%s bcast struct ints", tag);
    put(name, si, sizeof si);
    snprintf(name, sizeof name, "%s bcast struct doubles", tag);
    put(name, sdv, sizeof sdv);
    MPI_Type_free(&sty);
    MPI_Type_free(&pair);
    MPI_Type_free(&strided);
#undef RESET
    free(a);
    free(b);
}

static void fallthrough(MPI_Comm comm) {
    int p;
    MPI_Comm_size(comm, &p);
    /* A user op: MPICH's own must run it. (Derived types in reductions go to MPICH too, but
     * MPICH 4.0.2 itself refuses MPI_SUM on them.) */
    int w[3] = {0, 0, 0};
    MPI_Op op;
    MPI_Op_create(my_sum, 1, &op);
    int x[3] = {me, me + 1, me + 2};
    MPI_Allreduce(x, w, 3, MPI_INT, op, comm), put("user op allreduce", w, sizeof(int) * 3);
    MPI_Op_free(&op);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc < 2 || np > 64) {
        fprintf(stderr, "usage: interposer_app DIR | --bad negative|longer|one-negative|sizes (at most 64 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (!strcmp(argv[1], "--bad") && argc > 2) { /* erroneous calls: the job must fail, loudly */
        int a[16] = {0}, b[16];
        if (!strcmp(argv[2], "negative")) MPI_Allreduce(a, b, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (!strcmp(argv[2], "longer")) MPI_Allreduce(a, b, me ? 10 : 12, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (!strcmp(argv[2], "one-negative")) MPI_Bcast(a, me == 1 ? -1 : 4, MPI_INT, 0, MPI_COMM_WORLD);
        if (!strcmp(argv[2], "sizes")) /* rank 1 sends 3 ints but receives blocks of 4 */
            MPI_Allgather(a, me == 1 ? 3 : 4, MPI_INT, b, 4, MPI_INT, MPI_COMM_WORLD);
        MPI_Finalize();
        return 0;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/rank%d.txt", argv[1], me);
    out = fopen(path, "w");
    if (!out) MPI_Abort(MPI_COMM_WORLD, 2);
    int kv;
    MPI_Comm_create_keyval(count_copy, MPI_COMM_NULL_DELETE_FN, &kv, NULL);
    MPI_Comm_set_attr(MPI_COMM_WORLD, kv, &copies);
    reductions(MPI_COMM_WORLD, "world");
    more_types(MPI_COMM_WORLD, "world");
    movement(MPI_COMM_WORLD, "world");
    derived(MPI_COMM_WORLD, "world");
    /* A sub-communicator (odd and even ranks, reversed order) and a freed duplicate. */
    MPI_Comm sub, dup;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &sub);
    reductions(sub, "split");
    more_types(sub, "split");
    movement(sub, "split");
    derived(sub, "split");
    MPI_Comm_free(&sub);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    movement(dup, "dup");
    MPI_Comm_free(&dup);
    /* MPI_Comm_create_group: every rank but 0, in reverse order (only members call it). */
    if (me > 0) {
        MPI_Group world, rev;
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        int ranks[64];
        for (int i = 0; i < np - 1; i++) ranks[i] = np - 1 - i;
        MPI_Group_incl(world, np - 1, ranks, &rev);
        MPI_Comm cg;
        MPI_Comm_create_group(MPI_COMM_WORLD, rev, 7, &cg);
        reductions(cg, "create_group");
        movement(cg, "create_group");
        MPI_Comm_free(&cg);
        MPI_Group_free(&rev);
        MPI_Group_free(&world);
    }
    fallthrough(MPI_COMM_WORLD);
    put("attribute copies", &copies, sizeof copies);
    MPI_Comm_free_keyval(&kv);
    fclose(out);
    MPI_Finalize();
    return 0;
}
