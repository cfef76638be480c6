/* The block's norms (ref/model/layers.h, mdc_i_norm_impl): LayerNorm over C with a weight and a
 * bias, its statistics (mean, rstd) saved by the forward. The input gradient and the weight
 * gradients are separate calls (B and W of zero-bubble schedules); the weight gradients go to
 * the arithmetic's sink (m->ops). */
#include "model_internal.h"

static void ln_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *out, const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_layernorm_forward(m->dev, out, N->mean, N->rstd, x, P(m, N->w), P(m, N->b), s.nl, s.C);
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
}

static void ln_backward_all(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *dx, const float *dout,
                            const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    m->ops->layernorm_backward(m, N, dx, dout, x, s.nl, s.C);
}

const mdc_i_norm_impl mdc_i_layernorm = {"layernorm", ln_forward, ln_backward, ln_wgrad, ln_backward_all};
