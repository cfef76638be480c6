/* SwiGLU (Hugging Face Llama / Qwen MLP: act_fn(gate_proj(x)) * up_proj(x), act_fn = SiLU), on
 * the fused gate|up product: each row of gu holds the row's gate (F) then its up (F), as the
 * model's one column-parallel product of gate_proj and up_proj leaves them (Megatron's fused
 * linear_fc1 with gated linear units, chunked in two on the last dimension).
 *   silu(g) = g / (1 + exp(-g)) = g sigmoid(g) (PyTorch's CPU silu);  y = silu(g) * u
 *   d silu/dg = s (1 + g (1 - s)),  s = sigmoid(g) = 1 / (1 + exp(-g))
 * exp is mdc_k_exp, as GELU's: exp(-g) is 0 for g > 87.3 and inf for g < -88.7, so silu is
 * g or -0 and s is 1 or 0 at the extremes, never inf - inf or 0 * inf (finite g, u, dy give
 * finite results unless a product itself overflows).  n = N F:
 *   forward:  FLOPs 5*n (negate, exp, add, divide, multiply);  bytes 12*n (g, u read; y written)
 *   backward: FLOPs 14*n;  bytes 28*n  (g, u, dy read; dg, du read+written) */
#include "internal.h"

void mdc_swiglu_forward(mdc_device *dev, float *out, const float *gu, int N, int F) {
    double n = (double)N * F;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float *gate = gu + (size_t)r * 2 * F, *up = gate + F;
        float *o = out + (size_t)r * F;
        for (int i = 0; i < F; i++) {
            float g = gate[i];
            o[i] = g / (1.0f + mdc_k_exp(-g)) * up[i];
        }
    }
charge:
    mdc_k_charge(dev, 5.0 * n, 12.0 * n);
}

void mdc_swiglu_backward(mdc_device *dev, float *dgu, const float *gu, const float *dout, int N, int F) {
    double n = (double)N * F;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float *gate = gu + (size_t)r * 2 * F, *up = gate + F, *dy = dout + (size_t)r * F;
        float *dgate = dgu + (size_t)r * 2 * F, *dup = dgate + F;
        for (int i = 0; i < F; i++) {
            float g = gate[i], e = 1.0f + mdc_k_exp(-g);
            float s = 1.0f / e, silu = g / e;
            dup[i] += dy[i] * silu;
            dgate[i] += dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
        }
    }
charge:
    mdc_k_charge(dev, 14.0 * n, 28.0 * n);
}
