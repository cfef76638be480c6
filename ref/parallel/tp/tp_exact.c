/* Tensor parallelism in exact mode (docs/exactness.md): g's forward and f's backward take the
 * exact partial sums of a product (one array of exact sums per rank, the blocks of its heads
 * or MLP columns) and sum them over tp exactly (mdc_exact_reduce: an AllReduce, with SP a
 * ReduceScatter of the [t][B][T/t][C] blocks, of doubles, 8 bytes an element, and of
 * accumulators for the elements whose double sum would not be exact), then round each element
 * once. The loss's per-position sum-exp accumulators are summed as MDC_EXACT (80 bytes). The
 * bytes are counted under the same kinds as the floats'. */
#include <stdlib.h>
#include <string.h>

#include "tp_internal.h"

double *mdc_tp_i_dscratch(mdc_tp *tp, size_t n) {
    if (n > tp->dscratch_n) {
        double *p = realloc(tp->dscratch, n * sizeof *p);
        if (!p) return NULL;
        tp->dscratch = p, tp->dscratch_n = n;
    }
    return tp->dscratch;
}

mdc_exact *mdc_tp_i_xscratch(mdc_tp *tp, size_t n) {
    if (n > tp->xscratch_n) {
        mdc_exact *p = realloc(tp->xscratch, n * sizeof *p);
        if (!p) return NULL;
        tp->xscratch = p, tp->xscratch_n = n;
    }
    return tp->xscratch;
}

typedef struct {
    const mdc_xsum *part;
    int t, B, T, C, permuted;
} fetch_ctx;
/* Element i of the reduced vector ([t][B][T/t][C] with SP) as an accumulator from the xsum. */
static void fetch(void *vc, size_t i, mdc_exact *out) {
    const fetch_ctx *c = vc;
    size_t j = i;
    if (c->permuted) {
        size_t C = (size_t)c->C, Tl = (size_t)(c->T / c->t), row = Tl * C;
        size_t q = i / ((size_t)c->B * row), b = i / row % (size_t)c->B, w = i % row;
        j = (b * (size_t)c->T + q * Tl) * C + w;
    }
    mdc_xsum_get(c->part, j, 1, out);
}

mdc_status mdc_tp_i_x_reduce(void *ctx, float *local, const mdc_xsum *part, int B, int T, int C) {
    mdc_tp *tp = ctx;
    size_t n = (size_t)B * T * C;
    int permute = tp->sp && B > 1;
    double *v = mdc_tp_i_dscratch(tp, n);
    if (!v) return mdc_fail(MDC_ERR_OOM_HOST, "exact tp reduction staging (%zu doubles)", n);
    if (permute) mdc_sp_i_permute(v, part->v, sizeof *v, tp->t, B, T, C, 1);
    else memcpy(v, part->v, n * sizeof *v);
    fetch_ctx fc = {part, tp->t, B, T, C, permute};
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_exact_reduce_stats xs;
    mdc_status st = mdc_exact_reduce(v, n, tp->sp, local, fetch, &fc, tp->g, &xs);
    int kind = tp->sp ? MDC_TP_RS : MDC_TP_AR;
    tp->counts.calls[kind]++;
    tp->counts.bytes[kind] += mdc_dev_bytes_sent(tp->dev) - b0;
    tp->exact_marked += xs.marked;
    tp->exact_bytes_want += mdc_exact_reduce_bytes(n, tp->t, tp->sp, &xs);
    if (tp->dev) mdc_dev_kernel(tp->dev, (double)n, 12.0 * (double)n, MDC_PREC_FP32);
    return st;
}

mdc_status mdc_tp_i_x_vocab(void *ctx, mdc_exact *acc, int n) {
    mdc_tp *tp = ctx;
    size_t p = mdc_tp_padded(tp, (size_t)n);
    mdc_exact *s = mdc_tp_i_xscratch(tp, p);
    if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "exact tp loss statistics (%zu accumulators)", p);
    memcpy(s, acc, (size_t)n * sizeof *s);
    memset(s + n, 0, (p - (size_t)n) * sizeof *s); /* empty accumulators */
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, s, p, MDC_EXACT, MDC_SUM, tp->g);
    tp->counts.calls[MDC_TP_AR_LOSS]++;
    tp->counts.bytes[MDC_TP_AR_LOSS] += mdc_dev_bytes_sent(tp->dev) - b0;
    if (!st) memcpy(acc, s, (size_t)n * sizeof *s);
    return st;
}

typedef struct {
    const mdc_xsum *part;
    size_t ld, col0, width;
} cols_ctx;
static size_t col_at(const cols_ctx *c, size_t i) { return i / c->width * c->ld + c->col0 + i % c->width; }
static void fetch_cols(void *vc, size_t i, mdc_exact *out) {
    const cols_ctx *c = vc;
    mdc_xsum_get(c->part, col_at(c, i), 1, out);
}

/* A shared kv head's dk, dv: part's exact sums of those columns summed over the head's replicas
 * and rounded once into out's same places (doubles, and accumulators where a sum escalated). */
mdc_status mdc_tp_i_x_kv_sum(void *ctx, float *out, const mdc_xsum *part, int rows, int ld, int col0, int width) {
    mdc_tp *tp = ctx;
    cols_ctx c = {part, (size_t)ld, (size_t)col0, (size_t)width};
    size_t n = (size_t)rows * c.width;
    double *v = mdc_tp_i_dscratch(tp, n);
    float *f = mdc_tp_i_scratch(tp, n);
    if (!v || !f) return mdc_fail(MDC_ERR_OOM_HOST, "exact tp kv gradients (%zu sums)", n);
    for (size_t i = 0; i < n; i++) v[i] = part->v[col_at(&c, i)];
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_exact_reduce_stats xs;
    mdc_status st = mdc_exact_reduce(v, n, 0, f, fetch_cols, &c, tp->kv, &xs);
    tp->counts.calls[MDC_TP_AR_KV]++;
    tp->counts.bytes[MDC_TP_AR_KV] += mdc_dev_bytes_sent(tp->dev) - b0;
    tp->exact_kv_bytes_want += mdc_exact_reduce_bytes(n, mdc_group_size(tp->kv), 0, &xs);
    for (size_t i = 0; !st && i < n; i++) out[col_at(&c, i)] = f[i];
    if (tp->dev) mdc_dev_kernel(tp->dev, (double)n, 12.0 * (double)n, MDC_PREC_FP32);
    return st;
}

mdc_status mdc_tp_kv_sum_exact(void *ctx, mdc_exact *acc, size_t n) {
    mdc_tp *tp = ctx;
    size_t r = (size_t)mdc_group_size(tp->kv), p = (n + r - 1) / r * r;
    mdc_exact *s = mdc_tp_i_xscratch(tp, p);
    if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "exact tp kv gradients (%zu accumulators)", p);
    memcpy(s, acc, n * sizeof *s);
    memset(s + n, 0, (p - n) * sizeof *s); /* empty accumulators */
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, s, p, MDC_EXACT, MDC_SUM, tp->kv);
    tp->counts.calls[MDC_TP_AR_KV]++;
    tp->counts.bytes[MDC_TP_AR_KV] += mdc_dev_bytes_sent(tp->dev) - b0;
    tp->exact_kv_bytes_want += 2.0 * (double)(r - 1) * (double)(p / r) * sizeof(mdc_exact); /* the ring's */
    if (!st) memcpy(acc, s, n * sizeof *s);
    return st;
}
