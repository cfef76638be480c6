/* Expert parallelism (include/minidc/ep.h): the all-to-all a MoE block's dispatch and combine
 * call (ref/model/moe/moe.c builds the layouts), the step's gradient sums over the dense and the expert
 * groups, and the step's MoE line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "minidc/ep.h"
#include "minidc/model.h"

struct mdc_ep {
    mdc_group *g, *dense, *expert;
    mdc_gpt2 *m;
    mdc_gpt2_ep hook;
    size_t *cnt;            /* 4 e: send counts, displacements, receive counts, displacements */
    double bytes, calls;    /* the all-to-alls of the last step */
    double wall;            /* seconds inside them (waiting for the slowest rank included) */
    double rows_out;        /* rows this rank sent to other ranks (the formula's exact count) */
};

static mdc_status counts(void *ctx, const int *send, int *recv, int n) {
    mdc_ep *ep = ctx;
    double b0 = mdc_dev_bytes_sent(mdc_gpt2_device(ep->m)), w0 = mdc_wall_time();
    mdc_status st = mdc_alltoall(send, recv, (size_t)n, MDC_I32, ep->g);
    ep->bytes += mdc_dev_bytes_sent(mdc_gpt2_device(ep->m)) - b0, ep->calls++, ep->wall += mdc_wall_time() - w0;
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
    mdc_status st = mdc_alltoallv(send, sc, sd, recv, rc, rd, MDC_F32, ep->g);
    ep->bytes += mdc_dev_bytes_sent(mdc_gpt2_device(ep->m)) - b0, ep->calls++, ep->wall += mdc_wall_time() - w0;
    return st;
}

mdc_status mdc_ep_create(mdc_ep **out, mdc_group *g, mdc_group *dense, mdc_group *expert, mdc_gpt2 *m) {
    *out = NULL;
    mdc_ep *ep = calloc(1, sizeof *ep);
    int e = mdc_group_size(g);
    if (!ep || !(ep->cnt = calloc(4 * (size_t)e, sizeof(size_t)))) {
        free(ep);
        return mdc_fail(MDC_ERR_OOM_HOST, "expert parallelism");
    }
    ep->g = g, ep->dense = dense, ep->expert = expert, ep->m = m;
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
    free(ep->cnt);
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
    if (!st) st = mdc_gpt2_exact_round_grads(ep->m); /* exact mode: the sums, rounded once */
    return st;
}

mdc_status mdc_moe_step_line(mdc_gpt2 *m, const mdc_ep *ep, mdc_group *world, int count, double tokens, char *line,
                             size_t cap) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    int E = c->E, W = world ? mdc_group_size(world) : 1;
    line[0] = 0;
    if (!E) return MDC_OK;
    mdc_moe_stats s;
    mdc_gpt2_moe_stats(m, &s);
    double *v = calloc((size_t)E + 9, sizeof *v);
    if (!v) return mdc_fail(MDC_ERR_OOM_HOST, "MoE figures");
    if (count) {
        for (int i = 0; i < E; i++) v[i] = s.tokens[i];
        v[E] = s.dropped, v[E + 1] = s.aux_sum, v[E + 2] = s.z_sum, v[E + 6] = 1;
    }
    double bytes = ep ? ep->bytes : 0;
    v[E + 3] = bytes, v[E + 4] = ep ? ep->rows_out : 0, v[E + 5] = ep != NULL; /* the ranks that move tokens */
    v[E + 7] = ep ? ep->wall : 0, v[E + 8] = count ? s.digest : 0;
    mdc_status st = W > 1 ? mdc_allreduce(MDC_IN_PLACE, v, (size_t)E + 9, MDC_F64, MDC_SUM, world) : MDC_OK;
    double bmax = bytes;
    if (!st && W > 1) st = mdc_allreduce(MDC_IN_PLACE, &bmax, 1, MDC_F64, MDC_MAX, world);
    if (st || (world && mdc_group_rank(world) != 0)) {
        free(v);
        return st;
    }
    double tot = 0, mx = 0;
    for (int i = 0; i < E; i++) tot += v[i], mx = v[i] > mx ? v[i] : mx;
    size_t o = (size_t)snprintf(line, cap, "  moe: tokens/expert");
    for (int i = 0; i < E && o < cap; i++) o += (size_t)snprintf(line + o, cap - o, " %.0f", v[i]);
    if (o < cap)
        o += (size_t)snprintf(line + o, cap - o, " (max/mean %.3f)  dropped %.0f (%.2f%%)  aux %.6f  z %.6f  routing %.0f",
                              tot > 0 ? mx / (tot / E) : 0, v[E], tot > 0 ? 100 * v[E] / tot : 0, v[E + 1] / tokens,
                              v[E + 2] / tokens, v[E + 8]);
    if (ep && o < cap) { /* per rank: 4 moves of its rows; uniform routing sends (e-1)/e of T k rows away */
        double n = v[E + 5], e = mdc_group_size(ep->g), per = v[E + 6] > 0 ? tot / v[E + 6] : 0;
        double mean = v[E + 3] / n, routed = (v[E + 4] / n) * c->C * 4, uniform = 4.0 * per * c->C * 4 * (e - 1) / e;
        snprintf(line + o, cap - o, "  a2a %.0f B/rank (rows %.0f + counts; 4 T k h beta (e-1)/e = %.0f; max/mean %.3f; "
                 "%.0f calls, %.1f ms wall)", mean, routed, uniform, mean > 0 ? bmax / mean : 0, ep->calls,
                 v[E + 7] / n * 1e3);
    }
    free(v);
    return MDC_OK;
}

void mdc_moe_report_json(const mdc_gpt2 *m, const mdc_ep *ep, void *obj) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    mdc_moe_stats s;
    mdc_gpt2_moe_stats(m, &s);
    cJSON *o = cJSON_AddObjectToObject(obj, "moe"), *t = cJSON_AddArrayToObject(o, "tokens_per_expert");
    for (int i = 0; i < c->E; i++) cJSON_AddItemToArray(t, cJSON_CreateNumber(s.tokens[i]));
    cJSON_AddNumberToObject(o, "experts", c->E), cJSON_AddNumberToObject(o, "topk", c->topk);
    cJSON_AddNumberToObject(o, "dropped", s.dropped), cJSON_AddNumberToObject(o, "aux_sum", s.aux_sum);
    cJSON_AddNumberToObject(o, "z_sum", s.z_sum), cJSON_AddNumberToObject(o, "routing_digest", s.digest);
    cJSON_AddNumberToObject(o, "ep", ep ? mdc_group_size(ep->g) : 1);
    cJSON_AddNumberToObject(o, "alltoall_bytes", ep ? ep->bytes : 0);
    cJSON_AddNumberToObject(o, "alltoall_calls", ep ? ep->calls : 0);
    cJSON_AddNumberToObject(o, "rows_to_other_ranks", ep ? ep->rows_out : 0);
}
