/* Dispatchers of mdc_alltoall, mdc_alltoallv and mdc_barrier: argument checks, algorithm
 * choice (coll_registry.h), run. */
#include "coll_registry.h"

mdc_status mdc_alltoall(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_group *g) {
    const char *w = "mdc_alltoall";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, -1)) ||
        (st = mdc_i_check_count(w, g, "count", count, t, (size_t)mdc_group_size(g))))
        return st;
    size_t all = count * (size_t)mdc_group_size(g);
    if ((st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, all)) || (st = mdc_i_check_buf(w, g, "recvbuf", recvbuf, all)))
        return st;
    if ((st = mdc_i_check_call(w, g, MDC_COLL_ALLTOALL, (long long)count, t, -1, -1))) return st;
    if (count == 0) return MDC_OK;
    const mdc_i_algo *a = mdc_i_pick(MDC_COLL_ALLTOALL, all * mdc_dtype_size(t), g);
    return mdc_i_after(g, a->run.alltoall(sendbuf, recvbuf, count, t, g));
}

mdc_status mdc_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                         const size_t *recvcounts, const size_t *rdispls, mdc_dtype t, mdc_group *g) {
    const char *w = "mdc_alltoallv";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, -1)) ||
        (st = mdc_i_check_buf(w, g, "recvcounts", recvcounts, 1)) ||
        (st = mdc_i_check_buf(w, g, "rdispls", rdispls, 1)))
        return st;
    int p = mdc_group_size(g), inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
    if (!inplace && ((st = mdc_i_check_buf(w, g, "sendcounts", sendcounts, 1)) ||
                     (st = mdc_i_check_buf(w, g, "sdispls", sdispls, 1))))
        return st;
    size_t sall = 0, rall = 0;
    for (int i = 0; i < p; i++) {
        if ((st = mdc_i_check_count(w, g, "recvcounts[i]", recvcounts[i], t, (size_t)p)) ||
            (st = mdc_i_check_count(w, g, "rdispls[i]", rdispls[i], t, 2)))
            return st;
        if (recvcounts[i] && (st = mdc_i_check_buf(w, g, "recvbuf", recvbuf, recvcounts[i]))) return st;
        rall += recvcounts[i];
        if (inplace) continue;
        if ((st = mdc_i_check_count(w, g, "sendcounts[i]", sendcounts[i], t, (size_t)p)) ||
            (st = mdc_i_check_count(w, g, "sdispls[i]", sdispls[i], t, 2)))
            return st;
        if (sendcounts[i] && (st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, sendcounts[i]))) return st;
        sall += sendcounts[i];
    }
    /* the counts differ by rank: the check compares the collective and the dtype */
    if ((st = mdc_i_check_call(w, g, MDC_COLL_ALLTOALLV, -1, t, -1, -1))) return st;
    const mdc_i_algo *a = mdc_i_pick(MDC_COLL_ALLTOALLV, (inplace ? rall : sall) * mdc_dtype_size(t), g);
    return mdc_i_after(g, a->run.alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, t, g));
}

mdc_status mdc_barrier(mdc_group *g) {
    mdc_status st = mdc_i_check_group("mdc_barrier", g);
    if (st) return st;
    if ((st = mdc_i_check_call("mdc_barrier", g, MDC_COLL_BARRIER, 0, MDC_U8, -1, -1))) return st;
    /* One algorithm, and no size to price: no pick (nor its reading of MINIDC_ALGO_*). */
    return mdc_i_after(g, mdc_i_algo_at(MDC_COLL_BARRIER, 0)->run.barrier(g));
}
