/* Model tests on a tiny odd config (V=97 C=72 H=3 T=13 L=2): the parameter table (Hugging
 * Face names, contiguous offsets, gpt2's 124,439,808 parameters), gradients against central
 * finite differences, bit-identical results with 1 and 2 threads, charged FLOPs equal to
 * mdc_gpt2_step_flops, device memory equal to mdc_gpt2_memory_need, the loss falling on a
 * generated task, and the error paths (bad sizes, tokens, OOM). */
#include <omp.h>

#include "testutil.h"

static const mdc_gpt2_config odd = {.V = 97, .T = 13, .L = 2, .H = 3, .C = 72};
enum { B = 3, T = 13 };

static void batch(int *in, int *tg, int V, int seed) {
    for (int b = 0; b < B; b++) {
        int period = 2 + (b + seed) % 3, pat[4];
        for (int i = 0; i < period; i++) pat[i] = (7 * seed + 13 * b + 31 * i * i + 5) % V;
        for (int t = 0; t <= T; t++) {
            if (t < T) in[b * T + t] = pat[t % period];
            if (t > 0) tg[b * T + t - 1] = pat[t % period];
        }
    }
}

static void test_table(void) {
    mdc_gpt2_config g;
    int bsz;
    MDC_CHECK(mdc_gpt2_config_named("gpt2", &g, &bsz));
    TU_CHECK(g.Vp == 50304 && mdc_gpt2_padded_vocab(50257) == 50304, "gpt2 padded vocab %d", g.Vp);
    TU_CHECK(bsz % 12 == 0, "default batch %d divisible by 2, 3, 4", bsz);
    TU_CHECK(mdc_gpt2_param_count(&g) == 124439808u, "gpt2 has %zu parameters, expected 124439808",
             mdc_gpt2_param_count(&g));
    TU_CHECK(mdc_gpt2_tensor_count(&g) == 148, "gpt2 tensor count %d", mdc_gpt2_tensor_count(&g));
    mdc_param_tensor t, prev;
    size_t end = 0;
    for (int i = 0; i < mdc_gpt2_tensor_count(&g); i++) {
        MDC_CHECK(mdc_gpt2_tensor_at(&g, i, &t));
        TU_CHECK(t.offset == end, "%s at offset %zu, expected %zu (contiguous)", t.name, t.offset, end);
        TU_CHECK(mdc_gpt2_tensor_find(&g, t.name) == i, "find %s", t.name);
        end = t.offset + t.alloc;
        prev = t;
    }
    TU_CHECK(end == mdc_gpt2_param_floats(&g), "table ends at %zu of %zu", end, mdc_gpt2_param_floats(&g));
    TU_CHECK(!strcmp(prev.name, "ln_f.bias"), "last tensor %s", prev.name);
    int i = mdc_gpt2_tensor_find(&g, "transformer.h.11.attn.c_attn.weight");
    MDC_CHECK(mdc_gpt2_tensor_at(&g, i, &t));
    TU_CHECK(t.ndim == 2 && t.shape[0] == 768 && t.shape[1] == 2304 && t.decay, "c_attn.weight [%d,%d]", t.shape[0],
             t.shape[1]);
    MDC_CHECK(mdc_gpt2_tensor_at(&g, 0, &t));
    TU_CHECK(!strcmp(t.name, "wte") && t.shape[0] == 50257 && t.numel == 50257u * 768 && t.alloc == 50304u * 768,
             "wte");
    i = mdc_gpt2_tensor_find(&g, "h.0.mlp.c_proj.weight");
    MDC_CHECK(mdc_gpt2_tensor_at(&g, i, &t));
    TU_CHECK(t.shape[0] == 3072 && t.shape[1] == 768, "mlp.c_proj.weight [%d,%d]", t.shape[0], t.shape[1]);
    i = mdc_gpt2_tensor_find(&g, "h.5.ln_2.bias");
    MDC_CHECK(mdc_gpt2_tensor_at(&g, i, &t));
    TU_CHECK(t.ndim == 1 && !t.decay, "ln_2.bias no decay");
    TU_CHECK(mdc_gpt2_tensor_find(&g, "h.12.ln_1.weight") == -1, "h.12 does not exist");
    TU_STATUS(mdc_gpt2_tensor_at(&g, 148, &t), MDC_ERR_INVALID);
    /* named configs */
    MDC_CHECK(mdc_gpt2_config_named("tiny", &g, &bsz));
    TU_CHECK(g.V == 512 && g.T == 64 && g.L == 2 && g.H == 4 && g.C == 128 && bsz % 12 == 0, "tiny");
    MDC_CHECK(mdc_gpt2_config_named("small", &g, &bsz));
    TU_CHECK(g.V == 4096 && g.T == 128 && g.L == 4 && g.H == 8 && g.C == 256 && bsz % 12 == 0, "small");
    TU_STATUS(mdc_gpt2_config_named("huge", &g, NULL), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "huge");
    mdc_gpt2_config bad = {.V = 97, .T = 13, .L = 2, .H = 5, .C = 72};
    TU_STATUS(mdc_gpt2_config_check(&bad), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "--heads");
}

/* one full training step; returns the loss */
static float step(mdc_gpt2 *m, const int *in, const int *tg, float *norm) {
    float loss;
    mdc_adamw_config o;
    mdc_adamw_config_default(&o);
    MDC_CHECK(mdc_gpt2_forward(m, in, tg, B, T, &loss));
    MDC_CHECK(mdc_gpt2_zero_grad(m));
    MDC_CHECK(mdc_gpt2_backward(m));
    MDC_CHECK(mdc_gpt2_update(m, &o, norm));
    return loss;
}

static void test_gradients(void) {
    mdc_device *d = tu_device(1);
    mdc_gpt2 *m;
    MDC_CHECK(mdc_gpt2_create(&m, d, &odd, B, T));
    mdc_gpt2_init(m, 7);
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    float *p = mdc_gpt2_params(m);
    size_t np = mdc_gpt2_param_floats(c);
    /* larger weights than GPT-2's init, so every gradient is well above the float noise */
    for (int i = 0; i < mdc_gpt2_tensor_count(c); i++) {
        mdc_param_tensor t;
        mdc_gpt2_tensor_at(c, i, &t);
        for (size_t j = 0; j < t.numel; j++) {
            float u = (float)((j * 2654435761u + (size_t)i * 40503u) % 1000) / 1000.0f - 0.5f;
            p[t.offset + j] = t.ndim == 2 ? p[t.offset + j] * 8 : p[t.offset + j] + 0.3f * u;
        }
    }
    int in[B * T], tg[B * T];
    batch(in, tg, c->V, 1);
    float loss;
    MDC_CHECK(mdc_gpt2_forward(m, in, tg, B, T, &loss));
    MDC_CHECK(mdc_gpt2_zero_grad(m));
    MDC_CHECK(mdc_gpt2_backward(m));
    float *g = malloc(sizeof(float) * np);
    memcpy(g, mdc_gpt2_grads(m), sizeof(float) * np);
    TU_CHECK(loss > 1 && loss < 20, "initial loss %g", loss);
    double worst = 0;
    for (int i = 0; i < mdc_gpt2_tensor_count(c); i++) {
        mdc_param_tensor t;
        mdc_gpt2_tensor_at(c, i, &t);
        size_t jmax = 0;
        double gmax = 0;
        for (size_t j = 0; j < t.numel; j++)
            if (fabs(g[t.offset + j]) > gmax) gmax = fabs(g[t.offset + j]), jmax = j;
        size_t picks[3] = {jmax, (t.numel * 7) / 11, t.numel - 1};
        for (int k = 0; k < 3; k++) {
            size_t idx = t.offset + picks[k];
            float save = p[idx], h = 1e-2f;
            double lp = 0, lm = 0;
            p[idx] = save + h;
            MDC_CHECK(mdc_gpt2_forward(m, in, tg, B, T, NULL));
            for (int n = 0; n < B * T; n++) lp += mdc_gpt2_losses(m)[n];
            p[idx] = save - h;
            MDC_CHECK(mdc_gpt2_forward(m, in, tg, B, T, NULL));
            for (int n = 0; n < B * T; n++) lm += mdc_gpt2_losses(m)[n];
            p[idx] = save;
            double num = (lp - lm) / (2.0 * ((double)(save + h) - save)) / (B * T);
            double err = fabs(num - g[idx]) / fmax(gmax, 1e-3);
            worst = fmax(worst, err);
            TU_CHECK(err < 2e-2, "%s[%zu]: analytic %.6g numerical %.6g (max |g| %.3g)", t.name, picks[k], g[idx], num,
                     gmax);
        }
    }
    printf("model gradients vs finite differences (3 per tensor, %d tensors): worst error %.3g of max |g|\n",
           mdc_gpt2_tensor_count(c), worst);
    /* padding rows of wte have no gradient */
    for (size_t j = (size_t)c->V * c->C; j < (size_t)c->Vp * c->C; j++)
        if (g[j] != 0) {
            TU_CHECK(0, "wte padding gradient %g at %zu", g[j], j);
            break;
        }
    free(g);
    /* backward after the logits are gone, or without targets */
    MDC_CHECK(mdc_gpt2_backward(m));
    TU_STATUS(mdc_gpt2_backward(m), MDC_ERR_INVALID);
    MDC_CHECK(mdc_gpt2_forward(m, in, NULL, B, T, &loss));
    TU_CHECK(loss == -1.0f, "loss without targets %g", loss);
    TU_STATUS(mdc_gpt2_backward(m), MDC_ERR_INVALID);
    in[5] = 97;
    TU_STATUS(mdc_gpt2_forward(m, in, tg, B, T, NULL), MDC_ERR_INVALID);
    TU_STATUS(mdc_gpt2_forward(m, in, tg, B + 1, T, NULL), MDC_ERR_INVALID);
    mdc_gpt2_free(m);
    mdc_device_free(d);
}

/* charged FLOPs, memory, and the bits with 1 and 2 threads */
static void run(int threads, float **out_params, float **out_grads, float *losses) {
    omp_set_num_threads(threads);
    mdc_device *d = tu_device(1);
    mdc_gpt2 *m;
    MDC_CHECK(mdc_gpt2_create(&m, d, &odd, B, T));
    mdc_gpt2_init(m, 11);
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    int in[B * T], tg[B * T];
    for (int s = 0; s < 3; s++) {
        batch(in, tg, c->V, s);
        mdc_dev_reset_counters(d);
        losses[s] = step(m, in, tg, NULL);
        mdc_dev_counters k;
        mdc_dev_get_counters(d, &k);
        double want = mdc_gpt2_step_flops(c, B, T);
        TU_CHECK(fabs(k.flops - want) <= 1e-12 * want, "step charged %.17g FLOPs, mdc_gpt2_step_flops %.17g", k.flops,
                 want);
    }
    mdc_gpt2_memory need = mdc_gpt2_memory_need(c, B, T);
    TU_CHECK(mdc_dev_mem_peak(d, MDC_MEM_COUNT) == need.total, "peak device memory %zu, computed need %zu",
             mdc_dev_mem_peak(d, MDC_MEM_COUNT), need.total);
    TU_CHECK(mdc_dev_mem_peak(d, MDC_MEM_ACTS) == need.acts && mdc_dev_mem_peak(d, MDC_MEM_OPTIM) == need.optim &&
                 mdc_dev_mem_peak(d, MDC_MEM_PARAMS) == need.params && mdc_dev_mem_peak(d, MDC_MEM_GRADS) == need.grads,
             "memory per category");
    size_t np = mdc_gpt2_param_floats(c);
    *out_params = malloc(sizeof(float) * np);
    *out_grads = malloc(sizeof(float) * np);
    memcpy(*out_params, mdc_gpt2_params(m), sizeof(float) * np);
    memcpy(*out_grads, mdc_gpt2_grads(m), sizeof(float) * np);
    mdc_gpt2_free(m);
    mdc_device_free(d);
}

static void test_threads_flops_memory(void) {
    float *p1, *g1, *p2, *g2, l1[3], l2[3];
    run(1, &p1, &g1, l1);
    run(2, &p2, &g2, l2);
    size_t np = mdc_gpt2_param_floats(&(mdc_gpt2_config){.V = 97, .Vp = 128, .T = 13, .L = 2, .H = 3, .C = 72});
    int ok = tu_cmp_f32("losses 1 vs 2 threads", l2, l1, 3);
    ok &= tu_cmp_f32("gradients 1 vs 2 threads", g2, g1, np);
    ok &= tu_cmp_f32("parameters after 3 steps, 1 vs 2 threads", p2, p1, np);
    printf("model, 3 steps with 1 and 2 threads: %s\n", ok ? "bit-identical" : "DIFFERENT");
    free(p1), free(g1), free(p2), free(g2);
}

static void test_learns(void) {
    mdc_device *d = tu_device(1);
    mdc_gpt2 *m;
    MDC_CHECK(mdc_gpt2_create(&m, d, &odd, B, T));
    mdc_gpt2_init(m, 3);
    mdc_adamw_config o;
    mdc_adamw_config_default(&o);
    o.lr = 3e-3f;
    int in[B * T], tg[B * T];
    float first = 0, loss = 0;
    for (int s = 0; s < 60; s++) {
        batch(in, tg, 97, s % 4);
        MDC_CHECK(mdc_gpt2_forward(m, in, tg, B, T, &loss));
        if (s == 0) first = loss;
        MDC_CHECK(mdc_gpt2_zero_grad(m));
        MDC_CHECK(mdc_gpt2_backward(m));
        MDC_CHECK(mdc_gpt2_update(m, &o, NULL));
    }
    printf("generated repeat task: loss %.4f -> %.4f after 60 steps\n", first, loss);
    TU_CHECK(loss < 0.5f * first, "loss did not fall enough: %g -> %g", first, loss);
    TU_CHECK(mdc_gpt2_adam_step(m) == 60, "adam step %d", mdc_gpt2_adam_step(m));
    mdc_gpt2_free(m);
    mdc_device_free(d);
}

static void test_errors(void) {
    mdc_device *d = tu_device(1e-9); /* 80 bytes of HBM */
    mdc_gpt2 *m = NULL;
    TU_STATUS(mdc_gpt2_create(&m, d, &odd, B, T), MDC_ERR_OOM_DEVICE);
    TU_CHECK(m == NULL, "no model on failure");
    mdc_device_free(d);
    d = tu_device(1);
    TU_STATUS(mdc_gpt2_create(&m, d, &odd, B, T + 1), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "--seq");
    mdc_gpt2_config c = odd;
    c.C = 73;
    TU_STATUS(mdc_gpt2_create(&m, d, &c, B, T), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "--heads");
    TU_CHECK(mdc_dev_mem_in_use(d, MDC_MEM_COUNT) == 0, "failed creates leave no memory in use");
    mdc_gpt2_free(NULL);
    mdc_device_free(d);
}

/* A MoE config's table: every MoE block's router and experts in file order, contiguous, each
 * name found at its index, the experts known by index. */
static void test_moe_table(void) {
    mdc_gpt2_config c = {.V = 97,
                         .T = 13,
                         .L = 3,
                         .H = 3,
                         .C = 72,
                         .E = 4,
                         .topk = 2,
                         .moe_every = 2}; /* blocks 0 and 2 are MoE, block 1 dense */
    MDC_CHECK(mdc_gpt2_config_check(&c));
    int n = mdc_gpt2_tensor_count(&c);
    TU_CHECK(n == 4 + 12 * 3 + 2 * (4 * 4 - 3), "MoE tensor count %d", n);
    size_t off = 0;
    int experts = 0;
    for (int i = 0; i < n; i++) {
        mdc_param_tensor t;
        MDC_CHECK(mdc_gpt2_tensor_at(&c, i, &t));
        TU_CHECK(t.offset == off, "tensor %d (%s) at %zu, want %zu", i, t.name, t.offset, off);
        TU_CHECK(mdc_gpt2_tensor_find(&c, t.name) == i, "tensor '%s' found at %d, not %d", t.name,
                 mdc_gpt2_tensor_find(&c, t.name), i);
        int j = mdc_gpt2_tensor_expert(&c, i);
        TU_CHECK((j >= 0) == (strstr(t.name, ".mlp.experts.") != NULL), "tensor '%s': expert %d", t.name, j);
        experts += j >= 0;
        off += t.alloc;
    }
    TU_CHECK(off == mdc_gpt2_param_floats(&c), "MoE table ends at %zu, param floats %zu", off,
             mdc_gpt2_param_floats(&c));
    TU_CHECK(experts == 2 * 4 * 4, "%d expert tensors, want 32", experts);
    TU_CHECK(mdc_gpt2_tensor_find(&c, "h.0.mlp.router.weight") == 10, "router of block 0 at %d",
             mdc_gpt2_tensor_find(&c, "h.0.mlp.router.weight"));
    TU_CHECK(mdc_gpt2_tensor_find(&c, "h.1.mlp.c_fc.weight") == 2 + 25 + 8 &&
                 mdc_gpt2_tensor_find(&c, "h.1.mlp.router.weight") < 0,
             "block 1 is dense");
    mdc_param_tensor r;
    MDC_CHECK(mdc_gpt2_tensor_at(&c, mdc_gpt2_tensor_find(&c, "h.2.mlp.experts.3.c_proj.weight"), &r));
    TU_CHECK(r.ndim == 2 && r.shape[0] == 4 * 72 && r.shape[1] == 72 && r.decay,
             "an expert's c_proj is [4C, C] with decay");
    MDC_CHECK(mdc_gpt2_tensor_at(&c, 10, &r));
    TU_CHECK(r.ndim == 2 && r.shape[0] == 72 && r.shape[1] == 4, "the router is [C, E]");
    mdc_gpt2_config bad = c;
    bad.topk = 5;
    TU_CHECK(mdc_gpt2_config_check(&bad) == MDC_ERR_INVALID && strstr(mdc_detail(), "--topk 5"),
             "top-k above E refused");
    printf("MoE table: %d tensors, contiguous, names found, experts known\n", n);
    /* dropless MoE steps allocate exactly mdc_gpt2_memory_need: the blocks' row buffers too (the
     * second step's backward is the peak: AdamW's moments exist from the first update on) */
    mdc_device *d = tu_device(1);
    mdc_gpt2 *m;
    MDC_CHECK(mdc_gpt2_create(&m, d, &c, B, T));
    mdc_gpt2_init(m, 5);
    int in[B * T], tg[B * T];
    batch(in, tg, c.V, 1);
    step(m, in, tg, NULL);
    step(m, in, tg, NULL);
    mdc_gpt2_memory need = mdc_gpt2_memory_need(&c, B, T);
    TU_CHECK(mdc_dev_mem_peak(d, MDC_MEM_ACTS) == need.acts && mdc_dev_mem_peak(d, MDC_MEM_COUNT) == need.total,
             "MoE step: peak activations %zu, need %zu; total %zu, need %zu", mdc_dev_mem_peak(d, MDC_MEM_ACTS),
             need.acts, mdc_dev_mem_peak(d, MDC_MEM_COUNT), need.total);
    mdc_gpt2_free(m);
    mdc_device_free(d);
}

/* The families: charged FLOPs and peak memory against mdc_gpt2_step_flops and
 * mdc_gpt2_memory_need, on odd sizes (a padded vocabulary, GQA 3, head_dim != C/H, I not a multiple
 * of 64, every bias, an untied head, q_norm and k_norm) and on the named configs at B x T (the MoE
 * ones dropless). */
static void test_family_flops_memory(void) {
    mdc_gpt2_config odd_llama = {.family = MDC_FAMILY_LLAMA,
                                 .V = 97,
                                 .T = T,
                                 .L = 2,
                                 .H = 6,
                                 .KV = 2,
                                 .C = 72,
                                 .head_dim = 16,
                                 .ffn = 100,
                                 .qkv_bias = 1,
                                 .o_bias = 1,
                                 .mlp_bias = 1,
                                 .untied = 1,
                                 .eps = 1e-5f,
                                 .rope_theta = 10000.0};
    mdc_gpt2_config odd_qwen3 = odd_llama;
    odd_qwen3.family = MDC_FAMILY_QWEN3, odd_qwen3.qkv_bias = odd_qwen3.o_bias = odd_qwen3.mlp_bias = 0;
    odd_qwen3.qk_norm = 1, odd_qwen3.untied = 0, odd_qwen3.KV = 1;
    mdc_gpt2_config cfgs[10] = {odd_llama, odd_qwen3};
    const char *names[7] = {"llama-tiny",     "qwen2-tiny",     "qwen3-tiny",       "mixtral-tiny",
                            "qwen3-moe-tiny", "qwen2-moe-tiny", "deepseek-moe-tiny"};
    for (int k = 0; k < 7; k++) {
        int batch;
        MDC_CHECK(mdc_gpt2_config_named(names[k], &cfgs[2 + k], &batch));
        cfgs[2 + k].T = T;
    }
    cfgs[9] = cfgs[8], cfgs[9].lb_coef = 0.02f; /* deepseek-moe-tiny with transformers' aux loss */
    for (int k = 0; k < 10; k++) {
        mdc_gpt2_config *c = &cfgs[k];
        MDC_CHECK(mdc_gpt2_config_check(c));
        mdc_device *d = tu_device(1);
        mdc_gpt2 *m;
        MDC_CHECK(mdc_gpt2_create(&m, d, c, B, T));
        mdc_gpt2_init(m, 5);
        int in[B * T], tg[B * T];
        for (int s = 0; s < 2; s++) {
            batch(in, tg, c->V, s);
            mdc_dev_reset_counters(d);
            step(m, in, tg, NULL);
            mdc_dev_counters kc;
            mdc_dev_get_counters(d, &kc);
            double want = mdc_gpt2_step_flops(c, B, T);
            TU_CHECK(fabs(kc.flops - want) <= 1e-12 * want, "family config %d: step charged %.17g FLOPs, formula %.17g",
                     k, kc.flops, want);
        }
        mdc_gpt2_memory need = mdc_gpt2_memory_need(c, B, T);
        TU_CHECK(mdc_dev_mem_peak(d, MDC_MEM_COUNT) == need.total && mdc_dev_mem_peak(d, MDC_MEM_ACTS) == need.acts,
                 "family config %d: peak device memory %zu (activations %zu), computed need %zu (%zu)", k,
                 mdc_dev_mem_peak(d, MDC_MEM_COUNT), mdc_dev_mem_peak(d, MDC_MEM_ACTS), need.total, need.acts);
        mdc_gpt2_free(m);
        mdc_device_free(d);
    }
    printf("families: charged FLOPs and peak memory of 10 configs (5 MoE: a gated and an ungated shared expert, "
           "DeepSeek-V3 routing, transformers' aux loss) equal the formulas\n");
}

int main(void) {
    test_table();
    test_moe_table();
    test_gradients();
    test_threads_flops_memory();
    test_family_flops_memory();
    test_learns();
    test_errors();
    return tu_finish("test_model");
}
