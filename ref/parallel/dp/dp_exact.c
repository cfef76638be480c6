/* Data parallelism in exact mode (docs/exactness.md): the model keeps its gradients as exact
 * sums through every micro-batch, so nothing is reduced during backward; at the step's end
 * each bucket goes over the data-parallel group as exact sums (mdc_exact_reduce: doubles, and
 * accumulators for the few elements whose double sum would not be exact; DDP: AllReduce; ZeRO:
 * ReduceScatter, once per step for every stage) and each element is rounded to float once, into the replica's gradients (DDP, ZeRO-1) or the shard (ZeRO-2/3). The sum does not
 * depend on the ranks' order or the collective's algorithm, so any dp gives serial's bits. */
#include <stdlib.h>
#include <string.h>

#include "dp_internal.h"

/* Bucket b's exact sums as doubles in blocks (rank-major, zero padding); a NaN names an
 * element whose sum is an accumulator (the pass-2 fetch below finds it). */
static void pack(mdc_dp *dp, const dp_bucket *b, const mdc_xsum *xs) {
    for (int q = 0; q < dp->N; q++) {
        double *blk = dp->xbuf + (size_t)q * b->block;
        for (int u = b->lo; u <= b->hi; u++) {
            size_t lo, n = mdc_dp_i_piece(dp, u, q, &lo);
            memcpy(blk, xs->v + dp->uoff[u] + lo, n * sizeof *blk);
            memset(blk + n, 0, (dp->us[u] - n) * sizeof *blk);
            blk += dp->us[u];
        }
    }
}

typedef struct {
    mdc_dp *dp;
    const dp_bucket *b;
} fetch_ctx;
/* Element i of the packed bucket: its exact sum as an accumulator (padding: the empty sum). */
static void fetch(void *vc, size_t i, mdc_exact *out) {
    fetch_ctx *c = vc;
    mdc_dp *dp = c->dp;
    size_t q = i / c->b->block, k = i % c->b->block;
    mdc_exact_clear(out);
    for (int u = c->b->lo; u <= c->b->hi; u++) {
        if (k < dp->us[u]) {
            size_t lo, n = mdc_dp_i_piece(dp, u, (int)q, &lo);
            if (k < n) mdc_xsum_get(mdc_gpt2_exact_grads(dp->m), dp->uoff[u] + lo + k, 1, out);
            return;
        }
        k -= dp->us[u];
    }
}

static mdc_status reduce(mdc_dp *dp, const dp_bucket *b) {
    float *G = mdc_gpt2_grads(dp->m), *out = dp->bucket_buf[0];
    size_t n = b->block * (size_t)dp->N;
    mdc_exact_reduce_stats xs;
    pack(dp, b, mdc_gpt2_exact_grads(dp->m));
    fetch_ctx fc = {dp, b};
    double b0 = mdc_dev_bytes_sent(dp->dev);
    mdc_status st = mdc_exact_reduce(dp->xbuf, n, dp->dc.zero > 0, out, fetch, &fc, dp->g, &xs);
    dp->step_bytes += mdc_dev_bytes_sent(dp->dev) - b0;
    dp->exact_marked += xs.marked;
    dp->exact_bytes_want += mdc_exact_reduce_bytes(n, dp->N, dp->dc.zero > 0, &xs);
    if (st) return st;
    if (dp->dc.zero == 0) {
        mdc_dp_i_unpack(dp, b, out, G, -1);
    } else if (dp->dc.zero == 1) { /* the reduced piece back into the replica's gradients */
        for (int u = b->lo; u <= b->hi; u++) {
            size_t lo, k = mdc_dp_i_piece(dp, u, dp->r, &lo);
            memcpy(G + dp->uoff[u] + lo, out + (dp->shoff[u] - dp->shoff[b->lo]), k * sizeof(float));
        }
    } else {
        memcpy(dp->shard_g + dp->shoff[b->lo], out, b->block * sizeof(float));
    }
    mdc_dev_kernel(dp->dev, (double)n, 12.0 * (double)n, MDC_PREC_FP32);
    return MDC_OK;
}

static mdc_status sums_finish(mdc_dp *dp) {
    if (!mdc_xsum_ok(mdc_gpt2_exact_grads(dp->m)))
        return mdc_fail(MDC_ERR_OOM_HOST, "exact gradient sums: an accumulator");
    if (!dp->xbuf) {
        mdc_status st = mdc_dev_alloc(dp->dev, (void **)&dp->xbuf, dp->maxblock * (size_t)dp->N * sizeof(double),
                                      MDC_MEM_COMM, "dp.exact_bucket");
        if (st) return st;
    }
    mdc_status st = MDC_OK;
    dp->exact_marked = 0, dp->exact_bytes_want = 0;
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
static void seg_squares(void *vc, int ti, size_t at, float *grad, float *param, size_t n) {
    (void)param, (void)at;
    sq_ctx *c = vc;
    if (!c->skip || !c->skip[ti]) mdc_exact_add_squares(c->acc, grad, n);
}

static void sums_sumsq(mdc_dp *dp, const char *skip, void *acc) {
    if (dp->dc.zero == 0 && dp->r != 0) return; /* identical replicas: rank 0 counts them */
    sq_ctx c = {acc, skip};
    mdc_dp_for_each_segment(dp, seg_squares, &c);
    mdc_dev_kernel(dp->dev, 2.0 * (double)dp->psi, 4.0 * (double)dp->psi, MDC_PREC_FP32);
}

const dp_reducer mdc_dp_i_sums = {0, sums_finish, sums_sumsq};
