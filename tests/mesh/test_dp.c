/* DDP and ZeRO 1/2/3 against the serial model, on a config whose parameter count (8768) and
 * units are not divisible by 3: per-step loss and gradient norm, parameters after 3 steps of 2
 * micro-batches (the first step's gradients, read from Adam's m, normwise within 1e-5; every
 * parameter within AdamW's reach of serial's after the last), and the figures (memory in use = formula with padding; bytes sent per step =
 * the exact count) — for every stage, on 1, 2, 3, 4 ranks. ZeRO-3 runs with poisoned (NaN)
 * non-resident parameters, so a use of an ungathered unit shows up as a NaN loss. Also
 * resumes from gathered state on the same layout: bit-identical continuation. */
#include "testutil.h"

#include "minidc/dp.h"
#include "minidc/train.h"
#include "minidc/kernels.h"

enum { B = 24, ACCUM = 2, STEPS = 3 };
static const mdc_gpt2_config CFG = {.V = 65, .T = 8, .L = 2, .H = 2, .C = 16};

static void batch(int *in, int *tg, int step, int V, int T) {
    for (int i = 0; i < B * T; i++) {
        uint64_t x = (uint64_t)step * 1000003u + (uint64_t)i * 7919u;
        x ^= x >> 13, x *= 0x9e3779b97f4a7c15ull, x ^= x >> 29;
        in[i] = (int)(x % (uint64_t)V);
        tg[i] = (int)((x >> 20) % (uint64_t)V);
    }
}

/* ||a - b|| / ||b|| (NaN: inf) */
static double norm_diff(size_t n, const float *a, const float *b) {
    double d2 = 0, b2 = 0;
    for (size_t j = 0; j < n; j++) {
        double e = (double)a[j] - b[j];
        d2 += isnan(e) ? INFINITY : e * e, b2 += (double)b[j] * b[j];
    }
    return b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
}

/* The first index where a and b are further apart than AdamW can move two runs in `steps`
 * steps (2 lr mdc_adamw_reach(t) each, whatever the gradients: docs/oracle.md), or SIZE_MAX.
 * A relative limit would measure how AdamW turns the rounding noise of near-zero gradients
 * into steps of lr, not correctness. */
static size_t beyond_reach(size_t n, const float *a, const float *b, const mdc_adamw_config *o, int steps) {
    double reach = 0;
    for (int t = 1; t <= steps; t++) reach += 2.0 * o->lr * mdc_adamw_reach(o->beta1, o->beta2, t) * (1 + 1e-3);
    for (size_t j = 0; j < n; j++)
        if (!(fabs((double)a[j] - b[j]) <= reach)) return j;
    return SIZE_MAX;
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    mdc_kernels_init();
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "ring"));
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_REDUCE_SCATTER, "ring"));
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLGATHER, "ring"));
    int N = rt.size, r = rt.rank;
    mdc_gpt2_config cfg = CFG;
    MDC_CHECK(mdc_gpt2_config_check(&cfg));
    int T = cfg.T, mb = B / N / ACCUM;
    size_t P = mdc_gpt2_param_floats(&cfg);
    int *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
    float *got = malloc(P * sizeof(float)), *gm = malloc(P * sizeof(float)), *gv = malloc(P * sizeof(float));
    mdc_adamw_config opt;
    mdc_adamw_config_default(&opt);
    opt.lr = 1e-3f;
    /* the serial reference on rank 0, on its own (unaccounted) device */
    mdc_device *sdev = NULL;
    mdc_gpt2 *ser = NULL;
    float sloss[STEPS], snorm[STEPS];
    float *m1 = malloc(P * sizeof(float)); /* serial's m after step 1: (1 - b1) times its gradient */
    if (r == 0) {
        MDC_CHECK(mdc_device_create_spec(&sdev, mdc_device_get_spec(rt.dev), mdc_device_get_energy_table(rt.dev), 1,
                                         MDC_EMULATE_OFF, 1, 0));
        MDC_CHECK(mdc_gpt2_create(&ser, sdev, &cfg, B, T));
        mdc_gpt2_init(ser, 5);
        for (int s = 0; s < STEPS; s++) {
            batch(in, tg, s, cfg.V, T);
            MDC_CHECK(mdc_gpt2_forward(ser, in, tg, B, T, &sloss[s]));
            MDC_CHECK(mdc_gpt2_zero_grad(ser));
            MDC_CHECK(mdc_gpt2_backward(ser));
            MDC_CHECK(mdc_gpt2_update(ser, &opt, &snorm[s]));
            if (s == 0) memcpy(m1, mdc_gpt2_adam_m(ser), P * sizeof(float));
        }
    }
    for (int z = 0; z <= 3; z++) {
        mdc_dp_config dc = {z, mb, ACCUM, T, 3000 * sizeof(float), 1, 0};
        mdc_dp *dp;
        MDC_CHECK(mdc_dp_create(&dp, rt.world, &cfg, &dc, 5));
        float loss, norm;
        for (int s = 0; s < STEPS; s++) {
            batch(in, tg, s, cfg.V, T);
            size_t off = (size_t)r * (B / N) * T;
            MDC_CHECK(mdc_step_dp(dp, in + off, tg + off, &opt, &loss, &norm));
            if (r == 0) {
                TU_NEAR(loss, sloss[s], 1e-6);
                TU_NEAR(norm, snorm[s], 1e-5);
            }
            if (s == 0) { /* the first step's gradients, before any update could amplify a difference */
                MDC_CHECK(mdc_dp_gather_state(dp, got, gm, gv, 0));
                double dg = r == 0 ? norm_diff(P, gm, m1) : 0;
                TU_CHECK(dg <= 1e-5, "zero %d: the first step's gradients differ from serial's by %.3g normwise", z,
                         dg);
            }
        }
        MDC_CHECK(mdc_dp_gather_state(dp, got, gm, gv, 0));
        if (r == 0) {
            const float *sp = mdc_gpt2_params(ser);
            size_t bad = beyond_reach(P, got, sp, &opt, STEPS);
            printf("zero %d N %d: parameters %.3g normwise from serial's, Adam m %.3g (shown)\n", z, N,
                   norm_diff(P, got, sp), norm_diff(P, gm, mdc_gpt2_adam_m(ser)));
            TU_CHECK(bad == SIZE_MAX, "zero %d: parameter %zu is %.9g, serial's %.9g: beyond AdamW's reach", z, bad,
                     bad == SIZE_MAX ? 0 : got[bad], bad == SIZE_MAX ? 0 : sp[bad]);
        }
        mdc_dp_figures f;
        mdc_dp_get_figures(dp, &f);
        for (int i = 0; i < 3; i++) {
            TU_CHECK(f.mem[i] == f.mem_want[i], "zero %d mem[%d]: measured %zu, formula %zu", z, i, f.mem[i],
                     f.mem_want[i]);
            /* the padding: at most N-1 floats per unit, times 4 or 8 bytes */
            TU_CHECK(fabs((double)f.mem_want[i] - f.mem_formula[i]) <= 8.0 * f.units * (N - 1),
                     "zero %d mem[%d]: padded %zu vs formula %.1f", z, i, f.mem_want[i], f.mem_formula[i]);
        }
        TU_EQ_DBL(f.step_bytes, f.step_bytes_want);
        /* the comm stream keeps virtual = compute + memory + communication + idle */
        mdc_dev_counters c;
        mdc_dev_get_counters(rt.dev, &c);
        TU_NEAR(c.now, c.t_compute + c.t_memory + c.t_comm + c.t_idle, 1e-12);
        TU_CHECK(N == 1 || c.t_overlap > 0, "zero %d: no overlap reported", z);
        if (N % 3 == 0) TU_CHECK(f.shard * (size_t)N > f.psi, "N=3 must pad (%zu)", f.shard);
        mdc_dp_report(dp, stdout);
        /* resume on the same layout from gathered state: bit-identical continuation */
        MDC_CHECK(mdc_dp_gather_state(dp, got, gm, gv, 0));
        int t = mdc_dp_adam_step(dp);
        MDC_CHECK(mdc_bcast(got, P, MDC_F32, 0, rt.world));
        MDC_CHECK(mdc_bcast(gm, P, MDC_F32, 0, rt.world));
        MDC_CHECK(mdc_bcast(gv, P, MDC_F32, 0, rt.world));
        mdc_dp *dp2;
        MDC_CHECK(mdc_dp_create(&dp2, rt.world, &cfg, &dc, 99));
        MDC_CHECK(mdc_dp_load_state(dp2, got, gm, gv, t));
        float l1, l2, n1, n2;
        batch(in, tg, STEPS, cfg.V, T);
        size_t off = (size_t)r * (B / N) * T;
        MDC_CHECK(mdc_step_dp(dp, in + off, tg + off, &opt, &l1, &n1));
        MDC_CHECK(mdc_step_dp(dp2, in + off, tg + off, &opt, &l2, &n2));
        TU_CHECK(memcmp(&l1, &l2, 4) == 0 && memcmp(&n1, &n2, 4) == 0, "resumed step differs: %.9g %.9g", l1, l2);
        float *a = malloc(P * sizeof(float)), *b2 = malloc(P * sizeof(float));
        MDC_CHECK(mdc_dp_gather_state(dp, a, NULL, NULL, 0));
        MDC_CHECK(mdc_dp_gather_state(dp2, b2, NULL, NULL, 0));
        if (r == 0) tu_cmp_f32("resumed parameters", b2, a, P);
        free(a), free(b2);
        mdc_dp_free(dp2);
        mdc_dp_free(dp);
    }
    /* ZeRO-3 prefetch: the same losses, norms and parameters bit for bit and the same bytes
     * sent; only the virtual clock may change, and for N > 1 it must get shorter (the gathers
     * overlap compute) with more communication hidden. */
    double vt[2] = {0, 0}, ov[2] = {0, 0}, sent[2] = {0, 0};
    float lossv[2][STEPS], normv[2][STEPS], *pf[2] = {malloc(P * sizeof(float)), malloc(P * sizeof(float))};
    for (int v = 0; v < 2; v++) {
        mdc_dp_config dc = {3, mb, ACCUM, T, 3000 * sizeof(float), 1, v};
        mdc_dp *dp;
        MDC_CHECK(mdc_dp_create(&dp, rt.world, &cfg, &dc, 5));
        mdc_dev_reset_counters(rt.dev);
        for (int s = 0; s < STEPS; s++) {
            batch(in, tg, s, cfg.V, T);
            size_t off = (size_t)r * (B / N) * T;
            MDC_CHECK(mdc_step_dp(dp, in + off, tg + off, &opt, &lossv[v][s], &normv[v][s]));
        }
        mdc_dev_counters c;
        mdc_dev_get_counters(rt.dev, &c);
        vt[v] = c.now, ov[v] = c.t_overlap, sent[v] = c.bytes_sent;
        TU_NEAR(c.now, c.t_compute + c.t_memory + c.t_comm + c.t_idle, 1e-12);
        MDC_CHECK(mdc_dp_gather_state(dp, pf[v], NULL, NULL, 0));
        mdc_dp_free(dp);
    }
    TU_CHECK(memcmp(lossv[0], lossv[1], sizeof lossv[0]) == 0 && memcmp(normv[0], normv[1], sizeof normv[0]) == 0,
             "prefetch changed a loss or a norm");
    if (r == 0) tu_cmp_f32("ZeRO-3 parameters with prefetch", pf[1], pf[0], P);
    TU_EQ_DBL(sent[1], sent[0]);
    if (N > 1) {
        TU_CHECK(vt[1] < vt[0], "prefetch did not shorten the virtual step: %.6g vs %.6g s", vt[1], vt[0]);
        TU_CHECK(ov[1] > ov[0], "prefetch hid no more communication: %.6g vs %.6g s", ov[1], ov[0]);
    }
    if (r == 0)
        printf("ZeRO-3 N %d: virtual %.3f ms without prefetch, %.3f ms with (overlap %.3f -> %.3f ms)\n", N,
               vt[0] * 1e3, vt[1] * 1e3, ov[0] * 1e3, ov[1] * 1e3);
    free(pf[0]), free(pf[1]);
    mdc_gpt2_free(ser);
    mdc_device_free(sdev);
    free(in), free(tg), free(got), free(gm), free(gv), free(m1);
    int rc = tu_finish("test_dp");
    mdc_runtime_finalize(&rt);
    return rc;
}
