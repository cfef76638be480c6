/* mdc_reduce_scatter / mdc_reduce_scatterv: argument checks, algorithm choice (coll_registry.h),
 * run. The equal-block form runs the per-rank-count algorithms with counts[i] = count. */
#include "coll_registry.h"

static mdc_status run(const char *w, const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t, mdc_op op,
                      mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t total = 0;
    mdc_status st;
    for (int i = 0; i < p; i++) {
        if ((st = mdc_i_check_count(w, g, "counts[i]", counts[i], t, (size_t)p))) return st;
        total += counts[i];
    }
    if ((st = mdc_i_check_count(w, g, "total count", total, t, 1))) return st;
    int inplace = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf;
    if ((st = mdc_i_check_buf(w, g, "recvbuf", recvbuf, inplace ? total : counts[me])) ||
        (st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, total)))
        return st;
    if ((st = mdc_i_check_call(w, g, MDC_COLL_REDUCE_SCATTER, (long long)total, t, (int)op, -1))) return st;
    if (total == 0) return MDC_OK;
    const mdc_i_algo *a = mdc_i_pick(MDC_COLL_REDUCE_SCATTER, total * mdc_dtype_size(t), g);
    return mdc_i_after(g, a->run.reduce_scatter(sendbuf, recvbuf, counts, t, op, g));
}

mdc_status mdc_reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t, mdc_op op,
                               mdc_group *g) {
    const char *w = "mdc_reduce_scatterv";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, (int)op)) ||
        (st = mdc_i_check_buf(w, g, "counts", counts, 1)))
        return st;
    return run(w, sendbuf, recvbuf, counts, t, op, g);
}

mdc_status mdc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g) {
    const char *w = "mdc_reduce_scatter";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, (int)op)) ||
        (st = mdc_i_check_count(w, g, "count", count, t, (size_t)mdc_group_size(g))))
        return st;
    size_t *counts;
    if ((st = mdc_i_equal_counts(w, g, count, &counts))) return st;
    st = run(w, sendbuf, recvbuf, counts, t, op, g);
    free(counts);
    return st;
}
