/* Requests in flight stay bounded (MDC_REQUESTS_BOUND(p) = 2p + 8) whatever the message size and
 * the chunk or slice setting: every chunked or sliced algorithm, forced in turn with the
 * smallest setting on a message that needs over 10^6 pieces, gives the right result, and the
 * transport's high-water mark of requests stays at or below the bound. Integer-valued floats, so
 * every sum is exact in any order. */
#include <mpi.h>

#include "testutil.h"

static int P, R;
static double t_last;

static void check_hwm(mdc_transport *t, const char *what) {
    size_t hwm = mdc_transport_requests_hwm(t);
    TU_CHECK(hwm <= MDC_REQUESTS_BOUND(P), "%s: %zu requests in flight at once, bound 2p + 8 = %zu", what, hwm,
             MDC_REQUESTS_BOUND(P));
    if (R == 0)
        printf("inflight: %-44s high-water mark %zu requests (bound %zu), %.1f s\n", what, hwm, MDC_REQUESTS_BOUND(P),
               MPI_Wtime() - t_last);
    t_last = MPI_Wtime();
    mdc_transport_reset_requests_hwm(t);
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    P = rt.size, R = rt.rank;
    t_last = MPI_Wtime();
    mdc_group *g = rt.world;
    mdc_transport *t = mdc_group_transport(g);
    char what[96];
    /* the pipelined broadcast in 8-byte chunks: 2 x 10^6 floats = 10^6 chunks */
    size_t n = 2000000;
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = R == 0 ? (float)(i % 1000) : -1.0f;
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_BCAST, "pipeline"));
    mdc_coll_set_ring_chunk(8);
    mdc_transport_reset_requests_hwm(t);
    MDC_CHECK(mdc_bcast(x, n, MDC_F32, 0, g));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += x[i] != (float)(i % 1000);
    TU_CHECK(bad == 0, "pipelined broadcast in 8-byte chunks: %zu wrong elements", bad);
    check_hwm(t, "bcast pipeline, 10^6 chunks of 8 bytes");
    /* the ring allreduce in chunks of one float: 10^6 pieces */
    size_t m = 1000000;
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "ring"));
    mdc_coll_set_ring_chunk(4);
    for (size_t i = 0; i < m; i++) x[i] = (float)((i + (size_t)R) % 7);
    MDC_CHECK(mdc_allreduce(MDC_IN_PLACE, x, m, MDC_F32, MDC_SUM, g));
    bad = 0;
    for (size_t i = 0; i < m; i++) {
        float want = 0;
        for (int q = 0; q < P; q++) want += (float)((i + (size_t)q) % 7);
        bad += x[i] != want;
    }
    TU_CHECK(bad == 0, "ring allreduce in 4-byte chunks: %zu wrong elements", bad);
    check_hwm(t, "allreduce ring, 10^6 chunks of 4 bytes");
    mdc_coll_set_ring_chunk(0);
    /* every reducing algorithm with the smallest slice (one float): a message's pieces are capped */
    mdc_coll_set_slice(4);
    mdc_coll colls[2] = {MDC_COLL_ALLREDUCE, MDC_COLL_REDUCE_SCATTER};
    for (int c = 0; c < 2; c++)
        for (int a = 0; a < mdc_coll_algo_count(colls[c]); a++) {
            const char *name = mdc_coll_algo_at(colls[c], a)->name;
            MDC_CHECK(mdc_coll_set_algo(colls[c], name));
            size_t cnt = 1200000 / (size_t)P * (size_t)P;
            for (size_t i = 0; i < cnt; i++) x[i] = (float)((i * 3 + (size_t)R) % 5);
            if (colls[c] == MDC_COLL_ALLREDUCE) MDC_CHECK(mdc_allreduce(MDC_IN_PLACE, x, cnt, MDC_F32, MDC_SUM, g));
            else MDC_CHECK(mdc_reduce_scatter(MDC_IN_PLACE, x, cnt / (size_t)P, MDC_F32, MDC_SUM, g));
            size_t len = colls[c] == MDC_COLL_ALLREDUCE ? cnt : cnt / (size_t)P,
                   base = colls[c] == MDC_COLL_ALLREDUCE ? 0 : (size_t)R * len;
            bad = 0;
            for (size_t i = 0; i < len; i++) {
                float want = 0;
                for (int q = 0; q < P; q++) want += (float)(((base + i) * 3 + (size_t)q) % 5);
                bad += x[i] != want;
            }
            snprintf(what, sizeof what, "%s %s, slice 4 bytes", mdc_coll_name(colls[c]), name);
            TU_CHECK(bad == 0, "%s: %zu wrong elements", what, bad);
            check_hwm(t, what);
        }
    mdc_coll_set_slice(0);
    /* per-peer algorithms: the direct allgather and the pairwise all-to-all */
    size_t blk = 100000;
    float *y = malloc(blk * (size_t)P * sizeof(float)), *z = malloc(blk * (size_t)P * sizeof(float));
    for (size_t i = 0; i < blk * (size_t)P; i++) y[i] = (float)R;
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLGATHER, "direct"));
    MDC_CHECK(mdc_allgather(y, z, blk, MDC_F32, g));
    bad = 0;
    for (size_t i = 0; i < blk * (size_t)P; i++) bad += z[i] != (float)(i / blk);
    TU_CHECK(bad == 0, "allgather direct: %zu wrong", bad);
    check_hwm(t, "allgather direct");
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLTOALL, "pairwise"));
    MDC_CHECK(mdc_alltoall(y, z, blk, MDC_F32, g));
    bad = 0;
    for (size_t i = 0; i < blk * (size_t)P; i++) bad += z[i] != (float)(i / blk);
    TU_CHECK(bad == 0, "alltoall pairwise: %zu wrong", bad);
    check_hwm(t, "alltoall pairwise");
    free(x), free(y), free(z);
    int rc = tu_finish("test_inflight"), any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    mdc_runtime_finalize(&rt);
    return any;
}
