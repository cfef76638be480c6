/* Internal to datasets/: a Hugging Face config.json read strictly (datasets/hf_dir.c: GPT-2;
 * datasets/hf_family.c: Llama, Qwen2, Qwen3). The file is checked against RFC 8259 first
 * (json_strict.h), then parsed; the raw text of each top-level value stays at hand for messages
 * and for integers written as such. */
#ifndef MINIDC_DATASETS_HF_CONFIG_H
#define MINIDC_DATASETS_HF_CONFIG_H

#include <cjson/cJSON.h>

#include "json_strict.h"
#include "minidc/weights.h"

enum { MAX_CONFIG = 1 << 20 };

typedef struct {
    const char *path; /* the file, for messages */
    const char *what; /* "a GPT-2", "a llama", ...: whose config a missing key belongs to */
    char *text;
    mdc_json_members top;
    cJSON *root;
} mdc_i_hf_src;

/* Reads path (or, text not NULL, its n bytes), checks and parses it; close frees it. */
mdc_status mdc_i_hf_open(const char *path, const char *text, size_t n, mdc_i_hf_src *c);
void mdc_i_hf_close(mdc_i_hf_src *c);
/* A value's raw text for a message, cut at 40 bytes on a character boundary. */
const char *mdc_i_hf_raw(const mdc_i_hf_src *c, const char *key, char *buf, size_t cap);
/* The integer key, in [1, 2^30] and written as one (digits only: 4.0 and 4e0 are floats to
 * Python, and transformers would compute with a float); *out untouched when absent and not
 * required. */
mdc_status mdc_i_hf_int(const mdc_i_hf_src *c, const char *key, int required, int *out);

/* datasets/hf_family.c: the family a config.json's model_type names (MDC_FAMILY_*; 0 for gpt2
 * or none; -1 when unreadable), and a family directory read as mdc_hf_read_dir does. */
int mdc_hf_dir_family(const char *config_path);
mdc_status mdc_family_read_dir(const char *dir, const char *config_path, mdc_tensorfile **tf, mdc_gpt2_config *cfg);

#endif
