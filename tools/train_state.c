/* Checkpoints, the generated task and the serial comparison of `minidc train`
 * (tools/train_state.h). A checkpoint is one safetensors file of global tensors with Hugging
 * Face names (include/minidc/weights.h): the parameters, AdamW's m and v, the step, the data
 * position and the seed, so any mesh resumes any other mesh's run. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/splitmix.h"
#include "train_state.h"

/* Each sequence repeats a random pattern of 2..8 tokens drawn from the first min(V, 32) ids;
 * after one period every next token is predictable. The loss falls from ln V to about ln 32
 * as the model learns the alphabet (tens of steps), then toward (period / T) ln 32 as it
 * learns to copy (hundreds). */
void mdc_train_generated_batch(int *inputs, int *targets, int B, int T, int V, uint64_t seed, int step) {
    for (int b = 0; b < B; b++) {
        uint64_t r = mdc_splitmix64(seed ^ mdc_splitmix64(((uint64_t)step << 20) + (uint64_t)b));
        int period = 2 + (int)(r % 7), pat[8];
        uint64_t alphabet = V < 32 ? (uint64_t)V : 32;
        for (int i = 0; i < period; i++) pat[i] = (int)(mdc_splitmix64(r + 1 + (uint64_t)i) % alphabet);
        for (int t = 0; t <= T; t++) {
            int tok = pat[t % period];
            if (t < T) inputs[(size_t)b * T + t] = tok;
            if (t > 0) targets[(size_t)b * T + t - 1] = tok;
        }
    }
}

/* A serial model on its own unaccounted device: the global layout for checkpoint files. */
static mdc_status scratch_model(mdc_runtime *rt, const mdc_gpt2_config *cfg, mdc_device **dev, mdc_gpt2 **m) {
    mdc_status st = mdc_device_create_spec(dev, mdc_device_get_spec(rt->dev), mdc_device_get_energy_table(rt->dev), 1e6,
                                           MDC_EMULATE_OFF, 1, rt->rank);
    if (!st) st = mdc_gpt2_create(m, *dev, cfg, 1, 1);
    return st;
}

/* --save DIR/ and --resume DIR: a directory; its checkpoint is DIR/training_state.safetensors */
static int dir_path(const char *path) {
    size_t n = strlen(path);
    return (n && path[n - 1] == '/') || mdc_hf_is_dir(path);
}
static mdc_status state_path(const char *dir, char *buf, size_t cap) {
    size_t n = strlen(dir);
    int w = snprintf(buf, cap, "%s%straining_state.safetensors", dir, n && dir[n - 1] == '/' ? "" : "/");
    return w > 0 && (size_t)w < cap ? MDC_OK : mdc_fail(MDC_ERR_INVALID, "%s: path too long", dir);
}

mdc_status mdc_train_save(mdc_runtime *rt, mdc_trainer *t, const mdc_gpt2_config *cfg, const char *path,
                          const mdc_train_state *ts) {
    mdc_device *sdev = NULL;
    mdc_gpt2 *sm = NULL;
    mdc_status st = MDC_OK;
    float *p = NULL, *m = NULL, *v = NULL;
    int step = mdc_trainer_adam_step(t);
    if (rt->rank == 0) {
        st = scratch_model(rt, cfg, &sdev, &sm);
        if (!st && step > 0) st = mdc_gpt2_set_adam_step(sm, step);
        if (!st) p = mdc_gpt2_params(sm), m = mdc_gpt2_adam_m(sm), v = mdc_gpt2_adam_v(sm);
    }
    /* a failure on rank 0 here is rank 0's alone: it aborts the peers (caller) */
    if (!st) st = mdc_trainer_gather(t, p, m, v, 0);
    if (!st && rt->rank == 0) {
        size_t nb = (size_t)mdc_gpt2_moe_blocks(cfg) * cfg->E; /* the routing biases: the same on every rank */
        if (nb) memcpy(mdc_gpt2_moe_bias(sm), mdc_gpt2_moe_bias(mdc_trainer_model(t)), nb * sizeof(float));
        char state[4200];
        if (!dir_path(path)) st = mdc_checkpoint_save(path, sm, ts); /* atomic and fsync'd (mdc_atomic_*) */
        else if (!(st = mdc_family_write_dir(sm, path)) && !(st = state_path(path, state, sizeof state)))
            st = mdc_checkpoint_save(state, sm, ts); /* the directory transformers reads, the state beside it */
    }
    mdc_gpt2_free(sm);
    mdc_device_free(sdev);
    return st;
}

/* The MoE blocks' routing biases (the same on every rank) from the scratch model into the run's
 * trainers. */
static void copy_bias(mdc_gpt2 *sm, mdc_trainer *t, mdc_trainer *serial, const mdc_gpt2_config *cfg) {
    size_t nb = (size_t)mdc_gpt2_moe_blocks(cfg) * cfg->E;
    for (int k = 0; nb && k < 2; k++) {
        mdc_trainer *to = k ? serial : t;
        if (to) memcpy(mdc_gpt2_moe_bias(mdc_trainer_model(to)), mdc_gpt2_moe_bias(sm), nb * sizeof(float));
    }
}

mdc_status mdc_train_load(mdc_runtime *rt, mdc_trainer *t, mdc_trainer *serial, const mdc_gpt2_config *cfg,
                          const char *path, mdc_train_state *ts) {
    mdc_tensorfile *tf = NULL;
    mdc_device *sdev = NULL;
    mdc_gpt2 *sm = NULL;
    char state[4200];
    mdc_status st = dir_path(path) ? state_path(path, state, sizeof state) : MDC_OK;
    if (dir_path(path)) path = state;
    if (!st) st = mdc_safetensors_read(path, &tf);
    if (!st) st = scratch_model(rt, cfg, &sdev, &sm);
    if (!st) st = mdc_checkpoint_load(tf, path, sm, ts);
    int step = sm ? mdc_gpt2_adam_step(sm) : 0;
    if (!st) st = mdc_trainer_load(t, mdc_gpt2_params(sm), mdc_gpt2_adam_m(sm), mdc_gpt2_adam_v(sm), step);
    if (!st && serial)
        st = mdc_trainer_load(serial, mdc_gpt2_params(sm), mdc_gpt2_adam_m(sm), mdc_gpt2_adam_v(sm), step);
    if (!st) copy_bias(sm, t, serial, cfg);
    mdc_tensorfile_free(tf);
    mdc_gpt2_free(sm);
    mdc_device_free(sdev);
    return st;
}

mdc_status mdc_train_init(mdc_runtime *rt, mdc_trainer *t, mdc_trainer *serial, const mdc_gpt2_config *cfg,
                          const char *path) {
    mdc_tensorfile *tf = NULL;
    mdc_device *sdev = NULL;
    mdc_gpt2 *sm = NULL;
    mdc_gpt2_config fc;
    mdc_status st = mdc_gpt2_read_weights(path, cfg->H, &tf, &fc);
    if (!st && (fc.family != cfg->family || fc.V != cfg->V || fc.C != cfg->C || fc.L != cfg->L || fc.H != cfg->H ||
                fc.T != cfg->T || mdc_gpt2_param_count(&fc) != mdc_gpt2_param_count(cfg)))
        st = mdc_fail(
            MDC_ERR_INVALID,
            "--init %s: its model (V=%d T=%d L=%d H=%d C=%d, %zu parameters) is not the run's (V=%d T=%d L=%d "
            "H=%d C=%d, %zu); leave --config out to take the directory's",
            path, fc.V, fc.T, fc.L, fc.H, fc.C, mdc_gpt2_param_count(&fc), cfg->V, cfg->T, cfg->L, cfg->H, cfg->C,
            mdc_gpt2_param_count(cfg));
    if (!st) st = scratch_model(rt, cfg, &sdev, &sm);
    if (!st) st = mdc_gpt2_load_weights(sm, tf, path);
    if (!st) st = mdc_trainer_load(t, mdc_gpt2_params(sm), NULL, NULL, 0);
    if (!st && serial) st = mdc_trainer_load(serial, mdc_gpt2_params(sm), NULL, NULL, 0);
    if (!st) copy_bias(sm, t, serial, cfg); /* DeepSeek's e_score_correction_bias, where the weights have it */
    mdc_tensorfile_free(tf);
    mdc_gpt2_free(sm);
    mdc_device_free(sdev);
    return st;
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
