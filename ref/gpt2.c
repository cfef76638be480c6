/* The serial GPT-2 reference: configs, the parameter table, memory, forward, backward, update.
 *
 * One layer (x the residual stream, (B,T,C)):
 *   ln1 = LN(x); qkv = ln1 @ Wqkv + bqkv; y = attention(qkv); x2 = x + y @ Wo + bo
 *   ln2 = LN(x2); h = gelu(ln2 @ Wfc + bfc); x' = x2 + h @ Wp + bp
 * then lnf = LN(x_L); logits = lnf @ wte^T; loss = mean cross-entropy.
 * The output projections are fused with the residual adds (mdc_matmul_residual_forward).
 * Attention: the materialized kernel when the creation T <= MDC_GPT2_TILED_T (fast, B*H*T*T
 * floats per layer), the tiled online-softmax kernel above it (O(T) per row).
 * Memory: see mdc_gpt2_memory_need; every buffer is a device allocation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/kernels.h"
#include "minidc/model.h"

enum { MDC_GPT2_TILED_T = 256 };

/* per-layer tensors, in file order */
enum { LN1W, LN1B, QKVW, QKVB, ATTPW, ATTPB, LN2W, LN2B, FCW, FCB, FCPW, FCPB, NLT };
static const char *const layer_names[NLT] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
    "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
    "mlp.c_proj.weight", "mlp.c_proj.bias"};

/* ---- configs ------------------------------------------------------------------------------ */

int mdc_gpt2_padded_vocab(int V) { return (V + 127) / 128 * 128; }

mdc_status mdc_gpt2_config_named(const char *name, mdc_gpt2_config *cfg, int *batch) {
    static const struct { const char *name; mdc_gpt2_config c; int batch; } named[] = {
        {"tiny", {512, 512, 64, 2, 4, 128}, 24},
        {"small", {4096, 4096, 128, 4, 8, 256}, 12},
        {"gpt2", {50257, 50304, 1024, 12, 12, 768}, 12},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (name && !strcmp(name, named[i].name)) {
            *cfg = named[i].c;
            if (batch) *batch = named[i].batch;
            return MDC_OK;
        }
    return mdc_fail(MDC_ERR_INVALID, "--config: unknown config '%s' (known: tiny small gpt2)",
                    name ? name : "(null)");
}

mdc_status mdc_gpt2_config_check(mdc_gpt2_config *c) {
    if (c->V <= 0) return mdc_fail(MDC_ERR_INVALID, "--vocab: vocabulary size %d must be positive", c->V);
    if (c->T <= 0) return mdc_fail(MDC_ERR_INVALID, "--ctx: context length %d must be positive", c->T);
    if (c->L <= 0) return mdc_fail(MDC_ERR_INVALID, "--layers: %d layers; must be positive", c->L);
    if (c->H <= 0) return mdc_fail(MDC_ERR_INVALID, "--heads: %d heads; must be positive", c->H);
    if (c->C <= 0) return mdc_fail(MDC_ERR_INVALID, "--channels: %d channels; must be positive", c->C);
    if (c->C % c->H)
        return mdc_fail(MDC_ERR_INVALID, "--heads: %d heads do not divide --channels %d", c->H, c->C);
    if (c->V > (1 << 30) || c->T > (1 << 20) || c->C > (1 << 16) || c->L > 4096)
        return mdc_fail(MDC_ERR_INVALID, "model sizes too large (V %d, T %d, C %d, L %d)", c->V, c->T, c->C, c->L);
    if (c->Vp == 0) c->Vp = mdc_gpt2_padded_vocab(c->V);
    if (c->Vp < c->V) return mdc_fail(MDC_ERR_INVALID, "padded vocabulary %d < vocabulary %d", c->Vp, c->V);
    return MDC_OK;
}

/* ---- the parameter table -------------------------------------------------------------------- */

int mdc_gpt2_tensor_count(const mdc_gpt2_config *cfg) { return 4 + NLT * cfg->L; }

static size_t layer_floats(const mdc_gpt2_config *c) {
    size_t C = (size_t)c->C;
    return 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
}

mdc_status mdc_gpt2_tensor_at(const mdc_gpt2_config *cfg, int i, mdc_param_tensor *t) {
    int n = mdc_gpt2_tensor_count(cfg);
    if (i < 0 || i >= n) return mdc_fail(MDC_ERR_INVALID, "tensor index %d out of range [0, %d)", i, n);
    memset(t, 0, sizeof *t);
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
        t->offset = wte + wpe + (size_t)cfg->L * layer_floats(cfg) + (i == n - 1 ? C : 0);
        t->alloc = C;
    } else {
        int l = (i - 2) / NLT, k = (i - 2) % NLT;
        static const int rows[NLT] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1};
        static const int cols[NLT] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
        static const int is2d[NLT] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0};
        size_t off = wte + wpe + (size_t)l * layer_floats(cfg);
        for (int j = 0; j < k; j++) off += (is2d[j] ? rows[j] * C : 1) * (cols[j] * C);
        snprintf(t->name, sizeof t->name, "h.%d.%s", l, layer_names[k]);
        t->offset = off;
        if (is2d[k]) {
            t->ndim = 2, t->shape[0] = rows[k] * cfg->C, t->shape[1] = cols[k] * cfg->C, t->decay = 1;
        } else {
            t->ndim = 1, t->shape[0] = cols[k] * cfg->C;
        }
        t->alloc = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
    }
    t->numel = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
    return MDC_OK;
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
    return (size_t)c->Vp * c->C + (size_t)c->T * c->C + (size_t)c->L * layer_floats(c) + 2 * (size_t)c->C;
}
size_t mdc_gpt2_param_count(const mdc_gpt2_config *c) {
    return mdc_gpt2_param_floats(c) - (size_t)(c->Vp - c->V) * c->C;
}

/* ---- activations ------------------------------------------------------------------------------ */

/* Offsets (floats) of every activation buffer in the one activation allocation. */
typedef struct {
    size_t encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, att, res2, ln2, ln2_mean, ln2_rstd, fch,
        fchg, res3;                    /* per-layer buffers: base of layer 0; stride below */
    size_t layer_stride;
    size_t lnf, lnf_mean, lnf_rstd, logits, losses, lse;
    /* backward work space (shared by the layers) */
    size_t dres, dln, datty, dbig, dbig2, attscratch;
    size_t total;
    int tiled;
} acts_layout;

static acts_layout layout_acts(const mdc_gpt2_config *c, int B, int T) {
    acts_layout a;
    memset(&a, 0, sizeof a);
    size_t N = (size_t)B * T, C = (size_t)c->C, H = (size_t)c->H;
    a.tiled = T > MDC_GPT2_TILED_T;
    size_t attn = a.tiled ? (size_t)B * H * T : (size_t)B * H * T * T;
    size_t off = 0;
#define TAKE(field, n) (a.field = off, off += ((n) + 15) / 16 * 16)
    TAKE(encoded, N * C);
    size_t l0 = off;
    TAKE(ln1, N * C); TAKE(ln1_mean, N); TAKE(ln1_rstd, N); TAKE(qkv, 3 * N * C); TAKE(atty, N * C);
    TAKE(att, attn); TAKE(res2, N * C); TAKE(ln2, N * C); TAKE(ln2_mean, N); TAKE(ln2_rstd, N);
    TAKE(fch, 4 * N * C); TAKE(fchg, 4 * N * C); TAKE(res3, N * C);
    a.layer_stride = off - l0;
    off = l0 + a.layer_stride * (size_t)c->L;
    TAKE(lnf, N * C); TAKE(lnf_mean, N); TAKE(lnf_rstd, N);
    TAKE(logits, N * (size_t)c->Vp); TAKE(losses, N); TAKE(lse, N);
    TAKE(dres, N * C); TAKE(dln, N * C); TAKE(datty, N * C); TAKE(dbig, 4 * N * C); TAKE(dbig2, 4 * N * C);
    TAKE(attscratch, a.tiled ? 0 : (size_t)B * H * T * T);
#undef TAKE
    a.total = off;
    return a;
}

mdc_gpt2_memory mdc_gpt2_memory_need(const mdc_gpt2_config *cfg, int B, int T) {
    mdc_gpt2_memory m;
    size_t p = mdc_gpt2_param_floats(cfg) * sizeof(float);
    acts_layout a = layout_acts(cfg, B, T);
    m.params = p;
    m.grads = p;
    m.optim = 2 * p;
    m.acts = a.total * sizeof(float) + 2 * (size_t)B * T * sizeof(int);
    m.total = m.params + m.grads + m.optim + m.acts;
    return m;
}

double mdc_gpt2_step_flops(const mdc_gpt2_config *c, int B, int T) {
    double N = (double)B * T, C = c->C, V = c->V, Vp = c->Vp, hs = C / c->H, BH = (double)B * c->H;
    double pc = 0.5 * (double)T * (T + 1), P = (double)mdc_gpt2_param_floats(c);
    int tiled = T > MDC_GPT2_TILED_T;
    double layer_f = 8 * N * C + (2 * N * C * 3 * C + N * 3 * C) + BH * (4 * hs + 5) * pc +
                     (2 * N * C * C + 2 * N * C) + 8 * N * C + (2 * N * C * 4 * C + N * 4 * C) +
                     10 * N * 4 * C + (2 * N * 4 * C * C + 2 * N * C);
    double attn_b = tiled ? BH * ((10 * hs + 4) * pc + 2.0 * T * hs) : BH * (8 * hs + 4) * pc;
    double layer_b = (4 * N * 4 * C * C + N * C) + 16 * N * 4 * C + (4 * N * C * 4 * C + N * 4 * C) +
                     14 * N * C + (4 * N * C * C + N * C) + attn_b + (4 * N * C * 3 * C + N * 3 * C) +
                     14 * N * C;
    double fwd = N * C + c->L * layer_f + 8 * N * C + 2 * N * C * Vp + 4 * N * V + N;
    double bwd = 3 * N * V + N + 4 * N * C * Vp + 14 * N * C + c->L * layer_b + 2 * N * C;
    return fwd + bwd + 2 * P + 15 * P;
}

/* ---- the model ------------------------------------------------------------------------------ */

struct mdc_gpt2 {
    mdc_gpt2_config cfg;
    mdc_device *dev;
    int maxB, maxT, B, T, have_targets, t;
    float *params, *grads, *m, *v, *acts;
    int *inputs, *targets;
    acts_layout a;
    mdc_param_tensor *tensors;
    int ntensors;
    float loss;
    /* dp branch: data-parallel hooks (model.h, "hooks for the data-parallel schemes") */
    unsigned flags;
    mdc_gpt2_hooks hooks;
};

/* dp branch: parameters/gradients in plain host memory when a flag says so (not charged). */
static mdc_status state_alloc(mdc_gpt2 *m, float **p, size_t bytes, mdc_mem_category cat, const char *name,
                              unsigned host_flag) {
    if (!(m->flags & host_flag)) return mdc_dev_alloc(m->dev, (void **)p, bytes, cat, name);
    *p = calloc(1, bytes ? bytes : 1);
    return *p ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "host memory for '%s' (%zu bytes)", name, bytes);
}
static void state_free(mdc_gpt2 *m, float *p, unsigned host_flag) {
    if (m->flags & host_flag) free(p);
    else mdc_dev_free(m->dev, p);
}
#define HOOK(ev, unit)                                                                     \
    do {                                                                                   \
        if (m->hooks.fn) {                                                                 \
            mdc_status hook_st_ = m->hooks.fn(m->hooks.ctx, (ev), (unit));                 \
            if (hook_st_) return hook_st_;                                                 \
        }                                                                                  \
    } while (0)

int mdc_gpt2_unit_count(const mdc_gpt2_config *cfg) { return cfg->L + 2; }

void mdc_gpt2_unit_range(const mdc_gpt2_config *cfg, int unit, size_t *offset, size_t *count) {
    size_t emb = ((size_t)cfg->Vp + (size_t)cfg->T) * (size_t)cfg->C, lf = layer_floats(cfg);
    if (unit <= 0) *offset = 0, *count = emb;
    else if (unit <= cfg->L) *offset = emb + (size_t)(unit - 1) * lf, *count = lf;
    else *offset = emb + (size_t)cfg->L * lf, *count = 2 * (size_t)cfg->C;
}

void mdc_gpt2_set_hooks(mdc_gpt2 *m, const mdc_gpt2_hooks *h) {
    if (h) m->hooks = *h;
    else memset(&m->hooks, 0, sizeof m->hooks);
}

mdc_status mdc_gpt2_create(mdc_gpt2 **out, mdc_device *dev, const mdc_gpt2_config *cfg_in, int B, int T) {
    return mdc_gpt2_create_flags(out, dev, cfg_in, B, T, 0);
}

mdc_status mdc_gpt2_create_flags(mdc_gpt2 **out, mdc_device *dev, const mdc_gpt2_config *cfg_in, int B, int T,
                                  unsigned flags) {
    *out = NULL;
    mdc_gpt2_config cfg = *cfg_in;
    mdc_status st = mdc_gpt2_config_check(&cfg);
    if (st) return st;
    if (B <= 0) return mdc_fail(MDC_ERR_INVALID, "--batch: batch size %d must be positive", B);
    if (T <= 0 || T > cfg.T)
        return mdc_fail(MDC_ERR_INVALID, "--seq: sequence length %d must be in [1, context %d]", T, cfg.T);
    if (!dev) return mdc_fail(MDC_ERR_INVALID, "mdc_gpt2_create: no device");
    mdc_gpt2 *m = calloc(1, sizeof *m);
    if (!m) return mdc_fail(MDC_ERR_OOM_HOST, "mdc_gpt2_create: out of host memory");
    m->cfg = cfg;
    m->dev = dev;
    m->flags = flags; /* dp branch */
    m->maxB = B;
    m->maxT = T;
    m->ntensors = mdc_gpt2_tensor_count(&cfg);
    m->tensors = calloc((size_t)m->ntensors, sizeof *m->tensors);
    if (!m->tensors) { st = mdc_fail(MDC_ERR_OOM_HOST, "mdc_gpt2_create: out of host memory"); goto fail; }
    for (int i = 0; i < m->ntensors; i++) mdc_gpt2_tensor_at(&cfg, i, &m->tensors[i]);
    m->a = layout_acts(&cfg, B, T);
    st = state_alloc(m, &m->params, mdc_gpt2_param_floats(&cfg) * sizeof(float), MDC_MEM_PARAMS, "params",
                     MDC_GPT2_HOST_PARAMS); /* dp branch: flag */
    if (st) goto fail;
    st = mdc_dev_alloc(dev, (void **)&m->acts, m->a.total * sizeof(float), MDC_MEM_ACTS, "activations");
    if (st) goto fail;
    st = mdc_dev_alloc(dev, (void **)&m->inputs, 2 * (size_t)B * T * sizeof(int), MDC_MEM_ACTS, "tokens");
    if (st) goto fail;
    m->targets = m->inputs + (size_t)B * T;
    *out = m;
    return MDC_OK;
fail:
    mdc_gpt2_free(m);
    return st;
}

void mdc_gpt2_free(mdc_gpt2 *m) {
    if (!m) return;
    state_free(m, m->params, MDC_GPT2_HOST_PARAMS); /* dp branch: flags */
    state_free(m, m->grads, MDC_GPT2_HOST_GRADS);
    mdc_dev_free(m->dev, m->m);
    mdc_dev_free(m->dev, m->v);
    mdc_dev_free(m->dev, m->acts);
    mdc_dev_free(m->dev, m->inputs);
    free(m->tensors);
    free(m);
}

/* splitmix64: a counter-based generator (the value at a counter depends on nothing else). */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* N(0,1) for element `i` of stream `seed` (Box-Muller on two 53-bit uniforms, double). */
static float normal_at(uint64_t seed, uint64_t i) {
    uint64_t a = mix64(seed * 0x632be59bd9b4e019ull ^ mix64(2 * i)), b = mix64(a ^ mix64(2 * i + 1));
    double u1 = ((double)(a >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
    double u2 = (double)(b >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void mdc_gpt2_init(mdc_gpt2 *m, uint64_t seed) {
    float resid = 0.02f / sqrtf(2.0f * m->cfg.L);
    for (int i = 0; i < m->ntensors; i++) {
        const mdc_param_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        memset(p, 0, t->alloc * sizeof(float));
        const char *dot = strrchr(t->name, '.');
        int is_ln = strstr(t->name, "ln_") != NULL;
        if (is_ln) {
            if (!strcmp(dot, ".weight")) for (size_t j = 0; j < t->numel; j++) p[j] = 1.0f;
        } else if (t->ndim == 2) {
            float sd = strstr(t->name, "c_proj.weight") ? resid : 0.02f;
            long n = (long)t->numel;
            uint64_t base = t->offset;
#pragma omp parallel for schedule(static)
            for (long j = 0; j < n; j++) p[j] = sd * normal_at(seed, base + (uint64_t)j);
        }
    }
    mdc_dev_copy(m->dev, (double)mdc_gpt2_param_floats(&m->cfg) * 4, MDC_LINK_PCIE);
}

const mdc_gpt2_config *mdc_gpt2_get_config(const mdc_gpt2 *m) { return &m->cfg; }
mdc_device *mdc_gpt2_device(const mdc_gpt2 *m) { return m->dev; }
float *mdc_gpt2_params(mdc_gpt2 *m) { return m->params; }
float *mdc_gpt2_grads(mdc_gpt2 *m) { return m->grads; }
float *mdc_gpt2_adam_m(mdc_gpt2 *m) { return m->m; }
float *mdc_gpt2_adam_v(mdc_gpt2 *m) { return m->v; }
int mdc_gpt2_adam_step(const mdc_gpt2 *m) { return m->t; }
const float *mdc_gpt2_logits(const mdc_gpt2 *m) { return m->acts + m->a.logits; }
const float *mdc_gpt2_losses(const mdc_gpt2 *m) { return m->acts + m->a.losses; }

static mdc_status alloc_optim(mdc_gpt2 *m) {
    size_t bytes = mdc_gpt2_param_floats(&m->cfg) * sizeof(float);
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

/* pointer to layer l's tensor k in base (params or grads) */
static float *lp(const mdc_gpt2 *m, float *base, int l, int k) {
    return base + m->tensors[2 + l * NLT + k].offset;
}
static float *act(const mdc_gpt2 *m, size_t off, int l) {
    return m->acts + off + (size_t)l * m->a.layer_stride;
}

mdc_status mdc_gpt2_forward(mdc_gpt2 *m, const int *inputs, const int *targets, int B, int T, float *loss) {
    const mdc_gpt2_config *c = &m->cfg;
    if (B <= 0 || B > m->maxB)
        return mdc_fail(MDC_ERR_INVALID, "forward: batch %d not in [1, %d] (the creation batch)", B, m->maxB);
    if (T <= 0 || T > m->maxT)
        return mdc_fail(MDC_ERR_INVALID, "forward: sequence %d not in [1, %d] (the creation length)", T, m->maxT);
    size_t N = (size_t)B * T;
    for (size_t i = 0; i < N; i++) {
        if (inputs[i] < 0 || inputs[i] >= c->V)
            return mdc_fail(MDC_ERR_INVALID, "forward: input token %d at position %zu not in [0, %d)", inputs[i], i, c->V);
        if (targets && (targets[i] < 0 || targets[i] >= c->V))
            return mdc_fail(MDC_ERR_INVALID, "forward: target %d at position %zu not in [0, %d)", targets[i], i, c->V);
    }
    /* the attention kernel was chosen for the creation T; keep the buffers' layout */
    memcpy(m->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(m->targets, targets, N * sizeof(int));
    mdc_dev_copy(m->dev, (double)N * sizeof(int) * (targets ? 2 : 1), MDC_LINK_PCIE);
    m->B = B, m->T = T, m->have_targets = targets != NULL;
    int C = c->C, H = c->H, L = c->L, n = (int)N;
    mdc_device *d = m->dev;
    float *P = m->params;
    const acts_layout *a = &m->a;
    /* strides of per-layer buffers are set for maxB x maxT; smaller batches use a prefix */
    HOOK(MDC_HOOK_PRE_FORWARD, 0); /* dp branch */
    mdc_encoder_forward(d, m->acts + a->encoded, m->inputs, P, P + m->tensors[1].offset, B, T, C);
    HOOK(MDC_HOOK_POST_FORWARD, 0);
    float *x = m->acts + a->encoded;
    for (int l = 0; l < L; l++) {
        HOOK(MDC_HOOK_PRE_FORWARD, 1 + l); /* dp branch */
        float *ln1 = act(m, a->ln1, l), *qkv = act(m, a->qkv, l), *atty = act(m, a->atty, l);
        float *res2 = act(m, a->res2, l), *ln2 = act(m, a->ln2, l), *fch = act(m, a->fch, l);
        float *fchg = act(m, a->fchg, l), *res3 = act(m, a->res3, l);
        mdc_layernorm_forward(d, ln1, act(m, a->ln1_mean, l), act(m, a->ln1_rstd, l), x,
                              lp(m, P, l, LN1W), lp(m, P, l, LN1B), n, C);
        mdc_matmul_forward(d, qkv, ln1, lp(m, P, l, QKVW), lp(m, P, l, QKVB), n, C, 3 * C);
        if (a->tiled) mdc_attention_forward_tiled(d, atty, act(m, a->att, l), qkv, B, T, C, H);
        else mdc_attention_forward(d, atty, act(m, a->att, l), qkv, B, T, C, H);
        mdc_matmul_residual_forward(d, res2, x, atty, lp(m, P, l, ATTPW), lp(m, P, l, ATTPB), n, C, C);
        mdc_layernorm_forward(d, ln2, act(m, a->ln2_mean, l), act(m, a->ln2_rstd, l), res2,
                              lp(m, P, l, LN2W), lp(m, P, l, LN2B), n, C);
        mdc_matmul_forward(d, fch, ln2, lp(m, P, l, FCW), lp(m, P, l, FCB), n, C, 4 * C);
        mdc_gelu_forward(d, fchg, fch, N * 4 * C);
        mdc_matmul_residual_forward(d, res3, res2, fchg, lp(m, P, l, FCPW), lp(m, P, l, FCPB), n, 4 * C, C);
        x = res3;
        HOOK(MDC_HOOK_POST_FORWARD, 1 + l); /* dp branch */
    }
    float *lnf = m->acts + a->lnf, *logits = m->acts + a->logits;
    int nt = m->ntensors;
    HOOK(MDC_HOOK_PRE_FORWARD, L + 1); /* dp branch: the head (ln_f and the tied wte) */
    mdc_layernorm_forward(d, lnf, m->acts + a->lnf_mean, m->acts + a->lnf_rstd, x,
                          P + m->tensors[nt - 2].offset, P + m->tensors[nt - 1].offset, n, C);
    mdc_lmhead_forward(d, logits, lnf, P, n, C, c->Vp);
    if (targets) {
        float *losses = m->acts + a->losses;
        mdc_crossentropy_forward(d, losses, m->acts + a->lse, logits, m->targets, n, c->V, c->Vp);
        double s = 0;
        for (size_t i = 0; i < N; i++) s += losses[i];
        m->loss = (float)(s / (double)N);
    } else {
        m->loss = -1.0f;
    }
    if (loss) *loss = m->loss;
    HOOK(MDC_HOOK_POST_FORWARD, L + 1); /* dp branch */
    return MDC_OK;
}

mdc_status mdc_gpt2_zero_grad(mdc_gpt2 *m) {
    size_t bytes = mdc_gpt2_param_floats(&m->cfg) * sizeof(float);
    if (!m->grads) return state_alloc(m, &m->grads, bytes, MDC_MEM_GRADS, "grads", MDC_GPT2_HOST_GRADS); /* dp: flag */
    memset(m->grads, 0, bytes);
    return MDC_OK;
}

mdc_status mdc_gpt2_backward(mdc_gpt2 *m) {
    if (!m->have_targets) return mdc_fail(MDC_ERR_INVALID, "backward: the last forward had no targets");
    return mdc_gpt2_backward_scaled(m, 1.0f / ((float)m->B * (float)m->T));
}

mdc_status mdc_gpt2_backward_scaled(mdc_gpt2 *m, float dloss) {
    if (!m->have_targets) return mdc_fail(MDC_ERR_INVALID, "backward: the last forward had no targets");
    if (!m->grads) {
        mdc_status st = mdc_gpt2_zero_grad(m);
        if (st) return st;
    }
    const mdc_gpt2_config *c = &m->cfg;
    const acts_layout *a = &m->a;
    int B = m->B, T = m->T, C = c->C, H = c->H, L = c->L, n = B * T, nt = m->ntensors;
    size_t N = (size_t)n;
    mdc_device *d = m->dev;
    float *P = m->params, *G = m->grads;
    float *logits = m->acts + a->logits, *dres = m->acts + a->dres, *dln = m->acts + a->dln;
    float *datty = m->acts + a->datty, *dbig = m->acts + a->dbig, *dbig2 = m->acts + a->dbig2;
    /* dlogits in place of the logits */
    HOOK(MDC_HOOK_PRE_BACKWARD, L + 1); /* dp branch */
    mdc_crossentropy_backward(d, logits, logits, m->acts + a->lse, m->targets, dloss, n, c->V, c->Vp);
    memset(dln, 0, N * C * sizeof(float));
    mdc_lmhead_backward(d, dln, G, logits, m->acts + a->lnf, P, n, C, c->Vp);
    memset(dres, 0, N * C * sizeof(float));
    float *xL = L > 0 ? act(m, a->res3, L - 1) : m->acts + a->encoded;
    mdc_layernorm_backward(d, dres, G + m->tensors[nt - 2].offset, G + m->tensors[nt - 1].offset, dln,
                           xL, P + m->tensors[nt - 2].offset, m->acts + a->lnf_mean, m->acts + a->lnf_rstd, n, C);
    HOOK(MDC_HOOK_POST_BACKWARD, L + 1); /* dp branch: ln_f's grads complete (wte's not yet) */
    for (int l = L - 1; l >= 0; l--) {
        HOOK(MDC_HOOK_PRE_BACKWARD, 1 + l); /* dp branch */
        float *x = l > 0 ? act(m, a->res3, l - 1) : m->acts + a->encoded;
        float *ln1 = act(m, a->ln1, l), *qkv = act(m, a->qkv, l), *atty = act(m, a->atty, l);
        float *res2 = act(m, a->res2, l), *ln2 = act(m, a->ln2, l), *fch = act(m, a->fch, l);
        float *fchg = act(m, a->fchg, l);
        /* MLP: dres is d(x'), which also flows straight to x2 through the residual */
        memset(dbig, 0, N * 4 * C * sizeof(float));
        mdc_matmul_backward(d, dbig, lp(m, G, l, FCPW), lp(m, G, l, FCPB), dres, fchg, lp(m, P, l, FCPW), n, 4 * C, C);
        memset(dbig2, 0, N * 4 * C * sizeof(float));
        mdc_gelu_backward(d, dbig2, fch, dbig, N * 4 * C);
        memset(dln, 0, N * C * sizeof(float));
        mdc_matmul_backward(d, dln, lp(m, G, l, FCW), lp(m, G, l, FCB), dbig2, ln2, lp(m, P, l, FCW), n, C, 4 * C);
        mdc_layernorm_backward(d, dres, lp(m, G, l, LN2W), lp(m, G, l, LN2B), dln, res2, lp(m, P, l, LN2W),
                               act(m, a->ln2_mean, l), act(m, a->ln2_rstd, l), n, C);
        /* attention */
        memset(datty, 0, N * C * sizeof(float));
        mdc_matmul_backward(d, datty, lp(m, G, l, ATTPW), lp(m, G, l, ATTPB), dres, atty, lp(m, P, l, ATTPW), n, C, C);
        memset(dbig, 0, N * 3 * C * sizeof(float));
        if (a->tiled)
            mdc_attention_backward_tiled(d, dbig, datty, atty, qkv, act(m, a->att, l), B, T, C, H);
        else
            mdc_attention_backward(d, dbig, m->acts + a->attscratch, datty, qkv, act(m, a->att, l), B, T, C, H);
        memset(dln, 0, N * C * sizeof(float));
        mdc_matmul_backward(d, dln, lp(m, G, l, QKVW), lp(m, G, l, QKVB), dbig, ln1, lp(m, P, l, QKVW), n, C, 3 * C);
        mdc_layernorm_backward(d, dres, lp(m, G, l, LN1W), lp(m, G, l, LN1B), dln, x, lp(m, P, l, LN1W),
                               act(m, a->ln1_mean, l), act(m, a->ln1_rstd, l), n, C);
        HOOK(MDC_HOOK_POST_BACKWARD, 1 + l); /* dp branch */
    }
    HOOK(MDC_HOOK_PRE_BACKWARD, 0); /* dp branch */
    mdc_encoder_backward(d, G, G + m->tensors[1].offset, dres, m->inputs, B, T, C);
    m->have_targets = 0; /* the logits are gone */
    HOOK(MDC_HOOK_POST_BACKWARD, 0); /* dp branch: wte and wpe complete */
    return MDC_OK;
}

void mdc_adamw_config_default(mdc_adamw_config *c) {
    c->lr = 3e-4f;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->weight_decay = 0.1f;
    c->grad_clip = 1.0f;
}

mdc_status mdc_gpt2_update(mdc_gpt2 *m, const mdc_adamw_config *o, float *grad_norm) {
    if (!m->grads) return mdc_fail(MDC_ERR_INVALID, "update: no gradients (run backward first)");
    mdc_status st = alloc_optim(m);
    if (st) return st;
    double norm = mdc_grad_norm(m->dev, m->grads, mdc_gpt2_param_floats(&m->cfg));
    if (grad_norm) *grad_norm = (float)norm;
    float scale = mdc_clip_scale(norm, o->grad_clip);
    m->t++;
    for (int i = 0; i < m->ntensors; i++) {
        const mdc_param_tensor *t = &m->tensors[i];
        mdc_adamw_update(m->dev, m->params + t->offset, m->m + t->offset, m->v + t->offset,
                         m->grads + t->offset, t->alloc, o->lr, o->beta1, o->beta2, o->eps,
                         t->decay ? o->weight_decay : 0.0f, scale, m->t);
    }
    return MDC_OK;
}
