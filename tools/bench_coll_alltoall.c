/* minidc bench alltoall: mdc_alltoall against MPI_Alltoall (tools/bench_coll.h). S is one
 * rank's send buffer, p blocks; in place, the input is in the receive buffer. Calls MPI
 * collectives: the comparison is its purpose (docs/design.md rule 1 exempts it). */
#include "bench_coll.h"

/* A block for every rank; one from every rank. */
static void prepare(const bench_opts *o, bench_case *c) {
    size_t all = c->count * (size_t)c->p;
    bench_coll_prepare_inputs(o, c, all, all);
}

/* Block j is what rank j sent to this rank: its block `me`. */
static size_t verify(const bench_opts *o, const bench_case *c) {
    size_t bad = 0, n = c->count;
    for (int j = 0; j < c->p; j++) bad += bench_coll_wrong_inputs(o, c->recv, (size_t)j * n, n, j, (size_t)c->me * n);
    return bad;
}

static mdc_status run_minidc(const bench_opts *o, bench_case *c) {
    return mdc_alltoall(o->inplace ? MDC_IN_PLACE : c->send, c->recv, c->count, o->t, c->g);
}

static int run_mpich(const bench_opts *o, bench_case *c) {
    MPI_Datatype mt = mdc_mpi_type(o->t);
    int n = (int)c->count;
    return MPI_Alltoall(o->inplace ? MPI_IN_PLACE : c->send, n, mt, c->recv, n, mt, MPI_COMM_WORLD);
}

/* As the allgather's: every byte of the receive buffer is written; in place the own block stays. */
static double floor_factor(int p, int inplace) { return inplace ? bench_coll_nm1(p) : 1.0; }

const bench_coll_def bench_coll_alltoall = {
    .name = "alltoall",
    .coll = MDC_COLL_ALLTOALL,
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
