/* The linear layers of the block (ref/model/layers.h): Megatron's ColumnParallelLinear and
 * RowParallelLinear. They own the conjugate operators f (before a column-parallel linear:
 * identity forward, the input gradient's reduction backward; with SP an all-gather forward and a
 * reduce-scatter backward) and g (after a row-parallel one: the partial sums' reduction forward,
 * identity backward; with SP a reduce-scatter forward and an all-gather backward), SP's gathered
 * buffers, the bias after the reduction, the residual and its dropout, and the taps at f and g.
 * The products and the gradient sums are the arithmetic's (m->ops: default kernels or exact
 * mode's blocks); the communication is the tensor-parallel component's (m->comm). */
#include "model_internal.h"

mdc_status mdc_i_gather(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *x, const float **in) {
    *in = x;
    if (!m->part.sp) return MDC_OK;
    float *full = buf(a, a->lay.full);
    *in = full;
    return m->comm->f_forward(m->comm->ctx, full, x, a->B, a->T, m->cfg.C);
}

mdc_status mdc_i_gather_grad(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *dy, const float **dout) {
    *dout = dy;
    if (!m->part.sp) return MDC_OK;
    float *full = buf(a, a->lay.full);
    *dout = full;
    return m->comm->g_backward(m->comm->ctx, full, dy, a->B, a->T, m->cfg.C);
}

mdc_status mdc_i_gather_tapped(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, const float *x, const float **in) {
    TRY(mdc_i_gather(m, a, x, in));
    if (*in != x) TAP(unit, site, MDC_TAP_FWD, MDC_TAP_PRE, x);
    TAP(unit, site, MDC_TAP_FWD, MDC_TAP_POST, *in);
    return MDC_OK;
}

mdc_status mdc_i_col_linear(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const float *in;
    TRY(mdc_i_gather_tapped(m, a, 1 + L->l, L->site, x, &in));
    m->ops->matmul(m, out, in, P(m, L->w), L->b >= 0 ? P(m, L->b) : NULL, s.n, L->K, L->N, L->wt);
    mdc_i_round(m, out, (size_t)s.n * L->N);
    if (L->osite >= 0) TAP(1 + L->l, L->osite, MDC_TAP_FWD, MDC_TAP_AT, out);
    return MDC_OK;
}

mdc_status mdc_i_row_linear(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *res,
                            const float *in) {
    mdc_dropout dd;
    return m->ops->row_forward(m, a, L, out, res, in, drop_of(m, a, L->l, L->drop, &dd));
}

void mdc_i_row_tail(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *res, float *red,
                    const mdc_dropout *drop) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const float *b = P(m, L->b); /* NULL: no bias */
    if (!drop) {
        if (b) mdc_residual_bias_forward(m->dev, out, res, red, b, s.nl, s.C);
        else mdc_residual_forward(m->dev, out, res, red, (size_t)s.nl * s.C);
    } else {
        if (b) mdc_bias_forward(m->dev, red, b, s.nl, s.C);
        mdc_dropout_residual_forward(m->dev, out, res, red, drop, a->B, s.Tl, s.C);
    }
    mdc_i_round(m, out, (size_t)s.nl * s.C); /* the residual stream in the dtype */
}

void mdc_i_residual(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int drop, float *out, const float *res, const float *y) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_dropout dd;
    const mdc_dropout *d = drop_of(m, a, l, drop, &dd);
    if (!d) mdc_residual_forward(m->dev, out, res, y, (size_t)s.nl * s.C);
    else mdc_dropout_residual_forward(m->dev, out, res, y, d, a->B, s.Tl, s.C);
    mdc_i_round(m, out, (size_t)s.nl * s.C);
}

const float *mdc_i_branch_grad(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int drop, const float *dres) {
    mdc_dropout dd;
    const mdc_dropout *d = drop_of(m, a, l, drop, &dd);
    if (!d) return dres;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *dy = buf(a, a->lay.dmask);
    if (!mdc_host_dry()) memset(dy, 0, (size_t)s.nl * s.C * sizeof(float));
    mdc_dropout_residual_backward(m->dev, dy, dres, d, a->B, s.Tl, s.C);
    mdc_i_round(m, dy, (size_t)s.nl * s.C);
    return dy;
}

void mdc_i_linear_wgrad(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, const mdc_i_wslot *w) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    m->ops->wgrad(m, L->w, L->b, w->in, w->dout, L->row ? w->drows : NULL, s.n, s.nl, L->K, L->N, 0, L->wt);
}

void mdc_i_wready(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, const mdc_i_wslot *live, mdc_i_wslot *keep) {
    if (!keep) {
        mdc_i_linear_wgrad(m, a, L, live);
        return;
    }
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int copy = !mdc_host_dry(); /* a dry run keeps no values */
    if (copy) memcpy((float *)keep->dout, live->dout, (size_t)s.n * L->N * sizeof(float));
    if (L->row) { /* the input is a saved activation; the bias reads the residual stream's rows */
        keep->in = live->in;
        if (copy) memcpy((float *)keep->drows, live->drows, (size_t)s.nl * L->N * sizeof(float));
    } else if (copy) { /* the input as f gave it (SP: the gathered buffer, reused by the next gather) */
        memcpy((float *)keep->in, live->in, (size_t)s.n * L->K * sizeof(float));
    }
}

mdc_status mdc_i_row_linear_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *din,
                                     const float *dres, const float *in, mdc_i_wslot *keep) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int u = 1 + L->l;
    mdc_i_wslot w = {in, NULL, mdc_i_branch_grad(m, a, L->l, L->drop, dres)};
    w.dout = w.drows;
    if (m->part.sp) TAP(u, L->site, MDC_TAP_BWD, MDC_TAP_PRE, w.drows);
    TRY(mdc_i_gather_grad(m, a, w.drows, &w.dout)); /* g^T: gathered over every position with SP */
    TAP(u, L->site, MDC_TAP_BWD, MDC_TAP_POST, w.dout);
    mdc_i_wready(m, a, L, &w, keep);
    if (!mdc_host_dry()) memset(din, 0, (size_t)s.n * L->K * sizeof(float));
    m->ops->dinput(m, din, w.dout, P(m, L->w), s.n, L->K, L->N, L->wt);
    mdc_i_round(m, din, (size_t)s.n * L->K);
    return MDC_OK;
}

mdc_status mdc_i_col_linear_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *dx, const float *dout,
                                     const float *x, mdc_i_wslot *keep) {
    mdc_i_wslot w = {NULL, dout, NULL};
    TRY(mdc_i_gather(m, a, x, &w.in)); /* SP: the input gathered again (Megatron) */
    mdc_i_wready(m, a, L, &w, keep);
    if (L->dx_n &&
        !mdc_host_dry()) { /* the other columns' input gradient is another rank's: zero here (dout is the block's scratch) */
        mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
        for (int r = 0; r < s.n; r++)
            memset((float *)dout + (size_t)r * L->N + L->dx_n, 0, (size_t)(L->N - L->dx_n) * sizeof(float));
    }
    TRY(m->ops->col_dinput(m, a, L, dx, dout));
    TAP(1 + L->l, L->site, MDC_TAP_BWD, MDC_TAP_POST, dx);
    return MDC_OK;
}

const int *mdc_i_positions_of(const mdc_gpt2 *m, int rows, int Tl, int *pos0_out) {
    int pos0 = rows == MDC_I_ROWS && m->part.sp ? m->part.tp_rank * Tl : 0;
    if (pos0_out) *pos0_out = pos0;
    return m->cp ? m->cp->pos + pos0 : NULL;
}
