/* Dispatchers of the rooted collectives: mdc_bcast, mdc_reduce, mdc_gather, mdc_scatter.
 * Argument checks (root in range, NULL buffers, counts), algorithm choice (coll_registry.h), run. */
#include "coll_registry.h"

/* The checks a rooted reduction, gather or scatter starts with: the group, the dtype (and op:
 * -1 none), the root, the count (times `mult` for the root's buffer), and MDC_IN_PLACE only at
 * the root for the buffer `inplace_arg` that may carry it. */
static mdc_status prologue(const char *w, mdc_group *g, mdc_dtype t, int op, int root, size_t count, size_t mult,
                           const void *inplace_arg) {
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, op)) ||
        (st = mdc_i_check_root(w, g, root)) || (st = mdc_i_check_count(w, g, "count", count, t, mult)))
        return st;
    if (mdc_group_rank(g) != root && inplace_arg == MDC_IN_PLACE)
        return mdc_fail(MDC_ERR_INVALID, "%s: rank %d: MDC_IN_PLACE is only for the root (%d)", w,
                        mdc_transport_rank(mdc_group_transport(g)), root);
    return MDC_OK;
}

mdc_status mdc_bcast(void *buf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    const char *w = "mdc_bcast";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, -1)) ||
        (st = mdc_i_check_root(w, g, root)) || (st = mdc_i_check_count(w, g, "count", count, t, 1)) ||
        (st = mdc_i_check_buf(w, g, "buf", buf, count)))
        return st;
    if ((st = mdc_i_check_call(w, g, MDC_COLL_BCAST, (long long)count, t, -1, root))) return st;
    if (count == 0) return MDC_OK;
    const mdc_i_algo *a = mdc_i_pick(MDC_COLL_BCAST, count * mdc_dtype_size(t), g);
    return mdc_i_after(g, a->run.bcast(buf, count, t, root, g));
}

mdc_status mdc_reduce(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, int root,
                      mdc_group *g) {
    const char *w = "mdc_reduce";
    mdc_status st = prologue(w, g, t, (int)op, root, count, 1, sendbuf);
    if (st) return st;
    int me = mdc_group_rank(g);
    if ((st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, count)) ||
        (me == root && (st = mdc_i_check_buf(w, g, "recvbuf (root)", recvbuf, count))))
        return st;
    if ((st = mdc_i_check_call(w, g, MDC_COLL_REDUCE, (long long)count, t, (int)op, root))) return st;
    if (count == 0) return MDC_OK;
    const mdc_i_algo *a = mdc_i_pick(MDC_COLL_REDUCE, count * mdc_dtype_size(t), g);
    return mdc_i_after(g, a->run.reduce(sendbuf, recvbuf, count, t, op, root, g));
}

mdc_status mdc_gather(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    const char *w = "mdc_gather";
    mdc_status st = prologue(w, g, t, -1, root, count, g ? (size_t)mdc_group_size(g) : 1, sendbuf);
    if (st) return st;
    int me = mdc_group_rank(g), p = mdc_group_size(g);
    if ((st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, count)) ||
        (me == root && (st = mdc_i_check_buf(w, g, "recvbuf (root)", recvbuf, count * (size_t)p))))
        return st;
    if ((st = mdc_i_check_call(w, g, MDC_COLL_GATHER, (long long)count, t, -1, root))) return st;
    if (count == 0) return MDC_OK;
    const mdc_i_algo *a = mdc_i_pick(MDC_COLL_GATHER, count * mdc_dtype_size(t) * (size_t)p, g);
    return mdc_i_after(g, a->run.gather(sendbuf, recvbuf, count, t, root, g));
}

mdc_status mdc_scatter(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    const char *w = "mdc_scatter";
    mdc_status st = prologue(w, g, t, -1, root, count, g ? (size_t)mdc_group_size(g) : 1, recvbuf);
    if (st) return st;
    int me = mdc_group_rank(g), p = mdc_group_size(g);
    if ((me == root && (st = mdc_i_check_buf(w, g, "sendbuf (root)", sendbuf, count * (size_t)p))) ||
        (st = mdc_i_check_buf(w, g, "recvbuf", recvbuf, count)))
        return st;
    if ((st = mdc_i_check_call(w, g, MDC_COLL_SCATTER, (long long)count, t, -1, root))) return st;
    if (count == 0) return MDC_OK;
    const mdc_i_algo *a = mdc_i_pick(MDC_COLL_SCATTER, count * mdc_dtype_size(t) * (size_t)p, g);
    return mdc_i_after(g, a->run.scatter(sendbuf, recvbuf, count, t, root, g));
}
