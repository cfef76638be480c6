/* Megatron sequence parallelism (include/minidc/tp.h): the residual stream of rank r holds
 * positions [r T/t, (r+1) T/t) of every sequence, (B, T/t, C). Gathering it, and scattering the
 * sum of full (B, T, C) tensors back into it, are one AllGather and one ReduceScatter of
 * B T C / t floats per rank block; the blocks travel as [t][B][T/t][C] (rank-major, so the
 * collective's block r is rank r's share) and are permuted to and from (B, T, C) here. */
#include <string.h>

#include "tp_internal.h"

/* (B,T,C) <-> [t][B][T/t][C] */
void mdc_sp_i_permute(void *dst, const void *src, size_t esz, int t, int B, int T, int C, int to_blocks) {
    size_t Tl = (size_t)(T / t), row = Tl * (size_t)C * esz;
    for (int q = 0; q < t && !mdc_host_dry(); q++)
        for (int b = 0; b < B; b++) {
            size_t blk = ((size_t)q * B + b) * row, seq = ((size_t)b * T + (size_t)q * Tl) * (size_t)C * esz;
            if (to_blocks) memcpy((char *)dst + blk, (const char *)src + seq, row);
            else memcpy((char *)dst + seq, (const char *)src + blk, row);
        }
}
static void permute(float *dst, const float *src, int t, int B, int T, int C, int to_blocks) {
    mdc_sp_i_permute(dst, src, sizeof(float), t, B, T, C, to_blocks);
}

/* 16-bit activations: local packed behind the gathered blocks in the staging (2n halves: n floats),
 * gathered, put in sequence order in full's first n halves, widened in place */
static mdc_status allgather16(mdc_tp *tp, float *full, const float *local, int B, int T, int C) {
    size_t n = (size_t)B * T * C, blk = n / (size_t)tp->t;
    int bf = tp->act == MDC_BF16;
    uint16_t *s = (uint16_t *)mdc_tp_i_scratch(tp, n), *send = s + n;
    if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "SP allgather staging (%zu halves)", 2 * n);
    mdc_pack_half(send, local, blk, bf);
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_status st = mdc_allgather(send, B > 1 ? s : (uint16_t *)full, blk, tp->act, tp->g);
    tp->counts.calls[MDC_TP_AG]++;
    tp->counts.bytes[MDC_TP_AG] += mdc_dev_bytes_sent(tp->dev) - b0;
    if (st) return st;
    if (B > 1) mdc_sp_i_permute(full, s, sizeof(uint16_t), tp->t, B, T, C, 0);
    mdc_unpack_half(full, full, n, bf);
    return MDC_OK;
}

/* full packed into the staging's first n halves (in block order with B > 1: its second n), reduced
 * into local's first blk halves, widened in place */
static mdc_status reduce_scatter16(mdc_tp *tp, float *local, const float *full, int B, int T, int C) {
    size_t n = (size_t)B * T * C, blk = n / (size_t)tp->t;
    int bf = tp->act == MDC_BF16;
    uint16_t *s = (uint16_t *)mdc_tp_i_scratch(tp, n), *src = s;
    if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "SP reduce-scatter staging (%zu halves)", 2 * n);
    mdc_pack_half(s, full, n, bf);
    if (B > 1) mdc_sp_i_permute(s + n, s, sizeof(uint16_t), tp->t, B, T, C, 1), src = s + n;
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_status st = mdc_reduce_scatter(src, local, blk, tp->act, MDC_SUM, tp->g);
    tp->counts.calls[MDC_TP_RS]++;
    tp->counts.bytes[MDC_TP_RS] += mdc_dev_bytes_sent(tp->dev) - b0;
    if (!st) mdc_unpack_half(local, local, blk, bf);
    return st;
}

mdc_status mdc_sp_allgather(mdc_tp *tp, float *full, const float *local, int B, int T, int C) {
    if (mdc_tp_i_half(tp)) return allgather16(tp, full, local, B, T, C);
    size_t n = (size_t)B * T * C, blk = n / (size_t)tp->t;
    float *s = B > 1 ? mdc_tp_i_scratch(tp, n) : full; /* one sequence: the blocks are in place already */
    if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "SP allgather staging (%zu floats)", n);
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_status st = mdc_allgather(local, s, blk, MDC_F32, tp->g);
    tp->counts.calls[MDC_TP_AG]++;
    tp->counts.bytes[MDC_TP_AG] += mdc_dev_bytes_sent(tp->dev) - b0;
    if (!st && s != full) permute(full, s, tp->t, B, T, C, 0);
    return st;
}

mdc_status mdc_sp_reduce_scatter(mdc_tp *tp, float *local, const float *full, int B, int T, int C) {
    if (mdc_tp_i_half(tp)) return reduce_scatter16(tp, local, full, B, T, C);
    size_t n = (size_t)B * T * C, blk = n / (size_t)tp->t;
    const float *src = full;
    if (B > 1) {
        float *s = mdc_tp_i_scratch(tp, n);
        if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "SP reduce-scatter staging (%zu floats)", n);
        permute(s, full, tp->t, B, T, C, 1);
        src = s;
    }
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_status st = mdc_reduce_scatter(src, local, blk, MDC_F32, MDC_SUM, tp->g);
    tp->counts.calls[MDC_TP_RS]++;
    tp->counts.bytes[MDC_TP_RS] += mdc_dev_bytes_sent(tp->dev) - b0;
    return st;
}
