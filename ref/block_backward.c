/* Block backward (include/minidc/model.h): the input-gradient part B and the weight-gradient
 * part W of each block, run together or apart (zero-bubble schedules), and the embedding's
 * backward. B and W are separate kernel calls; with both requested, W runs as each of its inputs
 * is ready, with B alone they are kept in the activation set until W. Each weight gradient is
 * one call on the same inputs either way, so the bits do not depend on the split. The forward
 * and the head: ref/block.c. */
#include <stdio.h>

#include "model_internal.h"

/* The gradient of a residual branch's output: dres itself, or through its dropout mask. */
static const float *branch_grad(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int site, const float *dres) {
    mdc_dropout dd;
    const mdc_dropout *drop = drop_of(m, a, l, site, &dd);
    if (!drop) return dres;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *dy = buf(a, a->lay.dmask);
    memset(dy, 0, (size_t)s.nl * s.C * sizeof(float));
    mdc_dropout_residual_backward(m->dev, dy, dres, drop, a->B, s.Tl, s.C);
    return dy;
}

/* What the weight gradients of one layer read besides the saved activations. */
enum { W_FCP, W_FC, W_LN2, W_ATTP, W_QKV, W_LN1, NW };
typedef struct {
    const float *d3, *dres3;  /* mlp c_proj: output gradient (B,T,C) and its local rows (bias) */
    const float *dfc, *in2;   /* c_fc: pre-GELU gradient (B,T,4C/t), its input (gathered with SP) */
    const float *dln2;        /* ln_2: its output gradient (local rows) */
    const float *d2, *dres2;  /* attn c_proj */
    const float *dqkv, *in1;  /* c_attn */
    const float *dln1;        /* ln_1 */
} wgrad_in;

/* Exact mode: the same gradients in token blocks, added into the exact sums. The biases of the
 * row-parallel layers from this rank's rows (all of them without SP). */
static void wgrad_exact(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int which, const wgrad_in *w) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    mdc_xsum *g = &m->x.g;
    int blk = m->x.blk;
#define XO(k) mdc_i_xoff(m, mdc_i_gl(&m->cfg, l, k))
    switch (which) {
    case W_FCP:
        mdc_x_wgrad(d, g, XO(FCPW), lact(a, y->fchg, l), s.Fl, w->d3, s.C, s.n, s.Fl, s.C, blk);
        mdc_x_colsum(d, g, XO(FCPB), w->dres3, s.C, s.nl, s.C, blk);
        break;
    case W_FC:
        mdc_x_wgrad(d, g, XO(FCW), w->in2, s.C, w->dfc, s.Fl, s.n, s.C, s.Fl, blk);
        mdc_x_colsum(d, g, XO(FCB), w->dfc, s.Fl, s.n, s.Fl, blk);
        break;
    case W_LN2:
        mdc_x_layernorm_wgrad(d, g, XO(LN2W), XO(LN2B), w->dln2, lact(a, y->res2, l), lact(a, y->ln2_mean, l),
                              lact(a, y->ln2_rstd, l), s.nl, s.C, blk);
        break;
    case W_ATTP:
        mdc_x_wgrad(d, g, XO(ATTPW), lact(a, y->atty, l), s.Cl, w->d2, s.C, s.n, s.Cl, s.C, blk);
        mdc_x_colsum(d, g, XO(ATTPB), w->dres2, s.C, s.nl, s.C, blk);
        break;
    case W_QKV:
        mdc_x_wgrad(d, g, XO(QKVW), w->in1, s.C, w->dqkv, 3 * s.Cl, s.n, s.C, 3 * s.Cl, blk);
        mdc_x_colsum(d, g, XO(QKVB), w->dqkv, 3 * s.Cl, s.n, 3 * s.Cl, blk);
        break;
    case W_LN1:
        mdc_x_layernorm_wgrad(d, g, XO(LN1W), XO(LN1B), w->dln1, x_in(a, l), lact(a, y->ln1_mean, l),
                              lact(a, y->ln1_rstd, l), s.nl, s.C, blk);
        break;
    }
#undef XO
}

static void wgrad(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int which, const wgrad_in *w) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    if ((which == W_FCP || which == W_FC) && mdc_i_is_moe(&m->cfg, l)) return; /* ran with B (ref/moe.c) */
    if (m->x.blk) {
        wgrad_exact(m, a, l, which, w);
        return;
    }
    switch (which) {
    case W_FCP: /* the bias from this rank's rows: the same gradient without SP, one call */
        mdc_matmul_backward(d, NULL, G(m, mdc_i_gl(&m->cfg, l, FCPW)), s.n == s.nl ? G(m, mdc_i_gl(&m->cfg, l, FCPB)) : NULL, w->d3,
                            lact(a, y->fchg, l), NULL, s.n, s.Fl, s.C);
        if (s.n != s.nl) mdc_matmul_backward(d, NULL, NULL, G(m, mdc_i_gl(&m->cfg, l, FCPB)), w->dres3, NULL, NULL, s.nl, s.Fl, s.C);
        break;
    case W_FC:
        mdc_matmul_backward(d, NULL, G(m, mdc_i_gl(&m->cfg, l, FCW)), G(m, mdc_i_gl(&m->cfg, l, FCB)), w->dfc, w->in2, NULL, s.n, s.C,
                            s.Fl);
        break;
    case W_LN2:
        mdc_layernorm_backward(d, NULL, G(m, mdc_i_gl(&m->cfg, l, LN2W)), G(m, mdc_i_gl(&m->cfg, l, LN2B)), w->dln2,
                               lact(a, y->res2, l), NULL, lact(a, y->ln2_mean, l), lact(a, y->ln2_rstd, l), s.nl, s.C);
        break;
    case W_ATTP:
        mdc_matmul_backward(d, NULL, G(m, mdc_i_gl(&m->cfg, l, ATTPW)), s.n == s.nl ? G(m, mdc_i_gl(&m->cfg, l, ATTPB)) : NULL, w->d2,
                            lact(a, y->atty, l), NULL, s.n, s.Cl, s.C);
        if (s.n != s.nl) mdc_matmul_backward(d, NULL, NULL, G(m, mdc_i_gl(&m->cfg, l, ATTPB)), w->dres2, NULL, NULL, s.nl, s.Cl, s.C);
        break;
    case W_QKV:
        mdc_matmul_backward(d, NULL, G(m, mdc_i_gl(&m->cfg, l, QKVW)), G(m, mdc_i_gl(&m->cfg, l, QKVB)), w->dqkv, w->in1, NULL, s.n,
                            s.C, 3 * s.Cl);
        break;
    case W_LN1:
        mdc_layernorm_backward(d, NULL, G(m, mdc_i_gl(&m->cfg, l, LN1W)), G(m, mdc_i_gl(&m->cfg, l, LN1B)), w->dln1, x_in(a, l), NULL,
                               lact(a, y->ln1_mean, l), lact(a, y->ln1_rstd, l), s.nl, s.C);
        break;
    }
}

/* The stash of layer l for B without W: every wgrad_in field's buffer, sized for the set's
 * creation batch. Not charged as kernel work: a framework keeps these tensors alive instead
 * of copying them; the memory is charged (MDC_MEM_ACTS). */
static mdc_status stash_ptrs(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, wgrad_in *w) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->maxB, a->maxT);
    size_t n = (size_t)s.n, nl = (size_t)s.nl, C = (size_t)s.C;
    size_t sz[10] = {n * C, nl * C, n * s.Fl, n * C, nl * C, n * C, nl * C, 3 * n * s.Cl, n * C, nl * C};
    int i = l - a->lo;
    if (!a->wstash[i]) {
        size_t tot = 0;
        for (int k = 0; k < 10; k++) tot += sz[k];
        char name[40];
        snprintf(name, sizeof name, "wgrad stash, layer %d", l);
        TRY(mdc_dev_alloc(a->dev, (void **)&a->wstash[i], tot * sizeof(float), MDC_MEM_ACTS, name));
    }
    const float **f[10] = {&w->d3, &w->dres3, &w->dfc, &w->in2, &w->dln2, &w->d2, &w->dres2, &w->dqkv, &w->in1, &w->dln1};
    float *p = a->wstash[i];
    for (int k = 0; k < 10; k++) *f[k] = p, p += sz[k];
    return MDC_OK;
}

/* W's inputs `which` are ready in `live`: run it now, or keep copies for a later W. */
static void wready(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int which, const wgrad_in *live, wgrad_in *keep) {
    if (!keep) {
        wgrad(m, a, l, which, live);
        return;
    }
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    size_t nC = (size_t)s.n * s.C * sizeof(float), nlC = (size_t)s.nl * s.C * sizeof(float);
#define KEEP(field, bytes) memcpy((float *)keep->field, live->field, (bytes))
    switch (which) {
    case W_FCP: KEEP(d3, nC); KEEP(dres3, nlC); break;
    case W_FC: KEEP(dfc, (size_t)s.n * s.Fl * sizeof(float)); KEEP(in2, nC); break;
    case W_LN2: KEEP(dln2, nlC); break;
    case W_ATTP: KEEP(d2, nC); KEEP(dres2, nlC); break;
    case W_QKV: KEEP(dqkv, (size_t)s.n * 3 * s.Cl * sizeof(float)); KEEP(in1, nC); break;
    case W_LN1: KEEP(dln1, nlC); break;
    }
#undef KEEP
}

/* The input gradient of a column-parallel linear's input: a partial sum over tp shards, which
 * f's backward reduces into dln (local rows). dpart is (B,T,C) (dln itself without SP). */
static mdc_status f_back(mdc_gpt2 *m, mdc_gpt2_acts *a, float *dln, float *dpart) {
    if (!m->comm) return MDC_OK;
    return m->comm->f_backward(m->comm->ctx, dln, dpart, a->B, a->T, m->cfg.C);
}
/* The row-parallel output's gradient over every position: gathered with SP (into `full`). */
static mdc_status g_back(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *dres, const float **dout) {
    *dout = dres;
    if (!m->part.sp) return MDC_OK;
    float *full = buf(a, a->lay.full);
    *dout = full;
    return m->comm->g_backward(m->comm->ctx, full, dres, a->B, a->T, m->cfg.C);
}
/* g_back at a row-parallel linear of layer l, dumped: with SP the local rows before the
 * all-gather, then the gathered sequence. */
static mdc_status g_back_site(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int site, const float *dres, const float **dout) {
    if (m->part.sp) DUMP(1 + l, 1, site, 1, 0, MDC_I_ROWS, MDC_I_W_C, dres);
    TRY(g_back(m, a, dres, dout));
    DUMP(1 + l, 1, site, 0, 0, m->part.sp ? MDC_I_SEQ : MDC_I_ROWS, MDC_I_W_C, *dout);
    return MDC_OK;
}

/* dln (local rows) = the input gradient dout (B, T, K) W^T of a column-parallel linear with
 * weight W (C, K): a partial sum over tp shards, reduced by f's backward. Exact mode: in
 * contraction blocks of kblk, summed exactly. dpart: the (B, T, C) scratch (dln without SP). */
static mdc_status col_input_grad(mdc_gpt2 *m, mdc_gpt2_acts *a, float *dln, float *dpart, const float *dout,
                                 const float *W, int K, int kblk, int l, int site) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    if (m->x.blk) {
        mdc_i_x_begin(m, a);
        mdc_x_contract(m->dev, &m->x.act, dout, K, W, K, 1, s.n, K, s.C, kblk);
        TRY(mdc_i_x_reduce(m, a, dln));
    } else {
        memset(dpart, 0, (size_t)s.n * s.C * sizeof(float));
        mdc_matmul_backward(m->dev, dpart, NULL, NULL, dout, NULL, W, s.n, s.C, K);
        if (m->comm) DUMP(1 + l, 1, site, 1, 1, MDC_I_SEQ, MDC_I_W_C, dpart);
        TRY(f_back(m, a, dln, dpart));
    }
    DUMP(1 + l, 1, site, 0, 0, MDC_I_ROWS, MDC_I_W_C, dln);
    return MDC_OK;
}

static mdc_status block_backward_input(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, wgrad_in *keep) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_i_acts_layout *y = &a->lay;
    float *dres = buf(a, y->dres), *dln = buf(a, y->dln), *datty = buf(a, y->datty);
    float *dbig = buf(a, y->dbig), *dbig2 = buf(a, y->dbig2);
    float *dpart = m->part.sp ? buf(a, y->dfull) : dln;
    size_t nF = (size_t)s.n * s.Fl;
    float *qkv = lact(a, y->qkv, l), *atty = lact(a, y->atty, l);
    wgrad_in w = {0};
    const float *in;
    /* MLP: dres is d(x'), which also flows straight to x2 through the residual */
    DUMP(1 + l, 1, MDC_I_DS_OUT, 0, 0, MDC_I_ROWS, MDC_I_W_C, dres);
    const float *dy = branch_grad(m, a, l, MDC_DROP_MLP_OUT, dres);
    if (mdc_i_is_moe(&m->cfg, l)) { /* the router's and experts' gradients run here, with B */
        DUMP(1 + l, 1, MDC_I_DS_MOE, 0, 0, MDC_I_ROWS, MDC_I_W_C, dy);
        TRY(mdc_i_moe_backward(m, a, l, dy, dln));
        DUMP(1 + l, 1, MDC_I_DS_LN2, 0, 0, MDC_I_ROWS, MDC_I_W_C, dln);
        goto ln2;
    }
    TRY(g_back_site(m, a, l, MDC_I_DS_MLPP, dy, &w.d3));
    w.dres3 = dy;
    wready(m, a, l, W_FCP, &w, keep);
    memset(dbig, 0, nF * sizeof(float));
    mm_dinput(m, dbig, w.d3, P(m, mdc_i_gl(&m->cfg, l, FCPW)), s.n, s.Fl, s.C);
    DUMP(1 + l, 1, MDC_I_DS_GELU, 0, 0, MDC_I_SEQ, MDC_I_W_FC, dbig);
    memset(dbig2, 0, nF * sizeof(float));
    mdc_gelu_backward(d, dbig2, lact(a, y->fch, l), dbig, nF);
    DUMP(1 + l, 1, MDC_I_DS_FC, 0, 0, MDC_I_SEQ, MDC_I_W_FC, dbig2);
    w.dfc = dbig2;
    TRY(f_in(m, a, lact(a, y->ln2, l), &in)); /* SP: the input gathered again (Megatron) */
    w.in2 = in;
    wready(m, a, l, W_FC, &w, keep);
    TRY(col_input_grad(m, a, dln, dpart, dbig2, P(m, mdc_i_gl(&m->cfg, l, FCW)), s.Fl, x_mlp(m), l, MDC_I_DS_LN2));
ln2:
    w.dln2 = dln;
    wready(m, a, l, W_LN2, &w, keep);
    mdc_layernorm_backward(d, dres, NULL, NULL, dln, lact(a, y->res2, l), P(m, mdc_i_gl(&m->cfg, l, LN2W)),
                           lact(a, y->ln2_mean, l), lact(a, y->ln2_rstd, l), s.nl, s.C);
    DUMP(1 + l, 1, MDC_I_DS_RES2, 0, 0, MDC_I_ROWS, MDC_I_W_C, dres);
    /* attention */
    dy = branch_grad(m, a, l, MDC_DROP_ATTN_OUT, dres);
    TRY(g_back_site(m, a, l, MDC_I_DS_ATTP, dy, &w.d2));
    w.dres2 = dy;
    wready(m, a, l, W_ATTP, &w, keep);
    memset(datty, 0, (size_t)s.n * s.Cl * sizeof(float));
    mm_dinput(m, datty, w.d2, P(m, mdc_i_gl(&m->cfg, l, ATTPW)), s.n, s.Cl, s.C);
    DUMP(1 + l, 1, MDC_I_DS_Y, 0, 0, MDC_I_SEQ, MDC_I_W_HEADS, datty);
    memset(dbig, 0, (size_t)s.n * 3 * s.Cl * sizeof(float));
    mdc_dropout dd;
    const mdc_dropout *drop = drop_of(m, a, l, MDC_DROP_ATTN, &dd);
    if (m->cp)
        TRY(m->cp->backward(m->cp->ctx, d, dbig, datty, atty, qkv, lact(a, y->att, l), drop, a->B, s.Cl, s.Hl));
    else if (m->x.blk)
        TRY(mdc_i_x_attention_backward(m, a, dbig, datty, atty, qkv, lact(a, y->att, l), drop));
    else if (y->tiled)
        mdc_attention_backward_tiled_drop(d, dbig, datty, atty, qkv, lact(a, y->att, l), drop, a->B, a->T, s.Cl, s.Hl);
    else
        mdc_attention_backward_drop(d, dbig, buf(a, y->attscratch), datty, qkv, lact(a, y->att, l), drop, a->B, a->T,
                                    s.Cl, s.Hl);
    DUMP(1 + l, 1, MDC_I_DS_QKV, 0, 0, MDC_I_SEQ, MDC_I_W_QKV, dbig);
    w.dqkv = dbig;
    TRY(f_in(m, a, lact(a, y->ln1, l), &in));
    w.in1 = in;
    wready(m, a, l, W_QKV, &w, keep);
    TRY(col_input_grad(m, a, dln, dpart, dbig, P(m, mdc_i_gl(&m->cfg, l, QKVW)), 3 * s.Cl, x_head(m), l, MDC_I_DS_LN1));
    w.dln1 = dln;
    wready(m, a, l, W_LN1, &w, keep);
    mdc_layernorm_backward(d, dres, NULL, NULL, dln, x_in(a, l), P(m, mdc_i_gl(&m->cfg, l, LN1W)), lact(a, y->ln1_mean, l),
                           lact(a, y->ln1_rstd, l), s.nl, s.C);
    DUMP(1 + l, 1, MDC_I_DS_IN, 0, 0, MDC_I_ROWS, MDC_I_W_C, dres);
    return MDC_OK;
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
    if (parts & MDC_BWD_INPUT) {
        HOOK(MDC_HOOK_PRE_BACKWARD, 1 + l);
        if (parts == MDC_BWD_BOTH) TRY(block_backward_input(m, a, l, NULL));
        else {
            wgrad_in keep;
            TRY(stash_ptrs(m, a, l, &keep));
            TRY(block_backward_input(m, a, l, &keep));
            a->wpending[i] = 1;
            return MDC_OK;
        }
    } else {
        wgrad_in keep;
        TRY(stash_ptrs(m, a, l, &keep));
        for (int k = 0; k < NW; k++) wgrad(m, a, l, k, &keep);
        a->wpending[i] = 0;
    }
    HOOK(MDC_HOOK_POST_BACKWARD, 1 + l);
    return MDC_OK;
}

mdc_status mdc_gpt2_embed_backward(mdc_gpt2 *m, mdc_gpt2_acts *a) {
    if (!m->part.has_embed) return mdc_fail(MDC_ERR_INVALID, "embed_backward: this partition has no embedding");
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *dres = buf(a, a->lay.dres);
    HOOK(MDC_HOOK_PRE_BACKWARD, 0);
    if (m->x.blk) { /* exact: each token's row into its embedding row's exact sum */
        const float *dout;
        TRY(g_back(m, a, dres, &dout));
        mdc_x_embed(m->dev, &m->x.g, mdc_i_xoff(m, 0), (long)mdc_i_xoff(m, 1), dout, a->inputs, m->part.tp_rank * s.Vl,
                    s.Vl, m->cp ? m->cp->pos : NULL, a->B, a->T, s.C);
    } else if (!m->comm && !m->cp) {
        mdc_encoder_backward(m->dev, G(m, 0), G(m, 1), dres, a->inputs, a->B, a->T, s.C);
    } else {
        const float *dout;
        TRY(g_back(m, a, dres, &dout));
        mdc_embed_shard_backward(m->dev, G(m, 0), G(m, 1), dout, a->inputs, m->part.tp_rank * s.Vl, s.Vl,
                                 m->cp ? m->cp->pos : NULL, a->B, a->T, s.C);
    }
    HOOK(MDC_HOOK_POST_BACKWARD, 0);
    return MDC_OK;
}
