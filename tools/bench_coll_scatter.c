/* minidc bench scatter: mdc_scatter against MPI_Scatter (tools/bench_coll.h). S is the root's
 * send buffer, p blocks; in place at the root only, whose own block then stays in its send
 * buffer. No speed target. Calls MPI collectives: the comparison is its purpose (docs/design.md
 * rule 1 exempts it). */
#include "bench_coll.h"

static void prepare(const bench_opts *o, bench_case *c) {
    if (c->me == o->root) bench_coll_fill(o, c->send, 0, c->count * (size_t)c->p, c->me, 0);
    bench_coll_poison(o, c->recv, c->count);
}

/* Rank r holds block r of the root's input (the root in place: nothing received). */
static size_t verify(const bench_opts *o, const bench_case *c) {
    if (bench_coll_inplace_root(o, c)) return 0;
    return bench_coll_wrong_inputs(o, c->recv, 0, c->count, o->root, (size_t)c->me * c->count);
}

static mdc_status run_minidc(const bench_opts *o, bench_case *c) {
    void *out = bench_coll_inplace_root(o, c) ? (void *)MDC_IN_PLACE : c->recv;
    return mdc_scatter(c->send, out, c->count, o->t, o->root, c->g);
}

static int run_mpich(const bench_opts *o, bench_case *c) {
    MPI_Datatype mt = mdc_mpi_type(o->t);
    int n = (int)c->count;
    void *out = bench_coll_inplace_root(o, c) ? MPI_IN_PLACE : c->recv;
    return MPI_Scatter(c->send, n, mt, out, n, mt, o->root, MPI_COMM_WORLD);
}

/* As the gather's: S is written once in all, spread over the ranks. */
static double floor_factor(int p, int inplace) { return (inplace ? bench_coll_nm1(p) : 1.0) / p; }

const bench_coll_def bench_coll_scatter = {
    .name = "scatter",
    .coll = MDC_COLL_SCATTER,
    .per_block = 1,
    .rooted = 1,
    .inplace_buffers = BENCH_INPLACE_ROOT,
    .prepare = prepare,
    .verify = verify,
    .run_minidc = run_minidc,
    .run_mpich = run_mpich,
    .busfactor = bench_coll_nm1,
    .floor_factor = floor_factor,
};
