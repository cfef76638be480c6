/* Conformance of every collective x algorithm x dtype x op against exact answers and MPICH's
 * own collectives: counts 0, 1, p-1, p+1 and a large odd count, in place and out of place,
 * every root. Inputs are small integers (sums, products of +-1 and 2), so the exact answer does
 * not depend on the order of reduction and every algorithm must match it bit for bit; MPICH's
 * result for the same inputs is checked against the same expected buffer. Also runs the
 * allreduces on a 2-GPUs-per-node transport (hierarchical for real) and on a reversed group.
 * One MPI program per rank count; every case loops inside. */
#include <mpi.h>
#include <stdint.h>
#include <time.h>

#include "minidc/mpi_map.h"
#include "testutil.h"

static int P, R;
static long ncases;
static char ctx[256]; /* the case being run, for failure messages */

/* The crafted input of rank r, element i. */
static double val(int r, size_t i, mdc_op op, mdc_dtype t) {
    if (op == MDC_PROD) {
        if ((r + i) % 3 == 0) return 2;
        return t != MDC_U8 && (r * 5 + i) % 4 == 0 ? -1 : 1;
    }
    int v = (int)((r * 7 + i * 3 + 1) % 9);
    /* u8 min/max straddle 128, where a signed compare would give the other answer. */
    if (t == MDC_U8 && (op == MDC_MIN || op == MDC_MAX)) return 124 + v;
    return t == MDC_U8 ? v : v - 4;
}

/* Exact reduction over ranks 0..p-1 of val(., i), stored as type t (AVG: as the library
 * divides: in the element's arithmetic, integers truncating). */
static void expect_elem(void *out, size_t k, int p, size_t i, mdc_op op, mdc_dtype t) {
    double acc = val(0, i, op, t);
    for (int r = 1; r < p; r++) {
        double x = val(r, i, op, t);
        switch (op) {
        case MDC_SUM:
        case MDC_AVG: acc += x; break;
        case MDC_PROD: acc *= x; break;
        case MDC_MIN: acc = x < acc ? x : acc; break;
        case MDC_MAX: acc = x > acc ? x : acc; break;
        default: break;
        }
    }
    if (op == MDC_AVG && p > 1) {
        switch (t) {
        case MDC_F32:
        case MDC_F16:
        case MDC_BF16: acc = (double)((float)acc / (float)p); break;
        case MDC_F64: acc = acc / p; break;
        default: acc = (double)((long long)acc / p); break;
        }
    }
    mdc_dtype_set(out, t, k, acc);
}

/* Bit-for-bit comparison; prints the case, first bad index and max error. */
static int cmp(mdc_dtype t, const void *got, const void *want, size_t n, const char *what) {
    char w[512];
    snprintf(w, sizeof w, "rank %d/%d: %s [%s]", R, P, what, ctx);
    return tu_cmp_bits(t, got, want, n, w);
}

static void ok(mdc_status st) {
    if (st != MDC_OK) {
        fprintf(stderr, "rank %d: [%s]: %s: %s\n", R, ctx, mdc_strerror(st), mdc_detail());
        exit(1);
    }
    ncases++;
}

/* Not u8 min/max: MPICH 4.0.2 compares MPI_UINT8_T as signed there (max(1, 255) = 1). */
static int mpich_can(mdc_dtype t, int op) {
    if (t == MDC_U8 && (op == MDC_MIN || op == MDC_MAX)) return 0;
    return mdc_mpi_type(t) != MPI_DATATYPE_NULL && (op < 0 || mdc_mpi_op((mdc_op)op) != MPI_OP_NULL);
}

/* How much of the dtype x op cross product a case runs: FULL all of it, LIGHT every dtype
 * with sum and every op with f32, GROUP f32/bf16 x sum/max. MPICH is consulted on FULL
 * cases (its own collectives busy-poll: ~10 ms a call with more ranks than cores). */
enum { FULL, LIGHT, GROUP };
static int wanted(int level, int t, int op) {
    if (level == FULL) return 1;
    if (level == LIGHT) return t == MDC_F32 || op == MDC_SUM;
    return (t == MDC_F32 || t == MDC_BF16) && (op == MDC_SUM || op == MDC_MAX);
}
static int ask_mpich(int level, int t, int op) { return mpich_can(t, op) && level == FULL; }

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) exit(2);
    memset(p, 0xA5, n ? n : 1);
    return p;
}
static void force(mdc_coll c, int a) { MDC_CHECK(mdc_coll_set_algo(c, mdc_coll_algo_at(c, a)->name)); }

/* ---- reductions ------------------------------------------------------------------------- */

static void test_allreduce(mdc_group *g, size_t count, const char *gname, int level) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    for (int t = 0; t < MDC_DTYPE_COUNT; t++)
        for (int op = 0; op < MDC_OP_COUNT; op++) {
            if (!wanted(level, t, op)) continue;
            size_t es = mdc_dtype_size(t), nb = count * es;
            char *in = xmalloc(nb), *want = xmalloc(nb), *out = xmalloc(nb);
            for (size_t i = 0; i < count; i++) {
                mdc_dtype_set(in, t, i, val(me, i, op, t));
                expect_elem(want, i, p, i, op, t);
            }
            snprintf(ctx, sizeof ctx, "%s allreduce MPICH %s %s count %zu", gname, mdc_dtype_name(t), mdc_op_name(op),
                     count);
            if (ask_mpich(level, t, op) && !strcmp(gname, "world")) {
                MPI_Allreduce(in, out, (int)count, mdc_mpi_type(t), mdc_mpi_op(op), MPI_COMM_WORLD);
                cmp(t, out, want, count, "MPICH MPI_Allreduce vs expected");
            }
            for (int a = 0; a < mdc_coll_algo_count(MDC_COLL_ALLREDUCE); a++)
                for (int ip = 0; ip < 2; ip++) {
                    force(MDC_COLL_ALLREDUCE, a);
                    snprintf(ctx, sizeof ctx, "%s allreduce %s %s %s count %zu%s", gname,
                             mdc_coll_algo_at(MDC_COLL_ALLREDUCE, a)->name, mdc_dtype_name(t), mdc_op_name(op), count,
                             ip ? " in place" : "");
                    memset(out, 0xA5, nb);
                    if (ip) memcpy(out, in, nb);
                    ok(mdc_allreduce(ip ? (a & 1 ? out : MDC_IN_PLACE) : in, out, count, t, op, g));
                    cmp(t, out, want, count, "allreduce");
                }
            free(in);
            free(want);
            free(out);
        }
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "auto"));
}

/* Equal blocks (vcounts = 0) or per-rank counts base + i % 3 (vcounts = 1). */
static void test_reduce_scatter(mdc_group *g, size_t base, int v, int level) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t *counts = malloc(sizeof(size_t) * (size_t)p), total = 0, mine_off = 0;
    int *icounts = malloc(sizeof(int) * (size_t)p);
    for (int i = 0; i < p; i++) {
        counts[i] = v ? base + (size_t)(i % 3) : base;
        icounts[i] = (int)counts[i];
        if (i < me) mine_off += counts[i];
        total += counts[i];
    }
    size_t mine = counts[me];
    for (int t = 0; t < MDC_DTYPE_COUNT; t++)
        for (int op = 0; op < MDC_OP_COUNT; op++) {
            if (!wanted(level, t, op)) continue;
            size_t es = mdc_dtype_size(t);
            char *in = xmalloc(total * es), *want = xmalloc(mine * es), *out = xmalloc(total * es);
            for (size_t i = 0; i < total; i++) mdc_dtype_set(in, t, i, val(me, i, op, t));
            for (size_t i = 0; i < mine; i++) expect_elem(want, i, p, mine_off + i, op, t);
            snprintf(ctx, sizeof ctx, "reduce_scatter%s MPICH %s %s base %zu", v ? "v" : "", mdc_dtype_name(t),
                     mdc_op_name(op), base);
            if (ask_mpich(level, t, op)) {
                if (v) MPI_Reduce_scatter(in, out, icounts, mdc_mpi_type(t), mdc_mpi_op(op), MPI_COMM_WORLD);
                else MPI_Reduce_scatter_block(in, out, (int)base, mdc_mpi_type(t), mdc_mpi_op(op), MPI_COMM_WORLD);
                cmp(t, out, want, mine, "MPICH MPI_Reduce_scatter vs expected");
            }
            for (int a = 0; a < mdc_coll_algo_count(MDC_COLL_REDUCE_SCATTER); a++)
                for (int ip = 0; ip < 2; ip++) {
                    force(MDC_COLL_REDUCE_SCATTER, a);
                    snprintf(ctx, sizeof ctx, "reduce_scatter%s %s %s %s base %zu%s", v ? "v" : "",
                             mdc_coll_algo_at(MDC_COLL_REDUCE_SCATTER, a)->name, mdc_dtype_name(t), mdc_op_name(op),
                             base, ip ? " in place" : "");
                    memset(out, 0xA5, total * es);
                    if (ip) memcpy(out, in, total * es);
                    const void *sb = ip ? (a & 1 ? (const void *)out : MDC_IN_PLACE) : in;
                    ok(v ? mdc_reduce_scatterv(sb, out, counts, t, op, g)
                         : mdc_reduce_scatter(sb, out, base, t, op, g));
                    cmp(t, out, want, mine, "reduce_scatter");
                }
            free(in);
            free(want);
            free(out);
        }
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_REDUCE_SCATTER, "auto"));
    free(counts);
    free(icounts);
}

static void test_reduce(mdc_group *g, size_t count, int level) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    for (int t = 0; t < MDC_DTYPE_COUNT; t++)
        for (int op = 0; op < MDC_OP_COUNT; op++) {
            if (!wanted(level, t, op)) continue;
            size_t es = mdc_dtype_size(t), nb = count * es;
            char *in = xmalloc(nb), *want = xmalloc(nb), *out = xmalloc(nb);
            for (size_t i = 0; i < count; i++) {
                mdc_dtype_set(in, t, i, val(me, i, op, t));
                expect_elem(want, i, p, i, op, t);
            }
            for (int root = 0; root < p; root++) {
                /* every root for three (dtype, op) pairs of the FULL case; the first and last
                 * root otherwise */
                int every = level == FULL && ((t == MDC_F32 && op == MDC_SUM) || (t == MDC_I32 && op == MDC_MAX) ||
                                              (t == MDC_BF16 && op == MDC_AVG));
                if (!every && root != 0 && root != p - 1) continue;
                snprintf(ctx, sizeof ctx, "reduce MPICH %s %s count %zu root %d", mdc_dtype_name(t), mdc_op_name(op),
                         count, root);
                if (ask_mpich(level, t, op) && root == p - 1) {
                    MPI_Reduce(in, out, (int)count, mdc_mpi_type(t), mdc_mpi_op(op), root, MPI_COMM_WORLD);
                    if (me == root) cmp(t, out, want, count, "MPICH MPI_Reduce vs expected");
                }
                for (int a = 0; a < mdc_coll_algo_count(MDC_COLL_REDUCE); a++)
                    for (int ip = 0; ip < 2; ip++) {
                        force(MDC_COLL_REDUCE, a);
                        snprintf(ctx, sizeof ctx, "reduce %s %s %s count %zu root %d%s",
                                 mdc_coll_algo_at(MDC_COLL_REDUCE, a)->name, mdc_dtype_name(t), mdc_op_name(op), count,
                                 root, ip ? " in place" : "");
                        memset(out, 0xA5, nb);
                        if (ip && me == root) memcpy(out, in, nb);
                        const void *sb = ip && me == root ? MDC_IN_PLACE : in;
                        ok(mdc_reduce(sb, me == root || ip ? out : NULL, count, t, op, root, g));
                        if (me == root) cmp(t, out, want, count, "reduce");
                    }
            }
            free(in);
            free(want);
            free(out);
        }
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_REDUCE, "auto"));
}

/* ---- data movement ---------------------------------------------------------------------- */

static const mdc_dtype move_types[] = {MDC_U8, MDC_BF16, MDC_F32, MDC_F64};
#define NMOVE (int)(sizeof move_types / sizeof move_types[0])

static void test_allgather(mdc_group *g, size_t base, int v) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t *counts = malloc(sizeof(size_t) * (size_t)p), *displs = malloc(sizeof(size_t) * (size_t)p), ext = 0;
    int *ic = malloc(sizeof(int) * (size_t)p), *id = malloc(sizeof(int) * (size_t)p);
    for (int i = 0; i < p; i++) {
        counts[i] = v ? base + (size_t)(i % 3) : base;
        displs[i] = ext + (v ? 1 : 0); /* v: one-element gaps that must stay untouched */
        ext = displs[i] + counts[i];
        ic[i] = (int)counts[i];
        id[i] = (int)displs[i];
    }
    for (int k = 0; k < NMOVE; k++) {
        mdc_dtype t = move_types[k];
        size_t es = mdc_dtype_size(t);
        char *in = xmalloc(counts[me] * es), *want = xmalloc(ext * es), *out = xmalloc(ext * es);
        for (size_t i = 0; i < counts[me]; i++) mdc_dtype_set(in, t, i, val(me, i, MDC_SUM, t));
        for (int j = 0; j < p; j++)
            for (size_t i = 0; i < counts[j]; i++) mdc_dtype_set(want, t, displs[j] + i, val(j, i, MDC_SUM, t));
        snprintf(ctx, sizeof ctx, "allgather%s MPICH %s base %zu", v ? "v" : "", mdc_dtype_name(t), base);
        /* (MPICH 4.0.2 ignores displs[0] on one rank: skip its check there) */
        if (p > 1)
            MPI_Allgatherv(in, ic[me], mdc_mpi_type(t) != MPI_DATATYPE_NULL ? mdc_mpi_type(t) : MPI_UINT16_T, out, ic,
                           id, mdc_mpi_type(t) != MPI_DATATYPE_NULL ? mdc_mpi_type(t) : MPI_UINT16_T, MPI_COMM_WORLD);
        if (p > 1) cmp(t, out, want, ext, "MPICH MPI_Allgatherv vs expected");
        for (int a = 0; a < mdc_coll_algo_count(MDC_COLL_ALLGATHER); a++)
            for (int ip = 0; ip < 2; ip++) {
                force(MDC_COLL_ALLGATHER, a);
                snprintf(ctx, sizeof ctx, "allgather%s %s %s base %zu%s", v ? "v" : "",
                         mdc_coll_algo_at(MDC_COLL_ALLGATHER, a)->name, mdc_dtype_name(t), base, ip ? " in place" : "");
                memset(out, 0xA5, ext * es);
                if (ip) memcpy(out + displs[me] * es, in, counts[me] * es);
                const void *sb = ip ? (a & 1 ? (const void *)out : MDC_IN_PLACE) : in;
                ok(v ? mdc_allgatherv(sb, out, counts, displs, t, g) : mdc_allgather(sb, out, base, t, g));
                cmp(t, out, want, ext, "allgather");
            }
        free(in);
        free(want);
        free(out);
    }
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLGATHER, "auto"));
    free(counts);
    free(displs);
    free(ic);
    free(id);
}

static void test_rooted_moves(mdc_group *g, size_t count, int all_roots) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    for (int k = 0; k < NMOVE; k++) {
        mdc_dtype t = move_types[k];
        size_t es = mdc_dtype_size(t), nb = count * es;
        char *a1 = xmalloc(nb * (size_t)p), *want = xmalloc(nb * (size_t)p), *b1 = xmalloc(nb * (size_t)p);
        for (int root = 0; root < p; root++) {
            if (!all_roots && root != 0 && root != p - 1) continue;
            /* bcast */
            for (size_t i = 0; i < count; i++) mdc_dtype_set(want, t, i, val(root, i, MDC_SUM, t));
            for (int a = 0; a < mdc_coll_algo_count(MDC_COLL_BCAST); a++) {
                force(MDC_COLL_BCAST, a);
                snprintf(ctx, sizeof ctx, "bcast %s %s count %zu root %d", mdc_coll_algo_at(MDC_COLL_BCAST, a)->name,
                         mdc_dtype_name(t), count, root);
                memset(a1, 0xA5, nb);
                if (me == root) memcpy(a1, want, nb);
                ok(mdc_bcast(a1, count, t, root, g));
                cmp(t, a1, want, count, "bcast");
            }
            if (root == 0 && mdc_mpi_type(t) != MPI_DATATYPE_NULL) {
                memset(a1, 0xA5, nb);
                if (me == root) memcpy(a1, want, nb);
                MPI_Bcast(a1, (int)count, mdc_mpi_type(t), root, MPI_COMM_WORLD);
                cmp(t, a1, want, count, "MPICH MPI_Bcast vs expected");
            }
            /* gather: block j from rank j */
            for (int j = 0; j < p; j++)
                for (size_t i = 0; i < count; i++) mdc_dtype_set(want, t, (size_t)j * count + i, val(j, i, MDC_SUM, t));
            for (int ip = 0; ip < 2; ip++) {
                snprintf(ctx, sizeof ctx, "gather binomial %s count %zu root %d%s", mdc_dtype_name(t), count, root,
                         ip ? " in place" : "");
                memset(b1, 0xA5, nb * (size_t)p);
                memcpy(a1, want + (size_t)me * nb, nb);
                if (ip && me == root) memcpy(b1 + (size_t)root * nb, a1, nb);
                ok(mdc_gather(ip && me == root ? MDC_IN_PLACE : a1, me == root ? b1 : NULL, count, t, root, g));
                if (me == root) cmp(t, b1, want, count * (size_t)p, "gather");
            }
            if (root == p - 1 && mdc_mpi_type(t) != MPI_DATATYPE_NULL) {
                memset(b1, 0xA5, nb * (size_t)p);
                MPI_Gather(want + (size_t)me * nb, (int)count, mdc_mpi_type(t), b1, (int)count, mdc_mpi_type(t), root,
                           MPI_COMM_WORLD);
                if (me == root) cmp(t, b1, want, count * (size_t)p, "MPICH MPI_Gather vs expected");
            }
            /* scatter: rank j gets block j */
            for (int ip = 0; ip < 2; ip++) {
                snprintf(ctx, sizeof ctx, "scatter binomial %s count %zu root %d%s", mdc_dtype_name(t), count, root,
                         ip ? " in place" : "");
                memset(b1, 0xA5, nb * (size_t)p);
                memset(a1, 0xA5, nb * (size_t)p);
                if (me == root) memcpy(a1, want, nb * (size_t)p);
                int inp = ip && me == root;
                ok(mdc_scatter(me == root ? a1 : NULL, inp ? (void *)MDC_IN_PLACE : b1, count, t, root, g));
                cmp(t, inp ? a1 + (size_t)root * nb : b1, want + (size_t)me * nb, count, "scatter");
            }
        }
        free(a1);
        free(want);
        free(b1);
    }
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_BCAST, "auto"));
}

static void test_alltoall(mdc_group *g, size_t count) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    for (int k = 0; k < NMOVE; k++) {
        mdc_dtype t = move_types[k];
        size_t es = mdc_dtype_size(t), all = count * (size_t)p;
        char *in = xmalloc(all * es), *want = xmalloc(all * es), *out = xmalloc(all * es);
        for (int j = 0; j < p; j++)
            for (size_t i = 0; i < count; i++) {
                mdc_dtype_set(in, t, (size_t)j * count + i, val(me * p + j, i, MDC_SUM, t));
                mdc_dtype_set(want, t, (size_t)j * count + i, val(j * p + me, i, MDC_SUM, t));
            }
        if (mdc_mpi_type(t) != MPI_DATATYPE_NULL) {
            snprintf(ctx, sizeof ctx, "alltoall MPICH %s count %zu", mdc_dtype_name(t), count);
            MPI_Alltoall(in, (int)count, mdc_mpi_type(t), out, (int)count, mdc_mpi_type(t), MPI_COMM_WORLD);
            cmp(t, out, want, all, "MPICH MPI_Alltoall vs expected");
        }
        for (int a = 0; a < mdc_coll_algo_count(MDC_COLL_ALLTOALL); a++)
            for (int ip = 0; ip < 2; ip++) {
                force(MDC_COLL_ALLTOALL, a);
                snprintf(ctx, sizeof ctx, "alltoall %s %s count %zu%s", mdc_coll_algo_at(MDC_COLL_ALLTOALL, a)->name,
                         mdc_dtype_name(t), count, ip ? " in place" : "");
                memset(out, 0xA5, all * es);
                if (ip) memcpy(out, in, all * es);
                ok(mdc_alltoall(ip ? (a & 1 ? (const void *)out : MDC_IN_PLACE) : in, out, count, t, g));
                cmp(t, out, want, all, "alltoall");
            }
        free(in);
        free(want);
        free(out);
    }
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLTOALL, "auto"));
    /* alltoallv: rank a sends (a + 2b + count) % 4 elements to b, with one-element gaps */
    size_t *sc = malloc(sizeof(size_t) * 4 * (size_t)p), *sd = sc + p, *rc = sd + p, *rd = rc + p, se = 0, re = 0;
    for (int j = 0; j < p; j++) {
        sc[j] = (size_t)(me + 2 * j + (int)count) % 4;
        rc[j] = (size_t)(j + 2 * me + (int)count) % 4;
        sd[j] = se + 1;
        se = sd[j] + sc[j];
        rd[j] = re + 1;
        re = rd[j] + rc[j];
    }
    mdc_dtype t = MDC_F32;
    float *in = xmalloc(se * 4), *want = xmalloc(re * 4), *out = xmalloc(re * 4);
    for (int j = 0; j < p; j++) {
        for (size_t i = 0; i < sc[j]; i++) in[sd[j] + i] = (float)val(me * p + j, i, MDC_SUM, t);
        for (size_t i = 0; i < rc[j]; i++) want[rd[j] + i] = (float)val(j * p + me, i, MDC_SUM, t);
    }
    for (int ip = 0; ip < 2; ip++) {
        snprintf(ctx, sizeof ctx, "alltoallv pairwise f32 count %zu%s", count, ip ? " in place" : "");
        memset(out, 0xA5, re * 4);
        if (ip) /* in place: recvcounts/rdispls describe the send data too (needs symmetric counts) */
            continue;
        ok(mdc_alltoallv(in, sc, sd, out, rc, rd, t, g));
        for (int j = 0; j < p; j++) cmp(t, out + rd[j], want + rd[j], rc[j], "alltoallv");
    }
    /* in place with symmetric counts (c(a,b) = (a + b + count) % 3) */
    for (int j = 0; j < p; j++) {
        rc[j] = (size_t)(me + j + (int)count) % 3;
        rd[j] = j ? rd[j - 1] + rc[j - 1] + 1 : 0;
    }
    re = rd[p - 1] + rc[p - 1];
    float *io = xmalloc(re * 4 + 4), *w2 = xmalloc(re * 4 + 4);
    for (int j = 0; j < p; j++)
        for (size_t i = 0; i < rc[j]; i++) {
            io[rd[j] + i] = (float)val(me * p + j, i, MDC_SUM, t);
            w2[rd[j] + i] = (float)val(j * p + me, i, MDC_SUM, t);
        }
    snprintf(ctx, sizeof ctx, "alltoallv pairwise f32 count %zu in place", count);
    ok(mdc_alltoallv(MDC_IN_PLACE, NULL, NULL, io, rc, rd, t, g));
    for (int j = 0; j < p; j++) cmp(t, io + rd[j], w2 + rd[j], rc[j], "alltoallv in place");
    free(io);
    free(w2);
    free(in);
    free(want);
    free(out);
    free(sc);
}

static void test_barrier(mdc_group *g) {
    /* Rank r enters r ms late; nobody may leave before the last one entered. */
    struct timespec ts = {0, (long)R * 1000000L};
    nanosleep(&ts, NULL);
    double in = MPI_Wtime();
    snprintf(ctx, sizeof ctx, "barrier");
    ok(mdc_barrier(g));
    double outt = MPI_Wtime(), last_in, first_out;
    MPI_Allreduce(&in, &last_in, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&outt, &first_out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    TU_CHECK(first_out >= last_in, "barrier: a rank left at %.6f before the last entered at %.6f", first_out, last_in);
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    tu_coll_options(argc, argv);
    P = rt.size;
    R = rt.rank;
    double t0 = MPI_Wtime();
    size_t counts[] = {0, 1, (size_t)(P > 1 ? P - 1 : 2), (size_t)P + 1, 4097};
    int nc = (int)(sizeof counts / sizeof counts[0]);
#define LAP(what)                                                                                 \
    do {                                                                                          \
        if (R == 0 && getenv("TEST_VERBOSE")) printf("  %-16s %.2f s\n", what, MPI_Wtime() - t0); \
    } while (0)
    /* count p+1 (not divisible by p) runs the full cross product; the others LIGHT */
    /* count p+1 runs the full dtype x op product, 1 and the large count LIGHT, 0 and p-1 GROUP */
    int lv[] = {GROUP, LIGHT, GROUP, FULL, LIGHT};
    for (int c = 0; c < nc; c++) test_allreduce(rt.world, counts[c], "world", lv[c]);
    LAP("allreduce");
    for (int c = 0; c < nc; c++) {
        size_t b = counts[c] > 1000 ? 1001 : counts[c];
        test_reduce_scatter(rt.world, b, 0, lv[c]);
        test_reduce_scatter(rt.world, b, 1, lv[c] == FULL ? LIGHT : lv[c]);
    }
    LAP("reduce_scatter");
    /* Blocks of 1 MiB: above the default slice (256 KiB), so every reducing algorithm runs its
     * sliced path in its default form (every case in place and not). */
    const size_t big = 262147;
    test_allreduce(rt.world, big, "world", GROUP);
    test_reduce_scatter(rt.world, big, 0, GROUP);
    test_reduce_scatter(rt.world, big, 1, GROUP);
    test_reduce(rt.world, big, GROUP);
    LAP("1 MiB blocks");
    for (int c = 0; c < nc; c++) test_reduce(rt.world, counts[c], lv[c]);
    LAP("reduce");
    for (int c = 0; c < nc; c++) {
        test_allgather(rt.world, counts[c] > 1000 ? 1001 : counts[c], 0);
        test_allgather(rt.world, counts[c] > 1000 ? 1001 : counts[c], 1);
    }
    LAP("allgather");
    for (int c = 0; c < nc; c++) test_rooted_moves(rt.world, counts[c], c == 1 || c == 3);
    LAP("bcast/gather/scatter");
    for (int c = 0; c < nc; c++) test_alltoall(rt.world, counts[c] > 1000 ? 1001 : counts[c]);
    LAP("alltoall");
    test_barrier(rt.world);

    /* 2 GPUs per virtual node: hierarchical runs for real when p is even. */
    mdc_transport *t2;
    mdc_group *w2;
    MDC_CHECK(mdc_transport_create(&t2, NULL, rt.dev, 2));
    MDC_CHECK(mdc_group_world(&w2, t2));
    for (int c = 3; c < nc; c++) test_allreduce(w2, counts[c], "2-per-node", GROUP);
    /* A reversed group (index i is world rank p-1-i) in its own tag space. */
    int *ranks = malloc(sizeof(int) * (size_t)P);
    for (int i = 0; i < P; i++) ranks[i] = P - 1 - i;
    mdc_group *rev;
    MDC_CHECK(mdc_group_create(&rev, rt.tr, ranks, P, 5));
    for (int c = 3; c < nc; c++) test_allreduce(rev, counts[c], "reversed", GROUP);
    LAP("2-per-node, reversed");
    mdc_group_free(rev);
    free(ranks);
    mdc_group_free(w2);
    mdc_transport_free(t2);

    long total = 0;
    MPI_Allreduce(&ncases, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (R == 0)
        printf("test_coll_conform: %ld collective calls checked on %d ranks in %.2f s\n", total, P, MPI_Wtime() - t0);
    int rc = tu_finish("test_coll_conform");
    mdc_runtime_finalize(&rt);
    return rc;
}
