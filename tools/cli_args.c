/* Option values of the minidc commands, read strictly: the whole string must be a number in
 * range ("4x", "abc", "" and out-of-range values are refused), and the refusal names the
 * command, the option and the value on stderr. Each mdc_arg_* returns 1 on success, 0 on a bad
 * value; each mdc_parse_* returns MDC_OK or MDC_ERR_INVALID with the same reason in mdc_detail(). */
#include <errno.h>
#include <float.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_args.h"

mdc_status mdc_parse_ll(const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi)
        return mdc_fail(MDC_ERR_INVALID, "%s needs an integer in %lld..%lld, got '%s'", opt, lo, hi,
                        v ? v : "(nothing)");
    *out = x;
    return MDC_OK;
}

mdc_status mdc_parse_int(const char *opt, const char *v, int lo, int hi, int *out) {
    long long x;
    mdc_status st = mdc_parse_ll(opt, v, lo, hi, &x);
    if (!st) *out = (int)x;
    return st;
}

mdc_status mdc_parse_double(const char *opt, const char *v, double *out) {
    char *end = NULL;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end)
        return mdc_fail(MDC_ERR_INVALID, "%s needs a number, got '%s'", opt, v ? v : "(nothing)");
    *out = x;
    return MDC_OK;
}

mdc_status mdc_parse_precision(const char *opt, const char *v, int *out) {
    static const char *const names[] = {"fp32", "bf16", "fp16"}; /* MDC_PRECISION_* order */
    for (int i = 0; v && i < 3; i++)
        if (!strcmp(v, names[i])) return *out = i, MDC_OK;
    return mdc_fail(MDC_ERR_INVALID, "%s '%s': fp32, bf16 or fp16", opt, v ? v : "");
}

mdc_status mdc_parse_float(const char *opt, const char *v, float *out) {
    double x;
    mdc_status st = mdc_parse_double(opt, v, &x);
    if (st) return st;
    float f = (float)x;
    /* a finite value the float cannot hold would become 0 or inf, and be refused under that name */
    if (isfinite(x) && x != 0 && (f == 0 || !isfinite(f)))
        return mdc_fail(MDC_ERR_INVALID, "%s %s is not representable as a float (magnitudes from %.3g to %.3g)", opt, v,
                        (double)FLT_TRUE_MIN, (double)FLT_MAX);
    *out = f; /* inf and nan as given: the option's own check refuses them by value */
    return MDC_OK;
}

mdc_status mdc_parse_double_range(const char *opt, const char *v, double lo, double hi, double *out) {
    double x;
    /* strtod takes "nan" and "inf": every comparison with nan is false, inf is out of range */
    if (mdc_parse_double(opt, v, &x) || !(x >= lo && x <= hi))
        return mdc_fail(MDC_ERR_INVALID, "%s needs a finite number in [%.15g, %.15g], got '%s'", opt, lo, hi,
                        v ? v : "(nothing)");
    *out = x;
    return MDC_OK;
}

/* The printing forms: the same reason, prefixed with the command. */
static int printed(const char *cmd, mdc_status st) {
    if (st) fprintf(stderr, "minidc %s: %s\n", cmd, mdc_detail());
    return !st;
}

int mdc_arg_ll(const char *cmd, const char *opt, const char *v, long long lo, long long hi, long long *out) {
    return printed(cmd, mdc_parse_ll(opt, v, lo, hi, out));
}

int mdc_arg_int(const char *cmd, const char *opt, const char *v, int lo, int hi, int *out) {
    return printed(cmd, mdc_parse_int(opt, v, lo, hi, out));
}

int mdc_arg_size(const char *cmd, const char *opt, const char *v, size_t hi, size_t *out) {
    char *end = NULL;
    errno = 0;
    /* strtoull accepts "-1" as a huge number: a sign is refused before it sees it. */
    unsigned long long x = v && *v != '-' && *v != '+' ? strtoull(v, &end, 10) : 0;
    if (!v || !end || errno || end == v || *end || x > hi) {
        fprintf(stderr, "minidc %s: %s needs an integer in 0..%zu, got '%s'\n", cmd, opt, hi, v ? v : "(nothing)");
        return 0;
    }
    *out = (size_t)x;
    return 1;
}

int mdc_arg_double(const char *cmd, const char *opt, const char *v, double *out) {
    return printed(cmd, mdc_parse_double(opt, v, out));
}

int mdc_arg_float(const char *cmd, const char *opt, const char *v, float *out) {
    return printed(cmd, mdc_parse_float(opt, v, out));
}
int mdc_arg_precision(const char *cmd, const char *opt, const char *v, int *out) {
    return printed(cmd, mdc_parse_precision(opt, v, out));
}

mdc_status mdc_adamw_check(const mdc_adamw_config *o) {
    /* the values as the optimizer will use them (floats): "--lr 1e39" is inf here */
    if (!isfinite(o->lr) || !(o->lr > 0))
        return mdc_fail(MDC_ERR_INVALID, "--lr %g: the learning rate must be a finite number > 0", o->lr);
    if (!isfinite(o->beta1) || !(o->beta1 >= 0 && o->beta1 < 1))
        return mdc_fail(MDC_ERR_INVALID, "--beta1 %g must be in [0, 1)", o->beta1);
    if (!isfinite(o->beta2) || !(o->beta2 >= 0 && o->beta2 < 1))
        return mdc_fail(MDC_ERR_INVALID, "--beta2 %g must be in [0, 1)", o->beta2);
    if (!isfinite(o->eps) || !(o->eps > 0))
        return mdc_fail(MDC_ERR_INVALID, "--eps %g must be a finite number > 0", o->eps);
    if (!isfinite(o->weight_decay) || !(o->weight_decay >= 0))
        return mdc_fail(MDC_ERR_INVALID, "--weight-decay %g must be a finite number >= 0", o->weight_decay);
    /* 0 turns clipping off (mdc_clip_scale); a negative value would too, silently: refused */
    if (!isfinite(o->grad_clip) || !(o->grad_clip >= 0))
        return mdc_fail(MDC_ERR_INVALID, "--grad-clip %g must be a finite number >= 0 (0 = no clipping)", o->grad_clip);
    return MDC_OK;
}

/* ---- outputs: checked before the work starts ------------------------------------------------ */

mdc_status mdc_check_output(const char *opt, const char *path) {
    if (!path || !path[0]) return mdc_fail(MDC_ERR_INVALID, "%s needs a file name", opt);
    struct stat s;
    if (stat(path, &s) == 0) {
        if (S_ISDIR(s.st_mode)) return mdc_fail(MDC_ERR_INVALID, "%s %s is a directory, not a file", opt, path);
        if (!S_ISREG(s.st_mode))
            return mdc_fail(MDC_ERR_INVALID,
                            "%s %s is not a regular file (a device, FIFO or socket): minidc writes "
                            "its outputs as regular files only",
                            opt, path);
    }
    char *copy = strdup(path);
    if (!copy) return mdc_fail(MDC_ERR_OOM_HOST, "%s", opt);
    const char *dir = dirname(copy);
    mdc_status st = MDC_OK;
    if (stat(dir, &s) != 0 || !S_ISDIR(s.st_mode))
        st = mdc_fail(MDC_ERR_INVALID, "%s %s: the directory %s does not exist", opt, path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        st = mdc_fail(MDC_ERR_INVALID, "%s %s: the directory %s is not writable: %s", opt, path, dir, strerror(errno));
    free(copy);
    return st;
}

mdc_status mdc_check_not_input(const char *out_opt, const char *out, const char *in_opt, const char *in) {
    struct stat a, b;
    if (!out || !in || stat(out, &a) != 0 || stat(in, &b) != 0) return MDC_OK; /* a new file is no input */
    if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return mdc_fail(MDC_ERR_INVALID,
                        "%s %s is the same file as %s %s: writing it would destroy an input of "
                        "this run",
                        out_opt, out, in_opt, in);
    return MDC_OK;
}

static int gcd_int(int a, int b) { return b ? gcd_int(b, a % b) : a; }

int mdc_exact_default_block(int seq) {
    if (seq < 1) return 1;
    int m = seq / gcd_int(seq, 8), b = MDC_EXACT_DEFAULT_BLOCK;
    while (m % b) b--;
    return b;
}

int mdc_exact_piece(int seq, int cp, int contiguous, int tp, int sp) {
    int parts = cp * (sp && tp > 1 ? tp : 1), chunks = cp > 1 ? cp * (contiguous ? 1 : 2) : 1;
    if (cp < 1 || tp < 1 || seq % parts || seq % chunks) return 0;
    return gcd_int(seq / parts, seq / chunks);
}

mdc_status mdc_exact_options(int *exact, int *block, const mdc_gpt2_config *cfg, int seq, int cp, int tp, int sp) {
    if (*block) *exact = 1;
    if (!*exact) return MDC_OK;
    if (!*block) *block = mdc_exact_default_block(seq);
    int local = (cp > 1 ? seq / cp : seq) / (sp && tp > 1 ? tp : 1);
    if (local % *block) {
        int b = *block < local ? *block : local;
        while (local % b) b--; /* the largest block that fits */
        return mdc_fail(MDC_ERR_INVALID,
                        "--exact-block %d does not divide the %d positions of a sequence each rank holds "
                        "(--seq %d%s%s); use --exact-block %d (or another divisor of %d) on every mesh you compare",
                        *block, local, seq, cp > 1 ? " / --cp" : "", sp && tp > 1 ? " / --tp with --sp" : "", b, local);
    }
    if (tp > 0 && (cfg->Vp % tp || (cfg->Vp / tp) % MDC_EXACT_VOCAB_BLOCK))
        return mdc_fail(MDC_ERR_INVALID,
                        "--exact with --tp %d: the vocabulary shard %d / %d is not a multiple of exact "
                        "mode's vocabulary block %d; pick a --vocab whose padded size is a multiple of %d",
                        tp, cfg->Vp, tp, MDC_EXACT_VOCAB_BLOCK, tp * MDC_EXACT_VOCAB_BLOCK);
    return MDC_OK;
}

void mdc_exact_print_blocks(const mdc_gpt2_config *cfg, int block, FILE *out) {
    fprintf(out,
            "exact mode: canonical blocks, summed exactly across blocks, micro-batches and ranks:\n"
            "  tokens (weight, bias, LayerNorm gradients): %d positions of one sequence (--exact-block %d)\n"
            "  contractions: attention output and q/k/v input gradients %d (one head), MLP %d (4C/H), "
            "vocabulary %d\n"
            "  attention: query and key blocks of %d positions, each row's maximum over every key first\n"
            "  embedding rows token by token; the loss and the squared gradient norm exactly\n",
            block, block, cfg->C / cfg->H, 4 * cfg->C / cfg->H, MDC_EXACT_VOCAB_BLOCK, block);
    if (!cfg->E) return;
    /* a routed expert's width (ref/model/moe/moe_etp.c): its blocks divide F/etp for every etp */
    int F = cfg->family == MDC_FAMILY_GPT2 ? 4 * cfg->C
            : cfg->moe_ffn > 0             ? cfg->moe_ffn
            : cfg->ffn > 0                 ? cfg->ffn
                                           : 4 * cfg->C;
    int g = cfg->H, r = F;
    while (r) {
        int t = g % r;
        g = r, r = t;
    }
    fprintf(out,
            "  experts: the down product and the gate/up input gradient %d (F/gcd(H, F), F = %d), whatever --etp\n",
            F / g, F);
}

void mdc_moe_cli_default(mdc_moe_cli *c) {
    memset(c, 0, sizeof *c);
    c->E = c->topk = c->every = -1;
    c->router = c->n_group = c->topk_group = c->n_shared = c->first_dense = -1;
    c->routed_scale = c->lb_coef = -1;
}

const char mdc_moe_usage[] =
    "  --experts E         a mixture of experts: E experts in place of each MoE block's MLP (0: dense)\n"
    "  --topk K            experts per token (default 2; forward: __metadata__ moe_topk)\n"
    "  --moe-every N       blocks 0, N, 2N, ... are MoE blocks (default 1: every block)\n"
    "  --capacity-factor F each expert keeps ceil(K T F / E) assignments per sequence (0: dropless)\n"
    "  --moe-drop P        which it keeps: position (every first choice in position order, then every\n"
    "                      second, ...; default) or probs (the highest router probabilities)\n"
    "  --moe-renorm        gates renormalized over the K chosen\n"
    "  --moe-routing R     topk (default: by the router's scores) | balanced (token g takes experts\n"
    "                      (g K + r) mod E: every expert k/E of the tokens; predict's assumption)\n"
    "  --moe-aux-loss A    load-balancing loss A E sum f_i P_i (Switch; default 0)\n"
    "  --moe-z-loss B      router z-loss B mean logsumexp(z)^2 (default 0)\n"
    "  --moe-bias-rate G   aux-loss-free balancing (DeepSeek-V3): a per-expert bias on p for the choice,\n"
    "                      after each step += G sign(mean load - load) (train only; default 0: off)\n"
    "  --router-aux-loss A transformers' aux loss: A x load_balancing_loss_func over the global batch,\n"
    "                      every MoE block pooled (a MoE family's router_aux_loss_coef with\n"
    "                      output_router_logits; a counting forward starts each step)\n"
    "  --router R          a MoE family's routing: softmax (its own) or deepseek (DeepSeek-V3: sigmoid\n"
    "                      scores, the routing bias for the choice only, group-limited top-k)\n"
    "  --router-groups G   deepseek: n_group (default 1)   --router-topk-groups K  topk_group (default G)\n"
    "  --routed-scaling F  deepseek: routed_scaling_factor (default 1)\n"
    "  --shared-experts S  n_shared_experts: an ungated shared expert S x moe_intermediate_size wide\n"
    "  --first-dense D     first_k_dense_replace: blocks below D dense\n";

int mdc_moe_option(mdc_moe_cli *c, const char *opt, const char *v, int *used, mdc_status *st) {
    *used = 2, *st = MDC_OK;
    double x = 0;
    if (!strcmp(opt, "--moe-renorm")) {
        c->o.renorm = 1, *used = 1;
        return 1;
    }
    static const char *const names[] = {
        "--experts",        "--topk",          "--moe-every",          "--capacity-factor",
        "--moe-drop",       "--moe-aux-loss",  "--moe-z-loss",         "--moe-bias-rate",
        "--router",         "--router-groups", "--router-topk-groups", "--routed-scaling",
        "--shared-experts", "--first-dense",   "--router-aux-loss",    "--moe-routing"};
    int which = -1;
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(opt, names[i])) which = i;
    if (which < 0) return 0;
    if (!v) {
        *st = mdc_fail(MDC_ERR_INVALID, "%s needs a value", opt);
        return 1;
    }
    switch (which) {
    case 0: *st = mdc_parse_int(opt, v, 0, MDC_GPT2_MAX_EXPERTS, &c->E); break;
    case 1: *st = mdc_parse_int(opt, v, 1, MDC_GPT2_MAX_TOPK, &c->topk); break;
    case 2: *st = mdc_parse_int(opt, v, 1, 1 << 20, &c->every); break;
    case 4:
        if (!strcmp(v, "position") || !strcmp(v, "probs")) c->o.drop_probs = !strcmp(v, "probs");
        else *st = mdc_fail(MDC_ERR_INVALID, "--moe-drop '%s': position or probs", v);
        break;
    case 8:
        if (!strcmp(v, "softmax") || !strcmp(v, "deepseek"))
            c->router = !strcmp(v, "deepseek") ? MDC_ROUTER_SIGMOID : MDC_ROUTER_SOFTMAX;
        else *st = mdc_fail(MDC_ERR_INVALID, "--router '%s': softmax or deepseek", v);
        break;
    case 9: *st = mdc_parse_int(opt, v, 1, MDC_GPT2_MAX_EXPERTS, &c->n_group); break;
    case 10: *st = mdc_parse_int(opt, v, 1, MDC_GPT2_MAX_EXPERTS, &c->topk_group); break;
    case 11: *st = mdc_parse_double_range(opt, v, 1e-6, 1e6, &c->routed_scale); break;
    case 12: *st = mdc_parse_int(opt, v, 0, 64, &c->n_shared); break;
    case 13: *st = mdc_parse_int(opt, v, 0, 1 << 20, &c->first_dense); break;
    case 14: *st = mdc_parse_double_range(opt, v, 0, 1e6, &c->lb_coef); break;
    case 15:
        if (!strcmp(v, "topk") || !strcmp(v, "balanced")) c->o.balanced = !strcmp(v, "balanced");
        else *st = mdc_fail(MDC_ERR_INVALID, "--moe-routing '%s': topk or balanced", v);
        break;
    default:
        if (!(*st = mdc_parse_double_range(opt, v, 0, 1e6, &x))) {
            if (which == 3) c->o.capacity_factor = (float)x;
            else if (which == 5) c->o.aux_alpha = (float)x;
            else if (which == 6) c->o.z_beta = (float)x;
            else c->o.bias_rate = (float)x;
        }
    }
    return 1;
}

void mdc_moe_cli_apply(const mdc_moe_cli *c, mdc_gpt2_config *cfg) {
    if (c->E >= 0) cfg->E = c->E;
    if (c->topk >= 0) cfg->topk = c->topk;
    if (c->every >= 0) cfg->moe_every = c->every;
    if (c->router >= 0) cfg->router = c->router;
    if (c->n_group >= 0) cfg->n_group = c->n_group;
    if (c->topk_group >= 0) cfg->topk_group = c->topk_group;
    if (c->routed_scale >= 0) cfg->routed_scale = (float)c->routed_scale;
    if (c->n_shared >= 0) cfg->n_shared = c->n_shared;
    if (c->first_dense >= 0) cfg->first_dense = c->first_dense;
    if (c->lb_coef >= 0) cfg->lb_coef = (float)c->lb_coef;
}
