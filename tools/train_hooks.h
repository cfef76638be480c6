/* Hooks of `minidc train` that the io branch fills: token-shard batches (--data) and
 * checkpoints (--save, --resume). tools/train_hooks.c holds weak defaults that fail with
 * MDC_ERR_UNSUPPORTED ("needs the io branch"); a strong definition in another .c file of tools/
 * (linked as an object) replaces them at link time, with no change to cmd_train.c. (Put it in
 * tools/, not in libminidc.a: the linker does not pull an archive member in for a symbol a
 * weak definition already resolves. Or delete train_hooks.c when the real ones land.) */
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
