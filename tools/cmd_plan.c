/* minidc plan: which mesh should a model use on a datacenter computer?
 *
 * Sweeps the meshes of --gpus GPUs (tp within a node, cp, pp, interleaved virtual stages, the
 * micro-batch size, ep for a mixture of experts, which predict routes balanced; dp takes the
 * rest), checks each with train's own validation, and predicts each that is valid with
 * `minidc predict` (the same schedule code, dry and folded). Data-parallel
 * meshes take ZeRO-1 (Megatron's distributed optimizer), else 2, else 3, the least that fits
 * (DDP with expert parallelism), unless --zero says; recomputation is the least of none,
 * selective, full whose prediction fits in HBM (each is faster than the next), unless --recompute
 * says. Prints the --top fastest with their parts and memory.
 *
 * A prediction's cost grows with its micro-batches, and a step is affine in them once the
 * pipeline's warm-up is covered (every micro-batch does the same work at the same place in the
 * schedule; the warm-up, the drain, the gradient reduction and the optimizer are the constant).
 * So each mesh is predicted at m1 = min(m, pp v) and m2 = min(m, 2 m1) micro-batches and the
 * step, its parts and its FLOPs are extended linearly to the m of the global batch; the memory
 * peak is m1's (1F1B holds at most pp micro-batches' activations, the interleaved warm-up
 * pp (v + 1) - 2 chunks', both reached within pp v micro-batches).
 * tests/cli/predict_cli.sh checks the extension against a prediction at the full m. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../device/platform.h"
#include "commands.h"
#include "minidc/runtime.h"
#include "train_options.h"

static const char plan_usage[] =
    "usage: minidc plan [model options] --gpus N --batch B [--seq S] [device options] [options]\n"
    "  --gpus N            GPUs of the run (required); --batch B global sequences per step (required)\n"
    "  --top K             print the K fastest meshes (default 10)\n"
    "  --tp L --cp L --pp L --vstages L --mbs L --ep L   the values swept, comma lists (default: tp 1 2\n"
    "                      4 8 up to --gpus-per-node, cp 1 (1 2 4 from 16384 tokens), pp 1 2 4 8 16 32\n"
    "                      64, vstages 1 2, micro-batch size 1 2 4, ep 1 2 4 8 for a mixture of experts)\n"
    "  --zero Z            ZeRO stage of data-parallel meshes (default: 1, else 2, else 3, the least\n"
    "                      that fits; DDP under expert parallelism)\n"
    "  --recompute R       none | selective | full (default: the least that fits)\n"
    "  --precision P       bf16 (default) | fp16 | fp32\n"
    "  model options: train's (--config FILE or NAME, --layers, --heads, --channels, --vocab, --ctx,\n"
    "  --attention, --dropout); device options: --device, --device-file, --gpus-per-node, --efficiency\n";

typedef struct {
    int tp, cp, pp, v, dp, mbs, m, zero, rc, ep; /* rc: 0 none, 1 selective, 2 full */
    double step, mfu, peak, acts, cap, parts[8];
    int ok;
} plan_row;

enum { NPART = 7, NLIST = 6, MAX_ARGS = 400 };
static const char *part_key[NPART] = {"compute-bound kernels",
                                      "memory-bound kernels",
                                      "tp communication exposed",
                                      "ep communication exposed",
                                      "dp communication exposed",
                                      "pp communication exposed",
                                      "pipeline bubble (waiting on a stage)"};
static const char *part_col[NPART] = {"compute", "memory", "tp comm", "ep comm", "dp comm", "pp comm", "bubble"};
static const char *rc_name[3] = {"none", "selective", "full"};

/* "1,2,4" into list (at most 16 values); 0 on success. */
static int parse_list(const char *s, int *list, int *n) {
    *n = 0;
    while (*s && *n < 16) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20) return -1;
        list[(*n)++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return *n ? 0 : -1;
}

static double json_num(const char *text, const char *key) {
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(text, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* Mesh r's options at m micro-batches appended to av from k (val holds their numbers): what
 * validation checks and what a prediction runs. Returns the new count. */
static int mesh_args(const plan_row *r, int m, char **av, int k, char val[9][16]) {
    int vals[] = {r->tp, r->cp, r->pp, r->dp, m * r->mbs * r->dp, m, r->zero, r->ep};
    const char *names[] = {"--tp", "--cp", "--pp", "--dp", "--batch", "--microbatches", "--zero", "--ep"};
    for (int i = 0; i < 8; i++)
        snprintf(val[i], sizeof val[i], "%d", vals[i]), av[k++] = (char *)names[i], av[k++] = val[i];
    if (r->tp > 1) av[k++] = "--sp";
    if (r->v > 1) {
        snprintf(val[8], sizeof val[8], "%d", r->v);
        av[k++] = "--schedule", av[k++] = "interleaved", av[k++] = "--virtual-stages", av[k++] = val[8];
    }
    return k;
}

/* The last two lines of the failed prediction's output, to stderr. */
static void show_log(const char *tmp) {
    char path[PATH_MAX], line[2][512] = {"", ""};
    snprintf(path, sizeof path, "%s/p.log", tmp);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line[n % 2], sizeof line[0], f)) n++;
    if (f) fprintf(stderr, "%s%s", line[n % 2], line[(n + 1) % 2]), fclose(f);
}

/* The scratch directory and what the predictions left in it. */
static void remove_tmp(const char *tmp) {
    char path[PATH_MAX];
    const char *files[] = {"p.json", "p.log"};
    for (int i = 0; i < 2; i++) snprintf(path, sizeof path, "%s/%s", tmp, files[i]), remove(path);
    rmdir(tmp);
}

/* One prediction of r at m micro-batches into out (step, parts, peak, mfu); 0 when it ran. */
static int predict(const char *exe, int nbase, char **base, plan_row *r, int m, plan_row *out, const char *tmp) {
    char a[9][16], json[PATH_MAX];
    snprintf(json, sizeof json, "%s/p.json", tmp);
    char *av[MAX_ARGS + 32];
    int k = 0;
    av[k++] = (char *)exe, av[k++] = "predict";
    for (int i = 0; i < nbase; i++) av[k++] = base[i];
    k = mesh_args(r, m, av, k, a);
    av[k++] = "--recompute", av[k++] = (char *)rc_name[r->rc];
    av[k++] = "--json", av[k++] = json, av[k] = NULL;
    remove(json);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char log[PATH_MAX];
        snprintf(log, sizeof log, "%s/p.log", tmp);
        if (!freopen("/dev/null", "r", stdin) || !freopen(log, "w", stdout) || !freopen(log, "a", stderr)) _exit(127);
        execv(exe, av);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) return -1;
    FILE *f = fopen(json, "r");
    if (!f) return -1;
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    *out = *r;
    out->step = json_num(text, "step_s"), out->mfu = json_num(text, "mfu");
    out->peak = json_num(text, "total"), out->cap = json_num(text, "hbm_capacity_bytes");
    out->acts = json_num(text, "activations");
    for (int i = 0; i < NPART; i++) out->parts[i] = json_num(text, part_key[i]) > 0 ? json_num(text, part_key[i]) : 0;
    return out->step > 0 ? 0 : -1;
}

/* r at the global batch's m micro-batches: predicted at m1 and m2 and extended (see the top). */
static int predict_mesh(const char *exe, int nbase, char **base, plan_row *r, const char *tmp) {
    int m1 = r->pp * r->v < r->m ? r->pp * r->v : r->m, m2 = 2 * m1 < r->m ? 2 * m1 : r->m;
    plan_row a, b;
    if (predict(exe, nbase, base, r, m1, &a, tmp)) return -1;
    double flops1 = a.mfu * a.step / (m1 * r->mbs); /* per sequence, times the peak and the GPUs */
    *r = a, r->m = a.m;
    if (m1 < r->m) {
        if (a.peak > a.cap || predict(exe, nbase, base, r, m2, &b, tmp)) return a.peak > a.cap ? 0 : -1;
        double k = (double)(r->m - m1) / (m2 - m1);
        r->step = a.step + k * (b.step - a.step);
        for (int i = 0; i < NPART; i++) r->parts[i] = a.parts[i] + k * (b.parts[i] - a.parts[i]);
    }
    r->mfu = flops1 * r->m * r->mbs / r->step;
    return 0;
}

/* The mesh's fastest (ZeRO stage, recomputation) that fits: the least stage, and in it the least
 * recomputation, whose prediction fits (a later one is never faster; ZeRO-2 and 3 only where the
 * mesh is data-parallel without expert parallelism, and only when ZeRO-1 does not fit). With none
 * fitting, r is the last prediction that ran (ok 0). */
static void fit_mesh(const char *exe, int nbase, char **base, plan_row *r, int rc, int zero, const char *tmp) {
    int z0 = zero >= 0 ? zero : r->zero, z1 = zero >= 0 || r->zero == 0 ? z0 : 3;
    for (int z = z0; z <= z1; z++)
        for (int k = rc >= 0 ? rc : 0; k <= (rc >= 0 ? rc : 2); k++) {
            plan_row t = *r;
            t.zero = z, t.rc = k;
            if (predict_mesh(exe, nbase, base, &t, tmp)) { /* train refuses this combination: the next stage */
                fprintf(stderr, "plan: tp %d cp %d pp %d v %d dp %d ep %d mbs %d zero %d: predict failed:\n", r->tp,
                        r->cp, r->pp, r->v, r->dp, r->ep, r->mbs, z);
                show_log(tmp);
                break;
            }
            *r = t;
            r->ok = r->peak <= r->cap;
            if (r->ok) return;
            if (r->peak - r->acts > r->cap) break; /* recomputation cannot make it fit: the next stage */
        }
}

static int row_cmp(const void *x, const void *y) {
    const plan_row *a = x, *b = y;
    return a->ok != b->ok ? b->ok - a->ok : (a->step > b->step) - (a->step < b->step);
}

/* 1: train's options parse and validate for mesh r (the model's sizes from targs); 0: not a
 * mesh of this model; -1: the options themselves are wrong (said). */
static int valid(const plan_row *r, int ntargs, char **targs, mdc_gpt2_config *cfg) {
    char val[9][16], *av[MAX_ARGS + 32];
    int k = 0;
    for (int i = 0; i < ntargs; i++) av[k++] = targs[i];
    k = mesh_args(r, r->m, av, k, val);
    av[k] = NULL;
    mdc_train_options o;
    int help = 0;
    if (mdc_train_parse(&o, k, av, &help)) return fprintf(stderr, "minidc: plan: %s\n", mdc_detail()), -1;
    if (mdc_train_validate(&o, r->tp * r->cp * r->pp * r->dp, cfg)) return 0;
    return r->ep == 1 || (cfg->E > 0 && cfg->E % r->ep == 0); /* expert parallelism needs experts to split */
}

/* The model's experts (0: dense), from train's options alone on one rank. */
static int model_experts(int ntargs, char **targs) {
    mdc_train_options o;
    mdc_gpt2_config cfg = {0};
    int help = 0;
    if (mdc_train_parse(&o, ntargs, targs, &help)) return 0;
    o.dp = o.tp = o.pp = o.cp = o.ep = o.etp = 1, o.B = 1;
    return mdc_train_validate(&o, 1, &cfg) ? 0 : cfg.E;
}

int mdc_cmd_plan(int argc, char **argv) {
    int lists[NLIST][16], nl[NLIST] = {0}, top = 10, zero = -1, rc = -1, gpn = 8;
    long gpus = 0, batch = 0;
    const char *lname[NLIST] = {"--tp", "--cp", "--pp", "--vstages", "--mbs", "--ep"};
    char *base[MAX_ARGS + 4], *targs[MAX_ARGS + 4];
    int nbase = 0, prec = 0, seq = 0;
    if (argc > MAX_ARGS) return fprintf(stderr, "minidc: plan: %d arguments: at most %d\n", argc, MAX_ARGS), 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int li = -1;
        for (int k = 0; k < NLIST; k++) li = strcmp(a, lname[k]) ? li : k;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("%s", plan_usage);
            return 0;
        }
        int takes = li >= 0 || !strcmp(a, "--gpus") || !strcmp(a, "--batch") || !strcmp(a, "--top") ||
                    !strcmp(a, "--zero") || !strcmp(a, "--recompute");
        if (takes && !v) return fprintf(stderr, "minidc: plan: %s needs a value\n", a), 2;
        if (li >= 0) {
            if (parse_list(v, lists[li], &nl[li]))
                return fprintf(stderr, "minidc: plan: %s %s: a comma list of positive counts\n", a, v), 2;
        } else if (!strcmp(a, "--gpus") || !strcmp(a, "--batch") || !strcmp(a, "--top") || !strcmp(a, "--zero")) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < (a[2] == 'z' ? 0 : 1) || x > (a[2] == 'z' ? 3 : 1L << 24))
                return fprintf(stderr, "minidc: plan: %s %s: %s\n", a, v,
                               a[2] == 'z' ? "a ZeRO stage 0 to 3" : "a positive count"),
                       2;
            if (a[2] == 'g') gpus = x;
            else if (a[2] == 'b') batch = x;
            else if (a[2] == 't') top = (int)x;
            else zero = (int)x;
        } else if (!strcmp(a, "--recompute")) {
            for (int k = 0; k < 3; k++) rc = strcmp(v, rc_name[k]) ? rc : k;
            if (rc < 0) return fprintf(stderr, "minidc: plan: --recompute %s: none, selective or full\n", v), 2;
        } else {
            if (!strcmp(a, "--gpus-per-node") && v) gpn = atoi(v);
            if (!strcmp(a, "--precision")) prec = 1;
            if (!strcmp(a, "--seq") && v) seq = atoi(v);
            if (!strcmp(a, "--dp") || !strcmp(a, "--microbatches") || !strcmp(a, "--accum") || !strcmp(a, "--sp") ||
                !strcmp(a, "--schedule") || !strcmp(a, "--virtual-stages") || !strcmp(a, "--json"))
                return fprintf(stderr,
                               "minidc: plan: %s: the plan sweeps the mesh; constrain it with --tp, --cp, "
                               "--pp, --vstages, --mbs lists\n",
                               a),
                       2;
            base[nbase++] = argv[i];
            continue;
        }
        i++;
    }
    if (!gpus || !batch) return fprintf(stderr, "minidc: plan: --gpus N and --batch B are required\n%s", plan_usage), 2;
    if (!prec) base[nbase++] = "--precision", base[nbase++] = "bf16";
    if (gpn < 1) gpn = 8;
    int defs[NLIST][8] = {{1, 2, 4, 8, 16, 32, 64}, {1}, {1, 2, 4, 8, 16, 32, 64}, {1, 2}, {1, 2, 4}, {1, 2, 4, 8}};
    int ndef[NLIST] = {7, 1, 7, 2, 3, 4};
    if (seq >= 16384) defs[1][1] = 2, defs[1][2] = 4, ndef[1] = 3;
    int ep_given = nl[5] > 0;
    for (int k = 0; k < NLIST; k++)
        if (!nl[k]) memcpy(lists[k], defs[k], sizeof defs[k]), nl[k] = ndef[k];
    char self[4096], exe[PATH_MAX], tmp[] = "/tmp/minidc-plan-XXXXXX";
    if (mdc_plat_exe_path(self, sizeof self) || !realpath(self, exe) || !mkdtemp(tmp))
        return fprintf(stderr, "minidc: plan: could not find this program or make a temporary directory\n"), 1;

    /* train's options without the device's (the runtime parses those), for the validation */
    int ntargs = 1;
    mdc_device_options dopt;
    mdc_device_options_default(&dopt);
    targs[0] = "plan";
    for (int i = 0; i < nbase; i++) targs[ntargs++] = base[i];
    int kept = 1;
    for (int i = 1; i < ntargs;) {
        int r = mdc_device_options_parse(&dopt, ntargs, targs, &i);
        if (r == 0) targs[kept++] = targs[i++];
        else if (r < 0) return fprintf(stderr, "minidc: plan: %s\n", mdc_detail()), 2;
    }
    ntargs = kept;
    if (!ep_given && !model_experts(ntargs, targs)) nl[5] = 1; /* a dense model: no expert parallelism */

    /* the candidates train's validation accepts: every combination of the lists (an odometer) */
    int cap = 4096, n = 0, considered = 0, at[NLIST] = {0};
    mdc_gpt2_config cfg = {0};
    plan_row *rows = calloc((size_t)cap, sizeof *rows);
    if (!rows) return 1;
    for (int done = 0; !done && n < cap;) {
        plan_row r = {.tp = lists[0][at[0]],
                      .cp = lists[1][at[1]],
                      .pp = lists[2][at[2]],
                      .v = lists[3][at[3]],
                      .mbs = lists[4][at[4]],
                      .ep = lists[5][at[5]]};
        for (int k = 0; k < NLIST && !(done = k == NLIST - 1 && at[k] + 1 == nl[k]); k++) /* the next one */
            if (++at[k] < nl[k]) break;
            else at[k] = 0;
        long other = (long)r.tp * r.cp * r.pp;
        if (r.tp > gpn || gpus % other || (r.pp == 1 && r.v > 1)) continue;
        r.dp = (int)(gpus / other);
        if (batch % ((long)r.dp * r.mbs) || r.dp % r.ep) continue;
        r.m = (int)(batch / ((long)r.dp * r.mbs));
        r.zero = zero >= 0 ? zero : r.dp > 1 && r.ep == 1; /* expert parallelism reduces as DDP */
        r.rc = rc >= 0 ? rc : 0;
        considered++;
        int v = valid(&r, ntargs, targs, &cfg);
        if (v < 0) return remove_tmp(tmp), free(rows), 2;
        if (v) rows[n++] = r;
    }
    if (!n) {
        fprintf(stderr, "minidc: plan: none of the %d meshes of %ld GPUs is valid for this model and batch", considered,
                gpus);
        fprintf(stderr, " (--batch %ld, lists: see minidc plan --help)\n", batch);
        return remove_tmp(tmp), free(rows), 1;
    }
    fprintf(stderr, "plan: %d of %d meshes valid; predicting each (minidc predict, dry and folded)\n", n, considered);
    double wall = mdc_wall_time();
    int fit = 0;
    for (int i = 0; i < n; i++) {
        plan_row *r = &rows[i];
        fit_mesh(exe, nbase, base, r, rc, zero, tmp);
        fit += r->ok;
        fprintf(stderr,
                "plan: [%d/%d] tp %d cp %d pp %d v %d dp %d ep %d mbs %d zero %d recompute %s: %s %.4g s (%.0f s so "
                "far)\n",
                i + 1, n, r->tp, r->cp, r->pp, r->v, r->dp, r->ep, r->mbs, r->zero, rc_name[r->rc],
                r->ok         ? "step"
                : r->step > 0 ? "out of memory,"
                              : "failed,",
                r->step, mdc_wall_time() - wall);
    }
    qsort(rows, (size_t)n, sizeof *rows, row_cmp);
    printf("plan: %ld GPUs (%d per node), global batch %ld; %d meshes valid of %d, %d fit in HBM (%.0f s)\n", gpus, gpn,
           batch, n, considered, fit, mdc_wall_time() - wall);
    printf("%4s %10s %6s  %3s %3s %3s %2s %4s %3s %3s %4s %4s %-9s %8s", "#", "step s", "MFU", "tp", "cp", "pp", "v",
           "dp", "ep", "mbs", "m", "zero", "recompute", "HBM GiB");
    for (int i = 0; i < NPART; i++) printf(" %8s", part_col[i]);
    printf("\n");
    for (int i = 0; i < n && i < top && rows[i].ok; i++) {
        plan_row *r = &rows[i];
        printf("%4d %10.4g %5.1f%%  %3d %3d %3d %2d %4d %3d %3d %4d %4d %-9s %8.1f", i + 1, r->step, 100 * r->mfu,
               r->tp, r->cp, r->pp, r->v, r->dp, r->ep, r->mbs, r->m, r->zero, rc_name[r->rc], r->peak / 1073741824.0);
        for (int k = 0; k < NPART; k++) printf(" %7.1f%%", 100 * r->parts[k] / r->step);
        printf("\n");
    }
    if (!fit) printf("no mesh fits in HBM: more GPUs, a smaller micro-batch or ZeRO-3 (--zero 3)\n");
    remove_tmp(tmp);
    free(rows);
    return fit ? 0 : 1;
}
