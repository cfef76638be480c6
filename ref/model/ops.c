/* The default arithmetic of the layers (ref/model/layers.h, mdc_i_ops): OpenBLAS products and
 * the fused kernels, gradients added into the float gradients. Two tables: serial (no
 * communication: the row-parallel product fused with its bias and residual, the embedding in
 * one kernel, the whole vocabulary's loss) and tp (the partial sums reduced by g, f's backward,
 * the vocabulary-parallel embedding and loss). Exact mode lays its entries over either
 * (ref/model/exact/exact_ops.c). */
#include <math.h>

#include "minidc/fault.h"
#include "minidc/numerics.h"
#include "model_internal.h"

static void matmul(mdc_gpt2 *m, float *out, const float *in, const float *W, const float *b, int n, int K, int N,
                   int wt) {
    if (wt) mdc_linear_forward(m->dev, out, NULL, in, W, b, n, K, N);
    else mdc_matmul_forward(m->dev, out, in, W, b, n, K, N);
}

static void dinput(mdc_gpt2 *m, float *din, const float *dout, const float *W, int n, int K, int N, int wt) {
    if (wt) mdc_linear_backward(m->dev, din, NULL, NULL, dout, NULL, W, n, K, N);
    else mdc_matmul_backward(m->dev, din, NULL, NULL, dout, NULL, W, n, K, N);
}

/* Without SP a row-parallel bias's rows are dout's: one call for the weight and the bias. */
static void wgrad(mdc_gpt2 *m, int gw, int gb, const float *in, const float *dout, const float *drows, int n, int nl,
                  int K, int N, int blk, int wt) {
    (void)blk;
    float *db = gb >= 0 ? G(m, gb) : NULL;
    int apart = drows && nl != n;
    if (wt) mdc_linear_backward(m->dev, NULL, G(m, gw), apart ? NULL : db, dout, in, NULL, n, K, N);
    else mdc_matmul_backward(m->dev, NULL, G(m, gw), apart ? NULL : db, dout, in, NULL, n, K, N);
    if (apart && db) mdc_matmul_backward(m->dev, NULL, NULL, db, drows, NULL, NULL, nl, K, N);
}

static void rmsnorm_wgrad(mdc_gpt2 *m, int gw, const float *dout, int ldo, const float *x, int ldx, const float *rstd,
                          int n, int heads, int d) {
    mdc_rmsnorm_heads_backward(m->dev, NULL, 0, G(m, gw), dout, ldo, x, ldx, NULL, rstd, n, heads, d);
}

static void layernorm_wgrad(mdc_gpt2 *m, const mdc_i_norm *N, const float *dout, const float *x, int n, int C) {
    mdc_layernorm_backward(m->dev, NULL, G(m, N->w), G(m, N->b), dout, x, NULL, N->mean, N->rstd, n, C);
}

static void layernorm_backward(mdc_gpt2 *m, const mdc_i_norm *N, float *dx, const float *dout, const float *x, int n,
                               int C) {
    mdc_layernorm_backward(m->dev, dx, G(m, N->w), G(m, N->b), dout, x, P(m, N->w), N->mean, N->rstd, n, C);
}

static void grad_pack(mdc_gpt2 *m, size_t off, size_t n, void *buf) { memcpy(buf, m->grads + off, n * sizeof(float)); }

static void grad_unpack(mdc_gpt2 *m, size_t off, size_t n, const void *buf) {
    memcpy(m->grads + off, buf, n * sizeof(float));
}

static mdc_status grad_round(mdc_gpt2 *m) {
    (void)m;
    return MDC_OK;
}

static void objective(mdc_gpt2 *m, double loss_sum, int count_loss, int count_moe, void *slot) {
    double l = count_loss ? loss_sum : 0;
    if (count_moe) {
        mdc_moe_stats ms;
        mdc_gpt2_moe_stats(m, &ms);
        l += ms.aux_sum + ms.z_sum + ms.lb_sum;
    }
    *(double *)slot = l;
}

static void add_squares(mdc_gpt2 *m, const float *g, size_t n, void *slot) {
    *(double *)slot += mdc_grad_sumsq(m->dev, g, n);
}

static double scalar_value(const void *slot) { return *(const double *)slot; }

static void lm_head(mdc_gpt2 *m, mdc_gpt2_acts *a, float *logits, const float *in) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_lmhead_forward(m->dev, logits, in, P(m, mdc_i_ghead(&m->cfg)), s.n, s.C, s.Vl);
}

/* ---- serial ------------------------------------------------------------------------------------ */
static mdc_status row_forward_serial(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *res,
                                     const float *in, const mdc_dropout *drop) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const float *W = P(m, L->w), *b = P(m, L->b);
    if (m->tap && !m->pc.prec) TRY(mdc_i_dump_product(m, a, L, in)); /* the product the kernel fuses */
    if (!drop && !m->pc.prec) {
        if (L->wt) mdc_linear_forward(m->dev, out, res, in, W, b, s.n, L->K, s.C);
        else mdc_matmul_residual_forward(m->dev, out, res, in, W, b, s.n, L->K, s.C);
        return MDC_OK;
    }
    float *part = buf(a, a->lay.partial); /* 16-bit: the product rounded, then the bias and the residual */
    matmul(m, part, in, W, m->pc.prec ? NULL : b, s.n, L->K, s.C, L->wt);
    if (!m->pc.prec) {
        mdc_dropout_residual_forward(m->dev, out, res, part, drop, a->B, s.Tl, s.C);
        return MDC_OK;
    }
    mdc_i_round(m, part, (size_t)s.n * s.C); /* the product as the layer keeps it, observed as it is */
    TAP(1 + L->l, L->site, MDC_TAP_FWD, MDC_TAP_POST, part);
    mdc_i_row_tail(m, a, L, out, res, part, drop);
    return MDC_OK;
}

static mdc_status row_reduce_serial(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *red, const float *in) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    matmul(m, red, in, P(m, L->w), NULL, s.n, L->K, s.C, L->wt);
    mdc_i_round(m, red, (size_t)s.n * s.C);
    TAP(1 + L->l, L->site, MDC_TAP_FWD, MDC_TAP_POST, red);
    return MDC_OK;
}

static mdc_status col_dinput_serial(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *dx,
                                    const float *dout) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    if (!mdc_host_dry()) memset(dx, 0, (size_t)s.n * s.C * sizeof(float));
    dinput(m, dx, dout, P(m, L->w), s.n, s.C, L->N, L->wt);
    mdc_i_round(m, dx, (size_t)s.n * s.C);
    return MDC_OK;
}

static mdc_status embed_forward_serial(mdc_gpt2 *m, mdc_gpt2_acts *a, float *enc) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const int *pos = mdc_i_positions_of(m, MDC_I_ROWS, s.Tl, NULL);
    if (!P(m, mdc_i_gpos(&m->cfg))) { /* no position table: the tokens' rows alone */
        mdc_embed_shard_forward(m->dev, enc, a->inputs, P(m, 0), 0, s.Vl, s.n, s.C);
        return MDC_OK;
    }
    if (!pos) {
        mdc_encoder_forward(m->dev, enc, a->inputs, P(m, 0), P(m, 1), a->B, a->T, s.C);
        return MDC_OK;
    }
    mdc_embed_shard_forward(m->dev, enc, a->inputs, P(m, 0), 0, s.Vl, s.n,
                            s.C); /* the rows, then the chunks' positions */
    mdc_embed_positions(m->dev, enc, enc, P(m, 1), a->B, s.Tl, pos, 0, s.C);
    return MDC_OK;
}

static mdc_status embed_backward_serial(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *dres) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const int *pos = mdc_i_positions_of(m, MDC_I_SEQ, s.Tl, NULL);
    float *gpos = G(m, mdc_i_gpos(&m->cfg));
    if (!pos && gpos) mdc_encoder_backward(m->dev, G(m, 0), gpos, dres, a->inputs, a->B, a->T, s.C);
    else mdc_embed_shard_backward(m->dev, G(m, 0), gpos, dres, a->inputs, 0, s.Vl, pos, a->B, a->T, s.C);
    return MDC_OK;
}

static mdc_status loss_serial(mdc_gpt2 *m, mdc_gpt2_acts *a, double *sum) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *losses = buf(a, a->lay.losses);
    mdc_crossentropy_forward(m->dev, losses, buf(a, a->lay.lse), buf(a, a->lay.logits), a->targets, s.n, m->cfg.V,
                             m->cfg.Vp);
    *sum = 0;
    for (int i = 0; i < s.n; i++) *sum += losses[i];
    return MDC_OK;
}

static mdc_status head_backward_serial(mdc_gpt2 *m, mdc_gpt2_acts *a, float dloss, const float *in, float *dlnf) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const mdc_gpt2_config *c = &m->cfg;
    float *logits = buf(a, a->lay.logits);
    mdc_crossentropy_backward(m->dev, logits, logits, buf(a, a->lay.lse), a->targets, dloss, s.n, c->V, c->Vp);
    mdc_i_round(m, logits, (size_t)s.n * s.Vl);
    TAP(c->L + 1, MDC_I_DS_LOGITS, MDC_TAP_BWD, MDC_TAP_AT, logits);
    if (!mdc_host_dry()) memset(dlnf, 0, (size_t)s.n * s.C * sizeof(float));
    int h = mdc_i_ghead(c);
    mdc_lmhead_backward(m->dev, dlnf, G(m, h), logits, in, P(m, h), s.n, s.C, s.Vl);
    return MDC_OK;
}

/* the entries both default tables share: the float arithmetic and its sink */
#define DEFAULT_ARITHMETIC                                                                                 \
    .matmul = matmul, .dinput = dinput, .wgrad = wgrad, .layernorm_wgrad = layernorm_wgrad,                \
    .layernorm_backward = layernorm_backward, .rmsnorm_wgrad = rmsnorm_wgrad, .grad_dtype = MDC_F32,       \
    .grad_pack = grad_pack, .grad_unpack = grad_unpack, .grad_round = grad_round, .scalar_dtype = MDC_F64, \
    .objective = objective, .add_squares = add_squares, .scalar_value = scalar_value, .lm_head = lm_head

const mdc_i_ops mdc_i_ops_serial = {
    .name = "serial",
    DEFAULT_ARITHMETIC,
    .row_forward = row_forward_serial,
    .row_reduce = row_reduce_serial,
    .col_dinput = col_dinput_serial,
    .embed_forward = embed_forward_serial,
    .embed_backward = embed_backward_serial,
    .loss = loss_serial,
    .head_backward = head_backward_serial,
};

/* ---- tensor parallel ------------------------------------------------------------------------- */
/* the partial product over every position, reduced: SP's reduce-scatter from the set's `partial`,
 * else the allreduce in place in red */
static mdc_status row_reduce_tp(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *red, const float *in) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *part = m->part.sp ? buf(a, a->lay.partial) : red;
    matmul(m, part, in, P(m, L->w), NULL, s.n, L->K, s.C, L->wt);
    mdc_i_round(m, part, (size_t)s.n * s.C); /* 16-bit: each rank's product, then their sum */
    TAP(1 + L->l, L->site, MDC_TAP_FWD, MDC_TAP_PRE, part);
    /* planted faults (minidc/fault.h) at the attention projection's all-reduce */
    int attn = L->drop == MDC_DROP_ATTN_OUT, drop_sum = attn && mdc_plant_here(MDC_PLANT_REDUCTION, L->l);
    size_t np = (size_t)s.n * s.C;
    float *own = drop_sum ? malloc(np * sizeof(float)) : NULL;
    if (own) memcpy(own, part, np * sizeof(float));
    if (attn && mdc_plant_here(MDC_PLANT_MESSAGE, L->l)) mdc_transport_fault_corrupt_next(mdc_transport_default());
    mdc_status st = m->comm->g_forward(m->comm->ctx, red, part, a->B, a->T, s.C);
    if (own && !m->part.sp) memcpy(red, own, np * sizeof(float)); /* the rank goes on with its partial sum */
    free(own);
    TRY(st);
    mdc_i_round(m, red, (size_t)s.nl * s.C);
    TAP(1 + L->l, L->site, MDC_TAP_FWD, MDC_TAP_POST, red);
    return MDC_OK;
}

static mdc_status row_forward_tp(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *res,
                                 const float *in, const mdc_dropout *drop) {
    float *red = buf(a, m->part.sp ? a->lay.full : a->lay.partial);
    TRY(row_reduce_tp(m, a, L, red, in));
    mdc_i_row_tail(m, a, L, out, res, red, drop);
    return MDC_OK;
}

/* f^T: the partial input gradient over every position (SP: into dfull), reduced into dx. */
static mdc_status f_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, float *dx, float *dpart) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_round(m, dpart, (size_t)s.n * s.C); /* 16-bit: each rank's product, then their sum */
    TAP(unit, site, MDC_TAP_BWD, MDC_TAP_PRE, dpart);
    TRY(m->comm->f_backward(m->comm->ctx, dx, dpart, a->B, a->T, m->cfg.C));
    mdc_i_round(m, dx, (size_t)s.nl * s.C);
    return MDC_OK;
}

static mdc_status col_dinput_tp(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *dx, const float *dout) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *dpart = m->part.sp ? buf(a, a->lay.dfull) : dx;
    if (!mdc_host_dry()) memset(dpart, 0, (size_t)s.n * s.C * sizeof(float));
    dinput(m, dpart, dout, P(m, L->w), s.n, s.C, L->N, L->wt);
    return f_backward(m, a, 1 + L->l, L->site, dx, dpart);
}

/* The vocabulary-parallel embedding: this shard's rows, summed over tp (g), then the positions. */
static mdc_status embed_forward_tp(mdc_gpt2 *m, mdc_gpt2_acts *a, float *enc) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const float *wpe = P(m, mdc_i_gpos(&m->cfg));
    float *part = buf(a, a->lay.partial), *red = m->part.sp ? enc : part;
    mdc_embed_shard_forward(m->dev, part, a->inputs, P(m, 0), m->part.tp_rank * s.Vl, s.Vl, s.n, s.C);
    TRY(m->comm->g_forward(m->comm->ctx, red, part, a->B, a->T, s.C));
    if (!wpe) { /* no position table: the tokens' rows alone */
        if (red != enc) memcpy(enc, red, (size_t)s.nl * s.C * sizeof(float));
        return MDC_OK;
    }
    int pos0;
    const int *pos = mdc_i_positions_of(m, MDC_I_ROWS, s.Tl, &pos0);
    mdc_embed_positions(m->dev, enc, red, wpe, a->B, s.Tl, pos, pos0, s.C);
    return MDC_OK;
}

static mdc_status embed_backward_tp(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *dres) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const float *dout;
    TRY(mdc_i_gather_grad(m, a, dres, &dout));
    mdc_embed_shard_backward(m->dev, G(m, 0), G(m, mdc_i_gpos(&m->cfg)), dout, a->inputs, m->part.tp_rank * s.Vl, s.Vl,
                             mdc_i_positions_of(m, MDC_I_SEQ, s.Tl, NULL), a->B, a->T, s.C);
    return MDC_OK;
}

/* max, sum-exp and the target logit reduced over tp; the logits stay sharded */
static mdc_status loss_tp(mdc_gpt2 *m, mdc_gpt2_acts *a, double *sum) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int lo, valid = mdc_i_vocab_shard(m, s.Vl, &lo);
    float *logits = buf(a, a->lay.logits), *losses = buf(a, a->lay.losses), *lse = buf(a, a->lay.lse);
    float *mx = buf(a, a->lay.vstat), *se = mx + s.n;
    const mdc_gpt2_comm *c = m->comm;
    mdc_vocab_shard_max(m->dev, mx, logits, s.n, s.Vl, valid);
    TRY(c->vocab(c->ctx, mx, s.n, 1));
    mdc_vocab_shard_sumexp(m->dev, se, logits, mx, s.n, s.Vl, valid);
    TRY(c->vocab(c->ctx, se, s.n, 0));
    mdc_vocab_shard_target(m->dev, losses, logits, a->targets, lo, s.n, s.Vl, valid);
    TRY(c->vocab(c->ctx, losses, s.n, 0));
    for (int i = 0; i < s.n; i++) {
        lse[i] = mx[i] + mdc_logf(se[i]);
        losses[i] = lse[i] - losses[i];
    }
    mdc_dev_kernel(m->dev, 3.0 * s.n, 16.0 * s.n, MDC_PREC_FP32);
    *sum = 0;
    for (int i = 0; i < s.n; i++) *sum += losses[i];
    return MDC_OK;
}

static mdc_status head_backward_tp(mdc_gpt2 *m, mdc_gpt2_acts *a, float dloss, const float *in, float *dlnf) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int lo, valid = mdc_i_vocab_shard(m, s.Vl, &lo);
    float *logits = buf(a, a->lay.logits), *dpart = m->part.sp ? buf(a, a->lay.dfull) : dlnf;
    mdc_crossentropy_backward_shard(m->dev, logits, logits, buf(a, a->lay.lse), a->targets, lo, dloss, s.n, s.Vl,
                                    valid);
    mdc_i_round(m, logits, (size_t)s.n * s.Vl);
    TAP(m->cfg.L + 1, MDC_I_DS_LOGITS, MDC_TAP_BWD, MDC_TAP_AT, logits);
    /* the LM head is column-parallel over the vocabulary: its input gradient is a partial sum */
    if (!mdc_host_dry()) memset(dpart, 0, (size_t)s.n * s.C * sizeof(float));
    int h = mdc_i_ghead(&m->cfg);
    mdc_lmhead_backward(m->dev, dpart, G(m, h), logits, in, P(m, h), s.n, s.C, s.Vl);
    return f_backward(m, a, m->cfg.L + 1, MDC_I_DS_LNF, dlnf, dpart);
}

const mdc_i_ops mdc_i_ops_tp = {
    .name = "tp",
    DEFAULT_ARITHMETIC,
    .row_forward = row_forward_tp,
    .row_reduce = row_reduce_tp,
    .col_dinput = col_dinput_tp,
    .embed_forward = embed_forward_tp,
    .embed_backward = embed_backward_tp,
    .loss = loss_tp,
    .head_backward = head_backward_tp,
};

/* ---- the gradient sink and the step's scalars, as schemes see them (include/minidc/model.h) -- */
mdc_dtype mdc_gpt2_grad_dtype(const mdc_gpt2 *m) { return m->ops->grad_dtype; }
void mdc_gpt2_grad_pack(mdc_gpt2 *m, size_t off, size_t n, void *buf) { m->ops->grad_pack(m, off, n, buf); }
void mdc_gpt2_grad_unpack(mdc_gpt2 *m, size_t off, size_t n, const void *buf) { m->ops->grad_unpack(m, off, n, buf); }
mdc_status mdc_gpt2_grad_round(mdc_gpt2 *m) { return m->ops->grad_round(m); }
mdc_dtype mdc_gpt2_scalar_dtype(const mdc_gpt2 *m) { return m->ops->scalar_dtype; }
void mdc_gpt2_scalar_objective(mdc_gpt2 *m, double loss_sum, int count_loss, int count_moe, void *slot) {
    m->ops->objective(m, loss_sum, count_loss, count_moe, slot);
}
void mdc_gpt2_scalar_add_squares(mdc_gpt2 *m, const float *g, size_t n, void *slot) {
    m->ops->add_squares(m, g, n, slot);
}
double mdc_gpt2_scalar_value(const mdc_gpt2 *m, const void *slot) { return m->ops->scalar_value(slot); }
