/* Expert parallelism's figures (include/minidc/ep.h): the step's MoE line (the load per expert,
 * drops, aux losses, the all-to-alls' bytes against 4 T k h beta (e-1)/e) and its JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ep_internal.h"

mdc_status mdc_moe_step_line(mdc_gpt2 *m, const mdc_ep *ep, const mdc_etp *etp, mdc_group *world, int count,
                             double tokens, char *line, size_t cap, double *totals) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    int E = c->E, W = world ? mdc_group_size(world) : 1;
    line[0] = 0;
    if (!E) return MDC_OK;
    mdc_moe_stats s;
    mdc_gpt2_moe_stats(m, &s);
    enum { NV = MDC_MOE_FIGURES }; /* the figures after the E counts */
    double *v = calloc((size_t)E + NV, sizeof *v);
    if (!v) return mdc_fail(MDC_ERR_OOM_HOST, "MoE figures");
    if (count) {
        for (int i = 0; i < E; i++) v[i] = s.tokens[i];
        v[E] = s.dropped, v[E + 1] = s.aux_sum, v[E + 2] = s.z_sum, v[E + 6] = 1;
    }
    double bytes = ep ? ep->bytes : 0;
    v[E + 3] = bytes, v[E + 4] = ep ? ep->rows_out : 0, v[E + 5] = ep != NULL; /* the ranks that move tokens */
    v[E + 7] = ep ? ep->wall : 0, v[E + 8] = count ? s.digest : 0;
    mdc_etp_figures xf;
    memset(&xf, 0, sizeof xf);
    if (etp) mdc_etp_get_figures(etp, &xf);
    v[E + 9] = etp != NULL, v[E + 10] = xf.bytes[MDC_ETP_GATHER] + xf.bytes[MDC_ETP_SUM];
    v[E + 11] = xf.want[MDC_ETP_GATHER] + xf.want[MDC_ETP_SUM], v[E + 12] = xf.bytes[MDC_ETP_COUNTS];
    v[E + 13] = xf.wall, v[E + 14] = xf.rows, v[E + 15] = count ? s.lb_sum : 0;
    mdc_status st = W > 1 ? mdc_allreduce(MDC_IN_PLACE, v, (size_t)E + NV, MDC_F64, MDC_SUM, world) : MDC_OK;
    double bmax = bytes;
    if (!st && W > 1) st = mdc_allreduce(MDC_IN_PLACE, &bmax, 1, MDC_F64, MDC_MAX, world);
    if (st || (world && mdc_group_rank(world) != 0)) {
        free(v);
        return st;
    }
    if (totals) memcpy(totals, v, sizeof(double) * ((size_t)E + NV));
    double tot = 0, mx = 0;
    for (int i = 0; i < E; i++) tot += v[i], mx = v[i] > mx ? v[i] : mx;
    size_t o = (size_t)snprintf(line, cap, "  moe: tokens/expert");
    for (int i = 0; i < E && o < cap; i++) o += (size_t)snprintf(line + o, cap - o, " %.0f", v[i]);
    if (o < cap)
        o += (size_t)snprintf(line + o, cap - o,
                              " (max/mean %.3f)  dropped %.0f (%.2f%%)  aux %.6f  z %.6f  routing %.0f",
                              tot > 0 ? mx / (tot / E) : 0, v[E], tot > 0 ? 100 * v[E] / tot : 0, v[E + 1] / tokens,
                              v[E + 2] / tokens, v[E + 8]);
    if (c->router == MDC_ROUTER_SIGMOID && o < cap)
        o += (size_t)snprintf(line + o, cap - o, "  router deepseek (sigmoid, top-%d of %d groups keep %d, x%g)",
                              c->topk, c->n_group, c->topk_group, c->routed_scale);
    else if (c->family && o < cap)
        o += (size_t)snprintf(line + o, cap - o, "  router softmax (top-%d%s)", c->topk,
                              c->moe_renorm ? ", renormalized" : "");
    if (mdc_gpt2_moe_balanced(m) && o < cap)
        o += (size_t)snprintf(line + o, cap - o, "  experts by position (--moe-routing balanced)");
    if (c->lb_coef > 0 && o < cap) /* transformers' aux loss: coef x load_balancing_loss_func of the global batch */
        o += (size_t)snprintf(line + o, cap - o, "  lb %.6f (%g x %.4f)", v[E + 15] / tokens, c->lb_coef,
                              v[E + 15] / tokens / c->lb_coef);
    if (ep && o < cap) { /* per rank: 4 moves of its rows (2 more for each forward again: full recomputation,
                            the aux loss's counting forward); uniform routing sends (e-1)/e of T k rows away */
        double n = v[E + 5], e = mdc_group_size(ep->g), per = v[E + 6] > 0 ? tot / v[E + 6] : 0;
        int moves = 4 + 2 * ((mdc_gpt2_get_recompute(m) == MDC_RECOMPUTE_FULL) + mdc_gpt2_lb_on(m));
        double w = mdc_ep_i_width(ep); /* beta: 16-bit rows in a mixed-precision run */
        double mean = v[E + 3] / n, routed = (v[E + 4] / n) * c->C * w;
        double uniform = moves * per * c->C * w * (e - 1) / e;
        snprintf(line + o, cap - o,
                 "  a2a %.0f B/rank (rows %.0f + counts; %d T k h beta (e-1)/e = %.0f%s; max/mean %.3f; "
                 "%.0f calls, %.1f ms wall)",
                 mean, routed, moves, uniform, w == 2 ? ", beta 2 (16-bit rows)" : "", mean > 0 ? bmax / mean : 0,
                 ep->calls, v[E + 7] / n * 1e3);
    }
    o = strlen(line);
    if (etp && o < cap) { /* per rank, the mean over the etp ranks; R: a group's rows, summed over the calls */
        static const char *const form[2][2] = {
            {"AR of R rows of h x 4 bytes: 4 R h 4 (N-1)/N", "AG + RS of R rows of h x 4 bytes: 4 R h 4 (N-1)/N"},
            {"AR of R rows of h exact sums as doubles: 4 R h 8 (N-1)/N + 16 (N-1) a sum",
             "AG of R rows of h x 4 bytes, RS of their exact sums as doubles: 2 R h (4 + 8) (N-1)/N + 16 (N-1) a "
             "sum"}};
        double n = v[E + 9], R = v[E + 14] / n / (xf.gather ? 4 : 2); /* row calls per block and micro-batch */
        snprintf(line + o, cap - o,
                 "  etp %d %s %.0f B/rank (forward and backward %s = %.0f, R = %.0f rows of the blocks and "
                 "micro-batches; counts %.0f B; %.0f calls, %.1f ms wall)",
                 mdc_etp_size(etp), xf.gather ? "AG+RS" : "AR", v[E + 10] / n, form[xf.exact][xf.gather], v[E + 11] / n,
                 R, v[E + 12] / n, xf.calls, v[E + 13] / n * 1e3);
    }
    free(v);
    return MDC_OK;
}

void mdc_moe_report_json(const mdc_gpt2 *m, const mdc_ep *ep, const mdc_etp *etp, const double *totals, void *obj) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    mdc_moe_stats s;
    mdc_gpt2_moe_stats(m, &s);
    if (totals) { /* the mesh's sums, as the MoE line */
        int E = c->E;
        for (int i = 0; i < E; i++) s.tokens[i] = totals[i];
        s.dropped = totals[E], s.aux_sum = totals[E + 1], s.z_sum = totals[E + 2], s.digest = totals[E + 8];
        s.lb_sum = totals[E + 15];
    }
    cJSON *o = cJSON_AddObjectToObject(obj, "moe"), *t = cJSON_AddArrayToObject(o, "tokens_per_expert");
    for (int i = 0; i < c->E; i++) cJSON_AddItemToArray(t, cJSON_CreateNumber(s.tokens[i]));
    cJSON_AddNumberToObject(o, "experts", c->E), cJSON_AddNumberToObject(o, "topk", c->topk);
    cJSON_AddNumberToObject(o, "dropped", s.dropped), cJSON_AddNumberToObject(o, "aux_sum", s.aux_sum);
    cJSON_AddNumberToObject(o, "z_sum", s.z_sum), cJSON_AddNumberToObject(o, "routing_digest", s.digest);
    cJSON_AddStringToObject(o, "router", c->router == MDC_ROUTER_SIGMOID ? "deepseek" : "softmax");
    cJSON_AddNumberToObject(o, "lb_sum", s.lb_sum), cJSON_AddNumberToObject(o, "lb_coef", c->lb_coef);
    cJSON_AddNumberToObject(o, "ep", ep ? mdc_group_size(ep->g) : 1);
    cJSON_AddNumberToObject(o, "alltoall_bytes", ep ? ep->bytes : 0);
    cJSON_AddNumberToObject(o, "alltoall_calls", ep ? ep->calls : 0);
    cJSON_AddNumberToObject(o, "rows_to_other_ranks", ep ? ep->rows_out : 0);
    if (!etp) return;
    mdc_etp_figures f;
    mdc_etp_get_figures(etp, &f);
    cJSON *x = cJSON_AddObjectToObject(o, "etp");
    cJSON_AddNumberToObject(x, "size", mdc_etp_size(etp)), cJSON_AddBoolToObject(x, "gather", f.gather);
    cJSON_AddNumberToObject(x, "gather_bytes", f.bytes[MDC_ETP_GATHER]);
    cJSON_AddNumberToObject(x, "gather_bytes_formula", f.want[MDC_ETP_GATHER]);
    cJSON_AddNumberToObject(x, "sum_bytes", f.bytes[MDC_ETP_SUM]);
    cJSON_AddNumberToObject(x, "sum_bytes_formula", f.want[MDC_ETP_SUM]);
    cJSON_AddNumberToObject(x, "counts_bytes", f.bytes[MDC_ETP_COUNTS]);
    cJSON_AddNumberToObject(x, "calls", f.calls), cJSON_AddNumberToObject(x, "rows", f.rows);
}
