/* The MPI collectives the interposer takes over (internal.h says how). Each entry point sends
 * an intercommunicator to MPICH before it reads an argument that means something else there
 * (count arrays, roots), then runs its argument checks (reports.c), so the caller's error is
 * reported before any message moves. A call minidc cannot run exactly falls through to the
 * PMPI_ function with the same arguments. */
#include <stdlib.h>

#include "internal.h"

/* The send buffer as minidc spells in place. */
static const void *minidc_send(const void *sendbuf) { return sendbuf == MPI_IN_PLACE ? MDC_IN_PLACE : sendbuf; }

static int comm_size(MPI_Comm comm) {
    int n = 0;
    PMPI_Comm_size(comm, &n);
    return n;
}

static int comm_rank(MPI_Comm comm) {
    int r = 0;
    PMPI_Comm_rank(comm, &r);
    return r;
}

/* ---- reductions ---------------------------------------------------------------------- */

/* The group of a reduction minidc can run exactly, with what it runs as in *r; NULL (after a
 * note) sends the call to MPICH. The type and op are judged first, so the note names them. */
static mdc_group *reducing(int f, MPI_Datatype type, MPI_Op op, MPI_Comm comm, ip_reduction_as *r) {
    r->type = type;
    if (!ip_reduction_ok(f, type, op, &r->dt, &r->op, &r->mult)) return NULL;
    return ip_group_of(comm, f);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    const int f = F_ALLREDUCE;
    ip_args a = {comm, f, MPI_SUCCESS};
    ip_reduction_as r;
    mdc_group *g;
    ip_check_count(&a, "count", count);
    if (ip_check_alias(&a, sendbuf, recvbuf, count)) return a.rc;
    if (!(g = reducing(f, type, op, comm, &r))) return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
    size_t n = (size_t)count * (size_t)r.mult;
    ip_note_used(f, n * mdc_dtype_size(r.dt), g, &r);
    IP_RUN(comm, f, mdc_allreduce(minidc_send(sendbuf), recvbuf, n, r.dt, r.op, g));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    const int f = F_REDUCE;
    ip_args a = {comm, f, MPI_SUCCESS};
    ip_reduction_as r;
    mdc_group *g;
    if (ip_not_ours(comm, f)) return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    ip_check_count(&a, "count", count);
    if (ip_check_root(&a, root)) return a.rc;
    if (!(g = reducing(f, type, op, comm, &r))) return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    size_t n = (size_t)count * (size_t)r.mult;
    if (comm_rank(comm) == root && ip_check_alias(&a, sendbuf, recvbuf, count)) {
        /* the root alone can see it: the others send their contributions anyway (as under
         * MPICH, which leaves them to the next reduce); take them into scratch, then fail */
        char *scratch = calloc(2 * n * mdc_dtype_size(r.dt) + 1, 1);
        mdc_status st = MDC_OK;
        if (scratch) IP_SERVE(st, mdc_reduce(scratch, scratch + n * mdc_dtype_size(r.dt), n, r.dt, r.op, root, g));
        (void)st;
        free(scratch);
        return a.rc;
    }
    ip_note_used(f, n * mdc_dtype_size(r.dt), g, &r);
    IP_RUN(comm, f, mdc_reduce(minidc_send(sendbuf), recvbuf, n, r.dt, r.op, root, g));
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
    const int f = F_RSB;
    ip_args a = {comm, f, MPI_SUCCESS};
    ip_reduction_as r;
    mdc_group *g;
    ip_check_count(&a, "recvcount", recvcount);
    if (ip_check_alias(&a, sendbuf, recvbuf, recvcount)) return a.rc;
    if (!(g = reducing(f, type, op, comm, &r)))
        return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
    size_t n = (size_t)recvcount * (size_t)r.mult;
    ip_note_used(f, n * (size_t)mdc_group_size(g) * mdc_dtype_size(r.dt), g, &r);
    IP_RUN(comm, f, mdc_reduce_scatter(minidc_send(sendbuf), recvbuf, n, r.dt, r.op, g));
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
    const int f = F_RS;
    ip_args a = {comm, f, MPI_SUCCESS};
    ip_reduction_as r;
    mdc_group *g;
    if (ip_not_ours(comm, f)) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
    long long rs_sum = 0;
    ip_check_counts(&a, "a recvcounts entry", recvcounts, comm_size(comm), &rs_sum);
    if (ip_check_alias(&a, sendbuf, recvbuf, rs_sum)) return a.rc;
    if (!(g = reducing(f, type, op, comm, &r)))
        return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
    int n = mdc_group_size(g);
    size_t *counts = malloc((size_t)n * sizeof *counts), total = 0;
    if (!counts) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
    for (int i = 0; i < n; i++) {
        counts[i] = (size_t)recvcounts[i] * (size_t)r.mult;
        total += counts[i];
    }
    ip_note_used(f, total * mdc_dtype_size(r.dt), g, &r);
    mdc_status st;
    IP_SERVE(st, mdc_reduce_scatterv(minidc_send(sendbuf), recvbuf, counts, r.dt, r.op, g));
    free(counts);
    return st == MDC_OK ? MPI_SUCCESS : ip_failed(comm, f, st);
}

/* ---- data movement: any datatype travels as bytes (datatypes.c) ------------------------
 * Every rank runs the call on minidc whatever types it passes (only an intercommunicator, the
 * same on every rank, goes to MPICH): a root may use a derived type where the others use
 * predefined ones, and sending it alone to MPICH would hang the others. */

/* The start of a call whose blocks, sent and received, are all `rcount` elements of `rtype`
 * (MPI_Allgather, MPI_Alltoall; the send side is not read in place): the checks, the group
 * (*g; NULL: the call goes to MPICH), the block's bytes (*b) and the send side's size against
 * it. Returns MPI_SUCCESS or the error, reported. */
static int equal_blocks(int f, const void *sendbuf, int scount, MPI_Datatype stype, const void *recvbuf, int rcount,
                        MPI_Datatype rtype, MPI_Comm comm, mdc_group **g, size_t *b) {
    ip_args a = {comm, f, MPI_SUCCESS};
    int inplace = sendbuf == MPI_IN_PLACE;
    *g = NULL;
    if (ip_not_ours(comm, f)) return MPI_SUCCESS;
    if (!inplace) ip_check_count(&a, "sendcount", scount);
    ip_check_count(&a, "recvcount", rcount);
    ip_check_alias(&a, sendbuf, recvbuf, rcount);
    if (!inplace) ip_check_type(&a, "sendtype", stype, scount);
    if (ip_check_type(&a, "recvtype", rtype, rcount)) return a.rc;
    if (!(*g = ip_group_of(comm, f))) return MPI_SUCCESS;
    *b = (size_t)rcount * ip_type_size(rtype);
    if (inplace) return MPI_SUCCESS; /* stype is not read: it may be anything */
    size_t sent = (size_t)scount * ip_type_size(stype);
    return sent == *b ? MPI_SUCCESS : ip_size_mismatch(comm, f, sent, *b);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    const int f = F_BCAST;
    ip_args a = {comm, f, MPI_SUCCESS};
    mdc_group *g;
    int rc;
    if (ip_not_ours(comm, f)) return PMPI_Bcast(buf, count, type, root, comm);
    ip_check_count(&a, "count", count);
    ip_check_root(&a, root);
    if (ip_check_type(&a, "datatype", type, count)) return a.rc;
    if (!(g = ip_group_of(comm, f))) return PMPI_Bcast(buf, count, type, root, comm);
    size_t b = (size_t)count * ip_type_size(type);
    int packed = ip_plain_size(type) == 0, at_root = root == mdc_group_rank(g);
    /* A derived type: the root packs its buffer, the others receive into scratch. */
    char *sp, *rp;
    if ((rc = ip_stage(comm, f, packed && at_root, buf, (size_t)count, type, b, &sp, packed && !at_root, (size_t)count,
                       type, b, &rp)))
        return rc;
    ip_note_used(f, b, g, NULL);
    mdc_status st;
    IP_SERVE(st, mdc_bcast(sp ? sp : rp ? rp : buf, b, MDC_U8, root, g));
    return ip_unstage(comm, f, st, buf, (size_t)count, type, sp, rp, b);
}

int MPI_Allgather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
    const int f = F_ALLGATHER;
    mdc_group *g;
    size_t b;
    int rc = equal_blocks(f, sendbuf, scount, stype, recvbuf, rcount, rtype, comm, &g, &b);
    if (rc || !g) return rc ? rc : PMPI_Allgather(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
    int inplace = sendbuf == MPI_IN_PLACE, n = mdc_group_size(g), me = mdc_group_rank(g);
    int rplain = ip_plain_size(rtype) > 0;
    size_t all = b * (size_t)n;
    /* The own block: sent as is (plain), packed, or (in place, plain) left where it is. */
    const void *own = inplace ? ip_elem(recvbuf, rtype, (long long)me * rcount) : sendbuf;
    MPI_Datatype otype = inplace ? rtype : stype;
    int opack = inplace ? !rplain : ip_plain_size(stype) == 0;
    char *sp, *rp;
    if ((rc = ip_stage(comm, f, opack, own, (size_t)(inplace ? rcount : scount), otype, b, &sp, !rplain,
                       (size_t)rcount * (size_t)n, rtype, all, &rp)))
        return rc;
    ip_note_used(f, all, g, NULL);
    mdc_status st;
    IP_SERVE(st, mdc_allgather(sp ? sp : minidc_send(sendbuf), rp ? rp : recvbuf, b, MDC_U8, g));
    return ip_unstage(comm, f, st, recvbuf, (size_t)rcount * (size_t)n, rtype, sp, rp, all);
}

int MPI_Allgatherv(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, const int rcounts[],
                   const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
    const int f = F_ALLGATHERV;
    ip_args a = {comm, f, MPI_SUCCESS};
    int inplace = sendbuf == MPI_IN_PLACE, rc;
    long long rsum = 0;
    if (ip_not_ours(comm, f)) return PMPI_Allgatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, comm);
    int size = comm_size(comm);
    if (!inplace) ip_check_count(&a, "sendcount", scount);
    ip_check_counts(&a, "a recvcounts entry", rcounts, size, &rsum);
    ip_check_alias(&a, sendbuf, recvbuf, rsum);
    if (!inplace) ip_check_type(&a, "sendtype", stype, scount);
    if (ip_check_type(&a, "recvtype", rtype, rsum)) return a.rc;
    mdc_group *g = ip_group_of(comm, f);
    if (!g) return PMPI_Allgatherv(sendbuf, scount, stype, recvbuf, rcounts, displs, rtype, comm);
    int n = mdc_group_size(g), me = mdc_group_rank(g), rplain = ip_plain_size(rtype) > 0;
    size_t *c = malloc(2 * (size_t)n * sizeof *c), total = 0;
    if (!c) return ip_report(comm, f, MPI_ERR_NO_MEM, "no memory for %d counts", n);
    char *base = ip_v_layout(recvbuf, rtype, rplain, rcounts, displs, n, c, c + n, &total);
    size_t mine = c[me];
    if (!inplace && (size_t)scount * ip_type_size(stype) != mine) {
        free(c);
        return ip_size_mismatch(comm, f, (size_t)scount * ip_type_size(stype), mine);
    }
    const void *own = inplace ? ip_elem(recvbuf, rtype, displs[me]) : sendbuf;
    MPI_Datatype otype = inplace ? rtype : stype;
    int opack = inplace ? !rplain : ip_plain_size(stype) == 0;
    char *sp, *rp;
    /* The receive side unpacks block by block: checked per block here (stage's count 0). */
    if ((!rplain && (rc = ip_v_packable(comm, f, rtype, rcounts, n, c))) ||
        (rc = ip_stage(comm, f, opack, own, (size_t)(inplace ? rcounts[me] : scount), otype, mine, &sp, !rplain, 0,
                       rtype, total, &rp))) {
        free(c);
        return rc;
    }
    ip_note_used(f, total, g, NULL);
    mdc_status st;
    IP_SERVE(st, mdc_allgatherv(sp ? sp : minidc_send(sendbuf), rp ? rp : base, c, c + n, MDC_U8, g));
    rc = st == MDC_OK ? MPI_SUCCESS : ip_failed(comm, f, st);
    if (rc == MPI_SUCCESS && rp) rc = ip_v_pack(comm, f, recvbuf, rtype, rcounts, displs, n, rp, c, c + n, 1);
    free(c);
    free(sp);
    free(rp);
    return rc;
}

/* The root refused its own side of a gather (recvcount, recvtype, or blocks of another size
 * than it sends) with error rc: the other ranks, which cannot know, send their blocks anyway,
 * as MPICH's do. The root takes them into a scratch buffer, by the block size its own send side
 * gives, so that no message is left over for the next gather; then returns rc. With MPI_IN_PLACE
 * at the root there is no such size, and the blocks stay unreceived (as under MPICH). */
static int gather_drain(const void *sendbuf, int scount, MPI_Datatype stype, int root, MPI_Comm comm, int rc) {
    mdc_group *g = ip_group_of(comm, F_GATHER);
    int n = comm_size(comm);
    size_t sb = (size_t)scount * ip_type_size(stype);
    char *scratch = calloc(sb * (size_t)(n + 1) + 1, 1); /* the blocks, then the root's own */
    if (!scratch) return rc;
    if (g) {
        mdc_status st;
        IP_SERVE(st, mdc_gather(scratch + sb * (size_t)n, scratch, sb, MDC_U8, root, g));
        (void)st;
    } else {
        MPI_Errhandler h;
        PMPI_Comm_get_errhandler(comm, &h);
        PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        PMPI_Gather(sendbuf, scount, stype, scratch, (int)sb, MPI_BYTE, root, comm);
        PMPI_Comm_set_errhandler(comm, h);
        PMPI_Errhandler_free(&h);
    }
    free(scratch);
    return rc;
}

/* Rooted: the root's side (recvbuf of gather, sendbuf of scatter) is significant only at the
 * root, so only the root reads it; every rank knows the block size from its own side. */
int MPI_Gather(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype,
               int root, MPI_Comm comm) {
    const int f = F_GATHER;
    ip_args a = {comm, f, MPI_SUCCESS};
    mdc_group *g;
    int rc;
    if (ip_not_ours(comm, f)) return PMPI_Gather(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    if (ip_check_root(&a, root)) return a.rc;
    int at_root = comm_rank(comm) == root, inplace = sendbuf == MPI_IN_PLACE;
    if (!inplace) ip_check_count(&a, "sendcount", scount);
    if (!inplace) ip_check_type(&a, "sendtype", stype, scount);
    int drain = at_root && !inplace && !a.rc; /* the root's own block size is known */
    if (at_root) ip_check_count(&a, "recvcount", rcount);
    if (at_root) ip_check_type(&a, "recvtype", rtype, rcount);
    if (at_root) ip_check_alias(&a, sendbuf, recvbuf, rcount);
    if (a.rc) return drain ? gather_drain(sendbuf, scount, stype, root, comm, a.rc) : a.rc;
    if (!(g = ip_group_of(comm, f))) return PMPI_Gather(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    int n = mdc_group_size(g), rplain = !at_root || ip_plain_size(rtype) > 0;
    size_t sb = inplace ? 0 : (size_t)scount * ip_type_size(stype);
    size_t b = at_root ? (size_t)rcount * ip_type_size(rtype) : sb, all = b * (size_t)n;
    if (at_root && !inplace && sb != b)
        return gather_drain(sendbuf, scount, stype, root, comm, ip_size_mismatch(comm, f, sb, b));
    const void *own = inplace ? ip_elem(recvbuf, rtype, (long long)root * rcount) : sendbuf;
    int opack = inplace ? !rplain : ip_plain_size(stype) == 0;
    char *sp, *rp;
    if ((rc = ip_stage(comm, f, opack, own, (size_t)(inplace ? rcount : scount), inplace ? rtype : stype, b, &sp,
                       !rplain, (size_t)rcount * (size_t)n, rtype, all, &rp)))
        return rc;
    ip_note_used(f, all, g, NULL);
    mdc_status st;
    IP_SERVE(st, mdc_gather(sp ? sp : minidc_send(sendbuf), rp ? rp : recvbuf, b, MDC_U8, root, g));
    return ip_unstage(comm, f, st, recvbuf, (size_t)rcount * (size_t)n, rtype, sp, rp, all);
}

/* The root refused its own side of a scatter (sendcount, sendtype, or blocks of another size
 * than it receives) with error rc. The other ranks have entered the call and wait for their
 * blocks; nothing can tell them (MPICH leaves them waiting for ever), and a block of the root's
 * next scatter would complete their wait as if it were this one's: a wrong answer with no
 * error. So the job stops here, with the root's reason. */
static int scatter_refused(MPI_Comm comm, int rc) {
    int wr = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &wr);
    fprintf(stderr,
            "minidc interposer: rank %d: MPI_Scatter: the root refused the call after the other ranks "
            "entered it; they cannot be told, and would take the root's next blocks for this call's: stopping the "
            "job\n",
            wr);
    fflush(stderr);
    PMPI_Abort(comm, rc);
    return rc;
}

int MPI_Scatter(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype,
                int root, MPI_Comm comm) {
    const int f = F_SCATTER;
    ip_args a = {comm, f, MPI_SUCCESS};
    mdc_group *g;
    int rc;
    if (ip_not_ours(comm, f)) return PMPI_Scatter(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    if (ip_check_root(&a, root)) return a.rc;
    int at_root = comm_rank(comm) == root, inplace = at_root && recvbuf == MPI_IN_PLACE;
    if (!inplace) ip_check_count(&a, "recvcount", rcount);
    if (!inplace) ip_check_type(&a, "recvtype", rtype, rcount);
    int own_ok = !a.rc; /* the root's receive side is its own; its send side the others' */
    if (at_root) ip_check_count(&a, "sendcount", scount);
    if (at_root) ip_check_type(&a, "sendtype", stype, scount);
    if (a.rc) return at_root && own_ok ? scatter_refused(comm, a.rc) : a.rc;
    if (!(g = ip_group_of(comm, f))) return PMPI_Scatter(sendbuf, scount, stype, recvbuf, rcount, rtype, root, comm);
    int n = mdc_group_size(g);
    size_t rb = inplace ? 0 : (size_t)rcount * ip_type_size(rtype);
    size_t b = at_root ? (size_t)scount * ip_type_size(stype) : rb, all = b * (size_t)n;
    if (at_root && !inplace && rb != b) return scatter_refused(comm, ip_size_mismatch(comm, f, b, rb));
    int spack = at_root && ip_plain_size(stype) == 0, rpack = !inplace && ip_plain_size(rtype) == 0;
    /* The root's buffers aliased: MPI_ERR_BUFFER at the root, as MPICH says; the others still
     * get their blocks (the root's own goes to scratch), so none waits for one that never comes. */
    void *rbuf = recvbuf, *aside = NULL;
    if (at_root && ip_check_alias(&a, sendbuf, recvbuf, rcount)) {
        if (!(aside = malloc(b ? b : 1))) return scatter_refused(comm, a.rc);
        rbuf = aside, rpack = 0;
    }
    char *sp, *rp;
    if ((rc = ip_stage(comm, f, spack, sendbuf, (size_t)scount * (size_t)n, stype, all, &sp, rpack, (size_t)rcount,
                       rtype, b, &rp))) {
        free(aside);
        return rc;
    }
    ip_note_used(f, all, g, NULL);
    /* minidc's in place for scatter is recvbuf == MDC_IN_PLACE at the root (MPI's meaning). */
    mdc_status st;
    IP_SERVE(st, mdc_scatter(sp ? sp : sendbuf, inplace ? (void *)MDC_IN_PLACE : rp ? rp : rbuf, b, MDC_U8, root, g));
    rc = ip_unstage(comm, f, st, rbuf, (size_t)rcount, rtype, sp, rp, b);
    int aliased = aside != NULL;
    free(aside);
    return aliased && rc == MPI_SUCCESS ? a.rc : rc;
}

int MPI_Alltoall(const void *sendbuf, int scount, MPI_Datatype stype, void *recvbuf, int rcount, MPI_Datatype rtype,
                 MPI_Comm comm) {
    const int f = F_ALLTOALL;
    mdc_group *g;
    size_t b;
    int rc = equal_blocks(f, sendbuf, scount, stype, recvbuf, rcount, rtype, comm, &g, &b);
    if (rc || !g) return rc ? rc : PMPI_Alltoall(sendbuf, scount, stype, recvbuf, rcount, rtype, comm);
    int inplace = sendbuf == MPI_IN_PLACE, n = mdc_group_size(g), rplain = ip_plain_size(rtype) > 0;
    size_t all = b * (size_t)n;
    /* In place with a derived type: the whole buffer is packed as the send side. */
    int spack = inplace ? !rplain : ip_plain_size(stype) == 0;
    char *sp, *rp;
    if ((rc = ip_stage(comm, f, spack, inplace ? recvbuf : sendbuf, (size_t)(inplace ? rcount : scount) * (size_t)n,
                       inplace ? rtype : stype, all, &sp, !rplain, (size_t)rcount * (size_t)n, rtype, all, &rp)))
        return rc;
    ip_note_used(f, all, g, NULL);
    mdc_status st;
    IP_SERVE(st, mdc_alltoall(sp ? sp : minidc_send(sendbuf), rp ? rp : recvbuf, b, MDC_U8, g));
    return ip_unstage(comm, f, st, recvbuf, (size_t)rcount * (size_t)n, rtype, sp, rp, all);
}

int MPI_Alltoallv(const void *sendbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *recvbuf,
                  const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm) {
    const int f = F_ALLTOALLV;
    ip_args a = {comm, f, MPI_SUCCESS};
    int inplace = sendbuf == MPI_IN_PLACE, rc;
    if (ip_not_ours(comm, f))
        return PMPI_Alltoallv(sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls, rtype, comm);
    int size = comm_size(comm);
    long long ssum = 0, rsum = 0;
    /* Entry by entry, receive count first: the first negative one is the one reported. */
    for (int i = 0; i < size && !a.rc; i++) {
        ip_check_count(&a, "a recvcounts entry", rcounts[i]);
        if (!inplace) ip_check_count(&a, "a sendcounts entry", scounts[i]);
        rsum += rcounts[i];
        ssum += inplace ? 0 : scounts[i];
    }
    ip_check_alias(&a, sendbuf, recvbuf, rsum);
    if (!inplace) ip_check_type(&a, "sendtype", stype, ssum);
    if (ip_check_type(&a, "recvtype", rtype, rsum)) return a.rc;
    mdc_group *g = ip_group_of(comm, f);
    if (!g) return PMPI_Alltoallv(sendbuf, scounts, sdispls, stype, recvbuf, rcounts, rdispls, rtype, comm);
    int n = mdc_group_size(g), rplain = ip_plain_size(rtype) > 0;
    /* In place, the data to send is in recvbuf, laid out by the receive arguments. */
    const void *sbuf = inplace ? recvbuf : sendbuf;
    const int *sc = inplace ? rcounts : scounts, *sd = inplace ? rdispls : sdispls;
    MPI_Datatype st_ = inplace ? rtype : stype;
    int splain = ip_plain_size(st_) > 0, minidc_inplace = inplace && rplain;
    size_t *c = malloc(4 * (size_t)n * sizeof *c), stotal = 0, rtotal = 0;
    if (!c) return ip_report(comm, f, MPI_ERR_NO_MEM, "no memory for %d counts", n);
    char *sbase = ip_v_layout((void *)sbuf, st_, splain, sc, sd, n, c, c + n, &stotal);
    char *rbase = ip_v_layout(recvbuf, rtype, rplain, rcounts, rdispls, n, c + 2 * n, c + 3 * n, &rtotal);
    char *sp = NULL, *rp = NULL;
    if ((!splain && ((rc = ip_v_packable(comm, f, st_, sc, n, c)) || !(sp = ip_scratch(comm, f, stotal, &rc)) ||
                     (rc = ip_v_pack(comm, f, (void *)sbuf, st_, sc, sd, n, sp, c, c + n, 0)))) ||
        (!rplain &&
         ((rc = ip_v_packable(comm, f, rtype, rcounts, n, c + 2 * n)) || !(rp = ip_scratch(comm, f, rtotal, &rc))))) {
        free(sp);
        free(rp);
        free(c);
        return rc;
    }
    ip_note_used(f, rtotal, g, NULL);
    mdc_status st;
    IP_SERVE(st, mdc_alltoallv(minidc_inplace ? MDC_IN_PLACE
                               : sp           ? sp
                                              : sbase,
                               c, c + n, rp ? rp : rbase, c + 2 * n, c + 3 * n, MDC_U8, g));
    rc = st == MDC_OK ? MPI_SUCCESS : ip_failed(comm, f, st);
    if (rc == MPI_SUCCESS && rp)
        rc = ip_v_pack(comm, f, recvbuf, rtype, rcounts, rdispls, n, rp, c + 2 * n, c + 3 * n, 1);
    free(c);
    free(sp);
    free(rp);
    return rc;
}

int MPI_Barrier(MPI_Comm comm) {
    const int f = F_BARRIER;
    mdc_group *g = ip_group_of(comm, f);
    if (!g) return PMPI_Barrier(comm);
    ip_note_used(f, 0, g, NULL);
    IP_RUN(comm, f, mdc_barrier(g));
}
