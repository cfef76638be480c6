/* A MoE block's MLP (include/minidc/model.h, "mixture of experts"): the router, the top-k
 * choice, capacity and drops, the aux losses, dispatch to the experts, the experts, combine,
 * and the backward of all of it.
 *
 * Routing runs on the rank that holds the tokens. The kept assignments are laid out grouped
 * by expert (then by segment, then by token: the send buffer), moved to the experts' ranks by
 * the expert-parallel component's all-to-all (ref/parallel/ep/ep.c; without it the send buffer is the
 * receive buffer), computed there, and moved back the same way; the backward moves gradients
 * along the same paths. A segment is a canonical block of exact mode (--exact-block positions
 * of one sequence; one segment per expert otherwise): each expert weight gradient is a float
 * sum over one segment's rows added into the exact sums, so every mesh gets serial's bits. */
#include <math.h>
#include <stdio.h>

#include "moe_internal.h"

void mdc_i_moe_free(mdc_gpt2_acts *a, int l) {
    moe_state *q = a->moe ? a->moe[l - a->lo] : NULL;
    if (!q) return;
    mdc_dev_free(a->dev, q->fbuf), mdc_dev_free(a->dev, q->vbuf), mdc_dev_free(a->dev, q->sbuf);
    free(q->choice), free(q->gbuf), free(q);
    a->moe[l - a->lo] = NULL;
}

/* Rows per rank of the send (expert-major counts) or receive (source-major) layout. */
static void rows_per_rank(const int *cnt, int e, int per, int *rows) {
    for (int r = 0; r < e; r++) {
        rows[r] = 0;
        for (int i = 0; i < per; i++) rows[r] += cnt[(size_t)r * per + i];
    }
}

/* dir 0: send layout -> receive layout (dispatch); 1: back (combine). */
static mdc_status exchange(mdc_gpt2 *m, const moe_state *q, const float *from, float *to, int width, int dir) {
    const mdc_gpt2_ep *ep = m->moe.ep;
    int e = ep->e, per = m->cfg.E / e * q->S;
    int *rows = malloc(2 * sizeof(int) * (size_t)e);
    if (!rows) return mdc_fail(MDC_ERR_OOM_HOST, "MoE exchange");
    rows_per_rank(q->scnt, e, per, rows);
    rows_per_rank(q->rcnt, e, per, rows + e);
    mdc_status st = dir ? ep->rows(ep->ctx, from, rows + e, to, rows, width)
                        : ep->rows(ep->ctx, from, rows, to, rows + e, width);
    free(rows);
    return st;
}

/* The kept assignments' rows into the send layout (xs), then to the experts' ranks (xr). */
static mdc_status dispatch(mdc_gpt2 *m, int l, const float *x, moe_state *q) {
    mdc_device *d = m->dev;
    mdc_i_expert x0 = mdc_i_moe_expert(m, l, 0);
    int n = q->n, C = m->cfg.C, k = m->cfg.topk;
    char name[48];
    /* the rows: xs and ys here; xr (its own only with ep), xg (its own only gathered over etp), h
     * and u on the experts' side (Rg rows of this rank's shard) */
    size_t A = (size_t)q->A, R = (size_t)q->R, Rg = (size_t)q->Rg, xr = m->moe.ep ? R * C : 0;
    size_t xg = q->G > 1 ? Rg * C : 0, vb = 2 * A * C + xr + xg + Rg * (x0.F1 + x0.F);
    snprintf(name, sizeof name, "MoE block %d rows", l);
    TRY(mdc_dev_alloc(d, (void **)&q->vbuf, (vb + 4) * sizeof(float), MDC_MEM_ACTS, name));
    q->xs = q->vbuf, q->ys = q->xs + A * C, q->xr = m->moe.ep ? q->ys + A * C : q->xs;
    q->xg = xg ? q->vbuf + 2 * A * C + xr : q->xr;
    q->h = q->vbuf + 2 * A * C + xr + xg, q->u = q->h + Rg * x0.F1;
    for (int t = 0; t < n; t++)
        for (int r = 0; r < k; r++)
            if (q->row[(size_t)t * k + r] >= 0)
                memcpy(q->xs + (size_t)q->row[(size_t)t * k + r] * C, x + (size_t)t * C, sizeof(float) * C);
    mdc_dev_kernel(d, 0, 8.0 * A * C, MDC_PREC_RUN);
    if (m->moe.ep) TRY(exchange(m, q, q->xs, q->xr, C, 0));
    if (q->G > 1) TRY(mdc_i_moe_etp_rows(m, q, q->xr, q->xg, C));
    return MDC_OK;
}

/* The dump's view of the experts' outputs back at the tokens: per token its k slots' outputs
 * before the gates (a dropped assignment's 0), (local rows, k C). */
static mdc_status dump_experts(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const moe_state *q) {
    int C = m->cfg.C, k = m->cfg.topk;
    float *y = calloc((size_t)q->n * k * C + 1, sizeof *y);
    if (!y) return mdc_fail(MDC_ERR_OOM_HOST, "dump: the experts' outputs of layer %d", l);
    for (size_t i = 0; i < (size_t)q->n * k; i++)
        if (q->row[i] >= 0) memcpy(y + i * C, q->ys + (size_t)q->row[i] * C, (size_t)C * sizeof *y);
    mdc_status st = mdc_i_tap(m, a, 1 + l, MDC_I_DS_EXPERTS, MDC_TAP_FWD, MDC_TAP_AT, y);
    free(y);
    return st;
}

/* The router's scores (softmax p, or DeepSeek's sigmoid s), each token's k choices (as
 * integers) and their gates. */
static mdc_status dump_routing(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const moe_state *q) {
    size_t nk = (size_t)q->n * m->cfg.topk;
    TRY(mdc_i_tap(m, a, 1 + l, MDC_I_DS_ROUTER, MDC_TAP_FWD, MDC_TAP_AT, q->score ? q->score : q->probs));
    float *ch = malloc((nk + 1) * sizeof *ch);
    if (!ch) return mdc_fail(MDC_ERR_OOM_HOST, "dump: the choices of layer %d", l);
    for (size_t i = 0; i < nk; i++) ch[i] = (float)q->choice[i];
    mdc_status st = mdc_i_tap(m, a, 1 + l, MDC_I_DS_CHOICE, MDC_TAP_FWD, MDC_TAP_AT, ch);
    free(ch);
    return st ? st : mdc_i_tap(m, a, 1 + l, MDC_I_DS_GATES, MDC_TAP_FWD, MDC_TAP_AT, q->gate);
}

mdc_status mdc_i_moe_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, float *out) {
    mdc_i_moe_free(a, l);
    moe_state *q;
    TRY(mdc_i_moe_route(m, a, l, x, &q));
    if (m->tap) TRY(dump_routing(m, a, l, q));
    TRY(mdc_i_moe_etp_counts(m, q));
    TRY(dispatch(m, l, x, q));
    mdc_device *d = m->dev;
    int C = m->cfg.C, k = m->cfg.topk, e = m->moe.ep ? m->moe.ep->e : 1, El = m->cfg.E / e;
    int j0 = (m->moe.ep ? m->moe.ep->rank : 0) * El;
    float *yr = q->ys; /* serial: the experts write the combine's input directly */
    if (m->moe.ep)
        TRY(mdc_dev_alloc(d, (void **)&yr, (size_t)q->R * C * sizeof(float) + 4, MDC_MEM_ACTS, "MoE expert outputs"));
    /* GPT-2: GELU(x W1 + b1) W2 + b2; the families: down(silu(gate x) * up x); with etp each
     * member's shard of the intermediate columns, the second product summed over the members */
    FOR_BLOCKS(q, e, El, {
        mdc_i_expert ex = mdc_i_moe_expert(m, l, j0 + jl);
        float *h = q->h + (size_t)r0 * ex.F1, *u = q->u + (size_t)r0 * ex.F;
        m->ops->matmul(m, h, q->xg + (size_t)r0 * C, P(m, ex.w1), P(m, ex.b1), nr, C, ex.F1, ex.wt);
        mdc_i_round(m, h, (size_t)nr * ex.F1);
        if (ex.swiglu) mdc_swiglu_forward(d, u, h, nr, ex.F);
        else mdc_gelu_forward(d, u, h, (size_t)nr * ex.F);
        mdc_i_round(m, u, (size_t)nr * ex.F);
    });
    mdc_status dst = mdc_i_moe_down(m, l, q, yr);
    if (!dst) mdc_i_round(m, yr, (size_t)q->R * C); /* each expert's output (summed over etp) */
    if (dst) {
        if (m->moe.ep) mdc_dev_free(d, yr);
        return dst;
    }
    if (m->moe.ep) { /* back to the tokens' ranks: the reverse of the dispatch */
        mdc_status st = exchange(m, q, yr, q->ys, C, 1);
        mdc_dev_free(d, yr);
        TRY(st);
    }
    if (m->tap) TRY(dump_experts(m, a, l, q));
    /* combine: each token's kept outputs weighted by its gates, in slot order */
    int n = q->n;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        float *o = out + (size_t)t * C;
        for (int c = 0; c < C; c++) o[c] = 0;
        for (int s = 0; s < k; s++) {
            int r = q->row[(size_t)t * k + s];
            if (r < 0) continue;
            float g = q->gate[(size_t)t * k + s];
            const float *y = q->ys + (size_t)r * C;
            for (int c = 0; c < C; c++) o[c] += g * y[c];
        }
    }
    mdc_dev_kernel(d, 2.0 * q->A * C, 4.0 * (q->A + n) * C, MDC_PREC_RUN);
    return mdc_i_moe_shared_forward(m, a, l, x, q, out);
}
mdc_status mdc_i_moe_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *dout, float *dx) {
    moe_state *q = a->moe ? a->moe[l - a->lo] : NULL;
    if (!q) return mdc_fail(MDC_ERR_INVALID, "block_backward: MoE block %d has no forward state", l);
    mdc_device *d = m->dev;
    const mdc_gpt2_config *c = &m->cfg;
    mdc_i_expert x0 = mdc_i_moe_expert(m, l, 0);
    int n = q->n, C = c->C, E = c->E, k = c->topk, e = m->moe.ep ? m->moe.ep->e : 1, El = E / e;
    int j0 = (m->moe.ep ? m->moe.ep->rank : 0) * El;
    size_t A = (size_t)q->A, R = (size_t)q->R, Rg = (size_t)q->Rg, nk = (size_t)n * k;
    size_t yr = m->moe.ep ? R * C : 0, yg = q->G > 1 ? Rg * C : 0;
    float *tmp;
    /* dgate, dz; dyr (ep), dyg (gathered over etp), du, dh (the rows of this rank's shards), dxr */
    size_t tn = nk + (size_t)n * E + yr + yg + Rg * (x0.F + x0.F1) + R * C;
    TRY(mdc_dev_alloc(d, (void **)&tmp, (tn + 4) * sizeof(float), MDC_MEM_ACTS, "MoE backward"));
    float *dgate = tmp, *dz = dgate + nk, *dyr = dz + (size_t)n * E, *dyg = dyr + yr, *du = dyg + yg;
    float *dh = du + Rg * x0.F, *dxr = dh + Rg * x0.F1;
    /* the gates' gradient, then dys = gate x dout in place of ys */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++)
        for (int r = 0; r < k; r++) {
            int row = q->row[(size_t)t * k + r];
            float acc = 0, g = q->gate[(size_t)t * k + r];
            const float *o = dout + (size_t)t * C;
            float *y = row >= 0 ? q->ys + (size_t)row * C : NULL;
            if (y) {
                for (int i = 0; i < C; i++) acc += o[i] * y[i];
                for (int i = 0; i < C; i++) y[i] = g * o[i];
                mdc_round_half(y, (size_t)C, m->pc.prec);
            }
            dgate[(size_t)t * k + r] = acc;
        }
    mdc_dev_kernel(d, 3.0 * A * C, 12.0 * A * C, MDC_PREC_RUN);
    mdc_status st = MDC_OK;
    if (m->moe.ep) st = exchange(m, q, q->ys, dyr, C, 0);
    else dyr = q->ys;
    if (!yg) dyg = dyr;
    else if (!st) st = mdc_i_moe_etp_rows(m, q, dyr, dyg, C); /* every member's rows, as forward */
    memset(du, 0, Rg * (x0.F + x0.F1) * sizeof(float));
    memset(dxr, 0, R * C * sizeof(float));
    if (!st)
        FOR_BLOCKS(q, e, El, {
            mdc_i_expert x = mdc_i_moe_expert(m, l, j0 + jl);
            float *dyb = dyg + (size_t)r0 * C, *dub = du + (size_t)r0 * x.F, *dhb = dh + (size_t)r0 * x.F1;
            const float *h = q->h + (size_t)r0 * x.F1;
            m->ops->dinput(m, dub, dyb, P(m, x.w2), nr, x.F, C, x.wt);
            mdc_i_round(m, dub, (size_t)nr * x.F);
            if (x.swiglu) mdc_swiglu_backward(d, dhb, h, dub, nr, x.F);
            else mdc_gelu_backward(d, dhb, h, dub, (size_t)nr * x.F);
            mdc_i_round(m, dhb, (size_t)nr * x.F1);
        });
    if (!st) st = mdc_i_moe_dinput(m, l, q, dh, dxr); /* summed over etp back to this member's rows */
    if (!st) mdc_i_round(m, dxr, R * C);
    /* the experts' weight gradients: one sum per segment (exact mode's canonical token blocks;
     * one segment per expert and source otherwise), over every row the shards ran on */
    if (!st)
        FOR_SEGMENTS(q, e, El, {
            mdc_i_expert x = mdc_i_moe_expert(m, l, j0 + jl);
            const float *dyb = dyg + (size_t)r0 * C, *dhb = dh + (size_t)r0 * x.F1;
            m->ops->wgrad(m, x.w2, x.b2, q->u + (size_t)r0 * x.F, dyb, NULL, nr, nr, x.F, C, nr, x.wt);
            m->ops->wgrad(m, x.w1, x.b1, q->xg + (size_t)r0 * C, dhb, NULL, nr, nr, C, x.F1, nr, x.wt);
        });
    /* dxs back on the tokens' ranks (into ys: dys is spent) */
    float *dxs = dxr;
    if (!st && m->moe.ep) st = exchange(m, q, dxr, q->ys, C, 1), dxs = q->ys;
    if (!st) st = mdc_i_moe_router_grad(m, q, dgate, dz);
    if (!st) {
        const float *x = lact(a, a->lay.ln2, l);
        int gr = mdc_i_router_of(c, l), wt = mdc_i_family(c); /* the families' router: [E, C] */
        m->ops->wgrad(m, gr, -1, x, dz, NULL, n, n, C, E, 0, wt);
        memset(dx, 0, (size_t)n * C * sizeof(float));
        m->ops->dinput(m, dx, dz, P(m, gr), n, C, E, wt);
#pragma omp parallel for schedule(static)
        for (int t = 0; t < n; t++)
            for (int r = 0; r < k; r++) {
                int row = q->row[(size_t)t * k + r];
                if (row < 0) continue;
                const float *g = dxs + (size_t)row * C;
                float *o = dx + (size_t)t * C;
                for (int i = 0; i < C; i++) o[i] += g[i];
            }
        mdc_dev_kernel(d, 1.0 * A * C, 8.0 * (A + n) * C, MDC_PREC_RUN);
        st = mdc_i_moe_shared_backward(m, a, l, q, x, dout, dx);
    }
    mdc_dev_free(d, tmp);
    mdc_i_moe_free(a, l);
    return st;
}

/* ---- the MoE MLP of a block (ref/model/layers.h, mdc_i_mlp) ---------------------------------- */
static mdc_status moe_mlp_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, const float *res, const float *x) {
    /* the backward's work space, free until then (a recomputed forward runs in the backward,
     * which holds the gradient there: the work region's instead) */
    float *y = m->rc.active ? lact(a, a->lay.rcmoe, l) : buf(a, a->lay.dres);
    TAP(1 + l, MDC_I_DS_LN2, MDC_TAP_FWD, MDC_TAP_AT, x);
    TRY(mdc_i_moe_forward(m, a, l, x, y));
    mdc_i_round(m, y, (size_t)mdc_i_sizes_of(m, a->B, a->T).nl * m->cfg.C); /* the gated sum, in fp32 first */
    TAP(1 + l, MDC_I_DS_MOE, MDC_TAP_FWD, MDC_TAP_AT, y);
    mdc_i_residual(m, a, l, MDC_DROP_MLP_OUT, out, res, y);
    return MDC_OK;
}

/* The router's and the experts' weight gradients run here, with the input gradient. */
static mdc_status moe_mlp_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dx, const float *dres,
                                   mdc_i_wslot *keep) {
    (void)keep;
    const float *dy = mdc_i_branch_grad(m, a, l, MDC_DROP_MLP_OUT, dres);
    TAP(1 + l, MDC_I_DS_MOE, MDC_TAP_BWD, MDC_TAP_AT, dy);
    TRY(mdc_i_moe_backward(m, a, l, dy, dx));
    mdc_i_round(m, dx, (size_t)mdc_i_sizes_of(m, a->B, a->T).nl * m->cfg.C);
    TAP(1 + l, MDC_I_DS_LN2, MDC_TAP_BWD, MDC_TAP_AT, dx);
    return MDC_OK;
}

static void moe_mlp_wgrad(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const mdc_i_wslot *keep) {
    (void)m, (void)a, (void)l, (void)keep; /* ran with the backward's input part */
}

const mdc_i_mlp mdc_i_mlp_moe = {"moe", moe_mlp_forward, moe_mlp_backward, moe_mlp_wgrad};
