/* The block's norms (ref/model/layers.h, mdc_i_norm_impl). LayerNorm over C with a weight and a
 * bias, its statistics (mean, rstd) saved by the forward. The input gradient and the weight
 * gradients are separate calls (B and W of zero-bubble schedules); the weight gradients go to
 * the arithmetic's sink (m->ops). */
#include "model_internal.h"

static void ln_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *out, const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_layernorm_forward(m->dev, out, N->mean, N->rstd, x, P(m, N->w), P(m, N->b), s.nl, s.C);
    mdc_i_round(m, out, (size_t)s.nl * s.C); /* the statistics stay fp32 */
}

static void ln_wgrad(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, const float *dout, const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    m->ops->layernorm_wgrad(m, N, dout, x, s.nl, s.C);
}

static void ln_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *dx, const float *dout,
                        const float *x, mdc_i_wslot *keep) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    if (keep) memcpy((float *)keep->dout, dout, (size_t)s.nl * s.C * sizeof(float));
    else ln_wgrad(m, a, N, dout, x);
    mdc_layernorm_backward(m->dev, dx, NULL, NULL, dout, x, P(m, N->w), N->mean, N->rstd, s.nl, s.C);
    mdc_i_round(m, dx, (size_t)s.nl * s.C);
}

static void ln_backward_all(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *dx, const float *dout,
                            const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    m->ops->layernorm_backward(m, N, dx, dout, x, s.nl, s.C);
    mdc_i_round(m, dx, (size_t)s.nl * s.C);
}

const mdc_i_norm_impl mdc_i_layernorm = {"layernorm", ln_forward, ln_backward, ln_wgrad, ln_backward_all};

/* RMSNorm over C with a weight (the families' input_layernorm, post_attention_layernorm and
 * model.norm): the forward saves each row's rstd; the input gradient is the kernel's, the weight
 * gradient the arithmetic's (m->ops->rmsnorm_wgrad), so exact mode sums it in token blocks. */
static void rms_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *out, const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_rmsnorm_forward(m->dev, out, N->rstd, x, P(m, N->w), s.nl, s.C, m->cfg.eps);
    mdc_i_round(m, out, (size_t)s.nl * s.C);
}

static void rms_wgrad(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, const float *dout, const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    m->ops->rmsnorm_wgrad(m, N->w, dout, s.C, x, s.C, N->rstd, s.nl, 1, s.C);
}

static void rms_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *dx, const float *dout,
                         const float *x, mdc_i_wslot *keep) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    if (keep) memcpy((float *)keep->dout, dout, (size_t)s.nl * s.C * sizeof(float));
    else rms_wgrad(m, a, N, dout, x);
    mdc_rmsnorm_backward(m->dev, dx, NULL, dout, x, P(m, N->w), N->rstd, s.nl, s.C);
    mdc_i_round(m, dx, (size_t)s.nl * s.C);
}

static void rms_backward_all(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *dx, const float *dout,
                             const float *x) {
    rms_backward(m, a, N, dx, dout, x, NULL);
}

const mdc_i_norm_impl mdc_i_rmsnorm = {"rmsnorm", rms_forward, rms_backward, rms_wgrad, rms_backward_all};

/* Qwen3's q_norm and k_norm: RMSNorm over each head's d channels of q and of k, weights (d) shared
 * by the heads. The projection's q and k are kept (qkraw, their rstd after: q's n Hl, then k's
 * n KVl) for the backward; qkv then holds the normalized heads, which the rotation turns. */
mdc_status mdc_i_qk_norm(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *qkv) {
    if (!m->cfg.qk_norm) return MDC_OK;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int w = (s.Hl + s.KVl) * s.d;
    float *raw = lact(a, a->lay.qkraw, l), *rstd = lact(a, a->lay.qkrstd, l);
    for (int r = 0; r < s.n; r++) memcpy(raw + (size_t)r * w, qkv + (size_t)r * s.QKVl, (size_t)w * sizeof(float));
    const mdc_gpt2_config *c = &m->cfg;
    mdc_rmsnorm_heads_forward(m->dev, qkv, s.QKVl, rstd, raw, w, P(m, mdc_i_gl(c, l, QNW)), s.n, s.Hl, s.d, c->eps);
    mdc_rmsnorm_heads_forward(m->dev, qkv + s.Cl, s.QKVl, rstd + (size_t)s.n * s.Hl, raw + s.Cl, w,
                              P(m, mdc_i_gl(c, l, KNW)), s.n, s.KVl, s.d, c->eps);
    mdc_i_round(m, qkv, (size_t)s.n * s.QKVl);
    TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_QNORM, MDC_TAP_FWD, qkv, s.QKVl, 0));
    return mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_KNORM, MDC_TAP_FWD, qkv, s.QKVl, s.Cl);
}

mdc_status mdc_i_qk_norm_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv) {
    if (!m->cfg.qk_norm) return MDC_OK;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_KNORM, MDC_TAP_BWD, dqkv, s.QKVl, s.Cl));
    TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_QNORM, MDC_TAP_BWD, dqkv, s.QKVl, 0));
    int w = (s.Hl + s.KVl) * s.d, gq = mdc_i_gl(&m->cfg, l, QNW), gk = mdc_i_gl(&m->cfg, l, KNW);
    const float *raw = lact(a, a->lay.qkraw, l), *rstd = lact(a, a->lay.qkrstd, l), *krstd = rstd + (size_t)s.n * s.Hl;
    float *dqk = buf(a, a->lay.dqk);
    if (!mdc_host_dry()) memset(dqk, 0, (size_t)s.n * w * sizeof(float));
    m->ops->rmsnorm_wgrad(m, gq, dqkv, s.QKVl, raw, w, rstd, s.n, s.Hl, s.d);
    if (!mdc_i_kv_copy(m)) /* a shared kv head's k_norm share: its first replica's */
        m->ops->rmsnorm_wgrad(m, gk, dqkv + s.Cl, s.QKVl, raw + s.Cl, w, krstd, s.n, s.KVl, s.d);
    mdc_rmsnorm_heads_backward(m->dev, dqk, w, NULL, dqkv, s.QKVl, raw, w, P(m, gq), rstd, s.n, s.Hl, s.d);
    mdc_rmsnorm_heads_backward(m->dev, dqk + s.Cl, w, NULL, dqkv + s.Cl, s.QKVl, raw + s.Cl, w, P(m, gk), krstd, s.n,
                               s.KVl, s.d);
    for (int r = 0; r < s.n; r++) memcpy(dqkv + (size_t)r * s.QKVl, dqk + (size_t)r * w, (size_t)w * sizeof(float));
    mdc_i_round(m, dqkv, (size_t)s.n * s.QKVl);
    return MDC_OK;
}
