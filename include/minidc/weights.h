/* GPT-2 weights and training checkpoints in safetensors, with Hugging Face names and layouts.
 *
 * Loading accepts a checkpoint saved by `transformers` unchanged: names with or without the
 * "transformer." prefix, "wte.weight"/"wpe.weight" (HF) or "wte"/"wpe" (minidc's table), Conv1D
 * weights as [in, out], F32/F16/BF16/F64 data. The causal-mask buffers "h.N.attn.bias" and
 * "h.N.attn.masked_bias" of older HF checkpoints are skipped; "lm_head.weight" must equal wte
 * (the model ties them). Any other unknown tensor, a missing one, or a shape mismatch is an
 * error naming the tensor (and both shapes). Saving writes HF names ("wte.weight", ...) in F32
 * with __metadata__ n_vocab, n_ctx, n_layer, n_head, n_embd (HF config.json names), so the
 * config can be inferred back. Details: docs/tensor-files.md. */
#ifndef MINIDC_WEIGHTS_H
#define MINIDC_WEIGHTS_H

#include <stdint.h>

#include "minidc/model.h"
#include "minidc/tensorfile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Hugging Face name of parameter tensor `p` ("wte" -> "wte.weight", "wpe" -> "wpe.weight",
 * others unchanged), without the "transformer." prefix. */
const char *mdc_gpt2_hf_name(const mdc_param_tensor *p);
/* The table name of a tensor name as files spell it (a "transformer." prefix dropped, wte.weight
 * and wpe.weight as wte and wpe), in buf; returns buf. */
const char *mdc_gpt2_canonical_name(const char *name, char *buf, size_t cap);

/* Infers the config from the tensors' shapes: V and C from wte [V, C], T from wpe [T, C],
 * L from the highest h.N present + 1. H is `heads` if > 0, else __metadata__ "n_head"; with
 * neither, MDC_ERR_INVALID asks for --heads. Vp is computed. The result is checked with
 * mdc_gpt2_config_check. `label` (the path) names the file in errors. */
mdc_status mdc_gpt2_config_from_weights(const mdc_tensorfile *tf, const char *label, int heads, mdc_gpt2_config *cfg);

/* Copies the weights of `tf` into the model's parameters (wte padding rows set to 0).
 * Every model tensor must be present exactly once (with or without the prefix). */
mdc_status mdc_gpt2_load_weights(mdc_gpt2 *m, const mdc_tensorfile *tf, const char *label);

/* Appends one tensor per parameter, read from `base` (the parameter, gradient or Adam
 * allocation, laid out as the parameters), named prefix + the name in the model's spelling
 * (mdc_gpt2_spelled: as the weights it loaded spelled them, else Hugging Face's). Shapes are the
 * HF shapes; wte padding is not written. */
mdc_status mdc_gpt2_add_tensors(const mdc_gpt2 *m, const float *base, const char *prefix, mdc_tensorfile *tf);

/* Sets the config __metadata__ (n_vocab, n_ctx, n_layer, n_head, n_embd). */
mdc_status mdc_gpt2_set_config_meta(const mdc_gpt2_config *cfg, mdc_tensorfile *tf);

/* Reads a weights file, or a Hugging Face model directory (config.json and model.safetensors, as
 * `transformers` saves them; the heads from its n_head), and returns its tensors and the
 * inferred config (heads as above). A checkpoint's checksums are verified first
 * (mdc_checkpoint_verify), so a damaged one is refused before its weights are used
 * (datasets/hf_dir.c, above both readers). */
mdc_status mdc_gpt2_read_weights(const char *path, int heads, mdc_tensorfile **tf, mdc_gpt2_config *cfg);

/* ---- Hugging Face model directories (datasets/hf_dir.c) ---- */
typedef struct {
    int n_head, n_layer, n_embd, vocab_size, n_positions;
} mdc_hf_config;
int mdc_hf_is_dir(const char *path);
/* dir's config.json and model.safetensors, whose tensors must have the sizes the config states
 * (an error names the field); heads > 0 must equal n_head. The JSON is checked against RFC 8259
 * byte by byte (UTF-8, whitespace, number grammar, no key twice), sizes are integers written as
 * such, and every setting that changes GPT-2's math must have minidc's value (model_type gpt2,
 * layer_norm_epsilon 1e-5, activation_function gelu_new or gelu_pytorch_tanh, n_inner null or
 * 4 n_embd, scale_attn_weights true, scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn and
 * add_cross_attention false, tie_word_embeddings true, pruned_heads {}, no quantization_config;
 * hidden_size and the other aliases equal to the sizes): MDC_ERR_FORMAT or MDC_ERR_UNSUPPORTED
 * naming the file and the key. */
mdc_status mdc_hf_read_dir(const char *dir, int heads, mdc_tensorfile **tf, mdc_gpt2_config *cfg);
/* ---- the Llama, Qwen2 and Qwen3 families (datasets/hf_family.c; docs/models.md) ----
 * A config.json (model_type llama, qwen2, qwen3) read into a config: the sizes, GQA, head_dim,
 * intermediate_size, rms_norm_eps, rope_theta, rope_scaling (llama3 or none), the biases and the
 * tie; a key that changes the math at a value minidc does not compute, or a key it does not
 * know, is refused by name (MDC_ERR_UNSUPPORTED); label names the file in errors. A directory
 * with such a config.json is read by mdc_hf_read_dir: model.safetensors or
 * model.safetensors.index.json and its shards, F32, BF16 or F16. */
mdc_status mdc_family_config_parse(const char *label, const char *text, size_t n, mdc_gpt2_config *cfg);
mdc_status mdc_gpt2_config_from_json(const char *path, mdc_gpt2_config *cfg);
/* The config.json transformers' from_pretrained reads for a family config, into buf. */
mdc_status mdc_family_config_json(const mdc_gpt2_config *cfg, char *buf, size_t cap);
/* dir (created if missing) gets config.json and model.safetensors (F32, the family's names). */
mdc_status mdc_family_write_dir(mdc_gpt2 *m, const char *dir);
/* Writes the model's parameters to a safetensors file (HF names, F32, config metadata). */
mdc_status mdc_gpt2_save_weights(mdc_gpt2 *m, const char *path);

/* ---- training checkpoints (train --save / --resume) --------------------------------------
 * One safetensors file: the parameters under their HF names (so the file is also a weights
 * file for `minidc forward`), AdamW's moments as "adam.m.<name>" and "adam.v.<name>" (when
 * the optimizer has stepped), and __metadata__ "minidc.format" = "checkpoint-2", the config,
 * the integers of mdc_train_state in decimal, "checksum.<tensor>" (16 hex digits) for every
 * tensor and "checksum.__metadata__.<key>" for every other entry, verified wherever the file is
 * read: a changed or mixed file names the tensor or the field (MDC_ERR_FORMAT). checkpoint-1
 * files (older minidc: tensor checksums only) still load as weights but are not resumed. */
typedef struct {
    uint64_t step;           /* optimizer steps taken (also the model's AdamW t) */
    uint64_t data_position;  /* mdc_loader_position() after the last step */
    uint64_t seed;           /* the run's --seed */
    uint64_t seed_set;       /* 1: `seed` is the run's seed (else 0 may mean "none recorded") */
    uint64_t global_batch;   /* the run's --batch, 1..2^30 */
    uint64_t data_sequences; /* mdc_loader_sequences() after the last step (with --data) */
    uint64_t skipped;        /* steps whose update fp16's loss scaling skipped: step = AdamW's t + skipped */
    uint64_t scale_set;      /* 1: the loss scale 2^scale_log2 and its clean steps are recorded (fp16) */
    uint64_t scale_log2, scale_clean;
} mdc_train_state;

/* st->step must be m's AdamW step plus st->skipped (at most 2^30) and st->global_batch in 1..2^30, else
 * MDC_ERR_INVALID before anything is written. */
mdc_status mdc_checkpoint_save(const char *path, mdc_gpt2 *m, const mdc_train_state *st);
/* Sets the "checksum.<tensor>" entries of every tensor and "checksum.__metadata__.<key>" of
 * every other metadata entry from their bytes as they are now, dropping stale ones (what
 * mdc_checkpoint_save does before writing; for tools that build or edit checkpoints). */
mdc_status mdc_checkpoint_seal(mdc_tensorfile *tf);
/* A checkpoint-2 file: every tensor and metadata entry has its checksum and matches it, and every
 * checksum has its tensor or entry; checkpoint-1: the tensor checksums it has match. A file that
 * is not a checkpoint (no minidc.format) passes; an unknown "checkpoint-N" does not.
 * MDC_ERR_FORMAT naming `label` and the tensor or field. */
mdc_status mdc_checkpoint_verify(const mdc_tensorfile *tf, const char *label);
/* Restores parameters, AdamW moments and step into a model created with the checkpoint's
 * config (read the file with mdc_safetensors_read). The file must be checkpoint-2
 * (checkpoint-1: MDC_ERR_UNSUPPORTED); a config mismatch names the field and both values;
 * every state field must be a plain decimal integer, step and adam_step equal and at most 2^30,
 * data_position = data_sequences / global_batch where data_sequences > 0; the checksums are
 * verified last, after the checks that name a field or element. */
mdc_status mdc_checkpoint_load(const mdc_tensorfile *tf, const char *label, mdc_gpt2 *m, mdc_train_state *st);

#ifdef __cplusplus
}
#endif
#endif
