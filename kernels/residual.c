/* Residual add.
 *   forward:  out = a + b        FLOPs n;   bytes 12*n
 *   backward: da += dy; db += dy FLOPs 2*n; bytes 20*n (dy read; da, db read+written) */
#include "internal.h"

void mdc_residual_forward(mdc_device *dev, float *out, const float *a, const float *b, size_t n) {
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++) out[i] = a[i] + b[i];
    mdc_k_charge(dev, (double)n, 12.0 * (double)n);
}

void mdc_residual_backward(mdc_device *dev, float *da, float *db, const float *dout, size_t n) {
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
    mdc_k_charge(dev, 2.0 * (double)n, 20.0 * (double)n);
}
