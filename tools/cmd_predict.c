/* minidc predict: what one training step of a model costs on a datacenter computer.
 *
 * The run is `minidc train`'s, on its mesh, schedule, precision and recomputation, with the device
 * and the transport in their accounting-only ("dry") mode: every kernel charges its FLOPs and
 * bytes and computes nothing, every message carries its size and virtual times and no payload,
 * and memory is charged but not held (include/minidc/device.h, collectives/transport_dry.c). The
 * tensor- and data-parallel ranks do the same work at the same virtual times (a mixture of
 * experts routed balanced: mdc_moe_opts.balanced, the routing predict assumes),
 * so only their representatives run (tp 0, dp 0: one process per pipeline stage and
 * context-parallel rank); messages to the others are mirrored (--no-fold runs every rank).
 *
 * Two steps run; the second is the one predicted (the first allocates the optimizer's state), its
 * time and its memory peak (what setup held for a moment, a full fp32 copy before ZeRO shards
 * it, is not a step's).
 * The step time is the last rank's end of step 2 minus the last rank's end of step 1. The parts
 * are that last rank's: its clock split into compute- and memory-bound kernels, each traffic
 * class's exposed communication (mdc_traffic), the pipeline's bubble (waiting on pipeline
 * messages) and other waiting. --trace and --timeline show the predicted step. Without mpiexec, predict starts itself under mpiexec.mpich with
 * the processes it needs. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../device/platform.h"
#include "commands.h"
#include "minidc/kernels.h"
#include "minidc/runtime.h"
#include "predict_report.h"
#include "train_options.h"
#include "train_state.h"

static const char predict_usage[] =
    "usage: minidc predict [train's model, mesh, schedule, precision and recompute options] [options]\n"
    "  --gpus N            the GPUs of the run: --dp is N / (tp x cp x pp) unless given\n"
    "  --no-fold           run every rank (default: one per pipeline stage, the tp, dp and, with the\n"
    "                      zigzag layout, cp ranks folded onto it)\n"
    "  --json FILE         the prediction as JSON (step time, parts, MFU, memory, energy); --report FILE\n"
    "                      the same\n"
    "  --trace F / --timeline F.svg   train's, of the predicted step: a row per process that ran\n"
    "  (predict starts itself under mpiexec.mpich with the processes it needs; MINIDC_MPIEXEC names\n"
    "  another launcher)\n";

typedef struct {
    int fold;
    long gpus;
    const char *json;
} predict_options;

/* Takes predict's own options out of argv. */
static mdc_status take_own(predict_options *p, int *argc, char **argv) {
    int out = 1;
    p->fold = 1, p->gpus = 0, p->json = NULL;
    for (int i = 1; i < *argc; i++) {
        if (!strcmp(argv[i], "--no-fold")) {
            p->fold = 0;
        } else if (!strcmp(argv[i], "--gpus") || !strcmp(argv[i], "--json")) {
            if (i + 1 >= *argc) return mdc_fail(MDC_ERR_INVALID, "%s needs a value", argv[i]);
            if (argv[i][2] == 'j') {
                p->json = argv[++i];
                continue;
            }
            char *end = NULL;
            p->gpus = strtol(argv[++i], &end, 10);
            if (!end || *end || p->gpus < 1 || p->gpus > (1L << 24))
                return mdc_fail(MDC_ERR_INVALID, "--gpus %s: a count of GPUs from 1 to 2^24", argv[i]);
        } else {
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    *argc = out;
    return MDC_OK;
}

/* The options parsed as train parses them; --steps is predict's (2). */
static mdc_status parse(predict_options *p, mdc_train_options *o, int *argc, char **argv, int *help) {
    mdc_status st = take_own(p, argc, argv);
    if (!st) st = mdc_train_parse(o, *argc, argv, help);
    if (st || *help) return st;
    long other = (long)o->tp * o->cp * o->pp;
    if (o->dp < 0 && p->gpus) {
        if (p->gpus % other)
            return mdc_fail(MDC_ERR_INVALID, "--gpus %ld is not a multiple of tp %d x cp %d x pp %d", p->gpus, o->tp,
                            o->cp, o->pp);
        o->dp = (int)(p->gpus / other);
    }
    if (o->dp < 0) o->dp = 1;
    if (p->gpus && p->gpus != other * o->dp)
        return mdc_fail(MDC_ERR_INVALID, "--gpus %ld but tp %d x cp %d x dp %d x pp %d = %ld", p->gpus, o->tp, o->cp,
                        o->dp, o->pp, other * o->dp);
    const char *no[] = {o->data, o->save, o->resume, o->init, o->dump_dir};
    const char *nm[] = {"--data", "--save", "--resume", "--init", "--dump-dir"};
    for (int k = 0; k < 5; k++)
        if (no[k]) return mdc_fail(MDC_ERR_INVALID, "predict: %s: a prediction reads and writes no tensors", nm[k]);
    if (o->check || o->check_coll || o->replicas || o->fail_rank >= 0)
        return mdc_fail(MDC_ERR_INVALID, "predict: the checks of train (--check-*) need the tensors; leave them out");
    if (o->exact) return mdc_fail(MDC_ERR_INVALID, "predict: --exact changes the arithmetic, not the costs predicted");
    o->steps = 2;
    return MDC_OK;
}

static long long mesh_ranks(const mdc_train_options *o) { return (long long)o->tp * o->cp * o->dp * o->pp; }
/* The cp ranks are folded too where every one does the same work: the zigzag layout balances the
 * causal attention (rank r holds chunks r and 2N-1-r); the contiguous one gives later ranks more. */
static int fold_cp(const mdc_train_options *o) {
    return o->cp > 1 && (!o->cp_layout || !strcmp(o->cp_layout, "zigzag"));
}
static long long processes(const mdc_train_options *o, int fold) {
    return fold ? (long long)(fold_cp(o) ? 1 : o->cp) * o->pp : mesh_ranks(o);
}

/* --trace and --timeline of the predicted step (the second), gathered to process 0 over a
 * transport of their own: the run's is dry, its messages carry no payload. One row per process
 * that ran (with folding, one per pipeline stage, and cp rank with --cp-layout contiguous). */
static mdc_status write_outputs(mdc_runtime *rt, const mdc_train_options *o, double from) {
    mdc_transport *t = NULL;
    mdc_group *g = NULL;
    mdc_status st = mdc_transport_create(&t, NULL, NULL, rt->opts.gpus_per_node);
    if (!st) st = mdc_group_world(&g, t);
    if (!st) {
        mdc_runtime view = *rt;
        view.world = g, view.rank = mdc_group_rank(g), view.size = mdc_group_size(g);
        if (o->trace) st = mdc_train_write_trace(&view, o->trace);
        if (!st && o->timeline)
            st = mdc_train_write_device_timeline(
                &view, o->timeline, from,
                "minidc predict, a row per process that ran (folded: one per pipeline stage)");
        if (!st && view.rank == 0) {
            if (o->trace) printf("trace: %s (the predicted step's kernels, messages and collective calls)\n", o->trace);
            if (o->timeline)
                printf("timeline: %s (the predicted step in virtual time, a row per process)\n", o->timeline);
        }
    }
    mdc_group_free(g);
    mdc_transport_free(t);
    return st;
}

/* Not under a launcher and more than one process needed: run again under mpiexec. */
static void launch(int argc, char **argv, long long n, const mdc_train_options *o) {
    if (getenv("PMI_RANK") || getenv("PMI_SIZE") || getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK")) return;
    char self[4096], exe[PATH_MAX], count[32];
    /* the file itself: mpiexec's own /proc/self/exe would be mpiexec */
    if (mdc_plat_exe_path(self, sizeof self) || !realpath(self, exe)) return;
    const char *mpiexec = getenv("MINIDC_MPIEXEC") ? getenv("MINIDC_MPIEXEC") : "mpiexec.mpich";
    char **av = calloc((size_t)argc + 6, sizeof *av);
    if (!av) return;
    snprintf(count, sizeof count, "%lld", n);
    int k = 0;
    av[k++] = (char *)mpiexec, av[k++] = "-n", av[k++] = count, av[k++] = exe, av[k++] = "predict";
    for (int i = 1; i < argc; i++) av[k++] = argv[i];
    fprintf(stderr, "predict: %s -n %lld (one process per pipeline stage%s)\n", mpiexec, n,
            fold_cp(o) ? "; the cp ranks folded too" : " and context-parallel rank");
    fflush(stderr);
    execvp(mpiexec, av);
    fprintf(stderr, "minidc: predict: could not start %s (install mpich, or run it under mpiexec.mpich -n %lld)\n",
            mpiexec, n);
    exit(1);
}

int mdc_cmd_predict(int argc, char **argv) {
    { /* before MPI: how many processes the prediction needs */
        char **av = calloc((size_t)argc + 1, sizeof *av);
        if (!av) return 1;
        memcpy(av, argv, (size_t)argc * sizeof *av);
        int ac = argc, help = 0;
        mdc_device_options dopt; /* the device options are the runtime's: skip them here */
        mdc_device_options_default(&dopt);
        int n = 1;
        for (int i = 1; i < ac;) {
            int r = mdc_device_options_parse(&dopt, ac, av, &i);
            if (r == 0) av[n++] = av[i++];
            else if (r < 0) break;
        }
        ac = n, av[n] = NULL;
        predict_options p;
        mdc_train_options o;
        if (!parse(&p, &o, &ac, av, &help) && !help && processes(&o, p.fold) > 1)
            launch(argc, argv, processes(&o, p.fold), &o);
        free(av);
    }
    /* predict's device runs at the preset's achievable fractions unless --efficiency says */
    int given = 0;
    for (int i = 1; i < argc; i++) given |= !strcmp(argv[i], "--efficiency");
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args) return 1;
    memcpy(args, argv, (size_t)argc * sizeof *args);
    if (!given) args[argc++] = "--efficiency", args[argc++] = "achievable";
    argv = args;
    mdc_runtime rt;
    mdc_status st = mdc_runtime_init(&rt, &argc, &argv);
    if (st) mdc_runtime_die(&rt, st, 1, st == MDC_ERR_INVALID ? 2 : 1);
    predict_options p;
    mdc_train_options o;
    mdc_gpt2_config cfg;
    int help = 0;
    if ((st = parse(&p, &o, &argc, argv, &help))) mdc_runtime_die(&rt, st, 1, 2);
    if (help) {
        if (rt.rank == 0) printf("%s%s%s", predict_usage, mdc_train_usage, mdc_device_options_help());
        mdc_runtime_finalize(&rt);
        free(args);
        return 0;
    }
    long long n = mesh_ranks(&o), need = processes(&o, p.fold);
    if (n > (1 << 24)) mdc_runtime_die(&rt, mdc_fail(MDC_ERR_INVALID, "predict: %lld GPUs: at most 2^24", n), 1, 2);
    if ((st = mdc_train_validate(&o, (int)n, &cfg))) mdc_runtime_die(&rt, st, 1, 2);
    o.moe.o.balanced = cfg.E > 0; /* a mixture of experts routes by position: the data decides nothing */
    if (need != rt.size)
        mdc_runtime_die(
            &rt,
            mdc_fail(
                MDC_ERR_INVALID, "predict: this mesh needs %lld process(es)%s; %d run (mpiexec.mpich -n %lld)", need,
                p.fold ? (fold_cp(&o) ? " (one per pipeline stage)" : " (one per pipeline stage and cp rank)") : "",
                rt.size, need),
            1, 2);
    int dims[5] = {o.tp, o.cp, 1, o.dp, o.pp};
    mdc_dev_set_dry(rt.dev, 1);
    mdc_host_set_dry(1);
    unsigned folded = p.fold ? 1u << 0 | 1u << 3 | (fold_cp(&o) ? 1u << 1 : 0) : 0; /* tp, dp (and cp) */
    if ((st = mdc_transport_set_dry(rt.tr, 5, dims, folded))) mdc_runtime_die(&rt, st, 1, 1);
    mdc_dev_set_rank(rt.dev, mdc_transport_rank(rt.tr)); /* traces and messages name the mesh rank */
    mdc_group_free(rt.world);                            /* the world is the mesh's now */
    if ((st = mdc_group_world(&rt.world, rt.tr))) mdc_runtime_die(&rt, st, 1, 1);
    mdc_kernels_init();
    mdc_coll_prefer_nccl(); /* ring reduce-scatter and all-gather, as train; the all-reduce as NCCL picks */
    mdc_trainer_config tc = mdc_train_trainer_config(&o, &cfg);
    mdc_trainer *tr = NULL;
    if ((st = mdc_trainer_create(&tr, rt.tr, rt.dev, &tc, (uint64_t)o.seed))) mdc_runtime_die(&rt, st, 0, 1);
    int B = o.B, T = o.seq;
    int *gin = malloc(sizeof(int) * 2 * (size_t)B * T);
    if (!gin) mdc_runtime_die(&rt, mdc_fail(MDC_ERR_OOM_HOST, "batch buffers"), 0, 1);
    mdc_dev_counters at[3];
    mdc_energy en[3];
    mdc_dev_get_counters(rt.dev, &at[0]);
    mdc_dev_energy(rt.dev, &en[0]);
    double wall = mdc_wall_time();
    for (int s = 0; s < o.steps; s++) {
        float loss = 0, norm = 0;
        if (s == o.steps - 1) mdc_dev_mem_reset_peak(rt.dev); /* the predicted step's peak */
        if (s == o.steps - 1 && (o.trace || o.timeline) && (st = mdc_dev_trace_start(rt.dev)))
            mdc_runtime_die(&rt, st, 0, 1);
        mdc_train_generated_batch(gin, gin + (size_t)B * T, B, T, cfg.V, (uint64_t)o.seed, s);
        if ((st = mdc_trainer_step(tr, gin, gin + (size_t)B * T, &o.opt, &loss, &norm))) mdc_runtime_die(&rt, st, 0, 1);
        mdc_dev_get_counters(rt.dev, &at[s + 1]);
        mdc_dev_energy(rt.dev, &en[s + 1]);
    }
    wall = mdc_wall_time() - wall;
    const char *json = p.json ? p.json : rt.opts.report_path[0] ? rt.opts.report_path : NULL; /* --report: the same */
    mdc_predict_input in = {&o,
                            &cfg,
                            rt.dev,
                            at,
                            en,
                            wall,
                            p.fold,
                            (int)n,
                            json,
                            mdc_transport_fold_mismatch(rt.tr),
                            p.fold && fold_cp(&o),
                            (double)mdc_coll_replayed_calls()};
    st = mdc_predict_report(&rt, &in, stdout);
    if (!st && (o.trace || o.timeline)) st = write_outputs(&rt, &o, at[o.steps - 1].now);
    free(gin);
    mdc_trainer_free(tr);
    if (st) mdc_runtime_die(&rt, st, 0, 1);
    mdc_runtime_finalize(&rt);
    free(args);
    return 0;
}
