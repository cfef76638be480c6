/* GPT-2 weights and checkpoints: save -> read -> load gives bit-identical parameters and AdamW
 * state; the config is inferred back from the file; a wrong shape or dtype, a missing or unknown
 * tensor gives an error naming the tensor (and both shapes); a NaN or inf in the weights or
 * moments, or a negative second moment, is refused naming the file, tensor and element; the
 * metadata is sealed like the tensors (an edit names the field), its state fields are plain
 * integers with step = adam_step, a checkpoint-1 file is not resumed, and a file read as
 * weights is verified too. */
#include <math.h>
#include <unistd.h>

#include "testutil.h"
#include "minidc/weights.h"

/* A load must fail with MDC_ERR_FORMAT and the detail "<label>: tensor '<name>': element <i> is
 * <what>" (a macro, so a failure reports the caller's line). */
#define EXPECT_BAD(expr, label, name, i, what)                                                                     \
    do {                                                                                                           \
        char want_[256];                                                                                           \
        snprintf(want_, sizeof want_, "%s: tensor '%s': element %zu is %s", (label), (name), (size_t)(i), (what)); \
        TU_STATUS(expr, MDC_ERR_FORMAT);                                                                           \
        TU_CONTAINS(mdc_detail(), want_);                                                                          \
    } while (0)

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
    mdc_train_state s = {1, 1, 5, 1, 4, 4, 0, 0, 0, 0}, r;
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

    /* non-finite values are refused by both loaders, wherever they are; the moments only by
     * the checkpoint loader (a checkpoint read as weights leaves them alone) */
    float *w = (float *)mdc_tensorfile_find(tf, "h.0.attn.c_attn.weight")->data; /* [24, 72] */
    float *am = (float *)mdc_tensorfile_find(tf, "adam.m.h.1.mlp.c_fc.bias")->data;
    float *av = (float *)mdc_tensorfile_find(tf, "adam.v.wte.weight")->data; /* [97, 24] */
    const struct {
        float v;
        const char *is;
        size_t at;
    } nf[] = {{NAN, "nan", 17}, {INFINITY, "inf", 0}, {-INFINITY, "-inf", 24 * 72 - 1}, {-NAN, "nan", 5}};
    for (size_t i = 0; i < sizeof nf / sizeof nf[0]; i++) {
        float keep = w[nf[i].at];
        w[nf[i].at] = nf[i].v;
        EXPECT_BAD(mdc_gpt2_load_weights(b, tf, p), p, "h.0.attn.c_attn.weight", nf[i].at, nf[i].is);
        EXPECT_BAD(mdc_checkpoint_load(tf, p, b, &r), p, "h.0.attn.c_attn.weight", nf[i].at, nf[i].is);
        w[nf[i].at] = keep;
        keep = am[nf[i].at % 96];
        am[nf[i].at % 96] = nf[i].v;
        EXPECT_BAD(mdc_checkpoint_load(tf, p, b, &r), p, "adam.m.h.1.mlp.c_fc.bias", nf[i].at % 96, nf[i].is);
        MDC_CHECK(mdc_gpt2_load_weights(b, tf, p));
        am[nf[i].at % 96] = keep;
        keep = av[nf[i].at];
        av[nf[i].at] = nf[i].v;
        EXPECT_BAD(mdc_checkpoint_load(tf, p, b, &r), p, "adam.v.wte.weight", nf[i].at, nf[i].is);
        av[nf[i].at] = keep;
    }
    /* v < 0 is refused (sqrt(v) would be NaN); m < 0 and v = -0 are valid AdamW state */
    mdc_param_tensor pfc, pwte;
    MDC_CHECK(mdc_gpt2_tensor_at(&c, mdc_gpt2_tensor_find(&c, "h.1.mlp.c_fc.bias"), &pfc));
    MDC_CHECK(mdc_gpt2_tensor_at(&c, mdc_gpt2_tensor_find(&c, "wte"), &pwte));
    float keepv = av[3], keepm = am[3];
    av[3] = -0.5f;
    EXPECT_BAD(mdc_checkpoint_load(tf, p, b, &r), p, "adam.v.wte.weight", 3, "-0.5");
    TU_CONTAINS(mdc_detail(), "cannot be negative");
    av[3] = -0.0f;
    am[3] = -fabsf(keepm) - 1.0f;
    TU_STATUS(mdc_checkpoint_load(tf, p, b, &r), MDC_ERR_FORMAT); /* valid values, but not what was saved */
    TU_CONTAINS(mdc_detail(), "does not match its checksum");
    MDC_CHECK(mdc_checkpoint_seal(tf)); /* as a writer of these values would have */
    MDC_CHECK(mdc_checkpoint_load(tf, p, b, &r));
    float gv = mdc_gpt2_adam_v(b)[pwte.offset + 3], gm = mdc_gpt2_adam_m(b)[pfc.offset + 3];
    TU_CHECK(gv == 0 && signbit(gv) && gm == am[3], "loaded v = %g, m = %g (want -0, %g)", gv, gm, am[3]);
    av[3] = keepv, am[3] = keepm;
    MDC_CHECK(mdc_checkpoint_seal(tf));
    /* the same through a file: the path names it */
    float keepw = w[17];
    w[17] = NAN;
    MDC_CHECK(mdc_safetensors_write(q, tf));
    w[17] = keepw;
    mdc_tensorfile *nan_tf;
    MDC_CHECK(mdc_safetensors_read(q, &nan_tf));
    EXPECT_BAD(mdc_checkpoint_load(nan_tf, q, b, &r), q, "h.0.attn.c_attn.weight", 17, "nan");
    mdc_tensorfile_free(nan_tf);
    /* a moment of another dtype is a file problem (MDC_ERR_FORMAT), not a rank mismatch */
    mdc_tensor *amt = (mdc_tensor *)mdc_tensorfile_find(tf, "adam.m.h.1.mlp.c_fc.bias");
    amt->dtype = MDC_TD_I32;
    TU_STATUS(mdc_checkpoint_load(tf, p, b, &r), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "adam.m.h.1.mlp.c_fc.bias");
    TU_CONTAINS(mdc_detail(), "not a floating-point type");
    amt->dtype = MDC_TD_F32;
    /* a moment of the right size but another shape (it was not checked: same element count) */
    mdc_tensor *amw = (mdc_tensor *)mdc_tensorfile_find(tf, "adam.m.h.0.attn.c_attn.weight");
    amw->shape[0] = 72, amw->shape[1] = 24;
    TU_STATUS(mdc_checkpoint_load(tf, p, b, &r), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "tensor 'adam.m.h.0.attn.c_attn.weight': shape [72, 24] in the file, "
                              "the model expects [24, 72]");
    amw->shape[0] = 24, amw->shape[1] = 72;
    /* everything restored: the checkpoint loads bit for bit again */
    MDC_CHECK(mdc_checkpoint_load(tf, p, b, &r));
    tu_cmp_f32("params after the bad loads", mdc_gpt2_params(b), mdc_gpt2_params(a), n);
    tu_cmp_f32("adam m after the bad loads", mdc_gpt2_adam_m(b), mdc_gpt2_adam_m(a), n);
    tu_cmp_f32("adam v after the bad loads", mdc_gpt2_adam_v(b), mdc_gpt2_adam_v(a), n);

    /* the metadata: a contradiction names both fields, an edit that contradicts nothing the
     * field, a value that is not a plain integer the field; sealed values load */
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "step", "2"));
    TU_STATUS(mdc_checkpoint_load(tf, p, b, &r), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "adam_step 1 contradicts step 2 with skipped_steps 0");
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "adam_step", "2"));
    TU_STATUS(mdc_checkpoint_load(tf, p, b, &r), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "__metadata__ 'step' = '2' does not match its checksum");
    MDC_CHECK(mdc_checkpoint_seal(tf));
    MDC_CHECK(mdc_checkpoint_load(tf, p, b, &r));
    TU_CHECK(r.step == 2 && mdc_gpt2_adam_step(b) == 2, "sealed step %llu, adam step %d", (unsigned long long)r.step,
             mdc_gpt2_adam_step(b));
    const char *bad_ints[] = {" 1", "1 ", "+1", "01", "1.0", "0x1", "", "18446744073709551616"};
    for (size_t i = 0; i < sizeof bad_ints / sizeof bad_ints[0]; i++) {
        MDC_CHECK(mdc_tensorfile_set_meta(tf, "data_position", bad_ints[i]));
        MDC_CHECK(mdc_checkpoint_seal(tf)); /* a writer's own bad value, not an edit */
        TU_STATUS(mdc_checkpoint_load(tf, p, b, &r), MDC_ERR_FORMAT);
        TU_CONTAINS(mdc_detail(), "'data_position' = '");
        TU_CONTAINS(mdc_detail(), "is not a plain non-negative integer");
    }
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "data_position", "1"));
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "step", "1"));
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "adam_step", "1"));
    MDC_CHECK(mdc_checkpoint_seal(tf));
    MDC_CHECK(mdc_checkpoint_verify(tf, p));
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "extra", "x")); /* a key added: the last entry */
    TU_STATUS(mdc_checkpoint_verify(tf, p), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "__metadata__ 'extra' has no checksum");
    /* a key removed: its checksum is left behind */
    tf->meta_count--;
    TU_CHECK(!strcmp(tf->meta_keys[tf->meta_count], "extra"), "the last entry is %s", tf->meta_keys[tf->meta_count]);
    free(tf->meta_keys[tf->meta_count]);
    free(tf->meta_values[tf->meta_count]);
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "checksum.__metadata__.extra", "0123456789abcdef"));
    TU_STATUS(mdc_checkpoint_verify(tf, p), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "__metadata__ 'extra' is missing but its checksum");
    MDC_CHECK(mdc_checkpoint_seal(tf));
    MDC_CHECK(mdc_checkpoint_load(tf, p, b, &r));
    TU_CHECK(r.step == 1 && mdc_gpt2_adam_step(b) == 1, "step %llu after the round trip", (unsigned long long)r.step);
    /* a checkpoint-1 file is not resumed; an unknown format is not read */
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "minidc.format", "checkpoint-1"));
    TU_STATUS(mdc_checkpoint_load(tf, p, b, &r), MDC_ERR_UNSUPPORTED);
    TU_CONTAINS(mdc_detail(), "predates the checksum of the checkpoint's metadata");
    MDC_CHECK(mdc_checkpoint_verify(tf, p)); /* as weights: its tensor checksums match */
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "minidc.format", "checkpoint-3"));
    TU_STATUS(mdc_checkpoint_verify(tf, p), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "checkpoint format this minidc does not know");
    MDC_CHECK(mdc_tensorfile_set_meta(tf, "minidc.format", "checkpoint-2"));
    /* a flipped byte read back as weights: refused by mdc_gpt2_read_weights, naming the tensor */
    ((unsigned char *)w)[1] ^= 0x10;
    MDC_CHECK(mdc_safetensors_write(q, tf));
    ((unsigned char *)w)[1] ^= 0x10;
    mdc_tensorfile *flip;
    TU_STATUS(mdc_gpt2_read_weights(q, 0, &flip, &got), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "tensor 'h.0.attn.c_attn.weight' does not match its checksum");
    TU_CHECK(flip == NULL, "no tensors returned on failure");
    /* what the loader would refuse is not saved */
    mdc_train_state s_bad = {2, 1, 5, 1, 4, 4, 0, 0, 0, 0};
    TU_STATUS(mdc_checkpoint_save(q, a, &s_bad), MDC_ERR_INVALID);
    s_bad.skipped = 1; /* fp16: step 2 is AdamW's step 1 and one skipped step: saved, and loaded back */
    MDC_CHECK(mdc_checkpoint_save(q, a, &s_bad));
    mdc_tensorfile *sk;
    mdc_train_state got_sk;
    MDC_CHECK(mdc_safetensors_read(q, &sk));
    MDC_CHECK(mdc_checkpoint_load(sk, q, b, &got_sk));
    TU_CHECK(got_sk.step == 2 && got_sk.skipped == 1 && !got_sk.scale_set, "step %llu, skipped %llu",
             (unsigned long long)got_sk.step, (unsigned long long)got_sk.skipped);
    mdc_tensorfile_free(sk);

    /* the "transformer." prefix and the HF mask buffer are accepted */
    mdc_tensorfile *hf;
    MDC_CHECK(mdc_tensorfile_new(&hf));
    MDC_CHECK(mdc_gpt2_add_tensors(a, mdc_gpt2_params(a), "transformer.", hf));
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
        if (strncmp(t->name, "adam.", 5))
            MDC_CHECK(mdc_tensorfile_add(hf, t->name, t->dtype, t->ndim, t->shape, t->data));
    }
    hf->tensors[2].shape[0] = 23; /* h.0.ln_1.weight [24] -> [23]: bytes no longer match, so edit a copy */
    hf->tensors[2].numel = 23;
    TU_STATUS(mdc_gpt2_load_weights(b, hf, "bad"), MDC_ERR_FORMAT); /* the file's problem, not the ranks' */
    TU_CONTAINS(mdc_detail(), "[23]");
    TU_CONTAINS(mdc_detail(), "[24]");
    hf->tensors[2].shape[0] = 24;
    hf->tensors[2].numel = 24;
    hf->tensors[2].dtype = MDC_TD_I32; /* same size: only the dtype is wrong */
    TU_STATUS(mdc_gpt2_load_weights(b, hf, "bad"), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "bad: tensor 'h.0.ln_1.weight': dtype");
    /* an F64 value beyond float32's range is inf once converted */
    double *d64 = calloc(24, sizeof *d64);
    d64[4] = 1e300;
    free(hf->tensors[2].data);
    hf->tensors[2].data = d64;
    hf->tensors[2].dtype = MDC_TD_F64;
    hf->tensors[2].nbytes = 24 * sizeof *d64;
    EXPECT_BAD(mdc_gpt2_load_weights(b, hf, "bad"), "bad", "h.0.ln_1.weight", 4, "inf as float32");
    d64[4] = 1;
    MDC_CHECK(mdc_gpt2_load_weights(b, hf, "bad"));
    free(hf->tensors[2].name);
    hf->tensors[2].name = strdup("h.0.ln_9.weight");
    TU_STATUS(mdc_gpt2_load_weights(b, hf, "bad"), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "h.0.ln_9.weight");
    MDC_CHECK(mdc_safetensors_write(q, hf));
    mdc_tensorfile *hf2;
    TU_STATUS(mdc_gpt2_read_weights(q, 0, &hf2, &got), MDC_ERR_INVALID); /* no n_head metadata: needs --heads */
    TU_CONTAINS(mdc_detail(), "--heads");
    MDC_CHECK(mdc_tensorfile_set_meta(hf, "n_head", "3 ")); /* a weights file's metadata is read strictly too */
    MDC_CHECK(mdc_safetensors_write(q, hf));
    TU_STATUS(mdc_gpt2_read_weights(q, 0, &hf2, &got), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "__metadata__ n_head '3 ' is not a positive integer");
    mdc_tensorfile_free(hf);
    mdc_tensorfile_free(tf);
    mdc_gpt2_free(a);
    mdc_gpt2_free(b);
    mdc_device_free(dev);
    remove(p);
    remove(q);
    return tu_finish("test_weights");
}
