/* Expert tensor parallelism inside a MoE block (include/minidc/model.h, mdc_gpt2_etp; the etp
 * group's collectives: ref/parallel/ep/etp.c; docs/expert-parallel.md). With --etp N each
 * routed expert's first product (GPT-2's c_fc, the families' gate|up) is column-parallel and
 * its second (c_proj, down) row-parallel over the N members of the etp group:
 *   with SP  the members' received rows are gathered (member order, q->Rg of them), every
 *            member runs its F/N columns on all of them, and the partial outputs are
 *            reduce-scattered back to each member's rows;
 *   else     the members hold the same rows, and the partial outputs are allreduced.
 * The backward gathers the output gradient the same way and sums the gate/up input gradient.
 * Exact mode cuts both row-parallel contractions into canonical blocks of F / gcd(H, F) columns
 * (as the dense MLP's 4C/H: the same blocks for every N, since N divides H and F), sums them
 * exactly over the blocks and the members and rounds once, so serial (N = 1, where the sum is
 * over the blocks alone) and every N give the same bits; GPT-2's c_proj bias is added after. */
#include "moe_internal.h"

mdc_status mdc_i_moe_etp_counts(mdc_gpt2 *m, moe_state *q) {
    const mdc_gpt2_etp *x = m->moe.etp;
    int N = mdc_i_moe_etp(m), per = m->cfg.E * q->S;
    q->G = 1, q->Rg = q->R, q->own0 = 0, q->grc = q->rcnt, q->rows1 = q->R, q->grows = &q->rows1;
    if (N < 2) return MDC_OK;
    if (!x) return mdc_fail(MDC_ERR_INVALID, "--etp %d: the partition needs its etp group's collectives", N);
    if (!x->gather) return MDC_OK; /* the same rows on every member */
    if (!(q->gbuf = malloc(sizeof(int) * ((size_t)N * per + N))))
        return mdc_fail(MDC_ERR_OOM_HOST, "MoE: the etp group's counts (%d x %d)", N, per);
    q->grc = q->gbuf, q->grows = q->gbuf + (size_t)N * per;
    TRY(x->counts(x->ctx, q->rcnt, q->grc, per));
    q->G = N, q->Rg = 0;
    for (int p = 0; p < N; p++) {
        q->grows[p] = 0;
        for (int i = 0; i < per; i++) q->grows[p] += q->grc[(size_t)p * per + i];
        if (p < x->rank) q->own0 += q->grows[p];
        q->Rg += q->grows[p];
    }
    if (q->grows[x->rank] != q->R)
        return mdc_fail(MDC_ERR_MISMATCH, "MoE: etp member %d got %d rows back for its own %d", x->rank,
                        q->grows[x->rank], q->R);
    return MDC_OK;
}

mdc_status mdc_i_moe_etp_rows(mdc_gpt2 *m, const moe_state *q, const float *mine, float *all, int width) {
    const mdc_gpt2_etp *x = m->moe.etp;
    return x->rows(x->ctx, mine, all, q->grows, width);
}

/* Exact partial sums of n elements on the device (xs->v), empty. */
static mdc_status xsum_begin(mdc_gpt2 *m, mdc_xsum *xs, size_t n) {
    memset(xs, 0, sizeof *xs);
    TRY(mdc_dev_alloc(m->dev, (void **)&xs->v, (n + 1) * sizeof(double), MDC_MEM_ACTS, "MoE exact partial sums"));
    xs->n = n;
    mdc_xsum_clear(xs);
    return MDC_OK;
}
static void xsum_end(mdc_gpt2 *m, mdc_xsum *xs) {
    double *v = xs->v;
    xs->v = NULL;
    mdc_xsum_free(xs);
    mdc_dev_free(m->dev, v);
}

/* The exact sums (Rg x C) of this rank's shard summed over etp into out (this member's rows, or
 * without gathering all), or alone rounded. */
static mdc_status x_finish(mdc_gpt2 *m, const moe_state *q, mdc_xsum *xs, float *out) {
    const mdc_gpt2_etp *x = m->moe.etp;
    size_t n = (size_t)q->Rg * m->cfg.C;
    if (!mdc_xsum_ok(xs)) return mdc_fail(MDC_ERR_OOM_HOST, "MoE exact partial sums: an accumulator");
    if (x) return x->x_sum(x->ctx, xs, out, q->grows, m->cfg.C);
    mdc_xsum_round(xs, 0, n, out);
    mdc_dev_kernel(m->dev, (double)n, 12.0 * (double)n, MDC_PREC_RUN);
    return MDC_OK;
}

/* GPT-2's c_proj bias on this member's rows (q->rcnt's layout), once, after the sum. */
static void add_bias(mdc_gpt2 *m, int l, const moe_state *q, float *yr) {
    if (mdc_i_family(&m->cfg)) return;
    int C = m->cfg.C, e = m->moe.ep ? m->moe.ep->e : 1, El = m->cfg.E / e, j0 = (m->moe.ep ? m->moe.ep->rank : 0) * El;
    size_t row = 0;
    for (int src = 0; src < e; src++)
        for (int jl = 0; jl < El; jl++) {
            int nr = 0;
            for (int sg = 0; sg < q->S; sg++) nr += q->rcnt[((size_t)src * El + jl) * q->S + sg];
            const float *b = P(m, mdc_i_expert_of(&m->cfg, l, j0 + jl).b2);
            for (int r = 0; r < nr; r++, row++)
                for (int c = 0; c < C; c++) yr[row * C + c] += b[c];
        }
    mdc_dev_kernel(m->dev, (double)q->R * C, 12.0 * (double)q->R * C, MDC_PREC_RUN);
}

mdc_status mdc_i_moe_down(mdc_gpt2 *m, int l, const moe_state *q, float *yr) {
    const mdc_gpt2_config *c = &m->cfg;
    int C = c->C, e = m->moe.ep ? m->moe.ep->e : 1, El = c->E / e, j0 = (m->moe.ep ? m->moe.ep->rank : 0) * El;
    int N = mdc_i_moe_etp(m), kblk = mdc_i_contract_block(c, mdc_i_expert_of(c, l, 0).F);
    if (N < 2 && !m->x.blk) { /* every expert whole: the product with its bias, straight into yr */
        FOR_BLOCKS(q, e, El, {
            mdc_i_expert x = mdc_i_moe_expert(m, l, j0 + jl);
            m->ops->matmul(m, yr + (size_t)r0 * C, q->u + (size_t)r0 * x.F, P(m, x.w2), P(m, x.b2), nr, x.F, C, x.wt);
        });
        return MDC_OK;
    }
    size_t n = (size_t)q->Rg * C;
    mdc_status st;
    if (m->x.blk) {
        mdc_xsum xs;
        TRY(xsum_begin(m, &xs, n));
        FOR_BLOCKS(q, e, El, {
            mdc_i_expert x = mdc_i_moe_expert(m, l, j0 + jl);
            mdc_x_contract_at(m->dev, &xs, (size_t)r0 * C, q->u + (size_t)r0 * x.F, x.F, P(m, x.w2), x.wt ? x.F : C,
                              x.wt, nr, x.F, C, kblk);
        });
        st = x_finish(m, q, &xs, yr);
        xsum_end(m, &xs);
    } else {
        float *part;
        TRY(mdc_dev_alloc(m->dev, (void **)&part, (n + 1) * sizeof(float), MDC_MEM_ACTS, "MoE partial outputs"));
        FOR_BLOCKS(q, e, El, {
            mdc_i_expert x = mdc_i_moe_expert(m, l, j0 + jl);
            m->ops->matmul(m, part + (size_t)r0 * C, q->u + (size_t)r0 * x.F, P(m, x.w2), NULL, nr, x.F, C, x.wt);
        });
        st = m->moe.etp->sum(m->moe.etp->ctx, part, yr, q->grows, C);
        mdc_dev_free(m->dev, part);
    }
    if (!st) add_bias(m, l, q, yr);
    return st;
}

mdc_status mdc_i_moe_dinput(mdc_gpt2 *m, int l, const moe_state *q, const float *dh, float *dxr) {
    const mdc_gpt2_config *c = &m->cfg;
    int C = c->C, e = m->moe.ep ? m->moe.ep->e : 1, El = c->E / e, j0 = (m->moe.ep ? m->moe.ep->rank : 0) * El;
    int N = mdc_i_moe_etp(m), kblk = mdc_i_contract_block(c, mdc_i_expert_of(c, l, 0).F);
    if (N < 2 && !m->x.blk) {
        FOR_BLOCKS(q, e, El, {
            mdc_i_expert x = mdc_i_moe_expert(m, l, j0 + jl);
            m->ops->dinput(m, dxr + (size_t)r0 * C, dh + (size_t)r0 * x.F1, P(m, x.w1), nr, C, x.F1, x.wt);
        });
        return MDC_OK;
    }
    size_t n = (size_t)q->Rg * C;
    mdc_status st;
    if (m->x.blk) { /* the gate and up columns in blocks of kblk: a block never straddles the two */
        mdc_xsum xs;
        TRY(xsum_begin(m, &xs, n));
        FOR_BLOCKS(q, e, El, {
            mdc_i_expert x = mdc_i_moe_expert(m, l, j0 + jl);
            mdc_x_contract_at(m->dev, &xs, (size_t)r0 * C, dh + (size_t)r0 * x.F1, x.F1, P(m, x.w1), x.wt ? C : x.F1,
                              !x.wt, nr, x.F1, C, kblk);
        });
        st = x_finish(m, q, &xs, dxr);
        xsum_end(m, &xs);
        return st;
    }
    float *part;
    TRY(mdc_dev_alloc(m->dev, (void **)&part, (n + 1) * sizeof(float), MDC_MEM_ACTS, "MoE partial input gradients"));
    memset(part, 0, n * sizeof(float));
    FOR_BLOCKS(q, e, El, {
        mdc_i_expert x = mdc_i_moe_expert(m, l, j0 + jl);
        m->ops->dinput(m, part + (size_t)r0 * C, dh + (size_t)r0 * x.F1, P(m, x.w1), nr, C, x.F1, x.wt);
    });
    st = m->moe.etp->sum(m->moe.etp->ctx, part, dxr, q->grows, C);
    mdc_dev_free(m->dev, part);
    return st;
}
