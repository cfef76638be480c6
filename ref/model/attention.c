/* Causal self-attention over the heads of this rank (ref/model/layers.h, mdc_i_attention), one
 * interface, three implementations chosen when the model is set up:
 *   kernel   the whole local sequence at once: the materialized T x T probabilities, or above
 *            MDC_GPT2_TILED_T (or when the activation set keeps only each row's lse) the tiled
 *            online-softmax kernel (kernels/attention.c, attention_tiled.c);
 *   exact    exact mode's fixed blocks of query and key positions (ref/model/exact/exact_attention.c);
 *   cp       context parallelism: this rank's chunks against every key of the sequence, the
 *            algorithm (ring, all-gather, Ulysses) the context-parallel component's
 *            (ref/parallel/cp/). */
#include "model_internal.h"

/* GPT-2's heads are the grouped kernels' KV = H, d = C/H case (the same bits); its own entry
 * points keep their trace names */
static mdc_status kernel_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, float *att, float *qkv,
                                 const mdc_dropout *drop) {
    (void)l;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    if (mdc_i_family(&m->cfg)) {
        if (a->lay.tiled) mdc_attention_gqa_forward_tiled(m->dev, out, att, qkv, drop, a->B, a->T, s.Hl, s.KVl, s.d);
        else mdc_attention_gqa_forward(m->dev, out, att, qkv, drop, a->B, a->T, s.Hl, s.KVl, s.d);
    } else if (a->lay.tiled) mdc_attention_forward_tiled_drop(m->dev, out, att, qkv, drop, a->B, a->T, s.Cl, s.Hl);
    else mdc_attention_forward_drop(m->dev, out, att, qkv, drop, a->B, a->T, s.Cl, s.Hl);
    return MDC_OK;
}

static mdc_status kernel_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv, const float *dout,
                                  const float *out, const float *qkv, const float *att, const mdc_dropout *drop) {
    (void)l;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *scratch = buf(a, a->lay.attscratch);
    if (mdc_i_family(&m->cfg)) {
        if (a->lay.tiled)
            mdc_attention_gqa_backward_tiled(m->dev, dqkv, dout, out, qkv, att, drop, a->B, a->T, s.Hl, s.KVl, s.d);
        else mdc_attention_gqa_backward(m->dev, dqkv, scratch, dout, qkv, att, drop, a->B, a->T, s.Hl, s.KVl, s.d);
        if (mdc_i_kv_shared(m)) /* a kv head on several tp ranks: each saw its query heads' share */
            return m->comm->kv_sum(m->comm->ctx, dqkv, s.n, s.QKVl, s.Cl, 2 * s.KVl * s.d);
    } else if (a->lay.tiled)
        mdc_attention_backward_tiled_drop(m->dev, dqkv, dout, out, qkv, att, drop, a->B, a->T, s.Cl, s.Hl);
    else mdc_attention_backward_drop(m->dev, dqkv, scratch, dout, qkv, att, drop, a->B, a->T, s.Cl, s.Hl);
    return MDC_OK;
}

const mdc_i_attention mdc_i_attention_kernel = {"kernel", kernel_forward, kernel_backward};

static mdc_status exact_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, float *att, float *qkv,
                                const mdc_dropout *drop) {
    (void)l;
    return mdc_i_x_attention_forward(m, a, out, att, qkv, drop);
}

static mdc_status exact_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv, const float *dout, const float *out,
                                 const float *qkv, const float *att, const mdc_dropout *drop) {
    (void)l;
    return mdc_i_x_attention_backward(m, a, dqkv, dout, out, qkv, att, drop);
}

const mdc_i_attention mdc_i_attention_exact = {"exact", exact_forward, exact_backward};

static mdc_status cp_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, float *att, float *qkv,
                             const mdc_dropout *drop) {
    (void)l;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    return m->cp->forward(m->cp->ctx, m->dev, l, out, att, qkv, drop, a->B, s.Cl, s.Hl);
}

static mdc_status cp_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv, const float *dout, const float *out,
                              const float *qkv, const float *att, const mdc_dropout *drop) {
    (void)l;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    TRY(m->cp->backward(m->cp->ctx, m->dev, dqkv, dout, out, qkv, att, drop, a->B, s.Cl, s.Hl));
    if (mdc_i_kv_shared(m) && !m->x.blk) /* exact mode: the component sums the accumulators before rounding */
        return m->comm->kv_sum(m->comm->ctx, dqkv, s.n, s.QKVl, s.Cl, 2 * s.KVl * s.d);
    return MDC_OK;
}

const mdc_i_attention mdc_i_attention_cp = {"cp", cp_forward, cp_backward};
