/* Exact mode's attention (include/minidc/kernels.h, "exact"): the same bits whatever splits the
 * sequence (context parallelism) or the heads (tensor parallelism), and in whatever order the
 * key blocks arrive. Positions fall in canonical blocks of blk (global position / blk); every
 * dot product runs in channel order; a row's maximum is taken over every key first (a max does
 * not depend on the order); then per key block the float sums in position order
 *   l_kb = sum_j exp(s_ij - m_i),   o_kb = sum_j p_ij v_j   (p dropped out for o, as forward)
 * and the blocks' sums are added exactly (mdc_xsum), rounded once: o = o / l, lse = m + log l.
 * Backward with P = exp(S - lse) and D = rowsum(dO * O) in channel order:
 *   dQ_i = exact sum over key blocks of (scale * sum_j dS_ij k_j)
 *   dK_j = exact sum over query blocks of (scale * sum_i dS_ij q_i), dV_j likewise of P_ij dO_i
 * The scores of a row against a key block are computed for every key at once from the block
 * transposed (each key's dot product still adds the channels in order, so the loop vectorizes
 * over the keys without changing a rounding); the sums over keys or rows vectorize over the
 * channels.
 * A 16-bit run (mdc_dev_half): the p the o sums read and the P dV's read are rounded to the dtype
 * (l and dS from fp32 p), as the float kernels.
 * Grouped-query heads (p->group > 1): query head h reads kv head h / group; dK and dV of a kv head
 * get the exact sums over every query head of its group. The backward runs OpenMP over (b, kv
 * head), so no two threads add into the same element. */
#include <omp.h>
#include <stdlib.h>

#include "internal.h"
#include "minidc/numerics.h"

static int visible(const mdc_attn_pair *p, int qpos) {
    int n = qpos - p->kpos0 + 1;
    return n < 0 ? 0 : n > p->nk ? p->nk : n;
}

static int dropping(const mdc_dropout *d) { return d && d->p > 0.0f; }

/* query heads per kv head */
static int group_of(const mdc_attn_pair *p) { return p->group > 1 ? p->group : 1; }

static void charge(mdc_device *dev, const mdc_attn_pair *p, double per_pair) {
    double pairs = mdc_attn_pair_visible(p);
    mdc_dev_kernel(dev, per_pair * pairs, 8.0 * per_pair * pairs, MDC_PREC_RUN);
}

/* keys [j0, j1) of the run, transposed: kt[x * w + j - j0] (w = j1 - j0) */
static void transpose(const float *k, size_t ld, int j0, int j1, int hs, float *kt) {
    int w = j1 - j0;
    for (int j = j0; j < j1; j++)
        for (int x = 0; x < hs; x++) kt[(size_t)x * w + j - j0] = k[(size_t)j * ld + x];
}

/* s[c] = q . k_(j0 + c) in channel order, times scale, for the w keys of kt */
static void scores(const float *q, const float *kt, int w, int hs, float scale, float *s) {
    for (int c = 0; c < w; c++) s[c] = 0;
    for (int x = 0; x < hs; x++) {
        const float *row = kt + (size_t)x * w;
        float qx = q[x];
        for (int c = 0; c < w; c++) s[c] = s[c] + qx * row[c];
    }
    for (int c = 0; c < w; c++) s[c] = s[c] * scale;
}

/* the canonical key block of key j0 of the run: its end within the run, capped at n */
static int block_end(const mdc_attn_pair *p, int j0, int n, int blk) {
    int j1 = ((p->kpos0 + j0) / blk + 1) * blk - p->kpos0;
    return j1 < n ? j1 : n;
}

void mdc_x_attn_max(mdc_device *dev, const mdc_attn_pair *p, int blk) {
    int hs = p->hs;
    float scale = 1.0f / sqrtf((float)hs);
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *kt = malloc(sizeof(float) * (size_t)blk * (hs + 1)), *s = kt + (size_t)blk * hs;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < p->B * p->NH; bh++) {
            int b = bh / p->NH, h = bh % p->NH, last = visible(p, p->qpos0 + p->nq - 1);
            const float *k = p->k + b * p->kv_bs + h / group_of(p) * hs;
            for (int j0 = 0; j0 < last;) {
                int j1 = block_end(p, j0, last, blk), w = j1 - j0;
                transpose(k, (size_t)p->kv_ld, j0, j1, hs, kt);
                for (int i = 0; i < p->nq; i++) {
                    int n = visible(p, p->qpos0 + i) - j0;
                    if (n <= 0) continue;
                    n = n < w ? n : w;
                    scores(p->q + b * p->q_bs + (size_t)i * p->q_ld + h * hs, kt, w, hs, scale, s);
                    float *m = p->m + b * p->s_bs + h * p->s_hs + i;
                    for (int c = 0; c < n; c++) *m = s[c] > *m ? s[c] : *m;
                }
                j0 = j1;
            }
        }
        free(kt);
    }
charge:
    charge(dev, p, 2.0 * hs);
}

void mdc_x_attn_sum(mdc_device *dev, const mdc_attn_pair *p, mdc_xsum *x, size_t xl, size_t xo, int blk) {
    int hs = p->hs, dr = dropping(p->drop), hk = mdc_dev_half(dev);
    float scale = 1.0f / sqrtf((float)hs);
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *kt = malloc(sizeof(float) * ((size_t)blk * (hs + 1) + hs)), *e = kt + (size_t)blk * hs, *acc = e + blk;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < p->B * p->NH; bh++) {
            int b = bh / p->NH, h = bh % p->NH, last = visible(p, p->qpos0 + p->nq - 1);
            size_t ko = b * p->kv_bs + h / group_of(p) * hs;
            const float *k = p->k + ko, *v = p->v + ko;
            for (int j0 = 0; j0 < last;) {
                int j1 = block_end(p, j0, last, blk), w = j1 - j0;
                transpose(k, (size_t)p->kv_ld, j0, j1, hs, kt);
                for (int i = 0; i < p->nq; i++) {
                    int t = p->qpos0 + i, n = visible(p, t) - j0;
                    if (n <= 0) continue;
                    n = n < w ? n : w;
                    size_t si = b * p->s_bs + h * p->s_hs + i, oi = b * p->o_bs + (size_t)i * p->o_ld + h * hs;
                    scores(p->q + b * p->q_bs + (size_t)i * p->q_ld + h * hs, kt, w, hs, scale, e);
                    float m = p->m[si], l = 0;
                    for (int c = 0; c < n; c++) e[c] = mdc_k_exp(e[c] - m);
                    for (int c = 0; c < n; c++) l = l + e[c];
                    if (dr)
                        mdc_dropout_attn_apply(p->drop, e, e, p->drop->row0 + b, p->drop->head0 + h, t, p->kpos0 + j0,
                                               n);
                    mdc_round_half(e, (size_t)n, hk); /* 16 bits: P as the P V product reads it (l: fp32) */
                    memset(acc, 0, sizeof(float) * hs);
                    for (int c = 0; c < n; c++) {
                        const float *vr = v + (size_t)(j0 + c) * p->kv_ld;
                        for (int y = 0; y < hs; y++) acc[y] = acc[y] + e[c] * vr[y];
                    }
                    mdc_xsum_add(x, xl + si, &l, 1);
                    mdc_xsum_add(x, xo + oi, acc, (size_t)hs);
                }
                j0 = j1;
            }
        }
        free(kt);
    }
charge:
    charge(dev, p, 4.0 * hs + 5);
}

void mdc_x_attn_finish(mdc_device *dev, const mdc_attn_pair *p, const mdc_xsum *x, size_t xl, size_t xo, float *lse) {
    double n = (double)p->B * p->NH * p->nq;
    if (mdc_dev_dry(dev)) goto charge;
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->NH; h++)
            for (int i = 0; i < p->nq; i++) {
                size_t si = b * p->s_bs + h * p->s_hs + i, oi = b * p->o_bs + (size_t)i * p->o_ld + h * p->hs;
                float l;
                mdc_xsum_round(x, xl + si, 1, &l);
                mdc_xsum_round(x, xo + oi, (size_t)p->hs, p->o + oi);
                for (int y = 0; y < p->hs; y++) p->o[oi + y] = p->o[oi + y] / l;
                lse[si] = p->m[si] + mdc_logf(l);
            }
charge:
    mdc_dev_kernel(dev, n * (p->hs + 2), 4.0 * n * (3.0 * p->hs + 3), MDC_PREC_RUN);
}

void mdc_x_attn_rowdot(mdc_device *dev, const mdc_attn_pair *p, float *D) {
    double n = (double)p->B * p->NH * p->nq;
    if (mdc_dev_dry(dev)) goto charge;
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->NH; h++)
            for (int i = 0; i < p->nq; i++) {
                size_t off = b * p->o_bs + (size_t)i * p->o_ld + h * p->hs;
                float s = 0;
                for (int y = 0; y < p->hs; y++) s = s + p->dout[off + y] * p->o[off + y];
                D[b * p->s_bs + h * p->s_hs + i] = s;
            }
charge:
    mdc_dev_kernel(dev, 2.0 * n * p->hs, 4.0 * n * (2.0 * p->hs + 1), MDC_PREC_RUN);
}

/* One (query block, key block) tile: P, the dropped P, dS for rows [i0, i1) and keys [j0, j1) */
static void tile(const mdc_attn_pair *p, int b, int h, int i0, int i1, int j0, int j1, const float *kt, const float *vt,
                 float scale, float *P, float *Pd, float *dS, int hk) {
    int hs = p->hs, w = j1 - j0;
    for (int i = i0; i < i1; i++) {
        int t = p->qpos0 + i, n = visible(p, t) - j0;
        n = n < 0 ? 0 : n > w ? w : n;
        size_t si = b * p->s_bs + h * p->s_hs + i;
        float *pr = P + (size_t)(i - i0) * w, *pd = Pd + (size_t)(i - i0) * w, *ds = dS + (size_t)(i - i0) * w;
        scores(p->q + b * p->q_bs + (size_t)i * p->q_ld + h * hs, kt, w, hs, scale, pr);
        scores(p->dout + b * p->o_bs + (size_t)i * p->o_ld + h * hs, vt, w, hs, 1.0f, ds); /* dP = dO . v */
        for (int c = 0; c < n; c++) pr[c] = mdc_k_exp(pr[c] - p->lse[si]);
        for (int c = n; c < w; c++) pr[c] = ds[c] = 0;
        memcpy(pd, pr, sizeof(float) * (size_t)w);
        if (dropping(p->drop) && n > 0) {
            mdc_dropout_attn_apply(p->drop, pd, pr, p->drop->row0 + b, p->drop->head0 + h, t, p->kpos0 + j0, n);
            mdc_dropout_attn_apply(p->drop, ds, ds, p->drop->row0 + b, p->drop->head0 + h, t, p->kpos0 + j0, n);
        }
        mdc_round_half(pd, (size_t)n, hk); /* 16 bits: the P dV reads, as the forward's product */
        for (int c = 0; c < w; c++) ds[c] = pr[c] * (ds[c] - p->D[si]);
    }
}

void mdc_x_attn_backward(mdc_device *dev, const mdc_attn_pair *p, mdc_xsum *x, size_t xdq, size_t xdk, size_t xdv,
                         int blk) {
    int hs = p->hs, G = group_of(p), KV = p->NH / G, hk = mdc_dev_half(dev);
    float scale = 1.0f / sqrtf((float)hs);
    int qb0 = p->qpos0 / blk, qb1 = (p->qpos0 + p->nq + blk - 1) / blk, kb0 = p->kpos0 / blk;
    int kb1 = (p->kpos0 + p->nk + blk - 1) / blk;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        size_t tb = (size_t)blk * blk, kb = (size_t)blk * hs;
        float *P = malloc(sizeof(float) * (3 * tb + 2 * kb + hs)), *Pd = P + tb, *dS = Pd + tb, *kt = dS + tb;
        float *vt = kt + kb, *acc = vt + kb;
#pragma omp for schedule(dynamic, 1)
        for (int bg = 0; bg < p->B * KV; bg++) { /* dk, dv rows of one (b, kv head), dq of its group: this thread's */
            int b = bg / KV, g = bg % KV;
            const float *k = p->k + b * p->kv_bs + g * hs, *v = p->v + b * p->kv_bs + g * hs;
            for (int kbi = kb0; kbi < kb1; kbi++) {
                int j0 = kbi * blk - p->kpos0, j1 = j0 + blk;
                j0 = j0 < 0 ? 0 : j0, j1 = j1 > p->nk ? p->nk : j1;
                int w = j1 - j0, transposed = 0;
                for (int h = g * G; h < (g + 1) * G; h++) /* the group's query heads share kt, vt */
                    for (int qb = qb0; qb < qb1; qb++) {
                        int i0 = qb * blk - p->qpos0, i1 = i0 + blk;
                        i0 = i0 < 0 ? 0 : i0, i1 = i1 > p->nq ? p->nq : i1;
                        if (visible(p, p->qpos0 + i1 - 1) <= j0) continue; /* no visible pair in the tile */
                        if (!transposed) {
                            transpose(k, (size_t)p->kv_ld, j0, j1, hs, kt);
                            transpose(v, (size_t)p->kv_ld, j0, j1, hs, vt);
                        }
                        transposed = 1;
                        tile(p, b, h, i0, i1, j0, j1, kt, vt, scale, P, Pd, dS, hk);
                        for (int i = i0; i < i1; i++) { /* dQ_i's share of this key block */
                            memset(acc, 0, sizeof(float) * hs);
                            for (int c = 0; c < w; c++) {
                                float d = dS[(size_t)(i - i0) * w + c];
                                const float *kr = k + (size_t)(j0 + c) * p->kv_ld;
                                for (int y = 0; y < hs; y++) acc[y] = acc[y] + d * kr[y];
                            }
                            for (int y = 0; y < hs; y++) acc[y] = acc[y] * scale;
                            mdc_xsum_add(x, xdq + b * p->q_bs + (size_t)i * p->q_ld + h * hs, acc, (size_t)hs);
                        }
                        for (int c = 0; c < w; c++) { /* dK_j's and dV_j's share of this query block */
                            size_t kvo = b * p->kv_bs + (size_t)(j0 + c) * p->kv_ld + g * hs;
                            memset(acc, 0, sizeof(float) * hs);
                            for (int i = i0; i < i1; i++) {
                                float d = dS[(size_t)(i - i0) * w + c];
                                const float *qr = p->q + b * p->q_bs + (size_t)i * p->q_ld + h * hs;
                                for (int y = 0; y < hs; y++) acc[y] = acc[y] + d * qr[y];
                            }
                            for (int y = 0; y < hs; y++) acc[y] = acc[y] * scale;
                            mdc_xsum_add(x, xdk + kvo, acc, (size_t)hs);
                            memset(acc, 0, sizeof(float) * hs);
                            for (int i = i0; i < i1; i++) {
                                float pd = Pd[(size_t)(i - i0) * w + c];
                                const float *dO = p->dout + b * p->o_bs + (size_t)i * p->o_ld + h * hs;
                                for (int y = 0; y < hs; y++) acc[y] = acc[y] + pd * dO[y];
                            }
                            mdc_xsum_add(x, xdv + kvo, acc, (size_t)hs);
                        }
                    }
            }
        }
        free(P);
    }
charge:
    charge(dev, p, 10.0 * hs + 4);
}
