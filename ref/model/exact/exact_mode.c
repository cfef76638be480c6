/* Exact mode of the model (include/minidc/model.h, docs/exactness.md): its storage, its
 * checks, and the reduction of an exact product over tp. Its arithmetic is an operations table
 * (exact_ops.c) laid over the default one when it is turned on. */
#include <stdio.h>

#include "../model_internal.h"

size_t mdc_i_xoff(const mdc_gpt2 *m, int gi) { return m->tensors[m->tensor_of[gi]].offset; }

void mdc_i_exact_free(mdc_gpt2 *m) {
    m->x.g.v = m->x.act.v = NULL; /* device allocations: freed below */
    mdc_xsum_free(&m->x.g);
    mdc_xsum_free(&m->x.act);
    mdc_dev_free(m->dev, m->x.gbuf);
    mdc_dev_free(m->dev, m->x.abuf);
    free(m->x.se);
    mdc_xsum_free(&m->x.xa);
    mdc_dev_free(m->dev, m->x.xf);
    memset(&m->x, 0, sizeof m->x);
}

mdc_status mdc_gpt2_set_exact(mdc_gpt2 *m, int blk) {
    int before = mdc_i_acts_needs(m);
    mdc_i_exact_free(m);
    mdc_i_install(m);
    if (blk == 0) return mdc_i_acts_refresh(m, before);
    if (blk < 0) return mdc_fail(MDC_ERR_INVALID, "--exact-block %d: must be a positive number of tokens", blk);
    mdc_i_sizes s = mdc_i_sizes_of(m, m->acts_B, m->acts_T);
    if (s.Vl % MDC_EXACT_VOCAB_BLOCK)
        return mdc_fail(
            MDC_ERR_INVALID,
            "--exact: the vocabulary shard Vp/tp = %d/%d = %d is not a multiple of the exact vocabulary block "
            "%d; pick a --vocab whose padded size divided by --tp is",
            m->cfg.Vp, m->part.tp, s.Vl, MDC_EXACT_VOCAB_BLOCK);
    size_t na = (size_t)s.n * s.C;
    mdc_status st = mdc_dev_alloc(m->dev, (void **)&m->x.gbuf, m->floats * sizeof(double), MDC_MEM_GRADS,
                                  "exact gradient sums");
    if (!st) st = mdc_dev_alloc(m->dev, (void **)&m->x.abuf, na * sizeof(double), MDC_MEM_ACTS, "exact partial sums");
    if (!st && !(m->x.se = calloc((size_t)s.n, sizeof(mdc_exact))))
        st = mdc_fail(MDC_ERR_OOM_HOST, "exact loss accumulators (%d)", s.n);
    if (st) {
        mdc_i_exact_free(m);
        return st;
    }
    m->x.g.v = m->x.gbuf, m->x.g.n = m->floats;
    m->x.act.v = m->x.abuf, m->x.act.n = na;
    mdc_xsum_clear(&m->x.g);
    mdc_xsum_clear(&m->x.act);
    m->x.blk = blk;
    mdc_i_install(m);                     /* exact mode's arithmetic */
    return mdc_i_acts_refresh(m, before); /* the default set gains the buffer a reduced product lands in */
}

int mdc_gpt2_exact_block(const mdc_gpt2 *m) { return m->x.blk; }
mdc_xsum *mdc_gpt2_exact_grads(mdc_gpt2 *m) { return m->x.blk ? &m->x.g : NULL; }
mdc_exact *mdc_gpt2_exact_loss(mdc_gpt2 *m) { return &m->x.loss; }

void mdc_i_x_begin(mdc_gpt2 *m, mdc_gpt2_acts *a) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_xsum_zero(&m->x.act, 0, (size_t)s.n * s.C);
    m->x.act.nslot = 0;
}

mdc_status mdc_i_x_reduce(mdc_gpt2 *m, mdc_gpt2_acts *a, float *local) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    if (!mdc_xsum_ok(&m->x.act)) return mdc_fail(MDC_ERR_OOM_HOST, "exact partial sums: an accumulator");
    if (m->comm) return m->comm->x_reduce(m->comm->ctx, local, &m->x.act, a->B, a->T, s.C);
    mdc_xsum_round(&m->x.act, 0, (size_t)s.n * s.C, local);
    mdc_dev_kernel(m->dev, (double)s.n * s.C, 12.0 * s.n * s.C, MDC_PREC_FP32);
    return MDC_OK;
}
