/* The Llama, Qwen2 and Qwen3 families (include/minidc/model.h, docs/models.md): their configs and
 * their tensor tables, named and shaped as transformers' LlamaForCausalLM, Qwen2ForCausalLM and
 * Qwen3ForCausalLM name and shape them (nn.Linear weights [out, in]).
 *
 * The global table: model.embed_tokens.weight [V, C] (Vp rows allocated, as GPT-2's wte), every
 * block's tensors, model.norm.weight [C], and lm_head.weight [V, C] when untied. A block's tensors,
 * in this order (those in brackets only where the config asks for them):
 *   input_layernorm.weight [C]
 *   self_attn.q_proj.weight [H d, C], k_proj.weight [KV d, C], v_proj.weight [KV d, C]
 *   [self_attn.q_proj.bias [H d], k_proj.bias [KV d], v_proj.bias [KV d]]    qkv_bias
 *   [self_attn.q_norm.weight [d], k_norm.weight [d]]                          qk_norm
 *   self_attn.o_proj.weight [C, H d], [o_proj.bias [C]]                       o_bias
 *   post_attention_layernorm.weight [C]
 *   mlp.gate_proj.weight [I, C], up_proj.weight [I, C], [gate_proj.bias, up_proj.bias [I]]
 *   mlp.down_proj.weight [C, I], [down_proj.bias [C]]                         mlp_bias
 * q, k, v are adjacent (so are their biases, and gate and up): on every rank they are one fused
 * weight, [(H + 2 KV) d, C] and [2 I, C] (their local rows), one product each. */
#include <stdio.h>

#include "model_internal.h"

const char *mdc_gpt2_family_name(int family) {
    static const char *const names[] = {"gpt2", "llama", "qwen2", "qwen3"};
    return family >= 0 && family < (int)(sizeof names / sizeof names[0]) ? names[family] : NULL;
}

int mdc_gpt2_tied(const mdc_gpt2_config *cfg) { return mdc_i_ghead(cfg) == 0; }
int mdc_gpt2_kv_heads_local(const mdc_gpt2_config *cfg, int tp) {
    int kv0;
    return mdc_i_kv_local(cfg, tp, 0, &kv0);
}
int mdc_gpt2_kv_replicas(const mdc_gpt2_config *cfg, int tp) {
    int KV = mdc_i_kv_heads(cfg);
    return tp > KV && KV > 0 && tp % KV == 0 ? tp / KV : 1;
}

/* ---- the blocks' tensors -------------------------------------------------------------------- */
static const char *const kind_names[NKINDS] = {
    [LN1W] = "input_layernorm.weight",   [QKVW] = "self_attn.q_proj.weight", [KW] = "self_attn.k_proj.weight",
    [VW] = "self_attn.v_proj.weight",    [QKVB] = "self_attn.q_proj.bias",   [KB] = "self_attn.k_proj.bias",
    [VB] = "self_attn.v_proj.bias",      [QNW] = "self_attn.q_norm.weight",  [KNW] = "self_attn.k_norm.weight",
    [ATTPW] = "self_attn.o_proj.weight", [ATTPB] = "self_attn.o_proj.bias",  [LN2W] = "post_attention_layernorm.weight",
    [FCW] = "mlp.gate_proj.weight",      [UPW] = "mlp.up_proj.weight",       [FCB] = "mlp.gate_proj.bias",
    [UPB] = "mlp.up_proj.bias",          [FCPW] = "mlp.down_proj.weight",    [FCPB] = "mlp.down_proj.bias",
};

int mdc_i_layer_kinds(const mdc_gpt2_config *c, int *kinds) {
    int all[] = {LN1W, QKVW, KW, VW, QKVB, KB, VB, QNW, KNW, ATTPW, ATTPB, LN2W, FCW, UPW, FCB, UPB, FCPW, FCPB};
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        int k = all[i];
        int on = k == QKVB || k == KB || k == VB     ? c->qkv_bias
                 : k == QNW || k == KNW              ? c->qk_norm
                 : k == ATTPB                        ? c->o_bias
                 : k == FCB || k == UPB || k == FCPB ? c->mlp_bias
                                                     : 1;
        if (!on) continue;
        if (kinds) kinds[n] = k;
        n++;
    }
    return n;
}

int mdc_i_kind_slot(const mdc_gpt2_config *c, int kind) {
    int kinds[NKINDS], n = mdc_i_layer_kinds(c, kinds);
    for (int i = 0; i < n; i++)
        if (kinds[i] == kind) return i;
    return -1;
}

int mdc_i_gl_family(const mdc_gpt2_config *c, int l, int k) {
    int base = 1 + l * mdc_i_layer_kinds(c, NULL);
    if (k < 0) return base; /* past block l - 1 (l = L: the final norm) */
    int s = mdc_i_kind_slot(c, k);
    return s < 0 ? -1 : base + s;
}

static void kind_shape(const mdc_gpt2_config *c, int k, int *ndim, int shape[2]) {
    int C = c->C, d = mdc_i_head_dim(c), Q = c->H * d, KVd = mdc_i_kv_heads(c) * d, I = mdc_i_ffn(c);
    *ndim = 1, shape[1] = 0;
    switch (k) {
    case QKVW: *ndim = 2, shape[0] = Q, shape[1] = C; break;
    case KW:
    case VW: *ndim = 2, shape[0] = KVd, shape[1] = C; break;
    case QKVB: shape[0] = Q; break;
    case KB:
    case VB: shape[0] = KVd; break;
    case QNW:
    case KNW: shape[0] = d; break;
    case ATTPW: *ndim = 2, shape[0] = C, shape[1] = Q; break;
    case FCW:
    case UPW: *ndim = 2, shape[0] = I, shape[1] = C; break;
    case FCB:
    case UPB: shape[0] = I; break;
    case FCPW: *ndim = 2, shape[0] = C, shape[1] = I; break;
    default: shape[0] = C; /* the norms, o_proj's and down_proj's biases */
    }
}

static size_t numel(int ndim, const int shape[2]) { return (size_t)shape[0] * (ndim == 2 ? (size_t)shape[1] : 1); }

static size_t block_floats(const mdc_gpt2_config *c) {
    int kinds[NKINDS], n = mdc_i_layer_kinds(c, kinds), nd, sh[2];
    size_t f = 0;
    for (int i = 0; i < n; i++) kind_shape(c, kinds[i], &nd, sh), f += numel(nd, sh);
    return f;
}

int mdc_i_family_tensor_count(const mdc_gpt2_config *c) { return mdc_i_glnf(c, 0) + 1 + (c->untied ? 1 : 0); }

size_t mdc_i_family_param_floats(const mdc_gpt2_config *c) {
    size_t emb = (size_t)c->Vp * c->C;
    return emb * (c->untied ? 2 : 1) + (size_t)c->L * block_floats(c) + (size_t)c->C;
}

/* The FLOPs one serial step charges (mdc_gpt2_step_flops), kernel by kernel in the block's order:
 * RMSNorm 4 per element forward, 13 backward (3 the weight's, 10 the input's); a linear 2 N K OC,
 * plus N OC for its output (bias or not) or 2 N OC with the residual; backward 4 N K OC, N OC more
 * with a bias; rotary 3 per element of q and k each way; Qwen3's q_norm and k_norm as RMSNorm
 * over N x heads rows of d; SwiGLU 5 per element forward, 14 backward; the attention as GPT-2's
 * per query head (the kv heads only share their keys). */
double mdc_i_family_step_flops(const mdc_gpt2_config *c, int B, int T) {
    double N = (double)B * T, C = c->C, V = c->V, Vp = c->Vp, d = mdc_i_head_dim(c), H = c->H, KV = mdc_i_kv_heads(c);
    double I = mdc_i_ffn(c), Q = H * d, OC = (H + 2 * KV) * d, BH = (double)B * H, pc = 0.5 * (double)T * (T + 1);
    double P = (double)mdc_i_family_param_floats(c), qb = c->qkv_bias, ob = c->o_bias, mb = c->mlp_bias;
    int tiled = T > MDC_GPT2_TILED_T;
    double qk = c->qk_norm ? N * (H + KV) * d : 0, rope = 3 * N * (H + KV) * d;
    double attn_f = BH * (4 * d + 5) * pc;
    double attn_b = tiled ? BH * ((10 * d + 4) * pc + 2.0 * T * d) : BH * (8 * d + 4) * pc;
    double layer_f = 4 * N * C + (2 * N * C * OC + N * OC) + 4 * qk + rope + attn_f + (2 * N * Q * C + 2 * N * C) +
                     4 * N * C + (2 * N * C * 2 * I + N * 2 * I) + 5 * N * I + (2 * N * I * C + 2 * N * C);
    double layer_b = (4 * N * I * C + mb * N * C) + 14 * N * I + (4 * N * C * 2 * I + mb * N * 2 * I) + 13 * N * C +
                     (4 * N * Q * C + ob * N * C) + attn_b + rope + 13 * qk + (4 * N * C * OC + qb * N * OC) +
                     13 * N * C;
    double fwd = c->L * layer_f + 4 * N * C + 2 * N * C * Vp + 4 * N * V + N;
    double bwd = 3 * N * V + N + 4 * N * C * Vp + 13 * N * C + c->L * layer_b + N * C;
    return fwd + bwd + 2 * P + 15 * P;
}

int mdc_i_family_role(const mdc_gpt2_config *c, int gi, int *l, int *k) {
    int per = mdc_i_layer_kinds(c, NULL), lnf = mdc_i_glnf(c, 0);
    *l = -1, *k = 0;
    if (gi == 0) return MDC_I_EMBED;
    if (gi == lnf) return MDC_I_NORMF;
    if (gi > lnf) return MDC_I_HEAD;
    int kinds[NKINDS];
    mdc_i_layer_kinds(c, kinds);
    *l = (gi - 1) / per, *k = kinds[(gi - 1) % per];
    return MDC_I_LAYER;
}

void mdc_i_family_tensor_at(const mdc_gpt2_config *c, int i, mdc_param_tensor *t) {
    size_t C = (size_t)c->C, emb = (size_t)c->Vp * C, per = block_floats(c);
    int l, k, role = mdc_i_family_role(c, i, &l, &k);
    t->decay = 1;
    if (role == MDC_I_EMBED || role == MDC_I_HEAD) {
        snprintf(t->name, sizeof t->name, role == MDC_I_EMBED ? "model.embed_tokens.weight" : "lm_head.weight");
        t->ndim = 2, t->shape[0] = c->V, t->shape[1] = c->C, t->alloc = emb;
        t->offset = role == MDC_I_EMBED ? 0 : emb + (size_t)c->L * per + C;
        return;
    }
    if (role == MDC_I_NORMF) {
        snprintf(t->name, sizeof t->name, "model.norm.weight");
        t->ndim = 1, t->shape[0] = c->C, t->alloc = C, t->offset = emb + (size_t)c->L * per, t->decay = 0;
        return;
    }
    int kinds[NKINDS], n = mdc_i_layer_kinds(c, kinds), nd, sh[2];
    size_t off = emb + (size_t)l * per;
    for (int j = 0; j < n && kinds[j] != k; j++) kind_shape(c, kinds[j], &nd, sh), off += numel(nd, sh);
    snprintf(t->name, sizeof t->name, "model.layers.%d.%s", l, kind_names[k]);
    kind_shape(c, k, &t->ndim, t->shape);
    t->offset = off, t->alloc = numel(t->ndim, t->shape), t->decay = t->ndim == 2;
}

/* ---- configs -------------------------------------------------------------------------------- */
int mdc_i_family_named(const char *name, mdc_gpt2_config *c, int *batch) {
    mdc_gpt2_config base = {.V = 512, .T = 64, .L = 2, .H = 4, .C = 128, .KV = 2, .eps = 1e-6f};
    if (!name) return 0;
    if (!strcmp(name, "llama-tiny")) { /* GQA 2, head_dim C/H, an MLP width off the multiples of 64 */
        *c = base, c->family = MDC_FAMILY_LLAMA, c->ffn = 352, c->eps = 1e-5f, c->rope_theta = 500000, c->untied = 1;
        c->rope = (mdc_rope_llama3){8.0f, 1.0f, 4.0f, 32};
    } else if (!strcmp(name, "llama-gpt2")) { /* Llama 3's layers at GPT-2 small's sizes (about 124M + the head) */
        mdc_gpt2_config g = {.family = MDC_FAMILY_LLAMA,
                             .V = 50257,
                             .T = 1024,
                             .L = 12,
                             .H = 12,
                             .C = 768,
                             .KV = 4,
                             .ffn = 2048,
                             .eps = 1e-5f,
                             .rope_theta = 500000,
                             .untied = 1};
        *c = g;
        if (batch) *batch = 4;
        return 1;
    } else if (!strcmp(name, "qwen2-tiny")) { /* q, k, v biases, tied */
        *c = base, c->family = MDC_FAMILY_QWEN2, c->ffn = 320, c->qkv_bias = 1, c->rope_theta = 1000000;
    } else if (!strcmp(name, "qwen3-tiny")) { /* q_norm, k_norm, head_dim 48 != C/H */
        *c = base, c->family = MDC_FAMILY_QWEN3, c->ffn = 384, c->head_dim = 48, c->qk_norm = 1,
        c->rope_theta = 1000000;
    } else return 0;
    if (batch) *batch = 24;
    return 1;
}

mdc_status mdc_i_family_check(mdc_gpt2_config *c) {
    const char *fam = mdc_gpt2_family_name(c->family);
    if (!fam) return mdc_fail(MDC_ERR_INVALID, "model family %d unknown (gpt2, llama, qwen2, qwen3)", c->family);
    int KV = mdc_i_kv_heads(c), d = mdc_i_head_dim(c);
    if (c->KV < 0 || c->head_dim < 0 || c->ffn < 0)
        return mdc_fail(MDC_ERR_INVALID, "%s: negative num_key_value_heads, head_dim or intermediate_size", fam);
    if (c->H % KV)
        return mdc_fail(MDC_ERR_INVALID, "%s: num_key_value_heads %d does not divide num_attention_heads %d", fam, KV,
                        c->H);
    if (d < 2 || d % 2 || d > 4096)
        return mdc_fail(MDC_ERR_INVALID,
                        "%s: head_dim %d must be even and in [2, 4096] (rotary positions pair its halves)", fam, d);
    if (mdc_i_ffn(c) > (1 << 20) || (long long)c->H * d > (1 << 20))
        return mdc_fail(MDC_ERR_INVALID, "%s: intermediate_size %d or heads x head_dim too large", fam, mdc_i_ffn(c));
    if (c->E)
        return mdc_fail(MDC_ERR_INVALID, "--experts %d: mixture-of-experts blocks are GPT-2's; the %s family is dense",
                        c->E, fam);
    if (c->eps == 0) c->eps = 1e-6f;
    if (!(c->eps > 0)) return mdc_fail(MDC_ERR_INVALID, "%s: rms_norm_eps %g must be positive", fam, c->eps);
    if (c->rope_theta == 0) c->rope_theta = 10000;
    if (!(c->rope_theta > 1)) return mdc_fail(MDC_ERR_INVALID, "%s: rope_theta %g must exceed 1", fam, c->rope_theta);
    const mdc_rope_llama3 *r = &c->rope;
    if (r->factor != 0 && !(r->factor >= 1 && r->low_freq_factor > 0 && r->high_freq_factor > r->low_freq_factor &&
                            r->original_max_position_embeddings > 0))
        return mdc_fail(MDC_ERR_INVALID,
                        "%s: rope_scaling llama3 needs factor >= 1, 0 < low_freq_factor < high_freq_factor and a "
                        "positive original_max_position_embeddings",
                        fam);
    return MDC_OK;
}
