/* The data and checkpoint side of `minidc train` (tools/train_io.c): token-shard batches
 * (--data) through the batch loader, and safetensors checkpoints (--save, --resume). */
#ifndef MINIDC_TOOLS_TRAIN_HOOKS_H
#define MINIDC_TOOLS_TRAIN_HOOKS_H

#include "minidc/model.h"

typedef struct mdc_train_data mdc_train_data;

/* Opens a token shard for batches of B x T (+1 for the targets) with token ids < vocab,
 * the data-parallel shard `rank` of `nranks`. */
mdc_status mdc_train_data_open(mdc_train_data **out, const char *path, int vocab, int B, int T,
                               int rank, int nranks);
/* Fills inputs (B,T) and targets (B,T) (the inputs shifted by one) with the next batch. */
mdc_status mdc_train_data_next(mdc_train_data *d, int *inputs, int *targets);
void mdc_train_data_close(mdc_train_data *d); /* NULL is a no-op */

/* Saves parameters, AdamW state and the step; restores them into a model of the same config. */
mdc_status mdc_train_save(const char *path, mdc_gpt2 *m, int step);
mdc_status mdc_train_resume(const char *path, mdc_gpt2 *m, int *step);

#endif
