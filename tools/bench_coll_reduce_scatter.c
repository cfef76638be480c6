/* minidc bench reduce_scatter: mdc_reduce_scatter against MPI_Reduce_scatter_block
 * (tools/bench_coll.h). S is the full input, p blocks; in place, the input is in the receive
 * buffer. Calls MPI collectives: the comparison is its purpose (docs/design.md rule 1 exempts it). */
#include "bench_coll.h"

/* Every block of the input; one block of output. */
static void prepare(const bench_opts *o, bench_case *c) {
    bench_coll_prepare_inputs(o, c, c->count * (size_t)c->p, c->count);
}

/* Rank r holds block r of the reduced vector. */
static size_t verify(const bench_opts *o, const bench_case *c) {
    return bench_coll_wrong_reduced(o, c->recv, c->count, c->p, (size_t)c->me * c->count);
}

static mdc_status run_minidc(const bench_opts *o, bench_case *c) {
    return mdc_reduce_scatter(o->inplace ? MDC_IN_PLACE : c->send, c->recv, c->count, o->t, o->op, c->g);
}

static int run_mpich(const bench_opts *o, bench_case *c) {
    return MPI_Reduce_scatter_block(o->inplace ? MPI_IN_PLACE : c->send, c->recv, (int)c->count, mdc_mpi_type(o->t),
                                    bench_coll_mpi_op(o), MPI_COMM_WORLD);
}

/* Each block's reduction tree has p-1 edges; the last combine writes the output. */
static double floor_factor(int p, int inplace) {
    (void)inplace;
    return bench_coll_nm1(p);
}

const bench_coll_def bench_coll_reduce_scatter = {
    .name = "reduce_scatter",
    .coll = MDC_COLL_REDUCE_SCATTER,
    .per_block = 1,
    .inplace_buffers = BENCH_INPLACE_RECV,
    .prepare = prepare,
    .verify = verify,
    .run_minidc = run_minidc,
    .run_mpich = run_mpich,
    .busfactor = bench_coll_nm1,
    .floor_factor = floor_factor,
    .target_big2 = 1.0,
};
