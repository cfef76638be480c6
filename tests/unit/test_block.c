/* The block API and partitions, without MPI: (1) block backward's input part B and weight part
 * W give the same gradients, bit for bit, as both at once, whether W follows each B or every W
 * runs after the whole backward (a zero-bubble order), without and with dropout; W without B
 * and B twice are refused;
 * (2) the shards of a tensor-parallel partition, initialized by global element index and
 * copied back to the global layout, equal the serial initialization bit for bit for t = 2, 3, 4
 * and every rank; the local layout holds (Psi - R)/t + R floats. */
#include "testutil.h"

static const mdc_gpt2_config odd = {.V = 300, .T = 12, .L = 3, .H = 12, .C = 48};
enum { B = 2, T = 12 };

/* gradients of one micro-batch, block backward in the given order: 0 both at once, 1 W right
 * after each B, 2 every B first (and the embedding), then every W */
static void grads(mdc_gpt2 *m, int order, const int *in, const int *tg, float *out) {
    mdc_gpt2_acts *a = mdc_gpt2_default_acts(m);
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    double sum;
    MDC_CHECK(mdc_gpt2_zero_grad(m));
    MDC_CHECK(mdc_gpt2_set_batch(a, in, tg, B, T));
    MDC_CHECK(mdc_gpt2_embed_forward(m, a));
    for (int l = 0; l < c->L; l++) MDC_CHECK(mdc_gpt2_block_forward(m, a, l));
    MDC_CHECK(mdc_gpt2_head_forward(m, a, &sum));
    MDC_CHECK(mdc_gpt2_head_backward(m, a, 1.0f / (B * T)));
    for (int l = c->L - 1; l >= 0; l--) {
        if (order == 0) MDC_CHECK(mdc_gpt2_block_backward(m, a, l, MDC_BWD_BOTH));
        else MDC_CHECK(mdc_gpt2_block_backward(m, a, l, MDC_BWD_INPUT));
        if (order == 1) MDC_CHECK(mdc_gpt2_block_backward(m, a, l, MDC_BWD_WEIGHT));
    }
    if (order == 2) TU_STATUS(mdc_gpt2_block_backward(m, a, 0, MDC_BWD_INPUT), MDC_ERR_INVALID); /* B twice */
    MDC_CHECK(mdc_gpt2_embed_backward(m, a));
    if (order == 2)
        for (int l = 0; l < c->L; l++) MDC_CHECK(mdc_gpt2_block_backward(m, a, l, MDC_BWD_WEIGHT));
    memcpy(out, mdc_gpt2_grads(m), mdc_gpt2_local_floats(m) * sizeof(float));
}

static void test_split_backward(void) {
    mdc_device *d = tu_device(1.0);
    mdc_gpt2 *m;
    MDC_CHECK(mdc_gpt2_create(&m, d, &odd, B, T));
    mdc_gpt2_init(m, 7);
    int in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) in[i] = (i * 37 + 5) % odd.V, tg[i] = (i * 101 + 3) % odd.V;
    size_t n = mdc_gpt2_local_floats(m);
    float *g0 = malloc(n * sizeof(float)), *g1 = malloc(n * sizeof(float)), *g2 = malloc(n * sizeof(float));
    for (int drop = 0; drop < 2; drop++) { /* and with dropout: the masks are regenerated, not stored */
        MDC_CHECK(mdc_gpt2_set_dropout(m, drop ? 0.1f : 0.0f, 3));
        grads(m, 0, in, tg, g0);
        grads(m, 1, in, tg, g1);
        grads(m, 2, in, tg, g2);
        tu_cmp_f32(drop ? "dropout 0.1: gradients, W after each B" : "gradients, W after each B", g1, g0, n);
        tu_cmp_f32(drop ? "dropout 0.1: gradients, every W after the backward"
                        : "gradients, every W after the backward",
                   g2, g0, n);
    }
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(g0[i]));
    TU_CHECK(mx > 0, "the gradients are all zero");
    TU_STATUS(mdc_gpt2_block_backward(m, mdc_gpt2_default_acts(m), 1, MDC_BWD_WEIGHT), MDC_ERR_INVALID);
    TU_CHECK(strstr(mdc_detail(), "W without its B") != NULL, "detail: %s", mdc_detail());
    printf("block backward: B + W in two orders equal both at once, bit for bit (%zu gradients, max |g| %.3g)\n", n,
           mx);
    free(g0), free(g1), free(g2);
    mdc_gpt2_free(m);
    mdc_device_free(d);
}

static mdc_status never(void) { return mdc_fail(MDC_ERR_INVALID, "no communication in this test"); }
static mdc_status f_fwd(void *c, float *a, const float *b, int x, int y, int z) {
    (void)c, (void)a, (void)b, (void)x, (void)y, (void)z;
    return never();
}
static mdc_status f_bwd(void *c, float *a, float *b, int x, int y, int z) {
    (void)c, (void)a, (void)b, (void)x, (void)y, (void)z;
    return never();
}
static mdc_status g_bwd(void *c, float *a, const float *b, int x, int y, int z) {
    (void)c, (void)a, (void)b, (void)x, (void)y, (void)z;
    return never();
}
static mdc_status vocab(void *c, float *a, int n, int mx) {
    (void)c, (void)a, (void)n, (void)mx;
    return never();
}

static void test_partitions(void) {
    mdc_device *d = tu_device(1.0);
    mdc_gpt2_config cfg = odd;
    MDC_CHECK(mdc_gpt2_config_check(&cfg));
    mdc_gpt2 *ser;
    MDC_CHECK(mdc_gpt2_create(&ser, d, &cfg, 1, T));
    mdc_gpt2_init(ser, 11);
    size_t P = mdc_gpt2_param_floats(&cfg);
    float *glob = malloc(P * sizeof(float)), *back = NULL;
    mdc_gpt2_comm comm = {NULL, 1, f_fwd, f_bwd, f_bwd, g_bwd, vocab, NULL, NULL, NULL, NULL};
    for (int t = 2; t <= 4; t++) {
        memset(glob, 0, P * sizeof(float));
        for (int r = 0; r < t; r++) {
            mdc_gpt2_part part = mdc_gpt2_part_serial(&cfg);
            part.tp = t, part.tp_rank = r;
            mdc_gpt2 *m;
            MDC_CHECK(mdc_gpt2_create_part(&m, d, &cfg, &part, &comm, 1, T, 0));
            mdc_gpt2_init(m, 11);
            mdc_gpt2_local_to_global(m, mdc_gpt2_params(m), glob);
            size_t L = mdc_gpt2_local_floats(m), repl = 0;
            for (int i = 0; i < mdc_gpt2_local_count(m); i++)
                if (mdc_gpt2_local_tensor(m, i)->split == MDC_SPLIT_NONE) repl += mdc_gpt2_local_tensor(m, i)->alloc;
            TU_CHECK(L == (P - repl) / (size_t)t + repl, "tp %d: %zu local floats, want (%zu - %zu)/%d + %zu", t, L, P,
                     repl, t, repl);
            back = realloc(back, L * sizeof(float));
            mdc_gpt2_global_to_local(m, mdc_gpt2_params(ser), back);
            char what[64];
            snprintf(what, sizeof what, "tp %d rank %d: the shard vs the serial slice", t, r);
            tu_cmp_f32(what, mdc_gpt2_params(m), back, L);
            mdc_gpt2_free(m);
        }
        char what[64];
        snprintf(what, sizeof what, "tp %d: every shard in the global layout", t);
        tu_cmp_f32(what, glob, mdc_gpt2_params(ser), P);
    }
    printf("partitions: tp 2, 3, 4 shards equal the serial initialization bit for bit\n");
    /* a tp that does not divide the heads is refused, naming the option */
    mdc_gpt2_part bad = mdc_gpt2_part_serial(&cfg);
    bad.tp = 5;
    TU_STATUS(mdc_gpt2_part_check(&bad, &cfg, T), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "--tp 5 does not divide --heads 12");
    free(glob), free(back);
    mdc_gpt2_free(ser);
    mdc_device_free(d);
}

int main(void) {
    mdc_kernels_init();
    test_split_backward();
    test_partitions();
    return tu_finish("test_block");
}
