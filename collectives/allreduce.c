/* mdc_allreduce: checks the arguments, picks the algorithm from the registry (forced or by the
 * cost model on the group's links) and runs it. On a cross-rank mismatch the peers are told, so
 * none hangs. */
#include "coll_registry.h"

mdc_status mdc_allreduce(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g) {
    const char *w = "mdc_allreduce";
    mdc_status st;
    if ((st = mdc_i_check_group(w, g)) || (st = mdc_i_check_dtype_op(w, g, t, (int)op)) ||
        (st = mdc_i_check_count(w, g, "count", count, t, 1)) ||
        (st = mdc_i_check_buf(w, g, "recvbuf", recvbuf, count)) ||
        (st = mdc_i_check_buf(w, g, "sendbuf", sendbuf, count)))
        return st;
    if ((st = mdc_i_check_call(w, g, MDC_COLL_ALLREDUCE, (long long)count, t, (int)op, -1))) return st;
    if (count == 0) return MDC_OK;
    const mdc_i_algo *a = mdc_i_pick(MDC_COLL_ALLREDUCE, count * mdc_dtype_size(t), g);
    int replay = mdc_i_replay_wanted(g, a); /* predict, over a folded group (replay.c) */
    if (replay > 0) return mdc_i_replay_allreduce(a, count, t, g);
    if (replay < 0)
        return mdc_fail(MDC_ERR_INVALID,
                        "predict: rank %d: allreduce %s over a group of %d only some of whose members are folded "
                        "cannot be timed (its members do different things): MINIDC_ALGO_ALLREDUCE=ring, or --no-fold",
                        mdc_transport_rank(mdc_group_transport(g)), a->info.name, mdc_group_size(g));
    return mdc_i_after(g, a->run.allreduce(sendbuf, recvbuf, count, t, op, g));
}
