/* minidc train: one driver for every mesh; the serial model is the one-rank mesh.
 *
 *   minidc train --config tiny                                   (one rank)
 *   mpiexec.mpich -n 4 minidc train --dp 2 --tp 2 --sp --zero 1 ...
 *
 * --batch is the global batch in sequences (micro-batch x --accum x --dp), so the same command
 * on any mesh trains on the same data; data-parallel rank r takes rows [r B/dp, (r+1) B/dp).
 * Options are identical on every rank, so every validation happens before any message and
 * fails the same way everywhere: rank 0 names the problem, every rank exits 2 (bad options) or
 * 1 (bad files, a diverged run). A rank that fails mid-run tells its peers, which stop with an
 * error instead of waiting. Without --data it trains on a generated task, so `minidc train`
 * needs no files. The step itself is ref/train/train.c's; docs/tensor-parallel.md walks through a run. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_args.h"
#include "commands.h"
#include "dump_dir.h"
#include "minidc/datasets.h"
#include "minidc/kernels.h"
#include "train_options.h"
#include "train_check.h"
#include "thread_tuner.h"
#include "train_state.h"

static void die(mdc_runtime *rt, mdc_status st, int same) {
    mdc_runtime_die(rt, st, same, st == MDC_ERR_INVALID && same ? 2 : 1);
}

/* --recompute (none too): the activation memory per layer against its formulas (with tp the tensor-parallel
 * report prints it), and the last step's model FLOPs (the formula: each forward once) against the
 * hardware FLOPs every rank's kernels ran (the recomputed forwards included), as MFU and HFU on
 * the virtual clock (Korthikanti et al. 2022). Every rank takes part. */
static mdc_status recompute_lines(mdc_runtime *rt, mdc_trainer *tr, const mdc_gpt2_config *cfg, int tp, int B, int T,
                                  int mb, int Tl, double from, double flops0) {
    mdc_dev_counters c;
    mdc_dev_get_counters(rt->dev, &c);
    double v[2] = {c.flops - flops0, c.now - from};
    mdc_status st = MDC_OK;
    if (rt->size > 1) st = mdc_allreduce(MDC_IN_PLACE, v, 1, MDC_F64, MDC_SUM, rt->world);
    if (rt->size > 1 && !st) st = mdc_allreduce(MDC_IN_PLACE, v + 1, 1, MDC_F64, MDC_MAX, rt->world);
    if (st || rt->rank != 0) return st;
    if (tp < 2) mdc_gpt2_recompute_report(mdc_trainer_model(tr), mb, Tl, stdout);
    /* the peak of the products' dtype: tensor cores in bf16 and fp16 */
    int half = mdc_gpt2_get_precision(mdc_trainer_model(tr)) != MDC_PRECISION_FP32;
    const mdc_device_spec *spec = mdc_device_get_spec(rt->dev);
    double model = mdc_gpt2_step_flops(cfg, B, T), one = half ? spec->flops_bf16 : spec->flops_fp32;
    double peak = one * rt->size;
    printf(
        "FLOPs of the last step: model %.4g (the formula, each forward once), hardware %.4g (every rank's "
        "kernels, recomputed or replicated work included: %.3fx); on the virtual clock (%.4g s) MFU %.2f%%, HFU %.2f%% "
        "of %d x %.0f TFLOP/s %s\n",
        model, v[0], model > 0 ? v[0] / model : 0, v[1], 100 * model / (v[1] * peak), 100 * v[0] / (v[1] * peak),
        rt->size, one / 1e12, half ? "bf16/fp16" : "fp32");
    return MDC_OK;
}

int mdc_cmd_train(int argc, char **argv) {
    mdc_runtime rt;
    mdc_status st = mdc_runtime_init(&rt, &argc, &argv);
    if (st) mdc_runtime_die(&rt, st, 1, st == MDC_ERR_INVALID ? 2 : 1); /* a bad option, or a bad device file */
    mdc_train_options o;
    int help;
    mdc_gpt2_config cfg;
    if ((st = mdc_train_parse(&o, argc, argv, &help))) mdc_runtime_die(&rt, st, 1, 2);
    if (help) {
        if (rt.rank == 0) printf("%s%s%s", mdc_train_usage, mdc_moe_usage, mdc_device_options_help());
        mdc_runtime_finalize(&rt);
        return 0;
    }
    if ((st = mdc_train_validate(&o, rt.size, &cfg))) mdc_runtime_die(&rt, st, 1, 2);
    const char *tune_env = getenv("MINIDC_TUNE_THREADS");
    if (tune_env && strcmp(tune_env, "0") && strcmp(tune_env, "1"))
        mdc_runtime_die(
            &rt, mdc_fail(MDC_ERR_INVALID, "MINIDC_TUNE_THREADS '%s': 0 (a fixed thread count) or 1", tune_env), 1, 2);
    /* every output is checked before the first step: a bad path must not cost the run */
    /* none may be an input or another output; --save may be --resume's file (it replaces it whole) */
    const char *report = rt.opts.report_path[0] ? rt.opts.report_path : NULL;
    const char *outs[4] = {o.save, report, o.timeline, o.trace},
               *out_opt[4] = {"--save", "--report", "--timeline", "--trace"};
    for (int k = 0; k < 4 && !st; k++) {
        if (!outs[k]) continue;
        size_t n = strlen(outs[k]);
        if (k == 0 && n && outs[k][n - 1] == '/') { /* --save DIR/: a Hugging Face directory of a family's model */
            if (cfg.family == MDC_FAMILY_GPT2)
                st = mdc_fail(MDC_ERR_INVALID,
                              "--save %s: a directory is written for the Llama and Qwen families; "
                              "save a GPT-2 run to a FILE",
                              outs[k]);
            continue;
        }
        st = mdc_check_output(out_opt[k], outs[k]);
        if (!st) st = mdc_check_not_input(out_opt[k], outs[k], "--data", o.data);
        if (!st && k > 0) st = mdc_check_not_input(out_opt[k], outs[k], "--resume", o.resume);
        for (int j = 0; j < k && !st; j++) st = mdc_check_not_input(out_opt[k], outs[k], out_opt[j], outs[j]);
    }
    /* the dump directory on every rank (each writes its own files); rank 0 clears an earlier run's */
    if (!st && o.dump_dir) st = mdc_dump_dir_prepare("--dump-dir", o.dump_dir, rt.rank == 0);
    if (st) mdc_runtime_die(&rt, st, 1, 2);
    int threads = mdc_kernels_init();
    mdc_coll_prefer_ring(); /* bytes equal to the formulas, the same bits on every rank */

    int r = rt.rank, B = o.B, T = o.seq, mb = B / o.dp / o.accum;
    mdc_loader *ld = NULL;
    mdc_trainer *tr = NULL, *ser = NULL;
    mdc_device *sdev = NULL;
    int *gin = malloc(sizeof(int) * 2 * (size_t)B * T), *gtg = gin ? gin + (size_t)B * T : NULL;
    if (!gin) mdc_runtime_die(&rt, mdc_fail(MDC_ERR_OOM_HOST, "batch buffers"), 1, 1);
    if (o.data) { /* the same file on every rank: a missing or bad file fails everywhere alike */
        mdc_loader_config lc = {B, T, 0, 1, 0, (uint64_t)o.seed};
        if ((st = mdc_loader_open(&ld, o.data, &lc))) {
            char why[512]; /* the detail names the file; copy it before rewriting the detail */
            snprintf(why, sizeof why, "%s", mdc_detail());
            mdc_runtime_die(&rt, mdc_fail(st, "--data: %s", why), 1, 1);
        }
        if (mdc_loader_vocab_size(ld) > (uint32_t)cfg.V)
            mdc_runtime_die(&rt,
                            mdc_fail(MDC_ERR_INVALID,
                                     "--data %s: vocabulary %u is larger than the model's %d (--vocab)", o.data,
                                     mdc_loader_vocab_size(ld), cfg.V),
                            1, 2);
    }
    mdc_trainer_config tc = mdc_train_trainer_config(&o, &cfg);
    if (o.check_coll) mdc_coll_set_check(1);
    if (o.check_coll && r == 0)
        printf("collective check: on; its messages (48 bytes per collective call and rank) count in the reports' "
               "measured bytes, not in their formulas\n");
    if ((st = mdc_trainer_create(&tr, rt.tr, rt.dev, &tc, (uint64_t)o.seed))) die(&rt, st, 1);
    if (r == 0 && o.check) { /* the serial model of the same global batch, on its own device */
        mdc_trainer_config sc = {cfg,
                                 {1, 1, 1, 1, 1},
                                 0,
                                 0,
                                 0,
                                 0,
                                 B,
                                 1,
                                 T,
                                 0,
                                 0,
                                 (float)o.dropout,
                                 o.exact ? o.exact_block : 0,
                                 NULL,
                                 NULL,
                                 1,
                                 NULL,
                                 NULL,
                                 o.moe.o,
                                 0,
                                 0,
                                 o.precision,
                                 0};
        if ((st = mdc_device_create_spec(&sdev, mdc_device_get_spec(rt.dev), mdc_device_get_energy_table(rt.dev), 1e6,
                                         MDC_EMULATE_OFF, 1, 0)) ||
            (st = mdc_trainer_create(&ser, NULL, sdev, &sc, (uint64_t)o.seed)))
            mdc_runtime_die(&rt, st, 0, 1);
    }
    mdc_train_state ts = {0, 0, (uint64_t)o.seed, 1, (uint64_t)B, 0, 0, 0, 0, 0};
    int step0 = 0;
    if (o.init && !o.resume && (st = mdc_train_init(&rt, tr, ser, &cfg, o.init))) die(&rt, st, 1);
    if (o.resume) {
        if ((st = mdc_train_load(&rt, tr, ser, &cfg, o.resume, &ts))) die(&rt, st, 1);
        /* the step must fit the int step counter, with --steps added */
        if ((st = mdc_train_first_step(o.resume, ts.step, o.steps, &step0))) die(&rt, st, 1);
        /* the seed keys the data stream and the dropout masks: the checkpoint's continues the run */
        int known = ts.seed_set || ts.seed != 0; /* older files wrote 0 for "none" */
        if (known && o.seed_given && ts.seed != (uint64_t)o.seed && !o.force_seed)
            mdc_runtime_die(&rt,
                            mdc_fail(MDC_ERR_INVALID,
                                     "--seed %d differs from the seed %llu of the checkpoint %s: "
                                     "the run would not continue the same data and dropout masks (leave --seed "
                                     "out, or add --force-seed)",
                                     o.seed, (unsigned long long)ts.seed, o.resume),
                            1, 2);
        if (!known || (o.seed_given && o.force_seed)) ts.seed = (uint64_t)o.seed;
        else if (ts.seed != (uint64_t)o.seed && r == 0)
            printf("resume: the checkpoint's seed %llu continues the run\n", (unsigned long long)ts.seed);
        if (ld) { /* in sequences when the file says how many, so another --batch continues at the next one */
            if (ts.global_batch) mdc_loader_seek_sequences(ld, ts.data_sequences);
            else mdc_loader_seek(ld, ts.data_position);
            if (ts.global_batch && ts.global_batch != (uint64_t)B && r == 0)
                printf("resume: global batch %llu -> %d; the data continues at sequence %llu\n",
                       (unsigned long long)ts.global_batch, B, (unsigned long long)ts.data_sequences);
        }
        ts.seed_set = 1, ts.global_batch = (uint64_t)B;
        mdc_loss_scale ls = {ts.scale_set ? ldexpf(1.0f, (int)ts.scale_log2) : 0, (int)ts.scale_clean, (int)ts.skipped,
                             0}; /* fp16's scaler continues where it was */
        mdc_trainer_set_loss_scale(tr, &ls);
        if (o.dropout > 0) { /* the masks follow the run's seed too */
            st = mdc_gpt2_set_dropout(mdc_trainer_model(tr), (float)o.dropout, ts.seed);
            if (!st && ser) st = mdc_gpt2_set_dropout(mdc_trainer_model(ser), (float)o.dropout, ts.seed);
            if (st) die(&rt, st, 1);
        }
    }
    if (r == 0) {
        printf("model: V=%d (padded %d) T=%d L=%d H=%d C=%d, %zu parameters; global batch %d x %d = dp %d x %d "
               "micro-batch(es) x %d sequences; tp %d%s; %s; %d thread(s) per rank\n",
               cfg.V, cfg.Vp, cfg.T, cfg.L, cfg.H, cfg.C, mdc_gpt2_param_count(&cfg), B, T, o.dp, o.accum, mb, o.tp,
               o.sp ? " with SP" : "", mdc_dp_stage_name(o.zero), threads);
        mdc_gpt2 *m = mdc_trainer_model(tr);
        size_t pb = mdc_gpt2_local_floats(m) * sizeof(float), ab = mdc_gpt2_acts_bytes(m, mb, T);
        size_t cb = o.precision ? pb / 2 : 0; /* the 16-bit compute copy beside the fp32 master */
        char copy[64] = "";
        if (cb)
            snprintf(copy, sizeof copy, " + %s copy %.1f", o.precision == MDC_PRECISION_BF16 ? "bf16" : "fp16",
                     cb / 1048576.0);
        printf("memory: params %.1f MiB%s + grads %.1f + AdamW %.1f + activations %.1f = %.1f MiB on %s (per rank, "
               "before ZeRO sharding)%s\n",
               pb / 1048576.0, copy, pb / 1048576.0, 2 * pb / 1048576.0, ab / 1048576.0, (4 * pb + cb + ab) / 1048576.0,
               mdc_device_get_spec(rt.dev)->name,
               cfg.E ? "; the MoE blocks' routed rows, allocated by each forward as the routing decides, are not "
                       "in it (the report's peak HBM has them)"
                     : "");
        printf("data: %s%s\n", o.data ? o.data : "generated repeat task (period 2..8, 32 symbols)",
               o.resume ? " (resumed)" : "");
        if (o.exact) mdc_exact_print_blocks(&cfg, o.exact_block, stdout);
    }
    if (rt.size > 1) mdc_mesh_print(mdc_trainer_mesh(tr), stdout);
    /* the hook's step must be one this run takes (s below), or it would never fire */
    if (o.fail_rank >= 0 && (o.fail_step < step0 || o.fail_step - step0 >= o.steps)) {
        char run[64] = "none: --steps 0";
        if (o.steps > 0) snprintf(run, sizeof run, "%d..%d, counted from 0", step0, step0 + o.steps - 1);
        mdc_runtime_die(&rt,
                        mdc_fail(MDC_ERR_INVALID, "--fail-at %d:%d: step %d is not one of this run's steps (%s)",
                                 o.fail_rank, o.fail_step, o.fail_step, run),
                        1, 2);
    }
    mdc_serial_check *chk = NULL; /* --check-serial: every rank takes part in its gathers */
    if (o.check &&
        (st = mdc_serial_check_create(&chk, &cfg, &o.opt, ser, o.exact, o.precision ? o.precision : o.grad_reduce)))
        mdc_runtime_die(&rt, st, 0, 1);
    double t_start = mdc_wall_time(), tokens = 0;
    float loss = 0, norm = 0;
    /* the device trace: for --trace, and for --timeline's picture of a run without a pipeline */
    int device_timeline = o.timeline && o.pp < 2;
    double last_from = 0, last_flops = 0; /* virtual time and FLOPs at the start of the last step */
    if ((o.trace || device_timeline) && (st = mdc_dev_trace_start(rt.dev))) mdc_runtime_die(&rt, st, 1, 1);
    unsigned long long run_id = 0; /* the dump's rank files carry rank 0's */
    if (o.dump_dir && (st = mdc_dump_run_id(rt.world, &run_id))) mdc_runtime_die(&rt, st, 0, 1);
    /* one process: the thread count follows what the machine gives it (tools/thread_tuner.h);
     * OMP_NUM_THREADS or MINIDC_TUNE_THREADS=0 keep it fixed */
    mdc_thread_tuner tun;
    mdc_tuner_init(&tun, threads, rt.size == 1 && !getenv("OMP_NUM_THREADS") && !(tune_env && !strcmp(tune_env, "0")));
    for (int s = step0; s < step0 + o.steps; s++) {
        mdc_tuner_before(&tun);
        if (s == step0 + o.steps - 1) {
            mdc_dev_counters c0;
            mdc_dev_get_counters(rt.dev, &c0);
            last_from = c0.now, last_flops = c0.flops;
        }
        if (s == o.fail_step && r == o.fail_rank) {
            if (o.fail_how) { /* without a word: the others must find out and name this rank */
                fprintf(stderr, "minidc: rank %d: --fail-at %d:%d: %s this process (pid %d)\n", r, r, s,
                        o.fail_how == 1 ? "stopping" : "killing", (int)getpid());
                fflush(stderr);
                raise(o.fail_how == 1 ? SIGSTOP : SIGKILL);
            }
            mdc_runtime_die(&rt, mdc_fail(MDC_ERR_INVALID, "--fail-at %d:%d: failing on purpose", r, s), 0, 1);
        }
        if (ld) {
            if ((st = mdc_loader_next(ld, gin, gtg))) mdc_runtime_die(&rt, st, 0, 1);
        } else {
            mdc_train_generated_batch(gin, gtg, B, T, cfg.V, ts.seed, s);
        }
        double t0 = mdc_wall_time();
        st = o.dump_dir ? mdc_dump_train_step(tr, o.dump_dir, run_id, s + 1, B, gin, gtg, &o.opt, &loss, &norm)
                        : mdc_trainer_step(tr, gin, gtg, &o.opt, &loss, &norm);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        if (!isfinite(loss)) { /* the global mean: the same on every rank, so all stop here together */
            if (r == 0)
                fprintf(stderr,
                        "minidc: rank 0: step %d: the loss is %g (the model diverged or the weights hold a "
                        "non-finite value; try a smaller --lr, or check the --resume checkpoint); every rank stops\n",
                        s + 1, loss);
            fflush(stderr);
            mdc_runtime_finalize(&rt);
            exit(1);
        }
        double dt = mdc_wall_time() - t0;
        mdc_loss_scale ls = mdc_trainer_loss_scale(tr);
        if (ls.last_skipped && r == 0) /* fp16: the scale already halved */
            printf("step %5d  skipped: an inf or NaN gradient at loss scale %g (the update left out; the scale is "
                   "now %g)\n",
                   s + 1, (double)ls.scale * 2, (double)ls.scale);
        mdc_tuner_after(&tun, dt);
        tokens += (double)B * T;
        float sl = 0, sn = 0;
        if (ser && (st = mdc_trainer_step(ser, gin, gtg, &o.opt, &sl, &sn))) mdc_runtime_die(&rt, st, 0, 1);
        if (chk && (st = mdc_serial_check_step(chk, tr, loss, sl, sn))) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0 && (!o.quiet || s == step0 || s == step0 + o.steps - 1 || (s + 1) % 10 == 0)) {
            mdc_dev_counters c;
            mdc_energy e;
            mdc_dev_get_counters(rt.dev, &c);
            mdc_dev_energy(rt.dev, &e);
            if (o.exact) /* every digit a float has: the lines of two meshes compare exactly */
                printf("step %5d  loss %.9g  norm %.9g  %8.1f ms  %9.0f tok/s  virtual %9.3f ms  energy %9.3f J", s + 1,
                       loss, norm, dt * 1e3, (double)B * T / dt, c.now * 1e3, e.total);
            else
                printf("step %5d  loss %.4f  norm %.3f  %8.1f ms  %9.0f tok/s  virtual %9.3f ms  energy %9.3f J", s + 1,
                       loss, norm, dt * 1e3, (double)B * T / dt, c.now * 1e3, e.total);
            if (ser) printf("  serial loss %.4f (diff %.2g)", sl, (double)loss - sl);
            printf("\n");
        }
        if (cfg.E && (!o.quiet || s == step0 || s == step0 + o.steps - 1 || (s + 1) % 10 == 0)) {
            char line[1024];
            if ((st = mdc_trainer_moe_line(tr, line, sizeof line))) mdc_runtime_die(&rt, st, 0, 1);
            if (r == 0) printf("%s\n", line);
        }
    }
    double wall = mdc_wall_time() - t_start;
    if (r == 0 && o.steps == 0) printf("trained 0 steps (--steps 0): no loss computed\n");
    else if (r == 0)
        printf("trained %d step%s, %.0f tokens in %.2f s (%.0f tokens/s), final loss %.4f\n", o.steps,
               o.steps == 1 ? "" : "s", tokens, wall, wall > 0 ? tokens / wall : 0, loss);
    if (r == 0 && o.precision == MDC_PRECISION_FP16) {
        mdc_loss_scale ls = mdc_trainer_loss_scale(tr);
        printf("loss scale %g after %d step%s, %d skipped (an inf or NaN gradient: scale halved; doubled after %d "
               "clean steps)\n",
               (double)ls.scale, step0 + o.steps, step0 + o.steps == 1 ? "" : "s", ls.skipped, MDC_LOSS_SCALE_WINDOW);
    }
    if (tun.on && r == 0 && mdc_runtime_verbose())
        printf("thread tuner: %d probe(s), %d move(s), the last step on %d of %d thread(s)\n", tun.probes, tun.moves,
               tun.levels[tun.level], threads);
    int rc = 0;
    if (chk) { /* every rank takes part in the gather */
        int ok = 1;
        if ((st = mdc_serial_check_end(chk, tr, &ok))) mdc_runtime_die(&rt, st, 0, 1);
        if (!ok) rc = 1;
    }
    if (o.save) {
        ts.step = (uint64_t)(step0 + o.steps);
        ts.data_position = ld ? mdc_loader_position(ld) : ts.step;
        ts.data_sequences = ld ? mdc_loader_sequences(ld) : 0;
        mdc_loss_scale ls = mdc_trainer_loss_scale(tr);
        ts.skipped = (uint64_t)ls.skipped, ts.scale_set = ls.scale > 0;
        ts.scale_log2 = ls.scale > 0 ? (uint64_t)ilogbf(ls.scale) : 0, ts.scale_clean = (uint64_t)ls.clean;
        if ((st = mdc_train_save(&rt, tr, &cfg, o.save, &ts))) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0)
            printf("saved %s (step %llu; the global tensors of every shard in one file)\n", o.save,
                   (unsigned long long)ts.step);
    }
    if (o.trace) { /* the steps' events (with --save also the checkpoint's gathering) */
        if ((st = mdc_train_write_trace(&rt, o.trace))) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0)
            printf("trace: %s (every rank's kernels, messages and collective calls; open it in Perfetto)\n", o.trace);
    }
    if (o.timeline) {
        char title[96];
        snprintf(title, sizeof title, "%d rank(s), tp %d cp %d ep %d dp %d", rt.size, o.tp, o.cp, o.ep, o.dp);
        st = device_timeline ? mdc_train_write_device_timeline(&rt, o.timeline, last_from, title)
                             : mdc_trainer_timeline(tr, o.timeline);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0)
            printf("timeline: %s (the last step's %s in virtual time)\n", o.timeline,
                   device_timeline ? "kernels and messages of every rank" : "schedule");
    }
    if (o.recompute_set && o.steps > 0 &&
        (st = recompute_lines(&rt, tr, &cfg, o.tp, B, T, mb, T / o.cp, last_from, last_flops)))
        mdc_runtime_die(&rt, st, 0, 1);
    mdc_trainer_report(tr, stdout);
    fflush(stdout);
    if (r == 0 && rt.opts.report_path[0]) rt.report_schemes = mdc_trainer_report_json(tr);
    if ((st = mdc_runtime_report(&rt, stdout, tokens))) mdc_runtime_die(&rt, st, 0, 1);
    mdc_trainer_free(tr);
    mdc_serial_check_free(chk);
    mdc_trainer_free(ser);
    mdc_device_free(sdev);
    mdc_loader_free(ld);
    free(gin);
    mdc_runtime_finalize(&rt);
    return rc;
}
