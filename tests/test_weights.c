/* GPT-2 weights and checkpoints: save -> read -> load gives bit-identical parameters and AdamW
 * state; the config is inferred back from the file; a wrong shape, a missing or unknown tensor
 * gives an error naming the tensor (and both shapes). */
#include <unistd.h>

#include "testutil.h"
#include "minidc/weights.h"

static mdc_gpt2 *make(mdc_device *dev, const mdc_gpt2_config *c) {
    mdc_gpt2 *m;
    MDC_CHECK(mdc_gpt2_create(&m, dev, c, 2, 8));
    return m;
}

int main(void) {
    char p[128], q[128];
    snprintf(p, sizeof p, "/tmp/mdc_w_%d.safetensors", (int)getpid());
    snprintf(q, sizeof q, "/tmp/mdc_w_%d_bad.safetensors", (int)getpid());
    mdc_device_options o;
    mdc_device_options_default(&o);
    mdc_device *dev;
    MDC_CHECK(mdc_device_create(&dev, &o, 0));
    mdc_gpt2_config c = {.V = 97, .T = 16, .L = 2, .H = 3, .C = 24};
    MDC_CHECK(mdc_gpt2_config_check(&c));
    mdc_gpt2 *a = make(dev, &c), *b = make(dev, &c);
    mdc_gpt2_init(a, 5);
    size_t n = mdc_gpt2_param_floats(&c);

    /* one training step so the checkpoint has AdamW moments */
    int x[16], y[16];
    for (int i = 0; i < 16; i++) x[i] = (i * 7) % 97, y[i] = (i * 11 + 3) % 97;
    float loss;
    mdc_adamw_config opt;
    mdc_adamw_config_default(&opt);
    MDC_CHECK(mdc_gpt2_forward(a, x, y, 2, 8, &loss));
    MDC_CHECK(mdc_gpt2_zero_grad(a));
    MDC_CHECK(mdc_gpt2_backward(a));
    MDC_CHECK(mdc_gpt2_update(a, &opt, NULL));
    mdc_train_state s = {1, 1, 5}, r;
    MDC_CHECK(mdc_checkpoint_save(p, a, &s));

    mdc_tensorfile *tf;
    mdc_gpt2_config got;
    MDC_CHECK(mdc_gpt2_read_weights(p, 0, &tf, &got));
    TU_CHECK(got.V == 97 && got.Vp == c.Vp && got.T == 16 && got.L == 2 && got.H == 3 && got.C == 24,
             "inferred V=%d T=%d L=%d H=%d C=%d", got.V, got.T, got.L, got.H, got.C);
    TU_CHECK(mdc_tensorfile_find(tf, "wte.weight") && mdc_tensorfile_find(tf, "h.1.attn.c_attn.weight"),
             "HF names in the file");
    const mdc_tensor *ca = mdc_tensorfile_find(tf, "h.0.attn.c_attn.weight");
    TU_CHECK(ca && ca->shape[0] == 24 && ca->shape[1] == 72, "Conv1D layout [in, out]");
    MDC_CHECK(mdc_checkpoint_load(tf, p, b, &r));
    TU_CHECK(r.step == 1 && r.data_position == 1 && r.seed == 5, "train state");
    TU_CHECK(mdc_gpt2_adam_step(b) == 1, "adam step %d", mdc_gpt2_adam_step(b));
    tu_cmp_f32("params", mdc_gpt2_params(b), mdc_gpt2_params(a), n);
    tu_cmp_f32("adam m", mdc_gpt2_adam_m(b), mdc_gpt2_adam_m(a), n);
    tu_cmp_f32("adam v", mdc_gpt2_adam_v(b), mdc_gpt2_adam_v(a), n);
    /* a checkpoint is also a weights file */
    memset(mdc_gpt2_params(b), 0, n * sizeof(float));
    MDC_CHECK(mdc_gpt2_load_weights(b, tf, p));
    tu_cmp_f32("params via load_weights", mdc_gpt2_params(b), mdc_gpt2_params(a), n);

    /* the "transformer." prefix and the HF mask buffer are accepted */
    mdc_tensorfile *hf;
    MDC_CHECK(mdc_tensorfile_new(&hf));
    MDC_CHECK(mdc_gpt2_add_tensors(a, mdc_gpt2_params(a), "transformer.", 1, hf));
    int64_t mshape[4] = {1, 1, 16, 16};
    MDC_CHECK(mdc_tensorfile_add(hf, "transformer.h.0.attn.bias", MDC_TD_F32, 4, mshape, NULL));
    MDC_CHECK(mdc_gpt2_load_weights(b, hf, "hf"));
    /* an untied lm_head is refused */
    int64_t lshape[2] = {97, 24};
    MDC_CHECK(mdc_tensorfile_add(hf, "lm_head.weight", MDC_TD_F32, 2, lshape, NULL));
    TU_STATUS(mdc_gpt2_load_weights(b, hf, "hf"), MDC_ERR_UNSUPPORTED);
    TU_CONTAINS(mdc_detail(), "lm_head.weight");
    mdc_tensorfile_free(hf);

    /* wrong shape, missing, unknown */
    MDC_CHECK(mdc_tensorfile_new(&hf));
    for (int i = 0; i < tf->count; i++) {
        const mdc_tensor *t = &tf->tensors[i];
        if (strncmp(t->name, "adam.", 5)) MDC_CHECK(mdc_tensorfile_add(hf, t->name, t->dtype, t->ndim, t->shape, t->data));
    }
    hf->tensors[2].shape[0] = 23; /* h.0.ln_1.weight [24] -> [23]: bytes no longer match, so edit a copy */
    hf->tensors[2].numel = 23;
    TU_STATUS(mdc_gpt2_load_weights(b, hf, "bad"), MDC_ERR_MISMATCH);
    TU_CONTAINS(mdc_detail(), "[23]");
    TU_CONTAINS(mdc_detail(), "[24]");
    hf->tensors[2].shape[0] = 24;
    hf->tensors[2].numel = 24;
    free(hf->tensors[2].name);
    hf->tensors[2].name = strdup("h.0.ln_9.weight");
    TU_STATUS(mdc_gpt2_load_weights(b, hf, "bad"), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "h.0.ln_9.weight");
    MDC_CHECK(mdc_safetensors_write(q, hf));
    mdc_tensorfile *hf2;
    TU_STATUS(mdc_gpt2_read_weights(q, 0, &hf2, &got), MDC_ERR_INVALID); /* no n_head metadata: needs --heads */
    TU_CONTAINS(mdc_detail(), "--heads");
    mdc_tensorfile_free(hf);
    mdc_tensorfile_free(tf);
    mdc_gpt2_free(a);
    mdc_gpt2_free(b);
    mdc_device_free(dev);
    remove(p);
    remove(q);
    return tu_finish("test_weights");
}
