/* minidc bench train: one GPT-2 training step (forward, backward, clipping, AdamW) on a named
 * config, B=4, T=min(256, context), 2 OpenMP threads: ms per step (median), tokens/s, model
 * FLOPs utilization against this machine's 2-thread sgemm peak (measured here through the
 * same fixed-partition sgemm the kernels use), and peak resident memory against the computed
 * params + grads + AdamW + activations. With --torch-ms X (PyTorch's ms per step for the same
 * step, tests/bench_torch.py, measured in the same run by tools/bench.sh) it prints the ratio
 * and the target (tiny 2x, small 1.5x, gpt2 1.2x). */
#include <omp.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "minidc/kernels.h"
#include "minidc/model.h"

static double status_kib(const char *key) { /* VmHWM / VmRSS from /proc/self/status, KiB */
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double v = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) v = atof(line + n + 1);
    if (f) fclose(f);
    return v;
}

static double cpu_seconds(void) { /* user + system time of all threads */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + 1e-6 * ru.ru_utime.tv_usec + ru.ru_stime.tv_sec + 1e-6 * ru.ru_stime.tv_usec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* best of 3 of an n^3 product through mdc_matmul_forward (the kernels' sgemm path) */
static double sgemm_peak(void) {
    int n = 1536;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    for (long i = 0; i < (long)n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.1f;
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        double t0 = mdc_wall_time();
        mdc_matmul_forward(NULL, c, a, b, NULL, n, n, n);
        double t = mdc_wall_time() - t0;
        if (r && t < best) best = t;
    }
    free(a), free(b), free(c);
    return 2.0 * n * n * (double)n / best;
}

int mdc_bench_train(int argc, char **argv) {
    const char *config = "tiny";
    int B = 4, T = 0, steps = 0, threads = 2;
    double torch_ms = 0, torch_cpu = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            printf("usage: minidc bench train [--config tiny|small|gpt2] [--batch 4] [--seq T] [--steps N]\n"
                   "                          [--threads 2] [--torch-ms MS] [--torch-cpu-ms MS]\n"
                   "cpu ms = process CPU time per step / threads: the step's cost when the cores are shared\n");
            return 0;
        }
        if (!v) { fprintf(stderr, "minidc bench train: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "--batch")) B = atoi(v);
        else if (!strcmp(a, "--seq")) T = atoi(v);
        else if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--torch-ms")) torch_ms = atof(v);
        else if (!strcmp(a, "--torch-cpu-ms")) torch_cpu = atof(v);
        else { fprintf(stderr, "minidc bench train: unknown option '%s'\n", a); return 2; }
        i++;
    }
    mdc_gpt2_config cfg;
    if (mdc_gpt2_config_named(config, &cfg, NULL)) {
        fprintf(stderr, "minidc bench train: %s\n", mdc_detail());
        return 2;
    }
    if (!T) T = cfg.T < 256 ? cfg.T : 256;
    if (!steps) steps = !strcmp(config, "tiny") ? 30 : !strcmp(config, "small") ? 10 : 3;
    if (B <= 0 || T <= 0 || T > cfg.T || steps <= 0 || threads <= 0) {
        fprintf(stderr, "minidc bench train: bad --batch/--seq/--steps/--threads\n");
        return 2;
    }
    omp_set_num_threads(threads);
    mdc_kernels_init();
    double peak = sgemm_peak();
    double rss0 = status_kib("VmRSS:"); /* OpenBLAS buffers and the program, before the model */
    FILE *cr = fopen("/proc/self/clear_refs", "w"); /* "5": reset VmHWM (the peak test's matrices) */
    if (cr) fputs("5", cr), fclose(cr);
    mdc_device_options o;
    mdc_device_options_default(&o);
    mdc_device *dev = NULL;
    mdc_gpt2 *m = NULL;
    mdc_status st = mdc_device_create(&dev, &o, 0);
    if (!st) st = mdc_gpt2_create(&m, dev, &cfg, B, T);
    if (st) {
        fprintf(stderr, "minidc bench train: %s: %s\n", mdc_strerror(st), mdc_detail());
        mdc_device_free(dev);
        return 1;
    }
    mdc_gpt2_init(m, 1);
    int *in = malloc(sizeof(int) * 2 * B * T), *tg = in + B * T;
    for (int i = 0; i < B * T; i++) in[i] = (i * 7919) % cfg.V, tg[i] = (i * 104729 + 1) % cfg.V;
    mdc_adamw_config opt;
    mdc_adamw_config_default(&opt);
    double *ms = malloc(sizeof(double) * 2 * steps), *cms = ms + steps;
    float loss = 0;
    for (int s = 0; s <= steps; s++) { /* step 0 warms up (first touch of grads, AdamW state) */
        double t0 = mdc_wall_time(), c0 = cpu_seconds();
        mdc_gpt2_forward(m, in, tg, B, T, &loss);
        mdc_gpt2_zero_grad(m);
        mdc_gpt2_backward(m);
        mdc_gpt2_update(m, &opt, NULL);
        if (s) ms[s - 1] = (mdc_wall_time() - t0) * 1e3, cms[s - 1] = (cpu_seconds() - c0) * 1e3 / threads;
    }
    qsort(ms, steps, sizeof(double), cmp_d);
    qsort(cms, steps, sizeof(double), cmp_d);
    double cmed = cms[steps / 2];
    double med = ms[steps / 2], flops = mdc_gpt2_step_flops(&cfg, B, T);
    double tok = B * T / (med * 1e-3), mfu = flops / (med * 1e-3) / peak;
    mdc_gpt2_memory need = mdc_gpt2_memory_need(&cfg, B, T);
    double hwm = status_kib("VmHWM:") * 1024, model_rss = hwm - rss0 * 1024;
    printf("%-6s B=%d T=%-4d minidc %9.1f ms (cpu %8.1f) %9.0f tok/s  %6.1f GFLOP/step  MFU %5.1f%% "
           "(sgemm peak %.0f GFLOP/s)  RSS %.1f MiB (model %.1f) / computed %.1f MiB = %.2fx\n",
           config, B, T, med, cmed, tok, flops / 1e9, 100 * mfu, peak / 1e9, hwm / 1048576,
           model_rss / 1048576, need.total / 1048576.0, model_rss / need.total);
    if (torch_ms > 0) {
        double target = !strcmp(config, "tiny") ? 2.0 : !strcmp(config, "small") ? 1.5 : 1.2;
        double ratio = torch_ms / med;
        printf("%-6s B=%d T=%-4d torch  %9.1f ms (cpu %8.1f) %9.0f tok/s  ratio %.2fx (cpu %.2fx), target %.1fx: %s\n",
               config, B, T, torch_ms, torch_cpu, B * T / (torch_ms * 1e-3), ratio,
               torch_cpu > 0 ? torch_cpu / cmed : 0, target, ratio >= target ? "PASS" : "MISS");
    }
    free(ms), free(in);
    mdc_gpt2_free(m);
    mdc_device_free(dev);
    return 0;
}
