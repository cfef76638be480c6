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
 * needs no files. The step itself is ref/train.c's; docs/tensor-parallel.md walks through a run. */
#include <limits.h>
#include <signal.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/datasets.h"
#include "minidc/kernels.h"
#include "dump_dir.h"
#include "train_state.h"

static const char usage_text[] =
    "usage: minidc train [options]            (one rank)\n"
    "       mpiexec.mpich -n N minidc train --dp D --tp T [--sp] [--zero Z] [options]   (N = D x T)\n"
    "  --config NAME       tiny | small | gpt2 (default tiny); sizes below override it\n"
    "  --vocab V --ctx T --layers L --heads H --channels C   explicit model sizes\n"
    "  --batch B           global sequences per step (default: the config's, 24 / 12 / 12)\n"
    "  --seq T             tokens per sequence (default: the context)\n"
    "  --steps N           optimizer steps (default 100)\n"
    "  --lr X              AdamW learning rate (default 1e-3); --weight-decay X (0.1)\n"
    "  --grad-clip X       global gradient-norm clip (default 1; 0 = off)\n"
    "  --seed S            initialization, data and dropout seed (default 1); on --resume the\n"
    "                      checkpoint's seed continues the run: a different --seed is an error\n"
    "  --force-seed        with --resume: take --seed even where the checkpoint has another\n"
    "  --data FILE         token shard; default: the generated repeat task\n"
    "  --save FILE / --resume FILE   checkpoint of the global tensors after the last step / before\n"
    "                      the first (any mesh resumes any other's)\n"
    "  --quiet             only the first, every 10th and the last step lines\n"
    "  --dp N              data-parallel ranks (default: the ranks left by the other axes)\n"
    "  --tp N              tensor-parallel ranks (Megatron: heads, MLP columns, vocabulary split)\n"
    "  --sp                sequence parallelism over the tp ranks (needs --tp 2 or more)\n"
    "  --pp N              pipeline stages (layers split evenly, the first stages one more; the\n"
    "                      embedding on the first, the head on the last); --pp-layout 3,3,2 uneven\n"
    "  --schedule S        gpipe | 1f1b (default) | interleaved | zb-h1 (minidc explain pipeline)\n"
    "  --virtual-stages V  interleaved: V model chunks per stage, virtual stage c p + s on stage s\n"
    "                      (layers split over p V virtual stages; --pp-layout then lists p V)\n"
    "  --microbatches M    micro-batches per step (the pipeline's accumulation; same as --accum)\n"
    "  --timeline FILE     the last step as SVG in virtual time: with --pp the measured schedule, a row\n"
    "                      per stage; without, every rank's kernels, messages and collective calls\n"
    "  --trace FILE        every rank's kernels, copies, messages and collective calls of the run as a\n"
    "                      Chrome trace (Perfetto): a virtual-time and a wall-time track per rank\n"
    "  --dump-dir D        every rank's tensors at every site of every step (activations and their\n"
    "                      gradients, before and after each communication point; the parameters'\n"
    "                      gradients) as D/step<S>-rank<R>.safetensors; minidc compare reassembles\n"
    "  --cp N              context parallelism: each sequence split over N ranks (--seq a multiple\n"
    "                      of 2N for the zigzag layout)\n"
    "  --cp-layout L       zigzag (default: rank r holds chunks r and 2N-1-r of 2N) | contiguous\n"
    "  --cp-algo A         ring (default: key/value blocks travel the ring) | allgather | ulysses\n"
    "                      (all-to-all to whole heads; H / tp divisible by N)\n"
    "  --ep N              expert parallelism: N of the --dp ranks share each MoE block's experts\n"
    "                      (E/N each; N divides --dp and --experts; docs/expert-parallel.md)\n"
    "  --zero Z            0 = DDP (default), 1, 2, 3 = ZeRO stage\n"
    "  --accum K           micro-batches per step (gradient accumulation, default 1);\n"
    "                      --batch must be divisible by dp x K\n"
    "  --bucket-mb X       gradient bucket size in MiB (default: min(25, parameter MiB / 4))\n"
    "  --prefetch          ZeRO-3: gather the next unit on the comm stream while this one computes\n"
    "  --check-collectives every collective call is compared across its group first (call number,\n"
    "                      collective, count, dtype, op, root); a rank calling another is named\n"
    "  --check-serial      rank 0 also trains the serial model on the same global batch and\n"
    "                      reports the loss difference per step, and the parameter difference at\n"
    "                      the end (normwise <= 1e-5, every tensor <= 1e-3, else exit 1)\n"
    "  --dropout P         dropout on the attention probabilities and both residual branches\n"
    "                      (default 0); masks keyed by global element index: every mesh drops\n"
    "                      exactly what serial drops\n"
    "  --exact             exact mode: every mesh gives the serial run's bits (docs/exactness.md)\n"
    "  --exact-block N     exact mode's token block (default: the largest divisor of --seq up to\n"
    "                      32; implies --exact); it must divide the positions of a sequence each\n"
    "                      rank holds (--seq, or --seq / --tp with --sp)\n"
    "  --check-replicas    after every step, compare bit for bit every replica: the tp-replicated\n"
    "                      tensors (LayerNorms, wpe, row-parallel biases) across tp ranks, every\n"
    "                      tensor across the dp x cp x ep replicas (not ZeRO-3's shards), and the\n"
    "                      tied wte on the first and last pipeline stage\n"
    "  --fail-at RANK:STEP test hook: that rank fails before that step (peers must exit);\n"
    "                      STEP counts from 0 and must be one of this run's steps; RANK:STEP:stop\n"
    "                      or :kill stops or kills the process instead (peers must name it)\n";

typedef struct {
    const char *config, *data, *save, *resume;
    int V, T, L, H, C, B, seq, steps, seed, quiet, dp, tp, sp, pp, cp, ep, zero, accum, check, replicas, prefetch;
    int seed_given, force_seed, exact, exact_block, microbatches, check_coll;
    const char *schedule, *timeline, *cp_layout, *cp_algo, *trace, *dump_dir;
    int layout[256], layout_n, vstages;
    int fail_rank, fail_step, fail_how;
    double bucket_mb, dropout;
    mdc_adamw_config opt;
    mdc_moe_cli moe;
} options;

static mdc_status parse_float(const char *a, const char *v, float *out) {
    double x;
    mdc_status st = mdc_parse_double(a, v, &x);
    if (!st) *out = (float)x; /* out of float range becomes inf: mdc_adamw_check refuses it */
    return st;
}
/* --fail-at RANK:STEP[:stop|:kill], two non-negative integers (the rank is checked against the
 * job later) and how: fail with a message (default), or stop or kill the process (a rank that
 * stops answering, or dies, without a word). */
static mdc_status parse_fail_at(const char *a, const char *v, int *rank, int *step, int *how) {
    const char *colon = v ? strchr(v, ':') : NULL, *second = colon ? strchr(colon + 1, ':') : NULL;
    char r[32], s[32];
    *how = 0;
    if (!colon || (size_t)(colon - v) >= sizeof r)
        return mdc_fail(MDC_ERR_INVALID, "%s needs RANK:STEP, got '%s'", a, v ? v : "(nothing)");
    memcpy(r, v, (size_t)(colon - v));
    r[colon - v] = '\0';
    size_t sl = second ? (size_t)(second - colon - 1) : strlen(colon + 1);
    if (sl >= sizeof s) return mdc_fail(MDC_ERR_INVALID, "%s needs RANK:STEP, got '%s'", a, v);
    memcpy(s, colon + 1, sl);
    s[sl] = '\0';
    if (second && strcmp(second + 1, "stop") && strcmp(second + 1, "kill"))
        return mdc_fail(MDC_ERR_INVALID, "%s RANK:STEP:HOW: HOW is stop or kill, got '%s'", a, second + 1);
    if (second) *how = !strcmp(second + 1, "stop") ? 1 : 2;
    if (mdc_parse_int("--fail-at RANK", r, 0, INT_MAX, rank) || mdc_parse_int("--fail-at STEP", s, 0, INT_MAX, step))
        return mdc_fail(MDC_ERR_INVALID, "%s needs RANK:STEP (two integers >= 0), got '%s'", a, v);
    return MDC_OK;
}

/* --pp-layout 3,3,2,4: layers per stage, each >= 1. */
static mdc_status parse_layout(const char *a, const char *v, int *out, int *n) {
    *n = 0;
    for (const char *s = v; s && *s;) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 1 || x > 4096 || *n >= 256 || (*end && *end != ','))
            return mdc_fail(MDC_ERR_INVALID, "%s needs layer counts >= 1 separated by commas, got '%s'", a, v);
        out[(*n)++] = (int)x;
        s = *end ? end + 1 : end;
    }
    if (!*n) return mdc_fail(MDC_ERR_INVALID, "%s needs layer counts, got '%s'", a, v ? v : "(nothing)");
    return MDC_OK;
}

/* Every rank parses the same argv: a failure is the same everywhere. */
static mdc_status parse(options *o, int argc, char **argv, int *help) {
    memset(o, 0, sizeof *o);
    o->config = "tiny", o->steps = 100, o->seed = 1, o->dp = -1, o->tp = 1, o->pp = 1, o->cp = 1, o->ep = 1;
    o->accum = 1, o->fail_rank = -1;
    mdc_moe_cli_default(&o->moe);
    mdc_adamw_config_default(&o->opt);
    o->opt.lr = 1e-3f;
    *help = 0;
    static const struct { const char *name; size_t off; } flags[] = {
        {"--quiet", offsetof(options, quiet)},       {"--check-serial", offsetof(options, check)},
        {"--prefetch", offsetof(options, prefetch)}, {"--sp", offsetof(options, sp)},
        {"--check-replicas", offsetof(options, replicas)}, {"--force-seed", offsetof(options, force_seed)},
        {"--exact", offsetof(options, exact)}, {"--check-collectives", offsetof(options, check_coll)},
    };
    static const struct { const char *name; size_t off; int lo; } counts[] = {
        /* a size of 0 is an error, never "the default": leave the option out for that */
        {"--vocab", offsetof(options, V), 1},  {"--ctx", offsetof(options, T), 1},
        {"--layers", offsetof(options, L), 1}, {"--heads", offsetof(options, H), 1},
        {"--channels", offsetof(options, C), 1}, {"--batch", offsetof(options, B), 1},
        {"--seq", offsetof(options, seq), 1},  {"--steps", offsetof(options, steps), 0},
        {"--seed", offsetof(options, seed), 0}, {"--dp", offsetof(options, dp), 1},
        {"--tp", offsetof(options, tp), 1},    {"--pp", offsetof(options, pp), 1},
        {"--cp", offsetof(options, cp), 1},    {"--ep", offsetof(options, ep), 1},
        {"--accum", offsetof(options, accum), 1}, {"--zero", offsetof(options, zero), INT_MIN},
        {"--exact-block", offsetof(options, exact_block), 1}, {"--microbatches", offsetof(options, microbatches), 1},
        {"--virtual-stages", offsetof(options, vstages), 1},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        mdc_status st = MDC_OK;
        int done = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { *help = 1; return MDC_OK; }
        for (size_t k = 0; k < sizeof flags / sizeof flags[0] && !done; k++)
            if (!strcmp(a, flags[k].name)) *(int *)((char *)o + flags[k].off) = 1, done = 1;
        if (done) continue;
        int used;
        if (mdc_moe_option(&o->moe, a, v, &used, &st)) {
            if (st) return st;
            i += used - 1;
            continue;
        }
        if (!strcmp(a, "--seed")) o->seed_given = 1;
        for (size_t k = 0; k < sizeof counts / sizeof counts[0] && !done; k++)
            if (!strcmp(a, counts[k].name))
                st = mdc_parse_int(a, v, counts[k].lo, INT_MAX, (int *)((char *)o + counts[k].off)), done = 1;
        if (done) ;
        else if (!strcmp(a, "--config")) o->config = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--save")) o->save = v;
        else if (!strcmp(a, "--resume")) o->resume = v;
        else if (!strcmp(a, "--schedule")) o->schedule = v;
        else if (!strcmp(a, "--cp-layout")) o->cp_layout = v;
        else if (!strcmp(a, "--cp-algo")) o->cp_algo = v;
        else if (!strcmp(a, "--timeline")) o->timeline = v;
        else if (!strcmp(a, "--trace")) o->trace = v;
        else if (!strcmp(a, "--dump-dir")) o->dump_dir = v;
        else if (!strcmp(a, "--pp-layout")) st = parse_layout(a, v, o->layout, &o->layout_n);
        /* bounded so that the byte count converts to size_t exactly (1 TiB is plenty) */
        else if (!strcmp(a, "--bucket-mb")) st = mdc_parse_double_range(a, v, 0, 1048576, &o->bucket_mb);
        else if (!strcmp(a, "--dropout")) st = mdc_parse_double_range(a, v, 0, 0.99, &o->dropout);
        else if (!strcmp(a, "--lr")) st = parse_float(a, v, &o->opt.lr);
        else if (!strcmp(a, "--weight-decay")) st = parse_float(a, v, &o->opt.weight_decay);
        else if (!strcmp(a, "--grad-clip")) st = parse_float(a, v, &o->opt.grad_clip);
        else if (!strcmp(a, "--fail-at")) st = parse_fail_at(a, v, &o->fail_rank, &o->fail_step, &o->fail_how);
        else return mdc_fail(MDC_ERR_INVALID, "unknown option '%s' (minidc train --help)", a);
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
    mdc_moe_cli_apply(&o->moe, cfg);
    if ((st = mdc_gpt2_config_check(cfg))) return st;
    if (!o->B) o->B = defB;
    if (!o->seq) o->seq = cfg->T;
    long long other = (long long)o->tp * o->pp * o->cp; /* the ep ranks are data-parallel ranks */
    if (o->dp < 0) o->dp = nranks % other == 0 && nranks / other > 0 ? (int)(nranks / other) : 1;
    if (other * o->dp != nranks)
        return mdc_fail(MDC_ERR_INVALID, "--dp %d x --tp %d x --pp %d x --cp %d = %lld rank(s), but the job has "
                        "%d: run mpiexec.mpich -n %lld", o->dp, o->tp, o->pp, o->cp, other * o->dp, nranks,
                        other * o->dp);
    if (o->ep > 1 && o->dp % o->ep)
        return mdc_fail(MDC_ERR_INVALID, "--ep %d does not divide --dp %d: the ep ranks are data-parallel ranks "
                        "(Megatron's folding), each holding E/ep experts", o->ep, o->dp);
    if (o->zero < 0 || o->zero > 3) return mdc_fail(MDC_ERR_INVALID, "--zero %d: must be 0 (DDP), 1, 2 or 3", o->zero);
    if (o->prefetch && o->zero != 3)
        return mdc_fail(MDC_ERR_INVALID, "--prefetch is for --zero 3 (the stage that gathers parameters), not --zero %d",
                        o->zero);
    if (o->sp && o->tp < 2) return mdc_fail(MDC_ERR_INVALID, "--sp needs --tp 2 or more (it splits the sequence over tp)");
    if (o->B <= 0) return mdc_fail(MDC_ERR_INVALID, "--batch %d must be positive", o->B);
    long long parts = (long long)o->dp * o->accum; /* both up to INT_MAX: 64 bits hold the product */
    if (o->B % parts)
        return mdc_fail(MDC_ERR_INVALID, "--batch %d (global, in sequences) is not divisible by --dp %d x --accum %d = %lld: "
                        "every rank must get the same number of rows", o->B, o->dp, o->accum, parts);
    if (o->seq <= 0 || o->seq > cfg->T)
        return mdc_fail(MDC_ERR_INVALID, "--seq %d must be in [1, %d] (the context, --ctx)", o->seq, cfg->T);
    if (o->steps < 0) return mdc_fail(MDC_ERR_INVALID, "--steps %d must be >= 0", o->steps);
    if ((st = mdc_adamw_check(&o->opt))) return st;
    if ((st = mdc_exact_options(&o->exact, &o->exact_block, cfg, o->seq, o->cp, o->tp, o->sp))) return st;
    if (o->pp > 1 || o->microbatches || o->schedule || o->layout_n || o->timeline || o->vstages) {
        if (o->vstages > 1 && !o->schedule) o->schedule = "interleaved";
        int v = o->vstages ? o->vstages : o->schedule && !strcmp(o->schedule, "interleaved") ? 2 : 1;
        o->vstages = v;
        if (o->microbatches && o->accum != 1 && o->accum != o->microbatches)
            return mdc_fail(MDC_ERR_INVALID, "--microbatches %d and --accum %d: a pipeline's micro-batches are the "
                            "accumulation; give one of them", o->microbatches, o->accum);
        if (o->microbatches) o->accum = o->microbatches;
        if (o->pp * v > cfg->L)
            return mdc_fail(MDC_ERR_INVALID, "--pp %d%s: more %sstages than the model's %d layers (--layers)", o->pp,
                            v > 1 ? " x --virtual-stages" : "", v > 1 ? "virtual " : "", cfg->L);
        if (o->layout_n) {
            int sum = 0;
            for (int i = 0; i < o->layout_n; i++) sum += o->layout[i];
            if (o->layout_n != o->pp * v || sum != cfg->L)
                return mdc_fail(MDC_ERR_INVALID, "--pp-layout: %d stage(s) of %d layers in all, but --pp %d%s and %d "
                                "layers", o->layout_n, sum, o->pp, v > 1 ? " x --virtual-stages" : "", cfg->L);
        }
        if (o->B % (o->dp * o->accum))
            return mdc_fail(MDC_ERR_INVALID, "--batch %d is not divisible by --dp %d x %d micro-batches", o->B, o->dp,
                            o->accum);
        mdc_pp_schedule s;
        if ((st = mdc_pp_schedule_build(&s, o->schedule ? o->schedule : "1f1b", o->pp, o->accum, v))) return st;
        mdc_pp_schedule_free(&s);
    }
    if (o->fail_rank >= nranks) /* a hook that can never fire would pass a test for nothing */
        return mdc_fail(MDC_ERR_INVALID, "--fail-at %d:%d: rank %d is not in the job (ranks 0..%d)", o->fail_rank,
                        o->fail_step, o->fail_rank, nranks - 1);
    if ((o->cp_layout || o->cp_algo) && o->cp < 2)
        return mdc_fail(MDC_ERR_INVALID, "--cp-layout and --cp-algo arrange context parallelism: they need --cp 2 or more");
    if (o->cp > 1 && (st = mdc_cp_check(o->cp, o->seq, cfg->H % o->tp ? cfg->H : cfg->H / o->tp, o->cp_layout, o->cp_algo)))
        return st;
    int chunk = o->seq / (o->cp * (o->cp_layout && !strcmp(o->cp_layout, "contiguous") ? 1 : 2));
    if (o->cp > 1 && o->exact && chunk % o->exact_block) {
        int b = o->exact_block;
        while (chunk % b) b--;
        return mdc_fail(MDC_ERR_INVALID, "--exact-block %d does not divide the %d positions of a context-parallel chunk "
                        "(--seq %d over --cp %d%s); use --exact-block %d (or another divisor of %d) on every mesh you "
                        "compare", o->exact_block, chunk, o->seq, o->cp, chunk * o->cp == o->seq ? "" : " x 2 zigzag chunks",
                        b, chunk);
    }
    mdc_gpt2_part part = mdc_gpt2_part_serial(cfg);
    part.tp = o->tp, part.sp = o->sp;
    return mdc_gpt2_part_check(&part, cfg, o->seq / o->cp);
}

static void die(mdc_runtime *rt, mdc_status st, int same) {
    mdc_runtime_die(rt, st, same, st == MDC_ERR_INVALID && same ? 2 : 1);
}

int mdc_cmd_train(int argc, char **argv) {
    mdc_runtime rt;
    mdc_status st = mdc_runtime_init(&rt, &argc, &argv);
    if (st) mdc_runtime_die(&rt, st, 1, st == MDC_ERR_INVALID ? 2 : 1); /* a bad option, or a bad device file */
    options o;
    int help;
    mdc_gpt2_config cfg;
    if ((st = parse(&o, argc, argv, &help))) mdc_runtime_die(&rt, st, 1, 2);
    if (help) {
        if (rt.rank == 0) printf("%s%s%s", usage_text, mdc_moe_usage, mdc_device_options_help());
        mdc_runtime_finalize(&rt);
        return 0;
    }
    if ((st = validate(&o, rt.size, &cfg))) mdc_runtime_die(&rt, st, 1, 2);
    /* every output is checked before the first step: a bad path must not cost the run */
    /* none may be an input or another output; --save may be --resume's file (it replaces it whole) */
    const char *report = rt.opts.report_path[0] ? rt.opts.report_path : NULL;
    const char *outs[4] = {o.save, report, o.timeline, o.trace}, *out_opt[4] = {"--save", "--report", "--timeline", "--trace"};
    for (int k = 0; k < 4 && !st; k++) {
        if (!outs[k]) continue;
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
            mdc_runtime_die(&rt, mdc_fail(MDC_ERR_INVALID, "--data %s: vocabulary %u is larger than the model's %d (--vocab)",
                                          o.data, mdc_loader_vocab_size(ld), cfg.V), 1, 2);
    }
    mdc_trainer_config tc = {cfg, {o.tp, o.cp, o.ep, o.dp, o.pp}, o.sp, o.zero, o.prefetch,
                             (size_t)(o.bucket_mb * 1048576.0), mb, o.accum, T, o.replicas, 1, (float)o.dropout,
                             o.exact ? o.exact_block : 0, o.schedule, o.layout_n ? o.layout : NULL, o.vstages, o.cp_layout, o.cp_algo,
                             o.moe.o};
    if (o.check_coll) mdc_coll_set_check(1);
    if (o.check_coll && r == 0)
        printf("collective check: on; its messages (48 bytes per collective call and rank) count in the reports' "
               "measured bytes, not in their formulas\n");
    if ((st = mdc_trainer_create(&tr, rt.tr, rt.dev, &tc, (uint64_t)o.seed))) die(&rt, st, 1);
    if (r == 0 && o.check) { /* the serial model of the same global batch, on its own device */
        mdc_trainer_config sc = {cfg, {1, 1, 1, 1, 1}, 0, 0, 0, 0, B, 1, T, 0, 0, (float)o.dropout,
                                 o.exact ? o.exact_block : 0, NULL, NULL, 1, NULL, NULL, o.moe.o};
        if ((st = mdc_device_create_spec(&sdev, mdc_device_get_spec(rt.dev), mdc_device_get_energy_table(rt.dev), 1e6,
                                         MDC_EMULATE_OFF, 1, 0)) ||
            (st = mdc_trainer_create(&ser, NULL, sdev, &sc, (uint64_t)o.seed)))
            mdc_runtime_die(&rt, st, 0, 1);
    }
    mdc_train_state ts = {0, 0, (uint64_t)o.seed, 1, (uint64_t)B, 0};
    int step0 = 0;
    if (o.resume) {
        if ((st = mdc_train_load(&rt, tr, ser, &cfg, o.resume, &ts))) die(&rt, st, 1);
        /* the step must fit the int step counter, with --steps added */
        if ((st = mdc_train_first_step(o.resume, ts.step, o.steps, &step0))) die(&rt, st, 1);
        /* the seed keys the data stream and the dropout masks: the checkpoint's continues the run */
        int known = ts.seed_set || ts.seed != 0; /* older files wrote 0 for "none" */
        if (known && o.seed_given && ts.seed != (uint64_t)o.seed && !o.force_seed)
            mdc_runtime_die(&rt, mdc_fail(MDC_ERR_INVALID, "--seed %d differs from the seed %llu of the checkpoint %s: "
                                          "the run would not continue the same data and dropout masks (leave --seed "
                                          "out, or add --force-seed)", o.seed, (unsigned long long)ts.seed, o.resume),
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
        printf("memory: params %.1f MiB + grads %.1f + AdamW %.1f + activations %.1f = %.1f MiB on %s (per rank, "
               "before ZeRO sharding)\n", pb / 1048576.0, pb / 1048576.0, 2 * pb / 1048576.0, ab / 1048576.0,
               (4 * pb + ab) / 1048576.0, mdc_device_get_spec(rt.dev)->name);
        printf("data: %s%s\n", o.data ? o.data : "generated repeat task (period 2..8, 32 symbols)",
               o.resume ? " (resumed)" : "");
        if (o.exact) mdc_exact_print_blocks(&cfg, o.exact_block, stdout);
    }
    if (rt.size > 1) mdc_mesh_print(mdc_trainer_mesh(tr), stdout);
    /* the hook's step must be one this run takes (s below), or it would never fire */
    if (o.fail_rank >= 0 && (o.fail_step < step0 || o.fail_step - step0 >= o.steps)) {
        char run[64] = "none: --steps 0";
        if (o.steps > 0) snprintf(run, sizeof run, "%d..%d, counted from 0", step0, step0 + o.steps - 1);
        mdc_runtime_die(&rt, mdc_fail(MDC_ERR_INVALID, "--fail-at %d:%d: step %d is not one of this run's steps (%s)",
                                      o.fail_rank, o.fail_step, o.fail_step, run), 1, 2);
    }
    double t_start = mdc_wall_time(), tokens = 0, worst_loss = 0;
    float loss = 0, norm = 0;
    /* the device trace: for --trace, and for --timeline's picture of a run without a pipeline */
    int device_timeline = o.timeline && o.pp < 2;
    double last_from = 0; /* virtual time at the start of the last step */
    if ((o.trace || device_timeline) && (st = mdc_dev_trace_start(rt.dev))) mdc_runtime_die(&rt, st, 1, 1);
    unsigned long long run_id = 0; /* the dump's rank files carry rank 0's */
    if (o.dump_dir && (st = mdc_dump_run_id(rt.world, &run_id))) mdc_runtime_die(&rt, st, 0, 1);
    for (int s = step0; s < step0 + o.steps; s++) {
        if (s == step0 + o.steps - 1) {
            mdc_dev_counters c0;
            mdc_dev_get_counters(rt.dev, &c0);
            last_from = c0.now;
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
            if ((st = mdc_trainer_step(ser, gin, gtg, &o.opt, &sl, &sn))) mdc_runtime_die(&rt, st, 0, 1);
            double d = fabs((double)loss - sl);
            if (d > worst_loss) worst_loss = d;
        }
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
    if (r == 0)
        printf("trained %d steps, %.0f tokens in %.2f s (%.0f tokens/s), final loss %.4f\n", o.steps, tokens, wall,
               wall > 0 ? tokens / wall : 0, loss);
    int rc = 0;
    size_t P = mdc_gpt2_param_floats(&cfg);
    if (o.check) { /* every rank takes part in the gather */
        float *got = r == 0 ? calloc(P, sizeof(float)) : NULL, *want = r == 0 ? calloc(P, sizeof(float)) : NULL;
        if (r == 0 && (!got || !want)) mdc_runtime_die(&rt, mdc_fail(MDC_ERR_OOM_HOST, "check"), 0, 1);
        if ((st = mdc_trainer_gather(tr, got, NULL, NULL, 0))) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0 && (st = mdc_trainer_gather(ser, want, NULL, NULL, 0))) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0 && !mdc_train_compare(&cfg, got, want, worst_loss, o.exact)) rc = 1;
        free(got), free(want);
    }
    if (o.save) {
        ts.step = (uint64_t)(step0 + o.steps);
        ts.data_position = ld ? mdc_loader_position(ld) : ts.step;
        ts.data_sequences = ld ? mdc_loader_sequences(ld) : 0;
        if ((st = mdc_train_save(&rt, tr, &cfg, o.save, &ts))) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0) printf("saved %s (step %llu; the global tensors of every shard in one file)\n", o.save,
                           (unsigned long long)ts.step);
    }
    if (o.trace) { /* the steps' events (with --save also the checkpoint's gathering) */
        if ((st = mdc_train_write_trace(&rt, o.trace))) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0) printf("trace: %s (every rank's kernels, messages and collective calls; open it in Perfetto)\n", o.trace);
    }
    if (o.timeline) {
        char title[96];
        snprintf(title, sizeof title, "%d rank(s), tp %d cp %d ep %d dp %d", rt.size, o.tp, o.cp, o.ep, o.dp);
        st = device_timeline ? mdc_train_write_device_timeline(&rt, o.timeline, last_from, title)
                             : mdc_trainer_timeline(tr, o.timeline);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        if (r == 0) printf("timeline: %s (the last step's %s in virtual time)\n", o.timeline,
                           device_timeline ? "kernels and messages of every rank" : "schedule");
    }
    mdc_trainer_report(tr, stdout);
    fflush(stdout);
    if (r == 0 && rt.opts.report_path[0]) rt.report_schemes = mdc_trainer_report_json(tr);
    if ((st = mdc_runtime_report(&rt, stdout, tokens))) mdc_runtime_die(&rt, st, 0, 1);
    mdc_trainer_free(tr);
    mdc_trainer_free(ser);
    mdc_device_free(sdev);
    mdc_loader_free(ld);
    free(gin);
    mdc_runtime_finalize(&rt);
    return rc;
}
