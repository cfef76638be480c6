/* DeepSpeed-Ulysses (include/minidc/cp.h): an all-to-all turns the local (B, T/c, W) qkv (W:
 * Hl q, KVl k and KVl v heads), every local head at this rank's positions, into (B, T, W/c), this
 * rank's Hl/c q and KVl/c kv heads at every position (in global order); attention runs on whole sequences; a second all-to-all
 * brings the output back to the positions. The forward keeps the head-sharded qkv in the qkv
 * slot (the same size) and the lse of the whole rows in the lse slot, which is all the backward
 * needs with D = rowsum(dO * O): computed on the local rows and sent along (Hl T/c floats, not
 * the output). The backward sends dO and D to the head layout, runs attention's backward there
 * and sends dqkv back.
 * buffers: 0, 1 the all-to-all's send and receive (B T/c W); 2 the head-sharded output;
 * 3 its dO; 4 the head-sharded dqkv; 5, 6 the rows' m and l (B Hl T/c); 7 D. The all-to-alls are
 * pairwise (p - 1 direct exchanges, (c-1)/c of the data sent), as NCCL's. */
#include <math.h>

#include "cp_internal.h"
#include "minidc/algorithms.h"

static void ulysses_sizes(const mdc_cp *cp, size_t f[8]) {
    size_t n = (size_t)cp->B * cp->Tc, Cl = mdc_i_cp_qw(cp), W = mdc_i_cp_row(cp), ns = (size_t)cp->B * cp->Hl * cp->Tc;
    size_t v[8] = {n * W, n * W, n * Cl, n * Cl, n * W, ns, ns, 2 * ns};
    memcpy(f, v, sizeof v);
}

/* A row as runs of heads: qkv's Hl q, KVl k and KVl v heads, or the output's Hl; rank j's share
 * of a run is its heads [j h/c, (j+1) h/c). */
typedef struct {
    int n, heads[3];
} row_shape;
static row_shape qkv_shape(const mdc_cp *cp) { return (row_shape){3, {cp->Hl, cp->KVl, cp->KVl}}; }
static row_shape out_shape(const mdc_cp *cp) { return (row_shape){1, {cp->Hl, 0, 0}}; }
static size_t shape_width(const row_shape *s, int hs, int c) { /* floats of a row, or of one rank's share (c) */
    size_t w = 0;
    for (int i = 0; i < s->n; i++) w += (size_t)(s->heads[i] / c) * hs;
    return w;
}

/* Position-sharded rows (B, T/c, W) -> a block per rank j of its heads' runs at this rank's
 * positions (to = 1), or the reverse, adding when acc (to = 0) */
static void by_heads(const mdc_cp *cp, float *blocks, float *x, const row_shape *sh, int to, int acc) {
    int c = cp->c, hs = cp->hs;
    size_t rows = (size_t)cp->B * cp->Tc, W = shape_width(sh, hs, 1), Wu = shape_width(sh, hs, c), blk = rows * Wu;
    for (int j = 0; j < c; j++)
        for (size_t i = 0; i < rows; i++) {
            size_t off = 0, offu = 0;
            for (int q = 0; q < sh->n; q++) {
                size_t run = (size_t)(sh->heads[q] / c) * hs;
                float *b = blocks + j * blk + i * Wu + offu, *r = x + i * W + off + j * run;
                if (to) memcpy(b, r, run * sizeof(float));
                else if (acc)
                    for (size_t e = 0; e < run; e++) r[e] += b[e];
                else memcpy(r, b, run * sizeof(float));
                off += (size_t)sh->heads[q] * hs, offu += run;
            }
        }
}
static void to_heads_pack(const mdc_cp *cp, float *send, const float *x, const row_shape *sh) {
    by_heads(cp, send, (float *)x, sh, 1, 0);
}
static void to_pos_unpack(const mdc_cp *cp, float *x, const float *recv, const row_shape *sh, int acc) {
    by_heads(cp, (float *)recv, x, sh, 0, acc);
}

/* received blocks (from rank s: its positions, my heads) <-> (B, T, Wu) at global positions */
static void by_position(const mdc_cp *cp, float *xh, float *blocks, const row_shape *sh, int to_global) {
    int c = cp->c, Tc = cp->Tc, T = cp->T;
    size_t row = shape_width(sh, cp->hs, c), blk = (size_t)cp->B * Tc * row;
    for (int s = 0; s < c; s++) {
        int ch[2];
        mdc_i_cp_chunks(cp, s, ch);
        for (int b = 0; b < cp->B; b++)
            for (int t = 0; t < Tc; t++) {
                int g = ch[t / cp->L] * cp->L + t % cp->L;
                float *h = xh + ((size_t)b * T + g) * row, *k = blocks + s * blk + ((size_t)b * Tc + t) * row;
                if (to_global) memcpy(h, k, row * sizeof(float));
                else memcpy(k, h, row * sizeof(float));
            }
    }
}
static void to_heads_unpack(const mdc_cp *cp, float *xh, const float *recv, const row_shape *sh) {
    by_position(cp, xh, (float *)recv, sh, 1);
}
static void to_pos_pack(const mdc_cp *cp, float *send, const float *xh, const row_shape *sh) {
    by_position(cp, (float *)xh, send, sh, 0);
}

static void charge_copy(mdc_cp *cp, size_t floats) { mdc_dev_kernel(cp->dev, 0, 8.0 * (double)floats, MDC_PREC_FP32); }

/* The whole-sequence pair of the head-sharded tensors. */
static mdc_attn_pair whole(const mdc_cp *cp, const float *qkvh, float *o, float *m, float *l, const mdc_dropout *drop) {
    int Hu = cp->Hl / cp->c, Cu = Hu * cp->hs, Ku = cp->KVl / cp->c * cp->hs, Wu = Cu + 2 * Ku, T = cp->T;
    mdc_attn_pair p;
    memset(&p, 0, sizeof p);
    p.B = cp->B, p.NH = Hu, p.hs = cp->hs, p.nq = p.nk = T, p.group = cp->Hl / cp->KVl;
    p.q = qkvh, p.k = qkvh + Cu, p.v = qkvh + Cu + Ku, p.q_bs = p.kv_bs = (size_t)T * Wu, p.q_ld = p.kv_ld = Wu;
    p.o = o, p.o_bs = (size_t)T * Cu, p.o_ld = Cu;
    p.m = m, p.l = l, p.s_bs = (size_t)Hu * T, p.s_hs = (size_t)T;
    p.drop = drop;
    return p;
}

/* a dropout descriptor for the head-sharded layout: this rank's first head */
static const mdc_dropout *heads_drop(const mdc_cp *cp, const mdc_dropout *drop, mdc_dropout *d) {
    if (!drop) return NULL;
    *d = *drop;
    d->head0 = drop->head0 + cp->r * (cp->Hl / cp->c);
    return d;
}

/* Attention over whole sequences of this rank's heads: the float kernel or exact mode's
 * canonical blocks (kernels/exact_attention.c; every position is here). */
static mdc_status heads_forward(mdc_cp *cp, mdc_attn_pair *p, float *lse) {
    mdc_attn_pair_begin(p);
    mdc_attn_pair_forward(cp->dev, p);
    mdc_attn_pair_finish(cp->dev, p, lse);
    return MDC_OK;
}

static mdc_status heads_forward_exact(mdc_cp *cp, mdc_attn_pair *p, float *lse) {
    size_t rows = cp->buf_floats[5];
    mdc_status st = mdc_i_cp_xbuf(cp, rows + cp->buf_floats[2], 0);
    if (st) return st;
    for (size_t i = 0; i < rows; i++) cp->buf[5][i] = -INFINITY;
    mdc_x_attn_max(cp->dev, p, cp->exact);
    mdc_x_attn_sum(cp->dev, p, &cp->xs, 0, rows, cp->exact);
    mdc_x_attn_finish(cp->dev, p, &cp->xs, 0, rows, lse);
    return MDC_OK;
}

static mdc_status heads_backward(mdc_cp *cp, mdc_attn_pair *p) {
    mdc_attn_pair_backward(cp->dev, p);
    return MDC_OK;
}

/* exact sums over the blocks, rounded once */
static mdc_status heads_backward_exact(mdc_cp *cp, mdc_attn_pair *p) {
    size_t n3 = cp->buf_floats[0], Cu = (size_t)(cp->Hl / cp->c) * cp->hs, Ku = (size_t)(cp->KVl / cp->c) * cp->hs;
    mdc_status st = mdc_i_cp_xbuf(cp, n3, 0);
    if (st) return st;
    mdc_x_attn_backward(cp->dev, p, &cp->xs, 0, Cu, Cu + Ku, cp->exact);
    mdc_xsum_round(&cp->xs, 0, n3, cp->buf[4]);
    return MDC_OK;
}

typedef mdc_status (*heads_fwd_fn)(mdc_cp *cp, mdc_attn_pair *p, float *lse);
typedef mdc_status (*heads_bwd_fn)(mdc_cp *cp, mdc_attn_pair *p);

static mdc_status forward_with(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop,
                               heads_fwd_fn attend) {
    double b0 = mdc_dev_bytes_sent(cp->dev);
    size_t n3 = cp->buf_floats[0], n1 = cp->buf_floats[2];
    mdc_dropout dd;
    row_shape q3 = qkv_shape(cp), o1 = out_shape(cp);
    to_heads_pack(cp, cp->buf[0], qkv, &q3);
    mdc_status st = mdc_alltoall_pairwise(cp->buf[0], cp->buf[1], n3 / cp->c, MDC_F32, cp->g);
    if (st) return st;
    to_heads_unpack(cp, qkv, cp->buf[1], &q3); /* the qkv slot now holds the head-sharded qkv */
    charge_copy(cp, 2 * n3);
    mdc_attn_pair p = whole(cp, qkv, cp->buf[2], cp->buf[5], cp->buf[6], heads_drop(cp, drop, &dd));
    cp->pairs += mdc_attn_pair_visible(&p);
    if ((st = attend(cp, &p, lse))) return st;
    to_pos_pack(cp, cp->buf[0], cp->buf[2], &o1);
    st = mdc_alltoall_pairwise(cp->buf[0], cp->buf[1], n1 / cp->c, MDC_F32, cp->g);
    if (!st) to_pos_unpack(cp, out, cp->buf[1], &o1, 0);
    charge_copy(cp, 2 * n1);
    cp->fbytes += mdc_dev_bytes_sent(cp->dev) - b0, cp->calls++;
    return st;
}

static mdc_status backward_with(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                const float *lse, const mdc_dropout *drop, heads_bwd_fn attend_back) {
    double b0 = mdc_dev_bytes_sent(cp->dev);
    int c = cp->c, Hu = cp->Hl / c, Tc = cp->Tc, T = cp->T, hs = cp->hs;
    size_t n3 = cp->buf_floats[0], n1 = cp->buf_floats[2], ns = cp->buf_floats[5];
    size_t Cu = (size_t)Hu * hs, Ku = (size_t)(cp->KVl / c) * hs;
    row_shape q3 = qkv_shape(cp), o1 = out_shape(cp);
    float *D = cp->buf[7], *Dh = D + ns;
    mdc_dropout dd;
    /* D on the local rows, (B, Hl, T/c) -> blocks per destination (its heads) -> (B, Hu, T) */
    for (int b = 0; b < cp->B; b++)
        for (int h = 0; h < cp->Hl; h++)
            for (int t = 0; t < Tc; t++) {
                const float *a = dout + ((size_t)b * Tc + t) * cp->Hl * hs + (size_t)h * hs;
                const float *o = out + ((size_t)b * Tc + t) * cp->Hl * hs + (size_t)h * hs;
                float d = 0;
                for (int x = 0; x < hs; x++) d += a[x] * o[x];
                int j = h / Hu;
                cp->buf[0][(size_t)j * (ns / c) + ((size_t)b * Hu + h % Hu) * Tc + t] = d;
            }
    mdc_dev_kernel(cp->dev, 2.0 * (double)ns * hs, 8.0 * (double)ns * hs, MDC_PREC_FP32);
    mdc_status st = mdc_alltoall_pairwise(cp->buf[0], cp->buf[1], ns / c, MDC_F32, cp->g);
    for (int s = 0; !st && s < c; s++) { /* rank s's positions of my heads, at their global positions */
        int ch[2];
        mdc_i_cp_chunks(cp, s, ch);
        for (int bh = 0; bh < cp->B * Hu; bh++)
            for (int t = 0; t < Tc; t++)
                Dh[(size_t)bh * T + ch[t / cp->L] * cp->L + t % cp->L] =
                    cp->buf[1][(size_t)s * (ns / c) + (size_t)bh * Tc + t];
    }
    if (!st) {
        to_heads_pack(cp, cp->buf[0], dout, &o1);
        st = mdc_alltoall_pairwise(cp->buf[0], cp->buf[1], n1 / c, MDC_F32, cp->g);
    }
    if (st) return st;
    to_heads_unpack(cp, cp->buf[3], cp->buf[1], &o1);
    charge_copy(cp, 2 * n1);
    memset(cp->buf[4], 0, n3 * sizeof(float));
    mdc_attn_pair p = whole(cp, qkv, cp->buf[2], NULL, NULL, heads_drop(cp, drop, &dd));
    p.dq = cp->buf[4], p.dk = cp->buf[4] + Cu, p.dv = cp->buf[4] + Cu + Ku;
    p.dout = cp->buf[3], p.lse = lse, p.D = Dh;
    if ((st = attend_back(cp, &p))) return st;
    to_pos_pack(cp, cp->buf[0], cp->buf[4], &q3);
    st = mdc_alltoall_pairwise(cp->buf[0], cp->buf[1], n3 / c, MDC_F32, cp->g);
    if (!st) to_pos_unpack(cp, dqkv, cp->buf[1], &q3, 1);
    charge_copy(cp, 2 * n3);
    cp->bytes += mdc_dev_bytes_sent(cp->dev) - b0;
    return st;
}

/* every rank gives every cp rank whole heads */
static mdc_status ulysses_check(int c, int T, int Hl, int KVl) {
    (void)T;
    if (Hl % c)
        return mdc_fail(MDC_ERR_INVALID,
                        "--cp-algo ulysses: the %d heads on each tensor-parallel rank are not divisible "
                        "by --cp %d (ulysses gives every cp rank whole heads)",
                        Hl, c);
    if (KVl % c)
        return mdc_fail(MDC_ERR_INVALID,
                        "--cp-algo ulysses: the %d key/value heads on each tensor-parallel rank are not divisible "
                        "by --cp %d (ulysses gives every cp rank whole kv heads; use --cp-algo ring or allgather)",
                        KVl, c);
    return MDC_OK;
}

/* every rank: all positions of Hl / c heads */
static double ulysses_pairs(const mdc_cp *cp, int q) {
    (void)q;
    return (double)cp->B * cp->Hl / cp->c * 0.5 * cp->T * (cp->T + 1.0);
}

/* the all-to-alls: qkv and the output forward, dO with D and dqkv backward, (c-1)/c of each */
static double ulysses_bytes(const mdc_cp *cp) {
    double c = cp->c, n = (double)cp->B * cp->Tc, Cl = (double)mdc_i_cp_qw(cp), W = (double)mdc_i_cp_row(cp);
    return 4.0 * (c - 1) / c * (n * W + n * Cl + n * Cl + n * W + (double)cp->B * cp->Hl * cp->Tc);
}

static mdc_status ulysses_forward(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop) {
    return forward_with(cp, out, lse, qkv, drop, heads_forward);
}
static mdc_status ulysses_exact_forward(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop) {
    return forward_with(cp, out, lse, qkv, drop, heads_forward_exact);
}
static mdc_status ulysses_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                   const float *lse, const mdc_dropout *drop) {
    return backward_with(cp, dqkv, dout, out, qkv, lse, drop, heads_backward);
}
static mdc_status ulysses_exact_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                         const float *lse, const mdc_dropout *drop) {
    return backward_with(cp, dqkv, dout, out, qkv, lse, drop, heads_backward_exact);
}

/* exact mode: the same all-to-alls around exact mode's attention */
const mdc_i_cp_algo mdc_i_cp_ulysses = {"ulysses",
                                        0,
                                        1,
                                        ulysses_check,
                                        ulysses_sizes,
                                        ulysses_forward,
                                        ulysses_backward,
                                        ulysses_exact_forward,
                                        ulysses_exact_backward,
                                        ulysses_pairs,
                                        ulysses_bytes};
