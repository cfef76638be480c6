/* Calls the interposer must leave to MPICH or report at once, each followed by a valid call
 * that must still work; run by tests/interposer/interposer.sh with and without the library, and must
 * print the same "ok" lines both ways (at least 3 ranks; MPI_THREAD_MULTIPLE for the last).
 *
 * - Intercommunicators (a group of 1 and a group of p-1): MPI_Allgatherv and MPI_Alltoallv
 *   take count arrays of the remote group's size, MPI_Gather and MPI_Scatter take MPI_ROOT /
 *   MPI_PROC_NULL and leave the other side's counts insignificant (-1 here).
 * - Erroneous calls on a communicator that returns errors: a root that is no rank
 *   (MPI_ERR_ROOT), MPI_DATATYPE_NULL for data (MPI_ERR_TYPE), an uncommitted derived type
 *   passed by every rank (an error on every rank, no rank left waiting for the root's data),
 *   the same buffer as send and receive buffer (MPI_ERR_BUFFER).
 * - A thread that sets MPI_COMM_WORLD's error handler while another thread is inside a
 *   collective keeps it.
 * With --root-only (under the library only: MPICH leaves the blocks of the refused call to be
 * taken by the next gather): an MPI_Gather the root alone refuses (its recvtype
 * MPI_DATATYPE_NULL; blocks of another size than it sends), an error at the root, then a valid
 * gather of other values gives every rank's new value at the root; the same buffer as send
 * and receive buffer (MPI_ERR_BUFFER as MPICH says: on every rank of MPI_Reduce_scatter,
 * MPI_Allgatherv, MPI_Alltoallv, at the root of MPI_Reduce, MPI_Gather and MPI_Scatter, whose
 * other ranks still complete: the scatter's get their blocks), each followed by a valid call
 * that must be right (MPICH hangs on some). With --root-scatter: an
 * MPI_Scatter the root alone refuses (its sendtype MPI_DATATYPE_NULL) stops the job (the others
 * would take the root's next blocks for this call's; MPICH leaves them waiting for ever). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int me, np, failures;

static void check(int ok, const char *what) {
    if (ok) {
        if (me == 0) printf("ok: %s\n", what);
    } else {
        printf("FAILED on rank %d: %s\n", me, what);
        failures++;
    }
    fflush(stdout);
}

/* Every rank's flag, gathered without the collectives under test. */
static int all_true(int mine) {
    int all = mine;
    if (me == 0) {
        for (int r = 1; r < np; r++) {
            int v;
            PMPI_Recv(&v, 1, MPI_INT, r, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            all = all && v;
        }
        for (int r = 1; r < np; r++) PMPI_Send(&all, 1, MPI_INT, r, 78, MPI_COMM_WORLD);
    } else {
        PMPI_Send(&mine, 1, MPI_INT, 0, 77, MPI_COMM_WORLD);
        PMPI_Recv(&all, 1, MPI_INT, 0, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return all;
}

static void intercomm(void) {
    int low = me == 0, lr, rsize;
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, low, me, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? 1 : 0, 11, &inter);
    MPI_Comm_rank(inter, &lr);
    MPI_Comm_remote_size(inter, &rsize);
    int off = low ? 1 : 0, ok = 1, *cnt = malloc(64 * sizeof(int)), *dsp = malloc(64 * sizeof(int));
    int in[64], out[64];
    for (int i = 0; i < 64; i++) cnt[i] = dsp[i] = -1; /* past the remote group: never read */
    for (int i = 0; i < rsize; i++) cnt[i] = 1, dsp[i] = i, in[i] = me * 100 + i;
    int v = me * 10;
    ok = MPI_Allgatherv(&v, 1, MPI_INT, out, cnt, dsp, MPI_INT, inter) == MPI_SUCCESS;
    for (int i = 0; i < rsize; i++) ok = ok && out[i] == (off + i) * 10;
    check(all_true(ok), "intercommunicator MPI_Allgatherv (counts of the remote group's size)");
    ok = MPI_Alltoallv(in, cnt, dsp, MPI_INT, out, cnt, dsp, MPI_INT, inter) == MPI_SUCCESS;
    for (int i = 0; i < rsize; i++) ok = ok && out[i] == (off + i) * 100 + lr;
    check(all_true(ok), "intercommunicator MPI_Alltoallv");
    int root = low ? MPI_ROOT : 0;
    ok = MPI_Gather(&v, 1, MPI_INT, out, low ? 1 : -1, MPI_INT, root, inter) == MPI_SUCCESS;
    for (int i = 0; low && i < rsize; i++) ok = ok && out[i] == (1 + i) * 10;
    check(all_true(ok), "intercommunicator MPI_Gather (MPI_ROOT, insignificant counts -1)");
    for (int i = 0; i < 64; i++) in[i] = 1000 + i;
    int got = -5;
    ok = MPI_Scatter(in, 1, MPI_INT, &got, low ? -1 : 1, MPI_INT, root, inter) == MPI_SUCCESS;
    ok = ok && (low || got == 1000 + lr);
    check(all_true(ok), "intercommunicator MPI_Scatter (MPI_ROOT, insignificant counts -1)");
    free(cnt);
    free(dsp);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
}

/* A valid call after an erroneous one: the communicator still works. */
static int still_works(MPI_Comm comm) {
    int one = 1, sum = 0;
    return MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS && sum == np;
}

/* An erroneous call's return code `rc`: an error (of class `want`, unless 0) on every rank,
 * after which a valid call works (made by every rank, whatever its rc). */
static void expect_error(int rc, int want, MPI_Comm comm, const char *what) {
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    int ok = still_works(comm);
    check(all_true(ok && cls != MPI_SUCCESS && (!want || cls == want)), what);
}

static void erroneous(void) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int buf[64] = {0};
    double t0 = MPI_Wtime();
    int rc = MPI_Bcast(buf, 4, MPI_INT, np, comm);
    expect_error(rc, MPI_ERR_ROOT, comm, "MPI_Bcast to root p: MPI_ERR_ROOT on every rank, then a valid call works");
    rc = MPI_Reduce(buf, buf + 8, 4, MPI_INT, MPI_SUM, -1, comm);
    expect_error(rc, MPI_ERR_ROOT, comm, "MPI_Reduce to root -1: MPI_ERR_ROOT on every rank");
    rc = MPI_Gather(buf, 1, MPI_INT, buf + 8, 1, MPI_INT, np + 3, comm);
    expect_error(rc, MPI_ERR_ROOT, comm, "MPI_Gather to root p+3: MPI_ERR_ROOT on every rank");
    rc = MPI_Bcast(buf, 4, MPI_DATATYPE_NULL, 0, comm);
    expect_error(rc, 0, comm, "MPI_Bcast of 4 MPI_DATATYPE_NULL: an error on every rank");
    rc = MPI_Alltoall(buf, 1, MPI_DATATYPE_NULL, buf + 16, 1, MPI_INT, comm);
    expect_error(rc, 0, comm, "MPI_Alltoall with sendtype MPI_DATATYPE_NULL: an error on every rank");
    rc = MPI_Allreduce(buf, buf, 4, MPI_INT, MPI_SUM, comm);
    expect_error(rc, MPI_ERR_BUFFER, comm, "MPI_Allreduce with the same send and receive buffer: MPI_ERR_BUFFER");
    MPI_Datatype vec; /* never committed */
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    rc = MPI_Bcast(buf, 2, vec, 0, comm);
    expect_error(rc, 0, comm, "MPI_Bcast of an uncommitted type: an error on every rank, then valid calls work");
    rc = MPI_Allgather(buf, 4, MPI_INT, buf + 8, 2, vec, comm);
    expect_error(rc, 0, comm, "MPI_Allgather into an uncommitted type: an error on every rank");
    MPI_Type_free(&vec);
    /* No rank waited for a peer's timeout (MINIDC_TIMEOUT is 20 s in the test). */
    check(all_true(MPI_Wtime() - t0 < 10), "the erroneous calls returned at once");
    MPI_Comm_free(&comm);
}

static MPI_Comm tcomm;
static void *late_barrier(void *arg) {
    (void)arg;
    if (me == 1) usleep(1500 * 1000); /* rank 0's thread waits inside the barrier meanwhile */
    MPI_Barrier(tcomm);
    return NULL;
}

static void errhandler_thread(void) {
    MPI_Comm_dup(MPI_COMM_WORLD, &tcomm);
    MPI_Barrier(tcomm);
    pthread_t t;
    pthread_create(&t, NULL, late_barrier, NULL);
    MPI_Errhandler seen = MPI_ERRHANDLER_NULL;
    if (me == 0) {
        usleep(500 * 1000);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_get_errhandler(MPI_COMM_WORLD, &seen); /* still inside the barrier */
    }
    pthread_join(t, NULL);
    MPI_Errhandler after;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &after);
    int ok = me != 0 || (seen == MPI_ERRORS_RETURN && after == MPI_ERRORS_RETURN);
    check(all_true(ok), "a handler set on MPI_COMM_WORLD during another thread's collective stays");
    if (after != MPI_ERRHANDLER_NULL) MPI_Errhandler_free(&after);
    if (seen != MPI_ERRHANDLER_NULL) MPI_Errhandler_free(&seen);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&tcomm);
}

/* A gather the root alone refuses (rc at the root), then a valid one: every rank's new value. */
static void root_refused(MPI_Comm comm, int bad_type, const char *what) {
    int root = np - 1, v = 100 + me, out[64];
    int rc = MPI_Gather(&v, 1, MPI_INT, out, bad_type ? 1 : 2, bad_type ? MPI_DATATYPE_NULL : MPI_INT, root, comm);
    int ok = me != root || rc != MPI_SUCCESS;
    v = 200 + me;
    for (int i = 0; i < np; i++) out[i] = -1;
    ok = ok && MPI_Gather(&v, 1, MPI_INT, out, 1, MPI_INT, root, comm) == MPI_SUCCESS;
    for (int i = 0; me == root && i < np; i++) ok = ok && out[i] == 200 + i;
    check(all_true(ok), what);
}

static int is_buffer_error(int rc) {
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    return cls == MPI_ERR_BUFFER;
}

/* Aliased buffers: MPI_ERR_BUFFER where MPICH says so, and the next call of the kind right. */
static void aliased(MPI_Comm comm) {
    int root = np - 1, b[64], out[64], c[64], d[64], ok = 1;
    for (int i = 0; i < np; i++) c[i] = 1, d[i] = i;
    ok = is_buffer_error(MPI_Reduce_scatter(b, b, c, MPI_INT, MPI_SUM, comm)) &&
         is_buffer_error(MPI_Allgatherv(b, 1, MPI_INT, b, c, d, MPI_INT, comm)) &&
         is_buffer_error(MPI_Alltoallv(b, c, d, MPI_INT, b, c, d, MPI_INT, comm));
    check(all_true(ok), "the same send and receive buffer: MPI_ERR_BUFFER from MPI_Reduce_scatter, MPI_Allgatherv, "
                        "MPI_Alltoallv on every rank");
    int v = me + 1, sum = -1;
    b[0] = 1000 + me; /* not the next call's values: a block left over would show */
    int rc = MPI_Reduce(b, me == root ? b : out, 1, MPI_INT, MPI_SUM, root, comm);
    ok = me == root ? is_buffer_error(rc) : rc == MPI_SUCCESS;
    ok = ok && MPI_Reduce(&v, &sum, 1, MPI_INT, MPI_SUM, root, comm) == MPI_SUCCESS &&
         (me != root || sum == np * (np + 1) / 2);
    check(all_true(ok),
          "MPI_Reduce with the root's buffers the same: MPI_ERR_BUFFER at the root, the next reduce right");
    for (int i = 0; i < np; i++) b[i] = 300 + i;
    int got = -1;
    rc = MPI_Scatter(b, 1, MPI_INT, me == root ? (void *)b : &got, 1, MPI_INT, root, comm);
    ok = me == root ? is_buffer_error(rc) : rc == MPI_SUCCESS && got == 300 + me;
    for (int i = 0; i < np; i++) b[i] = 400 + i;
    ok = ok && MPI_Scatter(b, 1, MPI_INT, &got, 1, MPI_INT, root, comm) == MPI_SUCCESS && got == 400 + me;
    check(all_true(ok), "MPI_Scatter with the root's buffers the same: MPI_ERR_BUFFER at the root, the others' blocks "
                        "right, the next scatter right");
    b[0] = 500 + me;
    rc = MPI_Gather(b, 1, MPI_INT, me == root ? b : out, 1, MPI_INT, root, comm);
    ok = me == root ? is_buffer_error(rc) : rc == MPI_SUCCESS;
    v = 600 + me;
    ok = ok && MPI_Gather(&v, 1, MPI_INT, out, 1, MPI_INT, root, comm) == MPI_SUCCESS;
    for (int i = 0; me == root && i < np; i++) ok = ok && out[i] == 600 + i;
    check(all_true(ok),
          "MPI_Gather with the root's buffers the same: MPI_ERR_BUFFER at the root, the next gather right");
}

static void root_only(void) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    root_refused(comm, 1,
                 "MPI_Gather refused by the root alone (recvtype MPI_DATATYPE_NULL): the next gather is right");
    root_refused(comm, 0,
                 "MPI_Gather refused by the root alone (blocks of 8 bytes, sending 4): the next gather is right");
    aliased(comm);
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (argc > 1 && !strcmp(argv[1], "--root-only")) {
        root_only();
        MPI_Finalize();
        return failures ? 1 : 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--root-scatter")) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int in[64] = {0}, got;
        MPI_Scatter(in, 1, me == np - 1 ? MPI_DATATYPE_NULL : MPI_INT, &got, 1, MPI_INT, np - 1, MPI_COMM_WORLD);
        MPI_Scatter(in, 1, MPI_INT, &got, 1, MPI_INT, np - 1, MPI_COMM_WORLD);
        printf("the job went on after a scatter its root refused\n");
        MPI_Finalize();
        return 0;
    }
    if (np < 3) {
        if (me == 0) fprintf(stderr, "interposer_recover: run on at least 3 ranks\n");
        MPI_Finalize();
        return 2;
    }
    intercomm();
    erroneous();
    if (provided == MPI_THREAD_MULTIPLE) errhandler_thread();
    else if (me == 0) printf("skipped: the handler test (no MPI_THREAD_MULTIPLE)\n");
    MPI_Finalize();
    return failures ? 1 : 0;
}
