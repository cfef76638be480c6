/* transformers' auxiliary load-balancing loss (include/minidc/model.h, "mixture of experts";
 * docs/expert-parallel.md), over the global batch: with N = the global batch's tokens x the
 * model's MoE blocks, c_i the times expert i is among the top k of p = softmax(z) over every
 * token and block (however the router chose), P_i the sum of p_i over them,
 *   aux = E sum_i (c_i / N) (P_i / N),  objective += lb_coef aux
 * as load_balancing_loss_func computes it on the concatenated router logits. Its gradient per
 * p_i, w_i = lb_coef E c_i / N^2, needs the global counts before the first backward, which a
 * pipeline's 1F1B reaches before the last forward: so a step starts with a counting forward of
 * its micro-batches (mdc_step_grads), whose counts are summed over the ranks. The counts are
 * integers, so every mesh gets the same w_i; each token adds its term sum_i w_i p_i to the
 * objective (exactly in exact mode), so the value is the global batch's on every mesh. */
#include <stdlib.h>
#include <string.h>

#include "moe_internal.h"

int mdc_gpt2_lb_on(const mdc_gpt2 *m) { return m->cfg.E > 0 && m->cfg.lb_coef > 0; }

mdc_status mdc_gpt2_lb_begin(mdc_gpt2 *m) {
    int E = m->cfg.E;
    if (!m->moe.lb_cnt) {
        m->moe.lb_cnt = calloc((size_t)E, sizeof(double));
        m->moe.lb_w = calloc((size_t)E, sizeof(float));
        if (!m->moe.lb_cnt || !m->moe.lb_w) return mdc_fail(MDC_ERR_OOM_HOST, "the aux loss's counts");
    }
    memset(m->moe.lb_cnt, 0, sizeof(double) * (size_t)E);
    m->moe.counting = 1, m->moe.lb_ready = 0;
    m->moe.lb_tap = m->tap, m->tap = NULL; /* the counting forward dumps nothing */
    return MDC_OK;
}

double *mdc_gpt2_lb_end(mdc_gpt2 *m) {
    m->moe.counting = 0, m->tap = m->moe.lb_tap;
    return m->moe.lb_cnt;
}

void mdc_gpt2_lb_set(mdc_gpt2 *m, double tokens) {
    int E = m->cfg.E;
    double N = tokens * mdc_gpt2_moe_blocks(&m->cfg);
    for (int i = 0; i < E; i++) m->moe.lb_w[i] = (float)(m->cfg.lb_coef * E * m->moe.lb_cnt[i] / (N * N));
    m->moe.lb_tokens = tokens, m->moe.lb_ready = 1;
}

/* The serial forward (mdc_gpt2_forward): its one batch is the global batch, so it counts as it
 * goes (start 1), and its counts are the step's at its end (start 0, the batch's tokens). */
mdc_status mdc_i_moe_lb_serial(mdc_gpt2 *m, int start, double tokens) {
    if (start) {
        mdc_status st = mdc_gpt2_lb_begin(m);
        m->moe.counting = 0, m->moe.lb_serial = 1, m->tap = m->moe.lb_tap;
        return st;
    }
    m->moe.lb_serial = 0;
    mdc_gpt2_lb_set(m, tokens);
    return MDC_OK;
}

/* the top k of p (ties to the lower index) of every token of the block, counted */
void mdc_i_moe_lb_count(mdc_gpt2 *m, const moe_state *q) {
    int E = m->cfg.E, k = m->cfg.topk;
    for (int t = 0; t < q->n; t++) {
        int ch[MDC_GPT2_MAX_TOPK];
        mdc_i_moe_top_k(q->probs + (size_t)t * E, E, k, ch);
        for (int r = 0; r < k; r++) m->moe.lb_cnt[ch[r]] += 1;
    }
    mdc_dev_kernel(m->dev, (double)k * q->n * E, 4.0 * q->n * E, MDC_PREC_FP32);
}

/* The block's terms of the objective: per token tokens x sum_i w_i p_i (a float times an integer:
 * exact in a double, so exactly in the exact sum). */
mdc_status mdc_i_moe_lb_grad(mdc_gpt2 *m, const moe_state *q) {
    if (!m->moe.lb_ready)
        return mdc_fail(MDC_ERR_INVALID,
                        "router_aux_loss_coef %g: transformers' aux loss needs the global batch's counts first "
                        "(a training step, mdc_step_grads, counts them)",
                        m->cfg.lb_coef);
    if (m->moe.counting) return MDC_OK;
    int E = m->cfg.E;
    double sum = 0;
    for (int t = 0; t < q->n; t++) {
        const float *p = q->probs + (size_t)t * E;
        float dot = 0;
        for (int i = 0; i < E; i++) dot += m->moe.lb_w[i] * p[i];
        double term = (double)dot * m->moe.lb_tokens;
        sum += term;
        mdc_exact_add_f64(&m->moe.xloss, term);
    }
    m->moe.st.lb_sum += sum;
    mdc_dev_kernel(m->dev, 2.0 * q->n * E, 4.0 * q->n * E, MDC_PREC_FP32);
    return MDC_OK;
}
