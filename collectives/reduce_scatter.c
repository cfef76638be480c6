/* mdc_reduce_scatter / mdc_reduce_scatterv: argument checks, algorithm choice, run. The
 * equal-block form runs the per-rank-count algorithms with counts[i] = count. */
#include "coll_internal.h"

typedef mdc_status (*rs_fn)(const void *, void *, const size_t *, mdc_dtype, mdc_op, mdc_group *);
static const struct { const char *name; rs_fn fn; } algos[] = {
    {"ring", mdc_reduce_scatter_ring},
    {"recursive_halving", mdc_reduce_scatter_recursive_halving},
    {"pairwise", mdc_reduce_scatter_pairwise},
};

static mdc_status run(const char *w, const void *sendbuf, void *recvbuf, const size_t *counts,
                      mdc_dtype t, mdc_op op, mdc_group *g) {
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
    if (total == 0) return MDC_OK;
    const char *name = mdc_coll_algo_at(MDC_COLL_REDUCE_SCATTER, mdc_i_pick(MDC_COLL_REDUCE_SCATTER, total * mdc_dtype_size(t), g))->name;
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
        if (!strcmp(name, algos[i].name)) return mdc_i_after(g, algos[i].fn(sendbuf, recvbuf, counts, t, op, g));
    return mdc_fail(MDC_ERR_UNSUPPORTED, "%s: no algorithm '%s'", w, name);
}

mdc_status mdc_reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *counts, mdc_dtype t,
                               mdc_op op, mdc_group *g) {
    const char *w = "mdc_reduce_scatterv";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, (int)op)) ||
        (st = mdc_i_check_buf(w, g, "counts", counts, 1)))
        return st;
    return run(w, sendbuf, recvbuf, counts, t, op, g);
}

mdc_status mdc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op,
                              mdc_group *g) {
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
