/* The one place the model's layers are chosen (ref/model/layers.h): after creation and
 * whenever tensor parallelism, exact mode or context parallelism is attached. */
#include "model_internal.h"

void mdc_i_install(mdc_gpt2 *m) {
    if (!m->ops) return; /* a layout without a device (mdc_gpt2_create_layout) runs nothing */
    *m->ops = m->comm ? mdc_i_ops_tp : mdc_i_ops_serial;
    if (m->x.blk) mdc_i_ops_exact_over(m->ops, m->x.blk); /* exact mode's entries over the default ones */
    m->attn = m->cp ? &mdc_i_attention_cp : m->x.blk ? &mdc_i_attention_exact : &mdc_i_attention_kernel;
    int fam = mdc_i_family(&m->cfg);
    m->norm = fam ? &mdc_i_rmsnorm : &mdc_i_layernorm;
    m->pos = fam ? &mdc_i_positions_rotary : &mdc_i_positions_learned;
}
