/* Data parallelism as a gradient-sync component attached to a model's local layout (any
 * partition: the serial model, a tensor-parallel shard): the object, gradient buckets, DDP.
 *
 * DDP (Li et al., PyTorch Distributed, VLDB 2020): every rank holds the whole model, computes
 * gradients on its rows, and the gradients are summed across ranks bucket by bucket as backward
 * completes them, each bucket's allreduce overlapping the rest of backward (comm stream). Each
 * rank's backward is scaled by 1 / (global tokens) (the step's choice, ref/train/train.c), so the SUM
 * over ranks is the serial gradient of the mean loss (no division afterwards). Every rank then
 * runs the serial AdamW on identical gradients, so the replicas stay identical. Gradient
 * accumulation: the gradients of the micro-batches add up locally; only the last
 * micro-batch's backward reduces. The step loop itself is ref/train/train.c's, shared by every mesh.
 * ZeRO stages: ref/parallel/dp/zero.c. Layout, buckets and formulas: include/minidc/dp.h and
 * docs/data-parallel.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dp_internal.h"

size_t mdc_dp_default_bucket_bytes(const mdc_gpt2_config *cfg) {
    size_t p = mdc_gpt2_param_floats(cfg) * sizeof(float) / 4, cap = (size_t)25 << 20;
    return p < cap ? p : cap;
}

const char *mdc_dp_stage_name(int zero) {
    static const char *const names[4] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
    return zero >= 0 && zero < 4 ? names[zero] : "?";
}

unsigned mdc_dp_model_flags(int zero) {
    return (zero >= 2 ? MDC_GPT2_HOST_GRADS : 0) | (zero == 3 ? MDC_GPT2_HOST_PARAMS : 0);
}

mdc_gpt2 *mdc_dp_model(mdc_dp *dp) { return dp->m; }
int mdc_dp_adam_step(const mdc_dp *dp) { return dp->dc.zero ? dp->t : mdc_gpt2_adam_step(dp->m); }

/* A bucket is ready when its lowest unit's gradients are complete (backward runs L+1 .. 0). */
static mdc_status reduce_bucket(mdc_dp *dp, const dp_bucket *b) {
    float *buf = dp->bucket_buf[dp->next_buf];
    dp->next_buf ^= 1;
    mdc_dev_stream_begin(dp->dev, &dp->stream);
    double b0 = mdc_dev_bytes_sent(dp->dev);
    mdc_status st;
    if (dp->dc.zero == 0) {
        /* pack, allreduce (sum) the padded bucket, unpack every block back into the grads */
        float *G = mdc_gpt2_grads(dp->m);
        size_t n = b->block * (size_t)dp->N;
        mdc_dp_i_pack(dp, b, buf, G, -1);
        if (dp->grad_dtype == MDC_BF16) mdc_pack_half(buf, buf, n, 1); /* bf16 in place */
        st = mdc_allreduce(MDC_IN_PLACE, buf, n, dp->grad_dtype, MDC_SUM, dp->g);
        if (!st && dp->grad_dtype == MDC_BF16) mdc_unpack_half(buf, buf, n, 1);
        if (!st) mdc_dp_i_unpack(dp, b, buf, G, -1);
    } else {
        st = mdc_zero_i_reduce_bucket(dp, b, buf);
    }
    dp->step_bytes += mdc_dev_bytes_sent(dp->dev) - b0;
    mdc_dev_stream_end(dp->dev, &dp->stream);
    return st;
}

/* ZeRO-3: unit u must be resident now. If it was prefetched, compute waits for the gather
 * stream (in virtual time; the data is already there); else it is gathered here. Then, with
 * prefetch, unit `next` (-1: none) is gathered on the gather stream, overlapping u's compute
 * (its messages still queue on the same links as the reductions'). Results and bytes sent do
 * not change; peak parameter memory holds one more unit. One rank has nothing to prefetch. */
static mdc_status zero3_use(mdc_dp *dp, int u, int next) {
    mdc_status st = MDC_OK;
    if (dp->prefetched[u]) {
        mdc_dev_stream_join(dp->dev, &dp->gather_stream);
        dp->prefetched[u] = 0;
    } else {
        st = mdc_zero_i_gather(dp, u); /* a no-op if still resident (wte, the head) */
    }
    if (st || !dp->dc.prefetch || dp->N == 1 || next < 0 || next >= dp->nunits || dp->gathered[next]) return st;
    mdc_dev_stream_begin(dp->dev, &dp->gather_stream);
    st = mdc_zero_i_gather(dp, next);
    mdc_dev_stream_end(dp->dev, &dp->gather_stream);
    if (!st) dp->prefetched[next] = 1;
    return st;
}

static mdc_status hook(void *ctx, mdc_gpt2_hook_event ev, int u) {
    mdc_dp *dp = ctx;
    int head = dp->nunits - 1, z = dp->dc.zero;
    mdc_status st = MDC_OK;
    switch (ev) {
    case MDC_HOOK_PRE_FORWARD:
        if (z == 3) st = zero3_use(dp, u, u + 1); /* the head's wte (unit 0) is still gathered */
        break;
    case MDC_HOOK_POST_FORWARD:
        if (z == 3 && u != 0 && u != head) mdc_zero_i_release(dp, u);
        break;
    case MDC_HOOK_PRE_BACKWARD:
        if (z == 3) st = zero3_use(dp, u, u - 1); /* no-op for the head and the embedding */
        if (!st && z >= 2 && dp->red->in_backward) st = mdc_zero_i_live(dp, u);
        if (!st && z >= 2 && dp->red->in_backward && u == head)
            st = mdc_zero_i_live(dp, 0); /* the LM head adds to wte's grad */
        break;
    case MDC_HOOK_POST_BACKWARD: {
        const dp_bucket *b = &dp->b[dp->unit_bucket[u]];
        if (u == b->lo && dp->red->in_backward && !dp->defer && (z >= 2 || dp->micro == dp->dc.accum - 1) &&
            (z || dp->N > 1))
            st = reduce_bucket(dp, b);
        if (!st && z == 3) mdc_zero_i_release(dp, u);
        break;
    }
    }
    return st;
}

void mdc_dp_free(mdc_dp *dp) {
    if (!dp) return;
    mdc_zero_i_free(dp);
    for (int i = 0; i < 2; i++) mdc_dev_free(dp->dev, dp->bucket_buf[i]);
    mdc_dev_free(dp->dev, dp->xbuf);
    if (dp->m) mdc_gpt2_set_hooks(dp->m, NULL);
    if (dp->owns_model) mdc_gpt2_free(dp->m);
    free(dp->uoff), free(dp->ucount), free(dp->us), free(dp->shoff);
    free(dp->tensors), free(dp->unit_bucket), free(dp->b);
    free(dp);
}

mdc_status mdc_dp_attach(mdc_dp **out, mdc_group *g, mdc_gpt2 *m, const mdc_dp_config *dc) {
    *out = NULL;
    if (dc->zero < 0 || dc->zero > 3) return mdc_fail(MDC_ERR_INVALID, "--zero %d: must be 0, 1, 2 or 3", dc->zero);
    if (dc->accum <= 0) return mdc_fail(MDC_ERR_INVALID, "--accum %d: must be positive", dc->accum);
    unsigned where = MDC_GPT2_HOST_PARAMS | MDC_GPT2_HOST_GRADS; /* the flags of residency, which ZeRO owns */
    if ((mdc_gpt2_flags(m) & where) != mdc_dp_model_flags(dc->zero))
        return mdc_fail(MDC_ERR_INVALID, "mdc_dp_attach: a ZeRO-%d model must be created with mdc_dp_model_flags(%d)",
                        dc->zero, dc->zero);
    mdc_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return mdc_fail(MDC_ERR_OOM_HOST, "mdc_dp_attach");
    mdc_status st = MDC_OK;
    dp->dc = *dc;
    dp->m = m;
    dp->cfg = *mdc_gpt2_get_config(m);
    if (!dp->dc.bucket_bytes) dp->dc.bucket_bytes = mdc_dp_default_bucket_bytes(&dp->cfg);
    dp->g = g;
    dp->N = mdc_group_size(g);
    dp->r = mdc_group_rank(g);
    dp->dev = mdc_gpt2_device(m);
    dp->psi = mdc_gpt2_local_floats(m);
    dp->nunits = mdc_gpt2_unit_count(&dp->cfg);
    dp->ntensors = mdc_gpt2_local_count(m);
    int U = dp->nunits;
    dp->uoff = calloc((size_t)U, sizeof(size_t)), dp->ucount = calloc((size_t)U, sizeof(size_t));
    dp->us = calloc((size_t)U, sizeof(size_t)), dp->shoff = calloc((size_t)U, sizeof(size_t));
    dp->tensors = calloc((size_t)dp->ntensors, sizeof *dp->tensors);
    dp->unit_bucket = calloc((size_t)U, sizeof(int)), dp->b = calloc((size_t)U, sizeof *dp->b);
    if (!dp->uoff || !dp->ucount || !dp->us || !dp->shoff || !dp->tensors || !dp->unit_bucket || !dp->b) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "mdc_dp_attach");
        goto fail;
    }
    for (int i = 0; i < dp->ntensors; i++) dp->tensors[i] = *mdc_gpt2_local_tensor(m, i);
    for (int u = 0; u < U; u++) {
        mdc_gpt2_local_unit(m, u, &dp->uoff[u], &dp->ucount[u]);
        dp->us[u] = (dp->ucount[u] + (size_t)dp->N - 1) / (size_t)dp->N;
        dp->shoff[u] = dp->S;
        dp->S += dp->us[u];
    }
    /* buckets: consecutive units in backward order (U-1 .. 0), closed at the bucket size */
    size_t maxblock = 0;
    for (int u = U - 1; u >= 0;) {
        dp_bucket *b = &dp->b[dp->nbuckets];
        b->hi = u;
        size_t bytes = 0;
        while (u >= 0 && (bytes == 0 || bytes < dp->dc.bucket_bytes)) {
            bytes += dp->ucount[u] * sizeof(float);
            b->block += dp->us[u];
            dp->unit_bucket[u] = dp->nbuckets;
            b->lo = u--;
        }
        if (b->block > maxblock) maxblock = b->block;
        dp->nbuckets++;
    }
    if (dp->N > 1 || dp->dc.zero) /* N = 1 DDP needs no buckets */
        for (int i = 0; i < 2; i++)
            if ((st = mdc_dev_alloc(dp->dev, (void **)&dp->bucket_buf[i], maxblock * (size_t)dp->N * sizeof(float),
                                    MDC_MEM_COMM, i ? "dp.bucket1" : "dp.bucket0")))
                goto fail;
    dp->maxblock = maxblock;
    dp->red = mdc_gpt2_grad_dtype(m) == MDC_F32 ? &mdc_dp_i_floats : &mdc_dp_i_sums;
    dp->grad_dtype = mdc_gpt2_grad16(m) ? MDC_BF16 : MDC_F32;
    int prec = mdc_gpt2_get_precision(m);
    dp->half = prec == MDC_PRECISION_BF16 ? MDC_BF16 : prec == MDC_PRECISION_FP16 ? MDC_F16 : MDC_F32;
    dp->master = dp->half != MDC_F32 && (dc->zero == 1 || dc->zero == 2);
    if ((st = mdc_zero_i_alloc(dp))) goto fail;
    mdc_gpt2_hooks h = {hook, dp};
    mdc_gpt2_set_hooks(dp->m, &h);
    *out = dp;
    return MDC_OK;
fail:
    mdc_dp_free(dp);
    return st;
}

mdc_status mdc_dp_create(mdc_dp **out, mdc_group *g, const mdc_gpt2_config *cfg_in, const mdc_dp_config *dc,
                         uint64_t seed) {
    *out = NULL;
    if (dc->micro_batch <= 0 || dc->accum <= 0)
        return mdc_fail(MDC_ERR_INVALID, "micro-batch %d x accumulation %d: both must be positive", dc->micro_batch,
                        dc->accum);
    if (dc->zero < 0 || dc->zero > 3) return mdc_fail(MDC_ERR_INVALID, "--zero %d: must be 0, 1, 2 or 3", dc->zero);
    mdc_gpt2 *m = NULL;
    mdc_status st = mdc_gpt2_create_flags(&m, mdc_transport_device(mdc_group_transport(g)), cfg_in, dc->micro_batch,
                                          dc->seq, mdc_dp_model_flags(dc->zero));
    if (st) return st;
    mdc_gpt2_init(m, seed);
    if ((st = mdc_dp_attach(out, g, m, dc))) {
        mdc_gpt2_free(m);
        return st;
    }
    (*out)->owns_model = 1;
    return MDC_OK;
}

void mdc_dp_begin_micro(mdc_dp *dp, int k) { dp->micro = k; }
void mdc_dp_defer(mdc_dp *dp) { dp->defer = 1; }

mdc_status mdc_dp_finish(mdc_dp *dp) {
    mdc_dev_stream_join(dp->dev, &dp->stream);        /* the last bucket's reduction must be done */
    mdc_dev_stream_join(dp->dev, &dp->gather_stream); /* (no prefetch outlives a step) */
    return dp->red->finish(dp);
}

/* floats: a pipeline stage's buckets (deferred) reduce now; the others already did */
static mdc_status float_finish(mdc_dp *dp) {
    mdc_status st = MDC_OK;
    for (int i = 0; dp->defer && (dp->dc.zero || dp->N > 1) && !st && i < dp->nbuckets; i++)
        st = reduce_bucket(dp, &dp->b[i]);
    mdc_dev_stream_join(dp->dev, &dp->stream);
    return st;
}

void mdc_dp_begin_step(mdc_dp *dp) { dp->step_bytes = 0; }

void mdc_dp_sumsq(mdc_dp *dp, const char *skip, void *slot) { dp->red->sumsq(dp, skip, slot); }

static void float_sumsq(mdc_dp *dp, const char *skip, void *slot) {
    double *s = slot;
    if (dp->dc.zero) {
        mdc_zero_i_sumsq(dp, skip, s);
    } else { /* the replicas are identical: rank 0 counts them; the others run the same kernels dry (each
                replica computes the norm on a GPU, so every rank of the mesh takes the same time) */
        float *G = mdc_gpt2_grads(dp->m);
        int dry = mdc_dev_dry(dp->dev);
        if (dp->r) mdc_dev_set_dry(dp->dev, 1);
        double mine = 0;
        if (!skip) mine += mdc_gpt2_grad_sumsq(dp->m);
        for (int i = 0; skip && i < dp->ntensors; i++)
            if (!skip[i]) mine += mdc_grad_sumsq(dp->dev, G + dp->tensors[i].offset, dp->tensors[i].alloc);
        mdc_dev_set_dry(dp->dev, dry);
        if (dp->r == 0) *s += mine;
    }
}

const dp_reducer mdc_dp_i_floats = {1, float_finish, float_sumsq};

mdc_status mdc_dp_update(mdc_dp *dp, const mdc_adamw_config *o, double norm) {
    mdc_status st = dp->dc.zero == 0 ? mdc_gpt2_adamw_all(dp->m, o, mdc_clip_scale(norm, o->grad_clip))
                                     : mdc_zero_i_update(dp, o, norm);
    for (int i = 0; i < 3; i++) dp->mem_after[i] = mdc_dev_mem_in_use(dp->dev, (mdc_mem_category)i);
    return st;
}

mdc_group *mdc_dp_group(mdc_dp *dp) { return dp->g; }
const mdc_dp_config *mdc_dp_get_config(const mdc_dp *dp) { return &dp->dc; }

mdc_status mdc_dp_gather_state(mdc_dp *dp, float *params, float *m, float *v, int root) {
    int z = dp->dc.zero, me = dp->r == root;
    size_t bytes = dp->psi * sizeof(float);
    if (z == 0) {
        if (me) {
            memcpy(params, mdc_gpt2_params(dp->m), bytes);
            float *am = mdc_gpt2_adam_m(dp->m), *av = mdc_gpt2_adam_v(dp->m);
            if (m) am ? (void)memcpy(m, am, bytes) : (void)memset(m, 0, bytes);
            if (v) av ? (void)memcpy(v, av, bytes) : (void)memset(v, 0, bytes);
        }
        return MDC_OK;
    }
    /* gather the shards to root (rank-major: rank q's S floats at q S), then lay them out */
    size_t S = dp->S, N = (size_t)dp->N;
    float *all = me ? malloc(S * N * sizeof(float)) : NULL;
    if (me && !all) return mdc_fail(MDC_ERR_OOM_HOST, "gathering %zu floats of ZeRO shards", S * N);
    /* the parameters: the fp32 shards where they are (ZeRO-3, a 16-bit run's master), else the replica */
    float *src[3] = {dp->shard_p, dp->shard_m, dp->shard_v}, *dst[3] = {params, m, v};
    mdc_status st = MDC_OK;
    if (!dp->shard_p && me) memcpy(params, mdc_gpt2_params(dp->m), bytes);
    for (int k = 0; k < 3 && !st; k++) {
        if (!src[k]) continue;
        st = mdc_gather(src[k], all, S, MDC_F32, root, dp->g);
        if (!st && me && dst[k]) {
            memset(dst[k], 0, bytes);
            for (int q = 0; q < dp->N; q++) mdc_zero_i_shard_to_full(dp, q, all + (size_t)q * S, dst[k]);
        }
    }
    free(all);
    return st;
}

mdc_status mdc_dp_load_state(mdc_dp *dp, const float *params, const float *m, const float *v, int adam_step) {
    size_t bytes = dp->psi * sizeof(float);
    if (adam_step < 0) return mdc_fail(MDC_ERR_INVALID, "AdamW step %d < 0", adam_step);
    memcpy(mdc_gpt2_params(dp->m), params, bytes);
    if (dp->dc.zero == 0) {
        if (adam_step > 0) {
            mdc_status st = mdc_gpt2_set_adam_step(dp->m, adam_step);
            if (st) return st;
            float *am = mdc_gpt2_adam_m(dp->m), *av = mdc_gpt2_adam_v(dp->m);
            m ? (void)memcpy(am, m, bytes) : (void)memset(am, 0, bytes);
            v ? (void)memcpy(av, v, bytes) : (void)memset(av, 0, bytes);
        }
        return MDC_OK;
    }
    dp->t = adam_step;
    size_t sb = dp->S * sizeof(float);
    m ? mdc_zero_i_full_to_shard(dp, dp->r, m, dp->shard_m) : (void)memset(dp->shard_m, 0, sb);
    v ? mdc_zero_i_full_to_shard(dp, dp->r, v, dp->shard_v) : (void)memset(dp->shard_v, 0, sb);
    if (dp->shard_p) mdc_zero_i_full_to_shard(dp, dp->r, params, dp->shard_p);
    mdc_zero_i_round_shard(dp);
    if (dp->dc.zero == 3) {
        if (dp->dc.poison) {
            float *P = mdc_gpt2_params(dp->m);
            for (size_t i = 0; i < dp->psi; i++) P[i] = NAN;
        }
    }
    return MDC_OK;
}

/* ---- figures ---------------------------------------------------------------------------- */
