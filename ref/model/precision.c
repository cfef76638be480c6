/* Mixed precision (include/minidc/model.h; docs/precision.md). The emulation keeps every 16-bit
 * tensor in float storage holding a value of the dtype: rounding a float to bf16 or fp16 (round to
 * nearest even, as the GPU's conversion) and keeping it as a float loses nothing, a product of two
 * such values is exact in fp32, and fp32 accumulation of them is what a tensor core does. So the
 * kernels stay the fp32 ones and precision is where the layers round: their outputs and their
 * input gradients (mdc_i_round), and the compute copy of the weights the layers read (P()). The
 * device charges the dtype's bytes and tensor-core rate (mdc_dev_set_dtype) and the allocator the
 * dtype's width (mdc_dev_alloc_held). */
#include "model_internal.h"

_Static_assert(MDC_PRECISION_BF16 == 1 && MDC_PRECISION_FP16 == 2, "mdc_round_half's kinds");

/* the compute copy of tensor gi and of the unit's range [off, off + n) from the master */
static void refresh(mdc_gpt2 *m, size_t off, size_t n) {
    if (mdc_host_dry()) return;
    memcpy(m->pc.w + off, m->params + off, n * sizeof(float));
    mdc_round_half(m->pc.w + off, n, m->pc.prec);
}

void mdc_i_weights_ready(mdc_gpt2 *m, int unit) {
    if (!m->pc.w) return;
    refresh(m, m->unit_off[unit], m->unit_count[unit]);
    int h = mdc_i_ghead(&m->cfg), i = m->tensor_of[h];
    if (unit == m->cfg.L + 1 && i >= 0) /* the tied head reads the embedding's table */
        refresh(m, m->tensors[i].offset, m->tensors[i].alloc);
}

void mdc_i_grads_done(mdc_gpt2 *m, int unit) {
    if (m->pc.grad16 && m->grads) mdc_round_half(m->grads + m->unit_off[unit], m->unit_count[unit], MDC_PRECISION_BF16);
}

/* the fp32 parameters moved into a new home: the device's under `cat`, or host memory (NULL name) */
static mdc_status move_params(mdc_gpt2 *m, mdc_mem_category cat, const char *name) {
    size_t bytes = (m->floats ? m->floats : 1) * sizeof(float);
    float *p = NULL;
    if (name) TRY(mdc_dev_alloc(m->dev, (void **)&p, bytes, cat, name));
    else if (!(p = mdc_host_array(bytes))) return mdc_fail(MDC_ERR_OOM_HOST, "the fp32 parameters (%zu bytes)", bytes);
    if (!mdc_host_dry()) memcpy(p, m->params, m->floats * sizeof(float)); /* dry: untouched, unbacked */
    mdc_dev_free(m->dev, m->params);
    m->params = p;
    if (!name) m->flags |= MDC_GPT2_HOST_PARAMS;
    return MDC_OK;
}

mdc_status mdc_gpt2_set_precision(mdc_gpt2 *m, int prec) {
    if (prec < MDC_PRECISION_FP32 || prec > MDC_PRECISION_FP16)
        return mdc_fail(MDC_ERR_INVALID, "--precision: %d (fp32, bf16 or fp16)", prec);
    if (m->pc.prec == prec) return MDC_OK;
    if (m->pc.prec) return mdc_fail(MDC_ERR_INVALID, "--precision: the model's precision is set once");
    int before = mdc_i_acts_needs(m);
    m->pc.prec = prec;
    mdc_dev_set_dtype(m->dev, prec ? 2 : 4);
    mdc_dev_set_half(m->dev, prec); /* the attention kernels round their probabilities */
    if (prec) {
        size_t held = (m->floats ? m->floats : 1) * sizeof(float);
        m->pc.charged = !(m->flags & MDC_GPT2_HOST_PARAMS); /* ZeRO-3 charges its gathered units */
        if (!m->pc.charged) {
            if (!(m->pc.w = mdc_host_array(held))) return mdc_fail(MDC_ERR_OOM_HOST, "the parameters' compute copy");
        } else {
            /* the fp32 master is optimizer state in the mixed-precision accounting (the ZeRO paper's
             * K = 12 of master, m and v; Megatron's "main params"); the parameters are the copy */
            if (!(m->flags & MDC_GPT2_MASTER)) TRY(move_params(m, MDC_MEM_OPTIM, "params (fp32 master)"));
            TRY(mdc_dev_alloc_held(m->dev, (void **)&m->pc.w, held, held / 2, MDC_MEM_PARAMS, "params (16-bit copy)"));
        }
        for (int u = 0; u < mdc_gpt2_unit_count(&m->cfg); u++) mdc_i_weights_ready(m, u);
    }
    return mdc_i_acts_refresh(m, before);
}

int mdc_gpt2_get_precision(const mdc_gpt2 *m) { return m->pc.prec; }

mdc_status mdc_gpt2_master_to_host(mdc_gpt2 *m) {
    if (!m->pc.prec) return mdc_fail(MDC_ERR_INVALID, "the fp32 master leaves the device in 16 bits only");
    return m->flags & MDC_GPT2_HOST_PARAMS ? MDC_OK : move_params(m, MDC_MEM_OPTIM, NULL);
}

mdc_status mdc_gpt2_set_grad16(mdc_gpt2 *m, int on) {
    if (on && m->x.blk)
        return mdc_fail(MDC_ERR_INVALID,
                        "--grad-reduce bf16 with --exact: exact mode sums the gradients exactly (leave one out)");
    if (on && !m->pc.prec)
        return mdc_fail(
            MDC_ERR_INVALID,
            "--grad-reduce bf16 needs --precision bf16 or fp16 (the 16-bit gradient buffer of a mixed-precision run)");
    if (m->grads && !(m->flags & MDC_GPT2_HOST_GRADS)) { /* charged at the new width from the next step */
        mdc_dev_free(m->dev, m->grads);
        m->grads = NULL;
    }
    m->pc.grad16 = on;
    return MDC_OK;
}
int mdc_gpt2_grad16(const mdc_gpt2 *m) { return m->pc.grad16; }

void mdc_i_precision_free(mdc_gpt2 *m) {
    if (m->pc.charged) mdc_dev_free(m->dev, m->pc.w);
    else mdc_host_array_free(m->pc.w, (m->floats ? m->floats : 1) * sizeof(float));
    m->pc.w = NULL;
}
