/* Block backward (include/minidc/model.h): the input-gradient part B and the weight-gradient
 * part W of each block, run together or apart (zero-bubble schedules), and the embedding's
 * backward. B and W are separate kernel calls; with both requested, W runs as each of its inputs
 * is ready, with B alone they are kept in the activation set until W. Each weight gradient is
 * one call on the same inputs either way, so the bits do not depend on the split. The forward
 * and the head: ref/model/block.c; the layers: ref/model/layers.h. */
#include <stdio.h>

#include "model_internal.h"

/* The stash of layer l for B without W: every weight part's inputs, sized for the set's
 * creation batch. Not charged as kernel work: a framework keeps these tensors alive instead
 * of copying them; the memory is charged (MDC_MEM_ACTS). The row-parallel layers' inputs are
 * the saved activations themselves. */
static mdc_status stash_ptrs(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, mdc_i_wslot *w) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->maxB, a->maxT);
    size_t n = (size_t)s.n, nl = (size_t)s.nl, C = (size_t)s.C;
    const float **f[10] = {&w[MDC_W_FCP].dout, &w[MDC_W_FCP].drows, &w[MDC_W_FC].dout,    &w[MDC_W_FC].in,
                           &w[MDC_W_LN2].dout, &w[MDC_W_ATTP].dout, &w[MDC_W_ATTP].drows, &w[MDC_W_QKV].dout,
                           &w[MDC_W_QKV].in,   &w[MDC_W_LN1].dout};
    size_t sz[10] = {n * C, nl * C, n * s.FCl, n * C, nl * C, n * C, nl * C, n * s.QKVl, n * C, nl * C};
    int i = l - a->lo;
    if (!a->wstash[i]) {
        size_t tot = 0;
        for (int k = 0; k < 10; k++) tot += sz[k];
        char name[40];
        snprintf(name, sizeof name, "wgrad stash, layer %d", l);
        TRY(mdc_dev_alloc(a->dev, (void **)&a->wstash[i], tot * sizeof(float), MDC_MEM_ACTS, name));
    }
    memset(w, 0, sizeof *w * MDC_W_N);
    float *p = a->wstash[i];
    for (int k = 0; k < 10; k++) *f[k] = p, p += sz[k];
    w[MDC_W_FCP].in = lact(a, a->lay.fchg, l);
    w[MDC_W_ATTP].in = lact(a, a->lay.atty, l);
    return MDC_OK;
}

/* Full recomputation with B and W apart: the work region B recomputed holds W's inputs (the
 * norms' statistics, the row-parallel layers' inputs), which the next block's recomputation
 * overwrites; B keeps them (save 1) and W puts them back (save 0). Memory, not kernel work, as
 * the stash: a framework keeps these tensors alive. */
static mdc_status work_keep(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int save) {
    if (m->rc.mode != MDC_RECOMPUTE_FULL || !a->lay.work_rc) return MDC_OK;
    int i = l - a->lo;
    size_t bytes = a->lay.work_rc * sizeof(float);
    if (save) {
        char name[64];
        snprintf(name, sizeof name, "recomputed activations kept for W, layer %d", l);
        if (!a->wwork[i]) TRY(mdc_dev_alloc(a->dev, (void **)&a->wwork[i], bytes, MDC_MEM_ACTS, name));
        memcpy(a->wwork[i], m->rc.work, bytes);
        return MDC_OK;
    }
    memcpy(m->rc.work, a->wwork[i], bytes);
    mdc_dev_free(a->dev, a->wwork[i]);
    a->wwork[i] = NULL;
    return MDC_OK;
}

/* B of block l: dres (the gradient of its output) becomes the gradient of its input. */
static mdc_status block_backward_input(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, mdc_i_wslot *keep) {
    const mdc_i_acts_layout *y = &a->lay;
    mdc_i_block b;
    mdc_i_block_of(m, a, l, &b);
    float *dres = buf(a, y->dres), *dln = buf(a, y->dln), *dy = buf(a, y->datty), *dqkv = buf(a, y->dbig);
    float *x = x_in(a, l), *x2 = lact(a, y->res2, l), *o = lact(a, y->atty, l), *qkv = lact(a, y->qkv, l);
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
#define KEEP(k) (keep ? &keep[k] : NULL)
    TAP(1 + l, MDC_I_DS_OUT, MDC_TAP_BWD, MDC_TAP_AT, dres);
    TRY(mdc_i_mlp_of(m, l)->backward(m, a, l, dln, dres, keep));     /* dln = mlp^T(dres) */
    m->norm->backward(m, a, &b.ln2, dres, dln, x2, KEEP(MDC_W_LN2)); /* dx2 = dres + LN2^T(dln) */
    TAP(1 + l, MDC_I_DS_RES2, MDC_TAP_BWD, MDC_TAP_AT, dres);
    TRY(mdc_i_row_linear_backward(m, a, &b.attp, dy, dres, o, KEEP(MDC_W_ATTP))); /* do = g^T(dx2) Wo^T */
    TAP(1 + l, MDC_I_DS_Y, MDC_TAP_BWD, MDC_TAP_AT, dy);
    if (m->rc.mode == MDC_RECOMPUTE_SELECTIVE && (y->att & MDC_I_WORK))
        TRY(mdc_i_recompute_attention(m, a, l, dqkv)); /* the probabilities again (the output into scratch) */
    if (!mdc_host_dry()) memset(dqkv, 0, (size_t)s.n * s.QKVl * sizeof(float));
    TRY(mdc_i_attend_backward(m, a, l, dqkv, dy, o, qkv, lact(a, y->att, l))); /* dqkv = attention^T(do) */
    TRY(mdc_i_unrotate(m, a, l, dqkv));                      /* rotary positions: the gradients of q, k turned back */
    TRY(mdc_i_qk_norm_backward(m, a, l, dqkv));              /* Qwen3: through q_norm, k_norm */
    TAP(1 + l, MDC_I_DS_QKV, MDC_TAP_BWD, MDC_TAP_AT, dqkv); /* the projection's output gradient */
    TRY(mdc_i_col_linear_backward(m, a, &b.qkv, dln, dqkv, lact(a, y->ln1, l), KEEP(MDC_W_QKV))); /* f^T(dqkv Wqkv^T) */
    m->norm->backward(m, a, &b.ln1, dres, dln, x, KEEP(MDC_W_LN1)); /* dx = dx2 + LN1^T(dln) */
    TAP(1 + l, MDC_I_DS_IN, MDC_TAP_BWD, MDC_TAP_AT, dres);
#undef KEEP
    return MDC_OK;
}

/* W of block l from the inputs B kept. */
static void block_backward_weights(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const mdc_i_wslot *keep) {
    mdc_i_block b;
    mdc_i_block_of(m, a, l, &b);
    mdc_i_mlp_of(m, l)->wgrad(m, a, l, keep);
    m->norm->wgrad(m, a, &b.ln2, keep[MDC_W_LN2].dout, lact(a, a->lay.res2, l));
    mdc_i_linear_wgrad(m, a, &b.attp, &keep[MDC_W_ATTP]);
    mdc_i_linear_wgrad(m, a, &b.qkv, &keep[MDC_W_QKV]);
    m->norm->wgrad(m, a, &b.ln1, keep[MDC_W_LN1].dout, x_in(a, l));
}

mdc_status mdc_gpt2_block_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int parts) {
    if (l < a->lo || l >= a->hi)
        return mdc_fail(MDC_ERR_INVALID, "block_backward: layer %d is not in the activation set's chunk [%d, %d)", l,
                        a->lo, a->hi);
    if (parts < MDC_BWD_INPUT || parts > MDC_BWD_BOTH)
        return mdc_fail(MDC_ERR_INVALID, "block_backward: parts %d (want MDC_BWD_INPUT, _WEIGHT or both)", parts);
    int i = l - a->lo;
    if ((parts & MDC_BWD_INPUT) && a->wpending[i])
        return mdc_fail(MDC_ERR_INVALID, "block_backward: layer %d: B again before its W", l);
    if (parts == MDC_BWD_WEIGHT && !a->wpending[i])
        return mdc_fail(MDC_ERR_INVALID, "block_backward: layer %d: W without its B", l);
    mdc_i_wslot keep[MDC_W_N];
    if (parts & MDC_BWD_INPUT) {
        UNIT_START(MDC_HOOK_PRE_BACKWARD, 1 + l);
        if (m->rc.mode == MDC_RECOMPUTE_FULL) TRY(mdc_i_recompute_block(m, a, l));
        if (parts == MDC_BWD_BOTH) TRY(block_backward_input(m, a, l, NULL));
        else {
            TRY(stash_ptrs(m, a, l, keep));
            TRY(block_backward_input(m, a, l, keep));
            TRY(work_keep(m, a, l, 1));
            a->wpending[i] = 1;
            return MDC_OK;
        }
    } else {
        TRY(stash_ptrs(m, a, l, keep));
        TRY(work_keep(m, a, l, 0));
        block_backward_weights(m, a, l, keep);
        a->wpending[i] = 0;
    }
    UNIT_GRADS_DONE(1 + l);
    return MDC_OK;
}

mdc_status mdc_gpt2_embed_backward(mdc_gpt2 *m, mdc_gpt2_acts *a) {
    if (!m->part.has_embed) return mdc_fail(MDC_ERR_INVALID, "embed_backward: this partition has no embedding");
    HOOK(MDC_HOOK_PRE_BACKWARD, 0);
    TRY(m->ops->embed_backward(m, a, buf(a, a->lay.dres)));
    UNIT_GRADS_DONE(0);
    return MDC_OK;
}
