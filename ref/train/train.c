/* The training step every mesh runs (include/minidc/train.h): the micro-batch loop over the
 * block API, the data-parallel component's hooks, SP's tp reduction of replicated gradients,
 * one allreduce of the loss and the squared norm, AdamW. The serial model is a plan with no
 * groups, and then the step is exactly the serial forward, backward and update. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/kernels.h"
#include "minidc/train.h"

mdc_step_plan mdc_step_plan_default(mdc_gpt2 *m) {
    mdc_step_plan p;
    memset(&p, 0, sizeof p);
    p.m = m;
    p.count_loss = p.count_moe = 1;
    p.micro_batch = 1, p.accum = 1, p.seq = 1;
    return p;
}

/* ---- SP: the replicated tensors' partial gradients, summed over tp in one allreduce (and the
 * expert shards' over the tp ranks of the same etp rank in another) ---------------------------- */
typedef struct {
    const char *want;
    float *buf;
    size_t n;
    int unpack, kind;
} sp_ctx;
static void sp_visit(void *vc, int ti, size_t at, float *grad, float *param, size_t n) {
    (void)param, (void)at;
    sp_ctx *c = vc;
    if (c->want[ti] != c->kind) return;
    if (c->buf) {
        if (c->unpack) memcpy(grad, c->buf + c->n, n * sizeof(float));
        else memcpy(c->buf + c->n, grad, n * sizeof(float));
    }
    c->n += n;
}
static void sp_walk(mdc_step_plan *p, sp_ctx *c) {
    c->n = 0;
    if (p->dp) {
        mdc_dp_for_each_segment(p->dp, sp_visit, c);
        return;
    }
    float *G = mdc_gpt2_grads(p->m), *P = mdc_gpt2_params(p->m);
    for (int i = 0; i < mdc_gpt2_local_count(p->m); i++) {
        const mdc_param_tensor *t = mdc_gpt2_local_tensor(p->m, i);
        sp_visit(c, i, 0, G + t->offset, P + t->offset, t->alloc);
    }
}
static mdc_status sp_reduce(mdc_step_plan *p, int kind, mdc_group *g) {
    sp_ctx c = {p->sp_partial, NULL, 0, 0, kind};
    if (!g) return MDC_OK;
    sp_walk(p, &c);
    if (!c.n) return MDC_OK;
    size_t n = c.n, t = (size_t)mdc_group_size(g);
    size_t padded = (n + t - 1) / t * t; /* so the ring's bytes are exactly 2(t-1)/t of it */
    c.buf = calloc(padded, sizeof(float));
    if (!c.buf) return mdc_fail(MDC_ERR_OOM_HOST, "SP gradient reduction (%zu floats)", padded);
    sp_walk(p, &c);
    double b0 = mdc_dev_bytes_sent(mdc_gpt2_device(p->m));
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, c.buf, padded, MDC_F32, MDC_SUM, g);
    p->sp_bytes += mdc_dev_bytes_sent(mdc_gpt2_device(p->m)) - b0;
    c.unpack = 1;
    if (!st) sp_walk(p, &c);
    free(c.buf);
    return st;
}

/* ---- a sink of sums (exact mode): SP's partial gradients summed over tp in the sink's elements,
 * before the data-parallel reduction and the one rounding --------------------------------------- */
static mdc_status sp_reduce_sink(mdc_step_plan *p, int kind, mdc_group *g) {
    mdc_gpt2 *m = p->m;
    if (!g) return MDC_OK;
    size_t n = 0, t = (size_t)mdc_group_size(g);
    int nt = mdc_gpt2_local_count(m);
    for (int i = 0; i < nt; i++)
        if (p->sp_partial[i] == kind) n += mdc_gpt2_local_tensor(m, i)->alloc;
    if (!n) return MDC_OK;
    mdc_dtype dt = mdc_gpt2_grad_dtype(m);
    size_t padded = (n + t - 1) / t * t, el = mdc_dtype_size(dt);
    char *buf = calloc(padded, el); /* zero: empty sums */
    if (!buf) return mdc_fail(MDC_ERR_OOM_HOST, "SP gradient reduction (%zu sums)", padded);
    size_t k = 0;
    for (int i = 0; i < nt; i++) {
        const mdc_param_tensor *q = mdc_gpt2_local_tensor(m, i);
        if (p->sp_partial[i] == kind) mdc_gpt2_grad_pack(m, q->offset, q->alloc, buf + k * el), k += q->alloc;
    }
    double b0 = mdc_dev_bytes_sent(mdc_gpt2_device(m));
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, buf, padded, dt, MDC_SUM, g);
    p->sp_bytes += mdc_dev_bytes_sent(mdc_gpt2_device(m)) - b0;
    k = 0;
    for (int i = 0; !st && i < nt; i++) {
        const mdc_param_tensor *q = mdc_gpt2_local_tensor(m, i);
        if (p->sp_partial[i] == kind) mdc_gpt2_grad_unpack(m, q->offset, q->alloc, buf + k * el), k += q->alloc;
    }
    free(buf);
    return st;
}

/* Pipeline: the tied wte lives on the first stage (embedding) and the last (LM head); each
 * holds its part of the gradient, summed between them so that both update it alike, in the
 * gradient sink's elements (exact mode: its exact sums, before any rounding). */
static mdc_status tied_reduce(mdc_step_plan *p) {
    mdc_gpt2 *m = p->m;
    const mdc_param_tensor *t = NULL;
    for (int i = 0; i < mdc_gpt2_local_count(m) && !t; i++)
        if (mdc_gpt2_local_tensor(m, i)->global == 0) t = mdc_gpt2_local_tensor(m, i);
    if (!t) return mdc_fail(MDC_ERR_INVALID, "pipeline: a stage of the embedding group holds no wte");
    mdc_dtype dt = mdc_gpt2_grad_dtype(m);
    void *buf = malloc(t->alloc * mdc_dtype_size(dt));
    if (!buf) return mdc_fail(MDC_ERR_OOM_HOST, "the tied embedding's gradient (%zu elements)", t->alloc);
    mdc_gpt2_grad_pack(m, t->offset, t->alloc, buf);
    double b0 = mdc_dev_bytes_sent(mdc_gpt2_device(m));
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, buf, t->alloc, dt, MDC_SUM, p->embed_group);
    p->tied_bytes = mdc_dev_bytes_sent(mdc_gpt2_device(m)) - b0;
    if (!st) mdc_gpt2_grad_unpack(m, t->offset, t->alloc, buf);
    free(buf);
    return st;
}

/* The step's reductions in the order the gradient sink needs. Floats: dp's buckets went over the
 * group during the backward (finish completes them), then SP's partial sums over tp on what each
 * rank holds (the replica or the shard). A sink of sums holds them to the end: over tp first, then
 * dp or ep, whose last reduction rounds them once (alone, the model rounds them). */
static mdc_status reduce_grads(mdc_step_plan *p) {
    int sums = mdc_gpt2_grad_dtype(p->m) != MDC_F32, sp = (p->tp_group || p->etp_group) && p->sp_partial;
    mdc_status st = MDC_OK;
    if (sums && sp) st = sp_reduce_sink(p, MDC_GRAD_PARTIAL_TP, p->tp_group);
    if (!st && sums && sp) st = sp_reduce_sink(p, MDC_GRAD_PARTIAL_ETP, p->etp_group);
    if (!st && p->dp) st = mdc_dp_finish(p->dp);
    if (!st && p->reduce) st = p->reduce(p->reduce_ctx);
    if (!st && !sums && sp) st = sp_reduce(p, MDC_GRAD_PARTIAL_TP, p->tp_group);
    if (!st && !sums && sp) st = sp_reduce(p, MDC_GRAD_PARTIAL_ETP, p->etp_group);
    if (!st && !p->dp && !p->reduce) st = mdc_gpt2_grad_round(p->m);
    return st;
}

/* fp16's loss scaling: the reduced gradients divided by the scale (a power of two: exact but
 * where it makes a subnormal), or a planted inf */
typedef struct {
    float inv;
    int plant;
} unscale_ctx;
static void unscale_visit(void *vc, int ti, size_t at, float *grad, float *param, size_t n) {
    (void)ti, (void)at, (void)param;
    unscale_ctx *c = vc;
    if (c->plant && n) grad[0] = INFINITY, c->plant = 0;
    if (c->inv == 1.0f) return;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) grad[i] *= c->inv;
}
static void unscale(mdc_step_plan *p) {
    if (mdc_host_dry()) return;
    unscale_ctx c = {p->loss_scale > 0 ? 1.0f / p->loss_scale : 1.0f, p->plant_inf};
    if (p->dp) {
        mdc_dp_for_each_segment(p->dp, unscale_visit, &c);
    } else {
        float *G = mdc_gpt2_grads(p->m);
        for (int i = 0; i < mdc_gpt2_local_count(p->m); i++) {
            const mdc_param_tensor *t = mdc_gpt2_local_tensor(p->m, i);
            unscale_visit(&c, i, 0, G + t->offset, NULL, t->alloc);
        }
    }
    mdc_dev_kernel(mdc_gpt2_device(p->m), (double)mdc_gpt2_local_floats(p->m),
                   8.0 * (double)mdc_gpt2_local_floats(p->m), MDC_PREC_FP32);
}

/* The loss sum and this rank's share of the squared norm, summed over the mesh in one allreduce
 * padded to W slots each (so its bytes are the ring's exact 2(W-1)/W), in the model's scalar
 * type (exact mode: exact sums, the same bits however the tokens and tensors are spread). */
static mdc_status step_scalars(mdc_step_plan *p, double *lsum, double *sumsq) {
    mdc_gpt2 *m = p->m;
    size_t W = p->sum_group ? (size_t)mdc_group_size(p->sum_group) : 1;
    mdc_dtype dt = mdc_gpt2_scalar_dtype(m);
    size_t el = mdc_dtype_size(dt);
    char *sc = calloc(2 * W, el);
    if (!sc) return mdc_fail(MDC_ERR_OOM_HOST, "step scalars");
    mdc_gpt2_scalar_objective(m, p->loss_sum, p->count_loss, p->count_moe, sc);
    if (p->dp) {
        mdc_dp_sumsq(p->dp, p->skip, sc + el);
    } else if (!p->skip) {
        mdc_gpt2_scalar_add_squares(m, mdc_gpt2_grads(m), mdc_gpt2_local_floats(m), sc + el);
    } else {
        float *G = mdc_gpt2_grads(m);
        for (int i = 0; i < mdc_gpt2_local_count(m); i++) {
            const mdc_param_tensor *t = mdc_gpt2_local_tensor(m, i);
            if (!p->skip[i]) mdc_gpt2_scalar_add_squares(m, G + t->offset, t->alloc, sc + el);
        }
    }
    mdc_status st = MDC_OK;
    if (W > 1) { /* exact mode's scalars are exact sums: over the axes in turn, the same bits */
        double b0 = mdc_dev_bytes_sent(mdc_gpt2_device(m));
        if (!p->sum_axes[0]) st = mdc_allreduce(MDC_IN_PLACE, sc, 2 * W, dt, MDC_SUM, p->sum_group);
        for (int k = 0; p->sum_axes[0] && k < 5 && !st; k++)
            if (mdc_group_size(p->sum_axes[k]) > 1)
                st = mdc_allreduce(MDC_IN_PLACE, sc, 2 * W, dt, MDC_SUM, p->sum_axes[k]);
        p->scalar_bytes = mdc_dev_bytes_sent(mdc_gpt2_device(m)) - b0;
    }
    *lsum = mdc_gpt2_scalar_value(m, sc), *sumsq = mdc_gpt2_scalar_value(m, sc + el);
    free(sc);
    return st;
}

mdc_status mdc_step_forward(mdc_step_plan *p, const int *inputs, const int *targets, double *loss_sum) {
    mdc_gpt2 *m = p->m;
    mdc_gpt2_acts *a = p->acts ? p->acts : mdc_gpt2_default_acts(m);
    int lo, hi;
    mdc_gpt2_acts_layers(a, &lo, &hi);
    mdc_status st = mdc_gpt2_set_batch(a, inputs, targets, p->micro_batch, p->seq);
    if (!st) st = mdc_gpt2_embed_forward(m, a);
    for (int l = lo; !st && l < hi; l++) st = mdc_gpt2_block_forward(m, a, l);
    if (!st) st = mdc_gpt2_head_forward(m, a, loss_sum);
    return st;
}

/* transformers' aux loss over the global batch: a counting forward of the step's micro-batches
 * (a pipeline's forwards alone, in its schedule's order), each token counted once over the mesh
 * (by the ranks that count the MoE figures), before any backward needs the counts. */
static mdc_status lb_count(mdc_step_plan *p, const int *inputs, const int *targets) {
    mdc_gpt2 *m = p->m;
    mdc_gpt2_acts *a = p->acts ? p->acts : mdc_gpt2_default_acts(m);
    size_t rows = (size_t)p->micro_batch * p->seq;
    int E = mdc_gpt2_get_config(m)->E;
    mdc_status st = mdc_gpt2_lb_begin(m);
    if (st) return st;
    if (p->pp) st = mdc_pp_run_forward(p->pp, p, inputs, targets);
    for (int k = 0; !p->pp && !st && k < p->accum; k++) {
        double sum = 0;
        mdc_gpt2_acts_set_row0(a, p->row0 + k * p->micro_batch);
        st = mdc_step_forward(p, inputs + k * rows, targets + k * rows, &sum);
    }
    double *c = mdc_gpt2_lb_end(m);
    if (st) return st;
    if (!p->count_moe) memset(c, 0, sizeof(double) * (size_t)E);
    if (p->sum_group && mdc_group_size(p->sum_group) > 1)
        st = mdc_allreduce(MDC_IN_PLACE, c, (size_t)E, MDC_F64, MDC_SUM, p->sum_group);
    if (!st) mdc_gpt2_lb_set(m, p->tokens);
    return st;
}

mdc_status mdc_step_grads(mdc_step_plan *p, const int *inputs, const int *targets) {
    mdc_gpt2 *m = p->m;
    mdc_gpt2_acts *a = p->acts ? p->acts : mdc_gpt2_default_acts(m); /* NULL on a pipeline stage */
    size_t rows = (size_t)p->micro_batch * p->seq;
    int lo = 0, hi = 0;
    if (!p->pp) mdc_gpt2_acts_layers(a, &lo, &hi);
    mdc_status st = mdc_gpt2_lb_on(m) ? lb_count(p, inputs, targets) : MDC_OK;
    if (!st) st = mdc_gpt2_zero_grad(m);
    if (st) return st;
    float dloss = mdc_plan_dloss(p); /* fp16: scaled */
    mdc_gpt2_set_moe_scale(m, dloss);
    if (p->dp) mdc_dp_begin_step(p->dp);
    p->loss_sum = 0, p->scalar_bytes = 0, p->sp_bytes = 0;
    if (p->pp) { /* a pipeline stage: its schedule orders the micro-batches */
        if ((st = mdc_pp_run(p->pp, p, inputs, targets))) return st;
        if (p->embed_group && (st = tied_reduce(p))) return st;
    }
    for (int k = 0; !p->pp && k < p->accum; k++) {
        if (p->dp) mdc_dp_begin_micro(p->dp, k);
        double sum = 0;
        mdc_gpt2_acts_set_row0(a, p->row0 + k * p->micro_batch);
        if ((st = mdc_step_forward(p, inputs + k * rows, targets + k * rows, &sum))) return st;
        p->loss_sum += sum;
        if ((st = mdc_gpt2_head_backward(m, a, dloss))) return st;
        for (int l = hi - 1; l >= lo; l--)
            if ((st = mdc_gpt2_block_backward(m, a, l, MDC_BWD_BOTH))) return st;
        if ((st = mdc_gpt2_embed_backward(m, a))) return st;
    }
    st = reduce_grads(p);
    if (!st && ((p->loss_scale > 0 && p->loss_scale != 1.0f) || p->plant_inf)) unscale(p);
    return st;
}

mdc_status mdc_step_update(mdc_step_plan *p, const mdc_adamw_config *o, float *loss, float *grad_norm) {
    double lsum = 0, sumsq = 0;
    mdc_status st = step_scalars(p, &lsum, &sumsq);
    if (st) return st;
    double norm = sqrt(sumsq);
    if (loss) *loss = (float)(lsum / p->tokens);
    if (grad_norm) *grad_norm = (float)norm;
    p->skipped = p->loss_scale > 0 && !isfinite(norm); /* every rank sees the mesh's sum */
    if (p->skipped) return MDC_OK;
    mdc_device *dev = mdc_gpt2_device(p->m);
    if (dev) mdc_dev_set_optimizer(dev, 1); /* the update's kernels, for predict's breakdown */
    st = p->dp ? mdc_dp_update(p->dp, o, norm) : mdc_gpt2_adamw_all(p->m, o, mdc_clip_scale(norm, o->grad_clip));
    if (dev) mdc_dev_set_optimizer(dev, 0);
    return st;
}

mdc_status mdc_step_run(mdc_step_plan *p, const int *inputs, const int *targets, const mdc_adamw_config *o, float *loss,
                        float *grad_norm) {
    mdc_status st = mdc_step_grads(p, inputs, targets);
    return st ? st : mdc_step_update(p, o, loss, grad_norm);
}

mdc_status mdc_step_dp(mdc_dp *dp, const int *inputs, const int *targets, const mdc_adamw_config *opt, float *loss,
                       float *grad_norm) {
    const mdc_dp_config *dc = mdc_dp_get_config(dp);
    mdc_step_plan p = mdc_step_plan_default(mdc_dp_model(dp));
    int N = mdc_group_size(mdc_dp_group(dp));
    p.dp = dp;
    p.sum_group = mdc_dp_group(dp);
    p.micro_batch = dc->micro_batch, p.accum = dc->accum, p.seq = dc->seq;
    p.dloss = 1.0f / ((float)p.micro_batch * (float)p.accum * (float)N * (float)p.seq);
    p.tokens = (double)p.micro_batch * p.seq * p.accum * N;
    return mdc_step_run(&p, inputs, targets, opt, loss, grad_norm);
}
