/* Hugging Face directories and config.json of the Llama, Qwen2 and Qwen3 families
 * (include/minidc/weights.h, docs/models.md): the config as transformers' LlamaConfig,
 * Qwen2Config and Qwen3Config define it, read strictly (datasets/hf_config.h): the sizes are
 * integers written as such, every key that changes the model's math must have a value minidc
 * computes (a rope_scaling other than llama3, sliding windows, pretraining_tp, attention
 * dropout, quantization are refused by name), the keys that do not (token ids, dtype, caching,
 * versions) are ignored, and a key minidc does not know is refused by name. The weights are
 * model.safetensors or the sharded form (model.safetensors.index.json naming
 * model-0000K-of-0000N.safetensors), F32, BF16 or F16. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hf_config.h"
#include "weights_internal.h"

static const struct {
    const char *type, *arch;
    int family;
} families[] = {{"llama", "LlamaForCausalLM", MDC_FAMILY_LLAMA},
                {"qwen2", "Qwen2ForCausalLM", MDC_FAMILY_QWEN2},
                {"qwen3", "Qwen3ForCausalLM", MDC_FAMILY_QWEN3},
                {"mixtral", "MixtralForCausalLM", MDC_FAMILY_MIXTRAL},
                {"qwen3_moe", "Qwen3MoeForCausalLM", MDC_FAMILY_QWEN3_MOE},
                {"qwen2_moe", "Qwen2MoeForCausalLM", MDC_FAMILY_QWEN2_MOE}}; /* in MDC_FAMILY_* order */

static int family_of(const char *type) {
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (!strcmp(type, families[i].type)) return families[i].family;
    return 0;
}

int mdc_hf_dir_family(const char *config_path) {
    mdc_i_hf_src c;
    if (mdc_i_hf_open(config_path, NULL, 0, &c)) return -1;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(c.root, "model_type");
    int f = cJSON_IsString(t) ? family_of(t->valuestring) : 0;
    mdc_i_hf_close(&c);
    return f;
}

/* Keys that do not change the forward or backward pass. */
static const char *const harmless[] = {
    "architectures", "model_type", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype",
    "transformers_version", "use_cache", "initializer_range", "_name_or_path", "max_window_layers", "sliding_window",
    "output_attentions", "output_hidden_states", "return_dict", "hidden_act", "rope_scaling", "rope_parameters",
    "layer_types", "use_sliding_window", "pretraining_tp", "attention_dropout", "partial_rotary_factor", "head_dim",
    "tie_word_embeddings", "attention_bias", "mlp_bias", "rms_norm_eps", "rope_theta", "num_key_value_heads",
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "max_position_embeddings",
    /* the MoE families' (their values are read or checked below) */
    "num_local_experts", "num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
    "decoder_sparse_step", "mlp_only_layers", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise",
    "shared_expert_intermediate_size",
    /* DeepSeek-V3 routing's, on a MoE family's attention */
    "scoring_func", "topk_method", "n_group", "topk_group", "routed_scaling_factor", "n_shared_experts",
    "first_k_dense_replace"};

static mdc_status number(const mdc_i_hf_src *c, const char *key, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!v || cJSON_IsNull(v)) return MDC_OK;
    if (!cJSON_IsNumber(v)) return mdc_fail(MDC_ERR_FORMAT, "%s: \"%s\" is not a number", c->path, key);
    *out = v->valuedouble;
    return MDC_OK;
}

static mdc_status flag(const mdc_i_hf_src *c, const char *key, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!v) return MDC_OK;
    if (!cJSON_IsBool(v)) return mdc_fail(MDC_ERR_FORMAT, "%s: \"%s\" must be true or false", c->path, key);
    *out = cJSON_IsTrue(v);
    return MDC_OK;
}

/* A key that changes the math, accepted at the value minidc computes with only. */
static mdc_status must_be(const mdc_i_hf_src *c, const char *key, int ok, const char *why) {
    char buf[64];
    if (ok) return MDC_OK;
    return mdc_fail(MDC_ERR_UNSUPPORTED, "%s: \"%s\" is %s; %s", c->path, key, mdc_i_hf_raw(c, key, buf, sizeof buf),
                    why);
}

/* rope_scaling (or transformers 5's rope_parameters, which also carries rope_theta) */
static mdc_status rope(const mdc_i_hf_src *c, mdc_gpt2_config *cfg) {
    const char *key = cJSON_GetObjectItemCaseSensitive(c->root, "rope_parameters") ? "rope_parameters" : "rope_scaling";
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(c->root, key);
    if (!r || cJSON_IsNull(r)) return MDC_OK;
    if (!cJSON_IsObject(r)) return mdc_fail(MDC_ERR_FORMAT, "%s: \"%s\" is not an object or null", c->path, key);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "rope_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(r, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring : "";
    const cJSON *theta = cJSON_GetObjectItemCaseSensitive(r, "rope_theta");
    if (cJSON_IsNumber(theta)) cfg->rope_theta = theta->valuedouble;
    if (!strcmp(type, "default")) return MDC_OK;
    if (strcmp(type, "llama3"))
        return mdc_fail(MDC_ERR_UNSUPPORTED,
                        "%s: \"%s\" has rope_type \"%s\"; minidc computes the default rotation and llama3's scaling",
                        c->path, key, type);
    const char *names[4] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
    double v[4];
    for (int i = 0; i < 4; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(r, names[i]);
        if (!cJSON_IsNumber(x))
            return mdc_fail(MDC_ERR_FORMAT, "%s: \"%s\" (llama3) has no number \"%s\"", c->path, key, names[i]);
        v[i] = x->valuedouble;
    }
    if (v[3] != floor(v[3]) || v[3] < 1 || v[3] > 1 << 30)
        return mdc_fail(MDC_ERR_FORMAT, "%s: %s original_max_position_embeddings %g is not a positive integer", c->path,
                        key, v[3]);
    cfg->rope = (mdc_rope_llama3){(float)v[0], (float)v[1], (float)v[2], (int)v[3]};
    return MDC_OK;
}

/* DeepSeek-V3's routing keys on a MoE family (ref/model/family.c checks their values): scoring_func
 * "sigmoid" with topk_method "noaux_tc", n_group, topk_group, routed_scaling_factor;
 * n_shared_experts and first_k_dense_replace with either scoring. */
static mdc_status deepseek_keys(const mdc_i_hf_src *c, mdc_gpt2_config *cfg) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c->root, "scoring_func");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(c->root, "topk_method");
    mdc_status st = must_be(
        c, "scoring_func",
        !f || (cJSON_IsString(f) && (!strcmp(f->valuestring, "softmax") || !strcmp(f->valuestring, "sigmoid"))),
        "minidc routes by \"softmax\" (the family's own) or \"sigmoid\" (DeepSeek-V3's)");
    cfg->router = f && cJSON_IsString(f) && !strcmp(f->valuestring, "sigmoid") ? MDC_ROUTER_SIGMOID : 0;
    if (!st && (m || cfg->router))
        st = must_be(c, "topk_method", cfg->router && m && cJSON_IsString(m) && !strcmp(m->valuestring, "noaux_tc"),
                     "minidc's sigmoid routing is DeepSeek-V3's \"noaux_tc\" (with scoring_func \"sigmoid\")");
    double scale = 0;
    if (!st) st = mdc_i_hf_int(c, "n_group", 0, &cfg->n_group);
    if (!st) st = mdc_i_hf_int(c, "topk_group", 0, &cfg->topk_group);
    if (!st) st = number(c, "routed_scaling_factor", &scale), cfg->routed_scale = (float)scale;
    if (!st) st = mdc_i_hf_int(c, "n_shared_experts", 0, &cfg->n_shared);
    if (!st) st = mdc_i_hf_int(c, "first_k_dense_replace", 0, &cfg->first_dense);
    return st;
}

/* Mixtral's and Qwen3-MoE's experts and router: E, k, the experts' width, the renormalization,
 * which layers are sparse; the aux loss where it is in the loss (output_router_logits true:
 * router_aux_loss_coef times load_balancing_loss_func, ref/model/moe/moe_aux.c); no router
 * jitter; DeepSeek-V3's routing keys. */
static mdc_status moe_keys(const mdc_i_hf_src *c, int fam, mdc_gpt2_config *cfg) {
    int mix = fam == MDC_FAMILY_MIXTRAL, on = 0;
    mdc_status st = mdc_i_hf_int(c, mix ? "num_local_experts" : "num_experts", 1, &cfg->E);
    if (!st) st = mdc_i_hf_int(c, "num_experts_per_tok", 1, &cfg->topk);
    if (!st && cfg->topk > cfg->E)
        st = mdc_fail(MDC_ERR_FORMAT, "%s: num_experts_per_tok %d is more than the %d experts", c->path, cfg->topk,
                      cfg->E);
    cfg->moe_renorm = 1, cfg->moe_every = 1;
    if (!st && !mix) {
        st = mdc_i_hf_int(c, "moe_intermediate_size", 1, &cfg->moe_ffn);
        cfg->moe_renorm = 0;
        if (!st) st = flag(c, "norm_topk_prob", &cfg->moe_renorm);
        if (!st && cJSON_GetObjectItemCaseSensitive(c->root, "decoder_sparse_step"))
            st = mdc_i_hf_int(c, "decoder_sparse_step", 1, &cfg->moe_every);
        if (!st && fam == MDC_FAMILY_QWEN2_MOE) { /* its shared expert, gated by sigmoid(shared_expert_gate x) */
            st = mdc_i_hf_int(c, "shared_expert_intermediate_size", 0, &cfg->shared_ffn);
            cfg->shared_gate = cfg->shared_ffn > 0;
        }
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, "mlp_only_layers");
        if (!st && v)
            st = must_be(c, "mlp_only_layers", cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0,
                         "minidc's sparse layers follow decoder_sparse_step alone ([])");
    }
    if (!st) st = flag(c, "output_router_logits", &on);
    double coef = 0;
    if (!st && on) {  /* transformers then adds router_aux_loss_coef x load_balancing_loss_func to the loss */
        coef = 0.001; /* MixtralConfig's and Qwen3MoeConfig's default */
        st = number(c, "router_aux_loss_coef", &coef);
        if (!st) st = must_be(c, "router_aux_loss_coef", coef >= 0 && coef < 1e6, "a coefficient, 0 or positive");
        cfg->lb_coef = (float)coef;
    }
    if (!st) st = deepseek_keys(c, cfg);
    double jitter = 0;
    if (!st && !(st = number(c, "router_jitter_noise", &jitter)))
        st = must_be(c, "router_jitter_noise", jitter == 0, "minidc's router has no noise (0)");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(c->root, "sliding_window");
    if (!st && mix && w && !cJSON_IsNull(w)) /* Mixtral's attention uses a window when one is given */
        st = must_be(c, "sliding_window", cJSON_IsNumber(w) && w->valuedouble >= cfg->T,
                     "minidc's attention is full causal attention (null, or at least max_position_embeddings)");
    return st;
}

/* The switches and keys whose value minidc must share. */
static mdc_status checks(const mdc_i_hf_src *c, int family) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, "hidden_act");
    mdc_status st = must_be(c, "hidden_act", !v || (cJSON_IsString(v) && !strcmp(v->valuestring, "silu")),
                            "minidc's MLP is SwiGLU with silu");
    double x = 0;
    if (!st && !(st = number(c, "attention_dropout", &x)))
        st = must_be(c, "attention_dropout", x == 0, "give minidc's --dropout instead (0 here)");
    x = 1;
    if (!st && !(st = number(c, "pretraining_tp", &x)))
        st = must_be(c, "pretraining_tp", x == 1, "minidc computes each projection as one product (1)");
    x = 1;
    if (!st && !(st = number(c, "partial_rotary_factor", &x)))
        st = must_be(c, "partial_rotary_factor", x == 1, "minidc rotates every channel of a head (1)");
    int sw = 0;
    if (!st) st = flag(c, "use_sliding_window", &sw);
    if (!st) st = must_be(c, "use_sliding_window", !sw, "minidc's attention is full causal attention (false)");
    v = cJSON_GetObjectItemCaseSensitive(c->root, "layer_types");
    if (!st && v) {
        int ok = cJSON_IsArray(v);
        const cJSON *e;
        cJSON_ArrayForEach(e, v) ok &= cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention");
        st = must_be(c, "layer_types", ok, "minidc's layers are all \"full_attention\"");
    }
    v = cJSON_GetObjectItemCaseSensitive(c->root, "architectures");
    if (!st && v) {
        const cJSON *a = cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 ? cJSON_GetArrayItem(v, 0) : NULL;
        const char *want = families[family - 1].arch;
        st = must_be(c, "architectures", a && cJSON_IsString(a) && !strcmp(a->valuestring, want),
                     "minidc reads the causal LM of the family's model_type");
    }
    v = cJSON_GetObjectItemCaseSensitive(c->root, "quantization_config");
    if (!st && v && !cJSON_IsNull(v))
        st = mdc_fail(MDC_ERR_UNSUPPORTED, "%s: \"quantization_config\" is given; minidc reads unquantized weights",
                      c->path);
    for (const mdc_json_member *m = c->top.m; !st && m < c->top.m + c->top.count; m++) {
        int known = !strcmp(m->key, "quantization_config");
        for (size_t i = 0; i < sizeof harmless / sizeof harmless[0] && !known; i++)
            known = !strcmp(m->key, harmless[i]);
        if (!known)
            st = mdc_fail(MDC_ERR_UNSUPPORTED,
                          "%s: key \"%s\" is not one minidc knows for %s (it may change the model's math)", c->path,
                          m->key, families[family - 1].type);
    }
    return st;
}

mdc_status mdc_family_config_parse(const char *label, const char *text, size_t n, mdc_gpt2_config *cfg) {
    mdc_i_hf_src c;
    memset(cfg, 0, sizeof *cfg);
    mdc_status st = mdc_i_hf_open(label, text, n, &c);
    if (st) return st;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(c.root, "model_type");
    int fam = cJSON_IsString(t) ? family_of(t->valuestring) : 0;
    char buf[64];
    if (!fam && cJSON_IsString(t) && !strncmp(t->valuestring, "deepseek", 8))
        st = mdc_fail(MDC_ERR_UNSUPPORTED,
                      "%s: \"model_type\" is %s: its multi-head latent attention (MLA) is not built in minidc", label,
                      mdc_i_hf_raw(&c, "model_type", buf, sizeof buf));
    else if (!fam)
        st = mdc_fail(MDC_ERR_UNSUPPORTED,
                      "%s: \"model_type\" is %s, not \"llama\", \"qwen2\", \"qwen3\", \"mixtral\", \"qwen3_moe\" or "
                      "\"qwen2_moe\"",
                      label, t ? mdc_i_hf_raw(&c, "model_type", buf, sizeof buf) : "missing");
    if (!fam) {
        mdc_i_hf_close(&c);
        return st;
    }
    static const char *const what[] = {"", "a llama", "a qwen2", "a qwen3", "a mixtral", "a qwen3_moe", "a qwen2_moe"};
    c.what = what[fam];
    cfg->family = fam;
    const char *keys[6] = {"vocab_size",        "hidden_size",         "intermediate_size",
                           "num_hidden_layers", "num_attention_heads", "max_position_embeddings"};
    int *dst[6] = {&cfg->V, &cfg->C, &cfg->ffn, &cfg->L, &cfg->H, &cfg->T};
    for (int i = 0; !st && i < 6; i++) st = mdc_i_hf_int(&c, keys[i], 1, dst[i]);
    if (!st) st = mdc_i_hf_int(&c, "num_key_value_heads", 0, &cfg->KV);
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(c.root, "head_dim");
    if (!st && hd && !cJSON_IsNull(hd)) st = mdc_i_hf_int(&c, "head_dim", 1, &cfg->head_dim);
    if (!st && !cfg->head_dim && cfg->C % cfg->H)
        st = mdc_fail(MDC_ERR_FORMAT, "%s: no \"head_dim\", and num_attention_heads %d does not divide hidden_size %d",
                      label, cfg->H, cfg->C);
    double eps = 1e-6, theta = 10000;
    if (!st) st = number(&c, "rms_norm_eps", &eps);
    if (!st) st = number(&c, "rope_theta", &theta);
    cfg->eps = (float)eps, cfg->rope_theta = theta;
    int bias = 0;
    if (!st) st = flag(&c, "tie_word_embeddings", &bias), cfg->untied = !bias;
    if (!st && !cJSON_GetObjectItemCaseSensitive(c.root, "tie_word_embeddings")) cfg->untied = 1; /* the default */
    bias = 0;
    int qwen2 = fam == MDC_FAMILY_QWEN2 || fam == MDC_FAMILY_QWEN2_MOE; /* q, k, v biases always */
    if (!st && !qwen2) st = flag(&c, "attention_bias", &bias);
    cfg->qkv_bias = qwen2 || bias, cfg->o_bias = bias;
    if (!st && fam == MDC_FAMILY_LLAMA) st = flag(&c, "mlp_bias", &cfg->mlp_bias);
    cfg->qk_norm = fam == MDC_FAMILY_QWEN3 || fam == MDC_FAMILY_QWEN3_MOE;
    if (!st && (fam == MDC_FAMILY_MIXTRAL || fam == MDC_FAMILY_QWEN3_MOE || fam == MDC_FAMILY_QWEN2_MOE))
        st = moe_keys(&c, fam, cfg);
    if (!st) st = rope(&c, cfg);
    if (!st) st = checks(&c, fam);
    mdc_i_hf_close(&c);
    if (!st && (st = mdc_gpt2_config_check(cfg))) st = mdc_fail(st, "%s: %s", label, mdc_detail());
    return st;
}

/* The shortest decimal that reads back as the same float (1e-05, not 9.99999975e-06). */
static void shortest(char *out, size_t n, float x) {
    for (int p = 1; p <= 9; p++) {
        snprintf(out, n, "%.*g", p, x);
        if ((float)strtod(out, NULL) == x) break;
    }
}

mdc_status mdc_family_config_json(const mdc_gpt2_config *c, char *buf, size_t cap) {
    const char *type = mdc_gpt2_family_name(c->family);
    if (!type || c->family == MDC_FAMILY_GPT2)
        return mdc_fail(MDC_ERR_INVALID,
                        "config.json: family %d is not llama, qwen2, qwen3, mixtral, qwen3_moe or qwen2_moe",
                        c->family);
    char scaling[256] = "null";
    if (c->rope.factor != 0)
        snprintf(scaling, sizeof scaling,
                 "{\"rope_type\": \"llama3\", \"factor\": %.9g, \"low_freq_factor\": %.9g, \"high_freq_factor\": "
                 "%.9g, \"original_max_position_embeddings\": %d}",
                 c->rope.factor, c->rope.low_freq_factor, c->rope.high_freq_factor,
                 c->rope.original_max_position_embeddings);
    int d = c->head_dim > 0 ? c->head_dim : c->C / c->H, kv = c->KV > 0 ? c->KV : c->H;
    char bias[96] = "";
    if (c->family == MDC_FAMILY_LLAMA)
        snprintf(bias, sizeof bias, "  \"attention_bias\": %s,\n  \"mlp_bias\": %s,\n", c->o_bias ? "true" : "false",
                 c->mlp_bias ? "true" : "false");
    else if (c->family == MDC_FAMILY_QWEN3 || c->family == MDC_FAMILY_QWEN3_MOE)
        snprintf(bias, sizeof bias, "  \"attention_bias\": %s,\n", c->o_bias ? "true" : "false");
    char moe[1024] = "", lb[96], ds[320] = "";
    char num[32];
    shortest(num, sizeof num, c->lb_coef);
    if (c->lb_coef > 0) snprintf(lb, sizeof lb, "true,\n  \"router_aux_loss_coef\": %s", num);
    else
        snprintf(lb, sizeof lb, "false,\n  \"router_aux_loss_coef\": %s",
                 c->family == MDC_FAMILY_MIXTRAL ? "0.02" : "0.001");
    if (c->router == MDC_ROUTER_SIGMOID)
        snprintf(ds, sizeof ds,
                 "  \"scoring_func\": \"sigmoid\",\n  \"topk_method\": \"noaux_tc\",\n  \"n_group\": %d,\n"
                 "  \"topk_group\": %d,\n  \"routed_scaling_factor\": %s,\n",
                 c->n_group, c->topk_group, (shortest(num, sizeof num, c->routed_scale), num));
    if (c->n_shared || c->first_dense) {
        size_t o = strlen(ds);
        snprintf(ds + o, sizeof ds - o, "  \"n_shared_experts\": %d,\n  \"first_k_dense_replace\": %d,\n", c->n_shared,
                 c->first_dense);
    }
    if (c->family == MDC_FAMILY_MIXTRAL)
        snprintf(moe, sizeof moe,
                 "  \"num_local_experts\": %d,\n  \"num_experts_per_tok\": %d,\n  \"output_router_logits\": %s,\n"
                 "  \"router_jitter_noise\": 0.0,\n  \"sliding_window\": null,\n%s",
                 c->E, c->topk, lb, ds);
    else if (c->family == MDC_FAMILY_QWEN3_MOE || c->family == MDC_FAMILY_QWEN2_MOE) {
        char shared[64] = "";
        if (c->family == MDC_FAMILY_QWEN2_MOE)
            snprintf(shared, sizeof shared, "  \"shared_expert_intermediate_size\": %d,\n", c->shared_ffn);
        snprintf(moe, sizeof moe,
                 "  \"num_experts\": %d,\n  \"num_experts_per_tok\": %d,\n  \"moe_intermediate_size\": %d,\n%s"
                 "  \"norm_topk_prob\": %s,\n  \"decoder_sparse_step\": %d,\n  \"mlp_only_layers\": [],\n"
                 "  \"output_router_logits\": %s,\n%s",
                 c->E, c->topk, c->moe_ffn > 0 ? c->moe_ffn : (c->ffn > 0 ? c->ffn : 4 * c->C), shared,
                 c->moe_renorm ? "true" : "false", c->moe_every > 0 ? c->moe_every : 1, lb, ds);
    }
    char eps[32];
    shortest(eps, sizeof eps, c->eps);
    int n = snprintf(buf, cap,
                     "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n  \"vocab_size\": %d,\n"
                     "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                     "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
                     "  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %s,\n  \"rope_theta\": %.17g,\n"
                     "  \"rope_scaling\": %s,\n  \"tie_word_embeddings\": %s,\n%s%s  \"hidden_act\": \"silu\",\n"
                     "  \"torch_dtype\": \"float32\"\n}\n",
                     families[c->family - 1].arch, type, c->V, c->C, c->ffn > 0 ? c->ffn : 4 * c->C, c->L, c->H, kv, d,
                     c->T, eps, c->rope_theta, scaling, c->untied ? "false" : "true", bias, moe);
    return n > 0 && (size_t)n < cap ? MDC_OK : mdc_fail(MDC_ERR_INVALID, "config.json: text too long");
}

/* Moves every tensor of src to the end of dst (shards into one list); a name twice is refused. */
static mdc_status take_tensors(mdc_tensorfile *dst, mdc_tensorfile *src, const char *label) {
    for (int i = 0; i < src->count; i++)
        if (mdc_tensorfile_find(dst, src->tensors[i].name))
            return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s' is in two shards", label, src->tensors[i].name);
    if (dst->count + src->count > dst->cap) {
        int cap = dst->count + src->count;
        mdc_tensor *t = realloc(dst->tensors, (size_t)cap * sizeof *t);
        if (!t) return mdc_fail(MDC_ERR_OOM_HOST, "%s", label);
        dst->tensors = t, dst->cap = cap;
    }
    memcpy(dst->tensors + dst->count, src->tensors, (size_t)src->count * sizeof *src->tensors);
    dst->count += src->count, src->count = 0;
    return MDC_OK;
}

/* model.safetensors.index.json: every shard its weight_map names, once each, in the directory. */
static mdc_status read_sharded(const char *dir, const char *ipath, mdc_tensorfile **tf) {
    mdc_i_hf_src c;
    mdc_status st = mdc_i_hf_open(ipath, NULL, 0, &c);
    if (st) return st;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(c.root, "weight_map"), *e;
    if (!cJSON_IsObject(map)) st = mdc_fail(MDC_ERR_FORMAT, "%s: no object \"weight_map\"", ipath);
    if (!st) st = mdc_tensorfile_new(tf);
    const cJSON *walk = st ? NULL : map;
    cJSON_ArrayForEach(e, walk) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || !strcmp(e->valuestring, "..")) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: weight_map entry '%s' is not a file name in the directory", ipath,
                          e->string);
            break;
        }
        int seen = 0;
        for (const cJSON *p = map->child; p != e && !seen; p = p->next) seen = !strcmp(p->valuestring, e->valuestring);
        if (seen) continue;
        char path[4096];
        mdc_tensorfile *shard = NULL;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->valuestring) >= (int)sizeof path)
            st = mdc_fail(MDC_ERR_INVALID, "%s: path too long", dir);
        if (!st) st = mdc_safetensors_read(path, &shard);
        if (!st) st = take_tensors(*tf, shard, path);
        mdc_tensorfile_free(shard);
        if (st) break;
    }
    for (e = st || !map ? NULL : map->child; e && !st; e = e->next)
        if (!mdc_tensorfile_find(*tf, e->string))
            st = mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s' is not in its shard %s", ipath, e->string, e->valuestring);
    mdc_i_hf_close(&c);
    if (st) mdc_tensorfile_free(*tf), *tf = NULL;
    return st;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

mdc_status mdc_family_read_dir(const char *dir, const char *cpath, mdc_tensorfile **tf, mdc_gpt2_config *cfg) {
    *tf = NULL;
    mdc_status st = mdc_gpt2_config_from_json(cpath, cfg);
    if (st) return st;
    char wpath[4096], ipath[4096];
    if (snprintf(wpath, sizeof wpath, "%s/model.safetensors", dir) >= (int)sizeof wpath ||
        snprintf(ipath, sizeof ipath, "%s/model.safetensors.index.json", dir) >= (int)sizeof ipath)
        return mdc_fail(MDC_ERR_INVALID, "%s: path too long", dir);
    if (exists(wpath) || !exists(ipath)) st = mdc_safetensors_read(wpath, tf);
    else st = read_sharded(dir, ipath, tf);
    if (!st) st = mdc_i_weights_check(*tf, exists(wpath) ? wpath : ipath, cfg);
    if (st) mdc_tensorfile_free(*tf), *tf = NULL;
    return st;
}

mdc_status mdc_gpt2_config_from_json(const char *path, mdc_gpt2_config *cfg) {
    unsigned char *bytes;
    size_t n;
    mdc_status st = mdc_read_file(path, MAX_CONFIG, &bytes, &n);
    if (st) return st;
    st = mdc_family_config_parse(path, (const char *)bytes, n, cfg);
    free(bytes);
    return st;
}

mdc_status mdc_family_write_dir(mdc_gpt2 *m, const char *dir) {
    const mdc_gpt2_config *cfg = mdc_gpt2_get_config(m);
    char path[4096], text[4096];
    mdc_status st = mdc_family_config_json(cfg, text, sizeof text);
    if (st) return st;
    if (mkdir(dir, 0777) && !exists(dir)) return mdc_fail(MDC_ERR_IO, "%s: cannot create the directory", dir);
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return mdc_fail(MDC_ERR_INVALID, "%s: path too long", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        if (f) fclose(f);
        return mdc_fail(MDC_ERR_IO, "%s: cannot write", path);
    }
    mdc_tensorfile *tf = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    st = mdc_tensorfile_new(&tf);
    if (!st) st = mdc_tensorfile_set_meta(tf, "format", "pt");
    if (!st) st = mdc_gpt2_add_tensors(m, mdc_gpt2_params(m), "", tf);
    for (int l = 0; !st && cfg->router == MDC_ROUTER_SIGMOID && l < cfg->L; l++) { /* DeepSeek-V3's routing bias */
        int b = mdc_gpt2_moe_index(cfg, l);
        if (b < 0) continue;
        char name[96];
        int64_t shape[1] = {cfg->E};
        snprintf(name, sizeof name, "model.layers.%d.%s.gate.e_score_correction_bias", l,
                 cfg->family == MDC_FAMILY_MIXTRAL ? "block_sparse_moe" : "mlp");
        st = mdc_tensorfile_add(tf, name, MDC_TD_F32, 1, shape, mdc_gpt2_moe_bias(m) + (size_t)b * cfg->E);
    }
    if (!st) st = mdc_safetensors_write(path, tf);
    mdc_tensorfile_free(tf);
    return st;
}
