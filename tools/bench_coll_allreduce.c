/* minidc bench allreduce: mdc_allreduce against MPI_Allreduce (tools/bench_coll.h). S is the
 * vector; in place, the input is in the receive buffer. Calls MPI collectives: the comparison
 * is its purpose (docs/design.md rule 1 exempts it). */
#include "bench_coll.h"

static void prepare(const bench_opts *o, bench_case *c) { bench_coll_prepare_inputs(o, c, c->count, c->count); }

static size_t verify(const bench_opts *o, const bench_case *c) {
    return bench_coll_wrong_reduced(o, c->recv, c->count, c->p, 0);
}

static mdc_status run_minidc(const bench_opts *o, bench_case *c) {
    return mdc_allreduce(o->inplace ? MDC_IN_PLACE : c->send, c->recv, c->count, o->t, o->op, c->g);
}

static int run_mpich(const bench_opts *o, bench_case *c) {
    return MPI_Allreduce(o->inplace ? MPI_IN_PLACE : c->send, c->recv, (int)c->count, mdc_mpi_type(o->t),
                         bench_coll_mpi_op(o), MPI_COMM_WORLD);
}

static double busfactor(int p) { return 2.0 * (p - 1) / p; }

/* The busbw factor: Patarasuk & Yuan's bandwidth lower bound. */
static double floor_factor(int p, int inplace) {
    (void)inplace;
    return busfactor(p);
}

const bench_coll_def bench_coll_allreduce = {
    .name = "allreduce",
    .coll = MDC_COLL_ALLREDUCE,
    .inplace_buffers = BENCH_INPLACE_RECV,
    .prepare = prepare,
    .verify = verify,
    .run_minidc = run_minidc,
    .run_mpich = run_mpich,
    .busfactor = busfactor,
    .floor_factor = floor_factor,
    .target_big2 = 1.5,
};
