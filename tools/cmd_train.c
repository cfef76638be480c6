/* minidc train: single-process training of the serial GPT-2 reference on one emulated device.
 * Without --data it trains on a generated task (below), so `minidc train --config tiny` needs
 * no files. One progress line per step; the device report at the end. Exit 2 on bad options. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/kernels.h"
#include "minidc/model.h"
#include "train_hooks.h"
#include "train_dp.h" /* dp branch */

static const char usage_text[] =
    "usage: minidc train [options]\n"
    "  --config NAME       tiny | small | gpt2 (default tiny); sizes below override it\n"
    "  --vocab V --ctx T --layers L --heads H --channels C   explicit model sizes\n"
    "  --batch B           sequences per step (default: the config's, 24 / 12 / 12)\n"
    "  --seq T             tokens per sequence (default: the context)\n"
    "  --steps N           optimizer steps (default 100)\n"
    "  --lr X              AdamW learning rate (default 1e-3); --weight-decay X (0.1)\n"
    "  --grad-clip X       global gradient-norm clip (default 1; 0 = off)\n"
    "  --seed S            initialization and generated-data seed (default 1)\n"
    "  --data FILE         token shard (io branch); default: the generated repeat task\n"
    "  --save FILE / --resume FILE   checkpoint after the last step / before the first\n"
    "  --quiet             only the first, every 10th and the last step lines\n";

/* The generated task: each sequence repeats a random pattern of 2..8 tokens drawn from the
 * first min(V, 32) token ids; after one period every next token is predictable. The loss
 * falls from ln V to about ln 32 as the model learns the alphabet (tens of steps), then
 * toward (period / T) ln 32 as it learns to copy (hundreds). Deterministic in (seed, step, row). */
static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* dp branch: not static, tools/train_dp.c generates the same batches */
void mdc_train_generated_batch(int *inputs, int *targets, int B, int T, int V, uint64_t seed, int step) {
    for (int b = 0; b < B; b++) {
        uint64_t r = mix(seed ^ mix(((uint64_t)step << 20) + (uint64_t)b));
        int period = 2 + (int)(r % 7), pat[8];
        uint64_t alphabet = V < 32 ? (uint64_t)V : 32;
        for (int i = 0; i < period; i++) pat[i] = (int)(mix(r + 1 + (uint64_t)i) % alphabet);
        for (int t = 0; t <= T; t++) {
            int tok = pat[t % period];
            if (t < T) inputs[(size_t)b * T + t] = tok;
            if (t > 0) targets[(size_t)b * T + t - 1] = tok;
        }
    }
}

int mdc_cmd_train(int argc, char **argv) {
    /* dp branch: --dp/--zero/--check-serial or several MPI ranks: the data-parallel driver */
    if (mdc_train_dp_wanted(argc, argv)) return mdc_cmd_train_dp(argc, argv);
    const char *config = "tiny", *data = NULL, *save = NULL, *resume = NULL;
    int V = 0, T = 0, L = 0, H = 0, C = 0, B = 0, seq = 0, steps = 100, seed = 1, quiet = 0;
    mdc_adamw_config opt;
    mdc_adamw_config_default(&opt);
    opt.lr = 1e-3f;
    mdc_device_options dopt;
    mdc_device_options_default(&dopt);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = mdc_device_options_parse(&dopt, argc, argv, &i);
        if (r < 0) {
            fprintf(stderr, "minidc train: %s\n", mdc_detail());
            return 2;
        }
        if (r > 0) { i--; continue; } /* the loop's i++ follows; parse advanced past it */
        int ok = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("%s%s", usage_text, mdc_device_options_help());
            return 0;
        } else if (!strcmp(a, "--config")) config = v, i++, ok = v != NULL;
        else if (!strcmp(a, "--data")) data = v, i++, ok = v != NULL;
        else if (!strcmp(a, "--save")) save = v, i++, ok = v != NULL;
        else if (!strcmp(a, "--resume")) resume = v, i++, ok = v != NULL;
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!strcmp(a, "--vocab")) ok = mdc_arg_int("train", a, v, 0, INT_MAX, &V), i++;
        else if (!strcmp(a, "--ctx")) ok = mdc_arg_int("train", a, v, 0, INT_MAX, &T), i++;
        else if (!strcmp(a, "--layers")) ok = mdc_arg_int("train", a, v, 0, INT_MAX, &L), i++;
        else if (!strcmp(a, "--heads")) ok = mdc_arg_int("train", a, v, 0, INT_MAX, &H), i++;
        else if (!strcmp(a, "--channels")) ok = mdc_arg_int("train", a, v, 0, INT_MAX, &C), i++;
        else if (!strcmp(a, "--batch")) ok = mdc_arg_int("train", a, v, 0, INT_MAX, &B), i++;
        else if (!strcmp(a, "--seq")) ok = mdc_arg_int("train", a, v, 0, INT_MAX, &seq), i++;
        else if (!strcmp(a, "--steps")) ok = mdc_arg_int("train", a, v, 0, INT_MAX, &steps), i++;
        else if (!strcmp(a, "--seed")) ok = mdc_arg_int("train", a, v, 0, INT_MAX, &seed), i++;
        else if (!strcmp(a, "--lr")) ok = mdc_arg_float("train", a, v, &opt.lr), i++;
        else if (!strcmp(a, "--weight-decay")) ok = mdc_arg_float("train", a, v, &opt.weight_decay), i++;
        else if (!strcmp(a, "--grad-clip")) ok = mdc_arg_float("train", a, v, &opt.grad_clip), i++;
        else {
            fprintf(stderr, "minidc train: unknown option '%s' (minidc train --help)\n", a);
            return 2;
        }
        if (!ok) {
            if (!v) fprintf(stderr, "minidc train: %s needs a value\n", a);
            return 2;
        }
    }
    mdc_gpt2_config cfg;
    int defB;
    if (mdc_gpt2_config_named(config, &cfg, &defB)) {
        fprintf(stderr, "minidc train: %s\n", mdc_detail());
        return 2;
    }
    if (V) cfg.V = V, cfg.Vp = 0;
    if (T) cfg.T = T;
    if (L) cfg.L = L;
    if (H) cfg.H = H;
    if (C) cfg.C = C;
    if (mdc_gpt2_config_check(&cfg)) {
        fprintf(stderr, "minidc train: %s\n", mdc_detail());
        return 2;
    }
    if (!B) B = defB;
    if (!seq) seq = cfg.T;
    if (B <= 0) { fprintf(stderr, "minidc train: --batch %d must be positive\n", B); return 2; }
    if (seq <= 0 || seq > cfg.T) {
        fprintf(stderr, "minidc train: --seq %d must be in [1, %d] (the context, --ctx)\n", seq, cfg.T);
        return 2;
    }
    if (steps < 0) { fprintf(stderr, "minidc train: --steps %d must be >= 0\n", steps); return 2; }
    if (mdc_adamw_check(&opt)) { fprintf(stderr, "minidc train: %s\n", mdc_detail()); return 2; }

    int threads = mdc_kernels_init(), rc = 1;
    mdc_device *dev = NULL;
    mdc_gpt2 *m = NULL;
    mdc_train_data *dl = NULL;
    int *inputs = malloc(sizeof(int) * 2 * (size_t)B * seq), *targets = inputs + (size_t)B * seq;
    if (!inputs) { fprintf(stderr, "minidc train: out of host memory\n"); return 1; }
    mdc_status st = mdc_device_create(&dev, &dopt, 0);
    if (st) goto fail;
    mdc_gpt2_memory mem = mdc_gpt2_memory_need(&cfg, B, seq);
    printf("model: V=%d (padded %d) T=%d L=%d H=%d C=%d, %zu parameters; batch %d x %d; %d threads\n",
           cfg.V, cfg.Vp, cfg.T, cfg.L, cfg.H, cfg.C, mdc_gpt2_param_count(&cfg), B, seq, threads);
    printf("memory: params %.1f MiB + grads %.1f + AdamW %.1f + activations %.1f = %.1f MiB on %s\n",
           mem.params / 1048576.0, mem.grads / 1048576.0, mem.optim / 1048576.0, mem.acts / 1048576.0,
           mem.total / 1048576.0, mdc_device_get_spec(dev)->name);
    st = mdc_gpt2_create(&m, dev, &cfg, B, seq);
    if (st) goto fail;
    mdc_gpt2_init(m, (uint64_t)seed);
    int step0 = 0;
    if (resume && (st = mdc_train_resume(resume, m, &step0))) goto fail;
    /* step0 + steps must fit the int step counter (a bad --steps for this checkpoint: exit 2) */
    if (resume && (st = mdc_train_first_step(resume, (uint64_t)step0, steps, &step0))) goto fail;
    if (data && (st = mdc_train_data_open(&dl, data, cfg.V, B, seq, 0, 1))) goto fail;
    printf("data: %s\n", data ? data : "generated repeat task (period 2..8, 32 symbols)");
    double t_start = mdc_wall_time(), tokens = 0;
    float loss = 0, norm = 0;
    for (int s = step0; s < step0 + steps; s++) {
        if (dl) {
            if ((st = mdc_train_data_next(dl, inputs, targets))) goto fail;
        } else {
            mdc_train_generated_batch(inputs, targets, B, seq, cfg.V, (uint64_t)seed, s);
        }
        double t0 = mdc_wall_time();
        if ((st = mdc_gpt2_forward(m, inputs, targets, B, seq, &loss))) goto fail;
        if (!isfinite(loss)) { /* nothing sensible follows a nan or inf loss: stop, exit 1 */
            fprintf(stderr, "minidc train: step %d: the loss is %g (the model diverged or the weights hold a "
                    "non-finite value; try a smaller --lr, or check the --resume checkpoint)\n", s + 1, loss);
            goto fail;
        }
        if ((st = mdc_gpt2_zero_grad(m))) goto fail;
        if ((st = mdc_gpt2_backward(m))) goto fail;
        if ((st = mdc_gpt2_update(m, &opt, &norm))) goto fail;
        double dt = mdc_wall_time() - t0;
        tokens += (double)B * seq;
        if (!quiet || s == step0 || s == step0 + steps - 1 || (s + 1) % 10 == 0) {
            mdc_dev_counters c;
            mdc_energy e;
            mdc_dev_get_counters(dev, &c);
            mdc_dev_energy(dev, &e);
            printf("step %5d  loss %.4f  norm %.3f  %8.1f ms  %9.0f tok/s  virtual %9.3f ms  energy %9.3f J\n",
                   s + 1, loss, norm, dt * 1e3, (double)B * seq / dt, c.now * 1e3, e.total);
        }
    }
    double wall = mdc_wall_time() - t_start;
    printf("trained %d steps, %.0f tokens in %.2f s (%.0f tokens/s), final loss %.4f\n", steps, tokens,
           wall, wall > 0 ? tokens / wall : 0, loss);
    if (save && (st = mdc_train_save(save, m, step0 + steps))) goto fail;
    mdc_device_report(dev, stdout, tokens);
    if ((st = mdc_device_report_json_one(dopt.report_path, dev, tokens))) goto fail;
    rc = 0;
fail:
    if (st) {
        fprintf(stderr, "minidc train: %s: %s\n  hint: %s\n", mdc_strerror(st), mdc_detail(), mdc_hint(st));
        rc = st == MDC_ERR_INVALID ? 2 : 1;
    }
    mdc_train_data_close(dl);
    mdc_gpt2_free(m);
    mdc_device_free(dev);
    free(inputs);
    return rc;
}
