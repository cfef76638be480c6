/* Checkpoints (include/minidc/weights.h): the model's tensors, the AdamW moments and the
 * training state in one safetensors file, sealed with a checksum per tensor and per metadata
 * entry (datasets/checkpoint_seal.c) and verified on load, so a mixed, truncated or edited file
 * fails with the tensor or field named. The tensors themselves go through the weights' loader
 * (datasets/weights.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights_internal.h"

/* The largest step, AdamW step and batch a checkpoint may hold (the int counters of a run). */
#define MAX_COUNT ((uint64_t)1 << 30)

static mdc_status set_u64(mdc_tensorfile *tf, const char *key, uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return mdc_tensorfile_set_meta(tf, key, buf);
}

/* The state field `key`: present, and a plain decimal integer as the writer prints it. */
static mdc_status get_u64(const mdc_tensorfile *tf, const char *label, const char *key, uint64_t *out) {
    const char *v = mdc_tensorfile_get_meta(tf, key);
    if (!v) return mdc_fail(MDC_ERR_FORMAT, "%s: checkpoint __metadata__ has no '%s'", label, key);
    if (!mdc_i_parse_u64(v, out))
        return mdc_fail(MDC_ERR_FORMAT,
                        "%s: checkpoint __metadata__ '%s' = '%.40s' is not a plain non-negative "
                        "integer (decimal digits only, no sign, space or leading zero)",
                        label, key, v);
    return MDC_OK;
}

mdc_status mdc_checkpoint_save(const char *path, mdc_gpt2 *m, const mdc_train_state *s) {
    if (s->seed_set > 1 || s->global_batch == 0 || s->global_batch > MAX_COUNT || s->step > MAX_COUNT ||
        s->step != (uint64_t)mdc_gpt2_adam_step(m) + s->skipped || s->scale_log2 > 127) /* the loader would refuse */
        return mdc_fail(MDC_ERR_INVALID, "%s: cannot save step %llu (AdamW step %d), seed_set %llu, global_batch %llu",
                        path, (unsigned long long)s->step, mdc_gpt2_adam_step(m), (unsigned long long)s->seed_set,
                        (unsigned long long)s->global_batch);
    mdc_tensorfile *tf = NULL;
    mdc_status st = mdc_tensorfile_new(&tf);
    if (!st) st = mdc_tensorfile_set_meta(tf, "minidc.format", "checkpoint-2");
    if (!st) st = mdc_gpt2_set_config_meta(mdc_gpt2_get_config(m), tf);
    if (!st) st = set_u64(tf, "step", s->step);
    if (!st) st = set_u64(tf, "data_position", s->data_position);
    if (!st) st = set_u64(tf, "seed", s->seed);
    if (!st) st = set_u64(tf, "adam_step", (uint64_t)mdc_gpt2_adam_step(m));
    if (!st) st = set_u64(tf, "seed_set", s->seed_set);
    if (!st) st = set_u64(tf, "global_batch", s->global_batch);
    if (!st) st = set_u64(tf, "data_sequences", s->data_sequences);
    if (!st && s->skipped) st = set_u64(tf, "skipped_steps", s->skipped);
    if (!st && s->scale_set) st = set_u64(tf, "loss_scale_log2", s->scale_log2);
    if (!st && s->scale_set) st = set_u64(tf, "loss_scale_clean", s->scale_clean);
    if (!st) st = mdc_gpt2_add_tensors(m, mdc_gpt2_params(m), "", tf);
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    for (int l = 0; !st && l < c->L; l++) { /* the MoE blocks' routing biases */
        int b = mdc_gpt2_moe_index(c, l);
        if (b < 0) continue;
        char name[64];
        snprintf(name, sizeof name, "h.%d.mlp.router.e_score_correction_bias", l);
        int64_t shape[1] = {c->E};
        st = mdc_tensorfile_add(tf, name, MDC_TD_F32, 1, shape, mdc_gpt2_moe_bias(m) + (size_t)b * c->E);
    }
    if (!st && mdc_gpt2_adam_m(m)) st = mdc_gpt2_add_tensors(m, mdc_gpt2_adam_m(m), "adam.m.", tf);
    if (!st && mdc_gpt2_adam_v(m)) st = mdc_gpt2_add_tensors(m, mdc_gpt2_adam_v(m), "adam.v.", tf);
    if (!st) st = mdc_checkpoint_seal(tf);
    if (!st) st = mdc_safetensors_write(path, tf);
    mdc_tensorfile_free(tf);
    return st;
}

/* Copies the "adam.X.<name>" tensors into the moment allocation `dst`; every value must be
 * finite, and >= 0 if `nonneg` (the second moment). */
static mdc_status load_moment(mdc_gpt2 *m, const mdc_tensorfile *tf, const char *label, const char *prefix, float *dst,
                              int nonneg) {
    const mdc_gpt2_config *cfg = mdc_gpt2_get_config(m);
    for (int k = 0; k < mdc_gpt2_tensor_count(cfg); k++) {
        mdc_param_tensor p;
        mdc_gpt2_tensor_at(cfg, k, &p);
        char name[192], spelled[160]; /* as the checkpoint spells its weights (read first) */
        snprintf(name, sizeof name, "%s%s", prefix, mdc_gpt2_spelled(m, &p, spelled, sizeof spelled));
        const mdc_tensor *t = mdc_tensorfile_find(tf, name);
        if (!t) return mdc_fail(MDC_ERR_FORMAT, "%s: checkpoint has no tensor '%s'", label, name);
        mdc_status st = mdc_i_weights_to_f32(label, t, &p, dst + p.offset, nonneg);
        if (st) return st;
        for (size_t i = p.numel; i < p.alloc; i++) dst[p.offset + i] = 0;
    }
    return MDC_OK;
}

/* The MoE blocks' period as the tensors show it (every n >= L: block 0 only). */
static int moe_period(const mdc_gpt2_config *c) {
    int n = c->moe_every > 0 ? c->moe_every : 1;
    return n > c->L ? c->L : n;
}

mdc_status mdc_checkpoint_load(const mdc_tensorfile *tf, const char *label, mdc_gpt2 *m, mdc_train_state *s) {
    int version = mdc_i_checkpoint_format(tf);
    const char *fmt = mdc_tensorfile_get_meta(tf, "minidc.format");
    if (version == 1)
        return mdc_fail(MDC_ERR_UNSUPPORTED,
                        "%s: a checkpoint-1 file: it predates the checksum of the checkpoint's "
                        "metadata (step, seed, data position), so an edit to them cannot be detected; resume from a "
                        "checkpoint saved by this minidc (the file still loads as weights: minidc forward --weights)",
                        label);
    if (version != 2)
        return mdc_fail(MDC_ERR_FORMAT,
                        "%s: not a minidc checkpoint (__metadata__ minidc.format is %s%s%s; this "
                        "minidc reads checkpoint-2)",
                        label, fmt ? "'" : "", fmt ? fmt : "missing", fmt ? "'" : "");
    const mdc_gpt2_config *mc = mdc_gpt2_get_config(m);
    mdc_gpt2_config fc;
    mdc_status st = mdc_gpt2_config_from_weights(tf, label, 0, &fc);
    if (st) return st;
    const struct {
        const char *name;
        int file, model;
    } f[] = {{"n_vocab", fc.V, mc->V},
             {"n_ctx", fc.T, mc->T},
             {"n_layer", fc.L, mc->L},
             {"n_head", fc.H, mc->H},
             {"n_embd", fc.C, mc->C},
             {"experts (--experts)", fc.E, mc->E},
             {"MoE blocks every (--moe-every)", fc.E ? moe_period(&fc) : 0, mc->E ? moe_period(mc) : 0},
             {"moe_topk (--topk)", fc.E ? fc.topk : 0, mc->E ? mc->topk : 0}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].file != f[i].model)
            return mdc_fail(MDC_ERR_MISMATCH, "%s: checkpoint %s = %d but the model has %d", label, f[i].name,
                            f[i].file, f[i].model);
    uint64_t adam_step;
    const struct {
        const char *key;
        uint64_t *dst;
    } state[] = {{"step", &s->step},
                 {"data_position", &s->data_position},
                 {"seed", &s->seed},
                 {"adam_step", &adam_step},
                 {"seed_set", &s->seed_set},
                 {"global_batch", &s->global_batch},
                 {"data_sequences", &s->data_sequences}};
    for (size_t i = 0; i < sizeof state / sizeof state[0]; i++)
        if ((st = get_u64(tf, label, state[i].key, state[i].dst))) return st;
    /* fp16's loss scaling, where the saving run had it: the skipped steps, the scale and its clean steps */
    s->skipped = 0, s->scale_set = 0, s->scale_log2 = 0, s->scale_clean = 0;
    if (mdc_tensorfile_get_meta(tf, "skipped_steps") && (st = get_u64(tf, label, "skipped_steps", &s->skipped)))
        return st;
    if (mdc_tensorfile_get_meta(tf, "loss_scale_log2")) {
        if ((st = get_u64(tf, label, "loss_scale_log2", &s->scale_log2)) ||
            (st = get_u64(tf, label, "loss_scale_clean", &s->scale_clean)))
            return st;
        if (s->scale_log2 > 127 || s->scale_clean > MAX_COUNT)
            return mdc_fail(MDC_ERR_FORMAT, "%s: loss_scale_log2 %llu or loss_scale_clean %llu out of range", label,
                            (unsigned long long)s->scale_log2, (unsigned long long)s->scale_clean);
        s->scale_set = 1;
    }
    if (s->step > MAX_COUNT)
        return mdc_fail(MDC_ERR_FORMAT, "%s: step %llu out of range (at most 2^30)", label,
                        (unsigned long long)s->step);
    if (adam_step > MAX_COUNT)
        return mdc_fail(MDC_ERR_FORMAT, "%s: adam_step %llu out of range", label, (unsigned long long)adam_step);
    if (s->seed_set > 1)
        return mdc_fail(MDC_ERR_FORMAT, "%s: seed_set %llu (want 0 or 1)", label, (unsigned long long)s->seed_set);
    if (s->global_batch == 0 || s->global_batch > MAX_COUNT)
        return mdc_fail(MDC_ERR_FORMAT, "%s: global_batch %llu out of range", label,
                        (unsigned long long)s->global_batch);
    /* the data stream's position in sequences and in batches of the saving run must agree (the
     * stream cycles epochs, so a position is never "past the data"; generated data stores 0) */
    if (s->data_sequences && s->data_position != s->data_sequences / s->global_batch)
        return mdc_fail(MDC_ERR_FORMAT,
                        "%s: data_position %llu contradicts data_sequences %llu / global_batch %llu = %llu", label,
                        (unsigned long long)s->data_position, (unsigned long long)s->data_sequences,
                        (unsigned long long)s->global_batch, (unsigned long long)(s->data_sequences / s->global_batch));
    if ((st = mdc_i_weights_load(m, tf, label, "adam."))) return st;
    if (adam_step == 0) /* no step taken: moments that are not all zero contradict it */
        for (int i = 0; i < tf->count; i++) {
            const mdc_tensor *t = &tf->tensors[i];
            if (strncmp(t->name, "adam.", 5) || t->dtype != MDC_TD_F32) continue;
            const float *x = t->data;
            for (size_t j = 0; j < t->numel; j++)
                if (x[j] != 0)
                    return mdc_fail(MDC_ERR_FORMAT,
                                    "%s: adam_step 0 but tensor '%s' holds a non-zero moment at "
                                    "element %zu (%g)",
                                    label, t->name, j, x[j]);
        }
    if (adam_step + s->skipped != s->step) /* every step of a run is one AdamW step, or one fp16 skipped */
        return mdc_fail(MDC_ERR_FORMAT,
                        "%s: adam_step %llu contradicts step %llu with skipped_steps %llu (a step is an AdamW "
                        "step or one fp16's loss scaling skipped)",
                        label, (unsigned long long)adam_step, (unsigned long long)s->step,
                        (unsigned long long)s->skipped);
    if (adam_step > 0) {
        if ((st = mdc_gpt2_set_adam_step(m, (int)adam_step))) return st;
        if ((st = load_moment(m, tf, label, "adam.m.", mdc_gpt2_adam_m(m), 0))) return st;
        if ((st = load_moment(m, tf, label, "adam.v.", mdc_gpt2_adam_v(m), 1))) return st;
    }
    return mdc_checkpoint_verify(tf, label); /* after the values' own checks, which name the element or field */
}
