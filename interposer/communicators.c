/* The state the interposer keeps per communicator: a private communicator, the minidc
 * transport over it and the world group, cached as an attribute of the program's communicator
 * and freed with it (or at MPI_Finalize); and MPI_COMM_WORLD's error handler while minidc runs
 * a call.
 *
 * Why a private communicator: MPI requires collective traffic never to match the application's
 * point-to-point receives (an MPI_ANY_TAG receive on the same communicator would steal a
 * minidc message). PMPI_Comm_create of the communicator's own group gives the transport its
 * own context, as MPICH does internally. It is the one MPI collective minidc calls here, once
 * per communicator, and is freed with it (attribute delete callback) or at MPI_Finalize. */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

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
 * remote group's size and its roots are MPI_ROOT / MPI_PROC_NULL, which the argument checks
 * would misread. MPI_COMM_NULL goes there too, to be reported as MPICH reports it. */
int ip_not_ours(MPI_Comm comm, int f) {
    int inter = 0;
    if (comm == MPI_COMM_NULL) return 1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return ip_fallback(f, "intercommunicator"), 1;
    return 0;
}

mdc_group *ip_group_of(MPI_Comm comm, int f) {
    if (ip_not_ours(comm, f)) return NULL;
    pthread_mutex_lock(&state_lock);
    int kv_ok = keyval != MPI_KEYVAL_INVALID ||
                PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fn, &keyval, NULL) == MPI_SUCCESS;
    pthread_mutex_unlock(&state_lock);
    if (!kv_ok) {
        ip_fallback(f, "could not create an attribute key");
        return NULL;
    }
    cached *c = NULL;
    int flag = 0;
    PMPI_Comm_get_attr(comm, keyval, &c, &flag);
    if (flag && c) return c->g;
    c = calloc(1, sizeof *c);
    if (!c) return ip_fallback(f, "out of host memory"), NULL;
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
        ip_fallback(f, "could not create a private communicator (out of MPI contexts?)");
        return NULL;
    }
    PMPI_Comm_set_errhandler(c->dup, MPI_ERRORS_RETURN);
    /* Every rank reaches here together (first collective on comm), and creating the
     * transport and group is local, so a failure below is the same everywhere. */
    if (mdc_transport_create(&c->t, &c->dup, NULL, 1) != MDC_OK || mdc_group_world(&c->g, c->t) != MDC_OK) {
        ip_fallback(f, "%s", mdc_detail());
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

/* ---- MPI_COMM_WORLD's error handler ---------------------------------------------------
 * MPICH reports a failed MPI_Test/MPI_Testall (a message longer than its receive: the ranks'
 * counts differ) on MPI_COMM_WORLD's error handler, not the request's communicator: fatal by
 * default, with no word of which sizes differed. While minidc runs a call, world returns
 * errors instead, so the transport's own error (rank, sizes) is what the caller sees; the
 * program's handler is back before the call returns. Counted, for threads running
 * collectives on different communicators at once. */
static pthread_mutex_t world_lock = PTHREAD_MUTEX_INITIALIZER;
static int world_users;
static MPI_Errhandler world_saved = MPI_ERRHANDLER_NULL;

void ip_world_returns(void) {
    pthread_mutex_lock(&world_lock);
    if (world_users++ == 0 && PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &world_saved) == MPI_SUCCESS)
        PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pthread_mutex_unlock(&world_lock);
}

void ip_world_restore(void) {
    pthread_mutex_lock(&world_lock);
    if (--world_users == 0 && world_saved != MPI_ERRHANDLER_NULL) {
        PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world_saved);
        PMPI_Errhandler_free(&world_saved);
        world_saved = MPI_ERRHANDLER_NULL;
    }
    pthread_mutex_unlock(&world_lock);
}

/* A program thread that sets or reads world's handler while another thread is inside a minidc
 * call must see its own handler, and keep it: ip_world_restore would otherwise put back the one
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
