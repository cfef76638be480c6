/* Token + position embedding.
 *   forward:  out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
 *             FLOPs B*T*C; bytes 4*(B*T + 3*B*T*C)   (ids; wte row, wpe row read; out written)
 *   backward: dwte[inp[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:]
 *             FLOPs 2*B*T*C; bytes 4*(B*T + 5*B*T*C) (ids; dout read; dwte, dwpe rows read+written)
 * The backward scatter-adds into rows of dwte that repeated tokens share, so it is split over
 * channels (each thread owns whole columns and walks the tokens in order): deterministic.
 * Vocab-parallel (a shard of rows [lo, lo+rows) of wte on each tensor-parallel rank):
 *   shard forward:  out[i,:] = wte[inp[i]-lo,:] if lo <= inp[i] < lo+rows, else 0
 *                   FLOPs 0; bytes 4*(N + 2*N*C)  (the sum over ranks then adds positions)
 *   positions:      out[b,j,:] = in[b,j,:] + wpe[pos0+j,:] (or a map pos[j])  FLOPs B*Tl*C; bytes 12*B*Tl*C
 *   shard backward: as the backward, rows outside the shard skipped; dwpe from every position
 *             (dwpe NULL, no position table: FLOPs B*T*C; bytes 4*(B*T + 3*B*T*C)) */
#include <limits.h>

#include "internal.h"

void mdc_encoder_forward(mdc_device *dev, float *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                         int C) {
    double n = (double)B * T;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float *e = wte + (size_t)inp[bt] * C, *p = wpe + (size_t)(bt % T) * C;
        float *o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
charge:
    mdc_k_charge(dev, n * C, 4.0 * (n + 3.0 * n * C));
}

void mdc_encoder_backward(mdc_device *dev, float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                          int C) {
    mdc_embed_shard_backward(dev, dwte, dwpe, dout, inp, 0, INT_MAX, NULL, B, T, C); /* every row is this shard's */
}

void mdc_embed_shard_forward(mdc_device *dev, float *out, const int *inp, const float *wte, int lo, int rows, int N,
                             int C) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *o = out + (size_t)i * C;
        int r = inp[i] - lo;
        if (r >= 0 && r < rows) memcpy(o, wte + (size_t)r * C, sizeof(float) * C);
        else memset(o, 0, sizeof(float) * C);
    }
charge:
    mdc_k_charge(dev, 0, 4.0 * ((double)N + 2.0 * N * C));
}

void mdc_embed_positions(mdc_device *dev, float *out, const float *in, const float *wpe, int B, int Tl, const int *pos,
                         int pos0, int C) {
    double n = (double)B * Tl;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * Tl; bt++) {
        const float *e = in + (size_t)bt * C, *p = wpe + (size_t)(pos ? pos[bt % Tl] : pos0 + bt % Tl) * C;
        float *o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
charge:
    mdc_k_charge(dev, n * C, 12.0 * n * C);
}

void mdc_embed_shard_backward(mdc_device *dev, float *dwte, float *dwpe, const float *dout, const int *inp, int lo,
                              int rows, const int *pos, int B, int T, int C) {
    enum { CB = 32 };
    int ncb = (C + CB - 1) / CB;
    double n = (double)B * T;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
        for (int cb = 0; cb < ncb; cb++) {
            int c0 = cb * CB, c1 = c0 + CB < C ? c0 + CB : C;
            for (int bt = 0; bt < B * T; bt++) {
                int r = inp[bt] - lo;
                if (r < 0 || r >= rows) continue;
                float *d = dwte + (size_t)r * C;
                const float *g = dout + (size_t)bt * C;
                for (int c = c0; c < c1; c++) d[c] += g[c];
            }
        }
#pragma omp for schedule(static)
        for (int t = 0; t < (dwpe ? T : 0); t++) {            /* dwpe NULL: no position table (the families) */
            float *d = dwpe + (size_t)(pos ? pos[t] : t) * C; /* positions are distinct: rows are the thread's */
            for (int b = 0; b < B; b++) {
                const float *g = dout + ((size_t)b * T + t) * C;
                for (int c = 0; c < C; c++) d[c] += g[c];
            }
        }
    }
charge:
    if (dwpe) mdc_k_charge(dev, 2.0 * n * C, 4.0 * (n + 5.0 * n * C));
    else mdc_k_charge(dev, n * C, 4.0 * (n + 3.0 * n * C));
}
