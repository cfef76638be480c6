/* The model's positions (ref/model/layers.h, mdc_i_positions).
 *   learned  GPT-2: the table wpe, whose row of each token's global position the embedding adds
 *            to the token's row (the ops' embed entries, which also take its gradient); q and k
 *            are left as projected.
 *   rotary   the families: q and k of every head turned by their token's global position after
 *            the projection (HF's rotate_half convention, kernels/rope.c), their gradients turned
 *            back before the projection's backward. The cos and sin tables are built once per
 *            activation set and sequence length from the rank's global positions (context
 *            parallelism: its chunks'), with minidc's own sin and cos, so every mesh and machine
 *            rotates with the same bits. */
#include "model_internal.h"

const mdc_i_positions mdc_i_positions_learned = {"learned", NULL, NULL};

/* The set's tables (T, d/2 each) for its current sequence length. */
static const float *rope_tables(mdc_gpt2 *m, mdc_gpt2_acts *a, const float **sin_t) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    float *cos_t = buf(a, a->lay.rope);
    *sin_t = cos_t + (size_t)a->T * (s.d / 2);
    if (a->rope_T != a->T) {
        float inv[2048]; /* d/2: head_dim is at most 4096 (mdc_gpt2_config_check) */
        const mdc_gpt2_config *c = &m->cfg;
        mdc_rope_inv_freq(inv, s.d, c->rope_theta, c->rope.factor != 0 ? &c->rope : NULL);
        mdc_rope_table(cos_t, (float *)*sin_t, inv, s.d, mdc_i_positions_of(m, MDC_I_SEQ, s.Tl, NULL), 0, a->T);
        a->rope_T = a->T;
    }
    return cos_t;
}

/* q (Hl heads at column 0) and k (KVl heads after them) of every row turned, or their gradients
 * turned back (back: the transpose, in place) */
static void turn(mdc_gpt2 *m, mdc_gpt2_acts *a, float *qkv, int back) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const float *sin_t, *cos_t = rope_tables(m, a, &sin_t);
    void (*fn)(mdc_device *, float *, int, int, int, const float *, const float *, int, int) = back ? mdc_rope_backward
                                                                                                    : mdc_rope_forward;
    fn(m->dev, qkv, s.QKVl, s.Hl, s.d, cos_t, sin_t, a->B, a->T);
    fn(m->dev, qkv + s.Cl, s.QKVl, s.KVl, s.d, cos_t, sin_t, a->B, a->T);
    mdc_i_round(m, qkv, (size_t)s.n * s.QKVl);
}

static mdc_status rope_rotate(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *qkv) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    turn(m, a, qkv, 0);
    TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_ROPEQ, MDC_TAP_FWD, qkv, s.QKVl, 0));
    return mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_ROPEK, MDC_TAP_FWD, qkv, s.QKVl, s.Cl);
}

static mdc_status rope_unrotate(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_ROPEK, MDC_TAP_BWD, dqkv, s.QKVl, s.Cl));
    TRY(mdc_i_tap_cols(m, a, 1 + l, MDC_I_DS_ROPEQ, MDC_TAP_BWD, dqkv, s.QKVl, 0));
    turn(m, a, dqkv, 1);
    return MDC_OK;
}

const mdc_i_positions mdc_i_positions_rotary = {"rotary", rope_rotate, rope_unrotate};
