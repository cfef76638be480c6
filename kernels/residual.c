/* Residual add.
 *   forward:  out = a + b        FLOPs n;   bytes 12*n
 *   backward: da += dy; db += dy FLOPs 2*n; bytes 20*n (dy read; da, db read+written)
 *   bias + residual after a row-parallel reduction: out = (res + bias) + y
 *             FLOPs 2*N*C; bytes 4*(3*N*C + C) (the order of the fused serial kernel: the
 *             bias joins the residual first, the product last)
 *   bias:     y += bias (rows)   FLOPs N*C; bytes 4*(2*N*C + C) */
#include "internal.h"

void mdc_residual_forward(mdc_device *dev, float *out, const float *a, const float *b, size_t n) {
    if (mdc_dev_dry(dev)) goto charge;
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++) out[i] = a[i] + b[i];
charge:
    mdc_k_charge(dev, (double)n, 12.0 * (double)n);
}

void mdc_residual_backward(mdc_device *dev, float *da, float *db, const float *dout, size_t n) {
    if (mdc_dev_dry(dev)) goto charge;
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
charge:
    mdc_k_charge(dev, 2.0 * (double)n, 20.0 * (double)n);
}

void mdc_residual_bias_forward(mdc_device *dev, float *out, const float *res, const float *y, const float *bias, int N,
                               int C) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *o = out + (size_t)i * C;
        const float *r = res + (size_t)i * C, *v = y + (size_t)i * C;
        for (int j = 0; j < C; j++) o[j] = (r[j] + bias[j]) + v[j];
    }
charge:
    mdc_k_charge(dev, 2.0 * N * C, 4.0 * (3.0 * N * C + C));
}

void mdc_bias_forward(mdc_device *dev, float *y, const float *bias, int N, int C) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *v = y + (size_t)i * C;
        for (int j = 0; j < C; j++) v[j] += bias[j];
    }
charge:
    mdc_k_charge(dev, (double)N * C, 4.0 * (2.0 * N * C + C));
}
