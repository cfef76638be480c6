/* The dense MLPs (ref/model/layers.h, mdc_i_mlp): out = x2 + dropout(g(act(f(ln2) W1 + b1) W2) + b2),
 * a column-parallel linear (this rank's columns), the activation, a row-parallel one.
 *   gelu    GPT-2: W1 = c_fc (4C/t columns), act = GELU (tanh);
 *   swiglu  the families: W1 = gate_proj and up_proj fused (their I/t rows each: each row of the
 *           product is [gate | up]), act = silu(gate) * up; W2 = down_proj.
 * The MoE MLP is the other implementation (ref/model/moe/moe.c). */
#include "model_internal.h"

/* u = act(h): h the first product (n, FCl), u (n, Fl) */
static void act_forward(mdc_gpt2 *m, const mdc_i_sizes *s, int swiglu, float *u, const float *h) {
    if (swiglu) mdc_swiglu_forward(m->dev, u, h, s->n, s->Fl);
    else mdc_gelu_forward(m->dev, u, h, (size_t)s->n * s->Fl);
}

/* dh (zero before) += act^T(du) */
static void act_backward(mdc_gpt2 *m, const mdc_i_sizes *s, int swiglu, float *dh, const float *h, const float *du) {
    if (swiglu) mdc_swiglu_backward(m->dev, dh, h, du, s->n, s->Fl);
    else mdc_gelu_backward(m->dev, dh, h, du, (size_t)s->n * s->Fl);
}

static mdc_status dense_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int swiglu, float *out, const float *res,
                                const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_block b;
    mdc_i_block_of(m, a, l, &b);
    float *h = lact(a, a->lay.fch, l), *u = lact(a, a->lay.fchg, l);
    TRY(mdc_i_col_linear(m, a, &b.fc, h, x)); /* h = f(x) W1 + b1 */
    if (swiglu) {                             /* its gate and up halves */
        TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_GATE, MDC_TAP_FWD, h, s.FCl, 0));
        TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_UP, MDC_TAP_FWD, h, s.FCl, s.Fl));
    }
    act_forward(m, &s, swiglu, u, h); /* u = act(h) */
    mdc_i_round(m, u, (size_t)s.n * s.Fl);
    TAP(1 + l, MDC_I_DS_GELU, MDC_TAP_FWD, MDC_TAP_AT, u);
    return mdc_i_row_linear(m, a, &b.fcp, out, res, u); /* out = res + dropout(g(u W2) + b2) */
}

static mdc_status dense_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int swiglu, float *dx, const float *dres,
                                 mdc_i_wslot *keep) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_block b;
    mdc_i_block_of(m, a, l, &b);
    float *du = buf(a, a->lay.dbig), *dh = buf(a, a->lay.dbig2);
    TRY(mdc_i_row_linear_backward(m, a, &b.fcp, du, dres, lact(a, a->lay.fchg, l), keep ? &keep[MDC_W_FCP] : NULL));
    TAP(1 + l, MDC_I_DS_GELU, MDC_TAP_BWD, MDC_TAP_AT, du);
    if (!mdc_host_dry()) memset(dh, 0, (size_t)s.n * s.FCl * sizeof(float));
    act_backward(m, &s, swiglu, dh, lact(a, a->lay.fch, l), du);
    mdc_i_round(m, dh, (size_t)s.n * s.FCl);
    if (swiglu) {
        TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_UP, MDC_TAP_BWD, dh, s.FCl, s.Fl));
        TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_GATE, MDC_TAP_BWD, dh, s.FCl, 0));
    } else TAP(1 + l, MDC_I_DS_FC, MDC_TAP_BWD, MDC_TAP_AT, dh);
    return mdc_i_col_linear_backward(m, a, &b.fc, dx, dh, lact(a, a->lay.ln2, l), keep ? &keep[MDC_W_FC] : NULL);
}

static void dense_wgrad(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const mdc_i_wslot *keep) {
    mdc_i_block b;
    mdc_i_block_of(m, a, l, &b);
    mdc_i_linear_wgrad(m, a, &b.fcp, &keep[MDC_W_FCP]);
    mdc_i_linear_wgrad(m, a, &b.fc, &keep[MDC_W_FC]);
}

static mdc_status gelu_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, const float *res, const float *x) {
    return dense_forward(m, a, l, 0, out, res, x);
}
static mdc_status gelu_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dx, const float *dres, mdc_i_wslot *keep) {
    return dense_backward(m, a, l, 0, dx, dres, keep);
}
static mdc_status swiglu_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, const float *res, const float *x) {
    return dense_forward(m, a, l, 1, out, res, x);
}
static mdc_status swiglu_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dx, const float *dres,
                                  mdc_i_wslot *keep) {
    return dense_backward(m, a, l, 1, dx, dres, keep);
}

const mdc_i_mlp mdc_i_mlp_gelu = {"gelu", gelu_forward, gelu_backward, dense_wgrad};
const mdc_i_mlp mdc_i_mlp_swiglu = {"swiglu", swiglu_forward, swiglu_backward, dense_wgrad};
