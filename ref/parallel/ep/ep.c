/* Expert parallelism (include/minidc/ep.h): the all-to-all a MoE block's dispatch and combine
 * call (ref/model/moe/moe.c builds the layouts), the step's gradient sums over the dense and the expert
 * groups; the step's MoE line is report.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ep_internal.h"

static mdc_status counts(void *ctx, const int *send, int *recv, int n) {
    mdc_ep *ep = ctx;
    double b0 = mdc_dev_bytes_sent(mdc_gpt2_device(ep->m)), w0 = mdc_wall_time();
    mdc_status st = mdc_alltoall(send, recv, (size_t)n, MDC_I32, ep->g);
    ep->bytes += mdc_dev_bytes_sent(mdc_gpt2_device(ep->m)) - b0, ep->calls++, ep->wall += mdc_wall_time() - w0;
    if (!st && mdc_host_dry()) /* a prediction's messages carry no counts: every peer routes as this rank
                                  does (balanced routing), so each sends what this rank sends its own part */
        for (int r = 0, me = mdc_group_rank(ep->g); r < mdc_group_size(ep->g); r++)
            memcpy(recv + (size_t)r * n, send + (size_t)me * n, sizeof(int) * (size_t)n);
    return st;
}

static mdc_status rows(void *ctx, const float *send, const int *scount, float *recv, const int *rcount, int width) {
    mdc_ep *ep = ctx;
    int e = mdc_group_size(ep->g), me = mdc_group_rank(ep->g);
    size_t *sc = ep->cnt, *sd = sc + e, *rc = sd + e, *rd = rc + e, so = 0, ro = 0;
    for (int r = 0; r < e; r++) {
        sc[r] = (size_t)scount[r] * width, sd[r] = so, so += sc[r];
        rc[r] = (size_t)rcount[r] * width, rd[r] = ro, ro += rc[r];
        if (r != me) ep->rows_out += scount[r];
    }
    double b0 = mdc_dev_bytes_sent(mdc_gpt2_device(ep->m)), w0 = mdc_wall_time();
    mdc_status st;
    if (ep->act == MDC_F32) {
        st = mdc_alltoallv(send, sc, sd, recv, rc, rd, MDC_F32, ep->g);
    } else { /* the rows hold 16-bit values (the model rounded them): 2 bytes an element, the same values */
        int bf = ep->act == MDC_BF16;
        if (so + ro > ep->half_n) {
            uint16_t *p = realloc(ep->half, (so + ro) * sizeof *p);
            if (!p) return mdc_fail(MDC_ERR_OOM_HOST, "expert parallelism: 16-bit rows (%zu)", so + ro);
            ep->half = p, ep->half_n = so + ro;
        }
        mdc_pack_half(ep->half, send, so, bf);
        st = mdc_alltoallv(ep->half, sc, sd, ep->half + so, rc, rd, ep->act, ep->g);
        if (!st) mdc_unpack_half(recv, ep->half + so, ro, bf);
    }
    ep->bytes += mdc_dev_bytes_sent(mdc_gpt2_device(ep->m)) - b0, ep->calls++, ep->wall += mdc_wall_time() - w0;
    return st;
}

void mdc_ep_set_dtype(mdc_ep *ep, mdc_dtype act) { ep->act = act; }

mdc_status mdc_ep_create(mdc_ep **out, mdc_group *g, mdc_group *dense, mdc_group *expert, mdc_gpt2 *m) {
    *out = NULL;
    mdc_ep *ep = calloc(1, sizeof *ep);
    int e = mdc_group_size(g);
    if (!ep || !(ep->cnt = calloc(4 * (size_t)e, sizeof(size_t)))) {
        free(ep);
        return mdc_fail(MDC_ERR_OOM_HOST, "expert parallelism");
    }
    ep->g = g, ep->dense = dense, ep->expert = expert, ep->m = m, ep->act = MDC_F32;
    ep->hook = (mdc_gpt2_ep){ep, e, mdc_group_rank(g), counts, rows};
    mdc_status st = mdc_gpt2_set_ep(m, &ep->hook);
    if (st) {
        mdc_ep_free(ep);
        return st;
    }
    *out = ep;
    return MDC_OK;
}

void mdc_ep_free(mdc_ep *ep) {
    if (!ep) return;
    free(ep->cnt), free(ep->half);
    free(ep);
}

void mdc_ep_reset_counts(mdc_ep *ep) { ep->bytes = ep->calls = ep->rows_out = ep->wall = 0; }

/* Is local tensor i an expert's (held by this ep rank only)? */
static int is_expert(const mdc_gpt2 *m, int i) {
    return mdc_gpt2_tensor_expert(mdc_gpt2_get_config(m), mdc_gpt2_local_tensor(m, i)->global) >= 0;
}

void mdc_ep_norm_skip(const mdc_ep *ep, char *skip) {
    int dr = ep->dense ? mdc_group_rank(ep->dense) : 0, xr = ep->expert ? mdc_group_rank(ep->expert) : 0;
    for (int i = 0; i < mdc_gpt2_local_count(ep->m); i++) skip[i] |= is_expert(ep->m, i) ? xr > 0 : dr > 0;
}

/* One group's tensors (experts or not) packed, summed over g, unpacked (the model's gradient
 * sink says in which element type: floats, or exact mode's sums). */
static mdc_status reduce_kind(mdc_ep *ep, int experts, mdc_group *g) {
    mdc_gpt2 *m = ep->m;
    int nt = mdc_gpt2_local_count(m);
    if (!g || mdc_group_size(g) < 2) return MDC_OK;
    mdc_dtype dt = mdc_gpt2_grad_dtype(m);
    size_t n = 0, el = mdc_dtype_size(dt), k = 0;
    for (int i = 0; i < nt; i++)
        if (is_expert(m, i) == experts) n += mdc_gpt2_local_tensor(m, i)->alloc;
    if (!n) return MDC_OK;
    char *buf = malloc(n * el);
    if (!buf) return mdc_fail(MDC_ERR_OOM_HOST, "expert-parallel gradient sums (%zu elements)", n);
    for (int i = 0; i < nt; i++) {
        const mdc_param_tensor *t = mdc_gpt2_local_tensor(m, i);
        if (is_expert(m, i) != experts) continue;
        mdc_gpt2_grad_pack(m, t->offset, t->alloc, buf + k * el);
        k += t->alloc;
    }
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, buf, n, dt, MDC_SUM, g);
    k = 0;
    for (int i = 0; !st && i < nt; i++) {
        const mdc_param_tensor *t = mdc_gpt2_local_tensor(m, i);
        if (is_expert(m, i) != experts) continue;
        mdc_gpt2_grad_unpack(m, t->offset, t->alloc, buf + k * el);
        k += t->alloc;
    }
    free(buf);
    return st;
}

mdc_status mdc_ep_reduce(void *ctx) {
    mdc_ep *ep = ctx;
    mdc_status st = reduce_kind(ep, 0, ep->dense);
    if (!st) st = reduce_kind(ep, 1, ep->expert);
    if (!st) st = mdc_gpt2_grad_round(ep->m); /* a sink of sums: rounded once */
    return st;
}
