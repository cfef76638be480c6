/* Program start-up: MPI, device, transport, world group. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/runtime.h"

mdc_status mdc_runtime_init(mdc_runtime *rt, int *argc, char ***argv) {
    memset(rt, 0, sizeof *rt);
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS) return mdc_fail(MDC_ERR_MPI, "MPI_Init failed");
    /* Errors come back as codes so the transport can name the peer and the size. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rt->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rt->size);
    mdc_device_options_default(&rt->opts);
    int n = *argc, out = 1;
    char **av = *argv;
    for (int i = 1; i < n;) {
        int r = mdc_device_options_parse(&rt->opts, n, av, &i);
        if (r < 0) return MDC_ERR_INVALID;
        if (r == 0) av[out++] = av[i++];
    }
    av[out] = NULL;
    *argc = out;
    mdc_status st = mdc_device_create(&rt->dev, &rt->opts, rt->rank);
    if (st) return st;
    st = mdc_transport_create(&rt->tr, NULL, rt->dev, rt->opts.gpus_per_node);
    if (st) return st;
    mdc_transport_set_default(rt->tr);
    return mdc_group_world(&rt->world, rt->tr);
}

void mdc_runtime_finalize(mdc_runtime *rt) {
    mdc_group_free(rt->world);
    mdc_transport_free(rt->tr);
    mdc_device_free(rt->dev);
    rt->world = NULL;
    rt->tr = NULL;
    rt->dev = NULL;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}

void mdc_runtime_die(mdc_runtime *rt, mdc_status st, int all_ranks_same, int code) {
    if (!all_ranks_same || rt->rank == 0)
        fprintf(stderr, "minidc: rank %d: %s: %s\n", rt->rank, mdc_strerror(st), mdc_detail());
    if (!all_ranks_same && rt->tr) mdc_transport_abort_peers(rt->tr, mdc_detail());
    fflush(stderr);
    if (all_ranks_same) {
        mdc_runtime_finalize(rt);
        exit(code);
    }
    /* Peers may be blocked in a collective with us: do not wait for them in MPI_Finalize. */
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}
