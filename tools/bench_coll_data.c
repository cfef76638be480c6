/* The data of minidc bench COLL's calls (tools/bench_coll.h): integer-valued inputs, exact in
 * every type, so the exact answer of a reduction does not depend on summation order, and the
 * checks of the results against them. */
#include <string.h>

#include "bench_coll.h"

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

MPI_Op bench_coll_mpi_op(const bench_opts *o) { return mdc_mpi_op(o->op == MDC_AVG ? MDC_SUM : o->op); }

void bench_coll_fill(const bench_opts *o, void *buf, size_t at, size_t n, int rank, size_t first) {
    for (size_t i = 0; i < n; i++) mdc_dtype_set(buf, o->t, at + i, input_value(o, rank, first + i));
}

void bench_coll_poison(const bench_opts *o, void *buf, size_t n) { memset(buf, 0xff, n * mdc_dtype_size(o->t)); }

void bench_coll_prepare_inputs(const bench_opts *o, bench_case *c, size_t in_elems, size_t out_elems) {
    if (o->inplace) {
        bench_coll_poison(o, c->recv, in_elems);
        bench_coll_fill(o, c->recv, 0, in_elems, c->me, 0);
    } else {
        bench_coll_fill(o, c->send, 0, in_elems, c->me, 0);
        bench_coll_poison(o, c->recv, out_elems);
    }
}

size_t bench_coll_wrong_inputs(const bench_opts *o, const void *buf, size_t at, size_t n, int rank, size_t first) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += mdc_dtype_get(buf, o->t, at + i) != input_value(o, rank, first + i);
    return bad;
}

size_t bench_coll_wrong_reduced(const bench_opts *o, const void *buf, size_t n, int p, size_t first) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += mdc_dtype_get(buf, o->t, i) != expected_reduced(o, p, first + i);
    return bad;
}
