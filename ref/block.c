/* The block API of the GPT-2 model (include/minidc/model.h): the embedding, block and head
 * forward and the head's backward; block backward in ref/block_backward.c, activation sets in
 * ref/acts.c.
 *
 * One layer on this rank (x the residual stream, (B, T/t, C) with SP, else (B, T, C)):
 *   ln1 = LN(x); h = f(ln1); qkv = h @ Wqkv + bqkv         (column-parallel: the heads of this rank)
 *   y = attention(qkv); x2 = x + bo + g(y @ Wo)            (row-parallel: partial sums reduced by g)
 *   ln2 = LN(x2); h = f(ln2); u = gelu(h @ Wfc + bfc)      (column-parallel)
 *   x' = x2 + bp + g(u @ Wp)                               (row-parallel)
 * f and g are the model's communication points (mdc_gpt2_comm); without them (the serial model)
 * the output projections run fused with the residual add, as the specification always has.
 * The bias and the residual join once, after the reduction, never t times.
 * Dropout (mdc_gpt2_set_dropout): on the attention probabilities and on both residual branches,
 * with masks keyed by global indices (kernels/dropout.c), so every mesh drops what serial drops. */
#include <math.h>
#include <stdio.h>

#include "minidc/numerics.h"
#include "model_internal.h"

/* out = res + dropout(inp @ W + b) for a row-parallel linear (dropout of `site`): fused
 * without communication or dropout, else the product reduced by g, then the bias once and the
 * residual (through the dropout when it is on). */
static mdc_status row_parallel(mdc_gpt2 *m, mdc_gpt2_acts *a, float *out, const float *res, const float *inp,
                               const float *W, const float *b, int K, int kblk, int l, int site) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_dropout dd;
    const mdc_dropout *drop = drop_of(m, a, l, site, &dd);
    int ds = site == MDC_DROP_ATTN_OUT ? MDC_I_DS_ATTP : MDC_I_DS_MLPP;
    if (m->x.blk) { /* exact: the product in contraction blocks, summed exactly over them and tp */
        float *red = buf(a, a->lay.partial);
        mdc_i_x_begin(m, a);
        mdc_x_contract(m->dev, &m->x.act, inp, K, W, s.C, 0, s.n, K, s.C, kblk);
        TRY(mdc_i_x_reduce(m, a, red));
        DUMP(1 + l, 0, ds, 0, 0, MDC_I_ROWS, MDC_I_W_C, red);
        if (!drop) mdc_residual_bias_forward(m->dev, out, res, red, b, s.nl, s.C);
        else {
            mdc_bias_forward(m->dev, red, b, s.nl, s.C);
            mdc_dropout_residual_forward(m->dev, out, res, red, drop, a->B, s.Tl, s.C);
        }
        return MDC_OK;
    }
    if (!m->comm && m->dump.tf) TRY(mdc_i_dump_product(m, a, l, ds, inp, W, K)); /* fused, or with the bias */
    if (!m->comm && !drop) {
        mdc_matmul_residual_forward(m->dev, out, res, inp, W, b, s.n, K, s.C);
        return MDC_OK;
    }
    float *part = buf(a, a->lay.partial), *red = m->part.sp ? buf(a, a->lay.full) : part;
    mdc_matmul_forward(m->dev, part, inp, W, m->comm ? NULL : b, s.n, K, s.C);
    if (m->comm) {
        DUMP(1 + l, 0, ds, 1, 1, MDC_I_SEQ, MDC_I_W_C, part);
        TRY(m->comm->g_forward(m->comm->ctx, red, part, a->B, a->T, s.C));
        DUMP(1 + l, 0, ds, 0, 0, MDC_I_ROWS, MDC_I_W_C, red);
    }
    if (!drop) {
        mdc_residual_bias_forward(m->dev, out, res, red, b, s.nl, s.C);
        return MDC_OK;
    }
    if (m->comm) mdc_bias_forward(m->dev, red, b, s.nl, s.C);
    mdc_dropout_residual_forward(m->dev, out, res, red, drop, a->B, s.Tl, s.C);
    return MDC_OK;
}

/* The input of a column-parallel linear: with SP the local rows before the all-gather, then
 * the gathered sequence; without, the rows themselves. */
static mdc_status dump_f(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, const float *local, const float *in) {
    if (m->part.sp) DUMP(unit, 0, site, 1, 0, MDC_I_ROWS, MDC_I_W_C, local);
    DUMP(unit, 0, site, 0, 0, m->part.sp ? MDC_I_SEQ : MDC_I_ROWS, MDC_I_W_C, m->part.sp ? in : local);
    return MDC_OK;
}

mdc_status mdc_gpt2_embed_forward(mdc_gpt2 *m, mdc_gpt2_acts *a) {
    if (!m->part.has_embed) return mdc_fail(MDC_ERR_INVALID, "embed_forward: this partition has no embedding");
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *enc = buf(a, a->lay.encoded);
    HOOK(MDC_HOOK_PRE_FORWARD, 0);
    if (!m->comm && !m->cp) {
        mdc_encoder_forward(m->dev, enc, a->inputs, P(m, 0), P(m, 1), a->B, a->T, s.C);
    } else if (!m->comm) { /* context parallel: the rows, then the chunks' global positions */
        mdc_embed_shard_forward(m->dev, enc, a->inputs, P(m, 0), 0, s.Vl, s.n, s.C);
        mdc_embed_positions(m->dev, enc, enc, P(m, 1), a->B, s.Tl, m->cp->pos, 0, s.C);
    } else { /* vocab-parallel: this shard's rows, summed over tp (g), then the positions */
        float *part = buf(a, a->lay.partial), *red = m->part.sp ? enc : part;
        mdc_embed_shard_forward(m->dev, part, a->inputs, P(m, 0), m->part.tp_rank * s.Vl, s.Vl, s.n, s.C);
        TRY(m->comm->g_forward(m->comm->ctx, red, part, a->B, a->T, s.C));
        int pos0 = m->part.sp ? m->part.tp_rank * s.Tl : 0;
        mdc_embed_positions(m->dev, enc, red, P(m, 1), a->B, s.Tl, m->cp ? m->cp->pos + pos0 : NULL, pos0, s.C);
    }
    DUMP(0, 0, MDC_I_DS_EMBED, 0, 0, MDC_I_ROWS, MDC_I_W_C, enc);
    HOOK(MDC_HOOK_POST_FORWARD, 0);
    return MDC_OK;
}

mdc_status mdc_gpt2_block_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l) {
    if (l < a->lo || l >= a->hi)
        return mdc_fail(MDC_ERR_INVALID, "block_forward: layer %d is not in the activation set's chunk [%d, %d)", l, a->lo,
                        a->hi);
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    float *x = x_in(a, l), *ln1 = lact(a, y->ln1, l), *qkv = lact(a, y->qkv, l), *atty = lact(a, y->atty, l);
    float *res2 = lact(a, y->res2, l), *ln2 = lact(a, y->ln2, l), *fch = lact(a, y->fch, l);
    float *fchg = lact(a, y->fchg, l), *res3 = lact(a, y->res3, l);
    const float *in;
    HOOK(MDC_HOOK_PRE_FORWARD, 1 + l);
    DUMP(1 + l, 0, MDC_I_DS_IN, 0, 0, MDC_I_ROWS, MDC_I_W_C, x);
    mdc_layernorm_forward(d, ln1, lact(a, y->ln1_mean, l), lact(a, y->ln1_rstd, l), x, P(m, mdc_i_gl(&m->cfg, l, LN1W)),
                          P(m, mdc_i_gl(&m->cfg, l, LN1B)), s.nl, s.C);
    TRY(f_in(m, a, ln1, &in));
    TRY(dump_f(m, a, 1 + l, MDC_I_DS_LN1, ln1, in));
    mm_forward(m, qkv, in, P(m, mdc_i_gl(&m->cfg, l, QKVW)), P(m, mdc_i_gl(&m->cfg, l, QKVB)), s.n, s.C, 3 * s.Cl);
    DUMP(1 + l, 0, MDC_I_DS_QKV, 0, 0, MDC_I_SEQ, MDC_I_W_QKV, qkv);
    mdc_dropout dd;
    const mdc_dropout *drop = drop_of(m, a, l, MDC_DROP_ATTN, &dd);
    if (m->cp) TRY(m->cp->forward(m->cp->ctx, d, atty, lact(a, y->att, l), qkv, drop, a->B, s.Cl, s.Hl));
    else if (m->x.blk) TRY(mdc_i_x_attention_forward(m, a, atty, lact(a, y->att, l), qkv, drop));
    else if (y->tiled) mdc_attention_forward_tiled_drop(d, atty, lact(a, y->att, l), qkv, drop, a->B, a->T, s.Cl, s.Hl);
    else mdc_attention_forward_drop(d, atty, lact(a, y->att, l), qkv, drop, a->B, a->T, s.Cl, s.Hl);
    DUMP(1 + l, 0, MDC_I_DS_Y, 0, 0, MDC_I_SEQ, MDC_I_W_HEADS, atty);
    TRY(row_parallel(m, a, res2, x, atty, P(m, mdc_i_gl(&m->cfg, l, ATTPW)), P(m, mdc_i_gl(&m->cfg, l, ATTPB)), s.Cl, x_head(m), l,
                     MDC_DROP_ATTN_OUT));
    DUMP(1 + l, 0, MDC_I_DS_RES2, 0, 0, MDC_I_ROWS, MDC_I_W_C, res2);
    mdc_layernorm_forward(d, ln2, lact(a, y->ln2_mean, l), lact(a, y->ln2_rstd, l), res2, P(m, mdc_i_gl(&m->cfg, l, LN2W)),
                          P(m, mdc_i_gl(&m->cfg, l, LN2B)), s.nl, s.C);
    if (mdc_i_is_moe(&m->cfg, l)) { /* the experts on this rank's tokens; the residual (through dropout) */
        float *y2 = buf(a, y->dres); /* the backward's work space, free until then */
        DUMP(1 + l, 0, MDC_I_DS_LN2, 0, 0, MDC_I_ROWS, MDC_I_W_C, ln2);
        TRY(mdc_i_moe_forward(m, a, l, ln2, y2));
        DUMP(1 + l, 0, MDC_I_DS_MOE, 0, 0, MDC_I_ROWS, MDC_I_W_C, y2);
        if (!drop_of(m, a, l, MDC_DROP_MLP_OUT, &dd)) mdc_residual_forward(d, res3, res2, y2, (size_t)s.nl * s.C);
        else mdc_dropout_residual_forward(d, res3, res2, y2, &dd, a->B, s.Tl, s.C);
        DUMP(1 + l, 0, MDC_I_DS_OUT, 0, 0, MDC_I_ROWS, MDC_I_W_C, res3);
        HOOK(MDC_HOOK_POST_FORWARD, 1 + l);
        return MDC_OK;
    }
    TRY(f_in(m, a, ln2, &in));
    TRY(dump_f(m, a, 1 + l, MDC_I_DS_LN2, ln2, in));
    mm_forward(m, fch, in, P(m, mdc_i_gl(&m->cfg, l, FCW)), P(m, mdc_i_gl(&m->cfg, l, FCB)), s.n, s.C, s.Fl);
    DUMP(1 + l, 0, MDC_I_DS_FC, 0, 0, MDC_I_SEQ, MDC_I_W_FC, fch);
    mdc_gelu_forward(d, fchg, fch, (size_t)s.n * s.Fl);
    DUMP(1 + l, 0, MDC_I_DS_GELU, 0, 0, MDC_I_SEQ, MDC_I_W_FC, fchg);
    TRY(row_parallel(m, a, res3, res2, fchg, P(m, mdc_i_gl(&m->cfg, l, FCPW)), P(m, mdc_i_gl(&m->cfg, l, FCPB)), s.Fl, x_mlp(m), l,
                     MDC_DROP_MLP_OUT));
    DUMP(1 + l, 0, MDC_I_DS_OUT, 0, 0, MDC_I_ROWS, MDC_I_W_C, res3);
    HOOK(MDC_HOOK_POST_FORWARD, 1 + l);
    return MDC_OK;
}

/* The loss in exact mode, vocab-parallel (serial: one shard): the max over tp, the sum-exp in
 * vocabulary blocks into one accumulator per position summed over tp exactly, and the target
 * logit (one shard holds it, so its sum over tp is exact in any order). */
static mdc_status exact_loss(mdc_gpt2 *m, mdc_gpt2_acts *a) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const mdc_i_acts_layout *y = &a->lay;
    int n = s.n, lo = m->part.tp_rank * s.Vl, valid = m->cfg.V - lo;
    valid = valid < 0 ? 0 : valid > s.Vl ? s.Vl : valid;
    float *logits = buf(a, y->logits), *mx = buf(a, y->vstat), *losses = buf(a, y->losses), *lse = buf(a, y->lse);
    mdc_vocab_shard_max(m->dev, mx, logits, n, s.Vl, valid);
    if (m->comm) TRY(m->comm->vocab(m->comm->ctx, mx, n, 1));
    mdc_x_sumexp(m->dev, m->x.se, logits, s.Vl, mx, n, valid, MDC_EXACT_VOCAB_BLOCK);
    mdc_vocab_shard_target(m->dev, losses, logits, a->targets, lo, n, s.Vl, valid);
    if (m->comm) {
        TRY(m->comm->x_vocab(m->comm->ctx, m->x.se, n));
        TRY(m->comm->vocab(m->comm->ctx, losses, n, 0));
    }
    for (int i = 0; i < n; i++) {
        lse[i] = mx[i] + mdc_logf(mdc_exact_to_f32(&m->x.se[i]));
        losses[i] = lse[i] - losses[i];
    }
    mdc_dev_kernel(m->dev, 3.0 * n, 16.0 * n, MDC_PREC_FP32);
    mdc_exact_add_f32s(&m->x.loss, losses, (size_t)n);
    return MDC_OK;
}

mdc_status mdc_gpt2_head_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, double *loss_sum) {
    if (!a->head) return mdc_fail(MDC_ERR_INVALID, "head_forward: this partition or chunk has no head");
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    const mdc_gpt2_config *c = &m->cfg;
    float *lnf = buf(a, y->lnf), *logits = buf(a, y->logits), *losses = buf(a, y->losses), *lse = buf(a, y->lse);
    const float *in;
    HOOK(MDC_HOOK_PRE_FORWARD, c->L + 1);
    mdc_layernorm_forward(d, lnf, buf(a, y->lnf_mean), buf(a, y->lnf_rstd), mdc_gpt2_acts_residual(a),
                          P(m, mdc_i_glnf(c, 0)), P(m, mdc_i_glnf(c, 1)), s.nl, s.C);
    TRY(f_in(m, a, lnf, &in));
    TRY(dump_f(m, a, c->L + 1, MDC_I_DS_LNF, lnf, in));
    if (m->x.blk) mdc_x_matmul(d, logits, in, s.C, P(m, 0), s.C, 1, NULL, s.n, s.C, s.Vl);
    else mdc_lmhead_forward(d, logits, in, P(m, 0), s.n, s.C, s.Vl);
    DUMP(c->L + 1, 0, MDC_I_DS_LOGITS, 0, 0, MDC_I_SEQ, MDC_I_W_V, logits);
    double sum = 0;
    if (a->have_targets && m->x.blk) {
        TRY(exact_loss(m, a));
        for (int i = 0; i < s.n; i++) sum += losses[i];
    } else if (a->have_targets) {
        if (!m->comm) {
            mdc_crossentropy_forward(d, losses, lse, logits, a->targets, s.n, c->V, c->Vp);
        } else { /* vocab-parallel: max, sum-exp, target logit over tp; the logits stay sharded */
            int lo = m->part.tp_rank * s.Vl, valid = c->V - lo;
            valid = valid < 0 ? 0 : valid > s.Vl ? s.Vl : valid;
            float *mx = buf(a, y->vstat), *se = mx + s.n;
            mdc_vocab_shard_max(d, mx, logits, s.n, s.Vl, valid);
            TRY(m->comm->vocab(m->comm->ctx, mx, s.n, 1));
            mdc_vocab_shard_sumexp(d, se, logits, mx, s.n, s.Vl, valid);
            TRY(m->comm->vocab(m->comm->ctx, se, s.n, 0));
            mdc_vocab_shard_target(d, losses, logits, a->targets, lo, s.n, s.Vl, valid);
            TRY(m->comm->vocab(m->comm->ctx, losses, s.n, 0));
            for (int i = 0; i < s.n; i++) {
                lse[i] = mx[i] + mdc_logf(se[i]);
                losses[i] = lse[i] - losses[i];
            }
            mdc_dev_kernel(d, 3.0 * s.n, 16.0 * s.n, MDC_PREC_FP32);
        }
        for (int i = 0; i < s.n; i++) sum += losses[i];
    }
    if (loss_sum) *loss_sum = sum;
    if (a->have_targets) DUMP(c->L + 1, 0, MDC_I_DS_LOSSES, 0, 0, MDC_I_SEQ, MDC_I_W_NONE, losses);
    HOOK(MDC_HOOK_POST_FORWARD, c->L + 1);
    return MDC_OK;
}

mdc_status mdc_gpt2_head_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, float dloss) {
    if (!a->head) return mdc_fail(MDC_ERR_INVALID, "head_backward: this partition or chunk has no head");
    if (!a->have_targets) return mdc_fail(MDC_ERR_INVALID, "backward: the last forward had no targets");
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    const mdc_gpt2_config *c = &m->cfg;
    float *logits = buf(a, y->logits), *dln = buf(a, y->dln), *dres = buf(a, y->dres);
    const float *in;
    HOOK(MDC_HOOK_PRE_BACKWARD, c->L + 1);
    TRY(f_in(m, a, buf(a, y->lnf), &in)); /* SP: gathered again, as the blocks' inputs */
    if (!m->comm && !m->x.blk) {
        mdc_crossentropy_backward(d, logits, logits, buf(a, y->lse), a->targets, dloss, s.n, c->V, c->Vp);
    } else {
        int lo = m->part.tp_rank * s.Vl, valid = c->V - lo;
        valid = valid < 0 ? 0 : valid > s.Vl ? s.Vl : valid;
        mdc_crossentropy_backward_shard(d, logits, logits, buf(a, y->lse), a->targets, lo, dloss, s.n, s.Vl, valid);
    }
    DUMP(c->L + 1, 1, MDC_I_DS_LOGITS, 0, 0, MDC_I_SEQ, MDC_I_W_V, logits);
    /* dlnf: the LM head is column-parallel over the vocabulary, so its input gradient is a
     * partial sum over the shards: f's backward reduces it */
    if (m->x.blk) { /* exact: dlnf in vocabulary blocks, dwte and ln_f's gradients in token blocks */
        mdc_i_x_begin(m, a);
        mdc_x_contract(d, &m->x.act, logits, s.Vl, P(m, 0), s.C, 0, s.n, s.Vl, s.C, MDC_EXACT_VOCAB_BLOCK);
        TRY(mdc_i_x_reduce(m, a, dln));
        DUMP(c->L + 1, 1, MDC_I_DS_LNF, 0, 0, MDC_I_ROWS, MDC_I_W_C, dln);
        mdc_x_wgrad(d, &m->x.g, mdc_i_xoff(m, 0), logits, s.Vl, in, s.C, s.n, s.Vl, s.C, m->x.blk);
        memset(dres, 0, (size_t)s.nl * s.C * sizeof(float));
        mdc_layernorm_backward(d, dres, NULL, NULL, dln, mdc_gpt2_acts_residual(a), P(m, mdc_i_glnf(c, 0)),
                               buf(a, y->lnf_mean), buf(a, y->lnf_rstd), s.nl, s.C);
        mdc_x_layernorm_wgrad(d, &m->x.g, mdc_i_xoff(m, mdc_i_glnf(c, 0)), mdc_i_xoff(m, mdc_i_glnf(c, 1)), dln,
                              mdc_gpt2_acts_residual(a), buf(a, y->lnf_mean), buf(a, y->lnf_rstd), s.nl, s.C, m->x.blk);
        a->have_targets = 0;
        HOOK(MDC_HOOK_POST_BACKWARD, c->L + 1);
        return MDC_OK;
    }
    float *dpart = m->part.sp ? buf(a, y->dfull) : dln;
    memset(dpart, 0, (size_t)s.n * s.C * sizeof(float));
    mdc_lmhead_backward(d, dpart, G(m, 0), logits, in, P(m, 0), s.n, s.C, s.Vl);
    if (m->comm) {
        DUMP(c->L + 1, 1, MDC_I_DS_LNF, 1, 1, MDC_I_SEQ, MDC_I_W_C, dpart);
        TRY(m->comm->f_backward(m->comm->ctx, dln, dpart, a->B, a->T, s.C));
    }
    DUMP(c->L + 1, 1, MDC_I_DS_LNF, 0, 0, MDC_I_ROWS, MDC_I_W_C, dln);
    memset(dres, 0, (size_t)s.nl * s.C * sizeof(float));
    mdc_layernorm_backward(d, dres, G(m, mdc_i_glnf(c, 0)), G(m, mdc_i_glnf(c, 1)), dln, mdc_gpt2_acts_residual(a),
                           P(m, mdc_i_glnf(c, 0)), buf(a, y->lnf_mean), buf(a, y->lnf_rstd), s.nl, s.C);
    a->have_targets = 0; /* the logits are gone */
    HOOK(MDC_HOOK_POST_BACKWARD, c->L + 1);
    return MDC_OK;
}

