/* DeepSpeed-Ulysses (include/minidc/cp.h): an all-to-all turns the local (B, T/c, 3 Cl) qkv,
 * every local head at this rank's positions, into (B, T, 3 Cl/c), this rank's Hl/c heads at
 * every position (in global order); attention runs on whole sequences; a second all-to-all
 * brings the output back to the positions. The forward keeps the head-sharded qkv in the qkv
 * slot (the same size) and the lse of the whole rows in the lse slot, which is all the backward
 * needs with D = rowsum(dO * O): computed on the local rows and sent along (Hl T/c floats, not
 * the output). The backward sends dO and D to the head layout, runs attention's backward there
 * and sends dqkv back.
 * buffers: 0, 1 the all-to-all's send and receive (B T/c 3 Cl); 2 the head-sharded output;
 * 3 its dO; 4 the head-sharded dqkv; 5, 6 the rows' m and l (B Hl T/c); 7 D. The all-to-alls are
 * pairwise (p - 1 direct exchanges, (c-1)/c of the data sent), as NCCL's. */
#include <math.h>

#include "cp_internal.h"
#include "minidc/algorithms.h"

static void ulysses_sizes(const mdc_cp *cp, size_t f[8]) {
    size_t n = (size_t)cp->B * cp->Tc, Cl = (size_t)cp->Hl * cp->hs, ns = (size_t)cp->B * cp->Hl * cp->Tc;
    size_t v[8] = {3 * n * Cl, 3 * n * Cl, n * Cl, n * Cl, 3 * n * Cl, ns, ns, 2 * ns};
    memcpy(f, v, sizeof v);
}

/* Position-sharded (B, T/c, k, Hl, hs) <-> head-sharded (B, T, k, Hl/c, hs): the block for (or
 * from) rank j holds its Hl/c heads at the positions of rank `pos_rank` of the pair. */
static void to_heads_pack(const mdc_cp *cp, float *send, const float *x, int k) {
    int c = cp->c, Hu = cp->Hl / c, hs = cp->hs, Tc = cp->Tc;
    size_t blk = (size_t)cp->B * Tc * k * Hu * hs, run = (size_t)Hu * hs;
    for (int j = 0; j < c; j++)
        for (int b = 0; b < cp->B; b++)
            for (int t = 0; t < Tc; t++)
                for (int q = 0; q < k; q++)
                    memcpy(send + j * blk + (((size_t)b * Tc + t) * k + q) * run,
                           x + (((size_t)b * Tc + t) * k + q) * cp->Hl * hs + (size_t)j * run, run * sizeof(float));
}

/* received blocks (from rank s: its positions, my heads) -> (B, T, k, Hu, hs) at global positions */
static void to_heads_unpack(const mdc_cp *cp, float *xh, const float *recv, int k) {
    int c = cp->c, Hu = cp->Hl / c, hs = cp->hs, Tc = cp->Tc, T = cp->T;
    size_t blk = (size_t)cp->B * Tc * k * Hu * hs, row = (size_t)k * Hu * hs;
    for (int s = 0; s < c; s++) {
        int ch[2];
        mdc_i_cp_chunks(cp, s, ch);
        for (int b = 0; b < cp->B; b++)
            for (int t = 0; t < Tc; t++) {
                int g = ch[t / cp->L] * cp->L + t % cp->L;
                memcpy(xh + ((size_t)b * T + g) * row, recv + s * blk + ((size_t)b * Tc + t) * row,
                       row * sizeof(float));
            }
    }
}

/* (B, T, k, Hu, hs) -> blocks for rank s (its positions, my heads), the reverse of unpack */
static void to_pos_pack(const mdc_cp *cp, float *send, const float *xh, int k) {
    int c = cp->c, Hu = cp->Hl / c, hs = cp->hs, Tc = cp->Tc, T = cp->T;
    size_t blk = (size_t)cp->B * Tc * k * Hu * hs, row = (size_t)k * Hu * hs;
    for (int s = 0; s < c; s++) {
        int ch[2];
        mdc_i_cp_chunks(cp, s, ch);
        for (int b = 0; b < cp->B; b++)
            for (int t = 0; t < Tc; t++) {
                int g = ch[t / cp->L] * cp->L + t % cp->L;
                memcpy(send + s * blk + ((size_t)b * Tc + t) * row, xh + ((size_t)b * T + g) * row,
                       row * sizeof(float));
            }
    }
}

/* blocks from rank j (my positions, its heads) -> (B, T/c, k, Hl, hs), adding when acc */
static void to_pos_unpack(const mdc_cp *cp, float *x, const float *recv, int k, int acc) {
    int c = cp->c, Hu = cp->Hl / c, hs = cp->hs, Tc = cp->Tc;
    size_t blk = (size_t)cp->B * Tc * k * Hu * hs, run = (size_t)Hu * hs;
    for (int j = 0; j < c; j++)
        for (size_t i = 0; i < (size_t)cp->B * Tc * k; i++) {
            float *d = x + i * cp->Hl * hs + (size_t)j * run;
            const float *s = recv + j * blk + i * run;
            if (acc)
                for (size_t x2 = 0; x2 < run; x2++) d[x2] += s[x2];
            else memcpy(d, s, run * sizeof(float));
        }
}

static void charge_copy(mdc_cp *cp, size_t floats) { mdc_dev_kernel(cp->dev, 0, 8.0 * (double)floats, MDC_PREC_FP32); }

/* The whole-sequence pair of the head-sharded tensors. */
static mdc_attn_pair whole(const mdc_cp *cp, const float *qkvh, float *o, float *m, float *l, const mdc_dropout *drop) {
    int Hu = cp->Hl / cp->c, Cu = Hu * cp->hs, T = cp->T;
    mdc_attn_pair p;
    memset(&p, 0, sizeof p);
    p.B = cp->B, p.NH = Hu, p.hs = cp->hs, p.nq = p.nk = T;
    p.q = qkvh, p.k = qkvh + Cu, p.v = qkvh + 2 * Cu, p.q_bs = p.kv_bs = (size_t)T * 3 * Cu, p.q_ld = p.kv_ld = 3 * Cu;
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
    size_t n3 = cp->buf_floats[0], Hu = (size_t)(cp->Hl / cp->c), hs = (size_t)cp->hs;
    mdc_status st = mdc_i_cp_xbuf(cp, n3, 0);
    if (st) return st;
    mdc_x_attn_backward(cp->dev, p, &cp->xs, 0, Hu * hs, 2 * Hu * hs, cp->exact);
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
    to_heads_pack(cp, cp->buf[0], qkv, 3);
    mdc_status st = mdc_alltoall_pairwise(cp->buf[0], cp->buf[1], n3 / cp->c, MDC_F32, cp->g);
    if (st) return st;
    to_heads_unpack(cp, qkv, cp->buf[1], 3); /* the qkv slot now holds the head-sharded qkv */
    charge_copy(cp, 2 * n3);
    mdc_attn_pair p = whole(cp, qkv, cp->buf[2], cp->buf[5], cp->buf[6], heads_drop(cp, drop, &dd));
    cp->pairs += mdc_attn_pair_visible(&p);
    if ((st = attend(cp, &p, lse))) return st;
    to_pos_pack(cp, cp->buf[0], cp->buf[2], 1);
    st = mdc_alltoall_pairwise(cp->buf[0], cp->buf[1], n1 / cp->c, MDC_F32, cp->g);
    if (!st) to_pos_unpack(cp, out, cp->buf[1], 1, 0);
    charge_copy(cp, 2 * n1);
    cp->bytes += mdc_dev_bytes_sent(cp->dev) - b0, cp->calls++;
    return st;
}

static mdc_status backward_with(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                const float *lse, const mdc_dropout *drop, heads_bwd_fn attend_back) {
    double b0 = mdc_dev_bytes_sent(cp->dev);
    int c = cp->c, Hu = cp->Hl / c, Tc = cp->Tc, T = cp->T, hs = cp->hs;
    size_t n3 = cp->buf_floats[0], n1 = cp->buf_floats[2], ns = cp->buf_floats[5];
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
        to_heads_pack(cp, cp->buf[0], dout, 1);
        st = mdc_alltoall_pairwise(cp->buf[0], cp->buf[1], n1 / c, MDC_F32, cp->g);
    }
    if (st) return st;
    to_heads_unpack(cp, cp->buf[3], cp->buf[1], 1);
    charge_copy(cp, 2 * n1);
    memset(cp->buf[4], 0, n3 * sizeof(float));
    mdc_attn_pair p = whole(cp, qkv, cp->buf[2], NULL, NULL, heads_drop(cp, drop, &dd));
    p.dq = cp->buf[4], p.dk = cp->buf[4] + (size_t)Hu * hs, p.dv = cp->buf[4] + 2 * (size_t)Hu * hs;
    p.dout = cp->buf[3], p.lse = lse, p.D = Dh;
    if ((st = attend_back(cp, &p))) return st;
    to_pos_pack(cp, cp->buf[0], cp->buf[4], 3);
    st = mdc_alltoall_pairwise(cp->buf[0], cp->buf[1], n3 / c, MDC_F32, cp->g);
    if (!st) to_pos_unpack(cp, dqkv, cp->buf[1], 3, 1);
    charge_copy(cp, 2 * n3);
    cp->bytes += mdc_dev_bytes_sent(cp->dev) - b0;
    return st;
}

/* every rank gives every cp rank whole heads */
static mdc_status ulysses_check(int c, int T, int Hl) {
    (void)T;
    if (Hl % c)
        return mdc_fail(MDC_ERR_INVALID,
                        "--cp-algo ulysses: the %d heads on each tensor-parallel rank are not divisible "
                        "by --cp %d (ulysses gives every cp rank whole heads)",
                        Hl, c);
    return MDC_OK;
}

/* every rank: all positions of Hl / c heads */
static double ulysses_pairs(const mdc_cp *cp, int q) {
    (void)q;
    return (double)cp->B * cp->Hl / cp->c * 0.5 * cp->T * (cp->T + 1.0);
}

/* the all-to-alls: qkv and the output forward, dO with D and dqkv backward, (c-1)/c of each */
static double ulysses_bytes(const mdc_cp *cp) {
    double c = cp->c, n = (double)cp->B * cp->Tc, Cl = (double)cp->Hl * cp->hs;
    return 4.0 * (c - 1) / c * (n * 3 * Cl + n * Cl + n * Cl + n * 3 * Cl + (double)cp->B * cp->Hl * cp->Tc);
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
