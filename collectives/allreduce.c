/* mdc_allreduce: checks the arguments, picks the algorithm (forced or by the cost model on the
 * group's links) and runs it. On a cross-rank mismatch the peers are told, so none hangs. */
#include "coll_internal.h"

typedef mdc_status (*allreduce_fn)(const void *, void *, size_t, mdc_dtype, mdc_op, mdc_group *);
static const struct { const char *name; allreduce_fn fn; } algos[] = {
    {"ring", mdc_allreduce_ring},
    {"recursive_doubling", mdc_allreduce_recursive_doubling},
    {"rabenseifner", mdc_allreduce_rabenseifner},
    {"reduce_bcast", mdc_allreduce_reduce_bcast},
    {"hierarchical", mdc_allreduce_hierarchical},
};

mdc_status mdc_allreduce(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g) {
    const char *w = "mdc_allreduce";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, (int)op)) ||
        (st = mdc_i_check_count(w, g, "count", count, t, 1)) ||
        (st = mdc_i_check_buf(w, g, "recvbuf", recvbuf, count)) ||
        (st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, count)))
        return st;
    if (count == 0) return MDC_OK;
    const char *name = mdc_coll_algo_at(MDC_COLL_ALLREDUCE, mdc_i_pick(MDC_COLL_ALLREDUCE, count * mdc_dtype_size(t), g))->name;
    for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++)
        if (!strcmp(name, algos[i].name)) return mdc_i_after(g, algos[i].fn(sendbuf, recvbuf, count, t, op, g));
    return mdc_fail(MDC_ERR_UNSUPPORTED, "%s: no algorithm '%s'", w, name);
}
