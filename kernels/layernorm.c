/* LayerNorm over the last dimension, eps 1e-5, biased variance (PyTorch's).
 *   forward:  m = mean(x); r = 1/sqrt(mean((x-m)^2) + eps); y = (x-m)*r*w + b
 *             FLOPs 8*N*C; bytes 4*(2*N*C + 2*C + 2*N)   (x read, y written, w b, mean rstd)
 *   backward: n = (x-m)*r; g = dy*w; dx += r*(g - mean(g) - n*mean(g*n)); dw += dy*n; db += dy
 *             FLOPs 14*N*C; bytes 4*(4*N*C + 5*C + 2*N) (dy x read, dx read+written; w read,
 *             dw db read+written; mean rstd). Either part alone (dinp NULL, or dweight and
 *             dbias NULL): dx FLOPs 10*N*C, bytes 4*(4*N*C + C + 2*N); dw db FLOPs 4*N*C,
 *             bytes 4*(2*N*C + 4*C + 2*N).
 * Statistics in float with a two-pass variance, like PyTorch's CPU kernel to ~1 ulp.
 * dw, db sum over rows: each thread owns a fixed block of channels and walks all rows in order,
 * so the sums do not depend on the thread count. */
#include "internal.h"

void mdc_layernorm_forward(mdc_device *dev, float *out, float *mean, float *rstd, const float *inp, const float *weight,
                           const float *bias, int N, int C) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *y = out + (size_t)i * C;
        float s = 0;
        for (int c = 0; c < C; c++) s += x[c];
        float m = s / C;
        float v = 0;
        for (int c = 0; c < C; c++) {
            float d = x[c] - m;
            v += d * d;
        }
        float r = 1.0f / sqrtf(v / C + 1e-5f);
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = r;
    }
charge:
    mdc_k_charge(dev, 8.0 * N * C, 4.0 * (2.0 * N * C + 2.0 * C + 2.0 * N));
}

void mdc_layernorm_backward(mdc_device *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean, const float *rstd, int N, int C) {
    enum { CB = 64 };
    int ncb = (C + CB - 1) / CB;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
        for (int i = 0; i < (dinp ? N : 0); i++) {
            const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
            float *dx = dinp + (size_t)i * C;
            float m = mean[i], r = rstd[i];
            float sg = 0, sgn = 0;
            for (int c = 0; c < C; c++) {
                float n = (x[c] - m) * r, g = dy[c] * weight[c];
                sg += g;
                sgn += g * n;
            }
            sg /= C;
            sgn /= C;
            for (int c = 0; c < C; c++) {
                float n = (x[c] - m) * r, g = dy[c] * weight[c];
                dx[c] += r * (g - sg - n * sgn);
            }
        }
#pragma omp for schedule(static)
        for (int cb = 0; cb < (dweight ? ncb : 0); cb++) {
            int c0 = cb * CB, c1 = c0 + CB < C ? c0 + CB : C;
            float dw[CB], db[CB];
            for (int c = c0; c < c1; c++) dw[c - c0] = db[c - c0] = 0;
            for (int i = 0; i < N; i++) {
                const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
                float m = mean[i], r = rstd[i];
                for (int c = c0; c < c1; c++) {
                    dw[c - c0] += dy[c] * ((x[c] - m) * r);
                    db[c - c0] += dy[c];
                }
            }
            for (int c = c0; c < c1; c++) {
                dweight[c] += dw[c - c0];
                dbias[c] += db[c - c0];
            }
        }
    }
charge:
    if (dinp && dweight) mdc_k_charge(dev, 14.0 * N * C, 4.0 * (4.0 * N * C + 5.0 * C + 2.0 * N));
    else if (dinp) mdc_k_charge(dev, 10.0 * N * C, 4.0 * (4.0 * N * C + C + 2.0 * N));
    else mdc_k_charge(dev, 4.0 * N * C, 4.0 * (2.0 * N * C + 4.0 * C + 2.0 * N));
}
