/* The state side of `minidc train` (tools/train_state.c): checkpoints of the global tensors
 * written from and read into any mesh, the generated task, and the comparison with serial. */
#ifndef MINIDC_TOOLS_TRAIN_STATE_H
#define MINIDC_TOOLS_TRAIN_STATE_H

#include "minidc/runtime.h"
#include "minidc/train.h"
#include "minidc/weights.h"

/* The generated repeat task: B rows of T tokens for a step (deterministic in seed, step, row). */
void mdc_train_generated_batch(int *inputs, int *targets, int B, int T, int V, uint64_t seed, int step);

/* Gathers the trainer's state into the serial layout on rank 0 and writes one safetensors
 * checkpoint there (atomically, fsync'd). Collective. */
mdc_status mdc_train_save(mdc_runtime *rt, mdc_trainer *t, const mdc_gpt2_config *cfg, const char *path,
                          const mdc_train_state *ts);
/* Every rank reads the checkpoint and loads its partition (a bad file fails everywhere alike);
 * `serial` (may be NULL) is loaded too. */
mdc_status mdc_train_load(mdc_runtime *rt, mdc_trainer *t, mdc_trainer *serial, const mdc_gpt2_config *cfg,
                          const char *path, mdc_train_state *ts);
/* The parameters of a Hugging Face directory or weights file into the trainer (and `serial`);
 * its model must be the run's (MDC_ERR_INVALID naming both). */
mdc_status mdc_train_init(mdc_runtime *rt, mdc_trainer *t, mdc_trainer *serial, const mdc_gpt2_config *cfg,
                          const char *path);
/* The first step of a run of `steps` steps resumed at `step` of checkpoint `path`:
 * MDC_ERR_FORMAT if the step is out of range (above 2^30), MDC_ERR_INVALID if step + steps
 * would pass INT_MAX; else *step0 = step. */
/* Every rank's part (mine: malloc'd, len bytes, taken; -1: it could not make one) to rank 0,
 * which gets parts[r] (malloc'd, one spare byte for a terminator) and lens[r] for every rank;
 * the other ranks get NULL. Every rank sends, even after a failure of its own, so rank 0 never
 * waits in vain; a failure (naming `what` and the rank) frees everything. Every rank calls it. */
mdc_status mdc_train_gather_parts(mdc_runtime *rt, void *mine, long long len, const char *what, void ***parts,
                                  long long **lens);
/* --trace FILE: every rank's device trace into one Chrome trace JSON on rank 0 (tools/train_trace.c;
 * every rank calls it, after mdc_dev_trace_start on each). */
mdc_status mdc_train_write_trace(mdc_runtime *rt, const char *path);
/* --timeline FILE without a pipeline: every rank's traced events from virtual time `from` (the
 * last step's start) as an SVG picture on rank 0 (tools/train_timeline.c; every rank calls it). */
mdc_status mdc_train_write_device_timeline(mdc_runtime *rt, const char *path, double from, const char *title);
mdc_status mdc_train_first_step(const char *path, uint64_t step, int steps, int *step0);

#endif
