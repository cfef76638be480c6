/* GPT-2's dense MLP (ref/model/layers.h, mdc_i_mlp): out = x2 + dropout(g(gelu(f(ln2) Wfc + bfc)
 * Wp) + bp), a column-parallel linear (this rank's 4C/t columns), GELU, a row-parallel one.
 * The MoE MLP is the other implementation (ref/model/moe/moe.c). */
#include "model_internal.h"

static mdc_status gelu_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, const float *res, const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_block b;
    mdc_i_block_of(m, a, l, &b);
    float *h = lact(a, a->lay.fch, l), *u = lact(a, a->lay.fchg, l);
    TRY(mdc_i_col_linear(m, a, &b.fc, h, x));           /* h = f(x) Wfc + bfc */
    mdc_gelu_forward(m->dev, u, h, (size_t)s.n * s.Fl); /* u = gelu(h) */
    TAP(1 + l, MDC_I_DS_GELU, MDC_TAP_FWD, MDC_TAP_AT, u);
    return mdc_i_row_linear(m, a, &b.fcp, out, res, u); /* out = res + dropout(g(u Wp) + bp) */
}

static mdc_status gelu_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dx, const float *dres, mdc_i_wslot *keep) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    size_t nF = (size_t)s.n * s.Fl;
    mdc_i_block b;
    mdc_i_block_of(m, a, l, &b);
    float *du = buf(a, a->lay.dbig), *dh = buf(a, a->lay.dbig2);
    TRY(mdc_i_row_linear_backward(m, a, &b.fcp, du, dres, lact(a, a->lay.fchg, l), keep ? &keep[MDC_W_FCP] : NULL));
    TAP(1 + l, MDC_I_DS_GELU, MDC_TAP_BWD, MDC_TAP_AT, du);
    memset(dh, 0, nF * sizeof(float));
    mdc_gelu_backward(m->dev, dh, lact(a, a->lay.fch, l), du, nF);
    TAP(1 + l, MDC_I_DS_FC, MDC_TAP_BWD, MDC_TAP_AT, dh);
    return mdc_i_col_linear_backward(m, a, &b.fc, dx, dh, lact(a, a->lay.ln2, l), keep ? &keep[MDC_W_FC] : NULL);
}

static void gelu_wgrad(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const mdc_i_wslot *keep) {
    mdc_i_block b;
    mdc_i_block_of(m, a, l, &b);
    mdc_i_linear_wgrad(m, a, &b.fcp, &keep[MDC_W_FCP]);
    mdc_i_linear_wgrad(m, a, &b.fc, &keep[MDC_W_FC]);
}

const mdc_i_mlp mdc_i_mlp_gelu = {"gelu", gelu_forward, gelu_backward, gelu_wgrad};
