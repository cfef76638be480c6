/* The io side of `minidc train` (the hooks declared in tools/train_hooks.h): --data reads a token shard through the batch loader, --save and
 * --resume write and read a safetensors checkpoint (include/minidc/weights.h).
 *
 * `minidc train` takes one batch per step, so the loader position equals the step. The hook
 * API does not pass the resumed step to mdc_train_data_open, so mdc_train_resume remembers the
 * checkpoint's data position here and the next mdc_train_data_open seeks to it (cmd_train.c
 * calls resume before opening the data).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/datasets.h"
#include "minidc/weights.h"
#include "train_dp.h"
#include "train_hooks.h"

struct mdc_train_data {
    mdc_loader *ld;
};

static uint64_t resumed_position; /* set by mdc_train_resume, used by the next data_open */

mdc_status mdc_train_data_open(mdc_train_data **out, const char *path, int vocab, int B, int T, int rank,
                               int nranks) {
    *out = NULL;
    /* B is this rank's batch: the global batch is B * nranks */
    mdc_loader_config cfg = {B * nranks, T, rank, nranks, 0, 0};
    mdc_train_data *d = calloc(1, sizeof *d);
    if (!d) return mdc_fail(MDC_ERR_OOM_HOST, "--data %s", path);
    mdc_status st = mdc_loader_open(&d->ld, path, &cfg);
    if (st) {
        free(d);
        return st;
    }
    uint32_t v = mdc_loader_vocab_size(d->ld);
    if (v > (uint32_t)vocab) {
        mdc_train_data_close(d);
        return mdc_fail(MDC_ERR_INVALID, "--data %s: vocab size %u is larger than the model's %d (--vocab)", path,
                        v, vocab);
    }
    mdc_loader_seek(d->ld, resumed_position);
    *out = d;
    return MDC_OK;
}

mdc_status mdc_train_data_next(mdc_train_data *d, int *inputs, int *targets) {
    return mdc_loader_next(d->ld, inputs, targets);
}

void mdc_train_data_close(mdc_train_data *d) {
    if (!d) return;
    mdc_loader_free(d->ld);
    free(d);
}

mdc_status mdc_train_save(const char *path, mdc_gpt2 *m, int step) {
    mdc_train_state s = {(uint64_t)step, (uint64_t)step, 0};
    return mdc_checkpoint_save(path, m, &s);
}

mdc_status mdc_train_resume(const char *path, mdc_gpt2 *m, int *step) {
    mdc_tensorfile *tf = NULL;
    mdc_train_state s;
    mdc_status st = mdc_safetensors_read(path, &tf);
    if (!st) st = mdc_checkpoint_load(tf, path, m, &s);
    mdc_tensorfile_free(tf);
    if (st) return st;
    /* steps = 0: the caller checks its --steps with mdc_train_first_step once it knows them */
    if ((st = mdc_train_first_step(path, s.step, 0, step))) return st;
    resumed_position = s.data_position;
    return MDC_OK;
}

mdc_status mdc_train_first_step(const char *path, uint64_t step, int steps, int *step0) {
    if (step > (uint64_t)1 << 30)
        return mdc_fail(MDC_ERR_FORMAT, "%s: step %llu out of range (at most 2^30)", path, (unsigned long long)step);
    /* 64-bit sum: the last step must still fit the int step counter */
    if (steps < 0 || (long long)step + steps > INT_MAX)
        return mdc_fail(MDC_ERR_INVALID, "--steps %d after step %llu of the checkpoint %s would pass step %d", steps,
                        (unsigned long long)step, path, INT_MAX);
    *step0 = (int)step;
    return MDC_OK;
}
