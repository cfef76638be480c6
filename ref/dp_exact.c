/* Data parallelism in exact mode (docs/exactness.md): the model keeps its gradients as exact
 * sums through every micro-batch, so nothing is reduced during backward; at the step's end
 * each bucket goes over the data-parallel group as MDC_EXACT accumulators (DDP: AllReduce;
 * ZeRO: ReduceScatter, once per step for every stage) and each element is rounded to float
 * once, into the replica's gradients (DDP, ZeRO-1) or the shard (ZeRO-2/3). The sum does not
 * depend on the ranks' order or the collective's algorithm, so any dp gives serial's bits. */
#include <stdlib.h>
#include <string.h>

#include "dp_internal.h"

/* Bucket b of the exact sums into blocks (rank-major, zero padding = empty accumulators). */
static void pack(mdc_dp *dp, const dp_bucket *b, const mdc_xsum *xs) {
    for (int q = 0; q < dp->N; q++) {
        mdc_exact *blk = dp->xbuf + (size_t)q * b->block;
        for (int u = b->lo; u <= b->hi; u++) {
            size_t lo, n = mdc_dp_i_piece(dp, u, q, &lo);
            mdc_xsum_get(xs, dp->uoff[u] + lo, n, blk);
            memset(blk + n, 0, (dp->us[u] - n) * sizeof *blk);
            blk += dp->us[u];
        }
    }
}

static mdc_status reduce(mdc_dp *dp, const dp_bucket *b) {
    float *G = mdc_gpt2_grads(dp->m);
    pack(dp, b, mdc_gpt2_exact_grads(dp->m));
    double b0 = mdc_dp_i_sent(dp);
    mdc_status st;
    if (dp->dc.zero == 0) {
        st = mdc_allreduce(MDC_IN_PLACE, dp->xbuf, b->block * (size_t)dp->N, MDC_EXACT, MDC_SUM, dp->g);
        for (int q = 0; !st && q < dp->N; q++) {
            const mdc_exact *blk = dp->xbuf + (size_t)q * b->block;
            for (int u = b->lo; u <= b->hi; u++) {
                size_t lo, n = mdc_dp_i_piece(dp, u, q, &lo);
                mdc_exact_round_n(blk, n, G + dp->uoff[u] + lo);
                blk += dp->us[u];
            }
        }
    } else {
        st = mdc_reduce_scatter(MDC_IN_PLACE, dp->xbuf, b->block, MDC_EXACT, MDC_SUM, dp->g);
        if (!st && dp->dc.zero == 1) /* the reduced piece back into the replica's gradients */
            for (int u = b->lo; u <= b->hi; u++) {
                size_t lo, n = mdc_dp_i_piece(dp, u, dp->r, &lo);
                mdc_exact_round_n(dp->xbuf + (dp->shoff[u] - dp->shoff[b->lo]), n, G + dp->uoff[u] + lo);
            }
        else if (!st)
            mdc_exact_round_n(dp->xbuf, b->block, dp->shard_g + dp->shoff[b->lo]);
    }
    dp->step_bytes += mdc_dp_i_sent(dp) - b0;
    mdc_dev_kernel(dp->dev, (double)b->block * dp->N, 24.0 * (double)b->block * dp->N, MDC_PREC_FP32);
    return st;
}

mdc_status mdc_dp_i_exact_finish(mdc_dp *dp) {
    if (!mdc_xsum_ok(mdc_gpt2_exact_grads(dp->m))) return mdc_fail(MDC_ERR_OOM_HOST, "exact gradient sums: an accumulator");
    if (!dp->xbuf) {
        mdc_status st = mdc_dev_alloc(dp->dev, (void **)&dp->xbuf, dp->maxblock * (size_t)dp->N * sizeof(mdc_exact),
                                      MDC_MEM_COMM, "dp.exact_bucket");
        if (st) return st;
    }
    mdc_status st = MDC_OK;
    mdc_dev_stream_begin(dp->dev, &dp->stream);
    for (int i = 0; i < dp->nbuckets && !st; i++) st = reduce(dp, &dp->b[i]);
    mdc_dev_stream_end(dp->dev, &dp->stream);
    mdc_dev_stream_join(dp->dev, &dp->stream);
    return st;
}

typedef struct {
    mdc_exact *acc;
    const char *skip;
} sq_ctx;
static void seg_squares(void *vc, int ti, float *grad, float *param, size_t n) {
    (void)param;
    sq_ctx *c = vc;
    if (!c->skip || !c->skip[ti]) mdc_exact_add_squares(c->acc, grad, n);
}

void mdc_dp_sumsq_exact(mdc_dp *dp, const char *skip, mdc_exact *acc) {
    if (dp->dc.zero == 0 && dp->r != 0) return; /* identical replicas: rank 0 counts them */
    sq_ctx c = {acc, skip};
    mdc_dp_for_each_segment(dp, seg_squares, &c);
    mdc_dev_kernel(dp->dev, 2.0 * (double)dp->psi, 4.0 * (double)dp->psi, MDC_PREC_FP32);
}
