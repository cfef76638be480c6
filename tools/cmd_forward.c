/* minidc forward: one forward (and backward) of the serial GPT-2 on given weights and tokens,
 * dumping logits, loss and every gradient, and optionally N AdamW steps on the same batch, so
 * any other implementation (PyTorch, a GPU run) can be compared with it tensor by tensor.
 *
 *   minidc forward --weights W.safetensors --tokens X.npy [--targets Y.npy] --dump OUT.safetensors
 *                  [--heads H] [--steps N --lr LR --weight-decay WD --beta1 B1 --beta2 B2
 *                   --eps EPS --grad-clip G] [device options]
 *
 * The dump holds F32 tensors: "logits" (B,T,V) (padding columns dropped), and with targets
 * "loss" (scalar), "losses" (B,T) and "grad.<name>" for each parameter (minidc's table names:
 * wte, wpe, h.N.ln_1.weight, ...; HF shapes). With --steps N: "steps.loss" (N+1) = the loss
 * before each of the N AdamW steps and after the last, and "final.<name>" = the parameters
 * after N steps. --dump-dir D: the tensors at every site of the first forward and backward
 * (include/minidc/dump.h) as D/step1-rank0.safetensors, as `minidc train --dump-dir` writes
 * them. The forward, the gradients and the steps are the training step's code (ref/train/train.c),
 * as `minidc train` runs it. Exit status: 0 ok, 1 failure, 2 bad usage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "dump_dir.h"
#include "minidc/datasets.h"
#include "minidc/device.h"
#include "minidc/kernels.h"
#include "minidc/model.h"
#include "minidc/tensorfile.h"
#include "minidc/train.h"
#include "minidc/weights.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minidc forward --weights W.safetensors --tokens X.npy [--targets Y.npy]\n"
            "                      --dump OUT.safetensors | --dump-dir D [--heads H] [--steps N] [AdamW options]\n"
            "  --weights FILE     GPT-2 weights with Hugging Face names (config inferred from shapes), or\n"
            "                     a Hugging Face directory (config.json and model.safetensors or its\n"
            "                     shards) of GPT-2, Llama, Qwen2 or Qwen3 (docs/models.md)\n"
            "  --heads H          attention heads (default: __metadata__ n_head of the weights, or the\n"
            "                     directory's config.json n_head)\n"
            "  --tokens FILE      .npy of token ids, shape (B,T) or (T,), any integer dtype\n"
            "  --targets FILE     .npy of next-token ids, same shape: adds loss and gradients\n"
            "  --dump FILE        safetensors output: logits, loss, losses, grad.<name>\n"
            "  --dump-dir D       the tensors at every site of the forward and backward (activations,\n"
            "                     their gradients, the parameters' gradients) as D/step1-rank0.safetensors\n"
            "  --steps N          then N AdamW steps on the same batch: steps.loss, final.<name>\n"
            "  --exact            exact mode (docs/exactness.md); --exact-block N its token block\n"
            "  --precision P      fp32 (default) | bf16 | fp16: mixed precision, the layers' outputs and\n"
            "                     input gradients rounded to the dtype (docs/precision.md; no loss scale)\n"
            "  a mixture of experts: E and the MoE blocks from the names (h.N.mlp.experts.J.*); --topk and\n"
            "  the routing options as for train (the dump adds loss.aux and loss.z):\n%s"
            "  --lr, --weight-decay, --beta1, --beta2, --eps, --grad-clip   AdamW (model.h defaults;\n"
            "                     lr, eps > 0; betas in [0, 1); weight decay, grad clip >= 0, 0 = off)\n"
            "%s",
            mdc_moe_usage, mdc_device_options_help());
}

/* Reads token ids from .npy: (B,T) or (T,), each in [0, V). */
static mdc_status read_ids(const char *path, int V, int **ids, int *B, int *T) {
    mdc_tensor t;
    *ids = NULL;
    mdc_status st = mdc_npy_read(path, &t);
    if (st) return st;
    if (t.ndim != 1 && t.ndim != 2) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: shape has %d dims; token ids are (B,T) or (T,)", path, t.ndim);
        goto done;
    }
    if (t.numel == 0 || t.shape[0] > 1 << 20 || t.shape[t.ndim - 1] > 1 << 20) {
        st = t.numel == 0 ? mdc_fail(MDC_ERR_FORMAT, "%s: no token ids; need a non-empty (B,T)", path)
                          : mdc_fail(MDC_ERR_FORMAT, "%s: %s %lld is more than minidc takes (at most 2^20)", path,
                                     t.shape[t.ndim - 1] > 1 << 20 ? "length T" : "rows B",
                                     (long long)(t.shape[t.ndim - 1] > 1 << 20 ? t.shape[t.ndim - 1] : t.shape[0]));
        goto done;
    }
    *B = t.ndim == 2 ? (int)t.shape[0] : 1; /* both checked above: they fit an int */
    *T = (int)t.shape[t.ndim - 1];
    *ids = malloc(t.numel * sizeof **ids);
    if (!*ids) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
        goto done;
    }
    if ((st = mdc_tensor_to_i32(&t, *ids, t.numel))) goto done;
    for (size_t i = 0; i < t.numel; i++)
        if ((*ids)[i] < 0 || (*ids)[i] >= V) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: id %d at index %zu is outside the vocabulary [0, %d)", path, (*ids)[i],
                          i, V);
            goto done;
        }
done:
    if (st) {
        free(*ids);
        *ids = NULL;
    }
    mdc_tensor_clear(&t);
    return st;
}

int mdc_cmd_forward(int argc, char **argv) {
    const char *wpath = NULL, *xpath = NULL, *ypath = NULL, *dump = NULL, *dump_dir = NULL;
    int heads = 0, steps = 0, exact = 0, xblock = 0, used, prec = MDC_PRECISION_FP32;
    mdc_moe_cli moe;
    mdc_moe_cli_default(&moe);
    mdc_adamw_config opt;
    mdc_adamw_config_default(&opt);
    mdc_device_options dopt;
    mdc_device_options_default(&dopt);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = mdc_device_options_parse(&dopt, argc, argv, &i);
        if (r < 0) {
            fprintf(stderr, "minidc forward: %s\n", mdc_detail());
            return 2;
        }
        if (r > 0) {
            i--; /* the parser advanced past the option; the loop adds one */
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--exact")) {
            exact = 1;
            continue;
        }
        mdc_status ms;
        if (mdc_moe_option(&moe, a, v, &used, &ms)) {
            if (ms || moe.E >= 0 || moe.every >= 0 || moe.o.bias_rate > 0) {
                fprintf(
                    stderr, "minidc forward: %s\n",
                    ms ? mdc_detail()
                    : moe.o.bias_rate > 0
                        ? "--moe-bias-rate "
                          "trains the routing bias (minidc train); forward uses the weights' e_score_correction_bias"
                        : "--experts and --moe-every come from the weights' names (h.N.mlp.experts.J.*)");
                return 2;
            }
            i += used - 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "minidc forward: unknown option or missing value: '%s'\n", a);
            usage(stderr);
            return 2;
        }
        int ok = 1;
        if (!strcmp(a, "--weights")) wpath = v;
        else if (!strcmp(a, "--tokens")) xpath = v;
        else if (!strcmp(a, "--targets")) ypath = v;
        else if (!strcmp(a, "--dump")) dump = v;
        else if (!strcmp(a, "--dump-dir")) dump_dir = v;
        else if (!strcmp(a, "--heads")) ok = mdc_arg_int("forward", a, v, 0, 1 << 30, &heads);
        else if (!strcmp(a, "--steps")) ok = mdc_arg_int("forward", a, v, 0, 1 << 30, &steps);
        else if (!strcmp(a, "--exact-block")) ok = mdc_arg_int("forward", a, v, 1, 1 << 20, &xblock);
        else if (!strcmp(a, "--precision")) ok = mdc_arg_precision("forward", a, v, &prec);
        else if (!strcmp(a, "--lr")) ok = mdc_arg_float("forward", a, v, &opt.lr);
        else if (!strcmp(a, "--weight-decay")) ok = mdc_arg_float("forward", a, v, &opt.weight_decay);
        else if (!strcmp(a, "--beta1")) ok = mdc_arg_float("forward", a, v, &opt.beta1);
        else if (!strcmp(a, "--beta2")) ok = mdc_arg_float("forward", a, v, &opt.beta2);
        else if (!strcmp(a, "--eps")) ok = mdc_arg_float("forward", a, v, &opt.eps);
        else if (!strcmp(a, "--grad-clip")) ok = mdc_arg_float("forward", a, v, &opt.grad_clip);
        else {
            fprintf(stderr, "minidc forward: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) return 2;
        i++;
    }
    if (!wpath || !xpath || (!dump && !dump_dir)) {
        fprintf(stderr, "minidc forward: --weights, --tokens and --dump or --dump-dir are required\n");
        usage(stderr);
        return 2;
    }
    if (mdc_adamw_check(&opt)) {
        fprintf(stderr, "minidc forward: %s\n", mdc_detail());
        return 2;
    }
    /* the outputs, before any work; none may be one of the inputs */
    const char *report = dopt.report_path[0] ? dopt.report_path : NULL;
    const char *in_opt[3] = {"--weights", "--tokens", "--targets"}, *in[3] = {wpath, xpath, ypath};
    const char *out_opt[2] = {"--dump", "--report"}, *outs[2] = {dump, report};
    for (int k = 0; k < 2; k++) {
        if (!outs[k]) continue;
        mdc_status cst = mdc_check_output(out_opt[k], outs[k]);
        for (int j = 0; j < 3 && !cst; j++) cst = mdc_check_not_input(out_opt[k], outs[k], in_opt[j], in[j]);
        if (!cst && k == 1) cst = mdc_check_not_input("--report", report, "--dump", dump);
        if (cst) {
            fprintf(stderr, "minidc forward: %s\n", mdc_detail());
            return 2;
        }
    }
    if (dump_dir && mdc_dump_dir_prepare("--dump-dir", dump_dir, 1)) {
        fprintf(stderr, "minidc forward: %s\n", mdc_detail());
        return 2;
    }
    if (steps > 0 && !ypath) {
        fprintf(stderr, "minidc forward: --steps needs --targets\n");
        return 2;
    }

    int rc = 1, B = 0, T = 0, By = 0, Ty = 0;
    int *x = NULL, *y = NULL;
    float *buf = NULL, *step_loss = NULL;
    mdc_tensorfile *wt = NULL, *out = NULL, *sites = NULL;
    mdc_device *dev = NULL;
    mdc_gpt2 *m = NULL;
    mdc_gpt2_config cfg;
    mdc_status st;
#define TRY(expr)                     \
    do {                              \
        if ((st = (expr))) goto fail; \
    } while (0)
    st = mdc_gpt2_read_weights(wpath, heads, &wt, &cfg);
    if (st == MDC_ERR_INVALID) {
        fprintf(stderr, "minidc forward: %s\n", mdc_detail());
        return 2;
    }
    if (st) goto fail;
    const char *wfmt = mdc_tensorfile_get_meta(wt, "minidc.format");
    if (wfmt && !strcmp(wfmt, "checkpoint-1")) /* its tensors' checksums were verified, not its metadata */
        fprintf(stderr,
                "minidc forward: warning: %s is a checkpoint-1 file, older than the checksum of a "
                "checkpoint's metadata: its __metadata__ (n_head, moe_topk) is not verified\n",
                wpath);
    mdc_moe_cli_apply(&moe, &cfg);
    if (mdc_gpt2_config_check(&cfg)) {
        fprintf(stderr, "minidc forward: %s\n", mdc_detail());
        rc = 2;
        goto done;
    }
    TRY(read_ids(xpath, cfg.V, &x, &B, &T));
    if (ypath) {
        TRY(read_ids(ypath, cfg.V, &y, &By, &Ty));
        if (By != B || Ty != T) {
            st = mdc_fail(MDC_ERR_MISMATCH, "%s is (%d,%d) but %s is (%d,%d)", ypath, By, Ty, xpath, B, T);
            goto fail;
        }
    }
    if (T > cfg.T) {
        fprintf(stderr, "minidc forward: %s has sequences of %d tokens, longer than the context %d of %s\n", xpath, T,
                cfg.T, wpath);
        rc = 2;
        goto done;
    }
    if (mdc_exact_options(&exact, &xblock, &cfg, T, 1, 1, 0)) {
        fprintf(stderr, "minidc forward: %s\n", mdc_detail());
        rc = 2;
        goto done;
    }
    mdc_kernels_init();
    TRY(mdc_device_create(&dev, &dopt, 0));
    TRY(mdc_gpt2_create(&m, dev, &cfg, B, T));
    if (exact) TRY(mdc_gpt2_set_exact(m, xblock));
    if (prec) TRY(mdc_gpt2_set_precision(m, prec));
    TRY(mdc_gpt2_set_moe(m, &moe.o));
    TRY(mdc_gpt2_load_weights(m, wt, wpath));
    mdc_tensorfile_free(wt);
    wt = NULL;

    float loss = -1;
    mdc_step_plan plan = mdc_step_plan_default(m);
    plan.micro_batch = B, plan.seq = T, plan.tokens = (double)B * T;
    plan.dloss = 1.0f / ((float)B * (float)T);
    double lsum = 0, aux = 0, z = 0, lb = 0;
    mdc_moe_stats s0, s1;
    mdc_gpt2_moe_stats(m, &s0);
    if (dump_dir) { /* the sites of the pass that ends in the gradients (or of this one, without targets) */
        unsigned long long run;
        TRY(mdc_dump_run_id(NULL, &run));
        TRY(mdc_dump_file_new(&sites, 0, 1, run, "serial"));
        if (!y) TRY(mdc_gpt2_set_dump(m, sites, 1, B));
    }
    TRY(mdc_step_forward(&plan, x, y, &lsum));
    mdc_gpt2_moe_stats(m, &s1);
    aux = (s1.aux_sum - s0.aux_sum) / plan.tokens, z = (s1.z_sum - s0.z_sum) / plan.tokens;
    if (exact) lsum = mdc_exact_to_f64(mdc_gpt2_exact_loss(m)); /* the exact sum of the losses */
    if (y) loss = (float)(lsum / plan.tokens + aux + z);        /* the objective: with the MoE blocks' aux losses */
    TRY(mdc_tensorfile_new(&out));
    TRY(mdc_gpt2_set_config_meta(&cfg, out));
    /* logits without the padding columns */
    buf = malloc((size_t)B * T * cfg.V * sizeof *buf);
    if (!buf) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "logits");
        goto fail;
    }
    const float *lg = mdc_gpt2_logits(m);
    for (size_t r = 0; r < (size_t)B * T; r++) memcpy(buf + r * cfg.V, lg + r * cfg.Vp, cfg.V * sizeof *buf);
    int64_t lshape[3] = {B, T, cfg.V}, bt[2] = {B, T};
    TRY(mdc_tensorfile_add(out, "logits", MDC_TD_F32, 3, lshape, buf));
    if (y) {
        TRY(mdc_tensorfile_add(out, "losses", MDC_TD_F32, 2, bt, mdc_gpt2_losses(m)));
        if (sites) TRY(mdc_gpt2_set_dump(m, sites, 1, B));
        TRY(mdc_step_grads(&plan, x, y));
        if (mdc_gpt2_lb_on(m)) { /* transformers' aux loss: its terms come with the backward */
            mdc_gpt2_moe_stats(m, &s1);
            lb = s1.lb_sum / plan.tokens, loss = (float)((double)loss + lb);
        }
        TRY(mdc_tensorfile_add(out, "loss", MDC_TD_F32, 0, NULL, &loss));
        if (cfg.E) {
            float fa = (float)aux, fz = (float)z, fl = (float)lb;
            TRY(mdc_tensorfile_add(out, "loss.aux", MDC_TD_F32, 0, NULL, &fa));
            TRY(mdc_tensorfile_add(out, "loss.z", MDC_TD_F32, 0, NULL, &fz));
            if (mdc_gpt2_lb_on(m)) TRY(mdc_tensorfile_add(out, "loss.lb", MDC_TD_F32, 0, NULL, &fl));
        }
        if (sites) TRY(mdc_gpt2_dump_grads(m, sites, 1));
        TRY(mdc_gpt2_add_tensors(m, mdc_gpt2_grads(m), "grad.", out));
    }
    if (sites) {
        mdc_gpt2_set_dump(m, NULL, 0, 0);
        TRY(mdc_dump_file_write(dump_dir, 1, 0, sites));
    }
    if (steps > 0) {
        step_loss = malloc((size_t)(steps + 1) * sizeof *step_loss);
        if (!step_loss) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "steps");
            goto fail;
        }
        /* the gradients of the first step are there already: update, then full steps */
        TRY(mdc_step_update(&plan, &opt, &step_loss[0], NULL));
        for (int k = 1; k < steps; k++) TRY(mdc_step_run(&plan, x, y, &opt, &step_loss[k], NULL));
        mdc_exact_clear(mdc_gpt2_exact_loss(m));
        mdc_gpt2_moe_stats(m, &s0);
        if (mdc_gpt2_lb_on(m)) { /* transformers' aux loss: its terms come with the backward */
            TRY(mdc_step_grads(&plan, x, y));
            lsum = plan.loss_sum, memset(&s0, 0, sizeof s0);
        } else {
            TRY(mdc_step_forward(&plan, x, y, &lsum));
        }
        mdc_gpt2_moe_stats(m, &s1);
        if (exact) lsum = mdc_exact_to_f64(mdc_gpt2_exact_loss(m));
        step_loss[steps] = (float)((lsum + s1.aux_sum - s0.aux_sum + s1.z_sum - s0.z_sum + s1.lb_sum - s0.lb_sum) /
                                   plan.tokens);
        int64_t ns[1] = {steps + 1};
        TRY(mdc_tensorfile_add(out, "steps.loss", MDC_TD_F32, 1, ns, step_loss));
        TRY(mdc_gpt2_add_tensors(m, mdc_gpt2_params(m), "final.", out));
    }
    if (dump) TRY(mdc_safetensors_write(dump, out));
    /* tokens: one forward at the start and one after each AdamW step */
    TRY(mdc_device_report_json_one(dopt.report_path, dev, (double)B * T * (steps + 1)));
    printf("minidc forward: V=%d (padded %d) T=%d L=%d H=%d C=%d, batch %dx%d", cfg.V, cfg.Vp, cfg.T, cfg.L, cfg.H,
           cfg.C, B, T);
    if (y) printf(", loss %.6f", loss);
    if (steps > 0) printf(", after %d AdamW steps %.6f", steps, step_loss[steps]);
    if (dump) printf("; %d tensors in %s", out->count, dump);
    if (sites)
        printf("%s%d tensors at their sites in %s/step1-rank0.safetensors", dump ? ", " : "; ", sites->count, dump_dir);
    printf("\n");
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "minidc forward: %s: %s\n  hint: %s\n", mdc_strerror(st), mdc_detail(), mdc_hint(st));
    rc = 1;
done:
#undef TRY
    free(step_loss);
    free(buf);
    free(x);
    free(y);
    mdc_tensorfile_free(out);
    mdc_tensorfile_free(sites);
    mdc_tensorfile_free(wt);
    mdc_gpt2_free(m);
    mdc_device_free(dev);
    return rc;
}
