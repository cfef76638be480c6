/* The options of `minidc train` (tools/train_options.c): the help text, the parser and the
 * validation that needs only the options and the rank count. */
#ifndef MINIDC_TOOLS_TRAIN_OPTIONS_H
#define MINIDC_TOOLS_TRAIN_OPTIONS_H

#include "cli_args.h"
#include "minidc/model.h"
#include "minidc/train.h"

extern const char mdc_train_usage[];

typedef struct {
    const char *config, *data, *save, *resume, *init;
    int V, T, L, H, C, B, seq, steps, seed, quiet, dp, tp, sp, pp, cp, ep, etp, zero, accum, check, replicas, prefetch;
    int seed_given, force_seed, exact, exact_block, microbatches, check_coll, recompute, recompute_set, precision,
        grad_reduce, attention;
    const char *schedule, *timeline, *cp_layout, *cp_algo, *trace, *dump_dir;
    int layout[256], layout_n, vstages;
    int fail_rank, fail_step, fail_how;
    double bucket_mb, dropout;
    mdc_adamw_config opt;
    mdc_moe_cli moe;
} mdc_train_options;

/* Every rank parses the same argv: a failure is the same everywhere (MDC_ERR_INVALID naming
 * the option). *help: --help was given. */
mdc_status mdc_train_parse(mdc_train_options *o, int argc, char **argv, int *help);
/* Fills cfg from the options and checks every combination (the mesh against nranks, the
 * batch, the pipeline, the context-parallel layout, exact mode's blocks), without messages. */
mdc_status mdc_train_validate(mdc_train_options *o, int nranks, mdc_gpt2_config *cfg);
/* The trainer's configuration of validated options (train and predict build the same run). */
mdc_trainer_config mdc_train_trainer_config(const mdc_train_options *o, const mdc_gpt2_config *cfg);

#endif
