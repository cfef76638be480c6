/* Causal attention between a run of queries and a run of keys at global positions (context
 * parallelism, ref/parallel/cp/cp.c): the pieces the ring, all-gather and exact schedules are made of.
 *
 * Forward: a row keeps the online-softmax state of every key block it has seen, its running max
 * m, sum l and unnormalized output O; a new block j merges in by the log-sum-exp rule
 *   S = Q K_j^T / sqrt(hs) (keys at positions <= the query's);  m' = max(m, rowmax S);
 *   P = exp(S - m');  l = l exp(m - m') + rowsum P;  O = O exp(m - m') + P V_j
 * and finish divides O by l and saves lse = m + log l. Blocks may come in any order; the result
 * is the attention over their union (up to rounding). Backward, given lse and D = rowsum(dO * O)
 * of the whole rows: P = exp(S - lse); dV_j += P^T dO; dS = P (dO V_j^T - D);
 * dK_j += dS^T Q / sqrt(hs); dQ += dS K_j / sqrt(hs).
 * Tiles of MDC_ATTN_TILE rows and keys; a tile no key of which is visible is skipped, so the
 * work is the visible pairs: FLOPs (4 hs + 5) per pair forward, (10 hs + 4) backward (as the
 * tiled kernels, kernels/attention_tiled.c); dropout (global positions) as there.
 * Grouped-query heads: query head h reads kv head h / group (group <= 1: kv head h); the bytes
 * of k, v, dk and dv count the NH / group kv heads. The backward runs OpenMP over (b, kv head),
 * the group's query heads one after another in ascending order, so dk and dv of a kv head are
 * summed in a fixed order by one thread. */
#include <omp.h>
#include <stdlib.h>

#include "internal.h"
#include "minidc/numerics.h"

enum { TILE = MDC_ATTN_TILE };

/* keys of the run visible to the row at global position qpos */
static int visible(const mdc_attn_pair *p, int qpos) {
    int n = qpos - p->kpos0 + 1;
    return n < 0 ? 0 : n > p->nk ? p->nk : n;
}

double mdc_attn_pair_visible(const mdc_attn_pair *p) {
    double n = 0;
    for (int i = 0; i < p->nq; i++) n += visible(p, p->qpos0 + i);
    return n * p->B * p->NH;
}

static int dropping(const mdc_dropout *d) { return d && d->p > 0.0f; }

/* query heads per kv head */
static int group_of(const mdc_attn_pair *p) { return p->group > 1 ? p->group : 1; }

void mdc_attn_pair_begin(const mdc_attn_pair *p) {
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->NH; h++)
            for (int i = 0; i < p->nq; i++) {
                p->m[b * p->s_bs + h * p->s_hs + i] = -INFINITY;
                p->l[b * p->s_bs + h * p->s_hs + i] = 0;
                memset(p->o + b * p->o_bs + (size_t)i * p->o_ld + h * p->hs, 0, sizeof(float) * p->hs);
            }
}

void mdc_attn_pair_forward(mdc_device *dev, const mdc_attn_pair *p) {
    mdc_kernels_init();
    int hs = p->hs, G = group_of(p), dr = dropping(p->drop), hk = mdc_dev_half(dev);
    float scale = 1.0f / sqrtf((float)hs);
    double flops, bytes;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *S = malloc(sizeof(float) * TILE * TILE);
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < p->B * p->NH; bh++) {
            int b = bh / p->NH, h = bh % p->NH, g = h / G;
            const float *q = p->q + b * p->q_bs + h * hs, *k = p->k + b * p->kv_bs + g * hs;
            const float *v = p->v + b * p->kv_bs + g * hs;
            float *o = p->o + b * p->o_bs + h * hs, *m = p->m + b * p->s_bs + h * p->s_hs;
            float *l = p->l + b * p->s_bs + h * p->s_hs;
            for (int i0 = 0; i0 < p->nq; i0 += TILE) {
                int rows = i0 + TILE < p->nq ? TILE : p->nq - i0, last = visible(p, p->qpos0 + i0 + rows - 1);
                for (int j0 = 0; j0 < last; j0 += TILE) {
                    int cols = j0 + TILE < last ? TILE : last - j0;
                    mdc_k_sgemm1(0, 1, rows, cols, hs, scale, q + (size_t)i0 * p->q_ld, p->q_ld,
                                 k + (size_t)j0 * p->kv_ld, p->kv_ld, 0.0f, S, TILE);
                    for (int r = 0; r < rows; r++) {
                        int t = p->qpos0 + i0 + r, ns = visible(p, t) - j0;
                        ns = ns < 0 ? 0 : ns > cols ? cols : ns;
                        float *s = S + r * TILE, mx = m[i0 + r];
                        for (int c = 0; c < ns; c++) mx = s[c] > mx ? s[c] : mx;
                        if (ns == 0) { /* no visible key in this tile: the row is unchanged */
                            for (int c = 0; c < cols; c++) s[c] = 0;
                            continue;
                        }
                        float corr = mdc_k_exp(m[i0 + r] - mx), sum = 0;
#pragma omp simd reduction(+ : sum)
                        for (int c = 0; c < ns; c++) {
                            s[c] = mdc_k_exp(s[c] - mx);
                            sum += s[c];
                        }
                        for (int c = ns; c < cols; c++) s[c] = 0;
                        if (dr)
                            mdc_dropout_attn_apply(p->drop, s, s, p->drop->row0 + b, p->drop->head0 + h, t,
                                                   p->kpos0 + j0, ns);
                        mdc_round_half(s, (size_t)ns, hk); /* 16 bits: P as the P V product reads it (l: fp32) */
                        l[i0 + r] = l[i0 + r] * corr + sum;
                        m[i0 + r] = mx;
                        if (corr != 1.0f) {
                            float *orow = o + (size_t)(i0 + r) * p->o_ld;
                            for (int x = 0; x < hs; x++) orow[x] *= corr;
                        }
                    }
                    mdc_k_sgemm1(0, 0, rows, hs, cols, 1.0f, S, TILE, v + (size_t)j0 * p->kv_ld, p->kv_ld, 1.0f,
                                 o + (size_t)i0 * p->o_ld, p->o_ld);
                }
            }
        }
        free(S);
    }
charge:
    mdc_attn_pair_cost(p, MDC_ATTN_FORWARD, &flops, &bytes);
    if (flops > 0 || bytes > 0) mdc_k_charge(dev, flops, bytes); /* nothing visible: no kernel */
}

void mdc_attn_pair_cost(const mdc_attn_pair *p, int kind, double *flops, double *bytes) {
    double pairs = kind == MDC_ATTN_FORWARD || kind == MDC_ATTN_BACKWARD ? mdc_attn_pair_visible(p) : 0;
    double n = (double)p->B * p->NH, hs = p->hs, dr = dropping(p->drop), rows = n * p->nq, g = group_of(p);
    if ((kind == MDC_ATTN_FORWARD || kind == MDC_ATTN_BACKWARD) && pairs == 0) { /* nothing visible: no work */
        *flops = *bytes = 0;
        return;
    }
    switch (kind) {
    case MDC_ATTN_FORWARD: /* q, o read and written once, k v (of the kv heads) once per query tile */
        *flops = (4 * hs + 5 + dr) * pairs, *bytes = 4.0 * (2.0 * hs * pairs / TILE / g + 3.0 * rows * (hs + 1));
        break;
    case MDC_ATTN_BACKWARD:
        *flops = (10 * hs + 4 + 2 * dr) * pairs;
        *bytes = 4.0 * (6.0 * hs * pairs / TILE / g + rows * (4.0 * hs + 2) + 6.0 * n * p->nk * hs / g);
        break;
    case MDC_ATTN_FINISH: *flops = rows * (hs + 2), *bytes = 4.0 * rows * (2.0 * hs + 3); break;
    default: *flops = 2.0 * rows * hs, *bytes = 4.0 * rows * (2.0 * hs + 1); break; /* rowdot */
    }
}

void mdc_attn_pair_finish(mdc_device *dev, const mdc_attn_pair *p, float *lse) {
    double flops, bytes;
    if (mdc_dev_dry(dev)) goto charge;
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->NH; h++)
            for (int i = 0; i < p->nq; i++) {
                size_t si = b * p->s_bs + h * p->s_hs + i;
                float inv = 1.0f / p->l[si], *orow = p->o + b * p->o_bs + (size_t)i * p->o_ld + h * p->hs;
                for (int x = 0; x < p->hs; x++) orow[x] *= inv;
                lse[si] = p->m[si] + mdc_logf(p->l[si]);
            }
charge:
    mdc_attn_pair_cost(p, MDC_ATTN_FINISH, &flops, &bytes);
    if (flops > 0 || bytes > 0) mdc_k_charge(dev, flops, bytes); /* nothing visible: no kernel */
}

void mdc_attn_rowdot(mdc_device *dev, const mdc_attn_pair *p, float *D) {
    double flops, bytes;
    if (mdc_dev_dry(dev)) goto charge;
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < p->NH; h++)
            for (int i = 0; i < p->nq; i++) {
                size_t off = b * p->o_bs + (size_t)i * p->o_ld + h * p->hs;
                const float *a = p->dout + off, *c = p->o + off;
                float d = 0;
                for (int x = 0; x < p->hs; x++) d += a[x] * c[x];
                D[b * p->s_bs + h * p->s_hs + i] = d;
            }
charge:
    mdc_attn_pair_cost(p, MDC_ATTN_ROWDOT, &flops, &bytes);
    if (flops > 0 || bytes > 0) mdc_k_charge(dev, flops, bytes); /* nothing visible: no kernel */
}

void mdc_attn_pair_backward(mdc_device *dev, const mdc_attn_pair *p) {
    mdc_kernels_init();
    int hs = p->hs, G = group_of(p), KV = p->NH / G, dr = dropping(p->drop), hk = mdc_dev_half(dev);
    int sep = dr || hk; /* the P dV reads apart from dS's: dropped, or rounded to 16 bits */
    float scale = 1.0f / sqrtf((float)hs);
    double flops, bytes;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *P = malloc(sizeof(float) * (3 * TILE * TILE)), *dS = P + TILE * TILE, *Pd = dS + TILE * TILE;
#pragma omp for schedule(dynamic, 1)
        for (int bg = 0; bg < p->B * KV; bg++) { /* one (b, kv head) per thread: dk, dv rows are its own */
            int b = bg / KV, g = bg % KV;
            size_t ko = b * p->kv_bs + g * hs;
            const float *k = p->k + ko, *v = p->v + ko;
            float *dk = p->dk + ko, *dv = p->dv + ko;
            for (int h = g * G; h < (g + 1) * G; h++) { /* the group's query heads, ascending */
                size_t qo = b * p->q_bs + h * hs, oo = b * p->o_bs + h * hs;
                const float *q = p->q + qo, *dO = p->dout + oo;
                float *dq = p->dq + qo;
                const float *ls = p->lse + b * p->s_bs + h * p->s_hs, *D = p->D + b * p->s_bs + h * p->s_hs;
                int grow = dr ? p->drop->row0 + b : 0, ghead = dr ? p->drop->head0 + h : 0;
                for (int i0 = 0; i0 < p->nq; i0 += TILE) {
                    int rows = i0 + TILE < p->nq ? TILE : p->nq - i0, last = visible(p, p->qpos0 + i0 + rows - 1);
                    for (int j0 = 0; j0 < last; j0 += TILE) {
                        int cols = j0 + TILE < last ? TILE : last - j0;
                        mdc_k_sgemm1(0, 1, rows, cols, hs, scale, q + (size_t)i0 * p->q_ld, p->q_ld,
                                     k + (size_t)j0 * p->kv_ld, p->kv_ld, 0.0f, P, TILE);
                        for (int r = 0; r < rows; r++) {
                            int t = p->qpos0 + i0 + r, ns = visible(p, t) - j0;
                            ns = ns < 0 ? 0 : ns > cols ? cols : ns;
                            float *pr = P + r * TILE, lt = ls[i0 + r];
#pragma omp simd
                            for (int c = 0; c < ns; c++) pr[c] = mdc_k_exp(pr[c] - lt);
                            for (int c = ns; c < cols; c++) pr[c] = 0;
                            if (sep) {
                                float *d = Pd + r * TILE;
                                if (dr) mdc_dropout_attn_apply(p->drop, d, pr, grow, ghead, t, p->kpos0 + j0, ns);
                                else memcpy(d, pr, sizeof(float) * (size_t)ns);
                                mdc_round_half(d, (size_t)ns, hk);
                                for (int c = ns; c < cols; c++) d[c] = 0;
                            }
                        }
                        mdc_k_sgemm1(1, 0, cols, hs, rows, 1.0f, sep ? Pd : P, TILE, dO + (size_t)i0 * p->o_ld, p->o_ld,
                                     1.0f, dv + (size_t)j0 * p->kv_ld, p->kv_ld);
                        mdc_k_sgemm1(0, 1, rows, cols, hs, 1.0f, dO + (size_t)i0 * p->o_ld, p->o_ld,
                                     v + (size_t)j0 * p->kv_ld, p->kv_ld, 0.0f, dS, TILE);
                        for (int r = 0; r < rows; r++) {
                            float *pr = P + r * TILE, *d = dS + r * TILE, Dt = D[i0 + r];
                            if (dr) {
                                int t = p->qpos0 + i0 + r, ns = visible(p, t) - j0;
                                ns = ns < 0 ? 0 : ns > cols ? cols : ns;
                                mdc_dropout_attn_apply(p->drop, d, d, grow, ghead, t, p->kpos0 + j0, ns);
                            }
                            for (int c = 0; c < cols; c++) d[c] = pr[c] * (d[c] - Dt);
                        }
                        mdc_k_sgemm1(1, 0, cols, hs, rows, scale, dS, TILE, q + (size_t)i0 * p->q_ld, p->q_ld, 1.0f,
                                     dk + (size_t)j0 * p->kv_ld, p->kv_ld);
                        mdc_k_sgemm1(0, 0, rows, hs, cols, scale, dS, TILE, k + (size_t)j0 * p->kv_ld, p->kv_ld, 1.0f,
                                     dq + (size_t)i0 * p->q_ld, p->q_ld);
                    }
                }
            }
        }
        free(P);
    }
charge:
    mdc_attn_pair_cost(p, MDC_ATTN_BACKWARD, &flops, &bytes);
    if (flops > 0 || bytes > 0) mdc_k_charge(dev, flops, bytes); /* nothing visible: no kernel */
}
