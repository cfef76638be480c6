/* Exact mode's ring and all-gather attention (include/minidc/cp.h): the canonical blocks of
 * kernels/exact_attention.c, so every rank's rows get the bits of the serial run whatever
 * order the key blocks arrive in. The forward needs each row's maximum over every key before
 * it sums: the ring goes round twice (maxima, then the exact sums); the all-gather gathers
 * once and makes both passes. The backward's dK and dV are exact sums over the query blocks of
 * every rank: on the ring they travel as exact accumulators with their key block (c transfers,
 * as the float dK, dV do) and are rounded once at the owner; the all-gather reduce-scatters
 * them as MDC_EXACT. dQ is summed exactly on its rank. */
#include <math.h>

#include "cp_internal.h"

mdc_status mdc_i_cp_xbuf(mdc_cp *cp, size_t n, size_t ne) {
    if (n > cp->xs.n) {
        mdc_xsum_free(&cp->xs);
        if (mdc_xsum_init(&cp->xs, n)) return mdc_fail(MDC_ERR_OOM_HOST, "exact context-parallel sums (%zu)", n);
    }
    mdc_xsum_clear(&cp->xs);
    if (ne > cp->xe_n) {
        mdc_dev_free(cp->dev, cp->xe);
        cp->xe = NULL, cp->xe_n = 0;
        mdc_status st = mdc_dev_alloc(cp->dev, (void **)&cp->xe, ne * sizeof(mdc_exact), MDC_MEM_ACTS,
                                      "exact context-parallel dK, dV");
        if (st) return st;
        cp->xe_n = ne;
    }
    return MDC_OK;
}

typedef void (*visit_fn)(mdc_cp *cp, int src, const float *kv, void *ctx);

/* Every rank's key block once, to fn: around the ring (the next block arriving meanwhile) or
 * all-gathered. */
static mdc_status each_block(mdc_cp *cp, const float *qkv, int tag, visit_fn fn, void *ctx) {
    size_t n2 = cp->buf_floats[0];
    int c = cp->c, r = cp->r, next = (r + 1) % c, prev = (r + c - 1) % c;
    mdc_status st = MDC_OK;
    mdc_i_cp_pack_kv(cp, cp->buf[0], qkv);
    if (cp->algo->gathers) {
        st = mdc_allgather(cp->buf[0], cp->buf[4], n2, MDC_F32, cp->g);
        for (int s = 0; !st && s < c; s++) fn(cp, s, cp->buf[4] + (size_t)s * n2, ctx);
        return st;
    }
    for (int i = 0; !st && i < c; i++) {
        mdc_request *rq[2] = {NULL, NULL};
        float *cur = cp->buf[i % 2], *nxt = cp->buf[(i + 1) % 2];
        if (i < c - 1) {
            st = mdc_irecv(nxt, n2 * sizeof(float), prev, tag + i, cp->g, &rq[0]);
            if (!st) st = mdc_isend(cur, n2 * sizeof(float), next, tag + i, cp->g, &rq[1]);
        }
        if (!st) fn(cp, (r - i + c) % c, cur, ctx);
        mdc_status w = mdc_waitall(rq, 2);
        st = st ? st : w;
    }
    return st;
}

typedef struct {
    const float *qkv;
    float *out;
    const mdc_dropout *drop;
    size_t xl, xo; /* offsets in cp->xs */
} fwd_ctx;

static void visit_max(mdc_cp *cp, int src, const float *kv, void *vc) {
    fwd_ctx *x = vc;
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    for (int a = 0; a < na; a++)
        for (int b = 0; b < na; b++) {
            mdc_attn_pair p = mdc_i_cp_pair(cp, a, src, b, x->qkv, kv, x->out, cp->buf[5], cp->buf[6], x->drop);
            mdc_x_attn_max(cp->dev, &p, cp->exact);
        }
}

static void visit_sum(mdc_cp *cp, int src, const float *kv, void *vc) {
    fwd_ctx *x = vc;
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    size_t L = (size_t)cp->L, Cl = (size_t)cp->Hl * cp->hs;
    for (int a = 0; a < na; a++)
        for (int b = 0; b < na; b++) {
            mdc_attn_pair p = mdc_i_cp_pair(cp, a, src, b, x->qkv, kv, x->out, cp->buf[5], cp->buf[6], x->drop);
            cp->pairs += mdc_attn_pair_visible(&p);
            mdc_x_attn_sum(cp->dev, &p, &cp->xs, x->xl + a * L, x->xo + a * L * Cl, cp->exact);
        }
}

mdc_status mdc_i_cp_exact_forward(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop) {
    double b0 = mdc_dev_bytes_sent(cp->dev);
    size_t rows = (size_t)cp->B * cp->Hl * cp->Tc, no = (size_t)cp->B * cp->Tc * cp->Hl * cp->hs;
    mdc_status st = mdc_i_cp_xbuf(cp, rows + no, 0);
    if (st) return st;
    fwd_ctx x = {qkv, out, drop, 0, rows};
    for (size_t i = 0; i < rows; i++) cp->buf[5][i] = -INFINITY;
    st = each_block(cp, qkv, CP_TAG_KV, visit_max, &x);
    if (!st && cp->algo->gathers) { /* the gathered blocks are still there */
        for (int s = 0; s < cp->c; s++) visit_sum(cp, s, cp->buf[4] + (size_t)s * cp->buf_floats[0], &x);
    } else if (!st) {
        st = each_block(cp, qkv, CP_TAG_KV2, visit_sum, &x);
    }
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    size_t L = (size_t)cp->L, Cl = (size_t)cp->Hl * cp->hs;
    for (int a = 0; !st && a < na; a++) {
        mdc_attn_pair p = mdc_i_cp_pair(cp, a, cp->r, 0, qkv, NULL, out, cp->buf[5], cp->buf[6], NULL);
        mdc_x_attn_finish(cp->dev, &p, &cp->xs, x.xl + a * L, x.xo + a * L * Cl, lse + a * L);
    }
    if (!st && !mdc_xsum_ok(&cp->xs)) st = mdc_fail(MDC_ERR_OOM_HOST, "exact context-parallel sums");
    cp->fbytes += mdc_dev_bytes_sent(cp->dev) - b0, cp->calls++;
    return st;
}

typedef struct {
    const float *qkv, *out, *dout, *lse;
    const mdc_dropout *drop;
    size_t xdkv; /* offset in cp->xs of the visiting block's dK, dV (ring) or every block's (all-gather); dQ at 0 */
} bwd_ctx;

static void visit_back(mdc_cp *cp, int src, const float *kv, void *vc) {
    bwd_ctx *x = vc;
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    size_t L = (size_t)cp->L, Cl = mdc_i_cp_qw(cp), K = mdc_i_cp_kw(cp), W = mdc_i_cp_row(cp);
    size_t xd = x->xdkv + (cp->algo->gathers ? (size_t)src * cp->buf_floats[0] : 0);
    for (int a = 0; a < na; a++)
        for (int b = 0; b < na; b++) {
            mdc_attn_pair p = mdc_i_cp_pair(cp, a, src, b, x->qkv, kv, (float *)x->out, NULL, NULL, x->drop);
            p.dout = x->dout + a * L * Cl, p.lse = x->lse + a * L, p.D = cp->buf[7] + a * L;
            mdc_x_attn_backward(cp->dev, &p, &cp->xs, a * L * W, xd + b * L * 2 * K, xd + b * L * 2 * K + K, cp->exact);
        }
}

static void charge_round(mdc_cp *cp, size_t n) { mdc_dev_kernel(cp->dev, (double)n, 84.0 * (double)n, MDC_PREC_FP32); }

mdc_status mdc_i_cp_exact_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                   const float *lse, const mdc_dropout *drop) {
    double b0 = mdc_dev_bytes_sent(cp->dev);
    size_t n2 = cp->buf_floats[0], n3 = (size_t)cp->B * cp->Tc * mdc_i_cp_row(cp),
           nb = cp->algo->gathers ? (size_t)cp->c : 2;
    int c = cp->c, r = cp->r, next = (r + 1) % c, prev = (r + c - 1) % c, na = mdc_i_cp_chunks(cp, r, (int[2]){0});
    /* xs: dQ (laid out like qkv), then the visiting block's dK, dV (ring) or every block's (all-gather);
     * xe: accumulators, the travelling dK, dV (ring: two, then the own block's) or every block's and the own */
    mdc_status st = mdc_i_cp_xbuf(cp, n3 + (cp->algo->gathers ? (size_t)c : 1) * n2, (nb + 1) * n2);
    if (st) return st;
    bwd_ctx x = {qkv, out, dout, lse, drop, n3};
    mdc_exact *own = cp->xe + nb * n2;
    for (int a = 0; a < na; a++) {
        mdc_attn_pair p = mdc_i_cp_pair(cp, a, r, 0, qkv, NULL, (float *)out, NULL, NULL, NULL);
        p.dout = dout + (size_t)a * cp->L * cp->Hl * cp->hs;
        mdc_x_attn_rowdot(cp->dev, &p, cp->buf[7] + a * cp->L);
    }
    if (cp->algo->gathers) {
        st = each_block(cp, qkv, CP_TAG_KVB, visit_back, &x);
        if (!st) mdc_xsum_get(&cp->xs, n3, (size_t)c * n2, cp->xe);
        if (!st) st = mdc_reduce_scatter(cp->xe, own, n2, MDC_EXACT, MDC_SUM, cp->g);
    } else { /* the ring: each key block with its exact dK, dV, arriving at the owner after c transfers */
        mdc_i_cp_pack_kv(cp, cp->buf[0], qkv);
        mdc_request *xs[2] = {NULL, NULL};
        for (int i = 0; !st && i < c; i++) {
            mdc_request *rq[2] = {NULL, NULL};
            float *cur = cp->buf[i % 2], *nxt = cp->buf[(i + 1) % 2];
            mdc_exact *trav = cp->xe + (size_t)(i % 2) * n2;
            if (i < c - 1) {
                st = mdc_irecv(nxt, n2 * sizeof(float), prev, CP_TAG_KVB + i, cp->g, &rq[0]);
                if (!st) st = mdc_isend(cur, n2 * sizeof(float), next, CP_TAG_KVB + i, cp->g, &rq[1]);
            }
            if (!st) st = mdc_waitall(&xs[i % 2], 1); /* this buffer's send of two steps ago */
            if (!st && i > 0)                         /* the ranks before have added their shares */
                st = mdc_recv(trav, n2 * sizeof(mdc_exact), prev, CP_TAG_DKV + i - 1, cp->g);
            if (!st && i == 0)
                for (size_t e = 0; e < n2; e++) mdc_exact_clear(&trav[e]);
            if (!st) {
                mdc_xsum_zero(&cp->xs, n3, n2);
                visit_back(cp, (r - i + c) % c, cur, &x);
                for (size_t e = 0; e < n2; e++) { /* this rank's share, exactly */
                    mdc_exact mine;
                    mdc_xsum_get(&cp->xs, n3 + e, 1, &mine);
                    mdc_exact_sum(&trav[e], &trav[e], &mine);
                }
                st = mdc_isend(trav, n2 * sizeof(mdc_exact), next, CP_TAG_DKV + i, cp->g, &xs[i % 2]);
            }
            mdc_status w = mdc_waitall(rq, 2);
            st = st ? st : w;
        }
        if (!st) st = mdc_recv(own, n2 * sizeof(mdc_exact), prev, CP_TAG_DKV + c - 1, cp->g);
        mdc_status w = mdc_waitall(xs, 2);
        st = st ? st : w;
    }
    if (!st && !mdc_xsum_ok(&cp->xs)) st = mdc_fail(MDC_ERR_OOM_HOST, "exact context-parallel sums");
    if (!st && cp->kv_sum) st = cp->kv_sum(cp->kv_ctx, own, n2); /* tp > KV: the kv head's other replicas' shares */
    if (st) return st;
    /* rounded once: the own block's dK, dV and the rows' dQ, into dqkv (zero before) */
    float *f = cp->buf[2];
    mdc_exact_round_n(own, n2, f);
    charge_round(cp, n2);
    mdc_i_cp_add_dkv(cp, dqkv, f);
    size_t Cl = mdc_i_cp_qw(cp), W = mdc_i_cp_row(cp), n = (size_t)cp->B * cp->Tc;
    for (size_t i = 0; i < n; i++) { /* dq: the q columns of each row */
        float q[1024];
        for (size_t q0 = 0; q0 < Cl; q0 += 1024) {
            size_t w = Cl - q0 < 1024 ? Cl - q0 : 1024;
            mdc_xsum_round(&cp->xs, i * W + q0, w, q);
            for (size_t y = 0; y < w; y++) dqkv[i * W + q0 + y] += q[y];
        }
    }
    charge_round(cp, n * Cl);
    cp->bytes += mdc_dev_bytes_sent(cp->dev) - b0;
    return st;
}
