/* GELU, tanh approximation, computed as x * sigmoid(2u) (0.5 (1 + tanh u) = sigmoid(2u)):
 *   u = sqrt(2/pi) (x + 0.044715 x^3);  y = x / (1 + exp(-2u))
 *   dy/dx = s + x s (1 - s) 2 sqrt(2/pi) (1 + 3*0.044715 x^2),  s = sigmoid(2u)
 * exp is mdc_k_exp (vectorized, ~1 ulp), so a row costs no libm call.
 *   forward:  FLOPs 10*n (by convention: 7 arithmetic + exp 1 + divide 1 + ...);  bytes 8*n
 *   backward: FLOPs 16*n;  bytes 16*n  (x, dy read; dx read+written) */
#include "internal.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

void mdc_gelu_forward(mdc_device *dev, float *out, const float *inp, size_t n) {
    if (mdc_dev_dry(dev)) goto charge;
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++) {
        float x = inp[i];
        float u = GELU_K * (x + 0.044715f * x * x * x);
        out[i] = x / (1.0f + mdc_k_exp(-2.0f * u));
    }
charge:
    mdc_k_charge(dev, 10.0 * (double)n, 8.0 * (double)n);
}

void mdc_gelu_backward(mdc_device *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    if (mdc_dev_dry(dev)) goto charge;
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++) {
        float x = inp[i];
        float u = GELU_K * (x + 0.044715f * x * x * x);
        float s = 1.0f / (1.0f + mdc_k_exp(-2.0f * u));
        float du = 2.0f * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += dout[i] * (s + x * s * (1.0f - s) * du);
    }
charge:
    mdc_k_charge(dev, 16.0 * (double)n, 16.0 * (double)n);
}
