/* Causal self-attention that materializes the T x T probabilities, with grouped-query heads
 * (Hugging Face Llama / Qwen repeat_kv): H query heads, KV key/value heads (KV divides H), head
 * width d; query head h reads kv head g = h / (H/KV). A qkv row is [q (H d) | k (KV d) | v (KV d)],
 * query head h at columns h d, kv head g of k at H d + g d, of v at H d + KV d + g d. GPT-2 is
 * KV = H, d = C/H (rows [q | k | v], each C wide).
 * Per (batch, query head), in row tiles of TILE queries (only the causal part of the scores is
 * computed: tile i needs keys 0..i1-1):
 *   S = (Q K^T) / sqrt(d)  (sgemm)  ->  P = softmax over s <= t  ->  O = P V  (sgemm)
 * Backward: dP = dO V^T; dS = P * (dP - rowsum(P * dP)); dQ += dS K / sqrt(d);
 *           dK += dS^T Q / sqrt(d); dV += P^T dO   (all sgemm on the causal tiles)
 * With dropout (kernels/dropout.c; M the mask, s = 1/(1-p)): O = (M P s) V from a per-thread
 * copy of the tile's rows; att keeps the undropped P for the softmax backward. Backward:
 * dV += (M P s)^T dO (the mask regenerated per key tile), dP = M (dO V^T) s, dS as above with
 * the undropped P. A 16-bit run (mdc_dev_half): P is rounded to the dtype as the P V product
 * reads it (and kept so), the dropped P likewise, forward and backward.
 * With Pc = T(T+1)/2 causal entries per head and r = KV/H (FLOPs per query head, x B*H):
 *   forward:  FLOPs (4*d + 5)*Pc;   bytes 4*((2 + 2r)*T*d + 4*Pc)
 *             (q read, out written; k v of the KV heads read; S written and read, P written
 *              and read: the unfused GPU kernel sequence)
 *   backward: FLOPs (8*d + 4)*Pc;   bytes 4*((4 + 6r)*T*d + 7*Pc)
 *             (q dout read, dq read+written; k v read, dk dv read+written of the KV heads; P
 *              read twice, dP written+read, dS written+read twice)
 *   dropout adds: forward Pc FLOPs, 2*Pc floats (P read, M P s written, then read instead
 *             of P); backward 2*Pc FLOPs, 2*Pc floats (dO V^T written+read once more)
 * (GPT-2, r = 1: 4*T*d and 10*T*d.) These are the passes a GPU runs one by one (scores, softmax,
 * dropout, P V; backward dP, dV, the softmax's, dQ, dK): the achievable device model times each
 * (mdc_dev_kernel_passes), the peak model the totals.
 * Forward: heads are independent, OpenMP over (b, h). Backward: OpenMP over (b, g), the query
 * heads of kv head g one after another in ascending order, so dK and dV of g are summed in a
 * fixed order by one thread. Each head's products are single sgemm calls: the result does not
 * depend on the thread count. */
#include <omp.h>
#include <stdlib.h>

#include "internal.h"

enum { TILE = 64 };

static double causal(int T) { return 0.5 * (double)T * (T + 1); }

static int dropping(const mdc_dropout *drop) { return drop && drop->p > 0.0f; }

static void attention_gqa_forward_named(const char *name, mdc_device *dev, float *out, float *att, const float *qkv,
                                        const mdc_dropout *drop, int B, int T, int H, int KV, int d) {
    mdc_kernels_init();
    int G = H / KV, Cq = H * d, W = (H + 2 * KV) * d, dr = dropping(drop), hk = mdc_dev_half(dev);
    float scale = 1.0f / sqrtf((float)d);
    double pc = causal(T), n = (double)B * H;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *Pd = dr ? malloc(sizeof(float) * TILE * (size_t)T) : NULL; /* dropped tile rows */
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * H; bh++) {
            int b = bh / H, h = bh % H, g = h / G;
            const float *row = qkv + (size_t)b * T * W, *q = row + h * d, *k = row + Cq + g * d;
            const float *v = k + KV * d;
            float *P = att + (size_t)bh * T * T, *o = out + (size_t)b * T * Cq + h * d;
            for (int i0 = 0; i0 < T; i0 += TILE) {
                int i1 = i0 + TILE < T ? i0 + TILE : T, rows = i1 - i0;
                mdc_k_sgemm1(0, 1, rows, i1, d, scale, q + (size_t)i0 * W, W, k, W, 0.0f, P + (size_t)i0 * T, T);
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
                    mdc_round_half(p, (size_t)t + 1, hk); /* 16 bits: P as the P V product reads it */
                    for (int s = t + 1; s < i1; s++) p[s] = 0;
                }
                const float *A = P + (size_t)i0 * T;
                if (dr) {
                    for (int t = i0; t < i1; t++) {
                        float *dd = Pd + (size_t)(t - i0) * T;
                        mdc_dropout_attn_apply(drop, dd, P + (size_t)t * T, drop->row0 + b, drop->head0 + h,
                                               drop->pos0 + t, drop->pos0, t + 1);
                        mdc_round_half(dd, (size_t)t + 1, hk);
                        for (int s = t + 1; s < i1; s++) dd[s] = 0;
                    }
                    A = Pd;
                }
                mdc_k_sgemm1(0, 0, rows, d, i1, 1.0f, A, T, v, W, 0.0f, o + (size_t)i0 * Cq, Cq);
            }
        }
        free(Pd);
    }
charge:
    if (dev) {
        double r = (double)KV / H, td = (double)T * d;
        mdc_kernel_pass ps[] = {
            {n * (2.0 * d + 1) * pc, n * 4 * ((1 + r) * td + pc), 1}, /* S = Q K^T / sqrt(d) */
            {n * 4 * pc, n * 4 * 2 * pc, 0},                          /* P = softmax(S) */
            {n * 2.0 * d * pc, n * 4 * (pc + (1 + r) * td), 1},       /* O = P V */
            {n * pc, n * 4 * 2 * pc, 0},                              /* dropout: P read, M P s written */
        };
        mdc_dev_kernel_passes(dev, name, n * (4.0 * d + 5 + dr) * pc,
                              n * 4 * ((2.0 + 2.0 * KV / H) * T * d + (4 + 2 * dr) * pc), 3 + dr, ps, MDC_PREC_GEMM);
    }
}

void mdc_attention_gqa_forward(mdc_device *dev, float *out, float *att, const float *qkv, const mdc_dropout *drop,
                               int B, int T, int H, int KV, int d) {
    attention_gqa_forward_named("mdc_attention_gqa_forward", dev, out, att, qkv, drop, B, T, H, KV, d);
}

void mdc_attention_forward_drop(mdc_device *dev, float *out, float *att, const float *qkv, const mdc_dropout *drop,
                                int B, int T, int C, int NH) {
    attention_gqa_forward_named("mdc_attention_forward_drop", dev, out, att, qkv, drop, B, T, NH, NH, C / NH);
}

void mdc_attention_forward(mdc_device *dev, float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
    attention_gqa_forward_named("mdc_attention_forward_drop", dev, out, att, qkv, NULL, B, T, NH, NH, C / NH);
}

static void attention_gqa_backward_named(const char *name, mdc_device *dev, float *dqkv, float *scratch,
                                         const float *dout, const float *qkv, const float *att, const mdc_dropout *drop,
                                         int B, int T, int H, int KV, int d) {
    mdc_kernels_init();
    int G = H / KV, Cq = H * d, W = (H + 2 * KV) * d, dr = dropping(drop), hk = mdc_dev_half(dev);
    float scale = 1.0f / sqrtf((float)d);
    double pc = causal(T), n = (double)B * H;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *Pd = dr ? malloc(sizeof(float) * (size_t)T * TILE) : NULL; /* dropped key tile */
#pragma omp for schedule(dynamic, 1)
        for (int bg = 0; bg < B * KV; bg++) { /* dk, dv of kv head g: this thread's */
            int b = bg / KV, g = bg % KV;
            size_t boff = (size_t)b * T * W;
            const float *k = qkv + boff + Cq + g * d, *v = k + KV * d;
            float *dk = dqkv + boff + Cq + g * d, *dv = dk + KV * d;
            for (int h = g * G; h < (g + 1) * G; h++) { /* the group's query heads, ascending */
                int bh = b * H + h;
                int grow = dr ? drop->row0 + b : 0, ghead = dr ? drop->head0 + h : 0, pos0 = dr ? drop->pos0 : 0;
                const float *q = qkv + boff + h * d;
                float *dq = dqkv + boff + h * d;
                const float *P = att + (size_t)bh * T * T, *dO = dout + (size_t)b * T * Cq + h * d;
                float *dS = scratch + (size_t)bh * T * T;
                for (int i0 = 0; i0 < T; i0 += TILE) {
                    int i1 = i0 + TILE < T ? i0 + TILE : T, rows = i1 - i0;
                    mdc_k_sgemm1(0, 1, rows, i1, d, 1.0f, dO + (size_t)i0 * Cq, Cq, v, W, 0.0f, dS + (size_t)i0 * T, T);
                    for (int t = i0; t < i1; t++) {
                        const float *p = P + (size_t)t * T;
                        float *ds = dS + (size_t)t * T;
                        if (dr) mdc_dropout_attn_apply(drop, ds, ds, grow, ghead, pos0 + t, pos0, t + 1);
                        float dot = 0;
                        for (int s = 0; s <= t; s++) dot += p[s] * ds[s];
                        for (int s = 0; s <= t; s++) ds[s] = p[s] * (ds[s] - dot);
                        for (int s = t + 1; s < i1; s++) ds[s] = 0;
                    }
                    mdc_k_sgemm1(0, 0, rows, d, i1, scale, dS + (size_t)i0 * T, T, k, W, 1.0f, dq + (size_t)i0 * W, W);
                }
                for (int j0 = 0; j0 < T; j0 += TILE) {
                    int j1 = j0 + TILE < T ? j0 + TILE : T, cols = j1 - j0;
                    const float *A = P + (size_t)j0 * T + j0;
                    int lda = T;
                    if (dr) { /* rows t >= j0 of the dropped P, keys j0..j1-1 */
                        for (int t = j0; t < T; t++) {
                            float *pd = Pd + (size_t)(t - j0) * TILE;
                            int ns = t - j0 + 1 < cols ? t - j0 + 1 : cols;
                            mdc_dropout_attn_apply(drop, pd, P + (size_t)t * T + j0, grow, ghead, pos0 + t, pos0 + j0,
                                                   ns);
                            mdc_round_half(pd, (size_t)ns, hk); /* as the forward's product read it */
                            for (int c = ns; c < cols; c++) pd[c] = 0;
                        }
                        A = Pd, lda = TILE;
                    }
                    mdc_k_sgemm1(1, 0, cols, d, T - j0, 1.0f, A, lda, dO + (size_t)j0 * Cq, Cq, 1.0f,
                                 dv + (size_t)j0 * W, W);
                    mdc_k_sgemm1(1, 0, cols, d, T - j0, scale, dS + (size_t)j0 * T + j0, T, q + (size_t)j0 * W, W, 1.0f,
                                 dk + (size_t)j0 * W, W);
                }
            }
        }
        free(Pd);
    }
charge:
    if (dev) {
        double r = (double)KV / H, td = (double)T * d;
        mdc_kernel_pass ps[] = {
            {n * 2.0 * d * pc, n * 4 * ((1 + r) * td + pc), 1},     /* dP = dO V^T */
            {n * 2.0 * d * pc, n * 4 * (pc + 2 * r * td), 1},       /* dV += P^T dO */
            {n * 4 * pc, n * 4 * 3 * pc, 0},                        /* dS = P (dP - rowsum(P dP)) */
            {n * 2.0 * d * pc, n * 4 * (pc + (r + 2) * td), 1},     /* dQ += dS K / sqrt(d) */
            {n * 2.0 * d * pc, n * 4 * (pc + (1 + 2 * r) * td), 1}, /* dK += dS^T Q / sqrt(d) */
            {n * 2 * pc, n * 4 * 2 * pc, 0},                        /* dropout: M dP s, (M P s) again */
        };
        mdc_dev_kernel_passes(dev, name, n * (8.0 * d + 4 + 2 * dr) * pc,
                              n * 4 * ((4.0 + 6.0 * KV / H) * T * d + (7 + 2 * dr) * pc), 5 + dr, ps, MDC_PREC_GEMM);
    }
}

void mdc_attention_gqa_backward(mdc_device *dev, float *dqkv, float *scratch, const float *dout, const float *qkv,
                                const float *att, const mdc_dropout *drop, int B, int T, int H, int KV, int d) {
    attention_gqa_backward_named("mdc_attention_gqa_backward", dev, dqkv, scratch, dout, qkv, att, drop, B, T, H, KV,
                                 d);
}

void mdc_attention_backward_drop(mdc_device *dev, float *dqkv, float *scratch, const float *dout, const float *qkv,
                                 const float *att, const mdc_dropout *drop, int B, int T, int C, int NH) {
    attention_gqa_backward_named("mdc_attention_backward_drop", dev, dqkv, scratch, dout, qkv, att, drop, B, T, NH, NH,
                                 C / NH);
}

void mdc_attention_backward(mdc_device *dev, float *dqkv, float *scratch, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH) {
    attention_gqa_backward_named("mdc_attention_backward_drop", dev, dqkv, scratch, dout, qkv, att, NULL, B, T, NH, NH,
                                 C / NH);
}
