/* The serial GPT-2 reference: configs, the global parameter table, memory, FLOPs, the model
 * object, and the serial forward/backward/update as a loop over the block API (ref/model/block.c).
 *
 * One layer (x the residual stream, (B,T,C)):
 *   ln1 = LN(x); qkv = ln1 @ Wqkv + bqkv; y = attention(qkv); x2 = x + y @ Wo + bo
 *   ln2 = LN(x2); h = gelu(ln2 @ Wfc + bfc); x' = x2 + h @ Wp + bp
 * then lnf = LN(x_L); logits = lnf @ wte^T; loss = mean cross-entropy.
 * Partitions and the local tensor table: ref/model/layout.c. Activation sets: ref/model/block.c.
 * Memory: see mdc_gpt2_memory_need; every buffer is a device allocation. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

const char *const mdc_i_layer_names[NLT] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

/* ---- configs ------------------------------------------------------------------------------ */

int mdc_gpt2_padded_vocab(int V) { return (V + 127) / 128 * 128; }

static long long gcd_ll(long long a, long long b) { return b ? gcd_ll(b, a % b) : a; }

int mdc_gpt2_padded_vocab_tp(int V, int tp) {
    long long shard = 32LL * (tp > 0 ? tp : 1), m = 128 / gcd_ll(128, shard) * shard; /* lcm(128, 32 tp) */
    long long p = ((long long)V + m - 1) / m * m;
    return p > INT_MAX ? INT_MAX : (int)p; /* too large: mdc_gpt2_config_check refuses the sizes */
}

mdc_status mdc_gpt2_config_named(const char *name, mdc_gpt2_config *cfg, int *batch) {
    static const struct {
        const char *name;
        mdc_gpt2_config c;
        int batch;
    } named[] = {
        {"tiny", {.V = 512, .Vp = 512, .T = 64, .L = 2, .H = 4, .C = 128}, 24},
        {"small", {.V = 4096, .Vp = 4096, .T = 128, .L = 4, .H = 8, .C = 256}, 12},
        {"gpt2", {.V = 50257, .Vp = 50304, .T = 1024, .L = 12, .H = 12, .C = 768}, 12},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (name && !strcmp(name, named[i].name)) {
            *cfg = named[i].c;
            if (batch) *batch = named[i].batch;
            return MDC_OK;
        }
    if (mdc_i_family_named(name, cfg, batch)) return MDC_OK;
    return mdc_fail(MDC_ERR_INVALID,
                    "--config: unknown config '%s' (known: tiny small gpt2 llama-tiny llama-gpt2 qwen2-tiny qwen3-tiny "
                    "mixtral-tiny qwen3-moe-tiny, or a "
                    "config.json)",
                    name ? name : "(null)");
}

mdc_status mdc_gpt2_config_check(mdc_gpt2_config *c) {
    if (c->V <= 0) return mdc_fail(MDC_ERR_INVALID, "--vocab: vocabulary size %d must be positive", c->V);
    if (c->T <= 0) return mdc_fail(MDC_ERR_INVALID, "--ctx: context length %d must be positive", c->T);
    if (c->L <= 0) return mdc_fail(MDC_ERR_INVALID, "--layers: %d layers; must be positive", c->L);
    if (c->H <= 0) return mdc_fail(MDC_ERR_INVALID, "--heads: %d heads; must be positive", c->H);
    if (c->C <= 0) return mdc_fail(MDC_ERR_INVALID, "--channels: %d channels; must be positive", c->C);
    if (!mdc_i_family(c) && c->C % c->H)
        return mdc_fail(MDC_ERR_INVALID, "--heads: %d heads do not divide --channels %d", c->H, c->C);
    if (c->V > (1 << 30) || c->T > (1 << 20) || c->C > (1 << 16) || c->L > 4096)
        return mdc_fail(MDC_ERR_INVALID, "model sizes too large (V %d, T %d, C %d, L %d)", c->V, c->T, c->C, c->L);
    if (c->Vp == 0) c->Vp = mdc_gpt2_padded_vocab(c->V);
    if (c->Vp < c->V) return mdc_fail(MDC_ERR_INVALID, "padded vocabulary %d < vocabulary %d", c->Vp, c->V);
    if (c->E < 0 || c->E > MDC_GPT2_MAX_EXPERTS)
        return mdc_fail(MDC_ERR_INVALID, "--experts %d: between 0 (a dense model) and %d", c->E, MDC_GPT2_MAX_EXPERTS);
    if (c->moe_every < 0) return mdc_fail(MDC_ERR_INVALID, "--moe-every %d: must be positive", c->moe_every);
    if (c->E && c->topk == 0) c->topk = c->E < 2 ? c->E : 2;
    if (c->E && (c->topk < 1 || c->topk > c->E || c->topk > MDC_GPT2_MAX_TOPK))
        return mdc_fail(MDC_ERR_INVALID, "--topk %d: between 1 and --experts %d (at most %d)", c->topk, c->E,
                        MDC_GPT2_MAX_TOPK);
    if (!c->E) c->topk = 0, c->moe_every = 0;
    if (!mdc_i_family(c) && (c->router || c->n_group || c->topk_group || c->routed_scale != 0 || c->first_dense ||
                             c->n_shared || c->lb_coef != 0))
        return mdc_fail(MDC_ERR_INVALID,
                        "--router, --router-groups, --router-topk-groups, --routed-scaling, --shared-experts, "
                        "--first-dense and --router-aux-loss are a MoE family's (mixtral-tiny, qwen3-moe-tiny, "
                        "qwen2-moe-tiny, deepseek-moe-tiny, or a --config file); GPT-2's MoE has --moe-aux-loss");
    return mdc_i_family(c) ? mdc_i_family_check(c) : MDC_OK;
}

/* ---- the parameter table -------------------------------------------------------------------- */

int mdc_gpt2_tensor_count(const mdc_gpt2_config *cfg) {
    return mdc_i_family(cfg) ? mdc_i_family_tensor_count(cfg) : 2 + mdc_i_gl(cfg, cfg->L, 0);
}

int mdc_i_role(const mdc_gpt2_config *c, int gi, int *l, int *k) {
    if (mdc_i_family(c)) return mdc_i_family_role(c, gi, l, k);
    int n = mdc_gpt2_tensor_count(c);
    *l = -1, *k = 0;
    if (gi == 0) return MDC_I_EMBED;
    if (gi == 1) return MDC_I_POS;
    if (gi >= n - 2) return *k = gi - (n - 2), MDC_I_NORMF;
    *l = mdc_i_layer_of(c, gi, k);
    return MDC_I_LAYER;
}

int mdc_i_layer_of(const mdc_gpt2_config *c, int gi, int *k) {
    if (mdc_i_family(c)) {
        int l;
        mdc_i_family_role(c, gi, &l, k);
        return l;
    }
    int r = gi - 2, n = mdc_i_moe_every(c), big = ROUTERW + 1 + 4 * c->E;
    if (!c->E) return *k = r % NLT, r / NLT;
    int period = big + (n - 1) * NLT, q = r / period;
    r %= period;
    if (r < big) return *k = r, q * n;
    r -= big;
    return *k = r % NLT, q * n + 1 + r / NLT;
}

/* Tensor k of a dense or (moe) a MoE block: its shape */
static void layer_tensor_shape(const mdc_gpt2_config *c, int moe, int k, int *ndim, int shape[2]) {
    static const int rows[NLT] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1};
    static const int cols[NLT] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
    static const int is2d[NLT] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0};
    if (moe && k == ROUTERW) {
        *ndim = 2, shape[0] = c->C, shape[1] = c->E;
        return;
    }
    if (moe && k > ROUTERW) k = FCW + (k - ROUTERW - 1) % 4; /* an expert is a GPT-2 MLP */
    *ndim = is2d[k] ? 2 : 1;
    shape[0] = is2d[k] ? rows[k] * c->C : cols[k] * c->C;
    shape[1] = is2d[k] ? cols[k] * c->C : 0;
}

static size_t layer_floats(const mdc_gpt2_config *c, int moe) {
    size_t f = 0;
    for (int k = 0; k < (moe ? ROUTERW + 1 + 4 * c->E : NLT); k++) {
        int nd, sh[2];
        layer_tensor_shape(c, moe, k, &nd, sh);
        f += (size_t)sh[0] * (nd == 2 ? (size_t)sh[1] : 1);
    }
    return f;
}
/* Floats of blocks [0, l). */
static size_t layers_floats(const mdc_gpt2_config *c, int l) {
    int moe = mdc_i_moe_before(c, l);
    return (size_t)(l - moe) * layer_floats(c, 0) + (size_t)moe * layer_floats(c, 1);
}

mdc_status mdc_gpt2_tensor_at(const mdc_gpt2_config *cfg, int i, mdc_param_tensor *t) {
    int n = mdc_gpt2_tensor_count(cfg);
    if (i < 0 || i >= n) return mdc_fail(MDC_ERR_INVALID, "tensor index %d out of range [0, %d)", i, n);
    memset(t, 0, sizeof *t);
    if (mdc_i_family(cfg)) {
        mdc_i_family_tensor_at(cfg, i, t);
        t->numel = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
        t->global = i, t->pieces = 1;
        return MDC_OK;
    }
    size_t C = (size_t)cfg->C, wte = (size_t)cfg->Vp * C, wpe = (size_t)cfg->T * C;
    if (i == 0) {
        snprintf(t->name, sizeof t->name, "wte");
        t->ndim = 2, t->shape[0] = cfg->V, t->shape[1] = cfg->C, t->offset = 0, t->alloc = wte, t->decay = 1;
    } else if (i == 1) {
        snprintf(t->name, sizeof t->name, "wpe");
        t->ndim = 2, t->shape[0] = cfg->T, t->shape[1] = cfg->C, t->offset = wte, t->alloc = wpe, t->decay = 1;
    } else if (i >= n - 2) {
        snprintf(t->name, sizeof t->name, "ln_f.%s", i == n - 2 ? "weight" : "bias");
        t->ndim = 1, t->shape[0] = cfg->C;
        t->offset = wte + wpe + layers_floats(cfg, cfg->L) + (i == n - 1 ? C : 0);
        t->alloc = C;
    } else {
        int k, l = mdc_i_layer_of(cfg, i, &k);
        size_t off = wte + wpe + layers_floats(cfg, l);
        for (int j = 0; j < k; j++) {
            int nd, sh[2];
            layer_tensor_shape(cfg, mdc_i_is_moe(cfg, l), j, &nd, sh);
            off += (size_t)sh[0] * (nd == 2 ? (size_t)sh[1] : 1);
        }
        if (!mdc_i_is_moe(cfg, l) || k < ROUTERW) snprintf(t->name, sizeof t->name, "h.%d.%s", l, mdc_i_layer_names[k]);
        else if (k == ROUTERW) snprintf(t->name, sizeof t->name, "h.%d.mlp.router.weight", l);
        else
            snprintf(t->name, sizeof t->name, "h.%d.mlp.experts.%d.%s", l, (k - ROUTERW - 1) / 4,
                     mdc_i_layer_names[FCW + (k - ROUTERW - 1) % 4] + 4 /* past "mlp." */);
        t->offset = off;
        layer_tensor_shape(cfg, mdc_i_is_moe(cfg, l), k, &t->ndim, t->shape);
        t->decay = t->ndim == 2;
        t->alloc = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
    }
    t->numel = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
    t->global = i, t->pieces = 1;
    return MDC_OK;
}

int mdc_gpt2_tensor_expert(const mdc_gpt2_config *cfg, int i) {
    int k, n = mdc_gpt2_tensor_count(cfg);
    if (!cfg->E || i < 1 || i >= n) return -1;
    if (mdc_i_family(cfg)) {
        int l, role = mdc_i_role(cfg, i, &l, &k);
        return role == MDC_I_LAYER && k > FROUTER ? (k - FROUTER - 1) / 3 : -1;
    }
    if (i < 2 || i >= n - 2) return -1;
    int l = mdc_i_layer_of(cfg, i, &k);
    return mdc_i_is_moe(cfg, l) && k > ROUTERW ? (k - ROUTERW - 1) / 4 : -1;
}

int mdc_gpt2_tensor_find(const mdc_gpt2_config *cfg, const char *name) {
    if (!strncmp(name, "transformer.", 12)) name += 12;
    int n = mdc_gpt2_tensor_count(cfg);
    mdc_param_tensor t;
    for (int i = 0; i < n; i++)
        if (mdc_gpt2_tensor_at(cfg, i, &t) == MDC_OK && !strcmp(t.name, name)) return i;
    return -1;
}

size_t mdc_gpt2_param_floats(const mdc_gpt2_config *c) {
    if (mdc_i_family(c)) return mdc_i_family_param_floats(c);
    return (size_t)c->Vp * c->C + (size_t)c->T * c->C + layers_floats(c, c->L) + 2 * (size_t)c->C;
}
size_t mdc_gpt2_param_count(const mdc_gpt2_config *c) {
    return mdc_gpt2_param_floats(c) - (size_t)(c->Vp - c->V) * c->C * (mdc_i_family(c) && c->untied ? 2 : 1);
}

mdc_gpt2_memory mdc_gpt2_memory_need(const mdc_gpt2_config *cfg, int B, int T) {
    mdc_gpt2_memory m;
    size_t p = mdc_gpt2_param_floats(cfg) * sizeof(float);
    mdc_gpt2_part part = mdc_gpt2_part_serial(cfg);
    mdc_i_acts_layout a = mdc_i_layout_acts(cfg, &part, 0, B, T, cfg->L, 1);
    m.params = p;
    m.grads = p;
    m.optim = 2 * p;
    m.acts = (a.total + a.work) * sizeof(float) + 2 * (size_t)B * T * sizeof(int); /* the set and the work region */
    if (cfg->E) { /* MoE blocks (dropless: n k rows): each keeps its routing and its rows (in, out, before
                     and after the activation) from its forward to its backward (ref/model/moe/moe.c); the
                     first backward adds its work space while every block's are held */
        size_t n = (size_t)B * T, k = (size_t)cfg->topk, E = (size_t)cfg->E, C = (size_t)cfg->C, A = n * k;
        mdc_i_expert x = mdc_i_expert_of(cfg, cfg->L - 1, 0);
        size_t FF = (size_t)x.F1 + (size_t)x.F; /* GPT-2 4C + 4C; SwiGLU gate|up 2F + F */
        size_t state = (n * E + n + n * k) + (2 * A * C + A * FF + 4), work = n * k + n * E + A * FF + A * C + 4;
        size_t Fs = cfg->shared_ffn > 0 ? (size_t)cfg->shared_ffn : 0;
        /* beside the routed backward's work, one at a time: DeepSeek's gradient to s (ds), then the
         * shared expert's backward */
        size_t ds = cfg->router == MDC_ROUTER_SIGMOID ? n * E + 4 : 0, sw = 0;
        if (Fs) /* the shared expert: gate|up, SwiGLU, output, scale */
            state += n * (3 * Fs + C + 1) + 4, sw = n * C + n + 3 * n * Fs + 2 * n * C + 4;
        if (cfg->router == MDC_ROUTER_SIGMOID) state += n * E; /* DeepSeek's s, kept */
        work += ds > sw ? ds : sw;
        m.acts += ((size_t)mdc_i_moe_before(cfg, cfg->L) * state + work) * sizeof(float);
    }
    m.total = m.params + m.grads + m.optim + m.acts;
    return m;
}

int mdc_gpt2_attention_tiled(const mdc_gpt2_config *c, int T) { return mdc_i_attn_tiled(c, T); }

double mdc_gpt2_step_flops(const mdc_gpt2_config *c, int B, int T) {
    if (mdc_i_family(c)) return mdc_i_family_step_flops(c, B, T);
    double N = (double)B * T, C = c->C, V = c->V, Vp = c->Vp, hs = C / c->H, BH = (double)B * c->H;
    double pc = 0.5 * (double)T * (T + 1), P = (double)mdc_gpt2_param_floats(c);
    int tiled = mdc_i_attn_tiled(c, T);
    /* the MLP's part of a block (forward, backward), then the rest */
    double mlp_f = (2 * N * C * 4 * C + N * 4 * C) + 10 * N * 4 * C + (2 * N * 4 * C * C + 2 * N * C);
    double mlp_b = (4 * N * 4 * C * C + N * C) + 16 * N * 4 * C + (4 * N * C * 4 * C + N * 4 * C);
    double layer_f = 8 * N * C + (2 * N * C * 3 * C + N * 3 * C) + BH * (4 * hs + 5) * pc +
                     (2 * N * C * C + 2 * N * C) + 8 * N * C;
    double attn_b = tiled ? BH * ((10 * hs + 4) * pc + 2.0 * T * hs) : BH * (8 * hs + 4) * pc;
    double layer_b = 14 * N * C + (4 * N * C * C + N * C) + attn_b + (4 * N * C * 3 * C + N * 3 * C) + 14 * N * C;
    /* a MoE block (dropless): k experts per token, the router (product and softmax) and the combine */
    double E = c->E, k = c->topk, moe = mdc_i_moe_before(c, c->L);
    double moe_f = k * mlp_f + 2 * N * C * E + 5 * N * E + 2 * N * k * C;
    double moe_b = k * mlp_b + 4 * N * C * E + 8 * N * E + 4 * N * k * C;
    double fwd = N * C + c->L * layer_f + (c->L - moe) * mlp_f + moe * moe_f + 8 * N * C + 2 * N * C * Vp + 4 * N * V +
                 N;
    double bwd = 3 * N * V + N + 4 * N * C * Vp + 14 * N * C + c->L * layer_b + (c->L - moe) * mlp_b + moe * moe_b +
                 2 * N * C;
    return fwd + bwd + 2 * P + 15 * P;
}

/* ---- the model ------------------------------------------------------------------------------ */

/* Parameters/gradients in plain host memory when a flag says so (not charged: a ZeRO stage
 * charges what is really resident). */
static mdc_status state_alloc(mdc_gpt2 *m, float **p, size_t bytes, mdc_mem_category cat, const char *name,
                              unsigned host_flag) {
    if (!(m->flags & host_flag)) return mdc_dev_alloc(m->dev, (void **)p, bytes, cat, name);
    *p = mdc_host_array(bytes);
    return *p ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "host memory for '%s' (%zu bytes)", name, bytes);
}
static void state_free(mdc_gpt2 *m, float *p, unsigned host_flag) {
    if (m->flags & host_flag) mdc_host_array_free(p, (m->floats ? m->floats : 1) * sizeof(float));
    else mdc_dev_free(m->dev, p);
}

int mdc_gpt2_unit_count(const mdc_gpt2_config *cfg) { return cfg->L + 2; }

void mdc_gpt2_set_hooks(mdc_gpt2 *m, const mdc_gpt2_hooks *h) {
    if (h) m->hooks = *h;
    else memset(&m->hooks, 0, sizeof m->hooks);
}

mdc_status mdc_gpt2_create(mdc_gpt2 **out, mdc_device *dev, const mdc_gpt2_config *cfg, int B, int T) {
    return mdc_gpt2_create_flags(out, dev, cfg, B, T, 0);
}

mdc_status mdc_gpt2_create_flags(mdc_gpt2 **out, mdc_device *dev, const mdc_gpt2_config *cfg_in, int B, int T,
                                 unsigned flags) {
    mdc_gpt2_config cfg = *cfg_in;
    *out = NULL;
    mdc_status st = mdc_gpt2_config_check(&cfg);
    if (st) return st;
    mdc_gpt2_part part = mdc_gpt2_part_serial(&cfg);
    return mdc_gpt2_create_part(out, dev, &cfg, &part, NULL, B, T, flags);
}

mdc_status mdc_gpt2_create_part(mdc_gpt2 **out, mdc_device *dev, const mdc_gpt2_config *cfg_in,
                                const mdc_gpt2_part *part, const mdc_gpt2_comm *comm, int B, int T, unsigned flags) {
    *out = NULL;
    mdc_gpt2_config cfg = *cfg_in;
    mdc_status st = mdc_gpt2_config_check(&cfg);
    if (st) return st;
    if (B <= 0) return mdc_fail(MDC_ERR_INVALID, "--batch: batch size %d must be positive", B);
    if (T <= 0 || T > cfg.T)
        return mdc_fail(MDC_ERR_INVALID, "--seq: sequence length %d must be in [1, context %d]", T, cfg.T);
    if ((st = mdc_gpt2_part_check(part, &cfg, T))) return st;
    if (part->tp > 1 && !comm)
        return mdc_fail(MDC_ERR_INVALID, "mdc_gpt2_create_part: --tp %d needs communication points", part->tp);
    if (!dev) return mdc_fail(MDC_ERR_INVALID, "mdc_gpt2_create: no device");
    mdc_gpt2 *m = calloc(1, sizeof *m);
    if (!m) return mdc_fail(MDC_ERR_OOM_HOST, "mdc_gpt2_create: out of host memory");
    m->cfg = cfg, m->part = *part, m->comm = part->tp > 1 ? comm : NULL, m->dev = dev, m->flags = flags;
    if (!(m->ops = calloc(1, sizeof *m->ops))) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "mdc_gpt2_create: out of host memory");
        goto fail;
    }
    mdc_i_install(m);
    if ((st = mdc_i_layout_build(m)) || (st = mdc_i_moe_alloc(m))) goto fail;
    int master = (flags & MDC_GPT2_MASTER) != 0; /* a mixed-precision master: optimizer state */
    if ((st = state_alloc(m, &m->params, m->floats * sizeof(float), master ? MDC_MEM_OPTIM : MDC_MEM_PARAMS,
                          master ? "params (fp32 master)" : "params", MDC_GPT2_HOST_PARAMS)))
        goto fail;
    m->acts_B = B, m->acts_T = T;
    if (!(flags & MDC_GPT2_LAZY_ACTS) && (st = mdc_gpt2_acts_create(&m->acts, m, B, T))) goto fail;
    *out = m;
    return MDC_OK;
fail:
    mdc_gpt2_free(m);
    return st;
}

void mdc_gpt2_free(mdc_gpt2 *m) {
    if (!m) return;
    mdc_i_exact_free(m);
    mdc_i_precision_free(m);
    mdc_gpt2_acts_free(m->acts);
    state_free(m, m->params, MDC_GPT2_HOST_PARAMS);
    state_free(m, m->grads, MDC_GPT2_HOST_GRADS);
    mdc_dev_free(m->dev, m->m);
    mdc_dev_free(m->dev, m->v);
    free(m->tensors), free(m->tensor_of), free(m->unit_off), free(m->unit_count);
    free(m->moe.bias), free(m->moe.counts), free(m->moe.lb_cnt), free(m->moe.lb_w);
    free(m->ops);
    free(m);
}

const mdc_gpt2_config *mdc_gpt2_get_config(const mdc_gpt2 *m) { return &m->cfg; }

void mdc_gpt2_set_spelling(mdc_gpt2 *m, mdc_gpt2_spelling s) { m->spelling = s; }

const char *mdc_gpt2_spelled(const mdc_gpt2 *m, const mdc_param_tensor *p, char *buf, size_t cap) {
    int embed = !strcmp(p->name, "wte") || !strcmp(p->name, "wpe");
    snprintf(buf, cap, "%s%s%s", m->spelling.prefixed ? "transformer." : "", p->name,
             embed && !m->spelling.table_embed ? ".weight" : "");
    return buf;
}
mdc_device *mdc_gpt2_device(const mdc_gpt2 *m) { return m->dev; }
float *mdc_gpt2_params(mdc_gpt2 *m) { return m->params; }
float *mdc_gpt2_grads(mdc_gpt2 *m) { return m->grads; }
float *mdc_gpt2_adam_m(mdc_gpt2 *m) { return m->m; }
float *mdc_gpt2_adam_v(mdc_gpt2 *m) { return m->v; }
int mdc_gpt2_adam_step(const mdc_gpt2 *m) { return m->t; }
unsigned mdc_gpt2_flags(const mdc_gpt2 *m) { return m->flags; }

mdc_status mdc_gpt2_set_dropout(mdc_gpt2 *m, float p, uint64_t seed) {
    if (!(p >= 0 && p < 1)) return mdc_fail(MDC_ERR_INVALID, "--dropout %g: must be in [0, 1)", p);
    int before = mdc_i_acts_needs(m);
    m->drop_p = p, m->drop_seed = seed;
    return mdc_i_acts_refresh(m, before);
}

mdc_status mdc_i_acts_refresh(mdc_gpt2 *m, int before) {
    if (mdc_i_acts_needs(m) == before || !m->acts) return MDC_OK;
    /* the default activation set gains (or loses) the buffers a mode needs */
    mdc_gpt2_acts *a = m->acts;
    int B = a->maxB, T = a->maxT;
    mdc_gpt2_acts_free(a);
    m->acts = NULL;
    return mdc_gpt2_acts_create(&m->acts, m, B, T);
}

void mdc_gpt2_set_dropout_step(mdc_gpt2 *m, uint64_t step) { m->drop_step = step; }

mdc_status mdc_gpt2_set_recompute(mdc_gpt2 *m, int mode) {
    if (mode < MDC_RECOMPUTE_NONE || mode > MDC_RECOMPUTE_FULL)
        return mdc_fail(MDC_ERR_INVALID, "--recompute: mode %d (none, selective or full)", mode);
    int before = mdc_i_acts_needs(m);
    m->rc.mode = mode;
    return mdc_i_acts_refresh(m, before);
}
int mdc_gpt2_get_recompute(const mdc_gpt2 *m) { return m->rc.mode; }

mdc_status mdc_gpt2_set_cp(mdc_gpt2 *m, const mdc_gpt2_cp *cp) {
    int before = mdc_i_acts_needs(m);
    m->cp = cp && cp->c > 1 ? cp : NULL;
    mdc_i_install(m);
    return mdc_i_acts_refresh(m, before);
}
const mdc_gpt2_cp *mdc_gpt2_get_cp(const mdc_gpt2 *m) { return m->cp; }
mdc_gpt2_acts *mdc_gpt2_default_acts(mdc_gpt2 *m) { return m->acts; }
mdc_status mdc_gpt2_default_acts_create(mdc_gpt2 *m) {
    return m->acts ? MDC_OK : mdc_gpt2_acts_create(&m->acts, m, m->acts_B, m->acts_T);
}
const float *mdc_gpt2_logits(const mdc_gpt2 *m) { return mdc_gpt2_acts_logits(m->acts); }
const float *mdc_gpt2_losses(const mdc_gpt2 *m) { return mdc_gpt2_acts_losses(m->acts); }

static mdc_status alloc_optim(mdc_gpt2 *m) {
    size_t bytes = m->floats * sizeof(float);
    mdc_status st = MDC_OK;
    if (!m->m) st = mdc_dev_alloc(m->dev, (void **)&m->m, bytes, MDC_MEM_OPTIM, "adam.m");
    if (!st && !m->v) st = mdc_dev_alloc(m->dev, (void **)&m->v, bytes, MDC_MEM_OPTIM, "adam.v");
    return st;
}

mdc_status mdc_gpt2_set_adam_step(mdc_gpt2 *m, int t) {
    if (t < 0) return mdc_fail(MDC_ERR_INVALID, "AdamW step %d < 0", t);
    mdc_status st = alloc_optim(m);
    if (st) return st;
    m->t = t;
    return MDC_OK;
}

/* The serial forward: one micro-batch through the block API on the default activation set. */
mdc_status mdc_gpt2_forward(mdc_gpt2 *m, const int *inputs, const int *targets, int B, int T, float *loss) {
    mdc_gpt2_acts *a = m->acts;
    mdc_status st = mdc_gpt2_set_batch(a, inputs, targets, B, T);
    if (!st && mdc_gpt2_lb_on(m)) st = mdc_i_moe_lb_serial(m, 1, 0); /* its batch is the global batch */
    if (!st) st = mdc_gpt2_embed_forward(m, a);
    for (int l = a->lo; !st && l < a->hi; l++) st = mdc_gpt2_block_forward(m, a, l);
    double sum = 0;
    if (!st) st = mdc_gpt2_head_forward(m, a, &sum);
    if (mdc_gpt2_lb_on(m)) mdc_i_moe_lb_serial(m, 0, (double)B * T);
    if (st) return st;
    m->loss = targets ? (float)((sum + a->moe_loss) / ((double)B * T)) : -1.0f; /* the objective: CE + aux losses */
    if (loss) *loss = m->loss;
    return MDC_OK;
}

mdc_status mdc_gpt2_zero_grad(mdc_gpt2 *m) {
    size_t bytes = m->floats * sizeof(float);
    if (m->x.blk) {
        mdc_xsum_clear(&m->x.g);
        mdc_exact_clear(&m->x.loss);
    }
    memset(&m->moe.st, 0, sizeof m->moe.st);
    if (m->moe.counts) memset(m->moe.counts, 0, sizeof(double) * (size_t)mdc_gpt2_moe_blocks(&m->cfg) * m->cfg.E);
    mdc_exact_clear(&m->moe.xloss);
    if (!m->grads && m->pc.grad16 && !(m->flags & MDC_GPT2_HOST_GRADS)) /* a bf16 buffer: 2 bytes charged */
        return mdc_dev_alloc_held(m->dev, (void **)&m->grads, bytes ? bytes : 4, bytes / 2, MDC_MEM_GRADS,
                                  "grads (bf16)");
    if (!m->grads) return state_alloc(m, &m->grads, bytes, MDC_MEM_GRADS, "grads", MDC_GPT2_HOST_GRADS);
    if (!mdc_host_dry()) memset(m->grads, 0, bytes);
    return MDC_OK;
}

mdc_status mdc_gpt2_backward(mdc_gpt2 *m) {
    if (!m->acts->have_targets) return mdc_fail(MDC_ERR_INVALID, "backward: the last forward had no targets");
    return mdc_gpt2_backward_scaled(m, 1.0f / ((float)m->acts->B * (float)m->acts->T));
}

mdc_status mdc_gpt2_backward_scaled(mdc_gpt2 *m, float dloss) {
    mdc_gpt2_acts *a = m->acts;
    if (!a->have_targets) return mdc_fail(MDC_ERR_INVALID, "backward: the last forward had no targets");
    mdc_status st = m->grads ? MDC_OK : mdc_gpt2_zero_grad(m);
    m->moe.dloss = dloss;
    if (!st) st = mdc_gpt2_head_backward(m, a, dloss);
    for (int l = a->hi - 1; !st && l >= a->lo; l--) st = mdc_gpt2_block_backward(m, a, l, MDC_BWD_BOTH);
    if (!st) st = mdc_gpt2_embed_backward(m, a);
    if (!st) st = mdc_gpt2_grad_round(m); /* a sink of sums: rounded once */
    return st;
}

void mdc_adamw_config_default(mdc_adamw_config *c) {
    c->lr = 3e-4f;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->weight_decay = 0.1f;
    c->grad_clip = 1.0f;
}

double mdc_gpt2_grad_sumsq(mdc_gpt2 *m) { return mdc_grad_sumsq(m->dev, m->grads, m->floats); }

mdc_status mdc_gpt2_adamw_all(mdc_gpt2 *m, const mdc_adamw_config *o, float scale) {
    mdc_status st = alloc_optim(m);
    if (st) return st;
    m->t++;
    for (int i = 0; i < m->ntensors; i++) {
        const mdc_param_tensor *t = &m->tensors[i];
        mdc_adamw_update(m->dev, m->params + t->offset, m->m + t->offset, m->v + t->offset, m->grads + t->offset,
                         t->alloc, o->lr, o->beta1, o->beta2, o->eps, t->decay ? o->weight_decay : 0.0f, scale, m->t);
    }
    return MDC_OK;
}

mdc_status mdc_gpt2_update(mdc_gpt2 *m, const mdc_adamw_config *o, float *grad_norm) {
    if (!m->grads) return mdc_fail(MDC_ERR_INVALID, "update: no gradients (run backward first)");
    double norm = sqrt(mdc_gpt2_grad_sumsq(m));
    if (grad_norm) *grad_norm = (float)norm;
    return mdc_gpt2_adamw_all(m, o, mdc_clip_scale(norm, o->grad_clip));
}
