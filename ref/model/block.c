/* The block API of the GPT-2 model (include/minidc/model.h): the embedding, block and head
 * forward and the head's backward; block backward in ref/model/block_backward.c, activation sets in
 * ref/model/acts.c.
 *
 * One block on this rank (x the residual stream, (B, T/t, C) with SP, else (B, T, C)):
 *   x2 = x + dropout(g(attention(f(LN1(x)) Wqkv + bqkv) Wo) + bo)
 *   x' = x2 + mlp(LN2(x2)), the dense mlp dropout(g(gelu(f(.) Wfc + bfc) Wp) + bp)
 * written in the layers of ref/model/layers.h: col_linear applies f (identity; with SP the
 * all-gather of the sequence) before its product, row_linear reduces its partial sums by g (an
 * all-reduce; with SP a reduce-scatter) and adds the bias once and the residual. How each layer
 * runs (serial, tensor parallel, exact, context parallel) was chosen when the model was set up.
 * Dropout (mdc_gpt2_set_dropout): on the attention probabilities and on both residual branches,
 * with masks keyed by global indices (kernels/dropout.c), so every mesh drops what serial drops. */
#include "model_internal.h"

void mdc_i_block_of(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, mdc_i_block *b) {
    const mdc_gpt2_config *c = &m->cfg;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    /* exact mode's contraction blocks: one head; the MLP's mdc_i_contract_block; wt: the weights are [out, in] */
    int head = s.d, mlp = mdc_i_contract_block(c, mdc_i_ffn(c)), wt = mdc_i_family(c);
#define GL(k) mdc_i_gl(c, l, k)
    b->ln1 = (mdc_i_norm){GL(LN1W), GL(LN1B), lact(a, a->lay.ln1_mean, l), lact(a, a->lay.ln1_rstd, l)};
    b->ln2 = (mdc_i_norm){GL(LN2W), GL(LN2B), lact(a, a->lay.ln2_mean, l), lact(a, a->lay.ln2_rstd, l)};
    b->qkv = (mdc_i_linear){l, GL(QKVW),     GL(QKVB),     s.C, s.QKVl, head,
                            0, MDC_I_DS_LN1, MDC_I_DS_QKV, -1,  wt,     mdc_i_kv_copy(m) ? s.Cl : 0};
    b->attp = (mdc_i_linear){l, GL(ATTPW), GL(ATTPB), s.Cl, s.C, head, 1, MDC_I_DS_ATTP, -1, MDC_DROP_ATTN_OUT, wt, 0};
    b->fc = (mdc_i_linear){l, GL(FCW), GL(FCB), s.C, s.FCl, mlp, 0, MDC_I_DS_LN2, wt ? -1 : MDC_I_DS_FC, -1, wt, 0};
    b->fcp = (mdc_i_linear){l, GL(FCPW), GL(FCPB), s.Fl, s.C, mlp, 1, MDC_I_DS_MLPP, -1, MDC_DROP_MLP_OUT, wt, 0};
#undef GL
}

mdc_status mdc_gpt2_embed_forward(mdc_gpt2 *m, mdc_gpt2_acts *a) {
    if (!m->part.has_embed) return mdc_fail(MDC_ERR_INVALID, "embed_forward: this partition has no embedding");
    float *enc = buf(a, a->lay.encoded);
    UNIT_START(MDC_HOOK_PRE_FORWARD, 0);
    TRY(m->ops->embed_forward(m, a, enc)); /* tokens (and learned positions) */
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_round(m, enc, (size_t)s.nl * s.C);
    TAP(0, MDC_I_DS_EMBED, MDC_TAP_FWD, MDC_TAP_AT, enc);
    HOOK(MDC_HOOK_POST_FORWARD, 0);
    return MDC_OK;
}

/* Block l's forward into x3 (its kept output, or the work region's when recomputed). */
static mdc_status forward_body(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *x3) {
    const mdc_i_acts_layout *y = &a->lay;
    mdc_i_block b;
    mdc_i_block_of(m, a, l, &b);
    float *x = x_in(a, l), *ln1 = lact(a, y->ln1, l), *qkv = lact(a, y->qkv, l), *att = lact(a, y->att, l);
    float *o = lact(a, y->atty, l), *x2 = lact(a, y->res2, l), *ln2 = lact(a, y->ln2, l);
    TAP(1 + l, MDC_I_DS_IN, MDC_TAP_FWD, MDC_TAP_AT, x);
    m->norm->forward(m, a, &b.ln1, ln1, x);        /* ln1 = LN1(x) */
    TRY(mdc_i_col_linear(m, a, &b.qkv, qkv, ln1)); /* qkv = f(ln1) Wqkv + bqkv */
    TRY(mdc_i_qk_norm(m, a, l, qkv));              /* Qwen3: q, k normalized per head */
    TRY(mdc_i_rotate(m, a, l, qkv));               /* rotary positions: q, k turned */
    TRY(mdc_i_attend(m, a, l, o, att, qkv));       /* o = attention(qkv) */
    TAP(1 + l, MDC_I_DS_Y, MDC_TAP_FWD, MDC_TAP_AT, o);
    TRY(mdc_i_row_linear(m, a, &b.attp, x2, x, o)); /* x2 = x + dropout(g(o Wo) + bo) */
    TAP(1 + l, MDC_I_DS_RES2, MDC_TAP_FWD, MDC_TAP_AT, x2);
    m->norm->forward(m, a, &b.ln2, ln2, x2);                /* ln2 = LN2(x2) */
    TRY(mdc_i_mlp_of(m, l)->forward(m, a, l, x3, x2, ln2)); /* x' = x2 + mlp(ln2) */
    TAP(1 + l, MDC_I_DS_OUT, MDC_TAP_FWD, MDC_TAP_AT, x3);
    return MDC_OK;
}

mdc_status mdc_gpt2_block_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l) {
    if (l < a->lo || l >= a->hi)
        return mdc_fail(MDC_ERR_INVALID, "block_forward: layer %d is not in the activation set's chunk [%d, %d)", l,
                        a->lo, a->hi);
    UNIT_START(MDC_HOOK_PRE_FORWARD, 1 + l);
    TRY(forward_body(m, a, l, lact(a, a->lay.res3, l)));
    if (m->rc.mode == MDC_RECOMPUTE_FULL) mdc_i_moe_free(a, l); /* the routed rows too are recomputed */
    HOOK(MDC_HOOK_POST_FORWARD, 1 + l);
    return MDC_OK;
}

/* A recomputed forward (attention alone with scratch, else block l's): no taps, no statistics. */
static mdc_status recompute(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *scratch) {
    mdc_status (*tap)(mdc_gpt2 *, mdc_gpt2_acts *, int, int, int, int, const float *) = m->tap;
    m->tap = NULL, m->rc.active = 1;
    mdc_status st = scratch ? mdc_i_attend(m, a, l, scratch, lact(a, a->lay.att, l), lact(a, a->lay.qkv, l))
                            : forward_body(m, a, l, lact(a, a->lay.rcout, l));
    m->tap = tap, m->rc.active = 0;
    return st;
}
mdc_status mdc_i_recompute_block(mdc_gpt2 *m, mdc_gpt2_acts *a, int l) { return recompute(m, a, l, NULL); }
mdc_status mdc_i_recompute_attention(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *scratch) {
    return recompute(m, a, l, scratch);
}

static mdc_i_norm lnf_of(mdc_gpt2 *m, mdc_gpt2_acts *a) {
    return (mdc_i_norm){mdc_i_glnf(&m->cfg, 0), mdc_i_glnf(&m->cfg, 1), buf(a, a->lay.lnf_mean),
                        buf(a, a->lay.lnf_rstd)};
}

mdc_status mdc_gpt2_head_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, double *loss_sum) {
    if (!a->head) return mdc_fail(MDC_ERR_INVALID, "head_forward: this partition or chunk has no head");
    int unit = m->cfg.L + 1;
    mdc_i_norm lnf = lnf_of(m, a);
    float *ln = buf(a, a->lay.lnf), *logits = buf(a, a->lay.logits);
    const float *in;
    double sum = 0;
    UNIT_START(MDC_HOOK_PRE_FORWARD, unit);
    m->norm->forward(m, a, &lnf, ln, mdc_gpt2_acts_residual(a)); /* ln = LN_f(x) */
    TRY(mdc_i_gather_tapped(m, a, unit, MDC_I_DS_LNF, ln, &in)); /* f */
    m->ops->lm_head(m, a, logits, in);                           /* logits = f(ln) wte^T */
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_round(m, logits, (size_t)s.n * s.Vl);
    TAP(unit, MDC_I_DS_LOGITS, MDC_TAP_FWD, MDC_TAP_AT, logits);
    if (a->have_targets) {
        TRY(m->ops->loss(m, a, &sum)); /* cross-entropy (vocabulary-parallel over tp) */
        TAP(unit, MDC_I_DS_LOSSES, MDC_TAP_FWD, MDC_TAP_AT, buf(a, a->lay.losses));
    }
    if (loss_sum) *loss_sum = sum;
    HOOK(MDC_HOOK_POST_FORWARD, unit);
    return MDC_OK;
}

mdc_status mdc_gpt2_head_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, float dloss) {
    if (!a->head) return mdc_fail(MDC_ERR_INVALID, "head_backward: this partition or chunk has no head");
    if (!a->have_targets) return mdc_fail(MDC_ERR_INVALID, "backward: the last forward had no targets");
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int unit = m->cfg.L + 1;
    mdc_i_norm lnf = lnf_of(m, a);
    float *dln = buf(a, a->lay.dln), *dres = buf(a, a->lay.dres);
    const float *in;
    UNIT_START(MDC_HOOK_PRE_BACKWARD, unit);
    TRY(mdc_i_gather(m, a, buf(a, a->lay.lnf), &in)); /* SP: gathered again, as the blocks' inputs */
    TRY(m->ops->head_backward(m, a, dloss, in, dln)); /* dln = f^T(dlogits wte); wte's gradient */
    mdc_i_round(m, dln, (size_t)s.nl * s.C);
    TAP(unit, MDC_I_DS_LNF, MDC_TAP_BWD, MDC_TAP_POST, dln);
    if (!mdc_host_dry()) memset(dres, 0, (size_t)s.nl * s.C * sizeof(float));
    m->norm->backward_all(m, a, &lnf, dres, dln, mdc_gpt2_acts_residual(a)); /* dx = LN_f^T(dln) */
    a->have_targets = 0;                                                     /* the logits are gone */
    UNIT_GRADS_DONE(unit);
    return MDC_OK;
}
