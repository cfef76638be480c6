/* The options of `minidc train` (tools/train_options.h): strict values, every combination the
 * meshes refuse named before any message, so every rank fails the same way. */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "minidc/cp.h"
#include "minidc/pp.h"
#include "minidc/weights.h"
#include "train_options.h"

const char mdc_train_usage[] =
    "usage: minidc train [options]            (one rank)\n"
    "       mpiexec.mpich -n N minidc train --dp D --tp T [--sp] [--zero Z] [options]   (N = D x T)\n"
    "  --config NAME       tiny (default) | small | gpt2 | llama-tiny | llama-gpt2 | qwen2-tiny |\n"
    "                      qwen3-tiny | mixtral-tiny | qwen3-moe-tiny | qwen2-moe-tiny, or a Llama /\n"
    "                      Qwen2 / Qwen3 / Mixtral / Qwen3-MoE / Qwen2-MoE config.json; sizes below\n"
    "                      override it\n"
    "  --init DIR          start from the weights of a Hugging Face directory (or a weights file);\n"
    "                      its config is the run's unless --config is given (then they must agree)\n"
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
    "                      the first (any mesh resumes any other's); --save DIR/ (a family's\n"
    "                      run): a Hugging Face directory (config.json, model.safetensors) with the\n"
    "                      checkpoint beside them (training_state.safetensors; --resume DIR/ reads it)\n"
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
    "  --etp N             expert tensor parallelism: each routed expert's gate/up (c_fc) column- and\n"
    "                      its down (c_proj) row-parallel over N consecutive tp ranks (N divides --tp;\n"
    "                      N = --tp the usual; 1: whole experts on every tp rank; docs/expert-parallel.md)\n"
    "  --zero Z            0 = DDP (default), 1, 2, 3 = ZeRO stage\n"
    "  --accum K           micro-batches per step (gradient accumulation, default 1);\n"
    "                      --batch must be divisible by dp x K\n"
    "  --bucket-mb X       gradient bucket size in MiB (default: min(25, parameter MiB / 4))\n"
    "  --prefetch          ZeRO-3: gather the next unit on the comm stream while this one computes\n"
    "  --check-collectives every collective call is compared across its group first (call number,\n"
    "                      collective, count, dtype, op, root); a rank calling another is named\n"
    "  --check-serial      rank 0 also trains the serial model on the same global batch and checks\n"
    "                      the first step's loss and gradients, every parameter against AdamW's\n"
    "                      reach and the later losses (docs/oracle.md; exact mode: every bit);\n"
    "                      exit 1 beyond the limits\n"
    "  --dropout P         dropout on the attention probabilities and both residual branches\n"
    "                      (default 0); masks keyed by global element index: every mesh drops\n"
    "                      exactly what serial drops\n"
    "  --attention K       the attention kernel: auto (default: tiled, FlashAttention's online softmax,\n"
    "                      above 256 tokens) | materialized (the T x T probabilities kept, as Megatron\n"
    "                      before FlashAttention) | tiled\n"
    "  --recompute R       activation recomputation: none (default) | selective (the attention's\n"
    "                      T x T probabilities, Korthikanti et al. 2022) | full (a block keeps only\n"
    "                      its input; its forward runs again in the backward); memory and FLOPs\n"
    "                      change, never a bit of the result (docs/recompute.md)\n"
    "  --precision P       fp32 (default) | bf16 | fp16: mixed precision as Megatron-LM's --bf16 /\n"
    "                      --fp16 (16-bit compute copy of the weights and activations, fp32 master\n"
    "                      weights, gradients and AdamW; fp16 with dynamic loss scaling from 2^16;\n"
    "                      docs/precision.md)\n"
    "  --grad-reduce D     fp32 (default) | bf16: the data-parallel gradient reductions move and sum\n"
    "                      bf16 (each bucket rounded, summed as NCCL sums bf16, widened back into\n"
    "                      the fp32 gradients); not with --exact or --ep\n"
    "  --exact             exact mode: every mesh gives the serial run's bits (docs/exactness.md)\n"
    "  --exact-block N     exact mode's token block (implies --exact); default: the largest\n"
    "                      divisor up to 32 of --seq / gcd(--seq, 8), which divides every split\n"
    "                      of the sequence in 2, 4 or 8 (tp with --sp, cp chunks); it must divide\n"
    "                      the positions each rank holds (minidc explain exact --meshes)\n"
    "  --check-replicas    after every step, compare bit for bit every replica: the tp-replicated\n"
    "                      tensors (LayerNorms, wpe, row-parallel biases) across tp ranks, every\n"
    "                      tensor across the dp x cp x ep replicas (not ZeRO-3's shards), and the\n"
    "                      tied wte on the first and last pipeline stage\n"
    "  --fail-at RANK:STEP test hook: that rank fails before that step (peers must exit);\n"
    "                      STEP counts from 0 and must be one of this run's steps; RANK:STEP:stop\n"
    "                      or :kill stops or kills the process instead (peers must name it)\n"
    "threads: one rank chooses its OpenMP thread count by timing its steps (other programs may\n"
    "  hold cores; docs/model.md); OMP_NUM_THREADS or MINIDC_TUNE_THREADS=0 fix it, and\n"
    "  MINIDC_VERBOSE=1 says what it chose. Several ranks take their share of the cores.\n";

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

static mdc_status parse_recompute(const char *a, const char *v, int *out) {
    static const char *const names[] = {"none", "selective", "full"};
    for (int i = 0; v && i < 3; i++)
        if (!strcmp(v, names[i])) return *out = i, MDC_OK;
    return mdc_fail(MDC_ERR_INVALID, "%s '%s': none, selective or full", a, v ? v : "");
}

static mdc_status parse_attention(const char *a, const char *v, int *out) {
    static const char *const names[] = {"auto", "materialized", "tiled"};
    for (int i = 0; v && i < 3; i++)
        if (!strcmp(v, names[i])) return *out = i, MDC_OK;
    return mdc_fail(MDC_ERR_INVALID, "%s '%s': auto, materialized or tiled", a, v ? v : "");
}

mdc_status mdc_train_parse(mdc_train_options *o, int argc, char **argv, int *help) {
    memset(o, 0, sizeof *o);
    o->config = NULL, o->steps = 100, o->seed = 1, o->dp = -1, o->tp = 1, o->pp = 1, o->cp = 1, o->ep = 1, o->etp = 1;
    o->accum = 1, o->fail_rank = -1;
    mdc_moe_cli_default(&o->moe);
    mdc_adamw_config_default(&o->opt);
    o->opt.lr = 1e-3f;
    *help = 0;
    static const struct {
        const char *name;
        size_t off;
    } flags[] = {
        {"--quiet", offsetof(mdc_train_options, quiet)},
        {"--check-serial", offsetof(mdc_train_options, check)},
        {"--prefetch", offsetof(mdc_train_options, prefetch)},
        {"--sp", offsetof(mdc_train_options, sp)},
        {"--check-replicas", offsetof(mdc_train_options, replicas)},
        {"--force-seed", offsetof(mdc_train_options, force_seed)},
        {"--exact", offsetof(mdc_train_options, exact)},
        {"--check-collectives", offsetof(mdc_train_options, check_coll)},
    };
    static const struct {
        const char *name;
        size_t off;
        int lo;
    } counts[] = {
        /* a size of 0 is an error, never "the default": leave the option out for that */
        {"--vocab", offsetof(mdc_train_options, V), 1},
        {"--ctx", offsetof(mdc_train_options, T), 1},
        {"--layers", offsetof(mdc_train_options, L), 1},
        {"--heads", offsetof(mdc_train_options, H), 1},
        {"--channels", offsetof(mdc_train_options, C), 1},
        {"--batch", offsetof(mdc_train_options, B), 1},
        {"--seq", offsetof(mdc_train_options, seq), 1},
        {"--steps", offsetof(mdc_train_options, steps), 0},
        {"--seed", offsetof(mdc_train_options, seed), 0},
        {"--dp", offsetof(mdc_train_options, dp), 1},
        {"--tp", offsetof(mdc_train_options, tp), 1},
        {"--pp", offsetof(mdc_train_options, pp), 1},
        {"--cp", offsetof(mdc_train_options, cp), 1},
        {"--ep", offsetof(mdc_train_options, ep), 1},
        {"--etp", offsetof(mdc_train_options, etp), 1},
        {"--accum", offsetof(mdc_train_options, accum), 1},
        {"--zero", offsetof(mdc_train_options, zero), INT_MIN},
        {"--exact-block", offsetof(mdc_train_options, exact_block), 1},
        {"--microbatches", offsetof(mdc_train_options, microbatches), 1},
        {"--virtual-stages", offsetof(mdc_train_options, vstages), 1},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        mdc_status st = MDC_OK;
        int done = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help = 1;
            return MDC_OK;
        }
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
        if (done)
            ;
        else if (!strcmp(a, "--config")) o->config = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--save")) o->save = v;
        else if (!strcmp(a, "--resume")) o->resume = v;
        else if (!strcmp(a, "--init")) o->init = v;
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
        else if (!strcmp(a, "--recompute")) st = parse_recompute(a, v, &o->recompute), o->recompute_set = 1;
        else if (!strcmp(a, "--attention")) st = parse_attention(a, v, &o->attention);
        else if (!strcmp(a, "--precision")) st = mdc_parse_precision(a, v, &o->precision);
        else if (!strcmp(a, "--grad-reduce")) {
            st = mdc_parse_precision(a, v, &o->grad_reduce);
            if (!st && o->grad_reduce == MDC_PRECISION_FP16)
                st = mdc_fail(MDC_ERR_INVALID, "--grad-reduce 'fp16': fp32 or bf16");
        } else if (!strcmp(a, "--lr")) st = mdc_parse_float(a, v, &o->opt.lr);
        else if (!strcmp(a, "--weight-decay")) st = mdc_parse_float(a, v, &o->opt.weight_decay);
        else if (!strcmp(a, "--grad-clip")) st = mdc_parse_float(a, v, &o->opt.grad_clip);
        else if (!strcmp(a, "--fail-at")) st = parse_fail_at(a, v, &o->fail_rank, &o->fail_step, &o->fail_how);
        else return mdc_fail(MDC_ERR_INVALID, "unknown option '%s' (minidc train --help)", a);
        if (st) return st;
        if (!v) return mdc_fail(MDC_ERR_INVALID, "%s needs a value", a);
        i++;
    }
    return MDC_OK;
}

mdc_status mdc_train_validate(mdc_train_options *o, int nranks, mdc_gpt2_config *cfg) {
    int defB = 8;
    mdc_status st;
    if (o->config && access(o->config, R_OK) == 0) st = mdc_gpt2_config_from_json(o->config, cfg); /* a config.json */
    else if (!o->config && o->init) { /* the directory's (or file's) own config */ mdc_tensorfile *tf = NULL;
        st = mdc_gpt2_read_weights(o->init, o->H, &tf, cfg);
        mdc_tensorfile_free(tf);
    } else st = mdc_gpt2_config_named(o->config ? o->config : "tiny", cfg, &defB);
    if (st) return st;
    if (o->V) cfg->V = o->V, cfg->Vp = 0;
    if (o->T) cfg->T = o->T;
    if (o->L) cfg->L = o->L;
    if (o->H) cfg->H = o->H;
    if (o->C) cfg->C = o->C;
    mdc_moe_cli_apply(&o->moe, cfg);
    cfg->attention = o->attention;
    if ((st = mdc_gpt2_config_check(cfg))) return st;
    cfg->Vp = mdc_gpt2_padded_vocab_tp(cfg->V, o->tp); /* every tp shards the vocabulary */
    if (!o->B) o->B = defB;
    if (!o->seq) o->seq = cfg->T;
    long long other = (long long)o->tp * o->pp * o->cp; /* the ep ranks are data-parallel ranks */
    if (o->dp < 0) o->dp = nranks % other == 0 && nranks / other > 0 ? (int)(nranks / other) : 1;
    if (other * o->dp != nranks)
        return mdc_fail(MDC_ERR_INVALID,
                        "--dp %d x --tp %d x --pp %d x --cp %d = %lld rank(s), but the job has "
                        "%d: run mpiexec.mpich -n %lld",
                        o->dp, o->tp, o->pp, o->cp, other * o->dp, nranks, other * o->dp);
    if (o->ep > 1 && o->dp % o->ep)
        return mdc_fail(MDC_ERR_INVALID,
                        "--ep %d does not divide --dp %d: the ep ranks are data-parallel ranks "
                        "(Megatron's folding), each holding E/ep experts",
                        o->ep, o->dp);
    if (o->etp > 1 && o->tp % o->etp)
        return mdc_fail(MDC_ERR_INVALID,
                        "--etp %d does not divide --tp %d: an expert is split over etp consecutive tp ranks (etp "
                        "divides tp; --etp %d is the usual choice)",
                        o->etp, o->tp, o->tp);
    if (o->etp > 1 && !cfg->E)
        return mdc_fail(MDC_ERR_INVALID, "--etp %d: expert tensor parallelism needs a mixture of experts (--experts)",
                        o->etp);
    if (o->zero < 0 || o->zero > 3) return mdc_fail(MDC_ERR_INVALID, "--zero %d: must be 0 (DDP), 1, 2 or 3", o->zero);
    if (o->prefetch && o->zero != 3)
        return mdc_fail(MDC_ERR_INVALID,
                        "--prefetch is for --zero 3 (the stage that gathers parameters), not --zero %d", o->zero);
    if (o->sp && o->tp < 2)
        return mdc_fail(MDC_ERR_INVALID, "--sp needs --tp 2 or more (it splits the sequence over tp)");
    if (o->B <= 0) return mdc_fail(MDC_ERR_INVALID, "--batch %d must be positive", o->B);
    long long parts = (long long)o->dp * o->accum; /* both up to INT_MAX: 64 bits hold the product */
    if (o->B % parts)
        return mdc_fail(MDC_ERR_INVALID,
                        "--batch %d (global, in sequences) is not divisible by --dp %d x --accum %d = %lld: "
                        "every rank must get the same number of rows",
                        o->B, o->dp, o->accum, parts);
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
            return mdc_fail(MDC_ERR_INVALID,
                            "--microbatches %d and --accum %d: a pipeline's micro-batches are the "
                            "accumulation; give one of them",
                            o->microbatches, o->accum);
        if (o->microbatches) o->accum = o->microbatches;
        if (o->pp * v > cfg->L)
            return mdc_fail(MDC_ERR_INVALID, "--pp %d%s: more %sstages than the model's %d layers (--layers)", o->pp,
                            v > 1 ? " x --virtual-stages" : "", v > 1 ? "virtual " : "", cfg->L);
        if (o->layout_n) {
            int sum = 0;
            for (int i = 0; i < o->layout_n; i++) sum += o->layout[i];
            if (o->layout_n != o->pp * v || sum != cfg->L)
                return mdc_fail(MDC_ERR_INVALID,
                                "--pp-layout: %d stage(s) of %d layers in all, but --pp %d%s and %d "
                                "layers",
                                o->layout_n, sum, o->pp, v > 1 ? " x --virtual-stages" : "", cfg->L);
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
        return mdc_fail(MDC_ERR_INVALID,
                        "--cp-layout and --cp-algo arrange context parallelism: they need --cp 2 or more");
    if (o->cp > 1 && (st = mdc_cp_check(o->cp, o->seq, cfg->H % o->tp ? cfg->H : cfg->H / o->tp,
                                        mdc_gpt2_kv_heads_local(cfg, o->tp), o->cp_layout, o->cp_algo)))
        return st;
    int chunk = o->seq / (o->cp * (o->cp_layout && !strcmp(o->cp_layout, "contiguous") ? 1 : 2));
    if (o->cp > 1 && o->exact && chunk % o->exact_block) {
        int b = o->exact_block < chunk ? o->exact_block : chunk;
        while (chunk % b) b--;
        return mdc_fail(MDC_ERR_INVALID,
                        "--exact-block %d does not divide the %d positions of a context-parallel chunk "
                        "(--seq %d over --cp %d%s); use --exact-block %d (or another divisor of %d) on every mesh you "
                        "compare",
                        o->exact_block, chunk, o->seq, o->cp, chunk * o->cp == o->seq ? "" : " x 2 zigzag chunks", b,
                        chunk);
    }
    mdc_gpt2_part part = mdc_gpt2_part_serial(cfg);
    part.tp = o->tp, part.sp = o->sp, part.etp = o->etp;
    return mdc_gpt2_part_check(&part, cfg, o->seq / o->cp);
}

mdc_trainer_config mdc_train_trainer_config(const mdc_train_options *o, const mdc_gpt2_config *cfg) {
    mdc_trainer_config tc = {*cfg,
                             {o->tp, o->cp, o->ep, o->dp, o->pp},
                             o->sp,
                             o->zero,
                             o->prefetch,
                             (size_t)(o->bucket_mb * 1048576.0),
                             o->B / o->dp / o->accum,
                             o->accum,
                             o->seq,
                             o->replicas,
                             1,
                             (float)o->dropout,
                             o->exact ? o->exact_block : 0,
                             o->schedule,
                             o->layout_n ? o->layout : NULL,
                             o->vstages,
                             o->cp_layout,
                             o->cp_algo,
                             o->moe.o,
                             o->etp,
                             o->recompute,
                             o->precision,
                             o->grad_reduce};
    return tc;
}
