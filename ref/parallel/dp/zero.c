/* ZeRO stages 1, 2, 3 (Rajbhandari et al., SC'20) on the layout of include/minidc/dp.h.
 *
 * ZeRO-1: the optimizer state is sharded. Gradients are reduce-scattered (each rank receives the
 *   sum over ranks of its shard only), AdamW updates the shard of the (full, replicated)
 *   parameters, and an allgather brings every rank the others' updated shards.
 * ZeRO-2: as ZeRO-1, but a unit's full gradient lives only from its backward until its bucket is
 *   reduce-scattered; then only the shard is kept (accumulated over micro-batches).
 * ZeRO-3 / FSDP: the parameters are sharded too; a unit is allgathered before it is used and
 *   freed after use (dp.h gives the schedule), the update touches only the shard.
 * The gradient-norm clip needs the global norm: each rank sums the squares of its shard (in
 * double), one allreduce adds them. AdamW is elementwise, so updating each shard with each
 * tensor's own weight decay gives exactly the serial update of those elements.
 * The model's full-size parameter/gradient arrays live in uncharged host memory where a stage
 * shards them (model.h flags); what is really resident is charged here with mdc_dev_alloc:
 * shards, gathered units (parameters), live full gradients (gradients), buckets (comm). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dp_internal.h"

/* Rank q's piece of unit u: unit-local [q s_u, min((q+1) s_u, n_u)). */
size_t mdc_dp_i_piece(const mdc_dp *dp, int u, int q, size_t *lo) {
    size_t a = (size_t)q * dp->us[u], b = a + dp->us[u];
    if (a > dp->ucount[u]) a = dp->ucount[u];
    if (b > dp->ucount[u]) b = dp->ucount[u];
    *lo = a;
    return b - a;
}

void mdc_dp_i_pack(const mdc_dp *dp, const dp_bucket *b, float *buf, const float *full, int only_q) {
    if (mdc_host_dry()) return; /* a dry run moves no values */
    for (int q = 0; q < dp->N; q++) {
        if (only_q >= 0 && q != only_q) continue;
        float *blk = buf + (size_t)q * b->block;
        for (int u = b->lo; u <= b->hi; u++) {
            size_t lo, n = mdc_dp_i_piece(dp, u, q, &lo);
            memcpy(blk, full + dp->uoff[u] + lo, n * sizeof(float));
            memset(blk + n, 0, (dp->us[u] - n) * sizeof(float));
            blk += dp->us[u];
        }
    }
}

void mdc_dp_i_unpack(const mdc_dp *dp, const dp_bucket *b, const float *buf, float *full, int only_q) {
    if (mdc_host_dry()) return; /* a dry run moves no values */
    for (int q = 0; q < dp->N; q++) {
        if (only_q >= 0 && q != only_q) continue;
        const float *blk = buf + (size_t)q * b->block;
        for (int u = b->lo; u <= b->hi; u++) {
            size_t lo, n = mdc_dp_i_piece(dp, u, q, &lo);
            memcpy(full + dp->uoff[u] + lo, blk, n * sizeof(float));
            blk += dp->us[u];
        }
    }
}

void mdc_zero_i_shard_to_full(const mdc_dp *dp, int q, const float *shard, float *full) {
    for (int u = 0; u < dp->nunits; u++) {
        size_t lo, n = mdc_dp_i_piece(dp, u, q, &lo);
        memcpy(full + dp->uoff[u] + lo, shard + dp->shoff[u], n * sizeof(float));
    }
}

void mdc_zero_i_full_to_shard(const mdc_dp *dp, int q, const float *full, float *shard) {
    if (mdc_host_dry()) return; /* a dry run moves no values */
    for (int u = 0; u < dp->nunits; u++) {
        size_t lo, n = mdc_dp_i_piece(dp, u, q, &lo);
        memcpy(shard + dp->shoff[u], full + dp->uoff[u] + lo, n * sizeof(float));
        memset(shard + dp->shoff[u] + n, 0, (dp->us[u] - n) * sizeof(float));
    }
}

void mdc_zero_i_round_shard(mdc_dp *dp) {
    if (!dp->shard16 || mdc_host_dry()) return;
    memcpy(dp->shard16, dp->shard_p, dp->S * sizeof(float));
    mdc_round_half(dp->shard16, dp->S, dp->half == MDC_BF16 ? MDC_PRECISION_BF16 : MDC_PRECISION_FP16);
}

mdc_status mdc_zero_i_alloc(mdc_dp *dp) {
    int z = dp->dc.zero;
    if (!z) return MDC_OK;
    size_t sb = dp->S * sizeof(float);
    mdc_status st;
    if ((st = mdc_dev_alloc(dp->dev, (void **)&dp->shard_m, sb, MDC_MEM_OPTIM, "zero.adam.m")) ||
        (st = mdc_dev_alloc(dp->dev, (void **)&dp->shard_v, sb, MDC_MEM_OPTIM, "zero.adam.v")))
        return st;
    if (z >= 2) { /* bf16 gradients: charged 2 bytes an element */
        if ((st = mdc_dev_alloc_held(dp->dev, (void **)&dp->shard_g, sb, sb / 4 * mdc_dp_i_gwidth(dp), MDC_MEM_GRADS,
                                     "zero.grad_shard")))
            return st;
        dp->live = calloc((size_t)dp->nunits, sizeof(void *));
        if (!dp->live) return mdc_fail(MDC_ERR_OOM_HOST, "zero");
    }
    float *P = mdc_gpt2_params(dp->m);
    if (z == 3 || dp->master) { /* in 16 bits the fp32 master shard is optimizer state, as m and v */
        int h = dp->half != MDC_F32;
        if ((st = mdc_dev_alloc(dp->dev, (void **)&dp->shard_p, sb, h ? MDC_MEM_OPTIM : MDC_MEM_PARAMS,
                                h ? "zero.master_shard" : "zero.param_shard")))
            return st;
        mdc_zero_i_full_to_shard(dp, dp->r, P, dp->shard_p);
    }
    if (dp->master) return mdc_gpt2_master_to_host(dp->m); /* the full fp32 array: no longer resident */
    if (z == 3) {
        if (dp->half != MDC_F32) {
            if ((st = mdc_dev_alloc_held(dp->dev, (void **)&dp->shard16, sb, sb / 2, MDC_MEM_PARAMS,
                                         "zero.param_shard (16-bit)")))
                return st;
            mdc_zero_i_round_shard(dp);
        }
        dp->gathered = calloc((size_t)dp->nunits, sizeof(float *));
        dp->prefetched = calloc((size_t)dp->nunits, 1);
        if (!dp->gathered || !dp->prefetched) return mdc_fail(MDC_ERR_OOM_HOST, "zero");
        if (dp->dc.poison && !mdc_host_dry())
            for (size_t i = 0; i < dp->psi; i++) P[i] = NAN;
    }
    return MDC_OK;
}

void mdc_zero_i_free(mdc_dp *dp) {
    for (int u = 0; u < dp->nunits; u++) {
        if (dp->gathered) mdc_dev_free(dp->dev, dp->gathered[u]);
        if (dp->live) mdc_dev_free(dp->dev, dp->live[u]);
    }
    free(dp->gathered), free(dp->live), free(dp->prefetched);
    mdc_dev_free(dp->dev, dp->shard_p), mdc_dev_free(dp->dev, dp->shard_g), mdc_dev_free(dp->dev, dp->shard16);
    mdc_dev_free(dp->dev, dp->shard_m), mdc_dev_free(dp->dev, dp->shard_v);
}

/* ZeRO-3: allgather unit u into a charged buffer (rank-major pieces) and lay it out where the
 * model reads it. A no-op if it is already resident. */
mdc_status mdc_zero_i_gather(mdc_dp *dp, int u) {
    if (dp->gathered[u]) return MDC_OK;
    size_t s = dp->us[u];
    char name[32];
    snprintf(name, sizeof name, "zero3.unit%d", u);
    size_t n = s * (size_t)dp->N, held = n * sizeof(float);
    int h = dp->half != MDC_F32, bf = dp->half == MDC_BF16; /* 16 bits: the 16-bit shard, 2 bytes an element */
    mdc_status st = mdc_dev_alloc_held(dp->dev, (void **)&dp->gathered[u], held, h ? held / 2 : held, MDC_MEM_PARAMS,
                                       name);
    if (st) return st;
    float *buf = dp->gathered[u];
    if (h) mdc_pack_half((uint16_t *)buf + (size_t)dp->r * s, dp->shard16 + dp->shoff[u], s, bf);
    else memcpy(buf + (size_t)dp->r * s, dp->shard_p + dp->shoff[u], s * sizeof(float));
    double b0 = mdc_dev_bytes_sent(dp->dev);
    st = mdc_allgather(MDC_IN_PLACE, buf, s, h ? dp->half : MDC_F32, dp->g);
    dp->step_bytes += mdc_dev_bytes_sent(dp->dev) - b0;
    if (st) return st;
    if (h) mdc_unpack_half(buf, buf, n, bf);
    dp_bucket one = {u, u, s};
    mdc_dp_i_unpack(dp, &one, buf, mdc_gpt2_params(dp->m), -1);
    return MDC_OK;
}

void mdc_zero_i_release(mdc_dp *dp, int u) {
    if (!dp->gathered[u]) return;
    mdc_dev_free(dp->dev, dp->gathered[u]);
    dp->gathered[u] = NULL;
    if (dp->dc.poison && !mdc_host_dry()) {
        float *P = mdc_gpt2_params(dp->m) + dp->uoff[u];
        for (size_t i = 0; i < dp->ucount[u]; i++) P[i] = NAN;
    }
}

/* ZeRO-2/3: unit u's full gradient becomes resident (it is reduce-scattered and dropped with
 * its bucket). The data lives in the model's host array; this allocation charges it. */
mdc_status mdc_zero_i_live(mdc_dp *dp, int u) {
    if (dp->live[u]) return MDC_OK;
    char name[32];
    snprintf(name, sizeof name, "zero.grad.unit%d", u);
    size_t held = dp->ucount[u] * sizeof(float);
    return mdc_dev_alloc_held(dp->dev, &dp->live[u], held, held / 4 * mdc_dp_i_gwidth(dp), MDC_MEM_GRADS, name);
}

mdc_status mdc_zero_i_reduce_bucket(mdc_dp *dp, const dp_bucket *b, float *buf) {
    float *G = mdc_gpt2_grads(dp->m);
    mdc_dp_i_pack(dp, b, buf, G, -1);
    if (dp->grad_dtype == MDC_BF16) mdc_pack_half(buf, buf, b->block * (size_t)dp->N, 1); /* bf16 in place */
    mdc_status st = mdc_reduce_scatter(MDC_IN_PLACE, buf, b->block, dp->grad_dtype, MDC_SUM, dp->g);
    if (st) return st;
    if (dp->grad_dtype == MDC_BF16) mdc_unpack_half(buf, buf, b->block, 1); /* this rank's reduced block, first */
    if (dp->dc.zero == 1) { /* the reduced shard goes back into the (full) gradient array */
        for (int u = b->lo; u <= b->hi; u++) {
            size_t lo, n = mdc_dp_i_piece(dp, u, dp->r, &lo);
            memcpy(G + dp->uoff[u] + lo, buf + (dp->shoff[u] - dp->shoff[b->lo]), n * sizeof(float));
        }
        return MDC_OK;
    }
    /* ZeRO-2/3: accumulate into the gradient shard; the full gradient is dropped (zeroed for
     * the next micro-batch's backward, which adds to it) */
    float *dst = dp->shard_g + dp->shoff[b->lo];
    int dry = mdc_host_dry(); /* a prediction moves and adds no values */
    for (size_t i = 0; i < b->block && !dry; i++) dst[i] += buf[i];
    if (dp->grad_dtype == MDC_BF16) mdc_round_half(dst, b->block, MDC_PRECISION_BF16); /* a bf16 buffer */
    mdc_dev_kernel(dp->dev, (double)b->block, 12.0 * (double)b->block, MDC_PREC_FP32);
    for (int u = b->lo; u <= b->hi; u++) {
        if (!dry) memset(G + dp->uoff[u], 0, dp->ucount[u] * sizeof(float));
        mdc_dev_free(dp->dev, dp->live[u]);
        dp->live[u] = NULL;
    }
    return MDC_OK;
}

/* Calls fn on each run of this rank's shard that lies in one tensor: the tensor's local index,
 * flat offset, length, shard offset. */
typedef void (*seg_fn)(mdc_dp *dp, int ti, size_t flat, size_t n, size_t sh, void *ctx);
/* Calls fn on this rank's shard segments of units ulo..uhi, split at tensor boundaries. */
static void for_each_segment_in(mdc_dp *dp, int ulo, int uhi, seg_fn fn, void *ctx) {
    for (int u = ulo; u <= uhi; u++) {
        size_t lo, n = mdc_dp_i_piece(dp, u, dp->r, &lo);
        size_t a = dp->uoff[u] + lo, e = a + n;
        for (int i = 0; i < dp->ntensors && a < e; i++) {
            const mdc_param_tensor *t = &dp->tensors[i];
            size_t ta = t->offset, te = t->offset + t->alloc;
            if (te <= a || ta >= e) continue;
            size_t s0 = a > ta ? a : ta, s1 = e < te ? e : te;
            fn(dp, i, s0, s1 - s0, dp->shoff[u] + (s0 - dp->uoff[u] - lo), ctx);
        }
    }
}

static void for_each_segment(mdc_dp *dp, seg_fn fn, void *ctx) { for_each_segment_in(dp, 0, dp->nunits - 1, fn, ctx); }

static float *grad_ptr(mdc_dp *dp, size_t flat, size_t sh) {
    return dp->dc.zero == 1 ? mdc_gpt2_grads(dp->m) + flat : dp->shard_g + sh;
}
static float *param_ptr(mdc_dp *dp, size_t flat, size_t sh) {
    return dp->shard_p ? dp->shard_p + sh : mdc_gpt2_params(dp->m) + flat;
}

typedef struct {
    double s, n;
    const char *skip;
} sumsq_ctx;
static void seg_sumsq(mdc_dp *dp, int ti, size_t flat, size_t n, size_t sh, void *ctx) {
    sumsq_ctx *c = ctx;
    if (c->skip && c->skip[ti]) return;
    c->n += (double)n;
    if (mdc_dev_dry(dp->dev)) return;
    const float *g = grad_ptr(dp, flat, sh);
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * g[i];
    c->s += s;
}

/* One kernel over the shard's segments, as a multi-tensor L2 norm launches one: every shard
 * then costs the same, however many tensors its range cuts. */
void mdc_zero_i_sumsq(mdc_dp *dp, const char *skip, double *s) {
    sumsq_ctx c = {0, 0, skip};
    for_each_segment(dp, seg_sumsq, &c);
    *s += c.s;
    mdc_dev_kernel(dp->dev, 2.0 * c.n, 4.0 * c.n, MDC_PREC_FP32);
}

typedef struct {
    mdc_dp_seg_fn fn;
    void *ctx;
} visit_ctx;
static void seg_visit(mdc_dp *dp, int ti, size_t flat, size_t n, size_t sh, void *ctx) {
    visit_ctx *v = ctx;
    v->fn(v->ctx, ti, flat - dp->tensors[ti].offset, grad_ptr(dp, flat, sh), param_ptr(dp, flat, sh), n);
}

void mdc_dp_for_each_segment(mdc_dp *dp, mdc_dp_seg_fn fn, void *ctx) {
    if (dp->dc.zero == 0) { /* DDP: every tensor whole */
        float *G = mdc_gpt2_grads(dp->m), *Pm = mdc_gpt2_params(dp->m);
        for (int i = 0; i < dp->ntensors; i++)
            fn(ctx, i, 0, G + dp->tensors[i].offset, Pm + dp->tensors[i].offset, dp->tensors[i].alloc);
        return;
    }
    visit_ctx v = {fn, ctx};
    for_each_segment(dp, seg_visit, &v);
}

typedef struct {
    const mdc_adamw_config *o;
    float scale;
    size_t n; /* elements updated since the last charge */
} upd_ctx;

/* Each segment updated uncharged; the caller charges the segments as one multi-tensor launch
 * (mdc_adamw_charge), so every shard costs the same however many tensors its range cuts. */
static void seg_adamw(mdc_dp *dp, int ti, size_t flat, size_t n, size_t sh, void *ctx) {
    upd_ctx *c = ctx;
    int decay = dp->tensors[ti].decay;
    float *p = param_ptr(dp, flat, sh);
    c->n += n;
    if (!mdc_dev_dry(dp->dev))
        mdc_adamw_update(NULL, p, dp->shard_m + sh, dp->shard_v + sh, grad_ptr(dp, flat, sh), n, c->o->lr, c->o->beta1,
                         c->o->beta2, c->o->eps, decay ? c->o->weight_decay : 0.0f, c->scale, dp->t);
}

mdc_status mdc_zero_i_update(mdc_dp *dp, const mdc_adamw_config *o, double norm) {
    upd_ctx c = {o, mdc_clip_scale(norm, o->grad_clip), 0};
    dp->t++;
    if (dp->dc.zero == 3) {
        for_each_segment(dp, seg_adamw, &c);
        mdc_adamw_charge(dp->dev, c.n);
        if (!mdc_host_dry()) memset(dp->shard_g, 0, dp->S * sizeof(float));
        mdc_zero_i_round_shard(dp);
        return MDC_OK; /* the shards are the parameters; units are gathered when used */
    }
    /* ZeRO-1/2, bucket by bucket: update this rank's piece, then allgather everyone's into the
     * replicated parameters on the comm stream (double-buffered), so the allgather of one
     * bucket overlaps the update of the next. AdamW is elementwise: the order of the buckets
     * changes no result. The step ends when the last allgather is done. */
    float *P = mdc_gpt2_params(dp->m);
    mdc_status st = MDC_OK;
    for (int i = 0; i < dp->nbuckets && !st; i++) {
        const dp_bucket *b = &dp->b[i];
        c.n = 0;
        for_each_segment_in(dp, b->lo, b->hi, seg_adamw, &c);
        mdc_adamw_charge(dp->dev, c.n);
        float *buf = dp->bucket_buf[i & 1];
        mdc_dev_stream_begin(dp->dev, &dp->stream);
        size_t n = b->block * (size_t)dp->N;
        int bf = dp->half == MDC_BF16;
        if (dp->master) { /* 16 bits: this rank's updated master piece, gathered in the dtype */
            float *own = buf + (size_t)dp->r * b->block;
            memcpy(own, dp->shard_p + dp->shoff[b->lo], b->block * sizeof(float));
            mdc_pack_half(buf, buf, n, bf);
        } else mdc_dp_i_pack(dp, b, buf, P, dp->r);
        double b0 = mdc_dev_bytes_sent(dp->dev);
        st = mdc_allgather(MDC_IN_PLACE, buf, b->block, dp->master ? dp->half : MDC_F32, dp->g);
        dp->step_bytes += mdc_dev_bytes_sent(dp->dev) - b0;
        if (!st && dp->master) mdc_unpack_half(buf, buf, n, bf);
        if (!st) mdc_dp_i_unpack(dp, b, buf, P, -1);
        mdc_dev_stream_end(dp->dev, &dp->stream);
    }
    mdc_dev_stream_join(dp->dev, &dp->stream);
    if (dp->dc.zero == 2 && !mdc_host_dry()) memset(dp->shard_g, 0, dp->S * sizeof(float)); /* next step adds */
    return st;
}
