/* mdc_allgather / mdc_allgatherv: argument checks, algorithm choice (coll_registry.h), run. The
 * equal-block form runs the per-rank-count algorithms with counts[i] = count, packed. */
#include "coll_registry.h"

static mdc_status run(const char *w, const void *sendbuf, void *recvbuf, const size_t *counts, const size_t *displs,
                      mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t total = 0, ext = 0;
    mdc_status st;
    for (int i = 0; i < p; i++) {
        if ((st = mdc_i_check_count(w, g, "counts[i]", counts[i], t, (size_t)p))) return st;
        if (displs && (st = mdc_i_check_count(w, g, "displs[i]", displs[i], t, 2))) return st;
        size_t e = (displs ? displs[i] : total) + counts[i];
        if (counts[i] && e > ext) ext = e;
        total += counts[i];
    }
    int inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
    if ((st = mdc_i_check_buf(w, g, "recvbuf", recvbuf, ext)) ||
        (!inplace && (st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, counts[me]))))
        return st;
    if ((st = mdc_i_check_call(w, g, MDC_COLL_ALLGATHER, (long long)total, t, -1, -1))) return st;
    if (total == 0) return MDC_OK;
    const mdc_i_algo *a = mdc_i_pick(MDC_COLL_ALLGATHER, total * mdc_dtype_size(t), g);
    return mdc_i_after(g, a->run.allgather(sendbuf, recvbuf, counts, displs, t, g));
}

mdc_status mdc_allgatherv(const void *sendbuf, void *recvbuf, const size_t *counts, const size_t *displs, mdc_dtype t,
                          mdc_group *g) {
    const char *w = "mdc_allgatherv";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, -1)) ||
        (st = mdc_i_check_buf(w, g, "counts", counts, 1)))
        return st;
    return run(w, sendbuf, recvbuf, counts, displs, t, g);
}

mdc_status mdc_allgather(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_group *g) {
    const char *w = "mdc_allgather";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, -1)) ||
        (st = mdc_i_check_count(w, g, "count", count, t, (size_t)mdc_group_size(g))))
        return st;
    size_t *counts;
    if ((st = mdc_i_equal_counts(w, g, count, &counts))) return st;
    st = run(w, sendbuf, recvbuf, counts, NULL, t, g);
    free(counts);
    return st;
}
