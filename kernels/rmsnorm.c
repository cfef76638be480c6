/* RMSNorm over the last dimension (Hugging Face's LlamaRMSNorm, Qwen's q_norm / k_norm per head).
 *   forward:  r = 1/sqrt(mean(x^2) + eps); y = w * (x*r)
 *             FLOPs 4*N*C; bytes 4*(2*N*C + C + N)   (x read, y written, w, rstd)
 *   backward: n = x*r; g = dy*w; dx += r*(g - n*mean(g*n)); dw += dy*n
 *             FLOPs 13*N*C; bytes 4*(4*N*C + 3*C + N) (dy x read, dx read+written; w read,
 *             dw read+written; rstd). Either part alone (dinp NULL, or dweight NULL): dx FLOPs
 *             10*N*C, bytes 4*(4*N*C + C + N); dw FLOPs 3*N*C, bytes 4*(2*N*C + 2*C + N).
 * The heads variant normalizes each head of d channels of strided rows (Qwen3's q_norm and
 * k_norm on the q and k parts of the fused qkv rows); the plain one is its one-head case.
 * The mean of squares is a float sum in channel order, as LayerNorm's variance.
 * dw sums over rows: each thread owns a fixed block of channels and walks all rows in order,
 * so the sums do not depend on the thread count. */
#include "internal.h"

/* Unit u = r heads + h of the rows: head h of row r, d channels at r ld + h d. */
static inline size_t unit_at(int u, int heads, int d, int ld) {
    return (size_t)(u / heads) * ld + (size_t)(u % heads) * d;
}

void mdc_rmsnorm_heads_forward(mdc_device *dev, float *out, int ldo, float *rstd, const float *inp, int ldi,
                               const float *weight, int N, int heads, int d, float eps) {
    int U = N * heads;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int u = 0; u < U; u++) {
        const float *x = inp + unit_at(u, heads, d, ldi);
        float *y = out + unit_at(u, heads, d, ldo);
        float v = 0;
        for (int c = 0; c < d; c++) v += x[c] * x[c];
        float ms = v / d;
        float r = 1.0f / sqrtf(ms + eps);
        for (int c = 0; c < d; c++) y[c] = weight[c] * (x[c] * r);
        rstd[u] = r;
    }
charge:
    mdc_k_charge(dev, 4.0 * U * d, 4.0 * (2.0 * U * d + d + U));
}

void mdc_rmsnorm_heads_backward(mdc_device *dev, float *dinp, int ldd, float *dweight, const float *dout, int ldo,
                                const float *inp, int ldi, const float *weight, const float *rstd, int N, int heads,
                                int d) {
    enum { CB = 64 };
    int ncb = (d + CB - 1) / CB, U = N * heads;
    double nd = (double)U * d;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
        for (int u = 0; u < (dinp ? U : 0); u++) {
            const float *x = inp + unit_at(u, heads, d, ldi), *dy = dout + unit_at(u, heads, d, ldo);
            float *dx = dinp + unit_at(u, heads, d, ldd);
            float r = rstd[u];
            float sgn = 0;
            for (int c = 0; c < d; c++) {
                float n = x[c] * r, g = dy[c] * weight[c];
                sgn += g * n;
            }
            sgn /= d;
            for (int c = 0; c < d; c++) {
                float n = x[c] * r, g = dy[c] * weight[c];
                dx[c] += r * (g - n * sgn);
            }
        }
#pragma omp for schedule(static)
        for (int cb = 0; cb < (dweight ? ncb : 0); cb++) {
            int c0 = cb * CB, c1 = c0 + CB < d ? c0 + CB : d;
            float dw[CB];
            for (int c = c0; c < c1; c++) dw[c - c0] = 0;
            for (int u = 0; u < U; u++) {
                const float *x = inp + unit_at(u, heads, d, ldi), *dy = dout + unit_at(u, heads, d, ldo);
                float r = rstd[u];
                for (int c = c0; c < c1; c++) dw[c - c0] += dy[c] * (x[c] * r);
            }
            for (int c = c0; c < c1; c++) dweight[c] += dw[c - c0];
        }
    }
charge:
    if (dinp && dweight) mdc_k_charge(dev, 13.0 * nd, 4.0 * (4.0 * nd + 3.0 * d + U));
    else if (dinp) mdc_k_charge(dev, 10.0 * nd, 4.0 * (4.0 * nd + d + U));
    else mdc_k_charge(dev, 3.0 * nd, 4.0 * (2.0 * nd + 2.0 * d + U));
}

void mdc_rmsnorm_forward(mdc_device *dev, float *out, float *rstd, const float *inp, const float *weight, int N, int C,
                         float eps) {
    mdc_rmsnorm_heads_forward(dev, out, C, rstd, inp, C, weight, N, 1, C, eps);
}

void mdc_rmsnorm_backward(mdc_device *dev, float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, const float *rstd, int N, int C) {
    mdc_rmsnorm_heads_backward(dev, dinp, C, dweight, dout, C, inp, C, weight, rstd, N, 1, C);
}
