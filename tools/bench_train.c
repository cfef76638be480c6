/* minidc bench train: one training step (forward, backward, clipping, AdamW: the step
 * every mesh runs, ref/train/train.c) on a named config, B=4, T=min(256, context), 2 OpenMP threads;
 * under mpiexec.mpich with --tp T [--sp], the same global batch on a tensor-parallel mesh
 * (rank 0 reports; the ms are its wall time per step): ms per step (median), tokens/s, model
 * FLOPs utilization against this machine's 2-thread sgemm peak (measured here through the
 * same fixed-partition sgemm the kernels use), and peak resident memory against the computed
 * params + grads + AdamW + activations. With --torch-ms X (PyTorch's ms per step for the same
 * step, tests/bench/bench_torch.py, measured in the same run by tools/bench.sh) it prints the ratio
 * and the target (tiny 2x, small 1.5x, gpt2 1.2x; a family's config, llama-tiny or llama-gpt2,
 * the target and steps of the GPT-2 config of its size, size_of below). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

#include "thread_tuner.h"
#include "cli_args.h"
#include "commands.h"
#include "minidc/kernels.h"
#include "minidc/model.h"
#include "minidc/runtime.h"
#include "minidc/train.h"
#include "../device/platform.h" /* resident memory, where the system tells it */

static double cpu_seconds(void) { /* user + system time of all threads */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + 1e-6 * ru.ru_utime.tv_usec + ru.ru_stime.tv_sec + 1e-6 * ru.ru_stime.tv_usec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* best of 3 of an n^3 product through mdc_matmul_forward (the kernels' sgemm path), by wall
 * time and by CPU time per thread (*cpu_peak: what the cores do when they run, robust when
 * the machine is shared) */
static double sgemm_peak(double *cpu_peak, int threads) {
    int n = 1536;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    if (!a || !b || !c) { /* 0: the caller reports it */
        free(a), free(b), free(c);
        return 0;
    }
    for (long i = 0; i < (long)n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.1f;
    double best = 1e30, bestc = 1e30;
    for (int r = 0; r < 4; r++) {
        double t0 = mdc_wall_time(), c0 = cpu_seconds();
        mdc_matmul_forward(NULL, c, a, b, NULL, n, n, n);
        double t = mdc_wall_time() - t0, tc = (cpu_seconds() - c0) / threads;
        if (r && t < best) best = t;
        if (r && tc < bestc) bestc = tc;
    }
    free(a), free(b), free(c);
    *cpu_peak = 2.0 * n * n * (double)n / bestc;
    return 2.0 * n * n * (double)n / best;
}

/* Upper bounds of the options: far past any useful benchmark, low enough that the buffers
 * (2 B T ints, 2 steps doubles) and the run's length stay sane. */
#define MAX_BATCH 1024
#define MAX_STEPS 100000
#define MAX_THREADS 1024

static int oom(const char *what, size_t bytes) {
    fprintf(stderr, "minidc bench train: out of host memory (%zu bytes for %s)\n", bytes, what);
    return 1;
}

/* --torch-ms / --torch-cpu-ms: a finite number of milliseconds >= 0 (0 = not given). */
static int arg_ms(const char *opt, const char *v, double *out) {
    if (!mdc_arg_double("bench train", opt, v, out)) return 0;
    if (!isfinite(*out) || *out < 0) {
        fprintf(stderr, "minidc bench train: %s needs a finite number of ms >= 0, got '%s'\n", opt, v);
        return 0;
    }
    return 1;
}

/* The GPT-2 config whose steps and target a named config takes: itself, or for a family's
 * "<family>-<size>" (llama-tiny, llama-gpt2, qwen2-tiny) the GPT-2 config <size>; NULL for
 * any other name. */
static const char *size_of(const char *config) {
    static const char *const sizes[] = {"tiny", "small", "gpt2"};
    const char *dash = strrchr(config, '-'), *s = dash ? dash + 1 : config;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(s, sizes[i])) return sizes[i];
    return NULL;
}

int mdc_bench_train(int argc, char **argv) {
    const char *config = "tiny";
    int B = 4, T = 0, steps = 0, threads = 2, tp = 1, sp = 0, dp = 1, exact = 0, xblock = 0, adapt = 0;
    double torch_ms = 0, torch_cpu = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            printf("usage: minidc bench train [--config tiny] [--batch 4] [--seq T] [--steps N]\n"
                   "                          [--threads 2] [--torch-ms MS] [--torch-cpu-ms MS]\n"
                   "       mpiexec.mpich -n N minidc bench train --tp T [--sp] [--dp D] ...   (N = T x D)\n"
                   "       [--exact] [--exact-block N]   exact mode (docs/exactness.md)\n"
                   "       [--adapt-threads]   the thread count as minidc train chooses it (tools/thread_tuner.h)\n"
                   "--config tiny|small|gpt2 or a family's llama-tiny|llama-gpt2|qwen2-tiny|qwen3-tiny\n"
                   "--batch 1..1024, --seq 1..the context, --steps 1..100000, --threads 1..1024\n"
                   "cpu ms = process CPU time per step / threads: the step's cost when the cores are shared\n");
            return 0;
        }
        if (!strcmp(a, "--sp")) {
            sp = 1;
            continue;
        }
        if (!strcmp(a, "--exact")) {
            exact = 1;
            continue;
        }
        if (!strcmp(a, "--adapt-threads")) {
            adapt = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "minidc bench train: %s needs a value\n", a);
            return 2;
        }
        int ok = 1;
        if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "--batch")) ok = mdc_arg_int("bench train", a, v, 1, MAX_BATCH, &B);
        else if (!strcmp(a, "--seq")) ok = mdc_arg_int("bench train", a, v, 1, 1 << 20, &T);
        else if (!strcmp(a, "--steps")) ok = mdc_arg_int("bench train", a, v, 1, MAX_STEPS, &steps);
        else if (!strcmp(a, "--threads")) ok = mdc_arg_int("bench train", a, v, 1, MAX_THREADS, &threads);
        else if (!strcmp(a, "--tp")) ok = mdc_arg_int("bench train", a, v, 1, 64, &tp);
        else if (!strcmp(a, "--dp")) ok = mdc_arg_int("bench train", a, v, 1, 64, &dp);
        else if (!strcmp(a, "--exact-block")) ok = mdc_arg_int("bench train", a, v, 1, 1 << 20, &xblock);
        else if (!strcmp(a, "--torch-ms")) ok = arg_ms(a, v, &torch_ms);
        else if (!strcmp(a, "--torch-cpu-ms")) ok = arg_ms(a, v, &torch_cpu);
        else {
            fprintf(stderr, "minidc bench train: unknown option '%s'\n", a);
            return 2;
        }
        if (!ok) return 2;
        i++;
    }
    mdc_gpt2_config cfg;
    if (mdc_gpt2_config_named(config, &cfg, NULL)) {
        fprintf(stderr, "minidc bench train: %s\n", mdc_detail());
        return 2;
    }
    cfg.Vp = mdc_gpt2_padded_vocab_tp(cfg.V, tp);
    if (!T) T = cfg.T < 256 ? cfg.T : 256;
    const char *size = size_of(config); /* NULL: gpt2's steps and target */
    if (!steps) steps = size && !strcmp(size, "tiny") ? 30 : size && !strcmp(size, "small") ? 10 : 3;
    if (T > cfg.T) {
        fprintf(stderr, "minidc bench train: --seq %d is longer than config %s's context %d\n", T, config, cfg.T);
        return 2;
    }
    if (B % dp) {
        fprintf(stderr, "minidc bench train: --batch %d is not divisible by --dp %d\n", B, dp);
        return 2;
    }
    if (mdc_exact_options(&exact, &xblock, &cfg, T, 1, tp, sp)) {
        fprintf(stderr, "minidc bench train: %s\n", mdc_detail());
        return 2;
    }
    omp_set_num_threads(threads);
    mdc_kernels_init();
    double cpu_peak, peak = sgemm_peak(&cpu_peak, threads);
    if (!(peak > 0)) return oom("the sgemm peak test's matrices", 3 * sizeof(float) * 1536 * 1536);
    double rss0 = mdc_plat_rss_kib(0); /* OpenBLAS buffers and the program, before the model */
    mdc_plat_rss_peak_reset();         /* forget the peak test's matrices */
    mdc_runtime rt;
    memset(&rt, 0, sizeof rt);
    mdc_device *dev = NULL;
    mdc_trainer *tr = NULL;
    mdc_status st = MDC_OK;
    if (tp > 1 || sp || dp > 1) { /* a mesh: MPI, every rank one device */
        int one = 1;
        char *noargs[] = {argv[0], NULL}, **pa = noargs;
        if (!(st = mdc_runtime_init(&rt, &one, &pa)) && rt.size != tp * dp)
            st = mdc_fail(MDC_ERR_INVALID, "--tp %d x --dp %d but the job has %d rank(s): run mpiexec.mpich -n %d", tp,
                          dp, rt.size, tp * dp);
        dev = rt.dev;
        mdc_coll_prefer_ring();
    } else {
        mdc_device_options o;
        mdc_device_options_default(&o);
        st = mdc_device_create(&dev, &o, 0);
    }
    mdc_trainer_config tc = {
        cfg,  {tp, 1, 1, dp, 1},     sp, 0, 0, 0, B / dp, 1, T, 0, 0, 0, exact ? xblock : 0, NULL, NULL, 1, NULL,
        NULL, {0, 0, 0, 0, 0, 0, 0}, 0,  0, 0, 0};
    if (!st) st = mdc_trainer_create(&tr, rt.tr, dev, &tc, 1);
    if (st) {
        fprintf(stderr, "minidc bench train: %s: %s\n", mdc_strerror(st), mdc_detail());
        if (rt.tr) mdc_runtime_die(&rt, st, 1, st == MDC_ERR_INVALID ? 2 : 1);
        mdc_device_free(dev);
        return st == MDC_ERR_INVALID ? 2 : 1;
    }
    size_t nin = sizeof(int) * 2 * (size_t)B * (size_t)T, nms = sizeof(double) * 2 * (size_t)steps;
    int *in = malloc(nin);
    double *ms = malloc(nms);
    if (!in || !ms) {
        free(in), free(ms);
        mdc_trainer_free(tr);
        if (!rt.tr) mdc_device_free(dev);
        return oom(!in ? "the input and target tokens" : "the step times", !in ? nin : nms);
    }
    int *tg = in + B * T;
    double *cms = ms + steps;
    for (long long i = 0; i < (long long)B * T; i++) /* 64-bit: i * 104729 passes INT_MAX */
        in[i] = (int)(i * 7919 % cfg.V), tg[i] = (int)((i * 104729 + 1) % cfg.V);
    mdc_adamw_config opt;
    mdc_adamw_config_default(&opt);
    float loss = 0;
    mdc_dev_reset_counters(dev);
    double v0 = 0, sent0 = 0;
    mdc_thread_tuner tun;
    mdc_tuner_init(&tun, threads, adapt && tp * dp == 1);
    for (int s = 0; s <= steps; s++) { /* step 0 warms up (first touch of grads, AdamW state) */
        mdc_tuner_before(&tun);
        double t0 = mdc_wall_time(), c0 = cpu_seconds();
        if ((st = mdc_trainer_step(tr, in, tg, &opt, &loss, NULL))) {
            fprintf(stderr, "minidc bench train: %s: %s\n", mdc_strerror(st), mdc_detail());
            if (rt.tr) mdc_runtime_die(&rt, st, 0, 1);
            return 1;
        }
        double dt = mdc_wall_time() - t0;
        mdc_tuner_after(&tun, dt);
        if (s) ms[s - 1] = dt * 1e3, cms[s - 1] = (cpu_seconds() - c0) * 1e3 / threads;
        else {
            mdc_dev_counters c;
            mdc_dev_get_counters(dev, &c);
            v0 = c.now, sent0 = c.bytes_sent;
        }
    }
    if (tun.on)
        printf("adapt-threads: the last step ran on %d of %d thread(s), after %d move(s)\n", tun.levels[tun.level],
               threads, tun.moves);
    mdc_dev_counters vc;
    mdc_dev_get_counters(dev, &vc);
    double vms = (vc.now - v0) / steps * 1e3;      /* virtual ms per step on the preset */
    double sent = (vc.bytes_sent - sent0) / steps; /* bytes this rank sent per step */
    qsort(ms, steps, sizeof(double), cmp_d);
    qsort(cms, steps, sizeof(double), cmp_d);
    double cmed = cms[steps / 2];
    double med = ms[steps / 2], flops = mdc_gpt2_step_flops(&cfg, B, T);
    double tok = B * T / (med * 1e-3), mfu = flops / (med * 1e-3) / peak;
    double cmfu = flops / (cmed * 1e-3) / cpu_peak;
    mdc_gpt2_memory need = mdc_gpt2_memory_need(&cfg, B, T);
    double hwm = rss0 >= 0 ? mdc_plat_rss_kib(1) * 1024 : -1, model_rss = hwm - rss0 * 1024;
    char rss[128] = "RSS n/a (this system does not report it)";
    if (hwm >= 0)
        snprintf(rss, sizeof rss, "RSS %.1f MiB (model %.1f) / computed %.1f MiB = %.2fx", hwm / 1048576,
                 model_rss / 1048576, need.total / 1048576.0, model_rss / need.total);
    char mesh[64] = "";
    if (tp > 1 || dp > 1)
        snprintf(mesh, sizeof mesh, " dp=%d tp=%d%s%s", dp, tp, sp ? "+sp" : "", exact ? " exact" : "");
    if (rt.rank == 0 && (tp > 1 || dp > 1))
        printf("%-6s B=%d T=%-4d%s minidc %9.1f ms (cpu %8.1f) %9.0f tok/s  sent %.2f MB/step by rank 0  virtual %.3f "
               "ms/step on %s\n",
               config, B, T, mesh, med, cmed, tok, sent / 1e6, vms, mdc_device_get_spec(dev)->name);
    else if (rt.rank == 0)
        printf("%-6s B=%d T=%-4d%s minidc %9.1f ms (cpu %8.1f) %9.0f tok/s  %6.1f GFLOP/step  MFU %5.1f%% of %.0f "
               "(cpu %5.1f%% of %.0f GFLOP/s)  %s  virtual %.3f ms/step on %s\n",
               config, B, T, exact ? " exact" : "", med, cmed, tok, flops / 1e9, 100 * mfu, peak / 1e9, 100 * cmfu,
               cpu_peak / 1e9, rss, vms, mdc_device_get_spec(dev)->name);
    if (torch_ms > 0 && rt.rank == 0) {
        double target = size && !strcmp(size, "tiny") ? 2.0 : size && !strcmp(size, "small") ? 1.5 : 1.2;
        double ratio = torch_ms / med;
        printf("%-6s B=%d T=%-4d torch  %9.1f ms (cpu %8.1f) %9.0f tok/s  ratio %.2fx (cpu %.2fx), target %.1fx: %s\n",
               config, B, T, torch_ms, torch_cpu, B * T / (torch_ms * 1e-3), ratio,
               torch_cpu > 0 ? torch_cpu / cmed : 0, target, ratio >= target ? "PASS" : "MISS");
    }
    free(ms), free(in);
    mdc_trainer_free(tr);
    if (rt.tr) mdc_runtime_finalize(&rt);
    else mdc_device_free(dev);
    return 0;
}
