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

mdc_status mdc_i_cp_xbuf(mdc_cp *cp, size_t n) {
    if (n > cp->xbuf_n) {
        mdc_dev_free(cp->dev, cp->xbuf);
        cp->xbuf = NULL, cp->xbuf_n = 0;
        mdc_status st = mdc_dev_alloc(cp->dev, (void **)&cp->xbuf, n * sizeof(mdc_exact), MDC_MEM_ACTS,
                                      "exact context-parallel sums");
        if (st) return st;
        cp->xbuf_n = n;
    }
    for (size_t i = 0; i < n; i++) mdc_exact_clear(&cp->xbuf[i]);
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
    if (cp->algo == CP_ALLGATHER) {
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
    mdc_exact *xl, *xo;
} fwd_ctx;

static void visit_max(mdc_cp *cp, int src, const float *kv, void *vc) {
    fwd_ctx *x = vc;
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    for (int a = 0; a < na; a++)
        for (int b = 0; b < na; b++) {
            mdc_attn_pair p = mdc_i_cp_pair(cp, a, src, b, x->qkv, kv, x->out, cp->buf[5], cp->buf[6], x->drop);
            mdc_x_attn_max(cp->dev, &p);
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
            mdc_x_attn_sum(cp->dev, &p, x->xl + a * L, x->xo + a * L * Cl, cp->exact);
        }
}

mdc_status mdc_i_cp_exact_forward(mdc_cp *cp, float *out, float *lse, const float *qkv, const mdc_dropout *drop) {
    double b0 = mdc_i_cp_sent(cp);
    size_t rows = (size_t)cp->B * cp->Hl * cp->Tc, no = (size_t)cp->B * cp->Tc * cp->Hl * cp->hs;
    mdc_status st = mdc_i_cp_xbuf(cp, rows + no);
    if (st) return st;
    fwd_ctx x = {qkv, out, drop, cp->xbuf, cp->xbuf + rows};
    for (size_t i = 0; i < rows; i++) cp->buf[5][i] = -INFINITY;
    st = each_block(cp, qkv, CP_TAG_KV, visit_max, &x);
    if (!st && cp->algo == CP_ALLGATHER) { /* the gathered blocks are still there */
        for (int s = 0; s < cp->c; s++) visit_sum(cp, s, cp->buf[4] + (size_t)s * cp->buf_floats[0], &x);
    } else if (!st) {
        st = each_block(cp, qkv, CP_TAG_KV2, visit_sum, &x);
    }
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    size_t L = (size_t)cp->L, Cl = (size_t)cp->Hl * cp->hs;
    for (int a = 0; !st && a < na; a++) {
        mdc_attn_pair p = mdc_i_cp_pair(cp, a, cp->r, 0, qkv, NULL, out, cp->buf[5], cp->buf[6], NULL);
        mdc_x_attn_finish(cp->dev, &p, x.xl + a * L, x.xo + a * L * Cl, lse + a * L);
    }
    cp->bytes += mdc_i_cp_sent(cp) - b0, cp->calls++;
    return st;
}

typedef struct {
    const float *qkv, *out, *dout, *lse;
    const mdc_dropout *drop;
    mdc_exact *xdq, *xdkv; /* xdkv: the visiting block's (ring) or every block's, c of them (all-gather) */
} bwd_ctx;

static void visit_back(mdc_cp *cp, int src, const float *kv, void *vc) {
    bwd_ctx *x = vc;
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    size_t L = (size_t)cp->L, Cl = (size_t)cp->Hl * cp->hs;
    mdc_exact *xd = x->xdkv + (cp->algo == CP_ALLGATHER ? (size_t)src * cp->buf_floats[0] : 0);
    for (int a = 0; a < na; a++)
        for (int b = 0; b < na; b++) {
            mdc_attn_pair p = mdc_i_cp_pair(cp, a, src, b, x->qkv, kv, (float *)x->out, NULL, NULL, x->drop);
            p.dout = x->dout + a * L * Cl, p.lse = x->lse + a * L, p.D = cp->buf[7] + a * L;
            mdc_x_attn_backward(cp->dev, &p, x->xdq + a * L * 3 * Cl, xd + b * L * 2 * Cl, xd + b * L * 2 * Cl + Cl,
                                cp->exact);
        }
}

static void round_into(mdc_cp *cp, float *dst, const mdc_exact *x, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = mdc_exact_to_f32(&x[i]);
    mdc_dev_kernel(cp->dev, (double)n, 84.0 * (double)n, MDC_PREC_FP32);
}

mdc_status mdc_i_cp_exact_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                   const float *lse, const mdc_dropout *drop) {
    double b0 = mdc_i_cp_sent(cp);
    size_t n2 = cp->buf_floats[0], n3 = n2 / 2 * 3, nb = cp->algo == CP_ALLGATHER ? (size_t)cp->c : 2;
    int c = cp->c, r = cp->r, next = (r + 1) % c, prev = (r + c - 1) % c, na = mdc_i_cp_chunks(cp, r, (int[2]){0});
    mdc_status st = mdc_i_cp_xbuf(cp, n3 + nb * n2 + n2);
    if (st) return st;
    bwd_ctx x = {qkv, out, dout, lse, drop, cp->xbuf, cp->xbuf + n3};
    mdc_exact *own = cp->xbuf + n3 + nb * n2;
    for (int a = 0; a < na; a++) {
        mdc_attn_pair p = mdc_i_cp_pair(cp, a, r, 0, qkv, NULL, (float *)out, NULL, NULL, NULL);
        p.dout = dout + (size_t)a * cp->L * cp->Hl * cp->hs;
        mdc_x_attn_rowdot(cp->dev, &p, cp->buf[7] + a * cp->L);
    }
    if (cp->algo == CP_ALLGATHER) {
        st = each_block(cp, qkv, CP_TAG_KVB, visit_back, &x);
        if (!st) st = mdc_reduce_scatter(x.xdkv, own, n2, MDC_EXACT, MDC_SUM, cp->g);
    } else { /* the ring: each key block with its exact dK, dV, arriving at the owner after c transfers */
        mdc_i_cp_pack_kv(cp, cp->buf[0], qkv);
        mdc_request *xs[2] = {NULL, NULL};
        for (int i = 0; !st && i < c; i++) {
            mdc_request *rq[3] = {NULL, NULL, NULL};
            float *cur = cp->buf[i % 2], *nxt = cp->buf[(i + 1) % 2];
            x.xdkv = cp->xbuf + n3 + (size_t)(i % 2) * n2;
            if (i < c - 1) {
                st = mdc_irecv(nxt, n2 * sizeof(float), prev, CP_TAG_KVB + i, cp->g, &rq[0]);
                if (!st) st = mdc_isend(cur, n2 * sizeof(float), next, CP_TAG_KVB + i, cp->g, &rq[1]);
            }
            if (!st) st = mdc_waitall(&xs[i % 2], 1); /* this buffer's send of two steps ago */
            if (!st && i > 0) /* the ranks before have added their shares */
                st = mdc_recv(x.xdkv, n2 * sizeof(mdc_exact), prev, CP_TAG_DKV + i - 1, cp->g);
            if (!st) visit_back(cp, (r - i + c) % c, cur, &x);
            if (!st) st = mdc_isend(x.xdkv, n2 * sizeof(mdc_exact), next, CP_TAG_DKV + i, cp->g, &xs[i % 2]);
            mdc_status w = mdc_waitall(rq, 2);
            st = st ? st : w;
        }
        if (!st) st = mdc_recv(own, n2 * sizeof(mdc_exact), prev, CP_TAG_DKV + c - 1, cp->g);
        mdc_status w = mdc_waitall(xs, 2);
        st = st ? st : w;
    }
    if (st) return st;
    /* rounded once: the own block's dK, dV and the rows' dQ, into dqkv (zero before) */
    float *f = cp->buf[2];
    round_into(cp, f, own, n2);
    mdc_i_cp_add_dkv(cp, dqkv, f);
    size_t Cl = (size_t)cp->Hl * cp->hs, n = (size_t)cp->B * cp->Tc;
    for (size_t i = 0; i < n; i++)
        for (size_t q = 0; q < Cl; q++) dqkv[i * 3 * Cl + q] += mdc_exact_to_f32(&x.xdq[i * 3 * Cl + q]);
    cp->bytes += mdc_i_cp_sent(cp) - b0;
    return st;
}
