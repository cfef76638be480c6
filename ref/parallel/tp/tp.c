/* Tensor parallelism: the communication points of include/minidc/tp.h over a tp group.
 * Without SP, f's forward and g's backward are the identity (the full tensor is the local
 * one), g's forward and f's backward one AllReduce in place; with SP they are ref/parallel/tp/sp.c's
 * gathers and scatters. Every call is counted with the bytes this rank sent in it. */
#include <stdlib.h>
#include <string.h>

#include "tp_internal.h"

float *mdc_tp_i_scratch(mdc_tp *tp, size_t n) {
    if (n > tp->scratch_n) {
        float *p = realloc(tp->scratch, n * sizeof(float));
        if (!p) return NULL;
        tp->scratch = p, tp->scratch_n = n;
    }
    return tp->scratch;
}

/* kind MDC_TP_AR moves the activations' dtype (16-bit values packed in place and widened back:
 * the sum as the collective sums that dtype), the loss statistics fp32 */
static mdc_status counted_allreduce(mdc_tp *tp, float *buf, size_t n, mdc_op op, int kind) {
    double b0 = mdc_dev_bytes_sent(tp->dev);
    int half = kind == MDC_TP_AR && mdc_tp_i_half(tp), bf = tp->act == MDC_BF16;
    if (half) mdc_pack_half(buf, buf, n, bf);
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, buf, n, half ? tp->act : MDC_F32, op, tp->g);
    if (half && !st) mdc_unpack_half(buf, buf, n, bf);
    tp->counts.calls[kind]++;
    tp->counts.bytes[kind] += mdc_dev_bytes_sent(tp->dev) - b0;
    return st;
}

static mdc_status f_forward(void *ctx, float *full, const float *local, int B, int T, int C) {
    mdc_tp *tp = ctx;
    return tp->sp ? mdc_sp_allgather(tp, full, local, B, T, C) : MDC_OK;
}
static mdc_status f_backward(void *ctx, float *dlocal, float *dfull, int B, int T, int C) {
    mdc_tp *tp = ctx;
    if (tp->sp) return mdc_sp_reduce_scatter(tp, dlocal, dfull, B, T, C);
    return counted_allreduce(tp, dfull, (size_t)B * T * C, MDC_SUM, MDC_TP_AR);
}
static mdc_status g_forward(void *ctx, float *local, float *full, int B, int T, int C) {
    mdc_tp *tp = ctx;
    if (tp->sp) return mdc_sp_reduce_scatter(tp, local, full, B, T, C);
    return counted_allreduce(tp, full, (size_t)B * T * C, MDC_SUM, MDC_TP_AR);
}
static mdc_status g_backward(void *ctx, float *dfull, const float *dlocal, int B, int T, int C) {
    mdc_tp *tp = ctx;
    return tp->sp ? mdc_sp_allgather(tp, dfull, dlocal, B, T, C) : MDC_OK;
}

size_t mdc_tp_padded(const mdc_tp *tp, size_t n) { return (n + (size_t)tp->t - 1) / (size_t)tp->t * (size_t)tp->t; }

/* max or sum over tp of n loss statistics, padded to a multiple of t */
static mdc_status vocab(void *ctx, float *buf, int n, int is_max) {
    mdc_tp *tp = ctx;
    size_t p = mdc_tp_padded(tp, (size_t)n);
    float *s = mdc_tp_i_scratch(tp, p);
    if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "tp loss statistics (%zu floats)", p);
    memcpy(s, buf, (size_t)n * sizeof(float));
    for (size_t i = (size_t)n; i < p; i++) s[i] = 0;
    mdc_status st = counted_allreduce(tp, s, p, is_max ? MDC_MAX : MDC_SUM, MDC_TP_AR_LOSS);
    if (!st) memcpy(buf, s, (size_t)n * sizeof(float));
    return st;
}

/* a shared kv head's dk, dv (columns [col0, col0 + width) of each row) summed over its replicas,
 * packed and padded to a multiple of the group's size */
static mdc_status kv_sum(void *ctx, float *buf, int rows, int ld, int col0, int width) {
    mdc_tp *tp = ctx;
    size_t w = (size_t)width, n = (size_t)rows * w, r = (size_t)mdc_group_size(tp->kv), p = (n + r - 1) / r * r;
    float *s = mdc_tp_i_scratch(tp, p);
    if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "tp kv gradients (%zu floats)", p);
    if (!mdc_host_dry())
        for (size_t i = 0; i < (size_t)rows; i++) memcpy(s + i * w, buf + i * (size_t)ld + col0, w * sizeof(float));
    if (!mdc_host_dry()) memset(s + n, 0, (p - n) * sizeof(float));
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, s, p, MDC_F32, MDC_SUM, tp->kv);
    tp->counts.calls[MDC_TP_AR_KV]++;
    tp->counts.bytes[MDC_TP_AR_KV] += mdc_dev_bytes_sent(tp->dev) - b0;
    for (size_t i = 0; !st && i < (size_t)rows; i++) memcpy(buf + i * (size_t)ld + col0, s + i * w, w * sizeof(float));
    return st;
}

mdc_status mdc_tp_create(mdc_tp **out, mdc_group *g, int sp) {
    *out = NULL;
    mdc_tp *tp = calloc(1, sizeof *tp);
    if (!tp) return mdc_fail(MDC_ERR_OOM_HOST, "mdc_tp_create");
    tp->g = g, tp->t = mdc_group_size(g), tp->r = mdc_group_rank(g), tp->sp = sp;
    tp->dev = mdc_transport_device(mdc_group_transport(g)), tp->act = MDC_F32;
    mdc_gpt2_comm c = {tp,    sp ? tp->t : 1,    f_forward,        f_backward, g_forward, g_backward,
                       vocab, mdc_tp_i_x_reduce, mdc_tp_i_x_vocab, NULL,       NULL};
    tp->comm = c;
    *out = tp;
    return MDC_OK;
}

void mdc_tp_free(mdc_tp *tp) {
    if (!tp) return;
    free(tp->scratch);
    free(tp->xscratch);
    free(tp->dscratch);
    free(tp);
}

const mdc_gpt2_comm *mdc_tp_comm(mdc_tp *tp) { return &tp->comm; }
void mdc_tp_set_exact(mdc_tp *tp, int on) { tp->exact = on; }
void mdc_tp_set_dtype(mdc_tp *tp, mdc_dtype act) { tp->act = act; }
void mdc_tp_set_kv_group(mdc_tp *tp, mdc_group *kv) {
    tp->kv = kv;
    tp->comm.kv_sum = kv ? kv_sum : NULL, tp->comm.x_kv_sum = kv ? mdc_tp_i_x_kv_sum : NULL;
}
mdc_group *mdc_tp_group(mdc_tp *tp) { return tp->g; }
void mdc_tp_get_counts(const mdc_tp *tp, mdc_tp_counts *c) { *c = tp->counts; }
void mdc_tp_reset_counts(mdc_tp *tp) {
    memset(&tp->counts, 0, sizeof tp->counts);
    tp->exact_marked = 0, tp->exact_bytes_want = 0, tp->exact_kv_bytes_want = 0;
}
