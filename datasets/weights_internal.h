/* Shared by datasets/weights.c and datasets/checkpoint.c. Not a public header. */
#ifndef MINIDC_DATASETS_WEIGHTS_INTERNAL_H
#define MINIDC_DATASETS_WEIGHTS_INTERNAL_H

#include "minidc/weights.h"

/* File tensor t, which must have parameter p's shape, into dst (p->numel floats), its values
 * checked (finite; >= 0 with nonneg). MDC_ERR_FORMAT names the file (label) and the tensor. */
mdc_status mdc_i_weights_to_f32(const char *label, const mdc_tensor *t, const mdc_param_tensor *p, float *dst,
                                int nonneg);
/* Every model tensor of m from tf; names starting with skip_prefix (if not NULL) are left for
 * the caller. */
mdc_status mdc_i_weights_load(mdc_gpt2 *m, const mdc_tensorfile *tf, const char *label, const char *skip_prefix);
/* Every tensor of cfg's model is in tf with its shape, and the model fits in the host's memory
 * (checked before anyone allocates it). */
mdc_status mdc_i_weights_check(const mdc_tensorfile *tf, const char *label, const mdc_gpt2_config *cfg);
/* A plain decimal integer: digits only, no sign, space or leading zero, at most UINT64_MAX.
 * Returns 1 and sets *out, else 0. */
int mdc_i_parse_u64(const char *s, uint64_t *out);
/* __metadata__ minidc.format: 0 not a checkpoint, 1 "checkpoint-1", 2 "checkpoint-2", -1 another
 * "checkpoint-N" (datasets/checkpoint_seal.c). */
int mdc_i_checkpoint_format(const mdc_tensorfile *tf);

#endif
