/* The one place the model's layers are chosen (ref/model/layers.h): after creation and
 * whenever tensor parallelism, exact mode or context parallelism is attached. */
#include "model_internal.h"

void mdc_i_install(mdc_gpt2 *m) {
    if (!m->ops) return; /* a layout without a device (mdc_gpt2_create_layout) runs nothing */
    *m->ops = m->comm ? mdc_i_ops_tp : mdc_i_ops_serial;
    if (m->x.blk) { /* exact mode's entries over the default ones */
        const mdc_i_ops *x = &mdc_i_ops_exact;
        mdc_i_ops *o = m->ops;
        o->name = x->name, o->matmul = x->matmul, o->dinput = x->dinput, o->row_forward = x->row_forward;
        o->col_dinput = x->col_dinput, o->wgrad = x->wgrad, o->layernorm_wgrad = x->layernorm_wgrad;
        o->layernorm_backward = x->layernorm_backward, o->embed_backward = x->embed_backward;
        o->grad_dtype = x->grad_dtype, o->grad_pack = x->grad_pack, o->grad_unpack = x->grad_unpack;
        o->grad_block = m->x.blk;
        o->lm_head = x->lm_head, o->loss = x->loss, o->head_backward = x->head_backward;
    }
    m->attn = m->cp ? &mdc_i_attention_cp : m->x.blk ? &mdc_i_attention_exact : &mdc_i_attention_kernel;
    m->norm = &mdc_i_layernorm;
}
