/* A Hugging Face model directory as `transformers` saves a GPT-2 (include/minidc/weights.h):
 * config.json and model.safetensors. The config gives the heads (n_head) and states the sizes
 * the tensors must have (n_layer, n_embd, vocab_size, n_positions). It is read as strictly as
 * RFC 8259 says (datasets/json_strict.c: Python's json and cJSON must not read it differently),
 * integers where sizes go, and every setting that changes GPT-2's math must have the value
 * minidc computes with (docs/tensor-files.md lists them); other keys (dropout, generation,
 * tokens, architectures) do not change the forward pass and are accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "hf_config.h"
#include "minidc/weights.h"

int mdc_hf_is_dir(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

const char *mdc_i_hf_raw(const mdc_i_hf_src *c, const char *key, char *buf, size_t cap) {
    const mdc_json_member *m = mdc_json_member_find(&c->top, key);
    const char *v = m ? c->text + m->at : "";
    size_t n = m ? m->len : 0, cut = n;
    if (cut > 40)
        for (cut = 40; cut > 0 && ((unsigned char)v[cut] & 0xC0) == 0x80;) cut--;
    snprintf(buf, cap, "%.*s%s", (int)cut, v, cut < n ? "..." : "");
    return buf;
}

mdc_status mdc_i_hf_int(const mdc_i_hf_src *c, const char *key, int required, int *out) {
    const mdc_json_member *m = mdc_json_member_find(&c->top, key);
    char buf[64];
    if (!m)
        return required ? mdc_fail(MDC_ERR_FORMAT, "%s: no \"%s\" (%s config has it)", c->path, key, c->what) : MDC_OK;
    long long v = 0;
    size_t i = 0;
    for (; i < m->len && i < 11 && c->text[m->at + i] >= '0' && c->text[m->at + i] <= '9'; i++)
        v = v * 10 + (c->text[m->at + i] - '0');
    if (i != m->len || v < 1 || v > 1 << 30)
        return mdc_fail(MDC_ERR_FORMAT, "%s: \"%s\" must be a positive integer (digits only, at most 2^30), not %s",
                        c->path, key, mdc_i_hf_raw(c, key, buf, sizeof buf));
    *out = (int)v;
    return MDC_OK;
}

mdc_status mdc_i_hf_open(const char *path, const char *text, size_t n, mdc_i_hf_src *c) {
    memset(c, 0, sizeof *c);
    c->path = path, c->what = "a GPT-2";
    unsigned char *bytes = NULL;
    mdc_status st = text ? MDC_OK : mdc_read_file(path, MAX_CONFIG, &bytes, &n);
    if (st) return st;
    if (!(c->text = malloc(n + 1))) st = mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
    if (!st) memcpy(c->text, text ? text : (const char *)bytes, n), c->text[n] = 0;
    free(bytes);
    if (!st) st = mdc_json_strict(path, c->text, n, &c->top); /* no NUL byte gets past it: cJSON reads a C string */
    if (!st && !(c->root = cJSON_Parse(c->text)))
        st = mdc_fail(MDC_ERR_FORMAT, "%s: not one JSON object (cJSON cannot read it)", path);
    if (st) mdc_i_hf_close(c);
    return st;
}

void mdc_i_hf_close(mdc_i_hf_src *c) {
    cJSON_Delete(c->root);
    mdc_json_members_free(&c->top);
    free(c->text);
    memset(c, 0, sizeof *c);
}

/* transformers' attribute_map: a GPT-2 config that also states hidden_size sets n_embd from it */
static mdc_status aliases(const mdc_i_hf_src *c, const mdc_hf_config *h) {
    const struct {
        const char *alias, *key;
        int v;
    } a[] = {{"hidden_size", "n_embd", h->n_embd},
             {"max_position_embeddings", "n_positions", h->n_positions},
             {"num_attention_heads", "n_head", h->n_head},
             {"num_hidden_layers", "n_layer", h->n_layer}};
    for (size_t k = 0; k < sizeof a / sizeof a[0]; k++) {
        int v = 0;
        mdc_status st = mdc_i_hf_int(c, a[k].alias, 0, &v);
        if (st) return st;
        if (v && v != a[k].v)
            return mdc_fail(MDC_ERR_FORMAT, "%s: \"%s\" is %d but \"%s\" is %d (transformers reads %s as %s)", c->path,
                            a[k].alias, v, a[k].key, a[k].v, a[k].alias, a[k].key);
    }
    return MDC_OK;
}

/* The settings of GPT2Config that change the forward pass, each with the one value minidc's
 * model computes (transformers' defaults). */
static mdc_status math_settings(const mdc_i_hf_src *c, const mdc_hf_config *h) {
    char buf[64];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->root, "layer_norm_epsilon");
    if (v && !cJSON_IsNumber(v)) return mdc_fail(MDC_ERR_FORMAT, "%s: \"layer_norm_epsilon\" is not a number", c->path);
    if (v && v->valuedouble != 1e-5)
        return mdc_fail(MDC_ERR_UNSUPPORTED, "%s: \"layer_norm_epsilon\" is %s; minidc's LayerNorm uses 1e-5", c->path,
                        mdc_i_hf_raw(c, "layer_norm_epsilon", buf, sizeof buf));
    v = cJSON_GetObjectItemCaseSensitive(c->root, "activation_function");
    const char *act = cJSON_IsString(v) ? v->valuestring : "";
    if (v && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh"))
        return mdc_fail(MDC_ERR_UNSUPPORTED,
                        "%s: \"activation_function\" is %s; minidc's MLP computes \"gelu_new\" "
                        "(\"gelu_pytorch_tanh\" is the same tanh formula and accepted too)",
                        c->path, mdc_i_hf_raw(c, "activation_function", buf, sizeof buf));
    v = cJSON_GetObjectItemCaseSensitive(c->root, "n_inner");
    if (v && !cJSON_IsNull(v)) {
        int inner = 0;
        mdc_status st = mdc_i_hf_int(c, "n_inner", 1, &inner);
        if (st) return st;
        if (inner != 4 * h->n_embd)
            return mdc_fail(MDC_ERR_UNSUPPORTED,
                            "%s: \"n_inner\" is %d; minidc's MLP is 4 * n_embd = %d wide (null "
                            "or %d)",
                            c->path, inner, 4 * h->n_embd, 4 * h->n_embd);
    }
    int ctx = 0;
    mdc_status st = mdc_i_hf_int(c, "n_ctx", 0, &ctx); /* a legacy key transformers ignores; still a size */
    if (st) return st;
    static const struct {
        const char *key;
        int want;
        const char *why;
    } flags[] = {{"scale_attn_weights", 1, "it divides the attention scores by sqrt(head size)"},
                 {"scale_attn_by_inverse_layer_idx", 0, "it does not divide the attention scores by layer + 1"},
                 {"reorder_and_upcast_attn", 0, "its attention has one order of operations, in fp32"},
                 {"tie_word_embeddings", 1, "its LM head is the token embedding wte"},
                 {"add_cross_attention", 0, "its blocks have no cross-attention"}};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        v = cJSON_GetObjectItemCaseSensitive(c->root, flags[k].key);
        if (v && !(flags[k].want ? cJSON_IsTrue(v) : cJSON_IsFalse(v)))
            return mdc_fail(MDC_ERR_UNSUPPORTED, "%s: \"%s\" is %s; minidc supports only %s (%s)", c->path,
                            flags[k].key, mdc_i_hf_raw(c, flags[k].key, buf, sizeof buf),
                            flags[k].want ? "true" : "false", flags[k].why);
    }
    v = cJSON_GetObjectItemCaseSensitive(c->root, "pruned_heads");
    if (v && !(cJSON_IsObject(v) && !v->child))
        return mdc_fail(MDC_ERR_UNSUPPORTED,
                        "%s: \"pruned_heads\" is %s; minidc supports only {} (every head of every "
                        "layer)",
                        c->path, mdc_i_hf_raw(c, "pruned_heads", buf, sizeof buf));
    v = cJSON_GetObjectItemCaseSensitive(c->root, "quantization_config");
    if (v && !cJSON_IsNull(v))
        return mdc_fail(MDC_ERR_UNSUPPORTED,
                        "%s: \"quantization_config\" is given; minidc reads unquantized weights "
                        "(leave it out)",
                        c->path);
    return MDC_OK;
}

static mdc_status read_config(const char *cpath, mdc_hf_config *h) {
    mdc_i_hf_src c;
    memset(h, 0, sizeof *h);
    mdc_status st = mdc_i_hf_open(cpath, NULL, 0, &c);
    if (st) return st;
    const char *keys[5] = {"n_head", "n_layer", "n_embd", "vocab_size", "n_positions"};
    int *dst[5] = {&h->n_head, &h->n_layer, &h->n_embd, &h->vocab_size, &h->n_positions};
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(c.root, "model_type");
    char buf[64];
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "gpt2"))) /* before sizes of another model */
        st = mdc_fail(MDC_ERR_UNSUPPORTED,
                      "%s: \"model_type\" is %s, not one of \"gpt2\", \"llama\", \"qwen2\", \"qwen3\", \"mixtral\", "
                      "\"qwen3_moe\", \"qwen2_moe\"",
                      cpath, mdc_i_hf_raw(&c, "model_type", buf, sizeof buf));
    for (int i = 0; !st && i < 5; i++) st = mdc_i_hf_int(&c, keys[i], 1, dst[i]);
    if (!st) st = aliases(&c, h);
    if (!st) st = math_settings(&c, h);
    mdc_i_hf_close(&c);
    return st;
}

mdc_status mdc_hf_read_dir(const char *dir, int heads, mdc_tensorfile **tf, mdc_gpt2_config *cfg) {
    *tf = NULL;
    char cpath[4096], wpath[4096];
    if (snprintf(cpath, sizeof cpath, "%s/config.json", dir) >= (int)sizeof cpath ||
        snprintf(wpath, sizeof wpath, "%s/model.safetensors", dir) >= (int)sizeof wpath)
        return mdc_fail(MDC_ERR_INVALID, "%s: path too long", dir);
    if (mdc_hf_dir_family(cpath) > 0) return mdc_family_read_dir(dir, cpath, tf, cfg);
    mdc_hf_config c;
    mdc_status st = read_config(cpath, &c);
    if (st) return st;
    if (heads > 0 && heads != c.n_head)
        return mdc_fail(MDC_ERR_INVALID, "--heads %d contradicts %s's n_head %d (leave --heads out)", heads, cpath,
                        c.n_head);
    if ((st = mdc_safetensors_read(wpath, tf))) return st;
    st = mdc_checkpoint_verify(*tf, wpath);
    if (!st) st = mdc_gpt2_config_from_weights(*tf, wpath, c.n_head, cfg);
    const struct {
        const char *key;
        int said, shapes;
    } sizes[] = {{"n_layer", c.n_layer, cfg->L},
                 {"n_embd", c.n_embd, cfg->C},
                 {"vocab_size", c.vocab_size, cfg->V},
                 {"n_positions", c.n_positions, cfg->T}};
    for (size_t i = 0; !st && i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].said != sizes[i].shapes)
            st = mdc_fail(MDC_ERR_FORMAT, "%s: \"%s\" is %d but %s's tensors have %d", cpath, sizes[i].key,
                          sizes[i].said, wpath, sizes[i].shapes);
    if (st) {
        mdc_tensorfile_free(*tf);
        *tf = NULL;
    }
    return st;
}

/* Above both readers: a Hugging Face directory (this file) or one safetensors file
 * (datasets/weights.c), so weights.c never calls back up here. */
mdc_status mdc_gpt2_read_weights(const char *path, int heads, mdc_tensorfile **tf, mdc_gpt2_config *cfg) {
    if (mdc_hf_is_dir(path)) return mdc_hf_read_dir(path, heads, tf, cfg);
    mdc_status st = mdc_safetensors_read(path, tf);
    if (st) return st;
    st = mdc_checkpoint_verify(*tf, path); /* a checkpoint's checksums, before anything it says is used */
    if (!st) st = mdc_gpt2_config_from_weights(*tf, path, heads, cfg);
    if (st) {
        mdc_tensorfile_free(*tf);
        *tf = NULL;
    }
    return st;
}
