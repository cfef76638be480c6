/* SwiGLU (Hugging Face Llama / Qwen MLP: act_fn(gate_proj(x)) * up_proj(x), act_fn = SiLU):
 *   silu(g) = g / (1 + exp(-g)) = g sigmoid(g) (PyTorch's CPU silu);  y = silu(g) * u
 *   d silu/dg = s (1 + g (1 - s)),  s = sigmoid(g) = 1 / (1 + exp(-g))
 * exp is mdc_k_exp, as GELU's: exp(-g) is 0 for g > 87.3 and inf for g < -88.7, so silu is
 * g or -0 and s is 1 or 0 at the extremes, never inf - inf or 0 * inf (finite g, u, dy give
 * finite results unless a product itself overflows).
 *   forward:  FLOPs 5*n (negate, exp, add, divide, multiply);  bytes 12*n (g, u read; y written)
 *   backward: FLOPs 14*n;  bytes 28*n  (g, u, dy read; dg, du read+written) */
#include "internal.h"

void mdc_swiglu_forward(mdc_device *dev, float *out, const float *gate, const float *up, size_t n) {
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + mdc_k_exp(-g)) * up[i];
    }
    mdc_k_charge(dev, 5.0 * (double)n, 12.0 * (double)n);
}

void mdc_swiglu_backward(mdc_device *dev, float *dgate, float *dup, const float *gate, const float *up,
                         const float *dout, size_t n) {
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++) {
        float g = gate[i], e = 1.0f + mdc_k_exp(-g);
        float s = 1.0f / e, silu = g / e;
        dup[i] += dout[i] * silu;
        dgate[i] += dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
    }
    mdc_k_charge(dev, 14.0 * (double)n, 28.0 * (double)n);
}
