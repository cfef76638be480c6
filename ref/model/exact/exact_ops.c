/* Exact mode's arithmetic (ref/model/layers.h, mdc_i_ops; docs/exactness.md): the entries it
 * lays over the default tables. Products in fixed-order blocks (kernels/exact_blocks.c), every
 * sum a mesh can split cut into canonical blocks (tokens for weight gradients, one head or 4C/H
 * of a row-parallel contraction, the vocabulary in MDC_EXACT_VOCAB_BLOCK) and summed exactly,
 * over tp too (mdc_i_x_reduce); the gradient sink is the exact sums m->x.g, rounded once per
 * step. Attention's exact implementation: ref/model/attention.c. */
#include "minidc/numerics.h"
#include "../model_internal.h"

/* wt: W stored (N, K) (nn.Linear's layout), so the transposes swap */
static void x_matmul(mdc_gpt2 *m, float *out, const float *in, const float *W, const float *b, int n, int K, int N,
                     int wt) {
    mdc_x_matmul(m->dev, out, in, K, W, wt ? K : N, wt, b, n, K, N);
}

static void x_dinput(mdc_gpt2 *m, float *din, const float *dout, const float *W, int n, int K, int N, int wt) {
    mdc_x_matmul(m->dev, din, dout, N, W, wt ? K : N, !wt, NULL, n, N, K);
}

/* the product in contraction blocks, summed exactly over them and tp */
static mdc_status x_row_reduce(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *red, const float *in) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_x_begin(m, a);
    mdc_x_contract(m->dev, &m->x.act, in, L->K, P(m, L->w), L->wt ? L->K : s.C, L->wt, s.n, L->K, s.C, L->kblk);
    TRY(mdc_i_x_reduce(m, a, red));
    mdc_i_round(m, red, (size_t)s.nl * s.C);
    TAP(1 + L->l, L->site, MDC_TAP_FWD, MDC_TAP_POST, red);
    return MDC_OK;
}

static mdc_status x_row_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *res,
                                const float *in, const mdc_dropout *drop) {
    float *red = buf(a, a->lay.partial);
    TRY(x_row_reduce(m, a, L, red, in));
    mdc_i_row_tail(m, a, L, out, res, red, drop);
    return MDC_OK;
}

static mdc_status x_col_dinput(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *dx, const float *dout) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_x_begin(m, a);
    mdc_x_contract(m->dev, &m->x.act, dout, L->N, P(m, L->w), L->wt ? s.C : L->N, !L->wt, s.n, L->N, s.C, L->kblk);
    TRY(mdc_i_x_reduce(m, a, dx));
    mdc_i_round(m, dx, (size_t)s.nl * s.C);
    return MDC_OK;
}

static void x_wgrad(mdc_gpt2 *m, int gw, int gb, const float *in, const float *dout, const float *drows, int n, int nl,
                    int K, int N, int blk, int wt) {
    int b = blk ? blk : m->x.blk;
    if (wt) mdc_x_wgrad(m->dev, &m->x.g, mdc_i_xoff(m, gw), dout, N, in, K, n, N, K, b); /* dW (N, K) = dout^T in */
    else mdc_x_wgrad(m->dev, &m->x.g, mdc_i_xoff(m, gw), in, K, dout, N, n, K, N, b);
    if (gb < 0) return;
    if (drows) mdc_x_colsum(m->dev, &m->x.g, mdc_i_xoff(m, gb), drows, N, nl, N, b);
    else mdc_x_colsum(m->dev, &m->x.g, mdc_i_xoff(m, gb), dout, N, n, N, b);
}

static void x_layernorm_wgrad(mdc_gpt2 *m, const mdc_i_norm *N, const float *dout, const float *x, int n, int C) {
    mdc_x_layernorm_wgrad(m->dev, &m->x.g, mdc_i_xoff(m, N->w), mdc_i_xoff(m, N->b), dout, x, N->mean, N->rstd, n, C,
                          m->x.blk);
}

static void x_layernorm_backward(mdc_gpt2 *m, const mdc_i_norm *N, float *dx, const float *dout, const float *x, int n,
                                 int C) {
    mdc_layernorm_backward(m->dev, dx, NULL, NULL, dout, x, P(m, N->w), N->mean, N->rstd, n, C);
    x_layernorm_wgrad(m, N, dout, x, n, C);
}

static void x_rmsnorm_wgrad(mdc_gpt2 *m, int gw, const float *dout, int ldo, const float *x, int ldx, const float *rstd,
                            int n, int heads, int d) {
    mdc_x_rmsnorm_wgrad(m->dev, &m->x.g, mdc_i_xoff(m, gw), dout, ldo, x, ldx, rstd, n, heads, d, m->x.blk);
}

static void x_grad_pack(mdc_gpt2 *m, size_t off, size_t n, void *buf) { mdc_xsum_get(&m->x.g, off, n, buf); }
static void x_grad_unpack(mdc_gpt2 *m, size_t off, size_t n, const void *buf) { mdc_xsum_set(&m->x.g, off, buf, n); }

/* each token's row into its embedding row's exact sum */
static mdc_status x_embed_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *dres) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const float *dout;
    TRY(mdc_i_gather_grad(m, a, dres, &dout));
    int gpos = mdc_i_gpos(&m->cfg);
    mdc_x_embed(m->dev, &m->x.g, mdc_i_xoff(m, 0), gpos < 0 ? -1 : (long)mdc_i_xoff(m, gpos), dout, a->inputs,
                m->part.tp_rank * s.Vl, s.Vl, mdc_i_positions_of(m, MDC_I_SEQ, s.Tl, NULL), a->B, a->T, s.C);
    return MDC_OK;
}

static void x_lm_head(mdc_gpt2 *m, mdc_gpt2_acts *a, float *logits, const float *in) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_x_matmul(m->dev, logits, in, s.C, P(m, mdc_i_ghead(&m->cfg)), s.C, 1, NULL, s.n, s.C, s.Vl);
}

/* Vocabulary-parallel (serial: one shard): the max over tp, the sum-exp in vocabulary blocks
 * into one accumulator per position summed over tp exactly, and the target logit (one shard
 * holds it, so its sum over tp is exact in any order). */
static mdc_status x_loss(mdc_gpt2 *m, mdc_gpt2_acts *a, double *sum) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int n = s.n, lo, valid = mdc_i_vocab_shard(m, s.Vl, &lo);
    float *logits = buf(a, a->lay.logits), *mx = buf(a, a->lay.vstat), *losses = buf(a, a->lay.losses);
    float *lse = buf(a, a->lay.lse);
    const mdc_gpt2_comm *c = m->comm;
    mdc_vocab_shard_max(m->dev, mx, logits, n, s.Vl, valid);
    if (c) TRY(c->vocab(c->ctx, mx, n, 1));
    mdc_x_sumexp(m->dev, m->x.se, logits, s.Vl, mx, n, valid, MDC_EXACT_VOCAB_BLOCK);
    mdc_vocab_shard_target(m->dev, losses, logits, a->targets, lo, n, s.Vl, valid);
    if (c) {
        TRY(c->x_vocab(c->ctx, m->x.se, n));
        TRY(c->vocab(c->ctx, losses, n, 0));
    }
    for (int i = 0; i < n; i++) {
        lse[i] = mx[i] + mdc_logf(mdc_exact_to_f32(&m->x.se[i]));
        losses[i] = lse[i] - losses[i];
    }
    mdc_dev_kernel(m->dev, 3.0 * n, 16.0 * n, MDC_PREC_FP32);
    mdc_exact_add_f32s(&m->x.loss, losses, (size_t)n);
    *sum = 0;
    for (int i = 0; i < n; i++) *sum += losses[i];
    return MDC_OK;
}

/* dlnf in vocabulary blocks, summed exactly over them and tp; wte's gradient in token blocks */
static mdc_status x_head_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, float dloss, const float *in, float *dlnf) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int lo, valid = mdc_i_vocab_shard(m, s.Vl, &lo);
    float *logits = buf(a, a->lay.logits);
    mdc_crossentropy_backward_shard(m->dev, logits, logits, buf(a, a->lay.lse), a->targets, lo, dloss, s.n, s.Vl,
                                    valid);
    mdc_i_round(m, logits, (size_t)s.n * s.Vl);
    TAP(m->cfg.L + 1, MDC_I_DS_LOGITS, MDC_TAP_BWD, MDC_TAP_AT, logits);
    int h = mdc_i_ghead(&m->cfg);
    mdc_i_x_begin(m, a);
    mdc_x_contract(m->dev, &m->x.act, logits, s.Vl, P(m, h), s.C, 0, s.n, s.Vl, s.C, MDC_EXACT_VOCAB_BLOCK);
    TRY(mdc_i_x_reduce(m, a, dlnf));
    mdc_x_wgrad(m->dev, &m->x.g, mdc_i_xoff(m, h), logits, s.Vl, in, s.C, s.n, s.Vl, s.C, m->x.blk);
    return MDC_OK;
}

/* the sums rounded once, into the float gradients (the whole local layout) */
static mdc_status x_grad_round(mdc_gpt2 *m) {
    if (!mdc_xsum_ok(&m->x.g)) return mdc_fail(MDC_ERR_OOM_HOST, "exact gradient sums: an accumulator");
    mdc_xsum_round(&m->x.g, 0, m->floats, m->grads);
    mdc_dev_kernel(m->dev, (double)m->floats, 12.0 * (double)m->floats, MDC_PREC_FP32);
    return MDC_OK;
}

/* the loss as the sum of the per-position losses, exactly, and MoE's aux terms likewise */
static void x_objective(mdc_gpt2 *m, double loss_sum, int count_loss, int count_moe, void *slot) {
    (void)loss_sum;
    mdc_exact *acc = slot;
    if (count_loss) *acc = m->x.loss;
    else mdc_exact_clear(acc);
    if (count_moe) mdc_exact_sum(acc, acc, mdc_gpt2_moe_exact_loss(m));
}

static void x_add_squares(mdc_gpt2 *m, const float *g, size_t n, void *slot) {
    (void)m;
    mdc_exact_add_squares(slot, g, n);
}

static double x_scalar_value(const void *slot) { return mdc_exact_to_f64(slot); }

void mdc_i_ops_exact_over(mdc_i_ops *o, int token_block) {
    o->name = "exact";
    o->matmul = x_matmul, o->dinput = x_dinput, o->row_forward = x_row_forward, o->row_reduce = x_row_reduce;
    o->col_dinput = x_col_dinput;
    o->wgrad = x_wgrad, o->layernorm_wgrad = x_layernorm_wgrad, o->layernorm_backward = x_layernorm_backward;
    o->rmsnorm_wgrad = x_rmsnorm_wgrad;
    o->grad_dtype = MDC_EXACT, o->grad_pack = x_grad_pack, o->grad_unpack = x_grad_unpack, o->grad_block = token_block;
    o->grad_round = x_grad_round, o->scalar_dtype = MDC_EXACT, o->objective = x_objective;
    o->add_squares = x_add_squares, o->scalar_value = x_scalar_value;
    o->embed_backward = x_embed_backward, o->lm_head = x_lm_head, o->loss = x_loss, o->head_backward = x_head_backward;
}
