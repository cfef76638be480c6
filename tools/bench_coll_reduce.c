/* minidc bench reduce: mdc_reduce against MPI_Reduce (tools/bench_coll.h). S is the vector;
 * in place at the root only, where the input is in the receive buffer. No speed target. Calls
 * MPI collectives: the comparison is its purpose (docs/design.md rule 1 exempts it). */
#include <stdio.h>
#include <string.h>

#include "bench_coll.h"

static void prepare(const bench_opts *o, bench_case *c) {
    int ip_root = bench_coll_inplace_root(o, c);
    bench_coll_fill(o, ip_root ? c->recv : c->send, 0, c->count, c->me, 0);
    if (!ip_root) bench_coll_poison(o, c->recv, c->count);
}

/* The root's result. */
static size_t verify(const bench_opts *o, const bench_case *c) {
    return c->me == o->root ? bench_coll_wrong_reduced(o, c->recv, c->count, c->p, 0) : 0;
}

static mdc_status run_minidc(const bench_opts *o, bench_case *c) {
    const void *in = bench_coll_inplace_root(o, c) ? MDC_IN_PLACE : c->send;
    return mdc_reduce(in, c->recv, c->count, o->t, o->op, o->root, c->g);
}

static int run_mpich(const bench_opts *o, bench_case *c) {
    const void *in = bench_coll_inplace_root(o, c) ? MPI_IN_PLACE : c->send;
    return MPI_Reduce(in, c->recv, (int)c->count, mdc_mpi_type(o->t), bench_coll_mpi_op(o), o->root, MPI_COMM_WORLD);
}

/* 1 when this MPICH's MPI_Reduce crashes with MPI_IN_PLACE at a root other than 0 (the
 * reduce-scatter-gather path reads through the send buffer: pmodels/mpich#6540, in 4.0 and
 * 4.1 up to 4.1.1). tests/interposer/interposer_reduce_root.c shows the library running such calls. */
static int mpich_inplace_reduce_broken(void) {
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, a = 0, b = 0, c = 0;
    MPI_Get_library_version(ver, &len);
    const char *v = strstr(ver, "MPICH Version:");
    if (!v || sscanf(v + 14, " %d.%d.%d", &a, &b, &c) < 2) return 0;
    return a == 4 && (b == 0 || (b == 1 && c <= 1));
}

static const char *mpich_skip(const bench_opts *o, int p) {
    if (!o->inplace || o->root == 0 || p < 2 || !mpich_inplace_reduce_broken()) return NULL;
    return "this MPICH's MPI_Reduce crashes in place at a root other than 0 (pmodels/mpich#6540, fixed after 4.1.1)";
}

/* As the reduce-scatter's: p-1 edges per element. */
static double floor_factor(int p, int inplace) {
    (void)inplace;
    return bench_coll_nm1(p);
}

const bench_coll_def bench_coll_reduce = {
    .name = "reduce",
    .coll = MDC_COLL_REDUCE,
    .rooted = 1,
    .inplace_buffers = BENCH_INPLACE_ROOT,
    .prepare = prepare,
    .verify = verify,
    .run_minidc = run_minidc,
    .run_mpich = run_mpich,
    .mpich_skip = mpich_skip,
    .busfactor = bench_coll_one,
    .floor_factor = floor_factor,
};
