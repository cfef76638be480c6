/* GPT-2 weights and checkpoints <-> the model's parameter table (include/minidc/weights.h).
 * Names are mapped to the model's table by mdc_gpt2_tensor_find after dropping the
 * "transformer." prefix and the ".weight" of the two embeddings (HF spells them
 * "wte.weight" and "wpe.weight"). Checkpoints (the moments, the state): datasets/checkpoint.c;
 * their checksums, verified here when a file is read: datasets/checkpoint_seal.c. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weights_internal.h"

#define PREFIX "transformer."

const char *mdc_gpt2_hf_name(const mdc_param_tensor *p) {
    if (!strcmp(p->name, "wte")) return "wte.weight";
    if (!strcmp(p->name, "wpe")) return "wpe.weight";
    return p->name;
}

const char *mdc_gpt2_canonical_name(const char *name, char *buf, size_t cap) {
    if (!strncmp(name, PREFIX, strlen(PREFIX))) name += strlen(PREFIX);
    if (!strcmp(name, "wte.weight")) name = "wte";
    else if (!strcmp(name, "wpe.weight")) name = "wpe";
    snprintf(buf, cap, "%s", name);
    return buf;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* HF buffers that are not parameters: the causal mask of each attention layer. */
static int is_hf_buffer(const char *canon) {
    return !strncmp(canon, "h.", 2) && (ends_with(canon, ".attn.bias") || ends_with(canon, ".attn.masked_bias"));
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static const mdc_tensor *find_canon(const mdc_tensorfile *tf, const char *want) {
    char buf[256];
    for (int i = 0; i < tf->count; i++)
        if (!strcmp(mdc_gpt2_canonical_name(tf->tensors[i].name, buf, sizeof buf), want)) return &tf->tensors[i];
    return NULL;
}

/* A model never recovers from a NaN or inf in its weights or AdamW moments (nor from v < 0:
 * sqrt(v) is NaN), and training on would only print `loss nan`: refuse the file instead,
 * naming the tensor and the first bad element. One pass over the converted floats. */
static mdc_status check_values(const char *label, const mdc_tensor *t, const float *x, size_t n, int nonneg) {
    for (size_t i = 0; i < n; i++) {
        if (isfinite(x[i]) && !(nonneg && x[i] < 0)) continue;
        const char *conv = t->dtype == MDC_TD_F32 ? "" : " as float32";
        if (isfinite(x[i]))
            return mdc_fail(MDC_ERR_FORMAT,
                            "%s: tensor '%s': element %zu is %.9g (AdamW's second moment v "
                            "cannot be negative)",
                            label, t->name, i, x[i]);
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': element %zu is %s%s", label, t->name, i,
                        isnan(x[i]) ? "nan"
                        : x[i] > 0  ? "inf"
                                    : "-inf",
                        conv);
    }
    return MDC_OK;
}

/* Converts file tensor t, which must have the shape of parameter p, into dst and checks its
 * values. A wrong shape or dtype is the file's problem (MDC_ERR_FORMAT, as mdc_tensor_to_f32
 * reports a dtype; MISMATCH's hint would tell the user to give every rank the same options). */
mdc_status mdc_i_weights_to_f32(const char *label, const mdc_tensor *t, const mdc_param_tensor *p, float *dst,
                                int nonneg) {
    int64_t want[2] = {p->shape[0], p->shape[1]};
    if (t->ndim != p->ndim || t->shape[0] != want[0] || (p->ndim == 2 && t->shape[1] != want[1])) {
        char a[96], b[96];
        shape_str(a, sizeof a, t->ndim, t->shape);
        shape_str(b, sizeof b, p->ndim, want);
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': shape %s in the file, the model expects %s", label, t->name,
                        a, b);
    }
    mdc_status st = mdc_tensor_to_f32(t, dst, p->numel);
    if (st) return mdc_fail(st, "%s: %s", label, mdc_detail());
    return check_values(label, t, dst, p->numel, nonneg);
}

int mdc_i_parse_u64(const char *s, uint64_t *out) {
    uint64_t x = 0;
    if (!s || !*s || (s[0] == '0' && s[1])) return 0;
    for (; *s; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (d > 9 || x > (UINT64_MAX - d) / 10) return 0;
        x = x * 10 + d;
    }
    *out = x;
    return 1;
}

/* __metadata__ key as a plain integer: 1 and *out, 0 if absent, -1 if not one (" 12", "+12",
 * "012" and "12.0" included: a file minidc reads strictly). */
static int parse_int_meta(const mdc_tensorfile *tf, const char *key, long long *out) {
    const char *v = mdc_tensorfile_get_meta(tf, key);
    uint64_t x;
    if (!v) return 0;
    if (!mdc_i_parse_u64(v, &x) || x > INT_MAX) return -1;
    *out = (long long)x;
    return 1;
}

/* A mixture of experts from the names: E = 1 + the largest h.N.mlp.experts.J, the MoE blocks
 * those with a router (0, n, 2n, ...: n the second one's index), topk from __metadata__ moe_topk. */
static mdc_status moe_from_names(const mdc_tensorfile *tf, const char *label, mdc_gpt2_config *cfg) {
    int E = 0, every = 0, first = -1, count = 0;
    char buf[256];
    for (int i = 0; i < tf->count; i++) {
        const char *c = mdc_gpt2_canonical_name(tf->tensors[i].name, buf, sizeof buf);
        int l, j, len = 0;
        if (sscanf(c, "h.%d.mlp.experts.%d.%n", &l, &j, &len) == 2 && len > 0) {
            if (j < 0 || j >= MDC_GPT2_MAX_EXPERTS)
                return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': expert %d out of range [0, %d)", label,
                                tf->tensors[i].name, j, MDC_GPT2_MAX_EXPERTS);
            if (j + 1 > E) E = j + 1;
        } else if (sscanf(c, "h.%d.mlp.router.weight%n", &l, &len) == 1 && len > 0 && !c[len]) {
            count++;
            if (first < 0 || l < first) first = l;
            if (l > 0 && (!every || l < every)) every = l;
        }
    }
    if (!E && !count) return MDC_OK;
    if (!E || first != 0)
        return mdc_fail(MDC_ERR_FORMAT, "%s: %s", label,
                        !E ? "routers but no h.N.mlp.experts.J tensors"
                           : "the first MoE block (with h.N.mlp.router.weight) is not h.0");
    cfg->E = E, cfg->moe_every = every ? every : cfg->L;
    if (count != (cfg->L + cfg->moe_every - 1) / cfg->moe_every)
        return mdc_fail(MDC_ERR_FORMAT, "%s: %d routers do not make every %d-th block of %d a MoE block", label, count,
                        cfg->moe_every, cfg->L);
    long long k = 0;
    int r = parse_int_meta(tf, "moe_topk", &k);
    if (r < 0 || (r > 0 && (k < 1 || k > E)))
        return mdc_fail(MDC_ERR_FORMAT, "%s: __metadata__ moe_topk '%s' is not in [1, %d]", label,
                        mdc_tensorfile_get_meta(tf, "moe_topk"), E);
    cfg->topk = (int)k;
    return MDC_OK;
}

mdc_status mdc_gpt2_config_from_weights(const mdc_tensorfile *tf, const char *label, int heads, mdc_gpt2_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    const char *json = mdc_tensorfile_get_meta(tf, "config"); /* a family's: its config.json */
    if (json) {
        mdc_status st = mdc_family_config_parse(label, json, strlen(json), cfg);
        if (!st && heads > 0 && heads != cfg->H)
            st = mdc_fail(MDC_ERR_INVALID, "--heads %d contradicts %s's num_attention_heads %d (leave --heads out)",
                          heads, label, cfg->H);
        return st ? st : mdc_i_weights_check(tf, label, cfg);
    }
    const mdc_tensor *wte = find_canon(tf, "wte"), *wpe = find_canon(tf, "wpe");
    if (!wte || !wpe)
        return mdc_fail(MDC_ERR_FORMAT, "%s: no tensor '%s' (GPT-2 weights need wte.weight and wpe.weight)", label,
                        !wte ? "wte.weight" : "wpe.weight");
    if (wte->ndim != 2 || wpe->ndim != 2 || wte->shape[1] != wpe->shape[1] || wte->shape[0] > 1 << 30 ||
        wpe->shape[0] > 1 << 30 || wte->shape[1] > 1 << 30) {
        char a[64], b[64];
        shape_str(a, sizeof a, wte->ndim, wte->shape);
        shape_str(b, sizeof b, wpe->ndim, wpe->shape);
        return mdc_fail(MDC_ERR_FORMAT, "%s: wte %s and wpe %s are not [V, C] and [T, C]", label, a, b);
    }
    cfg->V = (int)wte->shape[0];
    cfg->C = (int)wte->shape[1];
    cfg->T = (int)wpe->shape[0];
    int L = 0;
    char buf[256];
    for (int i = 0; i < tf->count; i++) {
        const char *c = mdc_gpt2_canonical_name(tf->tensors[i].name, buf, sizeof buf);
        char *end;
        if (strncmp(c, "h.", 2) || c[2] < '0' || c[2] > '9') continue;
        long n = strtol(c + 2, &end, 10);
        if (*end != '.' || n < 0 || n > 100000)
            return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': bad layer number", label, tf->tensors[i].name);
        if (n + 1 > L) L = (int)n + 1;
    }
    cfg->L = L;
    mdc_status mst = moe_from_names(tf, label, cfg);
    if (mst) return mst;
    long long h = heads;
    if (h <= 0) {
        int r = parse_int_meta(tf, "n_head", &h);
        if (r < 0 || (r > 0 && (h <= 0 || h > 1 << 20)))
            return mdc_fail(MDC_ERR_FORMAT, "%s: __metadata__ n_head '%s' is not a positive integer", label,
                            mdc_tensorfile_get_meta(tf, "n_head"));
        if (r == 0)
            return mdc_fail(MDC_ERR_INVALID,
                            "%s: the number of heads is not in the file's __metadata__ "
                            "(n_head): give --heads",
                            label);
    }
    cfg->H = (int)h;
    /* sizes the __metadata__ states must agree with the tensors' shapes */
    const struct {
        const char *key;
        int shapes;
    } said[] = {{"n_vocab", cfg->V}, {"n_ctx", cfg->T}, {"n_layer", cfg->L}, {"n_embd", cfg->C}};
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++) {
        long long x;
        int r = parse_int_meta(tf, said[i].key, &x);
        if (r < 0 || (r > 0 && x != said[i].shapes))
            return mdc_fail(MDC_ERR_FORMAT, "%s: __metadata__ %s = '%s' contradicts the tensors' shapes (%d)", label,
                            said[i].key, mdc_tensorfile_get_meta(tf, said[i].key), said[i].shapes);
    }
    mdc_status st = mdc_gpt2_config_check(cfg);
    if (st)
        return mdc_fail(st, "%s: inferred V=%d T=%d L=%d H=%d C=%d: %s", label, cfg->V, cfg->T, cfg->L, cfg->H, cfg->C,
                        mdc_detail());
    return mdc_i_weights_check(tf, label, cfg);
}

mdc_status mdc_i_weights_check(const mdc_tensorfile *tf, const char *label, const mdc_gpt2_config *cfg) {
    /* every tensor of that model, with its shape, before anyone allocates it: a small file that
     * names h.199 must not cost a 200-layer model's memory to be refused */
    for (int i = 0; i < mdc_gpt2_tensor_count(cfg); i++) {
        mdc_param_tensor p;
        mdc_gpt2_tensor_at(cfg, i, &p);
        const mdc_tensor *t = find_canon(tf, p.name);
        if (!t)
            return mdc_fail(MDC_ERR_FORMAT, "%s: no tensor '%s' (the file's names imply L=%d layers: %s0 to %s%d)",
                            label, mdc_gpt2_hf_name(&p), cfg->L, cfg->family ? "model.layers." : "h.",
                            cfg->family ? "model.layers." : "h.", cfg->L - 1);
        if (t->ndim != p.ndim || t->shape[0] != p.shape[0] || (p.ndim == 2 && t->shape[1] != p.shape[1])) {
            char a[96], b[96];
            int64_t want[2] = {p.shape[0], p.shape[1]};
            shape_str(a, sizeof a, t->ndim, t->shape);
            shape_str(b, sizeof b, p.ndim, want);
            return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': shape %s in the file, the model expects %s", label,
                            t->name, a, b);
        }
    }
    /* parameters, gradients and AdamW's two moments: bounded by the host's memory */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double need = 16.0 * (double)mdc_gpt2_param_floats(cfg), have = pages > 0 && page > 0 ? (double)pages * page : 0;
    if (have > 0 && need > have)
        return mdc_fail(MDC_ERR_OOM_HOST,
                        "%s: a model of %zu parameters needs %.1f GiB for its parameters, gradients "
                        "and AdamW state; this host has %.1f GiB",
                        label, mdc_gpt2_param_count(cfg), need / 1073741824.0, have / 1073741824.0);
    return MDC_OK;
}

/* h.N.mlp.router.e_score_correction_bias (a family's model.layers.N.mlp.gate.e_score_correction_bias,
 * Mixtral's block_sparse_moe.gate.): MoE block N's routing bias [E] (aux-loss-free balancing,
 * DeepSeek-V3's; not a parameter: no gradient). */
static mdc_status load_bias(mdc_gpt2 *m, const mdc_tensor *t, const char *label, int l) {
    const mdc_gpt2_config *cfg = mdc_gpt2_get_config(m);
    int b = mdc_gpt2_moe_index(cfg, l);
    if (b < 0)
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': block %d is not a MoE block of this model", label, t->name,
                        l);
    mdc_param_tensor p = {.ndim = 1, .shape = {cfg->E, 0}, .numel = (size_t)cfg->E};
    return mdc_i_weights_to_f32(label, t, &p, mdc_gpt2_moe_bias(m) + (size_t)b * cfg->E, 0);
}

/* Loads every model tensor from tf; names starting with `skip_prefix` (if not NULL) are left
 * for the caller. */
mdc_status mdc_i_weights_load(mdc_gpt2 *m, const mdc_tensorfile *tf, const char *label, const char *skip_prefix) {
    const mdc_gpt2_config *cfg = mdc_gpt2_get_config(m);
    int n = mdc_gpt2_tensor_count(cfg);
    float *params = mdc_gpt2_params(m);
    const mdc_tensor **src = calloc((size_t)n, sizeof *src);
    const mdc_tensor *lm_head = NULL;
    float *tmp = NULL;
    mdc_status st = MDC_OK;
    char buf[256];
    if (!src) return mdc_fail(MDC_ERR_OOM_HOST, "%s", label);
    for (int i = 0; i < tf->count; i++) {
        const mdc_tensor *t = &tf->tensors[i];
        if (skip_prefix && !strncmp(t->name, skip_prefix, strlen(skip_prefix))) continue;
        const char *c = mdc_gpt2_canonical_name(t->name, buf, sizeof buf);
        if (is_hf_buffer(c)) continue;
        if (!strcmp(c, "lm_head.weight") && mdc_gpt2_tensor_find(cfg, c) < 0) { /* tied: must be the embedding */
            lm_head = t;
            continue;
        }
        if (strstr(c, ".rotary_emb.inv_freq")) continue; /* a buffer older transformers saved, not a parameter */
        int bl, blen = 0;
        if ((sscanf(c, "h.%d.mlp.router.e_score_correction_bias%n", &bl, &blen) == 1 ||
             sscanf(c, "model.layers.%d.mlp.gate.e_score_correction_bias%n", &bl, &blen) == 1 ||
             sscanf(c, "model.layers.%d.block_sparse_moe.gate.e_score_correction_bias%n", &bl, &blen) == 1) &&
            blen > 0 && !c[blen]) {
            if ((st = load_bias(m, t, label, bl))) goto done;
            continue;
        }
        int k = mdc_gpt2_tensor_find(cfg, c);
        if (k < 0) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s' is not a parameter of %s with L=%d", label, t->name,
                          cfg->family ? mdc_gpt2_family_name(cfg->family) : "GPT-2", cfg->L);
            goto done;
        }
        if (src[k]) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s' given twice (as '%s' and '%s')", label, c, src[k]->name,
                          t->name);
            goto done;
        }
        src[k] = t;
    }
    /* the names this file spells, by its wte: what minidc writes for this model is spelled so */
    int ke = mdc_gpt2_tensor_find(cfg, "wte");
    if (ke >= 0 && src[ke]) {
        const char *wn = src[ke]->name;
        int pre = !strncmp(wn, PREFIX, strlen(PREFIX));
        mdc_gpt2_set_spelling(m, (mdc_gpt2_spelling){pre, !strcmp(wn + (pre ? strlen(PREFIX) : 0), "wte")});
    }
    for (int k = 0; k < n; k++) {
        mdc_param_tensor p;
        if ((st = mdc_gpt2_tensor_at(cfg, k, &p))) goto done;
        const mdc_tensor *t = src[k];
        if (!t) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: missing tensor '%s'", label, mdc_gpt2_hf_name(&p));
            goto done;
        }
        if ((st = mdc_i_weights_to_f32(label, t, &p, params + p.offset, 0))) goto done;
        for (size_t i = p.numel; i < p.alloc; i++) params[p.offset + i] = 0; /* wte padding rows */
    }
    if (lm_head) {
        mdc_param_tensor p;
        mdc_gpt2_tensor_at(cfg, 0, &p); /* the token embedding */
        tmp = malloc(p.numel * sizeof *tmp);
        if (!tmp) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "%s", label);
            goto done;
        }
        if (lm_head->numel != p.numel || mdc_tensor_to_f32(lm_head, tmp, p.numel) ||
            memcmp(tmp, params + p.offset, p.numel * sizeof *tmp)) {
            st = mdc_fail(MDC_ERR_UNSUPPORTED,
                          "%s: tensor '%s' differs from %s: the model ties the LM head "
                          "to the token embedding",
                          label, lm_head->name, p.name);
            goto done;
        }
    }
done:
    free(tmp);
    free(src);
    return st;
}

mdc_status mdc_gpt2_load_weights(mdc_gpt2 *m, const mdc_tensorfile *tf, const char *label) {
    return mdc_i_weights_load(m, tf, label, mdc_i_checkpoint_format(tf) > 0 ? "adam." : NULL);
}

mdc_status mdc_gpt2_add_tensors(const mdc_gpt2 *m, const float *base, const char *prefix, mdc_tensorfile *tf) {
    const mdc_gpt2_config *cfg = mdc_gpt2_get_config(m);
    for (int k = 0; k < mdc_gpt2_tensor_count(cfg); k++) {
        mdc_param_tensor p;
        mdc_status st = mdc_gpt2_tensor_at(cfg, k, &p);
        if (st) return st;
        char name[192], spelled[160];
        snprintf(name, sizeof name, "%s%s", prefix, mdc_gpt2_spelled(m, &p, spelled, sizeof spelled));
        int64_t shape[2] = {p.shape[0], p.shape[1]};
        if ((st = mdc_tensorfile_add(tf, name, MDC_TD_F32, p.ndim, shape, base + p.offset))) return st;
    }
    return MDC_OK;
}

mdc_status mdc_gpt2_set_config_meta(const mdc_gpt2_config *cfg, mdc_tensorfile *tf) {
    if (cfg->family != MDC_FAMILY_GPT2) { /* a family's config.json, as its directory would hold it */
        char text[4096];
        mdc_status st = mdc_family_config_json(cfg, text, sizeof text);
        return st ? st : mdc_tensorfile_set_meta(tf, "config", text);
    }
    const struct {
        const char *key;
        int v;
    } kv[] = {{"n_vocab", cfg->V}, {"n_ctx", cfg->T},  {"n_layer", cfg->L},
              {"n_head", cfg->H},  {"n_embd", cfg->C}, {"moe_topk", cfg->topk}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0] - !cfg->E; i++) {
        char v[32];
        snprintf(v, sizeof v, "%d", kv[i].v);
        mdc_status st = mdc_tensorfile_set_meta(tf, kv[i].key, v);
        if (st) return st;
    }
    return MDC_OK;
}

mdc_status mdc_gpt2_save_weights(mdc_gpt2 *m, const char *path) {
    mdc_tensorfile *tf = NULL;
    mdc_status st = mdc_tensorfile_new(&tf);
    if (!st) st = mdc_gpt2_set_config_meta(mdc_gpt2_get_config(m), tf);
    if (!st) st = mdc_gpt2_add_tensors(m, mdc_gpt2_params(m), "", tf);
    if (!st) st = mdc_safetensors_write(path, tf);
    mdc_tensorfile_free(tf);
    return st;
}
