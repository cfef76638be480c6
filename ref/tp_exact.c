/* Tensor parallelism in exact mode (docs/exactness.md): g's forward and f's backward take the
 * exact partial sums of a product (one array of exact sums per rank, the blocks of its heads
 * or MLP columns) and sum them over tp as MDC_EXACT accumulators, an AllReduce (SP: a
 * ReduceScatter of the [t][B][T/t][C] blocks), then round each element once. The loss's
 * per-position sum-exp accumulators are summed the same way. An accumulator is 80 bytes on the
 * wire against a float's 4: exact mode's price, counted under the same kinds as the floats. */
#include <stdlib.h>
#include <string.h>

#include "tp_internal.h"

mdc_exact *mdc_tp_i_xscratch(mdc_tp *tp, size_t n) {
    if (n > tp->xscratch_n) {
        mdc_exact *p = realloc(tp->xscratch, n * sizeof *p);
        if (!p) return NULL;
        tp->xscratch = p, tp->xscratch_n = n;
    }
    return tp->xscratch;
}

mdc_status mdc_tp_i_x_reduce(void *ctx, float *local, const mdc_xsum *part, int B, int T, int C) {
    mdc_tp *tp = ctx;
    size_t n = (size_t)B * T * C, blk = n / (size_t)tp->t;
    int permute = tp->sp && B > 1;
    mdc_exact *x = mdc_tp_i_xscratch(tp, permute ? 2 * n : n);
    if (!x) return mdc_fail(MDC_ERR_OOM_HOST, "exact tp reduction staging (%zu accumulators)", permute ? 2 * n : n);
    mdc_xsum_get(part, 0, n, x);
    double b0 = mdc_tp_i_sent(tp);
    mdc_status st;
    int kind;
    if (tp->sp) {
        const mdc_exact *src = x;
        if (permute) {
            mdc_sp_i_permute(x + n, x, sizeof *x, tp->t, B, T, C, 1);
            src = x + n;
        }
        st = mdc_reduce_scatter(src, x, blk, MDC_EXACT, MDC_SUM, tp->g);
        if (!st) mdc_exact_round_n(x, blk, local);
        kind = MDC_TP_RS;
    } else {
        st = mdc_allreduce(MDC_IN_PLACE, x, n, MDC_EXACT, MDC_SUM, tp->g);
        if (!st) mdc_exact_round_n(x, n, local);
        kind = MDC_TP_AR;
    }
    tp->counts.calls[kind]++;
    tp->counts.bytes[kind] += mdc_tp_i_sent(tp) - b0;
    if (tp->dev) mdc_dev_kernel(tp->dev, (double)n, 24.0 * (double)n, MDC_PREC_FP32);
    return st;
}

mdc_status mdc_tp_i_x_vocab(void *ctx, mdc_exact *acc, int n) {
    mdc_tp *tp = ctx;
    size_t p = mdc_tp_padded(tp, (size_t)n);
    mdc_exact *s = mdc_tp_i_xscratch(tp, p);
    if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "exact tp loss statistics (%zu accumulators)", p);
    memcpy(s, acc, (size_t)n * sizeof *s);
    memset(s + n, 0, (p - (size_t)n) * sizeof *s); /* empty accumulators */
    double b0 = mdc_tp_i_sent(tp);
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, s, p, MDC_EXACT, MDC_SUM, tp->g);
    tp->counts.calls[MDC_TP_AR_LOSS]++;
    tp->counts.bytes[MDC_TP_AR_LOSS] += mdc_tp_i_sent(tp) - b0;
    if (!st) memcpy(acc, s, (size_t)n * sizeof *s);
    return st;
}
