/* What the interposer says: a verbose note that minidc ran a call or why it went to MPICH, and
 * the caller's errors, reported as MPICH reports its own (an error code on the communicator's
 * handler) with a line that names the function, the rank and what is wrong; and the argument
 * checks that raise those errors before any message moves. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const fname[F_COUNT] = {"MPI_Allreduce",      "MPI_Reduce_scatter_block",
                                           "MPI_Reduce_scatter", "MPI_Allgather",
                                           "MPI_Allgatherv",     "MPI_Bcast",
                                           "MPI_Reduce",         "MPI_Gather",
                                           "MPI_Scatter",        "MPI_Alltoall",
                                           "MPI_Alltoallv",      "MPI_Barrier"};
static const mdc_coll fcoll[F_COUNT] = {MDC_COLL_ALLREDUCE, MDC_COLL_REDUCE_SCATTER, MDC_COLL_REDUCE_SCATTER,
                                        MDC_COLL_ALLGATHER, MDC_COLL_ALLGATHER,      MDC_COLL_BCAST,
                                        MDC_COLL_REDUCE,    MDC_COLL_GATHER,         MDC_COLL_SCATTER,
                                        MDC_COLL_ALLTOALL,  MDC_COLL_ALLTOALLV,      MDC_COLL_BARRIER};
static unsigned char said_used[F_COUNT], said_fallback[F_COUNT];
static int verbose = -1;

/* MINIDC_VERBOSE=1: each function says once per process that it runs on minidc, and once why
 * it went to MPICH; 2: every call says so (which of a program's calls minidc ran). */
int ip_verbosity(void) {
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

void ip_note_used(int f, size_t bytes, const mdc_group *g, const ip_reduction_as *r) {
    int v = ip_verbosity();
    if (!v || (v == 1 && said_used[f])) return;
    said_used[f] = 1;
    char how[MPI_MAX_OBJECT_NAME + 64] = "";
    if (r) {
        char name[MPI_MAX_OBJECT_NAME] = "?";
        int len = 0;
        PMPI_Type_get_name(r->type, name, &len);
        if (r->mult > 1)
            snprintf(how, sizeof how, ", %s %s as %d x %s", name, mdc_op_name(r->op), r->mult, mdc_dtype_name(r->dt));
        else snprintf(how, sizeof how, ", %s %s as %s", name, mdc_op_name(r->op), mdc_dtype_name(r->dt));
    }
    fprintf(stderr, "minidc interposer: rank %d: %s runs on minidc (%s, %zu bytes, %d ranks%s)\n", world_rank(),
            fname[f], mdc_coll_choose(fcoll[f], bytes, g), bytes, mdc_group_size(g), how);
}

int ip_fallback(int f, const char *fmt, ...) {
    int v = ip_verbosity();
    if (v == 2 || (v == 1 && !said_fallback[f])) {
        said_fallback[f] = 1;
        char why[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        fprintf(stderr, "minidc interposer: rank %d: %s falls through to MPICH: %s\n", world_rank(), fname[f], why);
    }
    return 0;
}

int ip_report(MPI_Comm comm, int f, int code, const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "minidc interposer: rank %d: %s: %s\n", world_rank(), fname[f], why);
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

int ip_failed(MPI_Comm comm, int f, mdc_status st) {
    return ip_report(comm, f, MPI_ERR_OTHER, "%s: %s", mdc_strerror(st), mdc_detail());
}

/* ---- argument checks ------------------------------------------------------------------- */

/* A negative count is the caller's error. MPICH 4.0.2 does not always report it (a negative
 * MPI_Allreduce count trips an assertion inside its memcpy), so it is reported here, on the
 * communicator's error handler, as MPI_ERR_COUNT. */
int ip_check_count(ip_args *a, const char *what, int count) {
    if (!a->rc && count < 0) a->rc = ip_report(a->comm, a->f, MPI_ERR_COUNT, "%s is %d, a negative count", what, count);
    return a->rc;
}

int ip_check_counts(ip_args *a, const char *what, const int counts[], int n, long long *sum) {
    long long s = 0;
    for (int i = 0; i < n && !ip_check_count(a, what, counts[i]); i++) s += counts[i];
    if (sum) *sum = s;
    return a->rc;
}

/* MPICH's own check of a root outside the communicator, with its code. */
int ip_check_root(ip_args *a, int root) {
    if (a->rc) return a->rc;
    int size = 0;
    PMPI_Comm_size(a->comm, &size);
    if (root < 0 || root >= size)
        a->rc = ip_report(a->comm, a->f, MPI_ERR_ROOT, "root %d is not a rank of the %d-rank communicator", root, size);
    return a->rc;
}

/* MPI_DATATYPE_NULL with data to move: asking MPICH its size would abort through
 * MPI_COMM_WORLD's handler, whatever the communicator's. With no elements it moves nothing and
 * is let be (MPICH 4.0.2 asserts on it in MPI_Bcast, so no program relies on it). */
int ip_check_type(ip_args *a, const char *which, MPI_Datatype t, long long count) {
    if (!a->rc && t == MPI_DATATYPE_NULL && count > 0)
        a->rc = ip_report(a->comm, a->f, MPI_ERR_TYPE, "%s is MPI_DATATYPE_NULL", which);
    return a->rc;
}

/* Aliased buffers with data to move: MPI_ERR_BUFFER, as MPICH reports it ("buffers must not be
 * aliased"), before any message. */
int ip_check_alias(ip_args *a, const void *sendbuf, const void *recvbuf, long long count) {
    if (!a->rc && count > 0 && sendbuf != MPI_IN_PLACE && sendbuf == recvbuf && sendbuf)
        a->rc = ip_report(a->comm, a->f, MPI_ERR_BUFFER,
                          "the send and receive buffers are the same (%p); use MPI_IN_PLACE", recvbuf);
    return a->rc;
}
