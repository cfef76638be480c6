/* minidc train with data parallelism (tools/train_dp.c), reached from tools/cmd_train.c. */
#ifndef MINIDC_TOOLS_TRAIN_DP_H
#define MINIDC_TOOLS_TRAIN_DP_H

/* 1 if the options or the MPI launch ask for the data-parallel driver: --dp, --zero, --accum,
 * --bucket-mb or --check-serial, or more than one rank (PMI_SIZE / OMPI_COMM_WORLD_SIZE). */
int mdc_train_dp_wanted(int argc, char **argv);
int mdc_cmd_train_dp(int argc, char **argv);

/* tools/cmd_train.c: the generated repeat task, B rows of T tokens for a step. */
void mdc_train_generated_batch(int *inputs, int *targets, int B, int T, int V, uint64_t seed, int step);

#endif
