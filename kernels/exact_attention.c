/* Exact mode's attention (include/minidc/kernels.h, "exact"): the same bits whatever splits the
 * sequence (context parallelism) or the heads (tensor parallelism), and in whatever order the
 * key blocks arrive. Positions fall in canonical blocks of blk (global position / blk); every
 * dot product runs in channel order; a row's maximum is taken over every key first (a max does
 * not depend on the order); then per key block the float sums in position order
 *   l_kb = sum_j exp(s_ij - m_i),   o_kb = sum_j p_ij v_j   (p dropped out for o, as forward)
 * and the blocks' sums are added exactly (mdc_exact), rounded once: o = o / l, lse = m + log l.
 * Backward with P = exp(S - lse) and D = rowsum(dO * O) in channel order:
 *   dQ_i = exact sum over key blocks of (scale * sum_j dS_ij k_j)
 *   dK_j = exact sum over query blocks of (scale * sum_i dS_ij q_i), dV_j likewise of P_ij dO_i
 * Scalar loops: exact mode is the oracle, not the fast path. */
#include <omp.h>
#include <stdlib.h>

#include "internal.h"

static float dot(const float *a, const float *b, int n) {
    float s = 0;
    for (int x = 0; x < n; x++) s = s + a[x] * b[x];
    return s;
}

static int visible(const mdc_attn_pair *p, int qpos) {
    int n = qpos - p->kpos0 + 1;
    return n < 0 ? 0 : n > p->nk ? p->nk : n;
}

static int dropping(const mdc_dropout *d) { return d && d->p > 0.0f; }

static void charge(mdc_device *dev, const mdc_attn_pair *p, double per_pair) {
    mdc_dev_kernel(dev, per_pair * mdc_attn_pair_visible(p), 8.0 * per_pair * mdc_attn_pair_visible(p), MDC_PREC_FP32);
}

void mdc_x_attn_max(mdc_device *dev, const mdc_attn_pair *p) {
    int hs = p->hs;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < p->B * p->NH; bh++) {
        int b = bh / p->NH, h = bh % p->NH;
        for (int i = 0; i < p->nq; i++) {
            const float *q = p->q + b * p->q_bs + (size_t)i * p->q_ld + h * hs;
            float *m = p->m + b * p->s_bs + h * p->s_hs + i;
            for (int j = 0, n = visible(p, p->qpos0 + i); j < n; j++) {
                float s = dot(q, p->k + b * p->kv_bs + (size_t)j * p->kv_ld + h * hs, hs) * scale;
                *m = s > *m ? s : *m;
            }
        }
    }
    charge(dev, p, 2.0 * hs);
}

void mdc_x_attn_sum(mdc_device *dev, const mdc_attn_pair *p, mdc_exact *xl, mdc_exact *xo, int blk) {
    int hs = p->hs, dr = dropping(p->drop);
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float *e = malloc(sizeof(float) * (size_t)(blk + hs)), *acc = e + blk;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < p->B * p->NH; bh++) {
            int b = bh / p->NH, h = bh % p->NH;
            for (int i = 0; i < p->nq; i++) {
                int t = p->qpos0 + i, n = visible(p, t);
                const float *q = p->q + b * p->q_bs + (size_t)i * p->q_ld + h * hs;
                size_t si = b * p->s_bs + h * p->s_hs + i, oi = b * p->o_bs + (size_t)i * p->o_ld + h * hs;
                float m = p->m[si];
                for (int j0 = 0; j0 < n;) { /* the canonical block of key position kpos0 + j0 */
                    int kb = (p->kpos0 + j0) / blk, j1 = (kb + 1) * blk - p->kpos0;
                    j1 = j1 < n ? j1 : n;
                    float l = 0;
                    for (int j = j0; j < j1; j++) {
                        e[j - j0] = mdc_k_exp(dot(q, p->k + b * p->kv_bs + (size_t)j * p->kv_ld + h * hs, hs) * scale - m);
                        l = l + e[j - j0];
                    }
                    if (dr)
                        mdc_dropout_attn_apply(p->drop, e, e, p->drop->row0 + b, p->drop->head0 + h, t, p->kpos0 + j0,
                                               j1 - j0);
                    memset(acc, 0, sizeof(float) * hs);
                    for (int j = j0; j < j1; j++) {
                        const float *v = p->v + b * p->kv_bs + (size_t)j * p->kv_ld + h * hs;
                        for (int x = 0; x < hs; x++) acc[x] = acc[x] + e[j - j0] * v[x];
                    }
                    mdc_exact_add_f32(&xl[si], l);
                    for (int x = 0; x < hs; x++) mdc_exact_add_f32(&xo[oi + x], acc[x]);
                    j0 = j1;
                }
            }
        }
        free(e);
    }
    charge(dev, p, 4.0 * hs + 5);
}

void mdc_x_attn_finish(mdc_device *dev, const mdc_attn_pair *p, const mdc_exact *xl, const mdc_exact *xo, float *lse) {
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->NH; h++)
            for (int i = 0; i < p->nq; i++) {
                size_t si = b * p->s_bs + h * p->s_hs + i, oi = b * p->o_bs + (size_t)i * p->o_ld + h * p->hs;
                float l = mdc_exact_to_f32(&xl[si]);
                for (int x = 0; x < p->hs; x++) p->o[oi + x] = mdc_exact_to_f32(&xo[oi + x]) / l;
                lse[si] = p->m[si] + logf(l);
            }
    double n = (double)p->B * p->NH * p->nq;
    mdc_dev_kernel(dev, n * (p->hs + 2), 4.0 * n * (2.0 * p->hs + 3), MDC_PREC_FP32);
}

void mdc_x_attn_rowdot(mdc_device *dev, const mdc_attn_pair *p, float *D) {
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->NH; h++)
            for (int i = 0; i < p->nq; i++) {
                size_t off = b * p->o_bs + (size_t)i * p->o_ld + h * p->hs;
                D[b * p->s_bs + h * p->s_hs + i] = dot(p->dout + off, p->o + off, p->hs);
            }
    double n = (double)p->B * p->NH * p->nq;
    mdc_dev_kernel(dev, 2.0 * n * p->hs, 4.0 * n * (2.0 * p->hs + 1), MDC_PREC_FP32);
}

/* One (query block, key block) tile's scores and its dS, P (and the dropped P) for the backward. */
static void tile_grads(const mdc_attn_pair *p, int b, int h, int i0, int i1, int j0, int j1, float scale, float *P,
                       float *Pd, float *dS) {
    int hs = p->hs, w = j1 - j0;
    for (int i = i0; i < i1; i++) {
        int t = p->qpos0 + i, n = visible(p, t);
        const float *q = p->q + b * p->q_bs + (size_t)i * p->q_ld + h * hs;
        const float *dO = p->dout + b * p->o_bs + (size_t)i * p->o_ld + h * hs;
        size_t si = b * p->s_bs + h * p->s_hs + i;
        float *pr = P + (size_t)(i - i0) * w, *pd = Pd + (size_t)(i - i0) * w, *ds = dS + (size_t)(i - i0) * w;
        for (int j = j0; j < j1; j++) {
            int c = j - j0;
            if (j >= n) {
                pr[c] = pd[c] = ds[c] = 0;
                continue;
            }
            const float *k = p->k + b * p->kv_bs + (size_t)j * p->kv_ld + h * hs;
            const float *v = p->v + b * p->kv_bs + (size_t)j * p->kv_ld + h * hs;
            pr[c] = mdc_k_exp(dot(q, k, hs) * scale - p->lse[si]);
            ds[c] = dot(dO, v, hs);
        }
        int nv = n - j0 < w ? (n - j0 > 0 ? n - j0 : 0) : w;
        memcpy(pd, pr, sizeof(float) * (size_t)w);
        if (dropping(p->drop) && nv > 0) {
            mdc_dropout_attn_apply(p->drop, pd, pr, p->drop->row0 + b, p->drop->head0 + h, t, p->kpos0 + j0, nv);
            mdc_dropout_attn_apply(p->drop, ds, ds, p->drop->row0 + b, p->drop->head0 + h, t, p->kpos0 + j0, nv);
        }
        for (int c = 0; c < w; c++) ds[c] = pr[c] * (ds[c] - p->D[si]);
    }
}

void mdc_x_attn_backward(mdc_device *dev, const mdc_attn_pair *p, mdc_exact *xdq, mdc_exact *xdk, mdc_exact *xdv,
                         int blk) {
    int hs = p->hs;
    float scale = 1.0f / sqrtf((float)hs);
    /* the canonical blocks of the runs: [lo, hi) row and key ranges */
    int qb0 = p->qpos0 / blk, qb1 = (p->qpos0 + p->nq + blk - 1) / blk, kb0 = p->kpos0 / blk;
    int kb1 = (p->kpos0 + p->nk + blk - 1) / blk;
#pragma omp parallel
    {
        float *P = malloc(sizeof(float) * (size_t)(3 * blk * blk + hs)), *Pd = P + blk * blk, *dS = Pd + blk * blk;
        float *acc = dS + blk * blk;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < p->B * p->NH; bh++) { /* dq, dk, dv rows of one (b, h): this thread's */
            int b = bh / p->NH, h = bh % p->NH;
            for (int qb = qb0; qb < qb1; qb++)
                for (int kb = kb0; kb < kb1; kb++) {
                    int i0 = qb * blk - p->qpos0, i1 = i0 + blk, j0 = kb * blk - p->kpos0, j1 = j0 + blk;
                    i0 = i0 < 0 ? 0 : i0, i1 = i1 > p->nq ? p->nq : i1, j0 = j0 < 0 ? 0 : j0, j1 = j1 > p->nk ? p->nk : j1;
                    if (visible(p, p->qpos0 + i1 - 1) <= j0) continue; /* no visible pair in the tile */
                    int w = j1 - j0;
                    tile_grads(p, b, h, i0, i1, j0, j1, scale, P, Pd, dS);
                    for (int i = i0; i < i1; i++) { /* dQ_i's share of this key block */
                        memset(acc, 0, sizeof(float) * hs);
                        for (int j = j0; j < j1; j++) {
                            float d = dS[(size_t)(i - i0) * w + j - j0];
                            const float *k = p->k + b * p->kv_bs + (size_t)j * p->kv_ld + h * hs;
                            for (int x = 0; x < hs; x++) acc[x] = acc[x] + d * k[x];
                        }
                        mdc_exact *dq = xdq + b * p->q_bs + (size_t)i * p->q_ld + h * hs;
                        for (int x = 0; x < hs; x++) mdc_exact_add_f32(&dq[x], acc[x] * scale);
                    }
                    for (int j = j0; j < j1; j++) { /* dK_j's and dV_j's share of this query block */
                        mdc_exact *dk = xdk + b * p->kv_bs + (size_t)j * p->kv_ld + h * hs;
                        mdc_exact *dv = xdv + b * p->kv_bs + (size_t)j * p->kv_ld + h * hs;
                        memset(acc, 0, sizeof(float) * hs);
                        for (int i = i0; i < i1; i++) {
                            float d = dS[(size_t)(i - i0) * w + j - j0];
                            const float *q = p->q + b * p->q_bs + (size_t)i * p->q_ld + h * hs;
                            for (int x = 0; x < hs; x++) acc[x] = acc[x] + d * q[x];
                        }
                        for (int x = 0; x < hs; x++) mdc_exact_add_f32(&dk[x], acc[x] * scale);
                        memset(acc, 0, sizeof(float) * hs);
                        for (int i = i0; i < i1; i++) {
                            float pd = Pd[(size_t)(i - i0) * w + j - j0];
                            const float *dO = p->dout + b * p->o_bs + (size_t)i * p->o_ld + h * hs;
                            for (int x = 0; x < hs; x++) acc[x] = acc[x] + pd * dO[x];
                        }
                        for (int x = 0; x < hs; x++) mdc_exact_add_f32(&dv[x], acc[x]);
                    }
                }
        }
        free(P);
    }
    charge(dev, p, 10.0 * hs + 4);
}
