/* minidc bench broadcast: mdc_bcast against MPI_Bcast (tools/bench_coll.h). S is the vector,
 * the root's buffer; a broadcast is always in place. Calls MPI collectives: the comparison is
 * its purpose (docs/design.md rule 1 exempts it). */
#include "bench_coll.h"

static void prepare(const bench_opts *o, bench_case *c) {
    if (c->me == o->root) bench_coll_fill(o, c->recv, 0, c->count, o->root, 0);
    else bench_coll_poison(o, c->recv, c->count);
}

static size_t verify(const bench_opts *o, const bench_case *c) {
    return bench_coll_wrong_inputs(o, c->recv, 0, c->count, o->root, 0);
}

static mdc_status run_minidc(const bench_opts *o, bench_case *c) {
    return mdc_bcast(c->recv, c->count, o->t, o->root, c->g);
}

static int run_mpich(const bench_opts *o, bench_case *c) {
    return MPI_Bcast(c->recv, (int)c->count, mdc_mpi_type(o->t), o->root, MPI_COMM_WORLD);
}

/* Every rank but the root writes the vector. */
static double floor_factor(int p, int inplace) {
    (void)inplace;
    return bench_coll_nm1(p);
}

const bench_coll_def bench_coll_broadcast = {
    .name = "broadcast",
    .coll = MDC_COLL_BCAST,
    .rooted = 1,
    .inplace_buffers = "in place (a broadcast always is)",
    .prepare = prepare,
    .verify = verify,
    .run_minidc = run_minidc,
    .run_mpich = run_mpich,
    .busfactor = bench_coll_one,
    .floor_factor = floor_factor,
    .target_big2 = 1.0,
};
