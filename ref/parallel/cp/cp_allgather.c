/* All-gather attention (Llama 3's context parallelism; ref/parallel/cp/cp_internal.h): every
 * rank gathers every rank's key block once and attends to them all; the backward gathers them
 * again (nothing kept from the forward) and reduce-scatters dK, dV. Per layer a rank sends
 * 3 (c-1) K (K a key block, B T/c 2 KVl hs floats). Exact mode: cp_exact.c.
 * buffers: 0 the packed own block; 2 its dK, dV; 4 every rank's blocks, then their dK, dV
 * (c blocks each); 5, 6 the rows' m and l; 7 D. */
#include "cp_internal.h"

static void allgather_sizes(const mdc_cp *cp, size_t f[8]) {
    size_t n2 = (size_t)cp->B * cp->Tc * 2 * mdc_i_cp_kw(cp), ns = (size_t)cp->B * cp->Hl * cp->Tc;
    size_t v[8] = {n2, 0, n2, 0, 2 * (size_t)cp->c * n2, ns, ns, ns};
    memcpy(f, v, sizeof v);
}

/* every rank's key block into all (c blocks); in 16 bits gathered packed and widened */
static mdc_status gather_blocks(mdc_cp *cp, float *all) {
    size_t n2 = cp->buf_floats[0], c = (size_t)cp->c;
    if (!mdc_i_cp_half(cp)) return mdc_allgather(cp->buf[0], all, n2, MDC_F32, cp->g);
    uint16_t *h = mdc_i_cp_staging(cp, (c + 1) * n2);
    if (!h) return mdc_fail(MDC_ERR_OOM_HOST, "context parallelism: 16-bit key blocks");
    int bf = cp->act == MDC_BF16;
    mdc_pack_half(h + c * n2, cp->buf[0], n2, bf);
    mdc_status st = mdc_allgather(h + c * n2, h, n2, cp->act, cp->g);
    if (!st) mdc_unpack_half(all, h, c * n2, bf);
    return st;
}

static mdc_status allgather_forward(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop) {
    double b0 = mdc_dev_bytes_sent(cp->dev);
    size_t n2 = cp->buf_floats[0];
    mdc_i_cp_begin(cp, qkv, out);
    mdc_i_cp_pack_kv(cp, cp->buf[0], qkv);
    mdc_status st = gather_blocks(cp, cp->buf[4]);
    for (int s = 0; !st && s < cp->c; s++) mdc_i_cp_attend(cp, s, qkv, cp->buf[4] + (size_t)s * n2, out, drop);
    mdc_i_cp_finish(cp, qkv, out, lse);
    cp->fbytes += mdc_dev_bytes_sent(cp->dev) - b0, cp->calls++;
    return st;
}

static mdc_status allgather_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                     const float *lse, const mdc_dropout *drop) {
    double b0 = mdc_dev_bytes_sent(cp->dev);
    size_t n2 = cp->buf_floats[0];
    int c = cp->c;
    mdc_i_cp_rowdot(cp, qkv, out, dout);
    mdc_i_cp_pack_kv(cp, cp->buf[0], qkv);
    float *all = cp->buf[4], *dall = all + (size_t)c * n2;
    mdc_status st = gather_blocks(cp, all);
    memset(dall, 0, (size_t)c * n2 * sizeof(float));
    for (int s = 0; !st && s < c; s++)
        mdc_i_cp_attend_back(cp, s, qkv, all + (size_t)s * n2, dqkv, dall + (size_t)s * n2, dout, out, lse, drop);
    if (!st) st = mdc_reduce_scatter(dall, cp->buf[2], n2, MDC_F32, MDC_SUM, cp->g);
    if (!st) mdc_i_cp_add_dkv(cp, dqkv, cp->buf[2]);
    cp->bytes += mdc_dev_bytes_sent(cp->dev) - b0;
    return st;
}

/* gathered twice, reduce-scattered once */
static double allgather_bytes(const mdc_cp *cp) {
    double c = cp->c, K = cp->B * cp->Tc * 2 * (double)mdc_i_cp_kw(cp);
    return 2 * (c - 1) * mdc_i_cp_width(cp) * K + (c - 1) * 4 * K;
}

const mdc_i_cp_algo mdc_i_cp_allgather = {"allgather",
                                          1,
                                          0,
                                          NULL,
                                          allgather_sizes,
                                          allgather_forward,
                                          allgather_backward,
                                          mdc_i_cp_exact_forward,
                                          mdc_i_cp_exact_backward,
                                          mdc_i_cp_layout_pairs,
                                          allgather_bytes};
