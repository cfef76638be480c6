/* minidc bench COLL (tools/bench_coll.c, the driver): what one collective brings, as
 * nccl-tests' per-collective files do. Each collective is one small definition in
 * tools/bench_coll_<name>.c: how to fill the buffers of one call, how to count wrong elements
 * after it, how to run minidc's and MPICH's, and the factors of the printed columns. The
 * driver times, verifies and prints through these alone. */
#ifndef MINIDC_TOOLS_BENCH_COLL_H
#define MINIDC_TOOLS_BENCH_COLL_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#include "minidc/minidc.h"
#include "minidc/mpi_map.h"

typedef struct bench_coll_def bench_coll_def;

typedef struct {
    const bench_coll_def *def;
    size_t minb, maxb;
    double factor;
    const char *algo, *pick;
    mdc_dtype t;
    mdc_op op;
    int iters, check, mpich, alternate, inplace, root;
} bench_opts;

/* One size: the buffers of one call (S + S bytes each side at most). */
typedef struct {
    int p, me;
    mdc_group *g;
    void *send, *recv;
    size_t count;  /* per-call count argument (elements): the vector, or one block */
    size_t sbytes; /* S as nccl-tests counts it */
} bench_case;

struct bench_coll_def {
    const char *name; /* as `minidc bench` takes it */
    mdc_coll coll;
    int per_block;               /* S is p blocks (count = S / p elements), else the vector */
    int rooted;                  /* takes --root, and is in place at the root only (MPI's meaning) */
    const char *inplace_buffers; /* the "# buffers:" header with --inplace */
    /* Fills the inputs of one call and poisons its outputs (0xff). */
    void (*prepare)(const bench_opts *o, bench_case *c);
    /* The wrong elements on this rank after one call. */
    size_t (*verify)(const bench_opts *o, const bench_case *c);
    mdc_status (*run_minidc)(const bench_opts *o, bench_case *c);
    int (*run_mpich)(const bench_opts *o, bench_case *c); /* an MPI error code */
    /* Why MPICH's column cannot be run with these options, or NULL. */
    const char *(*mpich_skip)(const bench_opts *o, int p);
    double (*busfactor)(int p); /* nccl-tests' busbw factor */
    /* The fraction of S that each rank must at least write into its memory by copying (the
     * floor column: no algorithm can take less time than every rank copying that much). */
    double (*floor_factor)(int p, int inplace);
    /* The speed targets (MPICH time / ours; bench_coll.c, target_ratio) apply when this is
     * above 0: the 2-rank target from 16 MiB on (below, 1.0). */
    double target_big2;
};

extern const bench_coll_def bench_coll_allreduce, bench_coll_reduce_scatter, bench_coll_allgather, bench_coll_alltoall,
    bench_coll_broadcast, bench_coll_reduce, bench_coll_gather, bench_coll_scatter;

/* The "# buffers:" header in place, for the collectives in place everywhere / at the root. */
#define BENCH_INPLACE_RECV "in place (MPI_IN_PLACE / MDC_IN_PLACE: the input in the receive buffer)"
#define BENCH_INPLACE_ROOT "in place at the root (MPI_IN_PLACE / MDC_IN_PLACE)"

/* The options (bench_coll_options.c): fills *o for `minidc bench NAME ...` (argv[0] = NAME).
 * Returns 0 to run, -1 after --help, 2 on a bad option or value (only rank 0, `say`, prints
 * what is wrong; every rank returns the same code). */
int bench_coll_parse_args(bench_opts *o, int argc, char **argv, int say);
void bench_coll_usage(FILE *f);

/* ---- shared by the definitions (bench_coll_data.c) ----------------------------------------- */

/* buf[at + i] = rank's input element first + i, for i < n (integer-valued, exact in every
 * type: the exact answer does not depend on summation order). */
void bench_coll_fill(const bench_opts *o, void *buf, size_t at, size_t n, int rank, size_t first);
/* The elements of buf[at + i], i < n, that differ from rank's input element first + i. */
size_t bench_coll_wrong_inputs(const bench_opts *o, const void *buf, size_t at, size_t n, int rank, size_t first);
/* The elements of buf[i], i < n, that differ from the reduction over the p ranks of element
 * first + i. */
size_t bench_coll_wrong_reduced(const bench_opts *o, const void *buf, size_t n, int p, size_t first);
/* The inputs of the unrooted reductions and the all-to-all: this rank's first in_elems inputs
 * in the send buffer and out_elems of the receive buffer poisoned; in place (--inplace) the
 * inputs in the receive buffer instead. */
void bench_coll_prepare_inputs(const bench_opts *o, bench_case *c, size_t in_elems, size_t out_elems);
/* Poisons n elements of buf (0xff bytes), so an element not written shows as wrong. */
void bench_coll_poison(const bench_opts *o, void *buf, size_t n);
/* MPICH's op for o->op (avg is timed as sum: it divides once at the end, as minidc does). */
MPI_Op bench_coll_mpi_op(const bench_opts *o);

/* A rooted collective's in-place call: only the root passes MPI_IN_PLACE (MPI's meaning). */
static inline int bench_coll_inplace_root(const bench_opts *o, const bench_case *c) {
    return o->inplace && c->me == o->root;
}
static inline double bench_coll_nm1(int p) { return (double)(p - 1) / p; } /* (p-1)/p */
static inline double bench_coll_one(int p) {
    (void)p;
    return 1.0;
}

#endif
