/* Expert tensor parallelism (include/minidc/ep.h, Megatron-Core's expert_tensor_parallel_size):
 * the etp group's collectives a MoE block calls (ref/model/moe/moe_etp.c lays the rows out).
 * Each member holds F/N of every local expert's intermediate columns; with SP the members hold
 * different tokens, so the rows the ep all-to-all brought each member are gathered over the
 * group (AllGather(v), member order), every member runs its shard on all of them, and the
 * partial outputs are summed back to each member's rows (ReduceScatter(v)); without SP the
 * members hold the same rows and the partial sums are one AllReduce. The backward does the same
 * with the output gradient (gathered) and the gate/up input gradient (summed). Exact mode sums
 * the exact partial sums instead (mdc_exact_reduce_scatterv / mdc_exact_reduce: doubles, and
 * accumulators where a double is not exact), so the rounded bits do not depend on N.
 * Every call is counted with the bytes this rank sent and the ring's formula for it:
 * AG = RS = (N-1)/N x R x width x beta, AR = 2 (N-1)/N x R x width x beta (R the group's rows). */
#include <stdlib.h>
#include <string.h>

#include "ep_internal.h"

static double sent(const mdc_etp *x) { return mdc_dev_bytes_sent(mdc_gpt2_device(x->m)); }

static size_t *row_counts(mdc_etp *x, const int *rows, int width, size_t *total) {
    *total = 0;
    for (int q = 0; q < x->n; q++) x->cnt[q] = (size_t)rows[q] * (size_t)width, *total += x->cnt[q];
    return x->cnt;
}

static mdc_status counts(void *ctx, const int *mine, int *all, int n) {
    mdc_etp *x = ctx;
    double b0 = sent(x), w0 = mdc_wall_time();
    mdc_status st = mdc_allgather(mine, all, (size_t)n, MDC_I32, x->g);
    x->f.bytes[MDC_ETP_COUNTS] += sent(x) - b0, x->f.wall += mdc_wall_time() - w0;
    for (int q = 0; !st && mdc_host_dry() && q < x->n; q++) /* a prediction: every member routes alike */
        memcpy(all + (size_t)q * n, mine, sizeof(int) * (size_t)n);
    x->f.want[MDC_ETP_COUNTS] += (double)(x->n - 1) * n * sizeof(int);
    return st;
}

static mdc_status rows(void *ctx, const float *mine, float *all, const int *r, int width) {
    mdc_etp *x = ctx;
    size_t total, *c = row_counts(x, r, width, &total);
    double b0 = sent(x), w0 = mdc_wall_time();
    mdc_status st = mdc_allgatherv(mine, all, c, NULL, MDC_F32, x->g);
    x->f.bytes[MDC_ETP_GATHER] += sent(x) - b0, x->f.wall += mdc_wall_time() - w0, x->f.calls++;
    x->f.want[MDC_ETP_GATHER] += (double)(x->n - 1) / x->n * (double)total * sizeof(float);
    x->f.rows += total / (size_t)width;
    return st;
}

static mdc_status sum(void *ctx, float *part, float *out, const int *r, int width) {
    mdc_etp *x = ctx;
    double b0 = sent(x), w0 = mdc_wall_time(), f = (double)(x->n - 1) / x->n;
    size_t total;
    mdc_status st;
    if (x->gather) {
        st = mdc_reduce_scatterv(part, out, row_counts(x, r, width, &total), MDC_F32, MDC_SUM, x->g);
    } else { /* the same rows on every member */
        total = (size_t)r[0] * (size_t)width, f *= 2;
        st = mdc_allreduce(MDC_IN_PLACE, part, total, MDC_F32, MDC_SUM, x->g);
        if (!st && out != part) memcpy(out, part, total * sizeof(float));
    }
    x->f.bytes[MDC_ETP_SUM] += sent(x) - b0, x->f.wall += mdc_wall_time() - w0, x->f.calls++;
    x->f.want[MDC_ETP_SUM] += f * (double)total * sizeof(float);
    x->f.rows += total / (size_t)width;
    return st;
}

static void fetch(void *ctx, size_t i, mdc_exact *out) { mdc_xsum_get(ctx, i, 1, out); }

static mdc_status x_sum(void *ctx, const mdc_xsum *part, float *out, const int *r, int width) {
    mdc_etp *x = ctx;
    size_t total, *c = row_counts(x, r, width, &total);
    if (!x->gather) total = (size_t)r[0] * (size_t)width;
    if (total > x->dn) {
        double *d = realloc(x->d, total * sizeof *d);
        if (!d) return mdc_fail(MDC_ERR_OOM_HOST, "exact etp sums (%zu doubles)", total);
        x->d = d, x->dn = total;
    }
    memcpy(x->d, part->v, total * sizeof *x->d); /* overwritten by the reduction; part keeps the slots */
    double b0 = sent(x), w0 = mdc_wall_time();
    mdc_exact_reduce_stats xs;
    mdc_status st = x->gather ? mdc_exact_reduce_scatterv(x->d, c, out, fetch, (void *)part, x->g, &xs)
                              : mdc_exact_reduce(x->d, total, 0, out, fetch, (void *)part, x->g, &xs);
    x->f.bytes[MDC_ETP_SUM] += sent(x) - b0, x->f.wall += mdc_wall_time() - w0, x->f.calls++;
    /* mdc_exact_reduce_bytes' ring figures, the reduce-scatter's blocks unequal: their mean */
    x->f.want[MDC_ETP_SUM] += mdc_exact_reduce_bytes(total, x->n, x->gather, &xs);
    x->f.rows += total / (size_t)width, x->f.exact = 1;
    mdc_dev_kernel(mdc_gpt2_device(x->m), (double)total, 12.0 * (double)total, MDC_PREC_FP32);
    return st;
}

mdc_status mdc_etp_create(mdc_etp **out, mdc_group *g, int gather, mdc_gpt2 *m) {
    *out = NULL;
    mdc_etp *x = calloc(1, sizeof *x);
    int n = mdc_group_size(g);
    if (!x || !(x->cnt = calloc((size_t)n, sizeof(size_t)))) {
        free(x);
        return mdc_fail(MDC_ERR_OOM_HOST, "expert tensor parallelism");
    }
    x->g = g, x->m = m, x->n = n, x->gather = gather;
    x->hook = (mdc_gpt2_etp){x, n, mdc_group_rank(g), gather, counts, rows, sum, x_sum};
    mdc_status st = mdc_gpt2_set_etp(m, &x->hook);
    if (st) {
        mdc_etp_free(x);
        return st;
    }
    *out = x;
    return MDC_OK;
}

void mdc_etp_free(mdc_etp *x) {
    if (!x) return;
    free(x->cnt), free(x->d);
    free(x);
}

void mdc_etp_reset_counts(mdc_etp *x) { memset(&x->f, 0, sizeof x->f); }
void mdc_etp_get_figures(const mdc_etp *x, mdc_etp_figures *f) {
    *f = x->f;
    f->gather = x->gather;
}
int mdc_etp_size(const mdc_etp *x) { return x ? x->n : 1; }
