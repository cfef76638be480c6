/* libminidc_mpi.so: runs an MPICH program's collectives on minidc's algorithms.
 *
 * LD_PRELOAD=build/libminidc_mpi.so mpiexec.mpich -n 4 ./app
 *
 * Each intercepted MPI_* function (collectives.c) checks that the call is one minidc can do
 * exactly (an intracommunicator; for reductions a predefined op on a predefined type minidc
 * reduces, datatypes.c; data movement takes any datatype, derived ones packed), then runs the
 * minidc collective over a transport on a private duplicate of the communicator
 * (communicators.c), without a device (no virtual-time stamps travel). Anything else goes to
 * MPICH's own PMPI_* function, saying why on stderr when MINIDC_VERBOSE is set (1: once per
 * function, 2: every call; reports.c). Documented in docs/interposer.md.
 *
 * The ip_ names are shared between the library's files and nothing else: they are hidden, so
 * a program's own function of the same name neither replaces them nor is replaced. */
#ifndef MINIDC_INTERPOSER_INTERNAL_H
#define MINIDC_INTERPOSER_INTERNAL_H

#include <mpi.h>
#include <stddef.h>

#include "minidc/collectives.h"

#pragma GCC visibility push(hidden)

/* The intercepted collectives, by index: what reports name and what the dispatcher picks for. */
enum {
    F_ALLREDUCE,
    F_RSB,
    F_RS,
    F_ALLGATHER,
    F_ALLGATHERV,
    F_BCAST,
    F_REDUCE,
    F_GATHER,
    F_SCATTER,
    F_ALLTOALL,
    F_ALLTOALLV,
    F_BARRIER,
    F_COUNT
};

/* ---- reports.c: what the library says -------------------------------------------------- */

/* MINIDC_VERBOSE as a level: 0 quiet, 1 once per function, 2 every call. */
int ip_verbosity(void);

/* What a reduction runs as, for the verbose line. */
typedef struct {
    MPI_Datatype type;
    mdc_dtype dt;
    mdc_op op;
    int mult;
} ip_reduction_as;

/* Says (when verbose) that minidc runs call `f` on `bytes` over `g` (r: a reduction, else NULL). */
void ip_note_used(int f, size_t bytes, const mdc_group *g, const ip_reduction_as *r);
/* Says (when verbose) why call `f` went to MPICH; returns 0. */
int ip_fallback(int f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The caller's error (or a resource minidc lacks), reported on the communicator's error
 * handler with `code`, as MPICH reports its own; returns `code`. */
int ip_report(MPI_Comm comm, int f, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A minidc failure (its detail names the rank and what differed), reported the same way. */
int ip_failed(MPI_Comm comm, int f, mdc_status st);

/* The argument checks an entry point runs before any message moves, in the order it lists
 * them. The first that fails reports the caller's error (ip_report) into `rc`; the later ones
 * then do nothing, so an entry point writes its checks one per line and tests `rc` once (the
 * order decides which error a call with several reports). Each returns `rc`. */
typedef struct {
    MPI_Comm comm;
    int f;
    int rc; /* MPI_SUCCESS until a check fails */
} ip_args;

/* A count `what` ("count", "sendcount", ...) that is negative: MPI_ERR_COUNT. */
int ip_check_count(ip_args *a, const char *what, int count);
/* ip_check_count for each of the n entries of counts (named `what`, "a recvcounts entry");
 * *sum (may be NULL) gets their sum. */
int ip_check_counts(ip_args *a, const char *what, const int counts[], int n, long long *sum);
/* A root that is not a rank of the communicator: MPI_ERR_ROOT. */
int ip_check_root(ip_args *a, int root);
/* MPI_DATATYPE_NULL as `which` ("sendtype", ...) for count > 0 elements: MPI_ERR_TYPE. */
int ip_check_type(ip_args *a, const char *which, MPI_Datatype t, long long count);
/* The same buffer to send and receive (not MPI_IN_PLACE) with count > 0: MPI_ERR_BUFFER. */
int ip_check_alias(ip_args *a, const void *sendbuf, const void *recvbuf, long long count);

/* ---- communicators.c: the state kept per communicator --------------------------------- */

/* An intercommunicator (or MPI_COMM_NULL) goes to MPICH: returns 1 (after a note). */
int ip_not_ours(MPI_Comm comm, int f);
/* The minidc world group of `comm`, created on first use; NULL (after a note) if the
 * communicator is not one minidc can serve. Collective on first use (PMPI_Comm_create). */
mdc_group *ip_group_of(MPI_Comm comm, int f);
/* MPI_COMM_WORLD returns errors while minidc runs a call (counted, for threads); restored
 * after it. */
void ip_world_returns(void);
void ip_world_restore(void);

/* Runs a minidc call (an expression giving mdc_status) with world returning errors. */
#define IP_SERVE(st, call)  \
    do {                    \
        ip_world_returns(); \
        (st) = (call);      \
        ip_world_restore(); \
    } while (0)

/* IP_SERVE, then returns from the entry point: MPI_SUCCESS or the failure, reported. */
#define IP_RUN(comm, f, call)                                         \
    do {                                                              \
        mdc_status st_;                                               \
        IP_SERVE(st_, call);                                          \
        return st_ == MDC_OK ? MPI_SUCCESS : ip_failed(comm, f, st_); \
    } while (0)

/* ---- datatypes.c: what a datatype is to minidc, and packing ---------------------------- */

/* A predefined datatype's size when it is plain contiguous bytes (size == extent, lb 0), else 0. */
size_t ip_plain_size(MPI_Datatype t);
/* Bytes of one element's type signature, and its extent (the stride of consecutive elements). */
size_t ip_type_size(MPI_Datatype t);
/* The element at index `i` of a buffer of type `t`. */
void *ip_elem(const void *buf, MPI_Datatype t, long long i);
/* Maps a reduction's type and op (count becomes count * *mult elements of *dt), or falls
 * through (returns 0, after a note). */
int ip_reduction_ok(int f, MPI_Datatype type, MPI_Op op, mdc_dtype *dt, mdc_op *mop, int *mult);
/* Sizes that differ between a rank's send and receive sides: MPI_ERR_TRUNCATE, reported. */
int ip_size_mismatch(MPI_Comm comm, int f, size_t sent, size_t block);
/* Scratch for packed data (at least 1 byte), or NULL after reporting MPI_ERR_NO_MEM in *rc. */
char *ip_scratch(MPI_Comm comm, int f, size_t bytes, int *rc);

/* Scratch for a call: the send side packed (when spack: `scount` elements of `stype` at `sbuf`,
 * `sbytes` bytes) and room for the receive side (when rpack: `rcount` elements of `rtype`,
 * `rbytes` bytes, unpacked after the call, so checked now). Returns MPI_SUCCESS, or the error
 * already reported, with nothing left allocated. */
int ip_stage(MPI_Comm comm, int f, int spack, const void *sbuf, size_t scount, MPI_Datatype stype, size_t sbytes,
             char **sp, int rpack, size_t rcount, MPI_Datatype rtype, size_t rbytes, char **rp);
/* Ends a staged call: reports a minidc failure, or unpacks the receive scratch (`rcount`
 * elements of `rtype` into recvbuf); frees the scratch. */
int ip_unstage(MPI_Comm comm, int f, mdc_status st, void *recvbuf, size_t rcount, MPI_Datatype rtype, char *sp,
               char *rp, size_t rbytes);

/* Byte offsets of the blocks of a v-collective (counts[i] elements at element displacement
 * displs[i]) for minidc: in place in the caller's buffer for a plain type (from the lowest
 * block, returned as the base), else one after another in scratch (base NULL: the caller
 * allocates `*total` bytes). len/off get n entries each. */
char *ip_v_layout(void *buf, MPI_Datatype t, int plain, const int counts[], const int displs[], int n, size_t *len,
                  size_t *off, size_t *total);
/* Whether each block of a v-collective can be packed (each block is one pack call). */
int ip_v_packable(MPI_Comm comm, int f, MPI_Datatype t, const int counts[], int n, const size_t *len);
/* Packs (or unpacks) the blocks of a v-collective between the caller's buffer and scratch. */
int ip_v_pack(MPI_Comm comm, int f, void *buf, MPI_Datatype t, const int counts[], const int displs[], int n, char *pk,
              const size_t *len, const size_t *off, int unpack);

#pragma GCC visibility pop

#endif
