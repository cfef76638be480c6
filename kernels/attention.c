/* Causal multi-head self-attention that materializes the T x T probabilities.
 * Per (batch, head), in row tiles of TILE queries (only the causal part of the scores is
 * computed: tile i needs keys 0..i1-1):
 *   S = (Q K^T) / sqrt(hs)  (sgemm)  ->  P = softmax over s <= t  ->  O = P V  (sgemm)
 * Backward: dP = dO V^T; dS = P * (dP - rowsum(P * dP)); dQ += dS K / sqrt(hs);
 *           dK += dS^T Q / sqrt(hs); dV += P^T dO   (all sgemm on the causal tiles)
 * With dropout (kernels/dropout.c; M the mask, s = 1/(1-p)): O = (M P s) V from a per-thread
 * copy of the tile's rows; att keeps the undropped P for the softmax backward. Backward:
 * dV += (M P s)^T dO (the mask regenerated per key tile), dP = M (dO V^T) s, dS as above with
 * the undropped P.
 * With Pc = T(T+1)/2 causal entries per head and hs = C/NH (FLOPs per head, x B*NH):
 *   forward:  FLOPs (4*hs + 5)*Pc;   bytes 4*(4*T*hs + 4*Pc)
 *             (q k v read, out written; S written and read, P written and read: the unfused
 *              GPU kernel sequence)
 *   backward: FLOPs (8*hs + 4)*Pc;   bytes 4*(10*T*hs + 7*Pc)
 *             (q k v dout read, dqkv read+written; P read twice, dP written+read, dS
 *              written+read twice)
 *   dropout adds: forward Pc FLOPs, 2*Pc floats (P read, M P s written, then read instead
 *             of P); backward 2*Pc FLOPs, 2*Pc floats (dO V^T written+read once more)
 * Heads are independent: OpenMP over (b, h); each head's products are single sgemm calls, so
 * the result does not depend on the thread count. */
#include <omp.h>
#include <stdlib.h>

#include "internal.h"

enum { TILE = 64 };

static double causal(int T) { return 0.5 * (double)T * (T + 1); }

static int dropping(const mdc_dropout *drop) { return drop && drop->p > 0.0f; }

void mdc_attention_forward_drop(mdc_device *dev, float *out, float *att, const float *qkv, const mdc_dropout *drop,
                                int B, int T, int C, int NH) {
    mdc_kernels_init();
    int hs = C / NH, C3 = 3 * C, dr = dropping(drop);
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float *Pd = dr ? malloc(sizeof(float) * TILE * (size_t)T) : NULL; /* dropped tile rows */
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * NH; bh++) {
            int b = bh / NH, h = bh % NH;
            const float *q = qkv + (size_t)b * T * C3 + h * hs, *k = q + C, *v = q + 2 * C;
            float *P = att + (size_t)bh * T * T, *o = out + (size_t)b * T * C + h * hs;
            for (int i0 = 0; i0 < T; i0 += TILE) {
                int i1 = i0 + TILE < T ? i0 + TILE : T, rows = i1 - i0;
                mdc_k_sgemm1(0, 1, rows, i1, hs, scale, q + (size_t)i0 * C3, C3, k, C3, 0.0f, P + (size_t)i0 * T, T);
                for (int t = i0; t < i1; t++) {
                    float *p = P + (size_t)t * T;
                    float mx = p[0];
                    for (int s = 1; s <= t; s++) mx = p[s] > mx ? p[s] : mx;
                    float sum = 0;
#pragma omp simd reduction(+ : sum)
                    for (int s = 0; s <= t; s++) {
                        p[s] = mdc_k_exp(p[s] - mx);
                        sum += p[s];
                    }
                    float inv = 1.0f / sum;
                    for (int s = 0; s <= t; s++) p[s] *= inv;
                    for (int s = t + 1; s < i1; s++) p[s] = 0;
                }
                const float *A = P + (size_t)i0 * T;
                if (dr) {
                    for (int t = i0; t < i1; t++) {
                        float *d = Pd + (size_t)(t - i0) * T;
                        mdc_dropout_attn_apply(drop, d, P + (size_t)t * T, drop->row0 + b, drop->head0 + h,
                                               drop->pos0 + t, drop->pos0, t + 1);
                        for (int s = t + 1; s < i1; s++) d[s] = 0;
                    }
                    A = Pd;
                }
                mdc_k_sgemm1(0, 0, rows, hs, i1, 1.0f, A, T, v, C3, 0.0f, o + (size_t)i0 * C, C);
            }
        }
        free(Pd);
    }
    double pc = causal(T), n = (double)B * NH;
    mdc_k_charge(dev, n * (4.0 * hs + 5 + dr) * pc, n * 4 * (4.0 * T * hs + (4 + 2 * dr) * pc));
}

void mdc_attention_forward(mdc_device *dev, float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
    mdc_attention_forward_drop(dev, out, att, qkv, NULL, B, T, C, NH);
}

void mdc_attention_backward_drop(mdc_device *dev, float *dqkv, float *scratch, const float *dout, const float *qkv,
                                 const float *att, const mdc_dropout *drop, int B, int T, int C, int NH) {
    mdc_kernels_init();
    int hs = C / NH, C3 = 3 * C, dr = dropping(drop);
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float *Pd = dr ? malloc(sizeof(float) * (size_t)T * TILE) : NULL; /* dropped key tile */
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * NH; bh++) {
            int b = bh / NH, h = bh % NH;
            int grow = dr ? drop->row0 + b : 0, ghead = dr ? drop->head0 + h : 0, pos0 = dr ? drop->pos0 : 0;
            size_t qoff = (size_t)b * T * C3 + h * hs;
            const float *q = qkv + qoff, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + qoff, *dk = dq + C, *dv = dq + 2 * C;
            const float *P = att + (size_t)bh * T * T, *dO = dout + (size_t)b * T * C + h * hs;
            float *dS = scratch + (size_t)bh * T * T;
            for (int i0 = 0; i0 < T; i0 += TILE) {
                int i1 = i0 + TILE < T ? i0 + TILE : T, rows = i1 - i0;
                mdc_k_sgemm1(0, 1, rows, i1, hs, 1.0f, dO + (size_t)i0 * C, C, v, C3, 0.0f, dS + (size_t)i0 * T, T);
                for (int t = i0; t < i1; t++) {
                    const float *p = P + (size_t)t * T;
                    float *d = dS + (size_t)t * T;
                    if (dr) mdc_dropout_attn_apply(drop, d, d, grow, ghead, pos0 + t, pos0, t + 1);
                    float dot = 0;
                    for (int s = 0; s <= t; s++) dot += p[s] * d[s];
                    for (int s = 0; s <= t; s++) d[s] = p[s] * (d[s] - dot);
                    for (int s = t + 1; s < i1; s++) d[s] = 0;
                }
                mdc_k_sgemm1(0, 0, rows, hs, i1, scale, dS + (size_t)i0 * T, T, k, C3, 1.0f, dq + (size_t)i0 * C3, C3);
            }
            for (int j0 = 0; j0 < T; j0 += TILE) {
                int j1 = j0 + TILE < T ? j0 + TILE : T, cols = j1 - j0;
                const float *A = P + (size_t)j0 * T + j0;
                int lda = T;
                if (dr) { /* rows t >= j0 of the dropped P, keys j0..j1-1 */
                    for (int t = j0; t < T; t++) {
                        float *d = Pd + (size_t)(t - j0) * TILE;
                        int ns = t - j0 + 1 < cols ? t - j0 + 1 : cols;
                        mdc_dropout_attn_apply(drop, d, P + (size_t)t * T + j0, grow, ghead, pos0 + t, pos0 + j0, ns);
                        for (int c = ns; c < cols; c++) d[c] = 0;
                    }
                    A = Pd, lda = TILE;
                }
                mdc_k_sgemm1(1, 0, cols, hs, T - j0, 1.0f, A, lda, dO + (size_t)j0 * C, C, 1.0f, dv + (size_t)j0 * C3,
                             C3);
                mdc_k_sgemm1(1, 0, cols, hs, T - j0, scale, dS + (size_t)j0 * T + j0, T, q + (size_t)j0 * C3, C3, 1.0f,
                             dk + (size_t)j0 * C3, C3);
            }
        }
        free(Pd);
    }
    double pc = causal(T), n = (double)B * NH;
    mdc_k_charge(dev, n * (8.0 * hs + 4 + 2 * dr) * pc, n * 4 * (10.0 * T * hs + (7 + 2 * dr) * pc));
}

void mdc_attention_backward(mdc_device *dev, float *dqkv, float *scratch, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH) {
    mdc_attention_backward_drop(dev, dqkv, scratch, dout, qkv, att, NULL, B, T, C, NH);
}
