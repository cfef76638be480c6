/* minidc train with data parallelism (tools/train_dp.c), reached from tools/cmd_train.c. */
#ifndef MINIDC_TOOLS_TRAIN_DP_H
#define MINIDC_TOOLS_TRAIN_DP_H

#include <stdint.h>

#include "minidc/status.h"

/* 1 if the options or the MPI launch ask for the data-parallel driver: --dp, --zero, --accum,
 * --bucket-mb or --check-serial, or more than one rank (PMI_SIZE / OMPI_COMM_WORLD_SIZE). */
int mdc_train_dp_wanted(int argc, char **argv);
int mdc_cmd_train_dp(int argc, char **argv);

/* tools/cmd_train.c: the generated repeat task, B rows of T tokens for a step. */
void mdc_train_generated_batch(int *inputs, int *targets, int B, int T, int V, uint64_t seed, int step);

/* tools/train_io.c: the first step of a run of `steps` steps resumed from the checkpoint
 * `path` at `step` (serial and --dp alike). MDC_ERR_FORMAT if the checkpoint's step is out of
 * range (above 2^30), MDC_ERR_INVALID if step + steps would pass INT_MAX (the step counter is
 * an int); else *step0 = step. */
mdc_status mdc_train_first_step(const char *path, uint64_t step, int steps, int *step0);

#endif
