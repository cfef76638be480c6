/* Activation sets and the block API of the GPT-2 model (include/minidc/model.h).
 *
 * One layer on this rank (x the residual stream, (B, T/t, C) with SP, else (B, T, C)):
 *   ln1 = LN(x); h = f(ln1); qkv = h @ Wqkv + bqkv         (column-parallel: the heads of this rank)
 *   y = attention(qkv); x2 = x + bo + g(y @ Wo)            (row-parallel: partial sums reduced by g)
 *   ln2 = LN(x2); h = f(ln2); u = gelu(h @ Wfc + bfc)      (column-parallel)
 *   x' = x2 + bp + g(u @ Wp)                               (row-parallel)
 * f and g are the model's communication points (mdc_gpt2_comm); without them (the serial model)
 * the output projections run fused with the residual add, as the specification always has.
 * The bias and the residual join once, after the reduction, never t times.
 * Backward runs the input-gradient part (B) and the weight-gradient part (W) as separate kernel
 * calls; with both requested W runs as each of its inputs is ready, with B alone they are kept
 * in the activation set until W. Each weight gradient is one call on the same inputs either
 * way, so the bits do not depend on the split.
 * Dropout (mdc_gpt2_set_dropout): on the attention probabilities and on both residual branches,
 * with masks keyed by global indices (kernels/dropout.c), so every mesh drops what serial drops. */
#include <math.h>
#include <stdio.h>

#include "model_internal.h"

int mdc_i_acts_needs(const mdc_gpt2 *m) {
    return (m->comm ? MDC_I_NEED_COMM : 0) | (m->drop_p > 0 ? MDC_I_NEED_DROPOUT : 0);
}

mdc_i_acts_layout mdc_i_layout_acts(const mdc_gpt2_config *c, const mdc_gpt2_part *p, int needs, int B, int T) {
    mdc_i_acts_layout a;
    memset(&a, 0, sizeof a);
    int t = p->tp, sp = p->sp;
    size_t n = (size_t)B * T, nl = sp ? n / (size_t)t : n, C = (size_t)c->C;
    size_t Cl = C / (size_t)t, Hl = (size_t)(c->H / t), Fl = 4 * C / (size_t)t, Vl = (size_t)c->Vp / (size_t)t;
    a.tiled = T > MDC_GPT2_TILED_T;
    size_t attn = a.tiled ? (size_t)B * Hl * T : (size_t)B * Hl * T * T;
    size_t off = 0, layers = (size_t)(p->layer_hi - p->layer_lo);
#define TAKE(field, k) (a.field = off, off += ((k) + 15) / 16 * 16)
    TAKE(encoded, nl * C);
    size_t l0 = off;
    TAKE(ln1, nl * C); TAKE(ln1_mean, nl); TAKE(ln1_rstd, nl); TAKE(qkv, 3 * n * Cl); TAKE(atty, n * Cl);
    TAKE(att, attn); TAKE(res2, nl * C); TAKE(ln2, nl * C); TAKE(ln2_mean, nl); TAKE(ln2_rstd, nl);
    TAKE(fch, n * Fl); TAKE(fchg, n * Fl); TAKE(res3, nl * C);
    a.layer_stride = off - l0;
    off = l0 + a.layer_stride * layers;
    if (p->has_head) {
        TAKE(lnf, nl * C); TAKE(lnf_mean, nl); TAKE(lnf_rstd, nl);
        TAKE(logits, n * Vl); TAKE(losses, n); TAKE(lse, n);
    }
    TAKE(dres, nl * C); TAKE(dln, nl * C); TAKE(datty, n * Cl); TAKE(dbig, n * Fl); TAKE(dbig2, n * Fl);
    TAKE(attscratch, a.tiled ? 0 : (size_t)B * Hl * T * T);
    if (needs) TAKE(partial, n * C); /* a row-parallel product before its reduction or dropout */
    if (needs & MDC_I_NEED_COMM) {
        if (sp) { TAKE(full, n * C); TAKE(dfull, n * C); }
        TAKE(vstat, 2 * n);
    }
    if (needs & MDC_I_NEED_DROPOUT) TAKE(dmask, nl * C);
#undef TAKE
    a.total = off;
    return a;
}

mdc_i_sizes mdc_i_sizes_of(const mdc_gpt2 *m, int B, int T) {
    mdc_i_sizes s;
    int t = m->part.tp, split = m->part.sp ? t : 1;
    s.B = B, s.T = T, s.Tl = T / split, s.n = B * T, s.nl = B * s.Tl;
    s.C = m->cfg.C, s.Cl = m->cfg.C / t, s.Hl = m->cfg.H / t, s.Fl = 4 * m->cfg.C / t, s.Vl = m->cfg.Vp / t;
    return s;
}

size_t mdc_gpt2_acts_layer_floats(const mdc_gpt2 *m, int B, int T) {
    return mdc_i_layout_acts(&m->cfg, &m->part, mdc_i_acts_needs(m), B, T).layer_stride;
}

size_t mdc_gpt2_acts_bytes(const mdc_gpt2 *m, int B, int T) {
    return mdc_i_layout_acts(&m->cfg, &m->part, mdc_i_acts_needs(m), B, T).total * sizeof(float) +
           2 * (size_t)B * T * sizeof(int);
}

mdc_status mdc_gpt2_acts_create(mdc_gpt2_acts **out, mdc_gpt2 *m, int B, int T) {
    *out = NULL;
    if (B <= 0) return mdc_fail(MDC_ERR_INVALID, "--batch: batch size %d must be positive", B);
    if (T <= 0 || T > m->cfg.T)
        return mdc_fail(MDC_ERR_INVALID, "--seq: sequence length %d must be in [1, context %d]", T, m->cfg.T);
    if (m->part.sp && T % m->part.tp)
        return mdc_fail(MDC_ERR_INVALID, "--sp: the sequence length %d (--seq) is not divisible by --tp %d", T,
                        m->part.tp);
    mdc_gpt2_acts *a = calloc(1, sizeof *a);
    if (!a) return mdc_fail(MDC_ERR_OOM_HOST, "activation set: out of host memory");
    a->dev = m->dev, a->m = m, a->maxB = B, a->maxT = T;
    a->lay = mdc_i_layout_acts(&m->cfg, &m->part, mdc_i_acts_needs(m), B, T);
    int layers = m->part.layer_hi - m->part.layer_lo;
    a->wstash = calloc((size_t)(layers > 0 ? layers : 1), sizeof *a->wstash);
    a->wpending = calloc((size_t)(layers > 0 ? layers : 1), 1);
    mdc_status st = a->wstash && a->wpending ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "activation set");
    if (!st) st = mdc_dev_alloc(m->dev, (void **)&a->buf, a->lay.total * sizeof(float), MDC_MEM_ACTS, "activations");
    if (!st) st = mdc_dev_alloc(m->dev, (void **)&a->inputs, 2 * (size_t)B * T * sizeof(int), MDC_MEM_ACTS, "tokens");
    if (st) {
        mdc_gpt2_acts_free(a);
        return st;
    }
    a->targets = a->inputs + (size_t)B * T;
    *out = a;
    return MDC_OK;
}

void mdc_gpt2_acts_free(mdc_gpt2_acts *a) {
    if (!a) return;
    int layers = a->m->part.layer_hi - a->m->part.layer_lo;
    for (int i = 0; a->wstash && i < layers; i++) mdc_dev_free(a->dev, a->wstash[i]);
    free(a->wstash), free(a->wpending);
    mdc_dev_free(a->dev, a->buf);
    mdc_dev_free(a->dev, a->inputs);
    free(a);
}

mdc_status mdc_gpt2_set_batch(mdc_gpt2_acts *a, const int *inputs, const int *targets, int B, int T) {
    const mdc_gpt2_config *c = &a->m->cfg;
    if (B <= 0 || B > a->maxB)
        return mdc_fail(MDC_ERR_INVALID, "forward: batch %d not in [1, %d] (the creation batch)", B, a->maxB);
    if (T <= 0 || T > a->maxT)
        return mdc_fail(MDC_ERR_INVALID, "forward: sequence %d not in [1, %d] (the creation length)", T, a->maxT);
    if (a->m->part.sp && T % a->m->part.tp)
        return mdc_fail(MDC_ERR_INVALID, "--sp: the sequence length %d is not divisible by --tp %d", T, a->m->part.tp);
    size_t N = (size_t)B * T;
    for (size_t i = 0; i < N; i++) {
        if (inputs && (inputs[i] < 0 || inputs[i] >= c->V))
            return mdc_fail(MDC_ERR_INVALID, "forward: input token %d at position %zu not in [0, %d)", inputs[i], i, c->V);
        if (targets && (targets[i] < 0 || targets[i] >= c->V))
            return mdc_fail(MDC_ERR_INVALID, "forward: target %d at position %zu not in [0, %d)", targets[i], i, c->V);
    }
    if (inputs) memcpy(a->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(a->targets, targets, N * sizeof(int));
    mdc_dev_copy(a->dev, (double)N * sizeof(int) * ((inputs != NULL) + (targets != NULL)), MDC_LINK_PCIE);
    a->B = B, a->T = T, a->have_targets = targets != NULL;
    return MDC_OK;
}

#define HOOK(ev, unit)                                                                     \
    do {                                                                                   \
        if (m->hooks.fn) {                                                                 \
            mdc_status hook_st_ = m->hooks.fn(m->hooks.ctx, (ev), (unit));                 \
            if (hook_st_) return hook_st_;                                                 \
        }                                                                                  \
    } while (0)
#define TRY(expr)                                  \
    do {                                           \
        mdc_status try_st_ = (expr);               \
        if (try_st_) return try_st_;               \
    } while (0)

static float *buf(mdc_gpt2_acts *a, size_t off) { return a->buf + off; }
static float *lact(mdc_gpt2_acts *a, size_t off, int l) {
    return a->buf + off + (size_t)(l - a->m->part.layer_lo) * a->lay.layer_stride;
}
/* the residual stream entering layer l */
static float *x_in(mdc_gpt2_acts *a, int l) {
    return l > a->m->part.layer_lo ? lact(a, a->lay.res3, l - 1) : buf(a, a->lay.encoded);
}
static float *P(mdc_gpt2 *m, int gi) { return mdc_i_tensor(m, m->params, gi); }
static float *G(mdc_gpt2 *m, int gi) { return mdc_i_tensor(m, m->grads, gi); }

float *mdc_gpt2_acts_residual(mdc_gpt2_acts *a) {
    const mdc_gpt2_part *p = &a->m->part;
    return p->layer_hi > p->layer_lo ? lact(a, a->lay.res3, p->layer_hi - 1) : buf(a, a->lay.encoded);
}
float *mdc_gpt2_acts_dresidual(mdc_gpt2_acts *a) { return buf(a, a->lay.dres); }
const float *mdc_gpt2_acts_logits(const mdc_gpt2_acts *a) { return a->buf + a->lay.logits; }
const float *mdc_gpt2_acts_losses(const mdc_gpt2_acts *a) { return a->buf + a->lay.losses; }
int mdc_gpt2_acts_rows(const mdc_gpt2_acts *a) { return a->B * a->T; }
void mdc_gpt2_acts_set_row0(mdc_gpt2_acts *a, int row0) { a->row0 = row0; }

/* The column-parallel input: the gathered (B, T, C) with SP, else the local tensor itself. */
static mdc_status f_in(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *local, const float **in) {
    *in = local;
    if (!m->part.sp) return MDC_OK;
    float *full = buf(a, a->lay.full);
    *in = full;
    return m->comm->f_forward(m->comm->ctx, full, local, a->B, a->T, m->cfg.C);
}

/* The dropout of a site of layer l on this rank's share of the micro-batch, keyed by global
 * indices (batch row, position, channel; for attention the global head); NULL when off. */
static const mdc_dropout *drop_of(const mdc_gpt2 *m, const mdc_gpt2_acts *a, int l, int site, mdc_dropout *d) {
    if (!(m->drop_p > 0)) return NULL;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    memset(d, 0, sizeof *d);
    d->p = m->drop_p, d->seed = m->drop_seed, d->step = m->drop_step, d->layer = l, d->site = site;
    d->row0 = a->row0, d->T = a->T, d->C = m->cfg.C, d->H = m->cfg.H;
    if (site == MDC_DROP_ATTN) d->head0 = m->part.tp_rank * s.Hl;
    else d->pos0 = m->part.sp ? m->part.tp_rank * s.Tl : 0;
    return d;
}

/* out = res + dropout(inp @ W + b) for a row-parallel linear (dropout of `site`): fused
 * without communication or dropout, else the product reduced by g, then the bias once and the
 * residual (through the dropout when it is on). */
static mdc_status row_parallel(mdc_gpt2 *m, mdc_gpt2_acts *a, float *out, const float *res, const float *inp,
                               const float *W, const float *b, int K, int l, int site) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_dropout dd;
    const mdc_dropout *drop = drop_of(m, a, l, site, &dd);
    if (!m->comm && !drop) {
        mdc_matmul_residual_forward(m->dev, out, res, inp, W, b, s.n, K, s.C);
        return MDC_OK;
    }
    float *part = buf(a, a->lay.partial), *red = m->part.sp ? buf(a, a->lay.full) : part;
    mdc_matmul_forward(m->dev, part, inp, W, m->comm ? NULL : b, s.n, K, s.C);
    if (m->comm) TRY(m->comm->g_forward(m->comm->ctx, red, part, a->B, a->T, s.C));
    if (!drop) {
        mdc_residual_bias_forward(m->dev, out, res, red, b, s.nl, s.C);
        return MDC_OK;
    }
    if (m->comm) mdc_bias_forward(m->dev, red, b, s.nl, s.C);
    mdc_dropout_residual_forward(m->dev, out, res, red, drop, a->B, s.Tl, s.C);
    return MDC_OK;
}

/* The gradient of a residual branch's output: dres itself, or through its dropout mask. */
static const float *branch_grad(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int site, const float *dres) {
    mdc_dropout dd;
    const mdc_dropout *drop = drop_of(m, a, l, site, &dd);
    if (!drop) return dres;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *dy = buf(a, a->lay.dmask);
    memset(dy, 0, (size_t)s.nl * s.C * sizeof(float));
    mdc_dropout_residual_backward(m->dev, dy, dres, drop, a->B, s.Tl, s.C);
    return dy;
}

mdc_status mdc_gpt2_embed_forward(mdc_gpt2 *m, mdc_gpt2_acts *a) {
    if (!m->part.has_embed) return mdc_fail(MDC_ERR_INVALID, "embed_forward: this partition has no embedding");
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *enc = buf(a, a->lay.encoded);
    HOOK(MDC_HOOK_PRE_FORWARD, 0);
    if (!m->comm) {
        mdc_encoder_forward(m->dev, enc, a->inputs, P(m, 0), P(m, 1), a->B, a->T, s.C);
    } else { /* vocab-parallel: this shard's rows, summed over tp (g), then the positions */
        float *part = buf(a, a->lay.partial), *red = m->part.sp ? enc : part;
        mdc_embed_shard_forward(m->dev, part, a->inputs, P(m, 0), m->part.tp_rank * s.Vl, s.Vl, s.n, s.C);
        TRY(m->comm->g_forward(m->comm->ctx, red, part, a->B, a->T, s.C));
        int pos0 = m->part.sp ? m->part.tp_rank * s.Tl : 0;
        mdc_embed_positions(m->dev, enc, red, P(m, 1), a->B, s.Tl, pos0, s.C);
    }
    HOOK(MDC_HOOK_POST_FORWARD, 0);
    return MDC_OK;
}

mdc_status mdc_gpt2_block_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l) {
    if (l < m->part.layer_lo || l >= m->part.layer_hi)
        return mdc_fail(MDC_ERR_INVALID, "block_forward: layer %d is not held here [%d, %d)", l, m->part.layer_lo,
                        m->part.layer_hi);
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    float *x = x_in(a, l), *ln1 = lact(a, y->ln1, l), *qkv = lact(a, y->qkv, l), *atty = lact(a, y->atty, l);
    float *res2 = lact(a, y->res2, l), *ln2 = lact(a, y->ln2, l), *fch = lact(a, y->fch, l);
    float *fchg = lact(a, y->fchg, l), *res3 = lact(a, y->res3, l);
    const float *in;
    HOOK(MDC_HOOK_PRE_FORWARD, 1 + l);
    mdc_layernorm_forward(d, ln1, lact(a, y->ln1_mean, l), lact(a, y->ln1_rstd, l), x, P(m, mdc_i_gl(l, LN1W)),
                          P(m, mdc_i_gl(l, LN1B)), s.nl, s.C);
    TRY(f_in(m, a, ln1, &in));
    mdc_matmul_forward(d, qkv, in, P(m, mdc_i_gl(l, QKVW)), P(m, mdc_i_gl(l, QKVB)), s.n, s.C, 3 * s.Cl);
    mdc_dropout dd;
    const mdc_dropout *drop = drop_of(m, a, l, MDC_DROP_ATTN, &dd);
    if (y->tiled) mdc_attention_forward_tiled_drop(d, atty, lact(a, y->att, l), qkv, drop, a->B, a->T, s.Cl, s.Hl);
    else mdc_attention_forward_drop(d, atty, lact(a, y->att, l), qkv, drop, a->B, a->T, s.Cl, s.Hl);
    TRY(row_parallel(m, a, res2, x, atty, P(m, mdc_i_gl(l, ATTPW)), P(m, mdc_i_gl(l, ATTPB)), s.Cl, l,
                     MDC_DROP_ATTN_OUT));
    mdc_layernorm_forward(d, ln2, lact(a, y->ln2_mean, l), lact(a, y->ln2_rstd, l), res2, P(m, mdc_i_gl(l, LN2W)),
                          P(m, mdc_i_gl(l, LN2B)), s.nl, s.C);
    TRY(f_in(m, a, ln2, &in));
    mdc_matmul_forward(d, fch, in, P(m, mdc_i_gl(l, FCW)), P(m, mdc_i_gl(l, FCB)), s.n, s.C, s.Fl);
    mdc_gelu_forward(d, fchg, fch, (size_t)s.n * s.Fl);
    TRY(row_parallel(m, a, res3, res2, fchg, P(m, mdc_i_gl(l, FCPW)), P(m, mdc_i_gl(l, FCPB)), s.Fl, l,
                     MDC_DROP_MLP_OUT));
    HOOK(MDC_HOOK_POST_FORWARD, 1 + l);
    return MDC_OK;
}

mdc_status mdc_gpt2_head_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, double *loss_sum) {
    if (!m->part.has_head) return mdc_fail(MDC_ERR_INVALID, "head_forward: this partition has no head");
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    const mdc_gpt2_config *c = &m->cfg;
    float *lnf = buf(a, y->lnf), *logits = buf(a, y->logits), *losses = buf(a, y->losses), *lse = buf(a, y->lse);
    const float *in;
    HOOK(MDC_HOOK_PRE_FORWARD, c->L + 1);
    mdc_layernorm_forward(d, lnf, buf(a, y->lnf_mean), buf(a, y->lnf_rstd), mdc_gpt2_acts_residual(a),
                          P(m, mdc_i_glnf(c, 0)), P(m, mdc_i_glnf(c, 1)), s.nl, s.C);
    TRY(f_in(m, a, lnf, &in));
    mdc_lmhead_forward(d, logits, in, P(m, 0), s.n, s.C, s.Vl);
    double sum = 0;
    if (a->have_targets) {
        if (!m->comm) {
            mdc_crossentropy_forward(d, losses, lse, logits, a->targets, s.n, c->V, c->Vp);
        } else { /* vocab-parallel: max, sum-exp, target logit over tp; the logits stay sharded */
            int lo = m->part.tp_rank * s.Vl, valid = c->V - lo;
            valid = valid < 0 ? 0 : valid > s.Vl ? s.Vl : valid;
            float *mx = buf(a, y->vstat), *se = mx + s.n;
            mdc_vocab_shard_max(d, mx, logits, s.n, s.Vl, valid);
            TRY(m->comm->vocab(m->comm->ctx, mx, s.n, 1));
            mdc_vocab_shard_sumexp(d, se, logits, mx, s.n, s.Vl, valid);
            TRY(m->comm->vocab(m->comm->ctx, se, s.n, 0));
            mdc_vocab_shard_target(d, losses, logits, a->targets, lo, s.n, s.Vl, valid);
            TRY(m->comm->vocab(m->comm->ctx, losses, s.n, 0));
            for (int i = 0; i < s.n; i++) {
                lse[i] = mx[i] + logf(se[i]);
                losses[i] = lse[i] - losses[i];
            }
            mdc_dev_kernel(d, 3.0 * s.n, 16.0 * s.n, MDC_PREC_FP32);
        }
        for (int i = 0; i < s.n; i++) sum += losses[i];
    }
    if (loss_sum) *loss_sum = sum;
    HOOK(MDC_HOOK_POST_FORWARD, c->L + 1);
    return MDC_OK;
}

mdc_status mdc_gpt2_head_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, float dloss) {
    if (!m->part.has_head) return mdc_fail(MDC_ERR_INVALID, "head_backward: this partition has no head");
    if (!a->have_targets) return mdc_fail(MDC_ERR_INVALID, "backward: the last forward had no targets");
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    const mdc_gpt2_config *c = &m->cfg;
    float *logits = buf(a, y->logits), *dln = buf(a, y->dln), *dres = buf(a, y->dres);
    const float *in;
    HOOK(MDC_HOOK_PRE_BACKWARD, c->L + 1);
    TRY(f_in(m, a, buf(a, y->lnf), &in)); /* SP: gathered again, as the blocks' inputs */
    if (!m->comm) {
        mdc_crossentropy_backward(d, logits, logits, buf(a, y->lse), a->targets, dloss, s.n, c->V, c->Vp);
    } else {
        int lo = m->part.tp_rank * s.Vl, valid = c->V - lo;
        valid = valid < 0 ? 0 : valid > s.Vl ? s.Vl : valid;
        mdc_crossentropy_backward_shard(d, logits, logits, buf(a, y->lse), a->targets, lo, dloss, s.n, s.Vl, valid);
    }
    /* dlnf: the LM head is column-parallel over the vocabulary, so its input gradient is a
     * partial sum over the shards: f's backward reduces it */
    float *dpart = m->part.sp ? buf(a, y->dfull) : dln;
    memset(dpart, 0, (size_t)s.n * s.C * sizeof(float));
    mdc_lmhead_backward(d, dpart, G(m, 0), logits, in, P(m, 0), s.n, s.C, s.Vl);
    if (m->comm) TRY(m->comm->f_backward(m->comm->ctx, dln, dpart, a->B, a->T, s.C));
    memset(dres, 0, (size_t)s.nl * s.C * sizeof(float));
    mdc_layernorm_backward(d, dres, G(m, mdc_i_glnf(c, 0)), G(m, mdc_i_glnf(c, 1)), dln, mdc_gpt2_acts_residual(a),
                           P(m, mdc_i_glnf(c, 0)), buf(a, y->lnf_mean), buf(a, y->lnf_rstd), s.nl, s.C);
    a->have_targets = 0; /* the logits are gone */
    HOOK(MDC_HOOK_POST_BACKWARD, c->L + 1);
    return MDC_OK;
}

/* ---- block backward: B (input gradient) and W (weight gradients) ------------------------------ */

/* What the weight gradients of one layer read besides the saved activations. */
enum { W_FCP, W_FC, W_LN2, W_ATTP, W_QKV, W_LN1, NW };
typedef struct {
    const float *d3, *dres3;  /* mlp c_proj: output gradient (B,T,C) and its local rows (bias) */
    const float *dfc, *in2;   /* c_fc: pre-GELU gradient (B,T,4C/t), its input (gathered with SP) */
    const float *dln2;        /* ln_2: its output gradient (local rows) */
    const float *d2, *dres2;  /* attn c_proj */
    const float *dqkv, *in1;  /* c_attn */
    const float *dln1;        /* ln_1 */
} wgrad_in;

static void wgrad(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int which, const wgrad_in *w) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    switch (which) {
    case W_FCP: /* the bias from this rank's rows: the same gradient without SP, one call */
        mdc_matmul_backward(d, NULL, G(m, mdc_i_gl(l, FCPW)), s.n == s.nl ? G(m, mdc_i_gl(l, FCPB)) : NULL, w->d3,
                            lact(a, y->fchg, l), NULL, s.n, s.Fl, s.C);
        if (s.n != s.nl) mdc_matmul_backward(d, NULL, NULL, G(m, mdc_i_gl(l, FCPB)), w->dres3, NULL, NULL, s.nl, s.Fl, s.C);
        break;
    case W_FC:
        mdc_matmul_backward(d, NULL, G(m, mdc_i_gl(l, FCW)), G(m, mdc_i_gl(l, FCB)), w->dfc, w->in2, NULL, s.n, s.C,
                            s.Fl);
        break;
    case W_LN2:
        mdc_layernorm_backward(d, NULL, G(m, mdc_i_gl(l, LN2W)), G(m, mdc_i_gl(l, LN2B)), w->dln2,
                               lact(a, y->res2, l), NULL, lact(a, y->ln2_mean, l), lact(a, y->ln2_rstd, l), s.nl, s.C);
        break;
    case W_ATTP:
        mdc_matmul_backward(d, NULL, G(m, mdc_i_gl(l, ATTPW)), s.n == s.nl ? G(m, mdc_i_gl(l, ATTPB)) : NULL, w->d2,
                            lact(a, y->atty, l), NULL, s.n, s.Cl, s.C);
        if (s.n != s.nl) mdc_matmul_backward(d, NULL, NULL, G(m, mdc_i_gl(l, ATTPB)), w->dres2, NULL, NULL, s.nl, s.Cl, s.C);
        break;
    case W_QKV:
        mdc_matmul_backward(d, NULL, G(m, mdc_i_gl(l, QKVW)), G(m, mdc_i_gl(l, QKVB)), w->dqkv, w->in1, NULL, s.n,
                            s.C, 3 * s.Cl);
        break;
    case W_LN1:
        mdc_layernorm_backward(d, NULL, G(m, mdc_i_gl(l, LN1W)), G(m, mdc_i_gl(l, LN1B)), w->dln1, x_in(a, l), NULL,
                               lact(a, y->ln1_mean, l), lact(a, y->ln1_rstd, l), s.nl, s.C);
        break;
    }
}

/* The stash of layer l for B without W: every wgrad_in field's buffer, sized for the set's
 * creation batch. Not charged as kernel work: a framework keeps these tensors alive instead
 * of copying them; the memory is charged (MDC_MEM_ACTS). */
static mdc_status stash_ptrs(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, wgrad_in *w) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->maxB, a->maxT);
    size_t n = (size_t)s.n, nl = (size_t)s.nl, C = (size_t)s.C;
    size_t sz[10] = {n * C, nl * C, n * s.Fl, n * C, nl * C, n * C, nl * C, 3 * n * s.Cl, n * C, nl * C};
    int i = l - m->part.layer_lo;
    if (!a->wstash[i]) {
        size_t tot = 0;
        for (int k = 0; k < 10; k++) tot += sz[k];
        char name[40];
        snprintf(name, sizeof name, "wgrad stash, layer %d", l);
        TRY(mdc_dev_alloc(a->dev, (void **)&a->wstash[i], tot * sizeof(float), MDC_MEM_ACTS, name));
    }
    const float **f[10] = {&w->d3, &w->dres3, &w->dfc, &w->in2, &w->dln2, &w->d2, &w->dres2, &w->dqkv, &w->in1, &w->dln1};
    float *p = a->wstash[i];
    for (int k = 0; k < 10; k++) *f[k] = p, p += sz[k];
    return MDC_OK;
}

/* W's inputs `which` are ready in `live`: run it now, or keep copies for a later W. */
static void wready(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int which, const wgrad_in *live, wgrad_in *keep) {
    if (!keep) {
        wgrad(m, a, l, which, live);
        return;
    }
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    size_t nC = (size_t)s.n * s.C * sizeof(float), nlC = (size_t)s.nl * s.C * sizeof(float);
#define KEEP(field, bytes) memcpy((float *)keep->field, live->field, (bytes))
    switch (which) {
    case W_FCP: KEEP(d3, nC); KEEP(dres3, nlC); break;
    case W_FC: KEEP(dfc, (size_t)s.n * s.Fl * sizeof(float)); KEEP(in2, nC); break;
    case W_LN2: KEEP(dln2, nlC); break;
    case W_ATTP: KEEP(d2, nC); KEEP(dres2, nlC); break;
    case W_QKV: KEEP(dqkv, (size_t)s.n * 3 * s.Cl * sizeof(float)); KEEP(in1, nC); break;
    case W_LN1: KEEP(dln1, nlC); break;
    }
#undef KEEP
}

/* The input gradient of a column-parallel linear's input: a partial sum over tp shards, which
 * f's backward reduces into dln (local rows). dpart is (B,T,C) (dln itself without SP). */
static mdc_status f_back(mdc_gpt2 *m, mdc_gpt2_acts *a, float *dln, float *dpart) {
    if (!m->comm) return MDC_OK;
    return m->comm->f_backward(m->comm->ctx, dln, dpart, a->B, a->T, m->cfg.C);
}
/* The row-parallel output's gradient over every position: gathered with SP (into `full`). */
static mdc_status g_back(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *dres, const float **dout) {
    *dout = dres;
    if (!m->part.sp) return MDC_OK;
    float *full = buf(a, a->lay.full);
    *dout = full;
    return m->comm->g_backward(m->comm->ctx, full, dres, a->B, a->T, m->cfg.C);
}

static mdc_status block_backward_input(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, wgrad_in *keep) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    float *dres = buf(a, y->dres), *dln = buf(a, y->dln), *datty = buf(a, y->datty);
    float *dbig = buf(a, y->dbig), *dbig2 = buf(a, y->dbig2);
    float *dpart = m->part.sp ? buf(a, y->dfull) : dln;
    size_t nC = (size_t)s.n * s.C, nF = (size_t)s.n * s.Fl;
    float *qkv = lact(a, y->qkv, l), *atty = lact(a, y->atty, l);
    wgrad_in w = {0};
    const float *in;
    /* MLP: dres is d(x'), which also flows straight to x2 through the residual */
    const float *dy = branch_grad(m, a, l, MDC_DROP_MLP_OUT, dres);
    TRY(g_back(m, a, dy, &w.d3));
    w.dres3 = dy;
    wready(m, a, l, W_FCP, &w, keep);
    memset(dbig, 0, nF * sizeof(float));
    mdc_matmul_backward(d, dbig, NULL, NULL, w.d3, NULL, P(m, mdc_i_gl(l, FCPW)), s.n, s.Fl, s.C);
    memset(dbig2, 0, nF * sizeof(float));
    mdc_gelu_backward(d, dbig2, lact(a, y->fch, l), dbig, nF);
    w.dfc = dbig2;
    TRY(f_in(m, a, lact(a, y->ln2, l), &in)); /* SP: the input gathered again (Megatron) */
    w.in2 = in;
    wready(m, a, l, W_FC, &w, keep);
    memset(dpart, 0, nC * sizeof(float));
    mdc_matmul_backward(d, dpart, NULL, NULL, dbig2, NULL, P(m, mdc_i_gl(l, FCW)), s.n, s.C, s.Fl);
    TRY(f_back(m, a, dln, dpart));
    w.dln2 = dln;
    wready(m, a, l, W_LN2, &w, keep);
    mdc_layernorm_backward(d, dres, NULL, NULL, dln, lact(a, y->res2, l), P(m, mdc_i_gl(l, LN2W)),
                           lact(a, y->ln2_mean, l), lact(a, y->ln2_rstd, l), s.nl, s.C);
    /* attention */
    dy = branch_grad(m, a, l, MDC_DROP_ATTN_OUT, dres);
    TRY(g_back(m, a, dy, &w.d2));
    w.dres2 = dy;
    wready(m, a, l, W_ATTP, &w, keep);
    memset(datty, 0, (size_t)s.n * s.Cl * sizeof(float));
    mdc_matmul_backward(d, datty, NULL, NULL, w.d2, NULL, P(m, mdc_i_gl(l, ATTPW)), s.n, s.Cl, s.C);
    memset(dbig, 0, (size_t)s.n * 3 * s.Cl * sizeof(float));
    mdc_dropout dd;
    const mdc_dropout *drop = drop_of(m, a, l, MDC_DROP_ATTN, &dd);
    if (y->tiled)
        mdc_attention_backward_tiled_drop(d, dbig, datty, atty, qkv, lact(a, y->att, l), drop, a->B, a->T, s.Cl, s.Hl);
    else
        mdc_attention_backward_drop(d, dbig, buf(a, y->attscratch), datty, qkv, lact(a, y->att, l), drop, a->B, a->T,
                                    s.Cl, s.Hl);
    w.dqkv = dbig;
    TRY(f_in(m, a, lact(a, y->ln1, l), &in));
    w.in1 = in;
    wready(m, a, l, W_QKV, &w, keep);
    memset(dpart, 0, nC * sizeof(float));
    mdc_matmul_backward(d, dpart, NULL, NULL, dbig, NULL, P(m, mdc_i_gl(l, QKVW)), s.n, s.C, 3 * s.Cl);
    TRY(f_back(m, a, dln, dpart));
    w.dln1 = dln;
    wready(m, a, l, W_LN1, &w, keep);
    mdc_layernorm_backward(d, dres, NULL, NULL, dln, x_in(a, l), P(m, mdc_i_gl(l, LN1W)), lact(a, y->ln1_mean, l),
                           lact(a, y->ln1_rstd, l), s.nl, s.C);
    return MDC_OK;
}

mdc_status mdc_gpt2_block_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int parts) {
    if (l < m->part.layer_lo || l >= m->part.layer_hi)
        return mdc_fail(MDC_ERR_INVALID, "block_backward: layer %d is not held here [%d, %d)", l, m->part.layer_lo,
                        m->part.layer_hi);
    if (parts < MDC_BWD_INPUT || parts > MDC_BWD_BOTH)
        return mdc_fail(MDC_ERR_INVALID, "block_backward: parts %d (want MDC_BWD_INPUT, _WEIGHT or both)", parts);
    int i = l - m->part.layer_lo;
    if ((parts & MDC_BWD_INPUT) && a->wpending[i])
        return mdc_fail(MDC_ERR_INVALID, "block_backward: layer %d: B again before its W", l);
    if (parts == MDC_BWD_WEIGHT && !a->wpending[i])
        return mdc_fail(MDC_ERR_INVALID, "block_backward: layer %d: W without its B", l);
    if (parts & MDC_BWD_INPUT) {
        HOOK(MDC_HOOK_PRE_BACKWARD, 1 + l);
        if (parts == MDC_BWD_BOTH) TRY(block_backward_input(m, a, l, NULL));
        else {
            wgrad_in keep;
            TRY(stash_ptrs(m, a, l, &keep));
            TRY(block_backward_input(m, a, l, &keep));
            a->wpending[i] = 1;
            return MDC_OK;
        }
    } else {
        wgrad_in keep;
        TRY(stash_ptrs(m, a, l, &keep));
        for (int k = 0; k < NW; k++) wgrad(m, a, l, k, &keep);
        a->wpending[i] = 0;
    }
    HOOK(MDC_HOOK_POST_BACKWARD, 1 + l);
    return MDC_OK;
}

mdc_status mdc_gpt2_embed_backward(mdc_gpt2 *m, mdc_gpt2_acts *a) {
    if (!m->part.has_embed) return mdc_fail(MDC_ERR_INVALID, "embed_backward: this partition has no embedding");
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *dres = buf(a, a->lay.dres);
    HOOK(MDC_HOOK_PRE_BACKWARD, 0);
    if (!m->comm) {
        mdc_encoder_backward(m->dev, G(m, 0), G(m, 1), dres, a->inputs, a->B, a->T, s.C);
    } else {
        const float *dout;
        TRY(g_back(m, a, dres, &dout));
        mdc_embed_shard_backward(m->dev, G(m, 0), G(m, 1), dout, a->inputs, m->part.tp_rank * s.Vl, s.Vl, a->B, a->T,
                                 s.C);
    }
    HOOK(MDC_HOOK_POST_BACKWARD, 0);
    return MDC_OK;
}
