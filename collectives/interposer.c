/* libminidc_mpi.so: runs an MPICH program's collectives on minidc's algorithms.
 *
 * LD_PRELOAD=build/libminidc_mpi.so mpiexec.mpich -n 4 ./app
 *
 * Each intercepted MPI_* function checks that the call is one minidc can do exactly (an
 * intracommunicator; for reductions a predefined op on a predefined type minidc reduces; data
 * movement takes any datatype, derived ones packed), then runs the minidc collective over a
 * transport on a private duplicate of the communicator, without a device (no virtual-time
 * stamps travel). Anything else goes to MPICH's own PMPI_* function, saying why on stderr
 * when MINIDC_VERBOSE is set (1: once per function, 2: every call).
 *
 * Why a private communicator: MPI requires collective traffic never to match the application's
 * point-to-point receives (an MPI_ANY_TAG receive on the same communicator would steal a
 * minidc message). PMPI_Comm_create of the communicator's own group gives the transport its
 * own context, as MPICH does internally. It is the one MPI collective minidc calls here, once
 * per communicator, and is freed with it (attribute delete callback) or at MPI_Finalize.
 * Documented in docs/interposer.md. */
#include <mpi.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/collectives.h"

typedef struct cached {
    MPI_Comm user, dup;
    mdc_transport *t;
    mdc_group *g;
    struct cached *next;
} cached;

static int keyval = MPI_KEYVAL_INVALID;
static cached *live; /* every cached state, for MPI_Finalize */
/* Guards keyval and live for threads starting collectives on different communicators at once
 * (MPI_THREAD_MULTIPLE). Never held across an MPI collective: PMPI_Comm_create on two
 * communicators in two threads could then wait on each other across processes. */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static int verbose = -1;

enum { F_ALLREDUCE, F_RSB, F_RS, F_ALLGATHER, F_ALLGATHERV, F_BCAST, F_REDUCE, F_GATHER,
       F_SCATTER, F_ALLTOALL, F_ALLTOALLV, F_BARRIER, F_COUNT };
static const char *const fname[F_COUNT] = {
    "MPI_Allreduce", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter", "MPI_Allgather",
    "MPI_Allgatherv", "MPI_Bcast", "MPI_Reduce", "MPI_Gather", "MPI_Scatter", "MPI_Alltoall",
    "MPI_Alltoallv", "MPI_Barrier"};
static const mdc_coll fcoll[F_COUNT] = {
    MDC_COLL_ALLREDUCE, MDC_COLL_REDUCE_SCATTER, MDC_COLL_REDUCE_SCATTER, MDC_COLL_ALLGATHER,
    MDC_COLL_ALLGATHER, MDC_COLL_BCAST, MDC_COLL_REDUCE, MDC_COLL_GATHER, MDC_COLL_SCATTER,
    MDC_COLL_ALLTOALL, MDC_COLL_ALLTOALLV, MDC_COLL_BARRIER};
static unsigned char said_used[F_COUNT], said_fallback[F_COUNT];

/* MINIDC_VERBOSE=1: each function says once per process that it runs on minidc, and once why
 * it went to MPICH; 2: every call says so (which of a program's calls minidc ran). */
static int verbosity(void) {
    if (verbose < 0) {
        const char *v = getenv("MINIDC_VERBOSE");
        verbose = v && *v ? atoi(v) > 1 ? 2 : strcmp(v, "0") != 0 : 0;
    }
    return verbose;
}

/* Every message names the process by its MPI_COMM_WORLD rank, as mpiexec's output does. */
static int world_rank(void) {
    int r = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

/* What a reduction runs as, for the verbose line. */
typedef struct {
    MPI_Datatype type;
    mdc_dtype dt;
    mdc_op op;
    int mult;
} reduction_as;

/* Says (when verbose) that minidc runs the call: once per function, or every call. */
static void note_used(int f, size_t bytes, const mdc_group *g, const reduction_as *r) {
    int v = verbosity();
    if (!v || (v == 1 && said_used[f])) return;
    said_used[f] = 1;
    char how[MPI_MAX_OBJECT_NAME + 64] = "";
    if (r) {
        char name[MPI_MAX_OBJECT_NAME] = "?";
        int len = 0;
        PMPI_Type_get_name(r->type, name, &len);
        if (r->mult > 1)
            snprintf(how, sizeof how, ", %s %s as %d x %s", name, mdc_op_name(r->op), r->mult,
                     mdc_dtype_name(r->dt));
        else
            snprintf(how, sizeof how, ", %s %s as %s", name, mdc_op_name(r->op), mdc_dtype_name(r->dt));
    }
    fprintf(stderr, "minidc interposer: rank %d: %s runs on minidc (%s, %zu bytes, %d ranks%s)\n",
            world_rank(), fname[f], mdc_coll_choose(fcoll[f], bytes, g), bytes, mdc_group_size(g), how);
}

/* Says (when verbose) why the call went to MPICH: once per function, or every call; returns 0. */
static int fallback(int f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fallback(int f, const char *fmt, ...) {
    int v = verbosity();
    if (v == 2 || (v == 1 && !said_fallback[f])) {
        said_fallback[f] = 1;
        char why[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        fprintf(stderr, "minidc interposer: rank %d: %s falls through to MPICH: %s\n", world_rank(),
                fname[f], why);
    }
    return 0;
}

static void cached_free(cached *c) {
    pthread_mutex_lock(&state_lock);
    for (cached **p = &live; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    pthread_mutex_unlock(&state_lock);
    mdc_group_free(c->g);
    mdc_transport_free(c->t);
    int fin = 0;
    PMPI_Finalized(&fin);
    if (!fin) PMPI_Comm_free(&c->dup);
    free(c);
}

static int delete_fn(MPI_Comm comm, int kv, void *val, void *extra) {
    (void)comm, (void)kv, (void)extra;
    cached_free(val);
    return MPI_SUCCESS;
}

/* An intercommunicator goes to MPICH before any argument is read: its count arrays have the
 * remote group's size and its roots are MPI_ROOT / MPI_PROC_NULL, which the checks below would
 * misread. MPI_COMM_NULL goes there too, to be reported as MPICH reports it. */
static int not_ours(MPI_Comm comm, int f) {
    int inter = 0;
    if (comm == MPI_COMM_NULL) return 1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return fallback(f, "intercommunicator"), 1;
    return 0;
}

/* The minidc world group of `comm`, created on first use; NULL (after a note) if the
 * communicator is not one minidc can serve. Collective on first use (PMPI_Comm_create). */
static mdc_group *group_of(MPI_Comm comm, int f) {
    if (not_ours(comm, f)) return NULL;
    pthread_mutex_lock(&state_lock);
    int kv_ok = keyval != MPI_KEYVAL_INVALID ||
                PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fn, &keyval, NULL) == MPI_SUCCESS;
    pthread_mutex_unlock(&state_lock);
    if (!kv_ok) {
        fallback(f, "could not create an attribute key");
        return NULL;
    }
    cached *c = NULL;
    int flag = 0;
    PMPI_Comm_get_attr(comm, keyval, &c, &flag);
    if (flag && c) return c->g;
    c = calloc(1, sizeof *c);
    if (!c) return fallback(f, "out of host memory"), NULL;
    /* A communicator of comm's own group: a new context like a dup, but no attributes are
     * copied, so the program's copy callbacks never see it. Its failure (MPICH out of
     * contexts: every rank agrees on that) returns instead of aborting, and the call falls
     * through to MPICH. */
    MPI_Group grp;
    MPI_Errhandler h;
    int rc = PMPI_Comm_group(comm, &grp);
    if (rc == MPI_SUCCESS) {
        PMPI_Comm_get_errhandler(comm, &h);
        PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        rc = PMPI_Comm_create(comm, grp, &c->dup);
        PMPI_Comm_set_errhandler(comm, h);
        PMPI_Errhandler_free(&h);
        PMPI_Group_free(&grp);
    }
    if (rc != MPI_SUCCESS || c->dup == MPI_COMM_NULL) {
        free(c);
        fallback(f, "could not create a private communicator (out of MPI contexts?)");
        return NULL;
    }
    PMPI_Comm_set_errhandler(c->dup, MPI_ERRORS_RETURN);
    /* Every rank reaches here together (first collective on comm), and creating the
     * transport and group is local, so a failure below is the same everywhere. */
    if (mdc_transport_create(&c->t, &c->dup, NULL, 1) != MDC_OK ||
        mdc_group_world(&c->g, c->t) != MDC_OK) {
        fallback(f, "%s", mdc_detail());
        mdc_transport_free(c->t);
        PMPI_Comm_free(&c->dup);
        free(c);
        return NULL;
    }
    c->user = comm;
    pthread_mutex_lock(&state_lock);
    c->next = live;
    live = c;
    pthread_mutex_unlock(&state_lock);
    PMPI_Comm_set_attr(comm, keyval, c);
    return c->g;
}

/* A predefined (named) datatype whose size equals its extent: any such buffer is `count *
 * size` plain bytes. Returns its size, or 0 if it is derived or not contiguous. */
static size_t plain_size(MPI_Datatype t) {
    if (t == MPI_DATATYPE_NULL) return 0;
    int ni, na, nd, comb;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS || comb != MPI_COMBINER_NAMED)
        return 0;
    int size = 0;
    MPI_Aint lb, extent;
    PMPI_Type_size(t, &size);
    PMPI_Type_get_extent(t, &lb, &extent);
    return size > 0 && lb == 0 && extent == size ? (size_t)size : 0;
}

/* How minidc reduces a predefined MPI type: as `mult` elements of `dt` per MPI element, for
 * the ops in `ops` (bit per mdc_op). Types are matched by name and mapped by their size, never
 * assumed (a Fortran REAL compiled as 8 bytes reduces as f64).
 * - Floating point (float, double, Fortran REAL, DOUBLE PRECISION, REAL4/8): every op.
 * - Signed integers of 4 and 8 bytes (int, long, long long, int32/64_t, Fortran INTEGER,
 *   INTEGER4/8, MPI_AINT, MPI_OFFSET, MPI_COUNT): every op. uint8_t / unsigned char: every op.
 * - Other integers of 1, 4 and 8 bytes (signed char, int8_t, INTEGER1, unsigned, unsigned
 *   long (long), uint32/64_t): sum and prod only, on the same-sized type minidc has. Both
 *   wrap modulo 2^bits, so the bits are those of the unsigned/signed result; min and max
 *   compare differently and go to MPICH.
 * - Complex (C float/double _Complex, Fortran COMPLEX, DOUBLE COMPLEX, COMPLEX8/16, C++):
 *   sum only, as 2 floats (doubles) per element: real and imaginary parts add separately,
 *   each in the algorithm's documented order. prod goes to MPICH. */
typedef struct {
    int dt, mult;
    unsigned ops;
} reducible;

#define ALL_OPS ((1u << MDC_SUM) | (1u << MDC_PROD) | (1u << MDC_MIN) | (1u << MDC_MAX))
#define WRAP_OPS ((1u << MDC_SUM) | (1u << MDC_PROD))

static int is_one_of(MPI_Datatype t, const MPI_Datatype *list, int n) {
    for (int i = 0; i < n; i++)
        if (list[i] != MPI_DATATYPE_NULL && t == list[i]) return 1;
    return 0;
}

static reducible reduce_dtype(MPI_Datatype t) {
    static const MPI_Datatype floats[] = {MPI_FLOAT, MPI_DOUBLE, MPI_REAL, MPI_DOUBLE_PRECISION,
                                          MPI_REAL4, MPI_REAL8};
    static const MPI_Datatype ints[] = {MPI_INT, MPI_LONG, MPI_LONG_LONG, MPI_LONG_LONG_INT,
                                        MPI_INT32_T, MPI_INT64_T, MPI_INTEGER, MPI_INTEGER4,
                                        MPI_INTEGER8, MPI_AINT, MPI_OFFSET, MPI_COUNT};
    static const MPI_Datatype u8s[] = {MPI_UINT8_T, MPI_UNSIGNED_CHAR};
    static const MPI_Datatype wraps[] = {MPI_SIGNED_CHAR, MPI_INT8_T, MPI_INTEGER1, MPI_UNSIGNED,
                                         MPI_UNSIGNED_LONG, MPI_UNSIGNED_LONG_LONG, MPI_UINT32_T,
                                         MPI_UINT64_T};
    static const MPI_Datatype complexes[] = {MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX,
                                             MPI_COMPLEX, MPI_DOUBLE_COMPLEX, MPI_COMPLEX8,
                                             MPI_COMPLEX16, MPI_CXX_FLOAT_COMPLEX,
                                             MPI_CXX_DOUBLE_COMPLEX};
#define N_(a) ((int)(sizeof(a) / sizeof(a[0])))
    reducible r = {-1, 1, 0};
    size_t s = plain_size(t);
    if (!s) return r;
    if (is_one_of(t, floats, N_(floats))) {
        r.dt = s == 4 ? MDC_F32 : s == 8 ? MDC_F64 : -1;
        r.ops = ALL_OPS;
    } else if (is_one_of(t, ints, N_(ints))) {
        r.dt = s == 4 ? MDC_I32 : s == 8 ? MDC_I64 : -1;
        r.ops = ALL_OPS;
    } else if (is_one_of(t, u8s, N_(u8s))) {
        r.dt = s == 1 ? MDC_U8 : -1;
        r.ops = ALL_OPS;
    } else if (is_one_of(t, wraps, N_(wraps))) {
        r.dt = s == 1 ? MDC_U8 : s == 4 ? MDC_I32 : s == 8 ? MDC_I64 : -1;
        r.ops = WRAP_OPS;
    } else if (is_one_of(t, complexes, N_(complexes))) {
        r.dt = s == 8 ? MDC_F32 : s == 16 ? MDC_F64 : -1;
        r.mult = 2;
        r.ops = 1u << MDC_SUM;
    }
#undef N_
    return r;
}

static int reduce_op(MPI_Op op) {
    if (op == MPI_SUM) return MDC_SUM;
    if (op == MPI_PROD) return MDC_PROD;
    if (op == MPI_MIN) return MDC_MIN;
    if (op == MPI_MAX) return MDC_MAX;
    return -1;
}

/* Maps a reduction's type and op (count becomes count * *mult elements of *dt), or falls
 * through (returns 0). */
static int reduction_ok(int f, MPI_Datatype type, MPI_Op op, mdc_dtype *dt, mdc_op *mop,
                        int *mult) {
    reducible d = reduce_dtype(type);
    int o = reduce_op(op), len = 0;
    char name[MPI_MAX_OBJECT_NAME] = "?";
    if (verbosity() && (d.dt < 0 || o < 0 || !(d.ops & (1u << o)))) {
        PMPI_Type_get_name(type, name, &len);
        if (!len) snprintf(name, sizeof name, "(derived, unnamed)");
    }
    if (d.dt < 0) return fallback(f, "datatype %s is not one minidc reduces (floating point, "
                                     "integers of 1, 4 or 8 bytes, complex)", name);
    if (o < 0) return fallback(f, "not a predefined op minidc has (sum, prod, min, max)");
    if (!(d.ops & (1u << o)))
        return fallback(f, "%s of %s (minidc does sum and prod of unsigned and 1-byte signed "
                           "integers, sum of complex)", mdc_op_name((mdc_op)o), name);
    *dt = (mdc_dtype)d.dt;
    *mop = (mdc_op)o;
    *mult = d.mult;
    return 1;
}

/* The caller's error (or a resource minidc lacks), reported on the communicator's error
 * handler with `code`, as MPICH reports its own. */
static int report(MPI_Comm comm, int f, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int report(MPI_Comm comm, int f, int code, const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "minidc interposer: rank %d: %s: %s\n", world_rank(), fname[f], why);
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* A minidc failure (its detail names the rank and what differed), reported the same way. */
static int failed(MPI_Comm comm, int f, mdc_status st) {
    return report(comm, f, MPI_ERR_OTHER, "%s: %s", mdc_strerror(st), mdc_detail());
}

/* A negative count is the caller's error. MPICH 4.0.2 does not always report it (a negative
 * MPI_Allreduce count trips an assertion inside its memcpy), so it is reported here, on the
 * communicator's error handler, as MPI_ERR_COUNT. */
static int negative(MPI_Comm comm, int f, const char *what, int v) {
    return report(comm, f, MPI_ERR_COUNT, "%s is %d, a negative count", what, v);
}

/* The same buffer for the data sent and received (not MPI_IN_PLACE) with data to move:
 * MPI_ERR_BUFFER, as MPICH reports it ("buffers must not be aliased"), before any message. */
static int aliased(MPI_Comm comm, int f, const void *sendbuf, const void *recvbuf, long long count) {
    if (count <= 0 || sendbuf == MPI_IN_PLACE || sendbuf != recvbuf || !sendbuf) return MPI_SUCCESS;
    return report(comm, f, MPI_ERR_BUFFER, "the send and receive buffers are the same (%p); use MPI_IN_PLACE",
                  recvbuf);
}

/* A root that is not a rank of the communicator: MPI_ERR_ROOT, as MPICH reports it. */
static int bad_root(MPI_Comm comm, int f, int root) {
    int size = 0;
    PMPI_Comm_size(comm, &size);
    if (root >= 0 && root < size) return MPI_SUCCESS;
    return report(comm, f, MPI_ERR_ROOT, "root %d is not a rank of the %d-rank communicator", root, size);
}

/* MPI_DATATYPE_NULL for `count` > 0 elements: MPI_ERR_TYPE (asking MPICH its size would abort
 * through MPI_COMM_WORLD's handler, whatever the communicator's). With no elements it moves
 * nothing and is let be (MPICH 4.0.2 asserts on it in MPI_Bcast, so no program relies on it). */
static int null_type(MPI_Comm comm, int f, const char *which, MPI_Datatype t, long long count) {
    if (t != MPI_DATATYPE_NULL || count <= 0) return MPI_SUCCESS;
    return report(comm, f, MPI_ERR_TYPE, "%s is MPI_DATATYPE_NULL", which);
}

/* MPICH reports a failed MPI_Test/MPI_Testall (a message longer than its receive: the ranks'
 * counts differ) on MPI_COMM_WORLD's error handler, not the request's communicator: fatal by
 * default, with no word of which sizes differed. While minidc runs a call, world returns
 * errors instead, so the transport's own error (rank, sizes) is what the caller sees; the
 * program's handler is back before the call returns. Counted, for threads running
 * collectives on different communicators at once. */
static pthread_mutex_t world_lock = PTHREAD_MUTEX_INITIALIZER;
static int world_users;
static MPI_Errhandler world_saved = MPI_ERRHANDLER_NULL;

static void world_returns(void) {
    pthread_mutex_lock(&world_lock);
    if (world_users++ == 0 && PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &world_saved) == MPI_SUCCESS)
        PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pthread_mutex_unlock(&world_lock);
}

static void world_restore(void) {
    pthread_mutex_lock(&world_lock);
    if (--world_users == 0 && world_saved != MPI_ERRHANDLER_NULL) {
        PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world_saved);
        PMPI_Errhandler_free(&world_saved);
        world_saved = MPI_ERRHANDLER_NULL;
    }
    pthread_mutex_unlock(&world_lock);
}

/* A program thread that sets or reads world's handler while another thread is inside a minidc
 * call must see its own handler, and keep it: world_restore would otherwise put back the one
 * saved at entry. During a call, a new handler becomes the one restored at the end (world
 * keeps returning errors until then), and a read gets that handler. */
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler h) {
    if (comm != MPI_COMM_WORLD) return PMPI_Comm_set_errhandler(comm, h);
    pthread_mutex_lock(&world_lock);
    int rc = PMPI_Comm_set_errhandler(comm, h);
    if (rc == MPI_SUCCESS && world_users > 0) { /* world now holds a reference to h: take it */
        MPI_Errhandler now;
        if (PMPI_Comm_get_errhandler(comm, &now) == MPI_SUCCESS) {
            if (world_saved != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&world_saved);
            world_saved = now;
        }
        PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    }
    pthread_mutex_unlock(&world_lock);
    return rc;
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *h) {
    if (comm != MPI_COMM_WORLD) return PMPI_Comm_get_errhandler(comm, h);
    pthread_mutex_lock(&world_lock);
    int rc;
    if (world_users > 0 && world_saved != MPI_ERRHANDLER_NULL) { /* a reference of the caller's own */
        PMPI_Comm_set_errhandler(comm, world_saved);
        rc = PMPI_Comm_get_errhandler(comm, h);
        PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    } else {
        rc = PMPI_Comm_get_errhandler(comm, h);
    }
    pthread_mutex_unlock(&world_lock);
    return rc;
}

/* Runs a minidc call (an expression giving mdc_status) with world returning errors. */
#define SERVE(st, call)   \
    do {                  \
        world_returns();  \
        (st) = (call);    \
        world_restore();  \
    } while (0)

#define RUN(comm, f, call)                                          \
    do {                                                            \
        mdc_status st_;                                             \
        SERVE(st_, call);                                           \
        return st_ == MDC_OK ? MPI_SUCCESS : failed(comm, f, st_); \
    } while (0)

/* ---- reductions ---------------------------------------------------------------------- */

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
    const int f = F_ALLREDUCE;
    mdc_dtype dt;
    mdc_op mop;
    mdc_group *g;
    int mult;
    if (count < 0) return negative(comm, f, "count", count);
    int rc = aliased(comm, f, sendbuf, recvbuf, count);
    if (rc) return rc;
    if (!reduction_ok(f, type, op, &dt, &mop, &mult) || !(g = group_of(comm, f)))
        return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
    size_t n = (size_t)count * (size_t)mult;
    note_used(f, n * mdc_dtype_size(dt), g, &(reduction_as){type, dt, mop, mult});
    RUN(comm, f, mdc_allreduce(sendbuf == MPI_IN_PLACE ? MDC_IN_PLACE : sendbuf, recvbuf, n, dt,
                               mop, g));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm) {
    const int f = F_REDUCE;
    mdc_dtype dt;
    mdc_op mop;
    mdc_group *g;
    int mult, rc;
    if (not_ours(comm, f)) return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    if (count < 0) return negative(comm, f, "count", count);
    if ((rc = bad_root(comm, f, root))) return rc;
    if (!reduction_ok(f, type, op, &dt, &mop, &mult) || !(g = group_of(comm, f)))
        return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    size_t n = (size_t)count * (size_t)mult;
    note_used(f, n * mdc_dtype_size(dt), g, &(reduction_as){type, dt, mop, mult});
    RUN(comm, f, mdc_reduce(sendbuf == MPI_IN_PLACE ? MDC_IN_PLACE : sendbuf, recvbuf, n, dt, mop,
                            root, g));
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    const int f = F_RSB;
    mdc_dtype dt;
    mdc_op mop;
    mdc_group *g;
    int mult;
    if (recvcount < 0) return negative(comm, f, "recvcount", recvcount);
    if (aliased(comm, f, sendbuf, recvbuf, recvcount)) return MPI_ERR_BUFFER;
    if (!reduction_ok(f, type, op, &dt, &mop, &mult) || !(g = group_of(comm, f)))
        return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
    size_t n = (size_t)recvcount * (size_t)mult;
    note_used(f, n * (size_t)mdc_group_size(g) * mdc_dtype_size(dt), g,
              &(reduction_as){type, dt, mop, mult});
    RUN(comm, f, mdc_reduce_scatter(sendbuf == MPI_IN_PLACE ? MDC_IN_PLACE : sendbuf, recvbuf, n,
                                    dt, mop, g));
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    const int f = F_RS;
    mdc_dtype dt;
    mdc_op mop;
    mdc_group *g;
    int size = 0, mult;
    if (not_ours(comm, f)) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
    PMPI_Comm_size(comm, &size);
    for (int i = 0; i < size; i++)
        if (recvcounts[i] < 0) return negative(comm, f, "a recvcounts entry", recvcounts[i]);
    if (!reduction_ok(f, type, op, &dt, &mop, &mult) || !(g = group_of(comm, f)))
        return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
    int n = mdc_group_size(g);
    size_t *counts = malloc((size_t)n * sizeof *counts), total = 0;
    if (!counts) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
    for (int i = 0; i < n; i++) {
        counts[i] = (size_t)recvcounts[i] * (size_t)mult;
        total += counts[i];
    }
    note_used(f, total * mdc_dtype_size(dt), g, &(reduction_as){type, dt, mop, mult});
    mdc_status st;
    SERVE(st, mdc_reduce_scatterv(sendbuf == MPI_IN_PLACE ? MDC_IN_PLACE : sendbuf, recvbuf,
                                  counts, dt, mop, g));
    free(counts);
    return st == MDC_OK ? MPI_SUCCESS : failed(comm, f, st);
}

/* ---- data movement: any datatype travels as bytes ------------------------------------
 * A predefined type is contiguous: `count` elements are `count * size` plain bytes, used where
 * they are. A derived type is packed into contiguous scratch before the collective and
 * unpacked after (PMPI_Pack / PMPI_Unpack, local calls): MPICH's packed form of `count`
 * elements is their type signature's bytes in order, which is what a predefined type with the
 * same signature holds. So every rank runs a data-movement call on minidc, whatever types the
 * ranks pass: MPI lets a root use a derived type while the other ranks use predefined ones
 * (equal type signatures), and deciding per rank would send the root to MPICH and the others
 * to minidc, and hang. Only an intercommunicator (the same on every rank) goes to MPICH.
 * Negative displacements are legal too (the buffer pointer need not be the lowest address):
 * for plain types the lowest block becomes the base of minidc's byte offsets. */

/* Bytes of one element's type signature, and its extent (the stride of consecutive elements). */
static size_t type_size(MPI_Datatype t) {
    int s = 0;
    if (t != MPI_DATATYPE_NULL) PMPI_Type_size(t, &s);
    return s > 0 ? (size_t)s : 0;
}

static MPI_Aint type_extent(MPI_Datatype t) {
    MPI_Aint lb = 0, ext = 0;
    if (t != MPI_DATATYPE_NULL) PMPI_Type_get_extent(t, &lb, &ext);
    return ext;
}

/* Scratch for packed data (at least 1 byte), or NULL after reporting MPI_ERR_NO_MEM in *rc. */
static char *scratch(MPI_Comm comm, int f, size_t bytes, int *rc) {
    char *p = malloc(bytes ? bytes : 1);
    if (!p) *rc = report(comm, f, MPI_ERR_NO_MEM, "no memory to pack a derived datatype (%zu bytes)", bytes);
    return p;
}

/* Packs `count` elements of `t` at `buf` into `out` (`bytes` = their signature bytes), or the
 * reverse; MPI's pack counts are ints, so larger derived-type buffers are refused, clearly. */
static int pack(MPI_Comm comm, int f, const void *buf, size_t count, MPI_Datatype t, void *out,
                size_t bytes, int unpack) {
    if (!bytes) return MPI_SUCCESS;
    if (count > INT_MAX || bytes > INT_MAX)
        return report(comm, f, MPI_ERR_COUNT, "%zu bytes of a derived datatype (minidc packs at "
                      "most 2 GiB per buffer)", bytes);
    int pos = 0;
    int rc = unpack ? PMPI_Unpack(out, (int)bytes, &pos, (void *)buf, (int)count, t, comm)
                    : PMPI_Pack(buf, (int)count, t, out, (int)bytes, &pos, comm);
    if (rc != MPI_SUCCESS)
        return report(comm, f, rc, "PMPI_%s of a derived datatype failed", unpack ? "Unpack" : "Pack");
    return MPI_SUCCESS;
}

/* Whether `count` elements of derived type `t` (`bytes` signature bytes) can be packed or
 * unpacked, asked before any message moves: a rank that found out only when unpacking what it
 * received would leave nothing wrong behind, but a root that cannot pack would leave the
 * others waiting for data that never comes. Every rank asks of its own types, so all ranks of
 * a program that passes an uncommitted type on every rank (as MPICH does) return the error at
 * once. A zero-count PMPI_Pack checks the type (committed, valid) and reports on `comm`. */
static int packable(MPI_Comm comm, int f, MPI_Datatype t, size_t count, size_t bytes) {
    if (!count) return MPI_SUCCESS;
    if (count > INT_MAX || bytes > INT_MAX)
        return report(comm, f, MPI_ERR_COUNT, "%zu bytes of a derived datatype (minidc packs at "
                      "most 2 GiB per buffer)", bytes);
    char none[1] = {0};
    int pos = 0, rc = PMPI_Pack(none, 0, t, none, 0, &pos, comm);
    if (rc != MPI_SUCCESS)
        return report(comm, f, rc, "the derived datatype cannot be packed (not committed?)");
    return MPI_SUCCESS;
}

/* The element at index `i` of a buffer of type `t`. */
static void *elem(const void *buf, MPI_Datatype t, long long i) {
    return (char *)buf + (MPI_Aint)i * type_extent(t);
}

/* Sizes that differ between a rank's send and receive sides: the program's error (the type
 * signatures must match). */
static int size_mismatch(MPI_Comm comm, int f, size_t sent, size_t block) {
    return report(comm, f, MPI_ERR_TRUNCATE, "this rank sends %zu bytes but receives blocks of %zu "
                  "(send and receive type signatures must match)", sent, block);
}

/* Scratch for a call: the send side packed (when spack: `scount` elements of `stype` at `sbuf`,
 * `sbytes` bytes) and room for the receive side (when rpack: `rcount` elements of `rtype`,
 * `rbytes` bytes, unpacked after the call, so checked now). Returns MPI_SUCCESS, or the error
 * already reported, with nothing left allocated. */
static int stage(MPI_Comm comm, int f, int spack, const void *sbuf, size_t scount, MPI_Datatype stype,
                 size_t sbytes, char **sp, int rpack, size_t rcount, MPI_Datatype rtype,
                 size_t rbytes, char **rp) {
    int rc = MPI_SUCCESS;
    *sp = *rp = NULL;
    if ((spack && ((rc = packable(comm, f, stype, scount, sbytes)) ||
                   !(*sp = scratch(comm, f, sbytes, &rc)) ||
                   (rc = pack(comm, f, sbuf, scount, stype, *sp, sbytes, 0)))) ||
        (rpack && ((rc = packable(comm, f, rtype, rcount, rbytes)) ||
                   !(*rp = scratch(comm, f, rbytes, &rc))))) {
        free(*sp);
        free(*rp);
        *sp = *rp = NULL;
    }
    return rc;
}

/* Ends a staged call: reports a minidc failure, or unpacks the receive scratch (`rcount`
 * elements of `rtype` into recvbuf); frees the scratch. */
static int unstage(MPI_Comm comm, int f, mdc_status st, void *recvbuf, size_t rcount,
                   MPI_Datatype rtype, char *sp, char *rp, size_t rbytes) {
    int rc = st == MDC_OK ? MPI_SUCCESS : failed(comm, f, st);
    if (rc == MPI_SUCCESS && rp) rc = pack(comm, f, recvbuf, rcount, rtype, rp, rbytes, 1);
    free(sp);
    free(rp);
    return rc;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    const int f = F_BCAST;
    mdc_group *g;
    int rc;
    if (not_ours(comm, f)) return PMPI_Bcast(buf, count, type, root, comm);
    if (count < 0) return negative(comm, f, "count", count);
    if ((rc = bad_root(comm, f, root)) || (rc = null_type(comm, f, "datatype", type, count))) return rc;
    if (!(g = group_of(comm, f))) return PMPI_Bcast(buf, count, type, root, comm);
    size_t b = (size_t)count * type_size(type);
    int packed = plain_size(type) == 0, at_root = root == mdc_group_rank(g);
    /* A derived type: the root packs its buffer, the others receive into scratch. */
    char *sp, *rp;
    if ((rc = stage(comm, f, packed && at_root, buf, (size_t)count, type, b, &sp, packed && !at_root,
                    (size_t)count, type, b, &rp)))
        return rc;
    note_used(f, b, g, NULL);
    mdc_status st;
    SERVE(st, mdc_bcast(sp ? sp : rp ? rp : buf, b, MDC_U8, root, g));
    return unstage(comm, f, st, buf, (size_t)count, type, sp, rp, b);
}

int MPI_Allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm) {
    const int f = F_ALLGATHER;
    int inplace = sendbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
    mdc_group *g;
    if (not_ours(comm, f)) return PMPI_Allgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
    if (!inplace && scount < 0) return negative(comm, f, "sendcount", scount);
    if (rcount < 0) return negative(comm, f, "recvcount", rcount);
    if (aliased(comm, f, sendbuf, recvbuf, rcount)) return MPI_ERR_BUFFER;
    if ((!inplace && (rc = null_type(comm, f, "sendtype", stype, scount))) ||
        (rc = null_type(comm, f, "recvtype", rtype, rcount)))
        return rc;
    if (!(g = group_of(comm, f)))
        return PMPI_Allgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
    int n = mdc_group_size(g), me = mdc_group_rank(g), rplain = plain_size(rtype) > 0;
    size_t b = (size_t)rcount * type_size(rtype), all = b * (size_t)n;
    if (!inplace && (size_t)scount * type_size(stype) != b)
        return size_mismatch(comm, f, (size_t)scount * type_size(stype), b);
    /* The own block: sent as is (plain), packed, or (in place, plain) left where it is. */
    const void *own = inplace ? elem(recvbuf, rtype, (long long)me * rcount) : sendbuf;
    MPI_Datatype otype = inplace ? rtype : stype;
    int opack = inplace ? !rplain : plain_size(stype) == 0;
    char *sp, *rp;
    if ((rc = stage(comm, f, opack, own, (size_t)(inplace ? rcount : scount), otype, b, &sp, !rplain,
                    (size_t)rcount * (size_t)n, rtype, all, &rp)))
        return rc;
    note_used(f, all, g, NULL);
    mdc_status st;
    SERVE(st, mdc_allgather(sp ? sp : inplace ? MDC_IN_PLACE : sendbuf, rp ? rp : recvbuf, b, MDC_U8, g));
    return unstage(comm, f, st, recvbuf, (size_t)rcount * (size_t)n, rtype, sp, rp, all);
}

/* Byte offsets of the blocks of a v-collective (counts[i] elements at element displacement
 * displs[i]) for minidc: in place in the caller's buffer for a plain type (from the lowest
 * block, returned as the base), else one after another in scratch (base NULL: the caller
 * allocates `*total` bytes). len/off get n entries each. */
static char *v_layout(void *buf, MPI_Datatype t, int plain, const int counts[], const int displs[],
                      int n, size_t *len, size_t *off, size_t *total) {
    size_t s = type_size(t);
    long long low = 0;
    for (int i = 0; plain && i < n; i++)
        if (displs[i] < low) low = displs[i];
    *total = 0;
    for (int i = 0; i < n; i++) {
        len[i] = (size_t)counts[i] * s;
        off[i] = plain ? (size_t)(displs[i] - low) * s : *total;
        *total += len[i];
    }
    return plain ? (char *)buf + low * (long long)s : NULL;
}

/* packable() for the blocks of a v-collective (each block is one pack call). */
static int v_packable(MPI_Comm comm, int f, MPI_Datatype t, const int counts[], int n, const size_t *len) {
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n && !rc; i++) rc = packable(comm, f, t, (size_t)counts[i], len[i]);
    return rc;
}

/* Packs (or unpacks) the blocks of a v-collective between the caller's buffer and scratch. */
static int v_pack(MPI_Comm comm, int f, void *buf, MPI_Datatype t, const int counts[],
                  const int displs[], int n, char *pk, const size_t *len, const size_t *off, int unpack) {
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n && !rc; i++)
        rc = pack(comm, f, elem(buf, t, displs[i]), (size_t)counts[i], t, pk + off[i], len[i], unpack);
    return rc;
}

int MPI_Allgatherv(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
    const int f = F_ALLGATHERV;
    int size = 0, inplace = sendbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
    if (not_ours(comm, f)) return PMPI_Allgatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, comm);
    PMPI_Comm_size(comm, &size);
    if (!inplace && scount < 0) return negative(comm, f, "sendcount", scount);
    long long rsum = 0;
    for (int i = 0; i < size; i++) {
        if (rcounts[i] < 0) return negative(comm, f, "a recvcounts entry", rcounts[i]);
        rsum += rcounts[i];
    }
    if ((!inplace && (rc = null_type(comm, f, "sendtype", stype, scount))) ||
        (rc = null_type(comm, f, "recvtype", rtype, rsum)))
        return rc;
    mdc_group *g = group_of(comm, f);
    if (!g) return PMPI_Allgatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, comm);
    int n = mdc_group_size(g), me = mdc_group_rank(g), rplain = plain_size(rtype) > 0;
    size_t *c = malloc(2 * (size_t)n * sizeof *c), total = 0;
    if (!c) return report(comm, f, MPI_ERR_NO_MEM, "no memory for %d counts", n);
    char *base = v_layout(recvbuf, rtype, rplain, rcounts, displs, n, c, c + n, &total);
    size_t mine = c[me];
    if (!inplace && (size_t)scount * type_size(stype) != mine) {
        free(c);
        return size_mismatch(comm, f, (size_t)scount * type_size(stype), mine);
    }
    const void *own = inplace ? elem(recvbuf, rtype, displs[me]) : sendbuf;
    MPI_Datatype otype = inplace ? rtype : stype;
    int opack = inplace ? !rplain : plain_size(stype) == 0;
    char *sp, *rp;
    /* The receive side unpacks block by block: checked per block here (stage's count 0). */
    if ((!rplain && (rc = v_packable(comm, f, rtype, rcounts, n, c))) ||
        (rc = stage(comm, f, opack, own, (size_t)(inplace ? rcounts[me] : scount), otype, mine, &sp,
                    !rplain, 0, rtype, total, &rp))) {
        free(c);
        return rc;
    }
    note_used(f, total, g, NULL);
    mdc_status st;
    SERVE(st, mdc_allgatherv(sp ? sp : inplace ? MDC_IN_PLACE : sendbuf, rp ? rp : base, c, c + n,
                             MDC_U8, g));
    rc = st == MDC_OK ? MPI_SUCCESS : failed(comm, f, st);
    if (rc == MPI_SUCCESS && rp) rc = v_pack(comm, f, recvbuf, rtype, rcounts, displs, n, rp, c, c + n, 1);
    free(c);
    free(sp);
    free(rp);
    return rc;
}

/* Rooted: the root's side (recvbuf of gather, sendbuf of scatter) is significant only at the
 * root, so only the root reads it; every rank knows the block size from its own side. */
int MPI_Gather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm) {
    const int f = F_GATHER;
    mdc_group *g;
    int me = 0, rc = MPI_SUCCESS;
    if (not_ours(comm, f)) return PMPI_Gather(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    if ((rc = bad_root(comm, f, root))) return rc;
    PMPI_Comm_rank(comm, &me);
    int at_root = me == root, inplace = sendbuf == MPI_IN_PLACE;
    if (!inplace && scount < 0) return negative(comm, f, "sendcount", scount);
    if (at_root && rcount < 0) return negative(comm, f, "recvcount", rcount);
    if ((!inplace && (rc = null_type(comm, f, "sendtype", stype, scount))) ||
        (at_root && (rc = null_type(comm, f, "recvtype", rtype, rcount))))
        return rc;
    if (!(g = group_of(comm, f)))
        return PMPI_Gather(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    int n = mdc_group_size(g), rplain = !at_root || plain_size(rtype) > 0;
    size_t sb = inplace ? 0 : (size_t)scount * type_size(stype);
    size_t b = at_root ? (size_t)rcount * type_size(rtype) : sb, all = b * (size_t)n;
    if (at_root && !inplace && sb != b) return size_mismatch(comm, f, sb, b);
    const void *own = inplace ? elem(recvbuf, rtype, (long long)root * rcount) : sendbuf;
    int opack = inplace ? !rplain : plain_size(stype) == 0;
    char *sp, *rp;
    if ((rc = stage(comm, f, opack, own, (size_t)(inplace ? rcount : scount), inplace ? rtype : stype,
                    b, &sp, !rplain, (size_t)rcount * (size_t)n, rtype, all, &rp)))
        return rc;
    note_used(f, all, g, NULL);
    mdc_status st;
    SERVE(st, mdc_gather(sp ? sp : inplace ? MDC_IN_PLACE : sendbuf, rp ? rp : recvbuf, b, MDC_U8, root, g));
    return unstage(comm, f, st, recvbuf, (size_t)rcount * (size_t)n, rtype, sp, rp, all);
}

int MPI_Scatter(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm) {
    const int f = F_SCATTER;
    mdc_group *g;
    int me = 0, rc = MPI_SUCCESS;
    if (not_ours(comm, f)) return PMPI_Scatter(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    if ((rc = bad_root(comm, f, root))) return rc;
    PMPI_Comm_rank(comm, &me);
    int at_root = me == root, inplace = at_root && recvbuf == MPI_IN_PLACE;
    if (!inplace && rcount < 0) return negative(comm, f, "recvcount", rcount);
    if (at_root && scount < 0) return negative(comm, f, "sendcount", scount);
    if ((at_root && (rc = null_type(comm, f, "sendtype", stype, scount))) ||
        (!inplace && (rc = null_type(comm, f, "recvtype", rtype, rcount))))
        return rc;
    if (!(g = group_of(comm, f)))
        return PMPI_Scatter(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    int n = mdc_group_size(g);
    size_t rb = inplace ? 0 : (size_t)rcount * type_size(rtype);
    size_t b = at_root ? (size_t)scount * type_size(stype) : rb, all = b * (size_t)n;
    if (at_root && !inplace && rb != b) return size_mismatch(comm, f, b, rb);
    int spack = at_root && plain_size(stype) == 0, rpack = !inplace && plain_size(rtype) == 0;
    char *sp, *rp;
    if ((rc = stage(comm, f, spack, sendbuf, (size_t)scount * (size_t)n, stype, all, &sp, rpack,
                    (size_t)rcount, rtype, b, &rp)))
        return rc;
    note_used(f, all, g, NULL);
    /* minidc's in place for scatter is recvbuf == MDC_IN_PLACE at the root (MPI's meaning). */
    mdc_status st;
    SERVE(st, mdc_scatter(sp ? sp : sendbuf, inplace ? (void *)MDC_IN_PLACE : rp ? rp : recvbuf, b,
                          MDC_U8, root, g));
    return unstage(comm, f, st, recvbuf, (size_t)rcount, rtype, sp, rp, b);
}

int MPI_Alltoall(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm) {
    const int f = F_ALLTOALL;
    int inplace = sendbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
    mdc_group *g;
    if (not_ours(comm, f)) return PMPI_Alltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
    if (!inplace && scount < 0) return negative(comm, f, "sendcount", scount);
    if (rcount < 0) return negative(comm, f, "recvcount", rcount);
    if (aliased(comm, f, sendbuf, recvbuf, rcount)) return MPI_ERR_BUFFER;
    if ((!inplace && (rc = null_type(comm, f, "sendtype", stype, scount))) ||
        (rc = null_type(comm, f, "recvtype", rtype, rcount)))
        return rc;
    if (!(g = group_of(comm, f)))
        return PMPI_Alltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
    int n = mdc_group_size(g), rplain = plain_size(rtype) > 0;
    size_t b = (size_t)rcount * type_size(rtype), all = b * (size_t)n;
    if (!inplace && (size_t)scount * type_size(stype) != b)
        return size_mismatch(comm, f, (size_t)scount * type_size(stype), b);
    /* In place with a derived type: the whole buffer is packed as the send side. */
    int spack = inplace ? !rplain : plain_size(stype) == 0;
    char *sp, *rp;
    if ((rc = stage(comm, f, spack, inplace ? recvbuf : sendbuf,
                    (size_t)(inplace ? rcount : scount) * (size_t)n, inplace ? rtype : stype, all, &sp,
                    !rplain, (size_t)rcount * (size_t)n, rtype, all, &rp)))
        return rc;
    note_used(f, all, g, NULL);
    mdc_status st;
    SERVE(st, mdc_alltoall(sp ? sp : inplace ? MDC_IN_PLACE : sendbuf, rp ? rp : recvbuf, b, MDC_U8, g));
    return unstage(comm, f, st, recvbuf, (size_t)rcount * (size_t)n, rtype, sp, rp, all);
}

int MPI_Alltoallv(const void *sendbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                  void *recvbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                  MPI_Comm comm) {
    const int f = F_ALLTOALLV;
    int inplace = sendbuf == MPI_IN_PLACE, size = 0, rc = MPI_SUCCESS;
    if (not_ours(comm, f))
        return PMPI_Alltoallv(sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls, rtype, comm);
    PMPI_Comm_size(comm, &size);
    long long ssum = 0, rsum = 0;
    for (int i = 0; i < size; i++) {
        if (rcounts[i] < 0) return negative(comm, f, "a recvcounts entry", rcounts[i]);
        if (!inplace && scounts[i] < 0) return negative(comm, f, "a sendcounts entry", scounts[i]);
        rsum += rcounts[i];
        ssum += inplace ? 0 : scounts[i];
    }
    if ((!inplace && (rc = null_type(comm, f, "sendtype", stype, ssum))) ||
        (rc = null_type(comm, f, "recvtype", rtype, rsum)))
        return rc;
    mdc_group *g = group_of(comm, f);
    if (!g) return PMPI_Alltoallv(sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls, rtype, comm);
    int n = mdc_group_size(g), rplain = plain_size(rtype) > 0;
    /* In place, the data to send is in recvbuf, laid out by the receive arguments. */
    const void *sbuf = inplace ? recvbuf : sendbuf;
    const int *sc = inplace ? rcounts : scounts, *sd = inplace ? rdispls : sdispls;
    MPI_Datatype st_ = inplace ? rtype : stype;
    int splain = plain_size(st_) > 0, minidc_inplace = inplace && rplain;
    size_t *c = malloc(4 * (size_t)n * sizeof *c), stotal = 0, rtotal = 0;
    if (!c) return report(comm, f, MPI_ERR_NO_MEM, "no memory for %d counts", n);
    char *sbase = v_layout((void *)sbuf, st_, splain, sc, sd, n, c, c + n, &stotal);
    char *rbase = v_layout(recvbuf, rtype, rplain, rcounts, rdispls, n, c + 2 * n, c + 3 * n, &rtotal);
    char *sp = NULL, *rp = NULL;
    if ((!splain && ((rc = v_packable(comm, f, st_, sc, n, c)) || !(sp = scratch(comm, f, stotal, &rc)) ||
                     (rc = v_pack(comm, f, (void *)sbuf, st_, sc, sd, n, sp, c, c + n, 0)))) ||
        (!rplain && ((rc = v_packable(comm, f, rtype, rcounts, n, c + 2 * n)) ||
                     !(rp = scratch(comm, f, rtotal, &rc))))) {
        free(sp);
        free(rp);
        free(c);
        return rc;
    }
    note_used(f, rtotal, g, NULL);
    mdc_status st;
    SERVE(st, mdc_alltoallv(minidc_inplace ? MDC_IN_PLACE : sp ? sp : sbase, c, c + n,
                            rp ? rp : rbase, c + 2 * n, c + 3 * n, MDC_U8, g));
    rc = st == MDC_OK ? MPI_SUCCESS : failed(comm, f, st);
    if (rc == MPI_SUCCESS && rp)
        rc = v_pack(comm, f, recvbuf, rtype, rcounts, rdispls, n, rp, c + 2 * n, c + 3 * n, 1);
    free(c);
    free(sp);
    free(rp);
    return rc;
}

int MPI_Barrier(MPI_Comm comm) {
    const int f = F_BARRIER;
    mdc_group *g = group_of(comm, f);
    if (!g) return PMPI_Barrier(comm);
    note_used(f, 0, g, NULL);
    RUN(comm, f, mdc_barrier(g));
}

/* Frees every cached transport while MPI still works: deleting the attribute runs
 * delete_fn, which unlinks the state (communicators the program freed are gone already). */
int MPI_Finalize(void) {
    while (live) {
        cached *c = live;
        PMPI_Comm_delete_attr(c->user, keyval);
        if (live == c) cached_free(c); /* the attribute was not there: free it anyway */
    }
    if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&keyval);
    return PMPI_Finalize();
}
