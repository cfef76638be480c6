/* minidc workload: a small data-parallel emulated workload and each rank's device report.
 *
 * Every rank trains the same 2-layer MLP (x -> relu(x W1) W2, loss = mean squared error to x)
 * on its own batch: real sgemm on the host, each kernel charged to the rank's emulated device;
 * gradients are averaged with mdc_allreduce (op avg; the dispatcher picks the algorithm), then
 * an Adam step. `minidc train --dp` is the real thing; this shows the device layer alone. Memory is allocated on
 * the device by category, so the report shows parameters, gradients, optimizer state,
 * activations and communication buffers. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/minidc.h"

typedef struct {
    int hidden, batch, steps;
} workload_cfg;

/* Charges C(m,n) = A(m,k) B(k,n) in fp32: 2mnk FLOPs, reads A and B, writes C. */
static void charge_gemm(mdc_device *dev, int m, int n, int k) {
    double flops = 2.0 * m * n * k, bytes = 4.0 * ((double)m * k + (double)k * n + (double)m * n);
    mdc_dev_kernel(dev, flops, bytes, MDC_PREC_FP32);
}

static float lcg_uniform(unsigned long long *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f - 0.5f;
}

static mdc_status run(mdc_runtime *rt, const workload_cfg *c, double *loss_out) {
    mdc_device *dev = rt->dev;
    int H = c->hidden, F = 4 * c->hidden, B = c->batch;
    size_t np = (size_t)H * F * 2; /* W1 (H,F) then W2 (F,H) */
    float *w = NULL, *gr = NULL, *m = NULL, *v = NULL, *x = NULL, *h = NULL, *y = NULL, *dy = NULL, *dh = NULL;
    mdc_status st = MDC_OK;
#define ALLOC(ptr, count, cat, name) \
    if (!st) st = mdc_dev_alloc(dev, (void **)&ptr, (count) * sizeof(float), cat, name)
    ALLOC(w, np, MDC_MEM_PARAMS, "mlp.weights");
    ALLOC(gr, np, MDC_MEM_GRADS, "mlp.grads");
    ALLOC(m, np, MDC_MEM_OPTIM, "adam.m");
    ALLOC(v, np, MDC_MEM_OPTIM, "adam.v");
#undef ALLOC
    if (st) goto done;
    unsigned long long seed = 42; /* same initial weights on every rank */
    for (size_t i = 0; i < np; i++) w[i] = lcg_uniform(&seed) * 2.0f / sqrtf((float)H);
    float *w1 = w, *w2 = w + (size_t)H * F, *g1 = gr, *g2 = gr + (size_t)H * F;
    for (int step = 0; step < c->steps && !st; step++) {
        /* Activations live for one step: allocate, use, free. */
        st = mdc_dev_alloc(dev, (void **)&x, (size_t)B * H * 4, MDC_MEM_ACTS, "x (B,H)");
        if (!st) st = mdc_dev_alloc(dev, (void **)&h, (size_t)B * F * 4, MDC_MEM_ACTS, "h (B,4H)");
        if (!st) st = mdc_dev_alloc(dev, (void **)&y, (size_t)B * H * 4, MDC_MEM_ACTS, "y (B,H)");
        if (!st) st = mdc_dev_alloc(dev, (void **)&dy, (size_t)B * H * 4, MDC_MEM_ACTS, "dy (B,H)");
        if (!st) st = mdc_dev_alloc(dev, (void **)&dh, (size_t)B * F * 4, MDC_MEM_ACTS, "dh (B,4H)");
        if (st) break;
        unsigned long long ds = 1000003ull * (unsigned long long)(step + 1) + (unsigned long long)rt->rank;
        for (size_t i = 0; i < (size_t)B * H; i++) x[i] = lcg_uniform(&ds);
        mdc_dev_host_bytes(dev, (double)B * H * 4);          /* the batch is read on the host ... */
        mdc_dev_copy(dev, (double)B * H * 4, MDC_LINK_PCIE); /* ... and copied to the device */
        /* forward: h = relu(x W1), y = h W2 */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, F, H, 1, x, H, w1, F, 0, h, F);
        charge_gemm(dev, B, F, H);
        for (size_t i = 0; i < (size_t)B * F; i++) h[i] = h[i] > 0 ? h[i] : 0;
        mdc_dev_kernel(dev, (double)B * F, 8.0 * B * F, MDC_PREC_FP32);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, F, 1, h, F, w2, H, 0, y, H);
        charge_gemm(dev, B, H, F);
        /* loss = mean (y - x)^2; dy = 2 (y - x) / (B H) */
        double loss = 0;
        for (size_t i = 0; i < (size_t)B * H; i++) {
            float d = y[i] - x[i];
            loss += (double)d * d;
            dy[i] = 2.0f * d / (float)(B * H);
        }
        mdc_dev_kernel(dev, 4.0 * B * H, 12.0 * B * H, MDC_PREC_FP32);
        *loss_out = loss / ((double)B * H);
        /* backward: g2 = h^T dy, dh = dy W2^T * relu'(h), g1 = x^T dh */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, F, H, B, 1, h, F, dy, H, 0, g2, H);
        charge_gemm(dev, F, H, B);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, F, H, 1, dy, H, w2, H, 0, dh, F);
        charge_gemm(dev, B, F, H);
        for (size_t i = 0; i < (size_t)B * F; i++) dh[i] = h[i] > 0 ? dh[i] : 0;
        mdc_dev_kernel(dev, (double)B * F, 12.0 * B * F, MDC_PREC_FP32);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, F, B, 1, x, H, dh, F, 0, g1, F);
        charge_gemm(dev, H, F, B);
        mdc_dev_free(dev, x);
        mdc_dev_free(dev, h);
        mdc_dev_free(dev, y);
        mdc_dev_free(dev, dy);
        mdc_dev_free(dev, dh);
        x = h = y = dy = dh = NULL;
        /* data parallel: average the gradients, then the same Adam step everywhere */
        st = mdc_allreduce(MDC_IN_PLACE, gr, np, MDC_F32, MDC_AVG, rt->world);
        const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
        float c1 = 1.0f - powf(b1, (float)(step + 1)), c2 = 1.0f - powf(b2, (float)(step + 1));
        for (size_t i = 0; i < np; i++) {
            m[i] = b1 * m[i] + (1 - b1) * gr[i];
            v[i] = b2 * v[i] + (1 - b2) * gr[i] * gr[i];
            w[i] -= lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
        }
        mdc_dev_kernel(dev, 12.0 * (double)np, 7.0 * 4 * (double)np, MDC_PREC_FP32);
        if (rt->rank == 0) printf("step %d: rank 0 loss %.6f\n", step, *loss_out);
    }
done:
    mdc_dev_free(dev, x);
    mdc_dev_free(dev, h);
    mdc_dev_free(dev, y);
    mdc_dev_free(dev, dy);
    mdc_dev_free(dev, dh);
    mdc_dev_free(dev, v);
    mdc_dev_free(dev, m);
    mdc_dev_free(dev, gr);
    mdc_dev_free(dev, w);
    return st;
}

int mdc_cmd_workload(int argc, char **argv) {
    mdc_runtime rt;
    mdc_status st = mdc_runtime_init(&rt, &argc, &argv);
    if (st) mdc_runtime_die(&rt, st, 1, 2);
    workload_cfg c = {256, 128, 3};
    for (int i = 1; i < argc; i++) {
        int ok = 0;
        if (!strcmp(argv[i], "--hidden") && i + 1 < argc)
            ok = mdc_arg_int("workload", "--hidden", argv[++i], 1, 1 << 14, &c.hidden);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            ok = mdc_arg_int("workload", "--batch", argv[++i], 1, 1 << 16, &c.batch);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            ok = mdc_arg_int("workload", "--steps", argv[++i], 1, 1000, &c.steps);
        else if (!strcmp(argv[i], "--help")) {
            if (rt.rank == 0)
                printf(
                    "usage: mpiexec.mpich -n P minidc workload [--hidden H] [--batch B] [--steps S] [device options]\n"
                    "  data-parallel 2-layer MLP (H -> 4H -> H), B tokens per rank and step;\n"
                    "  prints each rank's device report at the end.\n%s",
                    mdc_device_options_help());
            mdc_runtime_finalize(&rt);
            return 0;
        } else if (rt.rank == 0) {
            fprintf(stderr, "minidc workload: unknown option '%s' (--help)\n", argv[i]);
        }
        if (!ok) {
            mdc_runtime_finalize(&rt);
            return 2;
        }
    }
    if (rt.rank == 0)
        printf("workload: %d rank(s), MLP %d -> %d -> %d, %d tokens per rank and step, %d step(s), "
               "device %s\n",
               rt.size, c.hidden, 4 * c.hidden, c.hidden, c.batch, c.steps, mdc_device_get_spec(rt.dev)->name);
    double loss = 0;
    st = run(&rt, &c, &loss);
    /* Every rank allocates the same sizes, so an out-of-memory happens on all of them alike. */
    if (st) mdc_runtime_die(&rt, st, st == MDC_ERR_OOM_DEVICE, 1);
    fflush(stdout);
    double tokens = (double)c.batch * c.steps * rt.size;
    st = mdc_runtime_report(&rt, stdout, tokens);
    if (st) mdc_runtime_die(&rt, st, 0, 1);
    mdc_runtime_finalize(&rt);
    return 0;
}
