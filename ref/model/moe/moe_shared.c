/* A MoE block's shared expert (Qwen2-MoE, include/minidc/model.h): a SwiGLU MLP every token goes
 * through beside its routed experts, on the rank that holds the token, its output scaled by
 * sigmoid(x w) (shared_expert_gate, [1, C]) and added to the routed sum:
 *   out += s * down(silu(gate x) * up x),  s = 1 / (1 + exp(-x w))
 * (minidc's own exp: the same bits on every machine). Replicated like the router: its gradients
 * are the dense ones. Forward keeps gate|up, the SwiGLU, the output and s for the backward:
 *   dy_s = s dout,  ds = dout . y_s,  dz = ds s (1 - s),  dw += dz^T x,  dx += dz w + the MLP's. */
#include "minidc/numerics.h"
#include "moe_internal.h"

mdc_status mdc_i_moe_shared_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, moe_state *q, float *out) {
    int gate;
    mdc_i_expert s = mdc_i_shared_of(&m->cfg, l, &gate);
    if (s.w1 < 0) return MDC_OK;
    size_t n = (size_t)q->n, C = (size_t)m->cfg.C;
    char name[48];
    snprintf(name, sizeof name, "MoE block %d shared expert", l);
    TRY(mdc_dev_alloc(m->dev, (void **)&q->sbuf, (n * ((size_t)s.F1 + s.F + C + 1) + 4) * sizeof(float), MDC_MEM_ACTS,
                      name));
    q->sh = q->sbuf, q->su = q->sh + n * s.F1, q->sy = q->su + n * s.F, q->ss = q->sy + n * C;
    m->ops->matmul(m, q->sh, x, P(m, s.w1), NULL, q->n, (int)C, s.F1, 1);
    mdc_swiglu_forward(m->dev, q->su, q->sh, q->n, s.F);
    m->ops->matmul(m, q->sy, q->su, P(m, s.w2), NULL, q->n, s.F, (int)C, 1);
    TAP(1 + l, MDC_I_DS_SHARED, MDC_TAP_FWD, MDC_TAP_AT, q->sy);
    if (gate >= 0) m->ops->matmul(m, q->ss, x, P(m, gate), NULL, q->n, (int)C, 1, 1);
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < n; t++) {
        float g = gate >= 0 ? 1.0f / (1.0f + mdc_expf(-q->ss[t])) : 1.0f;
        q->ss[t] = g;
        const float *y = q->sy + t * C;
        float *o = out + t * C;
        for (size_t c = 0; c < C; c++) o[c] += g * y[c];
    }
    mdc_dev_kernel(m->dev, 4.0 * n + 2.0 * n * C, 4.0 * (3.0 * n * C + 2.0 * n), MDC_PREC_FP32);
    return MDC_OK;
}

mdc_status mdc_i_moe_shared_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const moe_state *q, const float *x,
                                     const float *dout, float *dx) {
    int gate;
    mdc_i_expert s = mdc_i_shared_of(&m->cfg, l, &gate);
    if (s.w1 < 0) return MDC_OK;
    size_t n = (size_t)q->n, C = (size_t)m->cfg.C;
    float *tmp;
    /* dy_s, dz; the SwiGLU's and gate|up's gradients; the two input gradients */
    size_t tn = n * C + n + n * (size_t)s.F + n * (size_t)s.F1 + 2 * n * C;
    TRY(mdc_dev_alloc(m->dev, (void **)&tmp, (tn + 4) * sizeof(float), MDC_MEM_ACTS, "MoE shared expert backward"));
    float *dys = tmp, *dz = dys + n * C, *du = dz + n, *dh = du + n * s.F, *dx1 = dh + n * s.F1, *dx2 = dx1 + n * C;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < n; t++) {
        const float *o = dout + t * C, *y = q->sy + t * C;
        float g = q->ss[t], ds = 0;
        for (size_t c = 0; c < C; c++) ds += o[c] * y[c], dys[t * C + c] = g * o[c];
        dz[t] = ds * g * (1.0f - g);
    }
    mdc_dev_kernel(m->dev, 3.0 * n * C + 3.0 * n, 4.0 * (3.0 * n * C + 2.0 * n), MDC_PREC_FP32);
    mdc_status st = mdc_i_tap(m, a, 1 + l, MDC_I_DS_SHARED, MDC_TAP_BWD, MDC_TAP_AT, dys);
    if (st) {
        mdc_dev_free(m->dev, tmp);
        return st;
    }
    memset(du, 0, (n * s.F + n * s.F1 + 2 * n * C) * sizeof(float));
    if (gate >= 0) {
        m->ops->wgrad(m, gate, -1, x, dz, NULL, q->n, q->n, (int)C, 1, 0, 1);
        m->ops->dinput(m, dx1, dz, P(m, gate), q->n, (int)C, 1, 1);
    }
    m->ops->dinput(m, du, dys, P(m, s.w2), q->n, s.F, (int)C, 1);
    mdc_swiglu_backward(m->dev, dh, q->sh, du, q->n, s.F);
    m->ops->dinput(m, dx2, dh, P(m, s.w1), q->n, (int)C, s.F1, 1);
    m->ops->wgrad(m, s.w2, -1, q->su, dys, NULL, q->n, q->n, s.F, (int)C, 0, 1);
    m->ops->wgrad(m, s.w1, -1, x, dh, NULL, q->n, q->n, (int)C, s.F1, 0, 1);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n * C; i++) dx[i] += dx1[i] + dx2[i];
    mdc_dev_kernel(m->dev, 2.0 * n * C, 16.0 * n * C, MDC_PREC_FP32);
    mdc_dev_free(m->dev, tmp);
    return MDC_OK;
}
