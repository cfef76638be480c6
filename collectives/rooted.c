/* Dispatchers of the rooted collectives: mdc_bcast, mdc_reduce, mdc_gather, mdc_scatter.
 * Argument checks (root in range, NULL buffers, counts), algorithm choice, run. */
#include "coll_internal.h"

static int pick(mdc_coll c, size_t bytes, mdc_group *g, const char **name) {
    *name = mdc_coll_algo_at(c, mdc_i_pick(c, bytes, g))->name;
    return 0;
}

mdc_status mdc_bcast(void *buf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    const char *w = "mdc_bcast", *name;
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, -1)) ||
        (st = mdc_i_check_root(w, g, root)) || (st = mdc_i_check_count(w, g, "count", count, t, 1)) ||
        (st = mdc_i_check_buf(w, g, "buf", buf, count)))
        return st;
    if (count == 0) return MDC_OK;
    pick(MDC_COLL_BCAST, count * mdc_dtype_size(t), g, &name);
    if (!strcmp(name, "binomial")) return mdc_i_after(g, mdc_bcast_binomial(buf, count, t, root, g));
    if (!strcmp(name, "pipeline")) return mdc_i_after(g, mdc_bcast_pipeline(buf, count, t, root, g));
    return mdc_i_after(g, mdc_bcast_scatter_allgather(buf, count, t, root, g));
}

mdc_status mdc_reduce(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, int root,
                      mdc_group *g) {
    const char *w = "mdc_reduce", *name;
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, (int)op)) ||
        (st = mdc_i_check_root(w, g, root)) || (st = mdc_i_check_count(w, g, "count", count, t, 1)))
        return st;
    int me = mdc_group_rank(g);
    if (me != root && sendbuf == MDC_IN_PLACE)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: MDC_IN_PLACE is only for the root (%d)", w,
                        mdc_transport_rank(mdc_group_transport(g)), root);
    if ((st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, count)) ||
        (me == root && (st = mdc_i_check_buf(w, g, "recvbuf (root)", recvbuf, count))))
        return st;
    if (count == 0) return MDC_OK;
    pick(MDC_COLL_REDUCE, count * mdc_dtype_size(t), g, &name);
    if (!strcmp(name, "binomial")) return mdc_i_after(g, mdc_reduce_binomial(sendbuf, recvbuf, count, t, op, root, g));
    return mdc_i_after(g, mdc_reduce_rs_gather(sendbuf, recvbuf, count, t, op, root, g));
}

mdc_status mdc_gather(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    const char *w = "mdc_gather", *name;
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, -1)) ||
        (st = mdc_i_check_root(w, g, root)) ||
        (st = mdc_i_check_count(w, g, "count", count, t, (size_t)mdc_group_size(g))))
        return st;
    int me = mdc_group_rank(g), p = mdc_group_size(g);
    if (me != root && sendbuf == MDC_IN_PLACE)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: MDC_IN_PLACE is only for the root (%d)", w,
                        mdc_transport_rank(mdc_group_transport(g)), root);
    if ((st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, count)) ||
        (me == root && (st = mdc_i_check_buf(w, g, "recvbuf (root)", recvbuf, count * (size_t)p))))
        return st;
    if (count == 0) return MDC_OK;
    pick(MDC_COLL_GATHER, count * mdc_dtype_size(t) * (size_t)p, g, &name);
    return mdc_i_after(g, mdc_gather_binomial(sendbuf, recvbuf, count, t, root, g));
}

mdc_status mdc_scatter(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    const char *w = "mdc_scatter", *name;
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, -1)) ||
        (st = mdc_i_check_root(w, g, root)) ||
        (st = mdc_i_check_count(w, g, "count", count, t, (size_t)mdc_group_size(g))))
        return st;
    int me = mdc_group_rank(g), p = mdc_group_size(g);
    if (me != root && recvbuf == MDC_IN_PLACE)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: MDC_IN_PLACE is only for the root (%d)", w,
                        mdc_transport_rank(mdc_group_transport(g)), root);
    if ((me == root && (st = mdc_i_check_buf(w, g, "sendbuf (root)", sendbuf, count * (size_t)p))) ||
        (st = mdc_i_check_buf(w, g, "recvbuf", recvbuf, count)))
        return st;
    if (count == 0) return MDC_OK;
    pick(MDC_COLL_SCATTER, count * mdc_dtype_size(t) * (size_t)p, g, &name);
    return mdc_i_after(g, mdc_scatter_binomial(sendbuf, recvbuf, count, t, root, g));
}
