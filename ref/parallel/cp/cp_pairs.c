/* The layouts of context parallelism and the attention pairs its algorithms are built from
 * (ref/parallel/cp/cp_internal.h): kernels/attention_pair.c runs a run of local query rows
 * against a run of keys, at their global positions, merged into the rows' online-softmax state
 * (log-sum-exp rule), so the key blocks may arrive in any order. A key block is (B, T/c, 2 KVl hs):
 * the k and v columns of a rank's local positions, its chunks in order (grouped-query attention:
 * each of the KVl kv heads serves Hl / KVl query heads). Zig-zag: rank r holds
 * chunks r and 2c-1-r of 2c; contiguous: chunk r of c. */
#include "cp_internal.h"

int mdc_i_cp_chunks(const mdc_cp *cp, int q, int out[2]) {
    out[0] = q;
    if (!cp->zigzag) return 1;
    out[1] = 2 * cp->c - 1 - q;
    return 2;
}

/* ---- the key blocks and the pairs ------------------------------------------------------------ */

void mdc_i_cp_pack_kv(mdc_cp *cp, float *kv, const float *qkv) {
    size_t Q = mdc_i_cp_qw(cp), K = mdc_i_cp_kw(cp), W = mdc_i_cp_row(cp), n = (size_t)cp->B * cp->Tc;
    for (size_t i = 0; i < n; i++) memcpy(kv + i * 2 * K, qkv + i * W + Q, 2 * K * sizeof(float));
    mdc_dev_kernel(cp->dev, 0, 16.0 * (double)n * K, MDC_PREC_FP32);
}

void mdc_i_cp_add_dkv(mdc_cp *cp, float *dqkv, const float *dkv) {
    size_t Q = mdc_i_cp_qw(cp), K = mdc_i_cp_kw(cp), W = mdc_i_cp_row(cp), n = (size_t)cp->B * cp->Tc;
    for (size_t i = 0; i < n; i++) {
        float *d = dqkv + i * W + Q;
        const float *s = dkv + i * 2 * K;
        for (size_t x = 0; x < 2 * K; x++) d[x] += s[x];
    }
    mdc_dev_kernel(cp->dev, 2.0 * (double)n * K, 24.0 * (double)n * K, MDC_PREC_FP32);
}

mdc_attn_pair mdc_i_cp_pair(const mdc_cp *cp, int a, int src, int b, const float *qkv, const float *kv, float *out,
                            float *m, float *l, const mdc_dropout *drop) {
    int mine[2], theirs[2];
    mdc_i_cp_chunks(cp, cp->r, mine), mdc_i_cp_chunks(cp, src, theirs);
    size_t Cl = mdc_i_cp_qw(cp), K = mdc_i_cp_kw(cp), W = mdc_i_cp_row(cp), L = (size_t)cp->L;
    mdc_attn_pair p;
    memset(&p, 0, sizeof p);
    p.B = cp->B, p.NH = cp->Hl, p.hs = cp->hs, p.nq = p.nk = cp->L, p.group = cp->Hl / cp->KVl;
    p.qpos0 = mine[a] * cp->L, p.kpos0 = kv ? theirs[b] * cp->L : 0;
    p.q = qkv + a * L * W, p.q_bs = (size_t)cp->Tc * W, p.q_ld = (int)W;
    if (kv) p.k = kv + b * L * 2 * K, p.v = p.k + K;
    p.kv_bs = (size_t)cp->Tc * 2 * K, p.kv_ld = (int)(2 * K);
    p.o = out + a * L * Cl, p.o_bs = (size_t)cp->Tc * Cl, p.o_ld = (int)Cl;
    p.m = m + a * L, p.l = l + a * L, p.s_bs = (size_t)cp->Hl * cp->Tc, p.s_hs = (size_t)cp->Tc;
    p.drop = drop;
    return p;
}

/* One kernel's charge for the pieces a step runs together (as one launch on a GPU). */
static void charge(mdc_cp *cp, const mdc_attn_pair *p, int n, int kind) {
    double flops = 0, bytes = 0, f, b;
    for (int i = 0; i < n; i++) mdc_attn_pair_cost(&p[i], kind, &f, &b), flops += f, bytes += b;
    if (flops > 0 || bytes > 0) mdc_dev_kernel(cp->dev, flops, bytes, MDC_PREC_FP32);
}

/* Every local query chunk against the key block of rank src (forward): one kernel. */
void mdc_i_cp_attend(mdc_cp *cp, int src, const float *qkv, const float *kv, float *out, const mdc_dropout *drop) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0}), n = 0;
    mdc_attn_pair p[4];
    for (int a = 0; a < na; a++)
        for (int b = 0; b < na; b++) {
            p[n] = mdc_i_cp_pair(cp, a, src, b, qkv, kv, out, cp->buf[5], cp->buf[6], drop);
            cp->pairs += mdc_attn_pair_visible(&p[n]);
            mdc_attn_pair_forward(NULL, &p[n++]);
        }
    charge(cp, p, n, MDC_ATTN_FORWARD);
}

/* ... and its backward: dq of the local rows, dk and dv of the block into dkv. */
void mdc_i_cp_attend_back(mdc_cp *cp, int src, const float *qkv, const float *kv, float *dqkv, float *dkv,
                          const float *dout, const float *out, const float *lse, const mdc_dropout *drop) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0}), n = 0;
    size_t Cl = mdc_i_cp_qw(cp), K = mdc_i_cp_kw(cp), L = (size_t)cp->L;
    mdc_attn_pair p[4];
    for (int a = 0; a < na; a++)
        for (int b = 0; b < na; b++, n++) {
            p[n] = mdc_i_cp_pair(cp, a, src, b, qkv, kv, (float *)out, NULL, NULL, drop);
            p[n].dq = dqkv + a * L * mdc_i_cp_row(cp), p[n].dk = dkv + b * L * 2 * K, p[n].dv = p[n].dk + K;
            p[n].dout = dout + a * L * Cl, p[n].lse = lse + a * L, p[n].D = cp->buf[7] + a * L;
            mdc_attn_pair_backward(NULL, &p[n]);
        }
    charge(cp, p, n, MDC_ATTN_BACKWARD);
}

void mdc_i_cp_begin(mdc_cp *cp, const float *qkv, float *out) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    for (int a = 0; a < na; a++) {
        mdc_attn_pair p = mdc_i_cp_pair(cp, a, cp->r, 0, qkv, NULL, out, cp->buf[5], cp->buf[6], NULL);
        mdc_attn_pair_begin(&p);
    }
}

void mdc_i_cp_finish(mdc_cp *cp, const float *qkv, float *out, float *lse) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    mdc_attn_pair p[2];
    for (int a = 0; a < na; a++) {
        p[a] = mdc_i_cp_pair(cp, a, cp->r, 0, qkv, NULL, out, cp->buf[5], cp->buf[6], NULL);
        mdc_attn_pair_finish(NULL, &p[a], lse + a * cp->L);
    }
    charge(cp, p, na, MDC_ATTN_FINISH);
}

void mdc_i_cp_rowdot(mdc_cp *cp, const float *qkv, const float *out, const float *dout) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    mdc_attn_pair p[2];
    for (int a = 0; a < na; a++) {
        p[a] = mdc_i_cp_pair(cp, a, cp->r, 0, qkv, NULL, (float *)out, NULL, NULL, NULL);
        p[a].dout = dout + (size_t)a * cp->L * cp->Hl * cp->hs;
        mdc_attn_rowdot(NULL, &p[a], cp->buf[7] + a * cp->L);
    }
    charge(cp, p, na, MDC_ATTN_ROWDOT);
}

/* Visible (query, key) pairs of rank q's chunks per micro-batch and layer: chunk a of length
 * L sees the a L keys before it whole and its own causal triangle. */
double mdc_i_cp_layout_pairs(const mdc_cp *cp, int q) {
    double L = cp->L, n = 0;
    int ch[2], k = mdc_i_cp_chunks(cp, q, ch);
    for (int a = 0; a < k; a++) n += L * ch[a] * L + 0.5 * L * (L + 1);
    return n * cp->B * cp->Hl;
}
