/* minidc bench gather: mdc_gather against MPI_Gather (tools/bench_coll.h). S is the root's
 * receive buffer, p blocks; in place at the root only, where its own block is already in its
 * place. No speed target. Calls MPI collectives: the comparison is its purpose (docs/design.md rule
 * 1 exempts it). */
#include "bench_coll.h"

static void prepare(const bench_opts *o, bench_case *c) {
    int ip_root = bench_coll_inplace_root(o, c);
    bench_coll_poison(o, c->recv, c->count * (size_t)c->p);
    bench_coll_fill(o, ip_root ? c->recv : c->send, ip_root ? (size_t)c->me * c->count : 0, c->count, c->me, 0);
}

/* At the root, block j is rank j's input. */
static size_t verify(const bench_opts *o, const bench_case *c) {
    size_t bad = 0;
    for (int j = 0; c->me == o->root && j < c->p; j++)
        bad += bench_coll_wrong_inputs(o, c->recv, (size_t)j * c->count, c->count, j, 0);
    return bad;
}

static mdc_status run_minidc(const bench_opts *o, bench_case *c) {
    const void *in = bench_coll_inplace_root(o, c) ? MDC_IN_PLACE : c->send;
    return mdc_gather(in, c->recv, c->count, o->t, o->root, c->g);
}

static int run_mpich(const bench_opts *o, bench_case *c) {
    MPI_Datatype mt = mdc_mpi_type(o->t);
    int n = (int)c->count;
    const void *in = bench_coll_inplace_root(o, c) ? MPI_IN_PLACE : c->send;
    return MPI_Gather(in, n, mt, c->recv, n, mt, o->root, MPI_COMM_WORLD);
}

/* S is written once in all, spread over the ranks by the best algorithm, which could have the
 * senders write; in place (p-1)/p^2. */
static double floor_factor(int p, int inplace) { return (inplace ? bench_coll_nm1(p) : 1.0) / p; }

const bench_coll_def bench_coll_gather = {
    .name = "gather",
    .coll = MDC_COLL_GATHER,
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
