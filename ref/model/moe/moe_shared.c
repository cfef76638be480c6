/* A MoE block's shared expert (Qwen2-MoE's gated shared_expert, DeepSeek's ungated shared_experts;
 * include/minidc/model.h): a SwiGLU MLP every token goes through beside its routed experts, its
 * output scaled by sigmoid(x w) (shared_expert_gate, [1, C]; 1 without) and added to the routed sum:
 *   out += s * g(down(silu(gate f(x)) * up f(x))),  s = 1 / (1 + exp(-x w))
 * (minidc's own exp: the same bits on every machine). Tensor parallel like the dense MLP: gate|up
 * column-parallel, down row-parallel (f and g, SP's gathers, exact mode's canonical blocks); the
 * sigmoid gate replicated, on the residual stream's rows (its gradient partial over tp with SP,
 * like a norm's). Forward keeps gate|up and the SwiGLU over every position, the reduced output
 * and s on the rows, for the backward:
 *   dy = s dout,  ds = dout . y,  dz = ds s (1 - s),  dw += dz^T x,  dx += dz w + f^T(the MLP's). */
#include "minidc/numerics.h"
#include "moe_internal.h"

/* block l's shared expert as this rank holds it (0: none) */
static int shared_linears(mdc_gpt2 *m, int l, mdc_i_linear *up, mdc_i_linear *down, int *gate) {
    mdc_i_expert s = mdc_i_shared_of(&m->cfg, l, gate);
    if (s.w1 < 0) return 0;
    int C = m->cfg.C, Fl = s.F / m->part.tp, kblk = mdc_i_contract_block(&m->cfg, s.F);
    /* l, w, b, K, N, kblk, row, site, osite, drop, wt, dx_n: gate|up's rows are adjacent locally */
    *up = (mdc_i_linear){l, s.w1, -1, C, 2 * Fl, kblk, 0, -1, -1, -1, 1, 0};
    *down = (mdc_i_linear){l, s.w2, -1, Fl, C, kblk, 1, MDC_I_DS_SHARED, -1, -1, 1, 0};
    return 1;
}

mdc_status mdc_i_moe_shared_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, moe_state *q, float *out) {
    mdc_i_linear up, down;
    int gate;
    if (!shared_linears(m, l, &up, &down, &gate)) return MDC_OK;
    mdc_i_sizes z = mdc_i_sizes_of(m, a->B, a->T);
    size_t n = (size_t)z.n, nl = (size_t)q->n, C = (size_t)m->cfg.C, Fl = (size_t)down.K;
    char name[48];
    snprintf(name, sizeof name, "MoE block %d shared expert", l);
    TRY(mdc_dev_alloc(m->dev, (void **)&q->sbuf, (n * 3 * Fl + nl * (C + 1) + 4) * sizeof(float), MDC_MEM_ACTS, name));
    q->sh = q->sbuf, q->su = q->sh + n * 2 * Fl, q->sy = q->su + n * Fl, q->ss = q->sy + nl * C;
    TRY(mdc_i_col_linear(m, a, &up, q->sh, x)); /* h = f(x) [gate | up] */
    mdc_swiglu_forward(m->dev, q->su, q->sh, z.n, (int)Fl);
    mdc_i_round(m, q->su, n * Fl);
    TRY(m->ops->row_reduce(m, a, &down, q->sy, q->su)); /* y = g(u down) */
    if (gate >= 0) m->ops->matmul(m, q->ss, x, P(m, gate), NULL, q->n, (int)C, 1, 1);
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < nl; t++) {
        float g = gate >= 0 ? 1.0f / (1.0f + mdc_expf(-q->ss[t])) : 1.0f;
        q->ss[t] = g;
        const float *y = q->sy + t * C;
        float *o = out + t * C;
        for (size_t c = 0; c < C; c++) o[c] += g * y[c];
    }
    mdc_dev_kernel(m->dev, 4.0 * nl + 2.0 * nl * C, 4.0 * (3.0 * nl * C + 2.0 * nl), MDC_PREC_RUN);
    return MDC_OK;
}

mdc_status mdc_i_moe_shared_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const moe_state *q, const float *x,
                                     const float *dout, float *dx) {
    mdc_i_linear up, down;
    int gate;
    if (!shared_linears(m, l, &up, &down, &gate)) return MDC_OK;
    mdc_i_sizes z = mdc_i_sizes_of(m, a->B, a->T);
    size_t n = (size_t)z.n, nl = (size_t)q->n, C = (size_t)m->cfg.C, Fl = (size_t)down.K;
    float *tmp;
    /* on the rows: dy, dz, the gate's and the MLP's input gradients; over every position: du, dh */
    size_t tn = nl * C + nl + 2 * nl * C + n * 3 * Fl;
    TRY(mdc_dev_alloc(m->dev, (void **)&tmp, (tn + 4) * sizeof(float), MDC_MEM_ACTS, "MoE shared expert backward"));
    float *dys = tmp, *dz = dys + nl * C, *dx1 = dz + nl, *dx2 = dx1 + nl * C, *du = dx2 + nl * C, *dh = du + n * Fl;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < nl; t++) {
        const float *o = dout + t * C, *y = q->sy + t * C;
        float g = q->ss[t], ds = 0;
        for (size_t c = 0; c < C; c++) ds += o[c] * y[c], dys[t * C + c] = g * o[c];
        dz[t] = ds * g * (1.0f - g);
        mdc_round_half(dys + t * C, C, m->pc.prec);
    }
    mdc_dev_kernel(m->dev, 3.0 * nl * C + 3.0 * nl, 4.0 * (3.0 * nl * C + 2.0 * nl), MDC_PREC_RUN);
    memset(dx1, 0, nl * C * sizeof(float));
    if (gate >= 0) {
        m->ops->wgrad(m, gate, -1, x, dz, NULL, q->n, q->n, (int)C, 1, 0, 1);
        m->ops->dinput(m, dx1, dz, P(m, gate), q->n, (int)C, 1, 1);
    }
    /* du = g^T(dy) down^T (down's weight gradient now); dh = SwiGLU^T(du); dx2 = f^T(dh [gate|up]^T) */
    mdc_status st = mdc_i_row_linear_backward(m, a, &down, du, dys, q->su, NULL);
    if (!st) {
        memset(dh, 0, n * 2 * Fl * sizeof(float));
        mdc_swiglu_backward(m->dev, dh, q->sh, du, z.n, (int)Fl);
        mdc_i_round(m, dh, n * 2 * Fl);
        st = mdc_i_col_linear_backward(m, a, &up, dx2, dh, x, NULL);
    }
    if (!st) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < nl * C; i++) dx[i] += dx1[i] + dx2[i];
        mdc_dev_kernel(m->dev, 2.0 * nl * C, 16.0 * nl * C, MDC_PREC_RUN);
    }
    mdc_dev_free(m->dev, tmp);
    return st;
}
