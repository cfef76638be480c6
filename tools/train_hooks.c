/* Weak defaults of the train hooks (see train_hooks.h): the io branch defines the real ones. */
#include "train_hooks.h"

#define WEAK __attribute__((weak))

WEAK mdc_status mdc_train_data_open(mdc_train_data **out, const char *path, int vocab, int B, int T,
                                    int rank, int nranks) {
    (void)vocab, (void)B, (void)T, (void)rank, (void)nranks;
    *out = NULL;
    return mdc_fail(MDC_ERR_UNSUPPORTED, "--data %s: token shards need the io branch (datasets/)", path);
}
WEAK mdc_status mdc_train_data_next(mdc_train_data *d, int *inputs, int *targets) {
    (void)d, (void)inputs, (void)targets;
    return mdc_fail(MDC_ERR_UNSUPPORTED, "--data: token shards need the io branch (datasets/)");
}
WEAK void mdc_train_data_close(mdc_train_data *d) { (void)d; }
WEAK mdc_status mdc_train_save(const char *path, mdc_gpt2 *m, int step) {
    (void)m, (void)step;
    return mdc_fail(MDC_ERR_UNSUPPORTED, "--save %s: checkpoints need the io branch (safetensors)", path);
}
WEAK mdc_status mdc_train_resume(const char *path, mdc_gpt2 *m, int *step) {
    (void)m, (void)step;
    return mdc_fail(MDC_ERR_UNSUPPORTED, "--resume %s: checkpoints need the io branch (safetensors)", path);
}
