/* minidc train with data parallelism: mpiexec.mpich -n N minidc train --dp N --zero Z ...
 *
 * --batch is the global batch in sequences (micro-batch x --accum x --dp), as in the serial run,
 * so the same command with and without --dp trains on the same data. Rank r takes rows
 * [r B/N, (r+1) B/N) of each global batch. Options are identical on every rank, so every
 * validation happens before any message and fails the same way everywhere: rank 0 names the
 * problem, every rank exits 2 (bad options) or 1 (bad files). A rank that fails mid-run tells
 * its peers (mdc_transport_abort_peers), which stop with an error instead of waiting.
 * Checkpoints (--save, --resume): one safetensors file with the full (gathered) parameters,
 * Adam m and v, the step, the data position and the seed (the generator's whole state), so a
 * run may resume with another --dp or --zero. docs/data-parallel.md walks through it. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "minidc/datasets.h"
#include "minidc/dp.h"
#include "minidc/kernels.h"
#include "minidc/runtime.h"
#include "minidc/weights.h"
#include "cli_args.h"
#include "train_dp.h"

static const char usage_text[] =
    "usage: mpiexec.mpich -n N minidc train --dp N [options]\n"
    "  the options of the serial `minidc train` (--config, sizes, --batch, --seq, --steps, --lr,\n"
    "  --weight-decay, --grad-clip, --seed, --data, --save, --resume, --quiet), plus:\n"
    "  --dp N              data-parallel ranks; must equal the number of MPI ranks\n"
    "  --zero Z            0 = DDP (default), 1, 2, 3 = ZeRO stage\n"
    "  --accum K           micro-batches per step (gradient accumulation, default 1);\n"
    "                      --batch must be divisible by dp x K\n"
    "  --bucket-mb X       gradient bucket size in MiB (default: min(25, parameter MiB / 4))\n"
    "  --prefetch          ZeRO-3: gather the next unit on the comm stream while this one\n"
    "                      computes (forward and backward, one unit ahead)\n"
    "  --check-serial      rank 0 also trains the serial model on the same global batch and\n"
    "                      reports the loss difference per step and the largest relative\n"
    "                      parameter difference at the end (must be <= 1e-5)\n"
    "  --fail-at RANK:STEP test hook: that rank fails before that step (peers must exit);\n"
    "                      STEP counts from 0 and must be one of this run's steps\n";

int mdc_train_dp_wanted(int argc, char **argv) {
    static const char *const opts[] = {"--dp", "--zero", "--accum", "--bucket-mb", "--check-serial", "--prefetch",
                                       "--fail-at"};
    for (int i = 1; i < argc; i++)
        for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
            if (!strcmp(argv[i], opts[k])) return 1;
    const char *envs[] = {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE"};
    for (int k = 0; k < 2; k++) {
        const char *s = getenv(envs[k]);
        if (s && atoi(s) > 1) return 1;
    }
    return 0;
}

typedef struct {
    const char *config, *data, *save, *resume;
    int V, T, L, H, C, B, seq, steps, seed, quiet, dp, zero, accum, check, prefetch, fail_rank, fail_step;
    double bucket_mb;
    mdc_adamw_config opt;
} options;

/* Sizes and counts as the serial train reads them (tools/cli_args.c: the whole string, in range). */
static mdc_status parse_count(const char *a, const char *v, int *out) {
    return mdc_parse_int(a, v, 0, INT_MAX, out);
}
static mdc_status parse_float(const char *a, const char *v, float *out) {
    double x;
    mdc_status st = mdc_parse_double(a, v, &x);
    if (!st) *out = (float)x; /* out of float range becomes inf: mdc_adamw_check refuses it */
    return st;
}
/* --fail-at RANK:STEP, both non-negative integers (the rank is checked against the job later). */
static mdc_status parse_fail_at(const char *a, const char *v, int *rank, int *step) {
    const char *colon = v ? strchr(v, ':') : NULL;
    char r[32];
    if (!colon || (size_t)(colon - v) >= sizeof r)
        return mdc_fail(MDC_ERR_INVALID, "%s needs RANK:STEP, got '%s'", a, v ? v : "(nothing)");
    memcpy(r, v, (size_t)(colon - v));
    r[colon - v] = '\0';
    if (mdc_parse_int("--fail-at RANK", r, 0, INT_MAX, rank) ||
        mdc_parse_int("--fail-at STEP", colon + 1, 0, INT_MAX, step))
        return mdc_fail(MDC_ERR_INVALID, "%s needs RANK:STEP (two integers >= 0), got '%s'", a, v);
    return MDC_OK;
}

/* Every rank parses the same argv: a failure is the same everywhere. 1 = --help. */
static mdc_status parse(options *o, int argc, char **argv, int *help) {
    memset(o, 0, sizeof *o);
    o->config = "tiny", o->steps = 100, o->seed = 1, o->dp = -1, o->accum = 1, o->fail_rank = -1;
    mdc_adamw_config_default(&o->opt);
    o->opt.lr = 1e-3f; /* as the serial train */
    *help = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        mdc_status st = MDC_OK;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { *help = 1; return MDC_OK; }
        else if (!strcmp(a, "--quiet")) { o->quiet = 1; continue; }
        else if (!strcmp(a, "--check-serial")) { o->check = 1; continue; }
        else if (!strcmp(a, "--prefetch")) { o->prefetch = 1; continue; }
        else if (!strcmp(a, "--config")) o->config = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--save")) o->save = v;
        else if (!strcmp(a, "--resume")) o->resume = v;
        else if (!strcmp(a, "--vocab")) st = parse_count(a, v, &o->V);
        else if (!strcmp(a, "--ctx")) st = parse_count(a, v, &o->T);
        else if (!strcmp(a, "--layers")) st = parse_count(a, v, &o->L);
        else if (!strcmp(a, "--heads")) st = parse_count(a, v, &o->H);
        else if (!strcmp(a, "--channels")) st = parse_count(a, v, &o->C);
        else if (!strcmp(a, "--batch")) st = parse_count(a, v, &o->B);
        else if (!strcmp(a, "--seq")) st = parse_count(a, v, &o->seq);
        else if (!strcmp(a, "--steps")) st = parse_count(a, v, &o->steps);
        else if (!strcmp(a, "--seed")) st = parse_count(a, v, &o->seed);
        /* -1 is the internal "not given" (= the job size): a user's --dp must be a real count */
        else if (!strcmp(a, "--dp")) st = mdc_parse_int(a, v, 1, INT_MAX, &o->dp);
        /* any int: validate names the stages for a wrong one */
        else if (!strcmp(a, "--zero")) st = mdc_parse_int(a, v, INT_MIN, INT_MAX, &o->zero);
        else if (!strcmp(a, "--accum")) st = mdc_parse_int(a, v, 1, INT_MAX, &o->accum);
        /* bounded so that the byte count converts to size_t exactly (1 TiB is plenty) */
        else if (!strcmp(a, "--bucket-mb")) st = mdc_parse_double_range(a, v, 0, 1048576, &o->bucket_mb);
        else if (!strcmp(a, "--lr")) st = parse_float(a, v, &o->opt.lr);
        else if (!strcmp(a, "--weight-decay")) st = parse_float(a, v, &o->opt.weight_decay);
        else if (!strcmp(a, "--grad-clip")) st = parse_float(a, v, &o->opt.grad_clip);
        else if (!strcmp(a, "--fail-at")) st = parse_fail_at(a, v, &o->fail_rank, &o->fail_step);
        else
            return mdc_fail(MDC_ERR_INVALID, "unknown option '%s' (minidc train --help)", a);
        if (st) return st;
        if (!v) return mdc_fail(MDC_ERR_INVALID, "%s needs a value", a);
        i++;
    }
    return MDC_OK;
}

/* Validation that needs only the options and the rank count (no messages). */
static mdc_status validate(options *o, int nranks, mdc_gpt2_config *cfg) {
    int defB;
    mdc_status st = mdc_gpt2_config_named(o->config, cfg, &defB);
    if (st) return st;
    if (o->V) cfg->V = o->V, cfg->Vp = 0;
    if (o->T) cfg->T = o->T;
    if (o->L) cfg->L = o->L;
    if (o->H) cfg->H = o->H;
    if (o->C) cfg->C = o->C;
    if ((st = mdc_gpt2_config_check(cfg))) return st;
    if (!o->B) o->B = defB;
    if (!o->seq) o->seq = cfg->T;
    if (o->dp < 0) o->dp = nranks;
    if (o->dp != nranks)
        return mdc_fail(MDC_ERR_INVALID, "--dp %d but the job has %d rank(s): run mpiexec.mpich -n %d (one rank per "
                        "data-parallel replica)", o->dp, nranks, o->dp);
    if (o->zero < 0 || o->zero > 3) return mdc_fail(MDC_ERR_INVALID, "--zero %d: must be 0 (DDP), 1, 2 or 3", o->zero);
    if (o->prefetch && o->zero != 3)
        return mdc_fail(MDC_ERR_INVALID, "--prefetch is for --zero 3 (the stage that gathers parameters), not --zero %d",
                        o->zero);
    if (o->B <= 0) return mdc_fail(MDC_ERR_INVALID, "--batch %d must be positive", o->B);
    if (o->accum <= 0) return mdc_fail(MDC_ERR_INVALID, "--accum %d must be positive", o->accum);
    long long parts = (long long)o->dp * o->accum; /* both up to INT_MAX: 64 bits hold the product */
    if (o->B % parts)
        return mdc_fail(MDC_ERR_INVALID, "--batch %d (global, in sequences) is not divisible by --dp %d x --accum %d = %lld: "
                        "every rank must get the same number of rows", o->B, o->dp, o->accum, parts);
    if (o->seq <= 0 || o->seq > cfg->T)
        return mdc_fail(MDC_ERR_INVALID, "--seq %d must be in [1, %d] (the context, --ctx)", o->seq, cfg->T);
    if (o->steps < 0) return mdc_fail(MDC_ERR_INVALID, "--steps %d must be >= 0", o->steps);
    if ((st = mdc_adamw_check(&o->opt))) return st;
    if (o->fail_rank >= nranks) /* a hook that can never fire would pass a test for nothing */
        return mdc_fail(MDC_ERR_INVALID, "--fail-at %d:%d: rank %d is not in the job (ranks 0..%d)", o->fail_rank,
                        o->fail_step, o->fail_rank, nranks - 1);
    return MDC_OK;
}

/* A model outside the emulated devices (its own unaccounted device) to read/write checkpoints
 * with the io branch's functions, and for --check-serial. */
static mdc_status scratch_model(mdc_runtime *rt, const mdc_gpt2_config *cfg, int B, int T, mdc_device **dev,
                                mdc_gpt2 **m) {
    mdc_status st = mdc_device_create_spec(dev, mdc_device_get_spec(rt->dev), mdc_device_get_energy_table(rt->dev),
                                           1e6, MDC_EMULATE_OFF, 1, rt->rank);
    if (!st) st = mdc_gpt2_create(m, *dev, cfg, B, T);
    return st;
}

/* fsync a file and its directory, so the rename of the safetensors writer is durable. */
static mdc_status fsync_path(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
        if (fd >= 0) close(fd);
        return mdc_fail(MDC_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    }
    close(fd);
    char *d = strdup(path);
    if (!d) return mdc_fail(MDC_ERR_OOM_HOST, "fsync");
    fd = open(dirname(d), O_RDONLY);
    if (fd >= 0) fsync(fd), close(fd);
    free(d);
    return MDC_OK;
}

static mdc_status save_checkpoint(mdc_runtime *rt, mdc_dp *dp, const mdc_gpt2_config *cfg, const char *path,
                                  const mdc_train_state *ts) {
    mdc_device *sdev = NULL;
    mdc_gpt2 *sm = NULL;
    mdc_status st = MDC_OK;
    float *p = NULL, *m = NULL, *v = NULL;
    int t = mdc_dp_adam_step(dp);
    if (rt->rank == 0) {
        st = scratch_model(rt, cfg, 1, 1, &sdev, &sm);
        if (!st && t > 0) st = mdc_gpt2_set_adam_step(sm, t);
        if (!st) p = mdc_gpt2_params(sm), m = mdc_gpt2_adam_m(sm), v = mdc_gpt2_adam_v(sm);
    }
    /* a failure on rank 0 here is rank 0's alone: it aborts the peers (caller) */
    if (!st) st = mdc_dp_gather_state(dp, p, m, v, 0);
    if (!st && rt->rank == 0) {
        st = mdc_checkpoint_save(path, sm, ts);
        if (!st) st = fsync_path(path);
    }
    mdc_gpt2_free(sm);
    mdc_device_free(sdev);
    return st;
}

/* Every rank reads the checkpoint (same file, same result: a bad file fails everywhere alike). */
static mdc_status load_checkpoint(mdc_runtime *rt, mdc_dp *dp, mdc_gpt2 *serial, const mdc_gpt2_config *cfg,
                                  const char *path, mdc_train_state *ts) {
    mdc_tensorfile *tf = NULL;
    mdc_device *sdev = NULL;
    mdc_gpt2 *sm = NULL;
    mdc_status st = mdc_safetensors_read(path, &tf);
    if (!st) st = scratch_model(rt, cfg, 1, 1, &sdev, &sm);
    if (!st) st = mdc_checkpoint_load(tf, path, sm, ts);
    if (!st) st = mdc_dp_load_state(dp, mdc_gpt2_params(sm), mdc_gpt2_adam_m(sm), mdc_gpt2_adam_v(sm),
                                    mdc_gpt2_adam_step(sm));
    if (!st && serial) st = mdc_checkpoint_load(tf, path, serial, ts);
    mdc_tensorfile_free(tf);
    mdc_gpt2_free(sm);
    mdc_device_free(sdev);
    return st;
}

/* Relative differences of the parameter vectors a (parallel) and b (serial): normwise
 * ||a - b||_2 / ||b||_2 (the criterion) and max_i |a_i - b_i| / max_i |b_i|. Elementwise
 * measures are dominated by parameters whose gradient is mostly rounding noise (the key bias's
 * exact gradient is 0; rows of unused tokens), which AdamW amplifies: docs/data-parallel.md. */
static void rel_diff(const float *a, const float *b, size_t n, double *l2, double *mx) {
    double d2 = 0, b2 = 0, dm = 0, bm = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (isnan(e)) e = INFINITY;
        d2 += e * e, b2 += (double)b[i] * b[i];
        if (e > dm) dm = e;
        if (fabs((double)b[i]) > bm) bm = fabs((double)b[i]);
    }
    *l2 = b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
    *mx = bm > 0 ? dm / bm : dm;
}

int mdc_cmd_train_dp(int argc, char **argv) {
    mdc_runtime rt;
    mdc_status st = mdc_runtime_init(&rt, &argc, &argv);
    if (st) mdc_runtime_die(&rt, st, 1, 2);
    options o;
    int help;
    mdc_gpt2_config cfg;
    if ((st = parse(&o, argc, argv, &help))) mdc_runtime_die(&rt, st, 1, 2);
    if (help) {
        if (rt.rank == 0) printf("%s%s", usage_text, mdc_device_options_help());
        mdc_runtime_finalize(&rt);
        return 0;
    }
    if ((st = validate(&o, rt.size, &cfg))) mdc_runtime_die(&rt, st, 1, 2);
    int threads = mdc_kernels_init();
    /* bandwidth-optimal ring algorithms, so the bytes sent equal the formulas exactly
     * (MINIDC_ALGO_<COLL> in the environment still overrides) */
    if (!getenv("MINIDC_ALGO_ALLREDUCE")) mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "ring");
    if (!getenv("MINIDC_ALGO_REDUCE_SCATTER")) mdc_coll_set_algo(MDC_COLL_REDUCE_SCATTER, "ring");
    if (!getenv("MINIDC_ALGO_ALLGATHER")) mdc_coll_set_algo(MDC_COLL_ALLGATHER, "ring");

    int N = rt.size, r = rt.rank, B = o.B, T = o.seq, rows = B / N, mb = rows / o.accum;
    mdc_loader *ld = NULL, *ld_all = NULL;
    mdc_dp *dp = NULL;
    mdc_device *sdev = NULL;
    mdc_gpt2 *ser = NULL;
    int *gin = malloc(sizeof(int) * 2 * (size_t)B * T), *gtg = gin ? gin + (size_t)B * T : NULL;
    if (!gin) mdc_runtime_die(&rt, mdc_fail(MDC_ERR_OOM_HOST, "batch buffers"), 1, 1);
    if (o.data) { /* the same file on every rank: a missing or bad file fails everywhere alike */
        mdc_loader_config lc = {B, T, r, N, 0, (uint64_t)o.seed};
        if ((st = mdc_loader_open(&ld, o.data, &lc))) {
            char why[512]; /* the detail names the file; copy it before rewriting the detail */
            snprintf(why, sizeof why, "%s", mdc_detail());
            mdc_runtime_die(&rt, mdc_fail(st, "--data: %s", why), 1, 1);
        }
        if (mdc_loader_vocab_size(ld) > (uint32_t)cfg.V)
            mdc_runtime_die(&rt, mdc_fail(MDC_ERR_INVALID, "--data %s: vocabulary %u is larger than the model's %d (--vocab)",
                                          o.data, mdc_loader_vocab_size(ld), cfg.V), 1, 2);
        lc.rank = 0, lc.nranks = 1;
        if (r == 0 && o.check && (st = mdc_loader_open(&ld_all, o.data, &lc))) mdc_runtime_die(&rt, st, 0, 1);
    }
    mdc_dp_config dc = {o.zero, mb, o.accum, T, (size_t)(o.bucket_mb * 1048576.0), 1, o.prefetch};
    if ((st = mdc_dp_create(&dp, rt.world, &cfg, &dc, (uint64_t)o.seed))) mdc_runtime_die(&rt, st, 1, 1);
    if (r == 0 && o.check) {
        if ((st = scratch_model(&rt, &cfg, B, T, &sdev, &ser))) mdc_runtime_die(&rt, st, 0, 1);
        mdc_gpt2_init(ser, (uint64_t)o.seed);
    }
    mdc_train_state ts = {0, 0, (uint64_t)o.seed};
    int step0 = 0;
    if (o.resume) {
        if ((st = load_checkpoint(&rt, dp, ser, &cfg, o.resume, &ts))) mdc_runtime_die(&rt, st, 1, 1);
        /* as the serial resume: the step must fit the int step counter, with --steps added */
        if ((st = mdc_train_first_step(o.resume, ts.step, o.steps, &step0)))
            mdc_runtime_die(&rt, st, 1, st == MDC_ERR_INVALID ? 2 : 1);
        if (ts.seed == 0) ts.seed = (uint64_t)o.seed; /* serial `minidc train --save` records no seed */
        else if (ts.seed != (uint64_t)o.seed && r == 0)
            printf("resume: the checkpoint's seed %llu replaces --seed %d (the data stream continues)\n",
                   (unsigned long long)ts.seed, o.seed);
        if (ld) mdc_loader_seek(ld, ts.data_position);
        if (ld_all) mdc_loader_seek(ld_all, ts.data_position);
    }
    static const char *const names[4] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
    if (r == 0) {
        printf("model: V=%d (padded %d) T=%d L=%d H=%d C=%d, %zu parameters; global batch %d x %d = "
               "%d ranks x %d micro-batch(es) x %d sequences; %s; %d thread(s) per rank\n",
               cfg.V, cfg.Vp, cfg.T, cfg.L, cfg.H, cfg.C, mdc_gpt2_param_count(&cfg), B, T, N, o.accum, mb,
               names[o.zero], threads);
        printf("data: %s%s\n", o.data ? o.data : "generated repeat task (period 2..8, 32 symbols)",
               o.resume ? " (resumed)" : "");
    }
    size_t myoff = (size_t)r * rows * T, P = mdc_gpt2_param_floats(&cfg);
    /* the hook's step must be one this run takes (s below), or it would never fire */
    if (o.fail_rank >= 0 && (o.fail_step < step0 || o.fail_step - step0 >= o.steps)) {
        char run[64] = "none: --steps 0";
        if (o.steps > 0) snprintf(run, sizeof run, "%d..%d, counted from 0", step0, step0 + o.steps - 1);
        mdc_runtime_die(&rt, mdc_fail(MDC_ERR_INVALID, "--fail-at %d:%d: step %d is not one of this run's steps (%s)",
                                      o.fail_rank, o.fail_step, o.fail_step, run), 1, 2);
    }
    double t_start = mdc_wall_time(), tokens = 0, worst_loss = 0;
    float loss = 0, norm = 0;
    for (int s = step0; s < step0 + o.steps; s++) {
        if (s == o.fail_step && r == o.fail_rank)
            mdc_runtime_die(&rt, mdc_fail(MDC_ERR_INVALID, "--fail-at %d:%d: failing on purpose", r, s), 0, 1);
        int *in = gin + myoff, *tg = gtg + myoff;
        if (ld) {
            if ((st = mdc_loader_next(ld, in, tg))) mdc_runtime_die(&rt, st, 0, 1);
            if (ld_all && (st = mdc_loader_next(ld_all, gin, gtg))) mdc_runtime_die(&rt, st, 0, 1);
        } else {
            mdc_train_generated_batch(gin, gtg, B, T, cfg.V, ts.seed, s);
        }
        double t0 = mdc_wall_time();
        if ((st = mdc_dp_step(dp, in, tg, &o.opt, &loss, &norm))) mdc_runtime_die(&rt, st, 0, 1);
        if (!isfinite(loss)) { /* the global mean: the same on every rank, so all stop here together */
            if (r == 0)
                fprintf(stderr, "minidc: rank 0: step %d: the loss is %g (the model diverged or the weights hold a "
                        "non-finite value; try a smaller --lr, or check the --resume checkpoint); every rank stops\n",
                        s + 1, loss);
            fflush(stderr);
            mdc_runtime_finalize(&rt);
            exit(1);
        }
        double dt = mdc_wall_time() - t0;
        tokens += (double)B * T;
        float sl = 0, sn = 0;
        if (ser) {
            if ((st = mdc_gpt2_forward(ser, gin, gtg, B, T, &sl)) || (st = mdc_gpt2_zero_grad(ser)) ||
                (st = mdc_gpt2_backward(ser)) || (st = mdc_gpt2_update(ser, &o.opt, &sn)))
                mdc_runtime_die(&rt, st, 0, 1);
            double d = fabs((double)loss - sl);
            if (d > worst_loss) worst_loss = d;
        }
        if (r == 0 && (!o.quiet || s == step0 || s == step0 + o.steps - 1 || (s + 1) % 10 == 0)) {
            mdc_dev_counters c;
            mdc_dev_get_counters(rt.dev, &c);
            printf("step %5d  loss %.4f  norm %.3f  %8.1f ms  virtual %9.3f ms", s + 1, loss, norm, dt * 1e3, c.now * 1e3);
            if (ser) printf("  serial loss %.4f (diff %.2g)", sl, (double)loss - sl);
            printf("\n");
        }
    }
    double wall = mdc_wall_time() - t_start;
    if (r == 0)
        printf("trained %d steps, %.0f tokens in %.2f s (%.0f tokens/s), final loss %.4f\n", o.steps, tokens, wall,
               wall > 0 ? tokens / wall : 0, loss);
    int rc = 0;
    if (o.check) { /* every rank takes part in the gather */
        float *got = r == 0 ? malloc(P * sizeof(float)) : NULL;
        if (r == 0 && !got) mdc_runtime_die(&rt, mdc_fail(MDC_ERR_OOM_HOST, "check"), 0, 1);
        if ((st = mdc_dp_gather_state(dp, got, NULL, NULL, 0))) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0) {
            double d, dmax;
            rel_diff(got, mdc_gpt2_params(ser), P, &d, &dmax);
            printf("check-serial: largest loss difference %.3g; relative parameter difference %.3g "
                   "(||dp - serial|| / ||serial||; limit 1e-5): %s; elementwise max |dp - serial| / max |serial| %.3g\n",
                   worst_loss, d, d <= 1e-5 ? "ok" : "FAILED", dmax);
            if (!(d <= 1e-5)) rc = 1;
        }
        free(got);
    }
    if (o.save) {
        ts.step = (uint64_t)(step0 + o.steps);
        ts.data_position = ld ? mdc_loader_position(ld) : ts.step;
        if ((st = save_checkpoint(&rt, dp, &cfg, o.save, &ts))) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0) printf("saved %s (step %llu; %s shards gathered into one file)\n", o.save,
                           (unsigned long long)ts.step, names[o.zero]);
    }
    mdc_dp_report(dp, stdout);
    fflush(stdout);
    if ((st = mdc_runtime_report(&rt, stdout, tokens))) mdc_runtime_die(&rt, st, 0, 1);
    mdc_dp_free(dp);
    mdc_gpt2_free(ser);
    mdc_device_free(sdev);
    mdc_loader_free(ld);
    mdc_loader_free(ld_all);
    free(gin);
    mdc_runtime_finalize(&rt);
    return rc;
}
