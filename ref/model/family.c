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
    static const char *const names[] = {"gpt2", "llama", "qwen2", "qwen3", "mixtral", "qwen3_moe", "qwen2_moe"};
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
/* a block's kinds before its MLP (the attention's and post_attention_layernorm), and the dense MLP's */
static const int attn_all[] = {LN1W, QKVW, KW, VW, QKVB, KB, VB, QNW, KNW, ATTPW, ATTPB, LN2W};
static const int mlp_all[] = {FCW, UPW, FCB, UPB, FCPW, FCPB};
static const int shared_all[] = {FSG, FSU, FSD, FSGATE};
enum { NATTN = sizeof attn_all / sizeof attn_all[0], NMLP = sizeof mlp_all / sizeof mlp_all[0] };

static int kind_on(const mdc_gpt2_config *c, int k) {
    return k == QKVB || k == KB || k == VB     ? c->qkv_bias
           : k == QNW || k == KNW              ? c->qk_norm
           : k == ATTPB                        ? c->o_bias
           : k == FCB || k == UPB || k == FCPB ? c->mlp_bias
           : k == FSGATE                       ? c->shared_ffn > 0 && c->shared_gate
           : k >= FSG && k < FSGATE            ? c->shared_ffn > 0
                                               : 1;
}
/* the i-th of list's kinds that are on, or -1; *n: how many are on */
static int nth_on(const mdc_gpt2_config *c, const int *list, int len, int i, int *n) {
    int got = -1, cnt = 0;
    for (int j = 0; j < len; j++)
        if (kind_on(c, list[j]) && cnt++ == i) got = list[j];
    if (n) *n = cnt;
    return got;
}
static int attn_count(const mdc_gpt2_config *c) {
    int n;
    nth_on(c, attn_all, NATTN, -1, &n);
    return n;
}
static int mlp_count(const mdc_gpt2_config *c) {
    int n;
    nth_on(c, mlp_all, NMLP, -1, &n);
    return n;
}
static int shared_count(const mdc_gpt2_config *c) {
    int n;
    nth_on(c, shared_all, 4, -1, &n);
    return n;
}
/* a MoE block's tensors after the attention's: the shared expert's, the router, the experts' */
static int moe_count(const mdc_gpt2_config *c) { return shared_count(c) + 1 + 3 * c->E; }

int mdc_i_layer_kinds(const mdc_gpt2_config *c, int l) {
    return attn_count(c) + (mdc_i_is_moe(c, l) ? moe_count(c) : mlp_count(c));
}

int mdc_i_layer_kind(const mdc_gpt2_config *c, int l, int i) {
    int na = attn_count(c), ns = shared_count(c);
    if (i < na) return nth_on(c, attn_all, NATTN, i, NULL);
    if (!mdc_i_is_moe(c, l)) return nth_on(c, mlp_all, NMLP, i - na, NULL);
    if (i < na + ns) return nth_on(c, shared_all, 4, i - na, NULL);
    i -= na + ns;
    return i == 0 ? FROUTER : mdc_i_fexpert_k((i - 1) / 3, (i - 1) % 3);
}

int mdc_i_kind_slot(const mdc_gpt2_config *c, int l, int kind) {
    int na = attn_count(c), ns = shared_count(c), moe = mdc_i_is_moe(c, l);
    if (kind >= FROUTER) return moe && kind < mdc_i_fexpert_k(c->E, 0) ? na + ns + kind - FROUTER : -1;
    if (!kind_on(c, kind)) return -1;
    for (int i = 0; i < na; i++)
        if (nth_on(c, attn_all, NATTN, i, NULL) == kind) return i;
    for (int i = 0; !moe && i < mlp_count(c); i++)
        if (nth_on(c, mlp_all, NMLP, i, NULL) == kind) return na + i;
    for (int i = 0; moe && i < ns; i++)
        if (nth_on(c, shared_all, 4, i, NULL) == kind) return na + i;
    return -1;
}

/* the global index of block l's first tensor (l = L: the final norm) */
static int layer_first(const mdc_gpt2_config *c, int l) {
    int mb = mdc_i_moe_before(c, l);
    return 1 + l * attn_count(c) + (l - mb) * mlp_count(c) + mb * moe_count(c);
}

int mdc_i_gl_family(const mdc_gpt2_config *c, int l, int k) {
    int base = layer_first(c, l);
    if (k < 0) return base; /* past block l - 1 (l = L: the final norm) */
    int s = mdc_i_kind_slot(c, l, k);
    return s < 0 ? -1 : base + s;
}

static void kind_shape(const mdc_gpt2_config *c, int k, int *ndim, int shape[2]) {
    int C = c->C, d = mdc_i_head_dim(c), Q = c->H * d, KVd = mdc_i_kv_heads(c) * d, I = mdc_i_ffn(c);
    *ndim = 1, shape[1] = 0;
    if (k >= FSG && k < FROUTER) { /* the shared expert's gate and up [Fs, C], down [C, Fs], its gate [1, C] */
        int Fs = c->shared_ffn;
        *ndim = 2;
        if (k == FSGATE) shape[0] = 1, shape[1] = C;
        else if (k == FSD) shape[0] = C, shape[1] = Fs;
        else shape[0] = Fs, shape[1] = C;
        return;
    }
    if (k >= FROUTER) { /* the router [E, C]; an expert's gate and up [F, C], down [C, F] */
        int F = mdc_i_moe_ffn(c), q = (k - FROUTER - 1) % 3;
        *ndim = 2;
        if (k == FROUTER) shape[0] = c->E, shape[1] = C;
        else if (q == XD) shape[0] = C, shape[1] = F;
        else shape[0] = F, shape[1] = C;
        return;
    }
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

static size_t kind_floats(const mdc_gpt2_config *c, int k) {
    int nd, sh[2];
    kind_shape(c, k, &nd, sh);
    return numel(nd, sh);
}
/* floats of a dense block and of a MoE block */
static size_t block_floats(const mdc_gpt2_config *c, int moe) {
    size_t f = 0;
    for (int i = 0; i < NATTN; i++)
        if (kind_on(c, attn_all[i])) f += kind_floats(c, attn_all[i]);
    for (int i = 0; moe && i < 4; i++)
        if (kind_on(c, shared_all[i])) f += kind_floats(c, shared_all[i]);
    if (moe) return f + kind_floats(c, FROUTER) + (size_t)c->E * 3 * kind_floats(c, mdc_i_fexpert_k(0, XG));
    for (int i = 0; i < NMLP; i++)
        if (kind_on(c, mlp_all[i])) f += kind_floats(c, mlp_all[i]);
    return f;
}
/* floats of blocks [0, l) */
static size_t layers_floats(const mdc_gpt2_config *c, int l) {
    int mb = mdc_i_moe_before(c, l);
    return (size_t)(l - mb) * block_floats(c, 0) + (size_t)mb * block_floats(c, 1);
}

mdc_i_expert mdc_i_expert_of(const mdc_gpt2_config *c, int l, int j) {
    mdc_i_expert x;
    if (mdc_i_family(c)) { /* gate|up fused (adjacent), no biases, [out, in] */
        x.w1 = mdc_i_gl(c, l, mdc_i_fexpert_k(j, XG)), x.w2 = mdc_i_gl(c, l, mdc_i_fexpert_k(j, XD));
        x.b1 = x.b2 = -1, x.wt = 1, x.swiglu = 1, x.F = mdc_i_moe_ffn(c), x.F1 = 2 * x.F;
    } else {
        x.w1 = mdc_i_gl(c, l, mdc_i_expert_k(j, X_FCW)), x.b1 = mdc_i_gl(c, l, mdc_i_expert_k(j, X_FCB));
        x.w2 = mdc_i_gl(c, l, mdc_i_expert_k(j, X_FCPW)), x.b2 = mdc_i_gl(c, l, mdc_i_expert_k(j, X_FCPB));
        x.wt = 0, x.swiglu = 0, x.F = x.F1 = 4 * c->C;
    }
    return x;
}
int mdc_i_contract_block(const mdc_gpt2_config *c, int F) {
    int g = c->H, r = F;
    while (r) {
        int q = g % r;
        g = r, r = q;
    }
    return F / g;
}
int mdc_i_router_of(const mdc_gpt2_config *c, int l) { return mdc_i_gl(c, l, mdc_i_family(c) ? FROUTER : ROUTERW); }
mdc_i_expert mdc_i_shared_of(const mdc_gpt2_config *c, int l, int *gate) {
    mdc_i_expert x = {-1, -1, -1, -1, 1, 1, 2 * c->shared_ffn, c->shared_ffn};
    *gate = -1;
    if (!mdc_i_family(c) || c->shared_ffn <= 0) return x;
    x.w1 = mdc_i_gl(c, l, FSG), x.w2 = mdc_i_gl(c, l, FSD), *gate = mdc_i_gl(c, l, FSGATE);
    return x;
}

int mdc_i_family_tensor_count(const mdc_gpt2_config *c) { return mdc_i_glnf(c, 0) + 1 + (c->untied ? 1 : 0); }

size_t mdc_i_family_param_floats(const mdc_gpt2_config *c) {
    size_t emb = (size_t)c->Vp * c->C;
    return emb * (c->untied ? 2 : 1) + layers_floats(c, c->L) + (size_t)c->C;
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
    int tiled = mdc_i_attn_tiled(c, T);
    double qk = c->qk_norm ? N * (H + KV) * d : 0, rope = 3 * N * (H + KV) * d;
    double attn_f = BH * (4 * d + 5) * pc;
    double attn_b = tiled ? BH * ((10 * d + 4) * pc + 2.0 * T * d) : BH * (8 * d + 4) * pc;
    /* a block before its MLP (both norms included), then the dense MLP */
    double layer_f = 4 * N * C + (2 * N * C * OC + N * OC) + 4 * qk + rope + attn_f + (2 * N * Q * C + 2 * N * C) +
                     4 * N * C;
    double layer_b = 13 * N * C + (4 * N * Q * C + ob * N * C) + attn_b + rope + 13 * qk +
                     (4 * N * C * OC + qb * N * OC) + 13 * N * C;
    double dense_f = (2 * N * C * 2 * I + N * 2 * I) + 5 * N * I + (2 * N * I * C + 2 * N * C);
    double dense_b = (4 * N * I * C + mb * N * C) + 14 * N * I + (4 * N * C * 2 * I + mb * N * 2 * I);
    /* a MoE block's MLP instead (dropless: A = N k rows): the router 2NCE + NE, its softmax 5NE,
     * the experts' gate|up, SwiGLU and down on A rows, the combine 2AC and the residual NC;
     * backward the gates' gradient 3AC, the experts' input and weight gradients, the router's
     * softmax 8NE and its two products, the rows back into dx AC */
    double E = c->E, F = mdc_i_moe_ffn(c), A = N * c->topk, moe = mdc_i_moe_before(c, c->L);
    double moe_f = 2 * N * C * E + N * E + 5 * N * E + (2 * A * C * 2 * F + A * 2 * F) + 5 * A * F +
                   (2 * A * F * C + A * C) + 2 * A * C + N * C;
    double moe_b = 3 * A * C + 4 * A * F * C + 14 * A * F + 8 * A * C * F + 8 * N * E + 4 * N * C * E + A * C;
    if (c->router == MDC_ROUTER_SIGMOID) /* DeepSeek's sigmoid 4NE, its choice (4 + 2G/E)NE; the backward's 4NE more */
        moe_f += 4 * N * E + (4 + 2.0 * c->n_group / E) * N * E, moe_b += 4 * N * E;
    if (c->lb_coef > 0) /* transformers' aux loss: the top k of p counted, kNE; its terms and gradient 2NE */
        moe_f += c->topk * N * E, moe_b += 2 * N * E;
    /* the shared expert on every token (ref/model/moe/moe_shared.c): its gate|up, SwiGLU, down, the
     * sigmoid gate's product and the scaled sum; backward the scale's gradient, the gate's two
     * products (none without), the MLP's input and weight gradients, and the two into dx */
    double Fs = c->shared_ffn, gs = c->shared_gate;
    if (Fs > 0) {
        moe_f += (2 * N * C * 2 * Fs + N * 2 * Fs) + 5 * N * Fs + (2 * N * Fs * C + N * C) + gs * (2 * N * C + N) +
                 4 * N + 2 * N * C;
        moe_b += 3 * N * C + 3 * N + gs * 4 * N * C + 4 * N * Fs * C + 14 * N * Fs + 8 * N * C * Fs + 2 * N * C;
    }
    double fwd = c->L * layer_f + (c->L - moe) * dense_f + moe * moe_f + 4 * N * C + 2 * N * C * Vp + 4 * N * V + N;
    double bwd = 3 * N * V + N + 4 * N * C * Vp + 13 * N * C + c->L * layer_b + (c->L - moe) * dense_b + moe * moe_b +
                 N * C;
    return fwd + bwd + 2 * P + 15 * P;
}

int mdc_i_family_role(const mdc_gpt2_config *c, int gi, int *l, int *k) {
    int lnf = mdc_i_glnf(c, 0);
    *l = -1, *k = 0;
    if (gi == 0) return MDC_I_EMBED;
    if (gi == lnf) return MDC_I_NORMF;
    if (gi > lnf) return MDC_I_HEAD;
    int lo = 0, hi = c->L - 1; /* the last block whose first tensor is at or before gi */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (layer_first(c, mid) <= gi) lo = mid;
        else hi = mid - 1;
    }
    *l = lo, *k = mdc_i_layer_kind(c, lo, gi - layer_first(c, lo));
    return MDC_I_LAYER;
}

/* the name of kind k of block l under the family's names */
static void kind_name(const mdc_gpt2_config *c, int l, int k, char *out, size_t n) {
    if (k < FSG) {
        snprintf(out, n, "model.layers.%d.%s", l, kind_names[k]);
        return;
    }
    static const char *const shared[4] = {"gate_proj", "up_proj", "down_proj", ""};
    if (k == FSGATE) {
        snprintf(out, n, "model.layers.%d.mlp.shared_expert_gate.weight", l);
        return;
    }
    if (k < FROUTER) { /* Qwen2-MoE's gated shared_expert, DeepSeek's ungated shared_experts */
        snprintf(out, n, "model.layers.%d.mlp.shared_expert%s.%s.weight", l, c->shared_gate ? "" : "s",
                 shared[k - FSG]);
        return;
    }
    int mixtral = c->family == MDC_FAMILY_MIXTRAL, j = (k - FROUTER - 1) / 3, q = (k - FROUTER - 1) % 3;
    static const char *const mix[3] = {"w1", "w3", "w2"}, *const qw[3] = {"gate_proj", "up_proj", "down_proj"};
    if (k == FROUTER) snprintf(out, n, "model.layers.%d.%s.gate.weight", l, mixtral ? "block_sparse_moe" : "mlp");
    else
        snprintf(out, n, "model.layers.%d.%s.experts.%d.%s.weight", l, mixtral ? "block_sparse_moe" : "mlp", j,
                 mixtral ? mix[q] : qw[q]);
}

void mdc_i_family_tensor_at(const mdc_gpt2_config *c, int i, mdc_param_tensor *t) {
    size_t C = (size_t)c->C, emb = (size_t)c->Vp * C, blocks = layers_floats(c, c->L);
    int l, k, role = mdc_i_family_role(c, i, &l, &k);
    t->decay = 1;
    if (role == MDC_I_EMBED || role == MDC_I_HEAD) {
        snprintf(t->name, sizeof t->name, role == MDC_I_EMBED ? "model.embed_tokens.weight" : "lm_head.weight");
        t->ndim = 2, t->shape[0] = c->V, t->shape[1] = c->C, t->alloc = emb;
        t->offset = role == MDC_I_EMBED ? 0 : emb + blocks + C;
        return;
    }
    if (role == MDC_I_NORMF) {
        snprintf(t->name, sizeof t->name, "model.norm.weight");
        t->ndim = 1, t->shape[0] = c->C, t->alloc = C, t->offset = emb + blocks, t->decay = 0;
        return;
    }
    size_t off = emb + layers_floats(c, l);
    int s = mdc_i_kind_slot(c, l, k), na = attn_count(c), upto = k > FROUTER ? na + shared_count(c) : s;
    for (int j = 0; j < upto; j++) off += kind_floats(c, mdc_i_layer_kind(c, l, j));
    if (k > FROUTER) /* past the router and the experts before: gate, up and down are F C each */
        off += kind_floats(c, FROUTER) + (size_t)(k - FROUTER - 1) * kind_floats(c, mdc_i_fexpert_k(0, XG));
    kind_name(c, l, k, t->name, sizeof t->name);
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
    } else if (!strcmp(name, "mixtral-tiny")) { /* Llama attention, 8 SwiGLU experts of I, top-2, renormalized */
        *c = base, c->family = MDC_FAMILY_MIXTRAL, c->ffn = 176, c->eps = 1e-5f, c->rope_theta = 1000000;
        c->untied = 1, c->E = 8, c->topk = 2, c->moe_renorm = 1;
    } else if (!strcmp(name, "qwen3-moe-tiny")) { /* Qwen3 attention, 6 experts of 96, top-2 raw gates, block 0 dense */
        *c = base, c->family = MDC_FAMILY_QWEN3_MOE, c->ffn = 256, c->moe_ffn = 96, c->head_dim = 48, c->qk_norm = 1;
        c->rope_theta = 1000000, c->E = 6, c->topk = 2, c->moe_every = 2;
    } else if (!strcmp(name, "qwen2-moe-tiny")) { /* Qwen2 attention, 4 experts of 64 and a gated shared expert */
        *c = base, c->family = MDC_FAMILY_QWEN2_MOE, c->ffn = 256, c->moe_ffn = 64, c->qkv_bias = 1;
        c->rope_theta = 1000000, c->E = 4, c->topk = 2, c->shared_ffn = 160, c->shared_gate = 1;
    } else if (!strcmp(name, "deepseek-moe-tiny")) { /* Qwen3 attention, DeepSeek-V3 routing: 8 experts of 64
                                                        in 4 groups, 2 kept, top-2 scaled 2.5, a shared expert,
                                                        block 0 dense */
        *c = base, c->family = MDC_FAMILY_QWEN3_MOE, c->L = 3, c->ffn = 256, c->moe_ffn = 64, c->head_dim = 48;
        c->qk_norm = 1, c->rope_theta = 1000000, c->E = 8, c->topk = 2, c->moe_renorm = 1;
        c->router = MDC_ROUTER_SIGMOID, c->n_group = 4, c->topk_group = 2, c->routed_scale = 2.5f;
        c->first_dense = 1, c->n_shared = 1;
    } else if (!strcmp(name, "qwen2-tiny")) { /* q, k, v biases, tied */
        *c = base, c->family = MDC_FAMILY_QWEN2, c->ffn = 320, c->qkv_bias = 1, c->rope_theta = 1000000;
    } else if (!strcmp(name, "qwen3-tiny")) { /* q_norm, k_norm, head_dim 48 != C/H */
        *c = base, c->family = MDC_FAMILY_QWEN3, c->ffn = 384, c->head_dim = 48, c->qk_norm = 1,
        c->rope_theta = 1000000;
    } else return 0;
    if (batch) *batch = 24;
    return 1;
}

/* DeepSeek-V3 routing's settings (groups dividing the experts, enough experts in the kept groups
 * for the top k), first_k_dense_replace, and its ungated shared experts: n_shared x moe_ffn wide. */
static mdc_status router_check(mdc_gpt2_config *c, const char *fam, int moe_family) {
    if (c->router != MDC_ROUTER_SOFTMAX && c->router != MDC_ROUTER_SIGMOID)
        return mdc_fail(MDC_ERR_INVALID, "%s: router %d is neither softmax nor sigmoid (DeepSeek-V3)", fam, c->router);
    if (c->first_dense < 0 || c->first_dense > c->L || c->n_shared < 0 || c->n_shared > 64)
        return mdc_fail(MDC_ERR_INVALID,
                        "%s: first_k_dense_replace %d (0..%d) or n_shared_experts %d (0..64) out of range", fam,
                        c->first_dense, c->L, c->n_shared);
    if (!(c->lb_coef >= 0 && c->lb_coef < 1e6))
        return mdc_fail(MDC_ERR_INVALID, "%s: router_aux_loss_coef %g must be 0 or positive", fam, c->lb_coef);
    if ((c->router || c->first_dense || c->n_shared || c->lb_coef > 0) && !moe_family)
        return mdc_fail(MDC_ERR_INVALID, "%s: the router's settings are a MoE family's (mixtral, qwen3_moe, qwen2_moe)",
                        fam);
    if (c->n_shared) {
        if (c->shared_gate)
            return mdc_fail(MDC_ERR_INVALID,
                            "%s: n_shared_experts %d and Qwen2-MoE's gated shared expert: one shared expert at most",
                            fam, c->n_shared);
        c->shared_ffn = c->n_shared * mdc_i_moe_ffn(c);
    }
    if (c->router == MDC_ROUTER_SOFTMAX) {
        if (c->n_group > 1 || c->topk_group > 0 || (c->routed_scale != 0 && c->routed_scale != 1))
            return mdc_fail(MDC_ERR_INVALID,
                            "%s: n_group, topk_group and routed_scaling_factor are DeepSeek-V3 routing's "
                            "(--router deepseek, scoring_func sigmoid)",
                            fam);
        return MDC_OK;
    }
    if (c->n_group == 0) c->n_group = 1;
    if (c->topk_group == 0) c->topk_group = c->n_group;
    if (c->routed_scale == 0) c->routed_scale = 1;
    if (c->n_group < 1 || c->E % c->n_group || c->topk_group < 1 || c->topk_group > c->n_group)
        return mdc_fail(MDC_ERR_INVALID, "%s: n_group %d must divide the %d experts and topk_group %d be in 1..n_group",
                        fam, c->n_group, c->E, c->topk_group);
    if (c->E / c->n_group < 2 || c->topk_group * (c->E / c->n_group) < c->topk)
        return mdc_fail(MDC_ERR_INVALID,
                        "%s: n_group %d: a group scores by its two best experts (at least 2 a group) and the %d "
                        "kept groups must hold the top %d",
                        fam, c->n_group, c->topk_group, c->topk);
    if (!(c->routed_scale > 0 && c->routed_scale < 1e6))
        return mdc_fail(MDC_ERR_INVALID, "%s: routed_scaling_factor %g must be positive", fam, c->routed_scale);
    return MDC_OK;
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
    int moe_family = c->family == MDC_FAMILY_MIXTRAL || c->family == MDC_FAMILY_QWEN3_MOE ||
                     c->family == MDC_FAMILY_QWEN2_MOE;
    if (c->E && !moe_family)
        return mdc_fail(MDC_ERR_INVALID,
                        "--experts %d: the %s family is dense (its MoE relatives: mixtral, qwen3_moe, qwen2_moe)", c->E,
                        fam);
    if (moe_family && c->E < 1) return mdc_fail(MDC_ERR_INVALID, "%s: num_experts %d must be positive", fam, c->E);
    if (c->shared_ffn < 0 || c->shared_ffn > (1 << 20) || (c->shared_ffn && !moe_family))
        return mdc_fail(MDC_ERR_INVALID, "%s: shared_expert_intermediate_size %d: a MoE family's, at most 2^20", fam,
                        c->shared_ffn);
    if (c->moe_ffn < 0 || mdc_i_moe_ffn(c) > (1 << 20))
        return mdc_fail(MDC_ERR_INVALID, "%s: moe_intermediate_size %d out of range", fam, c->moe_ffn);
    TRY(router_check(c, fam, moe_family));
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
