/* The prediction's report (tools/predict_report.c): gathered from every process of minidc
 * predict (tools/cmd_predict.c), printed by the first with the formulas behind its figures. */
#ifndef MINIDC_TOOLS_PREDICT_REPORT_H
#define MINIDC_TOOLS_PREDICT_REPORT_H

#include <stdio.h>

#include "minidc/runtime.h"
#include "train_options.h"

typedef struct {
    const mdc_train_options *o;
    const mdc_gpt2_config *cfg;
    mdc_device *dev;
    const mdc_dev_counters *at; /* [3]: before the first step, after the first, after the second */
    const mdc_energy *en;       /* [3]: the same */
    double wall;                /* seconds the two steps took on this host */
    int fold, gpus;
    const char *json;     /* --json path or NULL */
    double fold_mismatch; /* bytes of mirrored messages that differed from their receives */
    int fold_cp;          /* the cp ranks folded too (the zigzag layout) */
    double replays;       /* all-reduces timed by replaying their schedule (collectives/replay.c) */
} mdc_predict_input;

/* Every process calls it (a device-less gather to the first); the first prints to f and writes
 * the JSON. Fails on a message or the JSON file (MDC_ERR_IO naming it). */
mdc_status mdc_predict_report(mdc_runtime *rt, const mdc_predict_input *in, FILE *f);

#endif
