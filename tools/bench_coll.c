/* minidc bench COLL: nccl-tests style collective benchmark, side by side with MPICH's own
 * collective in the same run.
 *
 *   mpiexec.mpich -n 4 build/minidc bench allreduce -b 8 -e 64M -f 4 [--algo A] [--dtype f32]
 *       [--op sum] [--iters N] [--order blocks|alternate] [--inplace] [--check] [--device h100]
 *
 * Sizes are nccl-tests' S: allreduce and broadcast the vector, reduce_scatter and allgather the
 * full buffer of p blocks, alltoall one rank's send buffer. Time: before each call every
 * rank meets in minidc's (polite) barrier, then times the call; minidc's and MPICH's calls
 * run in short blocks that take turns (time_calls), so both see the same machine (the
 * development machine is shared: its speed drifts within seconds); the reported time is the
 * median over iterations of the maximum over ranks. algbw = S / time; busbw = algbw x
 * nccl-tests' factor (AllReduce 2(p-1)/p; ReduceScatter, AllGather, AlltoAll (p-1)/p;
 * Broadcast 1). #wrong counts wrong elements over all ranks (integer-valued inputs, so the
 * exact answer does not depend on summation order); --check verifies every call instead
 * of one call per size. --inplace runs both libraries in place (MPI_IN_PLACE / MDC_IN_PLACE:
 * the input in the receive buffer, where nccl-tests' second set of columns puts it; each timed
 * call then reduces the previous call's result, as repeated in-place calls in nccl-tests do).
 * "mpich" is MPI_<Coll> on the same buffers; ratio = mpich / minidc
 * (above 1: minidc is faster). virt is the emulated device's virtual time for one call (max
 * over ranks, from a zeroed clock). floor is the least time any algorithm could take on this
 * machine: the bytes each rank must at least copy (floor_factor x S) at the rate the machine
 * copies when every rank copies at once (measured in the same run, copy_time); best =
 * mpich / floor, the ratio an algorithm at the floor would reach. This file may call MPI collectives: the comparison and
 * the max-over-ranks reductions are its purpose (DESIGN.md rule 1 exempts it). */
#include <ctype.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/minidc.h"
#include "minidc/mpi_map.h"

typedef enum { B_ALLREDUCE, B_REDUCE_SCATTER, B_ALLGATHER, B_ALLTOALL, B_BCAST, B_REDUCE, B_GATHER, B_SCATTER } bench_kind;

typedef struct {
    bench_kind kind;
    mdc_coll coll;
    const char *name;
    double (*busfactor)(int p);
} bench_def;

static double f_allreduce(int p) { return 2.0 * (p - 1) / p; }
static double f_nm1(int p) { return (double)(p - 1) / p; }
static double f_one(int p) { (void)p; return 1.0; }

static const bench_def defs[] = {
    {B_ALLREDUCE, MDC_COLL_ALLREDUCE, "allreduce", f_allreduce},
    {B_REDUCE_SCATTER, MDC_COLL_REDUCE_SCATTER, "reduce_scatter", f_nm1},
    {B_ALLGATHER, MDC_COLL_ALLGATHER, "allgather", f_nm1},
    {B_ALLTOALL, MDC_COLL_ALLTOALL, "alltoall", f_nm1},
    {B_BCAST, MDC_COLL_BCAST, "broadcast", f_one},
    {B_REDUCE, MDC_COLL_REDUCE, "reduce", f_one},
    {B_GATHER, MDC_COLL_GATHER, "gather", f_nm1},
    {B_SCATTER, MDC_COLL_SCATTER, "scatter", f_nm1},
};

typedef struct {
    const bench_def *def;
    size_t minb, maxb;
    double factor;
    const char *algo, *pick;
    mdc_dtype t;
    mdc_op op;
    int iters, check, mpich, alternate, inplace, root;
} bench_opts;

/* ---- element access: integer-valued inputs, exact in every type ----------------------- */

static double input_value(const bench_opts *o, int rank, size_t i) {
    if (o->op == MDC_PROD) return (double)(1 + (rank + i) % 2); /* products <= 2^p */
    double v = (double)((rank * 7 + i * 3) % 17);
    return o->t == MDC_U8 ? v : v - 8.0;
}



/* The exact reduction of element i over p ranks (u8 wraps modulo 256, as the type does). */
static double expected_reduced(const bench_opts *o, int p, size_t i) {
    double acc = input_value(o, 0, i);
    for (int r = 1; r < p; r++) {
        double v = input_value(o, r, i);
        switch (o->op) {
        case MDC_PROD: acc *= v; break;
        case MDC_MIN: acc = v < acc ? v : acc; break;
        case MDC_MAX: acc = v > acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (o->t == MDC_U8) acc = (double)(((long)acc % 256 + 256) % 256);
    return acc;
}

/* avg is timed as MPICH's sum (it divides once at the end, as minidc does) */
static MPI_Op mpi_op(mdc_op op) { return mdc_mpi_op(op == MDC_AVG ? MDC_SUM : op); }

/* ---- one size ---------------------------------------------------------------------------- */

typedef struct {
    int p, me;
    mdc_group *g;
    void *send, *recv;
    size_t count;   /* per-call count argument (elements): the vector, or one block */
    size_t sbytes;  /* S as nccl-tests counts it */
} bench_case;

/* Fills the inputs (and poisons the output) for one call. */
static void prepare(const bench_opts *o, bench_case *c) {
    size_t n = c->count, p = (size_t)c->p, ts = mdc_dtype_size(o->t);
    int ip_root = o->inplace && c->me == o->root;
    switch (o->def->kind) { /* rooted: in place only at the root (MPI's meaning) */
    case B_REDUCE:
        for (size_t i = 0; i < n; i++) mdc_dtype_set(ip_root ? c->recv : c->send, o->t, i, input_value(o, c->me, i));
        if (!ip_root) memset(c->recv, 0xff, n * ts);
        return;
    case B_GATHER:
        memset(c->recv, 0xff, n * p * ts);
        for (size_t i = 0; i < n; i++)
            mdc_dtype_set(ip_root ? c->recv : c->send, o->t, (ip_root ? (size_t)c->me * n : 0) + i,
                          input_value(o, c->me, i));
        return;
    case B_SCATTER:
        if (c->me == o->root)
            for (size_t i = 0; i < n * p; i++) mdc_dtype_set(c->send, o->t, i, input_value(o, c->me, i));
        memset(c->recv, 0xff, n * ts);
        return;
    default: break;
    }
    if (o->inplace && o->def->kind != B_BCAST) { /* the input where the output goes */
        size_t all = o->def->kind == B_ALLREDUCE ? n : n * p;
        memset(c->recv, 0xff, all * ts);
        if (o->def->kind == B_ALLGATHER)
            for (size_t i = 0; i < n; i++) mdc_dtype_set(c->recv, o->t, (size_t)c->me * n + i, input_value(o, c->me, i));
        else
            for (size_t i = 0; i < all; i++) mdc_dtype_set(c->recv, o->t, i, input_value(o, c->me, i));
        return;
    }
    switch (o->def->kind) {
    case B_ALLREDUCE:
        for (size_t i = 0; i < n; i++) mdc_dtype_set(c->send, o->t, i, input_value(o, c->me, i));
        memset(c->recv, 0xff, n * ts);
        break;
    case B_REDUCE_SCATTER:
        for (size_t i = 0; i < n * p; i++) mdc_dtype_set(c->send, o->t, i, input_value(o, c->me, i));
        memset(c->recv, 0xff, n * ts);
        break;
    case B_ALLGATHER:
        for (size_t i = 0; i < n; i++) mdc_dtype_set(c->send, o->t, i, input_value(o, c->me, i));
        memset(c->recv, 0xff, n * p * ts);
        break;
    case B_ALLTOALL:
        for (size_t i = 0; i < n * p; i++) mdc_dtype_set(c->send, o->t, i, input_value(o, c->me, i));
        memset(c->recv, 0xff, n * p * ts);
        break;
    case B_BCAST:
        if (c->me == o->root)
            for (size_t i = 0; i < n; i++) mdc_dtype_set(c->recv, o->t, i, input_value(o, o->root, i));
        else
            memset(c->recv, 0xff, n * ts);
        break;
    default: break; /* the rooted ones above */
    }
}

/* Wrong elements on this rank. */
static size_t verify(const bench_opts *o, const bench_case *c) {
    size_t n = c->count, p = (size_t)c->p, bad = 0;
    switch (o->def->kind) {
    case B_ALLREDUCE:
        for (size_t i = 0; i < n; i++) bad += mdc_dtype_get(c->recv, o->t, i) != expected_reduced(o, c->p, i);
        break;
    case B_REDUCE_SCATTER:
        for (size_t i = 0; i < n; i++)
            bad += mdc_dtype_get(c->recv, o->t, i) != expected_reduced(o, c->p, (size_t)c->me * n + i);
        break;
    case B_ALLGATHER:
        for (size_t j = 0; j < p; j++)
            for (size_t i = 0; i < n; i++)
                bad += mdc_dtype_get(c->recv, o->t, j * n + i) != input_value(o, (int)j, i);
        break;
    case B_ALLTOALL:
        for (size_t j = 0; j < p; j++)
            for (size_t i = 0; i < n; i++)
                bad += mdc_dtype_get(c->recv, o->t, j * n + i) != input_value(o, (int)j, (size_t)c->me * n + i);
        break;
    case B_BCAST:
        for (size_t i = 0; i < n; i++) bad += mdc_dtype_get(c->recv, o->t, i) != input_value(o, o->root, i);
        break;
    case B_REDUCE: /* the root's result */
        for (size_t i = 0; c->me == o->root && i < n; i++) bad += mdc_dtype_get(c->recv, o->t, i) != expected_reduced(o, c->p, i);
        break;
    case B_GATHER:
        for (size_t j = 0; c->me == o->root && j < p; j++)
            for (size_t i = 0; i < n; i++) bad += mdc_dtype_get(c->recv, o->t, j * n + i) != input_value(o, (int)j, i);
        break;
    case B_SCATTER: /* in place the root's block stays in its send buffer */
        for (size_t i = 0; !(o->inplace && c->me == o->root) && i < n; i++)
            bad += mdc_dtype_get(c->recv, o->t, i) != input_value(o, o->root, (size_t)c->me * n + i);
        break;
    }
    return bad;
}

static mdc_status run_minidc(const bench_opts *o, bench_case *c) {
    const void *in = o->inplace ? MDC_IN_PLACE : c->send;
    int ip_root = o->inplace && c->me == o->root; /* rooted collectives: in place at the root only */
    switch (o->def->kind) {
    case B_ALLREDUCE: return mdc_allreduce(in, c->recv, c->count, o->t, o->op, c->g);
    case B_REDUCE_SCATTER: return mdc_reduce_scatter(in, c->recv, c->count, o->t, o->op, c->g);
    case B_ALLGATHER: return mdc_allgather(in, c->recv, c->count, o->t, c->g);
    case B_ALLTOALL: return mdc_alltoall(in, c->recv, c->count, o->t, c->g);
    case B_BCAST: return mdc_bcast(c->recv, c->count, o->t, o->root, c->g);
    case B_REDUCE: return mdc_reduce(ip_root ? MDC_IN_PLACE : c->send, c->recv, c->count, o->t, o->op, o->root, c->g);
    case B_GATHER: return mdc_gather(ip_root ? MDC_IN_PLACE : c->send, c->recv, c->count, o->t, o->root, c->g);
    case B_SCATTER: return mdc_scatter(c->send, ip_root ? (void *)MDC_IN_PLACE : c->recv, c->count, o->t, o->root, c->g);
    }
    return MDC_ERR_INVALID;
}

static int run_mpich(const bench_opts *o, bench_case *c) {
    MPI_Datatype mt = mdc_mpi_type(o->t);
    int n = (int)c->count;
    const void *in = o->inplace ? MPI_IN_PLACE : c->send;
    int ip_root = o->inplace && c->me == o->root;
    switch (o->def->kind) {
    case B_ALLREDUCE: return MPI_Allreduce(in, c->recv, n, mt, mpi_op(o->op), MPI_COMM_WORLD);
    case B_REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(in, c->recv, n, mt, mpi_op(o->op), MPI_COMM_WORLD);
    case B_ALLGATHER: return MPI_Allgather(in, n, mt, c->recv, n, mt, MPI_COMM_WORLD);
    case B_ALLTOALL: return MPI_Alltoall(in, n, mt, c->recv, n, mt, MPI_COMM_WORLD);
    case B_BCAST: return MPI_Bcast(c->recv, n, mt, o->root, MPI_COMM_WORLD);
    case B_REDUCE:
        return MPI_Reduce(ip_root ? MPI_IN_PLACE : c->send, c->recv, n, mt, mpi_op(o->op), o->root, MPI_COMM_WORLD);
    case B_GATHER:
        return MPI_Gather(ip_root ? MPI_IN_PLACE : c->send, n, mt, c->recv, n, mt, o->root, MPI_COMM_WORLD);
    case B_SCATTER:
        return MPI_Scatter(c->send, n, mt, ip_root ? MPI_IN_PLACE : c->recv, n, mt, o->root, MPI_COMM_WORLD);
    }
    return MPI_ERR_OTHER;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of_max(double *t, int n) {
    double *tmax = calloc((size_t)n, sizeof *tmax);
    if (!tmax) return 0;
    /* Every rank ran the same iterations unless one failed; a failing rank aborts after. */
    MPI_Allreduce(t, tmax, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(tmax, (size_t)n, sizeof *tmax, cmp_dbl);
    double med = n % 2 ? tmax[n / 2] : 0.5 * (tmax[n / 2 - 1] + tmax[n / 2]);
    free(tmax);
    return med;
}

/* The calls per block of --order blocks: a quarter of the iterations (5 of 20), so drift
 * over a size's run is shared by both libraries, and a block is long enough that most of
 * its calls follow a call of the same library. */
static int block_calls(const bench_opts *o) { return o->alternate ? 1 : (o->iters + 3) / 4; }

/* Times `iters` calls of ours and, when o->mpich, as many of MPICH's: median over iterations of
 * the max over ranks, seconds, into *ours and *theirs. With --check, also counts wrong elements
 * of every call of ours into *wrong.
 * Order. blocks (default): rounds of block_calls() calls of one library, then as many of the
 * other; which goes first swaps every round, so drift on a shared machine hits both alike.
 * Each block starts with one untimed call: a call leaves the caches in a state that the next
 * call pays for (tests/bench_after.c; docs/performance.md "How the two are timed": after a
 * 2-rank 32 KiB MPI_Allgather the next call takes 1.6-2.2 us longer than after an
 * mdc_allgather, whichever library it belongs to), and strict alternation charges all of
 * MPICH's after-effects to minidc and none of minidc's to MPICH. In blocks, each library's timed calls follow its own calls, as in an
 * application that calls one library. alternate (--order alternate): ours, theirs, ours, ...,
 * every call timed, each following the other library's. */
static void time_calls(const bench_opts *o, bench_case *c, double *ours, double *theirs,
                       size_t *wrong, mdc_status *st) {
    double *t = calloc(2 * (size_t)o->iters, sizeof *t), *tm = t + o->iters;
    *ours = *theirs = 0;
    if (!t) {
        *st = MDC_ERR_OOM_HOST;
        return;
    }
    int block = block_calls(o), warm = !o->alternate, done[2] = {0, 0}; /* [0] ours, [1] MPICH */
    for (int round = 0; *st == MDC_OK && (done[0] < o->iters || (o->mpich && done[1] < o->iters)); round++) {
        for (int k = 0; k < 2 && *st == MDC_OK; k++) {
            int side = o->alternate ? k : k ^ (round & 1);
            if (side && !o->mpich) continue;
            int n = o->iters - done[side] < block ? o->iters - done[side] : block;
            for (int j = -warm; j < n && n > 0 && *st == MDC_OK; j++) {
                if (!side && o->check) prepare(o, c);
                if ((*st = mdc_barrier(c->g))) break;
                double t0 = MPI_Wtime();
                if (!side) *st = run_minidc(o, c);
                else if (run_mpich(o, c) != MPI_SUCCESS) *st = mdc_fail(MDC_ERR_MPI, "MPICH's %s failed", o->def->name);
                double dt = MPI_Wtime() - t0;
                if (j >= 0) (side ? tm : t)[done[side]++] = dt;
                if (!side && !*st && o->check) *wrong += verify(o, c);
            }
        }
    }
    *ours = median_of_max(t, o->iters);
    if (o->mpich) *theirs = median_of_max(tm, o->iters);
    free(t);
}

/* ---- options ----------------------------------------------------------------------------- */

/* A size of 1 byte to 1 TiB (0 would never grow by -f; a huge or non-finite one cannot be
 * allocated, or converted to size_t at all). */
static int parse_size(const char *s, size_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0) return -1;
    double m = 1;
    if (*end == 'K' || *end == 'k') m = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') m = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') m = 1024.0 * 1024 * 1024, end++;
    if (*end == 'i') end++;
    if (*end == 'B') end++;
    if (*end || v * m < 1 || v * m > 1099511627776.0) return -1;
    *out = (size_t)(v * m);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: mpiexec.mpich -n P minidc bench COLL [options]   COLL: allreduce reduce_scatter\n"
            "       allgather alltoall broadcast reduce gather scatter\n"
            "  -b SIZE        smallest size (bytes, 1 to 1T; K, M, G suffixes; default 8)\n"
            "  -e SIZE        largest size (default 64M)\n"
            "  -f FACTOR      size multiplier, above 1 (default 2)\n"
            "  --algo A       force minidc's algorithm (default auto: the cost model)\n"
            "  --pick B       what auto optimizes: host (default: this machine's wall clock, the\n"
            "                 host's alpha-beta-gamma) or device (the emulated device's links, the\n"
            "                 choice a training run on --device makes)\n"
            "  --dtype T      f32 f64 f16 bf16 i32 i64 u8 (default f32; f16/bf16 have no MPICH column)\n"
            "  --op OP        sum prod min max (default sum)\n"
            "  --iters N      timed iterations per size (default 20 up to 1 MiB, 10 to 16 MiB, then 5)\n"
            "  --order O      blocks (default: rounds of iters/4 calls of one library, then of the\n"
            "                 other, each block after one untimed call) or alternate (ours, MPICH's,\n"
            "                 ours, ...: each call follows the other library's)\n"
            "  --inplace      both libraries in place (MPI_IN_PLACE: the input in the receive buffer;\n"
            "                 reduce, gather, scatter: at the root)\n"
            "  --root R       root of broadcast, reduce, gather, scatter (default 0)\n"
            "  --check        verify every call of ours (default: one verified call per size)\n"
            "  --no-mpich     skip MPICH's column\n"
            "%s",
            mdc_device_options_help());
}

/* Only rank 0 (`say`) prints what is wrong; every rank returns the same code. */
static int parse_args(bench_opts *o, int argc, char **argv, int say) {
    const char *name = argv[0];
    if (!strcmp(name, "bcast")) name = "broadcast";
    o->def = NULL;
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (!strcmp(name, defs[i].name)) o->def = &defs[i];
    if (!o->def) {
        if (say) fprintf(stderr, "minidc bench: no collective '%s'\n", argv[0]);
        return 2;
    }
    o->minb = 8;
    o->maxb = 64u << 20;
    o->factor = 2;
    o->algo = NULL;
    o->pick = "host";
    o->t = MDC_F32;
    o->op = MDC_SUM;
    o->iters = 0;
    o->check = 0;
    o->mpich = 1;
    o->alternate = 0;
    o->inplace = 0;
    o->root = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "-b") && v) bad = parse_size(v, &o->minb), i++;
        else if (!strcmp(a, "-e") && v) bad = parse_size(v, &o->maxb), i++;
        else if (!strcmp(a, "-f") && v)
            bad = mdc_parse_double_range(a, v, 1, 1e6, &o->factor) || o->factor == 1, i++;
        else if (!strcmp(a, "--algo") && v) o->algo = v, i++;
        else if (!strcmp(a, "--pick") && v) o->pick = v, bad = strcmp(v, "host") && strcmp(v, "device"), i++;
        else if (!strcmp(a, "--dtype") && v) {
            int t = mdc_dtype_parse(v);
            bad = t < 0;
            o->t = (mdc_dtype)(t < 0 ? 0 : t);
            i++;
        } else if (!strcmp(a, "--op") && v) {
            int op = mdc_op_parse(v);
            bad = op < 0 || op == MDC_AVG;
            o->op = (mdc_op)(op < 0 ? 0 : op);
            i++;
        } else if (!strcmp(a, "--iters") && v) bad = mdc_parse_int(a, v, 1, 1000000, &o->iters) != MDC_OK, i++;
        else if (!strcmp(a, "--order") && v) o->alternate = !strcmp(v, "alternate"), bad = !o->alternate && strcmp(v, "blocks"), i++;
        else if (!strcmp(a, "--check")) o->check = 1;
        else if (!strcmp(a, "--inplace")) o->inplace = 1;
        else if (!strcmp(a, "--root") && v) bad = mdc_parse_int(a, v, 0, 1 << 20, &o->root) != MDC_OK, i++;
        else if (!strcmp(a, "--no-mpich")) o->mpich = 0;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        } else bad = 1;
        if (bad) {
            if (say) {
                fprintf(stderr, "minidc bench %s: bad option or value: %s%s%s\n", o->def->name, a,
                        v ? " " : "", v && strncmp(a, "--c", 3) ? v : "");
                usage(stderr);
            }
            return 2;
        }
    }
    if (o->minb > o->maxb) {
        if (say) fprintf(stderr, "minidc bench: -b is larger than -e\n");
        return 2;
    }
    if (mdc_mpi_type(o->t) == MPI_DATATYPE_NULL) o->mpich = 0;
    return 0;
}

/* The speed target (MPICH time / ours) for p ranks and S bytes, 0 if none: 2 ranks
 * >= 1.0x at 64 KiB..64 MiB (allreduce >= 1.5x at 16-64 MiB); 4 and 8 ranks >= 10x up to
 * 1 MiB and >= 2x at 64 MiB. Stated for 2 cores; printed whatever the machine. */
static double target_ratio(bench_kind k, int p, size_t S) {
    const size_t KiB = 1024, MiB = KiB * KiB;
    if (k == B_REDUCE || k == B_GATHER || k == B_SCATTER) return 0; /* not among the five */
    if (p == 2) {
        if (S < 64 * KiB || S > 64 * MiB) return 0;
        return k == B_ALLREDUCE && S >= 16 * MiB ? 1.5 : 1.0;
    }
    if (p == 4 || p == 8) return S <= MiB ? 10.0 : S >= 64 * MiB ? 2.0 : 0;
    return 0;
}

/* The fraction of S that each rank, on average, must at least write into its memory by
 * copying: allreduce 2(p-1)/p (the busbw factor: Patarasuk & Yuan's bandwidth lower bound);
 * reduce_scatter (p-1)/p (each block's reduction tree has p-1 edges; the last combine writes
 * the output); allgather and alltoall 1 (every byte of the receive buffer is written, the own
 * block by a local copy; in place (p-1)/p: the own block stays); broadcast (p-1)/p (every
 * rank but the root); reduce (p-1)/p (as reduce_scatter: p-1 edges per element); gather and
 * scatter 1/p (S is written once in all, spread over the ranks by the best algorithm, which
 * could have the senders write; in place (p-1)/p^2). */
static double floor_factor(bench_kind k, int p, int inplace) {
    switch (k) {
    case B_ALLREDUCE: return 2.0 * (p - 1) / p;
    case B_ALLGATHER:
    case B_ALLTOALL: return inplace ? (double)(p - 1) / p : 1.0;
    case B_GATHER:
    case B_SCATTER: return (inplace ? (double)(p - 1) / p : 1.0) / p;
    default: return (double)(p - 1) / p;
    }
}

/* The copy floor's unit: every rank memcpy's `bytes` from its send to its receive buffer at
 * the same moment, after minidc's barrier; median over `iters` of the max over ranks. With
 * more ranks than cores, or cores that share the memory bus, this is what the machine can
 * copy when every rank has copying to do, which is all a collective does with large messages
 * (the receiver copies the payload out of the sender's memory, CMA); no algorithm can move
 * floor_factor x bytes per rank in less time. */
static double copy_time(bench_case *c, size_t bytes, int iters, mdc_status *st) {
    double *t = calloc((size_t)iters, sizeof *t);
    if (!t) {
        *st = MDC_ERR_OOM_HOST;
        return 0;
    }
    for (int it = 0; it < iters && *st == MDC_OK; it++) {
        if ((*st = mdc_barrier(c->g))) break;
        double t0 = MPI_Wtime();
        memcpy(c->recv, c->send, bytes);
        t[it] = MPI_Wtime() - t0;
    }
    double med = median_of_max(t, iters);
    free(t);
    return med;
}

/* memcpy bandwidth of this machine (bytes copied per second, best of 15), on one rank while the
 * others wait politely. Best-of, because a shared machine preempts copies at random. */
static double memcpy_bw(size_t bytes) {
    if (bytes < (1u << 20)) bytes = 1u << 20;
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double best = 1e30;
    for (int r = 0; r < 15; r++) {
        double t0 = mdc_wall_time();
        memcpy(b, a, bytes);
        double dt = mdc_wall_time() - t0;
        if (dt < best) best = dt;
        a[r] = b[bytes - 1 - r]; /* keep the copy observable */
    }
    free(a);
    free(b);
    return (double)bytes / best;
}

/* 1 when this MPICH's MPI_Reduce crashes with MPI_IN_PLACE at a root other than 0 (the
 * reduce-scatter-gather path reads through the send buffer: pmodels/mpich#6540, in 4.0 and
 * 4.1 up to 4.1.1). tests/interposer_reduce_root.c shows the library running such calls. */
static int mpich_inplace_reduce_broken(void) {
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, a = 0, b = 0, c = 0;
    MPI_Get_library_version(ver, &len);
    const char *v = strstr(ver, "MPICH Version:");
    if (!v || sscanf(v + 14, " %d.%d.%d", &a, &b, &c) < 2) return 0;
    return a == 4 && (b == 0 || (b == 1 && c <= 1));
}

int mdc_bench_coll(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    mdc_runtime rt;
    mdc_status st = mdc_runtime_init(&rt, &argc, &argv);
    if (st) mdc_runtime_die(&rt, st, 1, 2);
    bench_opts o;
    int rc = parse_args(&o, argc, argv, rt.rank == 0);
    if (rc) {
        mdc_runtime_finalize(&rt);
        return rc < 0 ? 0 : rc;
    }
    mdc_coll_set_pick(o.pick);
    if (o.algo && (st = mdc_coll_set_algo(o.def->coll, o.algo)) != MDC_OK) mdc_runtime_die(&rt, st, 1, 2);
    int p = rt.size, me = rt.rank;
    int rooted = o.def->kind == B_BCAST || o.def->kind == B_REDUCE || o.def->kind == B_GATHER || o.def->kind == B_SCATTER;
    if (o.root >= p) {
        if (me == 0) fprintf(stderr, "minidc bench %s: --root %d is not a rank of the %d\n", o.def->name, o.root, p);
        mdc_runtime_finalize(&rt);
        return 2;
    }
    size_t ts = mdc_dtype_size(o.t);
    int skip_mpich = o.mpich && o.def->kind == B_REDUCE && o.inplace && o.root != 0 && p > 1 &&
                     mpich_inplace_reduce_broken();
    if (skip_mpich) o.mpich = 0;
    /* Largest buffers: S bytes each side (every collective here fits in S + S). */
    size_t cap = o.maxb + ts * (size_t)p;
    bench_case c = {.p = p, .me = me, .g = rt.world};
    c.send = malloc(cap);
    c.recv = malloc(cap);
    if (!c.send || !c.recv) mdc_runtime_die(&rt, mdc_fail(MDC_ERR_OOM_HOST, "two buffers of %zu bytes", cap), 0, 1);
    memset(c.send, 0, cap);
    memset(c.recv, 0, cap);

    double mbw = 0;
    MDC_CHECK(mdc_barrier(rt.world));
    size_t mcb = o.maxb < (32u << 20) ? o.maxb : (32u << 20);
    if (mcb < (1u << 20)) mcb = 1u << 20;
    if (me == 0) mbw = memcpy_bw(mcb);
    MDC_CHECK(mdc_barrier(rt.world));

    const mdc_device_spec *spec = mdc_device_get_spec(rt.dev);
    if (me == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(ver, &len);
        char *nl = strchr(ver, '\n');
        if (nl) *nl = '\0';
        /* MINIDC_ALGO_<COLL> forces an algorithm as --algo does: the header says which. */
        const char *algo = o.algo ? o.algo : mdc_coll_get_algo(o.def->coll);
        char forced_by[80] = "";
        if (!o.algo && strcmp(algo, "auto") != 0) {
            int k = snprintf(forced_by, sizeof forced_by, " (forced by MINIDC_ALGO_");
            for (const char *n = mdc_coll_name(o.def->coll); *n && k + 2 < (int)sizeof forced_by; n++)
                forced_by[k++] = (char)toupper((unsigned char)*n);
            snprintf(forced_by + k, sizeof forced_by - (size_t)k, ")");
        }
        printf("# minidc bench %s: %d ranks, %s, op %s, algo %s%s, virtual device %s, "
               "time = median over iterations of max over ranks\n# order: %s\n# buffers: %s\n# reference: %s\n",
               o.def->name, p, mdc_dtype_name(o.t), mdc_op_name(o.op), algo,
               o.algo ? "" : *forced_by ? forced_by : !strcmp(o.pick, "host") ? " (cost model on this host's links, --pick host)"
                                                      : " (cost model on the device's links, --pick device)",
               spec->name,
               o.alternate ? "alternate (ours, MPICH's, ours, ...: every call follows the other library's)"
                           : "blocks (iters/4 calls of one library, then of the other, each block after one untimed call)",
               !o.inplace ? "out of place (input in the send buffer)"
               : o.def->kind == B_BCAST ? "in place (a broadcast always is)"
               : rooted ? "in place at the root (MPI_IN_PLACE / MDC_IN_PLACE)"
                        : "in place (MPI_IN_PLACE / MDC_IN_PLACE: the input in the receive buffer)",
               ver);
        if (rooted) printf("# root: %d\n", o.root);
        if (skip_mpich)
            printf("# no MPICH column: this MPICH's MPI_Reduce crashes in place at a root other than 0 "
                   "(pmodels/mpich#6540, fixed after 4.1.1)\n");
        printf("# busbw factor %.4g; ratio = MPICH time / minidc time (>1: minidc faster)\n",
               o.def->busfactor(p));
        printf("# floor = %.4g x the time for every rank to memcpy S bytes at once (the least any "
               "algorithm can take); best = mpich / floor, the ratio an algorithm at the floor would reach\n",
               floor_factor(o.def->kind, p, o.inplace));
        printf("%12s %11s %5s %-19s %11s %8s %8s %7s %11s %7s %11s %10s %6s  %s\n", "bytes", "count", "type",
               "algorithm", "time(us)", "algbw", "busbw", "#wrong", "mpich(us)", "ratio", "virt(us)",
               "floor(us)", "best", "target");
        printf("%12s %11s %5s %-19s %11s %8s %8s %7s %11s %7s %11s\n", "", "", "", "", "", "GB/s",
               "GB/s", "", "", "", "");
    }
    double last_busbw = 0, last_copy = 0;
    size_t last_bytes = 0, total_wrong = 0;
    for (double s = (double)o.minb; s <= (double)o.maxb * 1.0000001; s *= o.factor) {
        size_t S = (size_t)s;
        int per_block = o.def->kind == B_REDUCE_SCATTER || o.def->kind == B_ALLGATHER ||
                        o.def->kind == B_ALLTOALL || o.def->kind == B_GATHER || o.def->kind == B_SCATTER;
        c.count = per_block ? S / (ts * (size_t)p) : S / ts;
        c.sbytes = c.count * ts * (per_block ? (size_t)p : 1);
        int iters = o.iters ? o.iters : c.sbytes <= (1u << 20) ? 20 : c.sbytes <= (16u << 20) ? 10 : 5;
        bench_opts oi = o;
        oi.iters = iters;
        double t_copy = copy_time(&c, c.sbytes, iters, &st);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        double t_floor = floor_factor(o.def->kind, p, o.inplace) * t_copy;
        /* One verified call (also the warm-up), unless every iteration is verified. */
        size_t wrong = 0;
        prepare(&oi, &c);
        MDC_CHECK(mdc_barrier(rt.world));
        st = run_minidc(&oi, &c);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        wrong += verify(&oi, &c);
        if (o.mpich && run_mpich(&oi, &c) != MPI_SUCCESS) /* MPICH's warm-up */
            mdc_runtime_die(&rt, mdc_fail(MDC_ERR_MPI, "MPICH's %s failed", o.def->name), 0, 1);
        double t_ours, t_mpich;
        time_calls(&oi, &c, &t_ours, &t_mpich, &wrong, &st);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        /* Virtual time of one call on a zeroed clock. */
        MDC_CHECK(mdc_barrier(rt.world));
        mdc_dev_reset_counters(rt.dev);
        st = run_minidc(&oi, &c);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        double vt = mdc_dev_now(rt.dev), vmax = 0;
        MPI_Allreduce(&vt, &vmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        unsigned long long w = wrong, wsum = 0;
        MPI_Allreduce(&w, &wsum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        total_wrong += (size_t)wsum;
        if (me == 0) {
            double algbw = t_ours > 0 ? (double)c.sbytes / t_ours / 1e9 : 0;
            double busbw = algbw * o.def->busfactor(p);
            char mp[32] = "-", ra[32] = "-";
            if (o.mpich) {
                snprintf(mp, sizeof mp, "%.1f", t_mpich * 1e6);
                snprintf(ra, sizeof ra, "%.2f", t_ours > 0 ? t_mpich / t_ours : 0);
            }
            char tg[64] = "-", be[32] = "-";
            double best = o.mpich && t_floor > 0 ? t_mpich / t_floor : 0;
            if (best > 0) snprintf(be, sizeof be, "%.2f", best);
            double want = target_ratio(o.def->kind, p, c.sbytes);
            if (o.mpich && want > 0)
                snprintf(tg, sizeof tg, ">=%.3gx %s%s", want, t_ours > 0 && t_mpich / t_ours >= want ? "ok" : "MISS",
                         best > 0 && best < want ? " (beyond the floor)" : "");
            printf("%12zu %11zu %5s %-19s %11.1f %8.3f %8.3f %7llu %11s %7s %11.2f %10.1f %6s  %s\n", c.sbytes,
                   c.count * (per_block ? (size_t)p : 1), mdc_dtype_name(o.t),
                   mdc_coll_choose(o.def->coll, c.sbytes, rt.world), t_ours * 1e6, algbw, busbw,
                   wsum, mp, ra, vmax * 1e6, t_floor * 1e6, be, tg);
            fflush(stdout);
            last_busbw = busbw;
            last_bytes = c.sbytes;
            last_copy = t_copy;
        }
    }
    if (me == 0) {
        printf("# memcpy bandwidth (one rank, best of 15 copies of %zu bytes): %.2f GB/s\n", mcb, mbw / 1e9);
        if (mbw > 0 && last_bytes)
            printf("# busbw at %zu bytes: %.3f GB/s = %.1f%% of memcpy\n", last_bytes, last_busbw,
                   100.0 * last_busbw * 1e9 / mbw);
        if (last_copy > 0)
            printf("# every rank copying %zu bytes at once: %.2f GB/s per rank, %.2f GB/s for the %d ranks\n",
                   last_bytes, (double)last_bytes / last_copy / 1e9, p * (double)last_bytes / last_copy / 1e9, p);
        mdc_wait_stats ws;
        mdc_wait_stats_get(&ws);
        if (ws.on)
            printf("# doorbells on (more ranks than cores): rank 0's waits slept %llu times, %llu ended by a ring, "
                   "%llu ran out\n", ws.sleeps, ws.rung, ws.timed_out);
        else
            printf("# doorbells off (no more ranks than cores, or MINIDC_DOORBELL=0): waits poll and yield\n");
        if (getenv("MINIDC_VERBOSE"))
            printf("# requests in flight on rank 0: high-water mark %zu over the run (bound 2p + 8 = %zu)\n",
                   mdc_transport_requests_hwm(mdc_group_transport(rt.world)), MDC_REQUESTS_BOUND(p));
        printf("# %s: %zu wrong elements in total\n", total_wrong ? "FAILED" : "ok", total_wrong);
    }
    free(c.send);
    free(c.recv);
    mdc_runtime_finalize(&rt);
    return total_wrong ? 1 : 0;
}
