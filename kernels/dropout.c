/* Inverted dropout whose mask is a pure function of the GLOBAL element index, so a model split
 * over ranks (heads and channels over tp, positions over sp, batch rows over dp) drops exactly
 * the elements the serial model drops, and a backward regenerates the forward's mask instead
 * of storing it.
 *
 * Counter-based generator (no state, no threads: a value depends only on its key):
 *   mix(z)   the splitmix64 finalizer (Steele, Lea, Flood 2014), a bijection of 64-bit words
 *   stream   k = mix(mix(mix(seed + G) ^ step) ^ (layer << 32 | site)),  G = 0x9E3779B97F4A7C15
 *   element  u = mix(k + (idx + 1) G) >> 32  (the splitmix64 output idx of the stream k)
 *   kept     u >= floor(p 2^32): probability 1 - p to within 2^-32
 * idx for a residual site (row, pos, chan): (row T + pos) C + chan;
 * idx for attention (site MDC_DROP_ATTN; row, head, query q, key s): ((row H + head) T + q) T + s;
 * all global (T, C, H the global sizes), so the batch size never enters and dp ranks may hold
 * any rows. A kept element is multiplied by s = 1.0f / (1.0f - p) (float); a dropped one is
 * exactly 0 (a select, not a product, so a dropped inf or NaN does not leak).
 *
 * Residual branch, n = B*Tl*Cl local elements (the integer hashing is not charged: the device
 * model counts FP32 FLOPs):
 *   forward:  out = res + keep*y*s   FLOPs 2*n; bytes 12*n (res, y read; out written)
 *   backward: dy += keep*dout*s      FLOPs 2*n; bytes 12*n (dout read; dy read+written)
 * p <= 0 or a NULL descriptor: forward is mdc_residual_forward (FLOPs n, bytes 12*n), backward
 * dy += dout (FLOPs n, bytes 12*n). */
#include "internal.h"
#include "minidc/splitmix.h"

#define GOLDEN MDC_GOLDEN64

static uint64_t stream(const mdc_dropout *d, int site) {
    uint64_t k = mdc_mix64_finalize(mdc_mix64_finalize(d->seed + GOLDEN) ^ d->step);
    return mdc_mix64_finalize(k ^ ((uint64_t)(uint32_t)d->layer << 32 | (uint32_t)site));
}

/* p in [0, 1): floor(p 2^32) < 2^32 (exact in double) */
static uint64_t threshold(const mdc_dropout *d) { return (uint64_t)((double)d->p * 4294967296.0); }

static inline int kept(uint64_t k, uint64_t thr, uint64_t idx) {
    return (mdc_mix64_finalize(k + (idx + 1) * GOLDEN) >> 32) >= thr;
}

static uint64_t res_index(const mdc_dropout *d, int row, int pos, int chan) {
    return ((uint64_t)row * (uint64_t)d->T + (uint64_t)pos) * (uint64_t)d->C + (uint64_t)chan;
}

static uint64_t attn_index(const mdc_dropout *d, int row, int head, int q, int s) {
    uint64_t T = (uint64_t)d->T;
    return (((uint64_t)row * (uint64_t)d->H + (uint64_t)head) * T + (uint64_t)q) * T + (uint64_t)s;
}

int mdc_dropout_keep(const mdc_dropout *d, int row, int pos, int chan) {
    return kept(stream(d, d->site), threshold(d), res_index(d, row, pos, chan));
}

int mdc_dropout_keep_attn(const mdc_dropout *d, int row, int head, int qpos, int kpos) {
    return kept(stream(d, MDC_DROP_ATTN), threshold(d), attn_index(d, row, head, qpos, kpos));
}

void mdc_dropout_attn_apply(const mdc_dropout *d, float *dst, const float *src, int row, int head, int qpos, int kpos0,
                            int n) {
    uint64_t k = stream(d, MDC_DROP_ATTN), thr = threshold(d), i0 = attn_index(d, row, head, qpos, kpos0);
    float s = 1.0f / (1.0f - d->p);
    for (int c = 0; c < n; c++) dst[c] = kept(k, thr, i0 + (uint64_t)c) ? src[c] * s : 0.0f;
}

void mdc_dropout_residual_forward(mdc_device *dev, float *out, const float *res, const float *y,
                                  const mdc_dropout *drop, int B, int Tl, int Cl) {
    size_t n = (size_t)B * Tl * Cl;
    if (!drop || !(drop->p > 0.0f)) { /* today's path: the plain residual add */
        mdc_residual_forward(dev, out, res, y, n);
        return;
    }
    if (mdc_dev_dry(dev)) goto charge;
    uint64_t k = stream(drop, drop->site), thr = threshold(drop);
    float s = 1.0f / (1.0f - drop->p);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < B * Tl; i++) {
        int b = i / Tl, t = i % Tl;
        uint64_t i0 = res_index(drop, drop->row0 + b, drop->pos ? drop->pos[t] : drop->pos0 + t, drop->chan0);
        float *o = out + (size_t)i * Cl;
        const float *r = res + (size_t)i * Cl, *v = y + (size_t)i * Cl;
        for (int c = 0; c < Cl; c++) o[c] = kept(k, thr, i0 + (uint64_t)c) ? r[c] + v[c] * s : r[c];
    }
charge:
    mdc_k_charge(dev, 2.0 * (double)n, 12.0 * (double)n);
}

void mdc_dropout_residual_backward(mdc_device *dev, float *dy, const float *dout, const mdc_dropout *drop, int B,
                                   int Tl, int Cl) {
    size_t n = (size_t)B * Tl * Cl;
    if (!drop || !(drop->p > 0.0f)) {
        if (!mdc_dev_dry(dev)) {
            long nn = (long)n;
#pragma omp parallel for simd schedule(static)
            for (long i = 0; i < nn; i++) dy[i] += dout[i];
        }
        mdc_k_charge(dev, (double)n, 12.0 * (double)n);
        return;
    }
    if (mdc_dev_dry(dev)) goto charge;
    uint64_t k = stream(drop, drop->site), thr = threshold(drop);
    float s = 1.0f / (1.0f - drop->p);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < B * Tl; i++) {
        int b = i / Tl, t = i % Tl;
        uint64_t i0 = res_index(drop, drop->row0 + b, drop->pos ? drop->pos[t] : drop->pos0 + t, drop->chan0);
        float *g = dy + (size_t)i * Cl;
        const float *d = dout + (size_t)i * Cl;
        for (int c = 0; c < Cl; c++)
            if (kept(k, thr, i0 + (uint64_t)c)) g[c] += d[c] * s;
    }
charge:
    mdc_k_charge(dev, 2.0 * (double)n, 12.0 * (double)n);
}
