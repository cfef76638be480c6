/* A Hugging Face model directory as `transformers` saves a GPT-2 (include/minidc/weights.h):
 * config.json and model.safetensors. The config gives the heads (n_head) and states the sizes
 * the tensors must have (n_layer, n_embd, vocab_size, n_positions); layer_norm_epsilon must be
 * minidc's 1e-5. The JSON is read strictly: one object, nothing after it, integers where
 * sizes go. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "minidc/weights.h"

enum { MAX_CONFIG = 1 << 20 };

int mdc_hf_is_dir(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* config.json as a NUL-terminated string (mdc_read_file: regular files only, bounded) */
static mdc_status read_text(const char *path, char **out) {
    unsigned char *raw;
    size_t n;
    *out = NULL;
    mdc_status st = mdc_read_file(path, MAX_CONFIG, &raw, &n);
    if (st) return st;
    char *text = malloc(n + 1);
    if (!text) {
        free(raw);
        return mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
    }
    memcpy(text, raw, n), text[n] = 0;
    free(raw);
    if (strlen(text) != n) {
        free(text);
        return mdc_fail(MDC_ERR_FORMAT, "%s: a NUL byte in the JSON", path);
    }
    *out = text;
    return MDC_OK;
}

/* the integer field key of the config, > 0; *out untouched when absent and not required */
static mdc_status int_field(const cJSON *root, const char *path, const char *key, int required, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return required ? mdc_fail(MDC_ERR_FORMAT, "%s: no \"%s\" (a GPT-2 config has it)", path, key) : MDC_OK;
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(d >= 1 && d <= 1 << 30) || d != floor(d))
        return mdc_fail(MDC_ERR_FORMAT, "%s: \"%s\" must be a positive integer", path, key);
    *out = (int)d;
    return MDC_OK;
}

static mdc_status read_config(const char *cpath, mdc_hf_config *c) {
    char *text;
    mdc_status st = read_text(cpath, &text);
    if (st) return st;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root || !cJSON_IsObject(root)) {
        long at = end ? (long)(end - text) : 0;
        cJSON_Delete(root);
        free(text);
        return mdc_fail(MDC_ERR_FORMAT, "%s: not one JSON object (at byte %ld)", cpath, at);
    }
    memset(c, 0, sizeof *c);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "gpt2")))
        st = mdc_fail(MDC_ERR_FORMAT, "%s: \"model_type\" is %s%s%s, not \"gpt2\"", cpath, cJSON_IsString(type) ? "\"" : "",
                      cJSON_IsString(type) ? type->valuestring : "not a string", cJSON_IsString(type) ? "\"" : "");
    const char *keys[5] = {"n_head", "n_layer", "n_embd", "vocab_size", "n_positions"};
    int *dst[5] = {&c->n_head, &c->n_layer, &c->n_embd, &c->vocab_size, &c->n_positions};
    for (int i = 0; !st && i < 5; i++) st = int_field(root, cpath, keys[i], 1, dst[i]);
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon");
    if (!st && eps && (!cJSON_IsNumber(eps) || fabs(eps->valuedouble - 1e-5) > 1e-12))
        st = cJSON_IsNumber(eps) ? mdc_fail(MDC_ERR_FORMAT, "%s: \"layer_norm_epsilon\" is %g; minidc's LayerNorm uses 1e-5",
                                            cpath, eps->valuedouble)
                                 : mdc_fail(MDC_ERR_FORMAT, "%s: \"layer_norm_epsilon\" is not a number", cpath);
    cJSON_Delete(root);
    free(text);
    return st;
}

mdc_status mdc_hf_read_dir(const char *dir, int heads, mdc_tensorfile **tf, mdc_gpt2_config *cfg) {
    *tf = NULL;
    char cpath[4096], wpath[4096];
    if (snprintf(cpath, sizeof cpath, "%s/config.json", dir) >= (int)sizeof cpath ||
        snprintf(wpath, sizeof wpath, "%s/model.safetensors", dir) >= (int)sizeof wpath)
        return mdc_fail(MDC_ERR_INVALID, "%s: path too long", dir);
    mdc_hf_config c;
    mdc_status st = read_config(cpath, &c);
    if (st) return st;
    if (heads > 0 && heads != c.n_head)
        return mdc_fail(MDC_ERR_INVALID, "--heads %d contradicts %s's n_head %d (leave --heads out)", heads, cpath, c.n_head);
    if ((st = mdc_safetensors_read(wpath, tf))) return st;
    st = mdc_gpt2_config_from_weights(*tf, wpath, c.n_head, cfg);
    const struct { const char *key; int said, shapes; } sizes[] = {
        {"n_layer", c.n_layer, cfg->L}, {"n_embd", c.n_embd, cfg->C}, {"vocab_size", c.vocab_size, cfg->V},
        {"n_positions", c.n_positions, cfg->T}};
    for (size_t i = 0; !st && i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].said != sizes[i].shapes)
            st = mdc_fail(MDC_ERR_FORMAT, "%s: \"%s\" is %d but %s's tensors have %d", cpath, sizes[i].key, sizes[i].said,
                          wpath, sizes[i].shapes);
    if (st) {
        mdc_tensorfile_free(*tf);
        *tf = NULL;
    }
    return st;
}
