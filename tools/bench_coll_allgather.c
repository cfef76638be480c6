/* minidc bench allgather: mdc_allgather against MPI_Allgather (tools/bench_coll.h). S is the
 * full output, p blocks; in place, each rank's block is in its place of the receive buffer.
 * Calls MPI collectives: the comparison is its purpose (docs/design.md rule 1 exempts it). */
#include "bench_coll.h"

static void prepare(const bench_opts *o, bench_case *c) {
    size_t n = c->count, all = n * (size_t)c->p;
    if (o->inplace) {
        bench_coll_poison(o, c->recv, all);
        bench_coll_fill(o, c->recv, (size_t)c->me * n, n, c->me, 0);
    } else {
        bench_coll_fill(o, c->send, 0, n, c->me, 0);
        bench_coll_poison(o, c->recv, all);
    }
}

/* Block j is rank j's input. */
static size_t verify(const bench_opts *o, const bench_case *c) {
    size_t bad = 0;
    for (int j = 0; j < c->p; j++) bad += bench_coll_wrong_inputs(o, c->recv, (size_t)j * c->count, c->count, j, 0);
    return bad;
}

static mdc_status run_minidc(const bench_opts *o, bench_case *c) {
    return mdc_allgather(o->inplace ? MDC_IN_PLACE : c->send, c->recv, c->count, o->t, c->g);
}

static int run_mpich(const bench_opts *o, bench_case *c) {
    MPI_Datatype mt = mdc_mpi_type(o->t);
    int n = (int)c->count;
    return MPI_Allgather(o->inplace ? MPI_IN_PLACE : c->send, n, mt, c->recv, n, mt, MPI_COMM_WORLD);
}

/* Every byte of the receive buffer is written, the own block by a local copy; in place
 * (p-1)/p: the own block stays. */
static double floor_factor(int p, int inplace) { return inplace ? bench_coll_nm1(p) : 1.0; }

const bench_coll_def bench_coll_allgather = {
    .name = "allgather",
    .coll = MDC_COLL_ALLGATHER,
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
