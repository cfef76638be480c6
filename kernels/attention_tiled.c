/* Causal self-attention, tiled with an online softmax (FlashAttention, Dao et al. 2022), with
 * grouped-query heads as kernels/attention.c (H query heads, KV kv heads, width d; query head h
 * reads kv head h / (H/KV); GPT-2 is KV = H, d = C/H): per (batch, query head) and query tile of
 * MDC_ATTN_TILE rows, walk the key tiles up to the diagonal keeping each row's running max m,
 * running sum l and unnormalized output:
 *   S = Q_i K_j^T / sqrt(d);  m' = max(m, rowmax S);  P = exp(S - m');
 *   l = l exp(m - m') + rowsum P;  O = O exp(m - m') + P V_j;   finally O /= l, lse = m + log l
 * Extra memory: a tile of scores and of output per thread, O(T) per row at most; only lse
 * (B,H,T) is saved. The backward recomputes P = exp(S - lse) tile by tile (key tiles outer):
 *   D = rowsum(dO * O); dV_j += P^T dO_i; dP = dO_i V_j^T; dS = P (dP - D);
 *   dK_j += dS^T Q_i / sqrt(d); dQ_i += dS K_j / sqrt(d)
 * Pc = T(T+1)/2, r = KV/H, per query head (x B*H); KVT = sum over query tiles of the keys they
 * read = sum_i min(T, (i+1)*TILE):
 *   forward:  FLOPs (4*d + 5)*Pc;          bytes 4*(2*T*d + T + 2r*d*KVT)
 *             (q read and out written once, lse written, k v of the KV heads read once per
 *              query tile)
 *   backward: FLOPs (10*d + 4)*Pc + 2*T*d;
 *             bytes 4*(3*T*d [dO O read, D] + 6r*T*d [k v read, dk dv read+written, KV heads]
 *                  + sum over (j, i>=j) tile pairs of rows_i*(4*d + 2) [q dO read, dq
 *                  read+written, lse D read])
 * Dropout on the probabilities (kernels/dropout.c; M the mask, s = 1/(1-p)): the forward
 * multiplies each tile's exp(S - m') by M s after its row sums (l stays the undropped sum), so
 * O = (M P s) V; the backward regenerates M per tile (no mask is stored) for
 * dV_j += (M P s)^T dO_i and dP = M (dO_i V_j^T) s, and D = rowsum(dO * O) is still
 * rowsum(P * dP). Extra FLOPs: forward Pc, backward 2*Pc; no extra bytes (the mask is made
 * in registers).
 * A 16-bit run (mdc_dev_half): the P tile the P V product reads, and the one dV's reads, are rounded
 * to the dtype, as FlashAttention's (l, D and dS from fp32 P).
 * The backward runs OpenMP over (b, kv head), the group's query heads one after another in
 * ascending order (dK, dV of a kv head summed in a fixed order by one thread). No sgemm spans
 * two heads: the bits do not depend on the thread count. */
#include <omp.h>
#include <stdlib.h>

#include "internal.h"
#include "minidc/numerics.h"

enum { TILE = MDC_ATTN_TILE };

static double causal(int T) { return 0.5 * (double)T * (T + 1); }

/* per query head; H, KV: the k, v share of the KV heads */
static double fwd_bytes(int T, int d, int H, int KV) {
    double kv = 0;
    for (int i0 = 0; i0 < T; i0 += TILE) kv += i0 + TILE < T ? i0 + TILE : T;
    return 4.0 * (2.0 * T * d + T + 2.0 * KV / H * d * kv);
}

static double bwd_bytes(int T, int d, int H, int KV) {
    double pairs = 0;
    for (int j0 = 0; j0 < T; j0 += TILE)
        for (int i0 = j0; i0 < T; i0 += TILE) pairs += i0 + TILE < T ? TILE : T - i0;
    return 4.0 * (3.0 * T * d + 6.0 * KV / H * T * d + pairs * (4.0 * d + 2));
}

static int dropping(const mdc_dropout *drop) { return drop && drop->p > 0.0f; }

static void attention_gqa_forward_tiled_named(const char *name, mdc_device *dev, float *out, float *lse,
                                              const float *qkv, const mdc_dropout *drop, int B, int T, int H, int KV,
                                              int d) {
    mdc_kernels_init();
    int G = H / KV, Cq = H * d, W = (H + 2 * KV) * d, dr = dropping(drop), hk = mdc_dev_half(dev);
    float scale = 1.0f / sqrtf((float)d);
    double n = (double)B * H;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *S = malloc(sizeof(float) * (TILE * TILE + 2 * TILE));
        float *m = S + TILE * TILE, *l = m + TILE;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * H; bh++) {
            int b = bh / H, h = bh % H, g = h / G;
            const float *row = qkv + (size_t)b * T * W, *q = row + h * d, *k = row + Cq + g * d;
            const float *v = k + KV * d;
            float *o = out + (size_t)b * T * Cq + h * d, *ls = lse + (size_t)bh * T;
            for (int i0 = 0; i0 < T; i0 += TILE) {
                int i1 = i0 + TILE < T ? i0 + TILE : T, rows = i1 - i0;
                for (int r = 0; r < rows; r++) {
                    m[r] = -INFINITY;
                    l[r] = 0;
                    memset(o + (size_t)(i0 + r) * Cq, 0, sizeof(float) * d);
                }
                for (int j0 = 0; j0 < i1; j0 += TILE) {
                    int j1 = j0 + TILE < i1 ? j0 + TILE : i1, cols = j1 - j0;
                    mdc_k_sgemm1(0, 1, rows, cols, d, scale, q + (size_t)i0 * W, W, k + (size_t)j0 * W, W, 0.0f, S,
                                 TILE);
                    for (int r = 0; r < rows; r++) {
                        int t = i0 + r, ns = t - j0 + 1 < cols ? t - j0 + 1 : cols; /* valid keys */
                        float *s = S + r * TILE;
                        float mx = m[r];
                        for (int c = 0; c < ns; c++) mx = s[c] > mx ? s[c] : mx;
                        float corr = mdc_k_exp(m[r] - mx), sum = 0;
#pragma omp simd reduction(+ : sum)
                        for (int c = 0; c < ns; c++) {
                            s[c] = mdc_k_exp(s[c] - mx);
                            sum += s[c];
                        }
                        for (int c = ns; c < cols; c++) s[c] = 0;
                        if (dr)
                            mdc_dropout_attn_apply(drop, s, s, drop->row0 + b, drop->head0 + h, drop->pos0 + t,
                                                   drop->pos0 + j0, ns);
                        mdc_round_half(s, (size_t)ns, hk); /* 16 bits: P as the P V product reads it (l: fp32) */
                        l[r] = l[r] * corr + sum;
                        m[r] = mx;
                        if (corr != 1.0f) {
                            float *orow = o + (size_t)t * Cq;
                            for (int x = 0; x < d; x++) orow[x] *= corr;
                        }
                    }
                    mdc_k_sgemm1(0, 0, rows, d, cols, 1.0f, S, TILE, v + (size_t)j0 * W, W, 1.0f, o + (size_t)i0 * Cq,
                                 Cq);
                }
                for (int r = 0; r < rows; r++) {
                    float inv = 1.0f / l[r], *orow = o + (size_t)(i0 + r) * Cq;
                    for (int x = 0; x < d; x++) orow[x] *= inv;
                    ls[i0 + r] = m[r] + mdc_logf(l[r]);
                }
            }
        }
        free(S);
    }
charge:
    if (dev)
        mdc_dev_kernel_named(dev, name, n * (4.0 * d + 5 + dr) * causal(T), n * fwd_bytes(T, d, H, KV), MDC_PREC_GEMM);
}

void mdc_attention_gqa_forward_tiled(mdc_device *dev, float *out, float *lse, const float *qkv, const mdc_dropout *drop,
                                     int B, int T, int H, int KV, int d) {
    attention_gqa_forward_tiled_named("mdc_attention_gqa_forward_tiled", dev, out, lse, qkv, drop, B, T, H, KV, d);
}

void mdc_attention_forward_tiled_drop(mdc_device *dev, float *out, float *lse, const float *qkv,
                                      const mdc_dropout *drop, int B, int T, int C, int NH) {
    attention_gqa_forward_tiled_named("mdc_attention_forward_tiled_drop", dev, out, lse, qkv, drop, B, T, NH, NH,
                                      C / NH);
}

void mdc_attention_forward_tiled(mdc_device *dev, float *out, float *lse, const float *qkv, int B, int T, int C,
                                 int NH) {
    attention_gqa_forward_tiled_named("mdc_attention_forward_tiled_drop", dev, out, lse, qkv, NULL, B, T, NH, NH,
                                      C / NH);
}

static void attention_gqa_backward_tiled_named(const char *name, mdc_device *dev, float *dqkv, const float *dout,
                                               const float *out, const float *qkv, const float *lse,
                                               const mdc_dropout *drop, int B, int T, int H, int KV, int d) {
    mdc_kernels_init();
    int G = H / KV, Cq = H * d, W = (H + 2 * KV) * d, dr = dropping(drop), hk = mdc_dev_half(dev);
    int sep = dr || hk; /* the P dV reads apart from dS's: dropped, or rounded to 16 bits */
    float scale = 1.0f / sqrtf((float)d);
    double n = (double)B * H, pc = causal(T);
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *P = malloc(sizeof(float) * ((2 + sep) * TILE * TILE + (size_t)T));
        float *dS = P + TILE * TILE, *D = dS + TILE * TILE, *Pd = D + T; /* Pd: the P of dV */
#pragma omp for schedule(dynamic, 1)
        for (int bg = 0; bg < B * KV; bg++) { /* dk, dv of kv head g: this thread's */
            int b = bg / KV, g = bg % KV;
            size_t boff = (size_t)b * T * W;
            const float *k = qkv + boff + Cq + g * d, *v = k + KV * d;
            float *dk = dqkv + boff + Cq + g * d, *dv = dk + KV * d;
            for (int h = g * G; h < (g + 1) * G; h++) { /* the group's query heads, ascending */
                int bh = b * H + h;
                size_t ooff = (size_t)b * T * Cq + h * d;
                const float *q = qkv + boff + h * d;
                float *dq = dqkv + boff + h * d;
                const float *dO = dout + ooff, *O = out + ooff, *ls = lse + (size_t)bh * T;
                int grow = dr ? drop->row0 + b : 0, ghead = dr ? drop->head0 + h : 0, pos0 = dr ? drop->pos0 : 0;
                for (int t = 0; t < T; t++) {
                    const float *a = dO + (size_t)t * Cq, *c = O + (size_t)t * Cq;
                    float dd = 0;
                    for (int x = 0; x < d; x++) dd += a[x] * c[x];
                    D[t] = dd;
                }
                for (int j0 = 0; j0 < T; j0 += TILE) {
                    int j1 = j0 + TILE < T ? j0 + TILE : T, cols = j1 - j0;
                    for (int i0 = j0; i0 < T; i0 += TILE) {
                        int i1 = i0 + TILE < T ? i0 + TILE : T, rows = i1 - i0;
                        mdc_k_sgemm1(0, 1, rows, cols, d, scale, q + (size_t)i0 * W, W, k + (size_t)j0 * W, W, 0.0f, P,
                                     TILE);
                        for (int r = 0; r < rows; r++) {
                            int t = i0 + r, ns = t - j0 + 1 < cols ? t - j0 + 1 : cols;
                            float *p = P + r * TILE, lt = ls[t];
#pragma omp simd
                            for (int c = 0; c < ns; c++) p[c] = mdc_k_exp(p[c] - lt);
                            for (int c = ns; c < cols; c++) p[c] = 0;
                            if (sep) {
                                float *pd = Pd + r * TILE;
                                if (dr) mdc_dropout_attn_apply(drop, pd, p, grow, ghead, pos0 + t, pos0 + j0, ns);
                                else memcpy(pd, p, sizeof(float) * (size_t)ns);
                                mdc_round_half(pd, (size_t)ns, hk);
                                for (int c = ns; c < cols; c++) pd[c] = 0;
                            }
                        }
                        mdc_k_sgemm1(1, 0, cols, d, rows, 1.0f, sep ? Pd : P, TILE, dO + (size_t)i0 * Cq, Cq, 1.0f,
                                     dv + (size_t)j0 * W, W);
                        mdc_k_sgemm1(0, 1, rows, cols, d, 1.0f, dO + (size_t)i0 * Cq, Cq, v + (size_t)j0 * W, W, 0.0f,
                                     dS, TILE);
                        for (int r = 0; r < rows; r++) {
                            float *p = P + r * TILE, *ds = dS + r * TILE, Dt = D[i0 + r];
                            if (dr) {
                                int t = i0 + r, ns = t - j0 + 1 < cols ? t - j0 + 1 : cols;
                                mdc_dropout_attn_apply(drop, ds, ds, grow, ghead, pos0 + t, pos0 + j0, ns);
                            }
                            for (int c = 0; c < cols; c++) ds[c] = p[c] * (ds[c] - Dt);
                        }
                        mdc_k_sgemm1(1, 0, cols, d, rows, scale, dS, TILE, q + (size_t)i0 * W, W, 1.0f,
                                     dk + (size_t)j0 * W, W);
                        mdc_k_sgemm1(0, 0, rows, d, cols, scale, dS, TILE, k + (size_t)j0 * W, W, 1.0f,
                                     dq + (size_t)i0 * W, W);
                    }
                }
            }
        }
        free(P);
    }
charge:
    if (dev)
        mdc_dev_kernel_named(dev, name, n * ((10.0 * d + 4 + 2 * dr) * pc + 2.0 * T * d), n * bwd_bytes(T, d, H, KV),
                             MDC_PREC_GEMM);
}

void mdc_attention_gqa_backward_tiled(mdc_device *dev, float *dqkv, const float *dout, const float *out,
                                      const float *qkv, const float *lse, const mdc_dropout *drop, int B, int T, int H,
                                      int KV, int d) {
    attention_gqa_backward_tiled_named("mdc_attention_gqa_backward_tiled", dev, dqkv, dout, out, qkv, lse, drop, B, T,
                                       H, KV, d);
}

void mdc_attention_backward_tiled_drop(mdc_device *dev, float *dqkv, const float *dout, const float *out,
                                       const float *qkv, const float *lse, const mdc_dropout *drop, int B, int T, int C,
                                       int NH) {
    attention_gqa_backward_tiled_named("mdc_attention_backward_tiled_drop", dev, dqkv, dout, out, qkv, lse, drop, B, T,
                                       NH, NH, C / NH);
}

void mdc_attention_backward_tiled(mdc_device *dev, float *dqkv, const float *dout, const float *out, const float *qkv,
                                  const float *lse, int B, int T, int C, int NH) {
    attention_gqa_backward_tiled_named("mdc_attention_backward_tiled_drop", dev, dqkv, dout, out, qkv, lse, NULL, B, T,
                                       NH, NH, C / NH);
}
