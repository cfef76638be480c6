/* RMSNorm over the last dimension (Hugging Face's LlamaRMSNorm, Qwen's q_norm / k_norm per head).
 *   forward:  r = 1/sqrt(mean(x^2) + eps); y = w * (x*r)
 *             FLOPs 4*N*C; bytes 4*(2*N*C + C + N)   (x read, y written, w, rstd)
 *   backward: n = x*r; g = dy*w; dx += r*(g - n*mean(g*n)); dw += dy*n
 *             FLOPs 13*N*C; bytes 4*(4*N*C + 3*C + N) (dy x read, dx read+written; w read,
 *             dw read+written; rstd). Either part alone (dinp NULL, or dweight NULL): dx FLOPs
 *             10*N*C, bytes 4*(4*N*C + C + N); dw FLOPs 3*N*C, bytes 4*(2*N*C + 2*C + N).
 * The mean of squares is a float sum in channel order, as LayerNorm's variance.
 * dw sums over rows: each thread owns a fixed block of channels and walks all rows in order,
 * so the sums do not depend on the thread count. */
#include "internal.h"

void mdc_rmsnorm_forward(mdc_device *dev, float *out, float *rstd, const float *inp, const float *weight, int N, int C,
                         float eps) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *y = out + (size_t)i * C;
        float v = 0;
        for (int c = 0; c < C; c++) v += x[c] * x[c];
        float ms = v / C;
        float r = 1.0f / sqrtf(ms + eps);
        for (int c = 0; c < C; c++) y[c] = weight[c] * (x[c] * r);
        rstd[i] = r;
    }
    mdc_k_charge(dev, 4.0 * N * C, 4.0 * (2.0 * N * C + C + N));
}

void mdc_rmsnorm_backward(mdc_device *dev, float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, const float *rstd, int N, int C) {
    enum { CB = 64 };
    int ncb = (C + CB - 1) / CB;
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
        for (int i = 0; i < (dinp ? N : 0); i++) {
            const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
            float *dx = dinp + (size_t)i * C;
            float r = rstd[i];
            float sgn = 0;
            for (int c = 0; c < C; c++) {
                float n = x[c] * r, g = dy[c] * weight[c];
                sgn += g * n;
            }
            sgn /= C;
            for (int c = 0; c < C; c++) {
                float n = x[c] * r, g = dy[c] * weight[c];
                dx[c] += r * (g - n * sgn);
            }
        }
#pragma omp for schedule(static)
        for (int cb = 0; cb < (dweight ? ncb : 0); cb++) {
            int c0 = cb * CB, c1 = c0 + CB < C ? c0 + CB : C;
            float dw[CB];
            for (int c = c0; c < c1; c++) dw[c - c0] = 0;
            for (int i = 0; i < N; i++) {
                const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
                float r = rstd[i];
                for (int c = c0; c < c1; c++) dw[c - c0] += dy[c] * (x[c] * r);
            }
            for (int c = c0; c < c1; c++) dweight[c] += dw[c - c0];
        }
    }
    if (dinp && dweight) mdc_k_charge(dev, 13.0 * N * C, 4.0 * (4.0 * N * C + 3.0 * C + N));
    else if (dinp) mdc_k_charge(dev, 10.0 * N * C, 4.0 * (4.0 * N * C + C + N));
    else mdc_k_charge(dev, 3.0 * N * C, 4.0 * (2.0 * N * C + 2.0 * C + N));
}
