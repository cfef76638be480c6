/* minidc explain block: one GPT-2 block's operations in ref/model/block.c's order, forward then
 * backward, with each tp rank's shapes and every communication point (f, g, the vocab-parallel
 * loss), plus the embedding and the head once; bytes per rank next to docs/design.md's formulas.
 *
 *   minidc explain block --tp 2 --sp --config tiny --batch 1
 *
 * Nothing runs and MPI is never initialized: the listing is written from the sizes. The counts
 * it totals are the ones `minidc train` measures (tests/cli/explain_cli.sh compares the two). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"

static void usage(FILE *f) {
    fprintf(f, "usage: minidc explain block --tp T [--sp] [--config tiny|small|gpt2] [--vocab V --ctx T --layers L\n"
               "                            --heads H --channels C] [--batch b] [--seq s]\n"
               "  --tp T      tensor-parallel ranks, 1..64 (1: the serial block)\n"
               "  --sp        sequence parallelism over the tp ranks (needs --tp 2 or more)\n"
               "  --config    model sizes as minidc train (default tiny); the size options override them\n"
               "  --batch b   sequences per micro-batch (default 1); --seq s tokens (default the context)\n");
}

enum { AR, LOSS, AG, RS, KINDS };
static const char *const kind_name[KINDS] = {"AllReduce", "AllReduce", "AllGather", "ReduceScatter"};
typedef struct {
    int t, sp, b, s, sl, h, a, V, Vp, L;
    double bsh, bsp;     /* b s h; b s padded to a multiple of t (the loss); both divisible by t */
    int calls[2][KINDS]; /* [0] once per micro-batch (embedding, head), [1] per block */
    double bytes[2][KINDS];
    int in_block;
} ctx;

/* Ring bytes per rank of n floats (a multiple of t): 2(t-1)/t n beta (AllReduce) or (t-1)/t n beta,
 * exactly (n/t is an integer, so every product is). */
static double ring(int t, double n, int allreduce) { return (allreduce ? 2 : 1) * (t - 1) * (n / t) * 4; }

/* "[d0, d1, ...]" in one of a few rotating buffers, so several fit in one printf */
static const char *S(int n, ...) {
    static char buf[12][64];
    static int k;
    char *p = buf[k++ % 12];
    va_list ap;
    va_start(ap, n);
    size_t o = (size_t)snprintf(p, 64, "[");
    for (int i = 0; i < n; i++) o += (size_t)snprintf(p + o, 64 - o, "%s%d", i ? ", " : "", va_arg(ap, int));
    snprintf(p + o, 64 - o, "]");
    va_end(ap);
    return p;
}
/* printf into a rotating buffer, like S */
__attribute__((format(printf, 1, 2))) static const char *F(const char *fmt, ...) {
    static char buf[8][256];
    static int k;
    char *p = buf[k++ % 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, 256, fmt, ap);
    va_end(ap);
    return p;
}
/* Of something split n per rank: rank 0's slice "0-(n-1)" (R0), rank r's "[nr, nr+n)" (Rr). */
static const char *R0(int n) {
    static char buf[6][24];
    static int k;
    char *p = buf[k++ % 6];
    return n == 1 ? snprintf(p, 24, "0") : snprintf(p, 24, "0-%d", n - 1), p;
}
static const char *Rr(int n) {
    static char buf[6][48];
    static int k;
    char *p = buf[k++ % 6];
    return n == 1 ? snprintf(p, 48, "[r, r+1)") : snprintf(p, 48, "[%dr, %dr+%d)", n, n, n), p;
}

static void op(const char *name, const char *what, const char *shapes) {
    printf("  %-11s %-50s %s\n", name, what, shapes);
}

/* One collective over tp of the (b,s,h) tensor (or of the (b,s) loss statistics), counted. */
static void comm(ctx *x, const char *name, int kind, const char *note) {
    double by = ring(x->t, kind == LOSS ? x->bsp : x->bsh, kind <= LOSS);
    char what[96], shapes[96];
    snprintf(what, sizeof what, "%s over tp%s", kind_name[kind], note);
    const char *full = S(3, x->b, x->s, x->h), *local = S(3, x->b, x->sl, x->h);
    if (kind == AR) snprintf(shapes, sizeof shapes, "%s", full);
    else if (kind == LOSS) snprintf(shapes, sizeof shapes, "%s (b s' = %.0f)", S(2, x->b, x->s), x->bsp);
    else snprintf(shapes, sizeof shapes, "%s -> %s", kind == AG ? local : full, kind == AG ? full : local);
    printf("  %-11s %-50s %s  %s beta = %.0f bytes per rank\n", name, what, shapes,
           kind == AR     ? "2(t-1)/t bsh"
           : kind == LOSS ? "2(t-1)/t bs'"
                          : "(t-1)/t bsh",
           by);
    x->calls[x->in_block][kind]++, x->bytes[x->in_block][kind] += by;
}

static void forward(ctx *x) {
    int t = x->t, sp = x->sp, b = x->b, s = x->s, h = x->h, hl = h / t, Fl = 4 * h / t, al = x->a / t, Vl = x->Vp / t;
    char xs[64], full[64];
    snprintf(xs, sizeof xs, "%s", S(3, b, x->sl, h)), snprintf(full, sizeof full, "%s", S(3, b, s, h));
    printf("\nembedding forward (once per micro-batch)\n");
    if (t == 1) op("wte + wpe", "token and position embedding", F("%s -> %s", S(2, b, s), xs));
    else {
        op("wte", F("lookup of this shard's rows %s (other ids: 0)", R0(Vl)),
           F("%s -> %s partial sums", S(2, b, s), full));
        comm(x, "g", sp ? RS : AR, "");
        op("wpe", F("+ positions %s (rank 0's)", R0(x->sl)), xs);
    }
    x->in_block = 1;
    printf("\nblock forward (each of the L = %d layers; x is the residual stream entering it)\n", x->L);
    for (int half = 0; half < 2; half++) {
        op(half ? "ln_2" : "ln_1", "LayerNorm", F("%s = %s", sp ? "[b, s/t, h]" : "[b, s, h]", xs));
        if (sp) comm(x, "f", AG, "");
        else if (t > 1) op("f", "identity (every rank has the whole input)", full);
        if (!half) {
            op("c_attn",
               t == 1 ? "q, k and v of every head" : F("column-parallel (q, k, v of heads %s on rank 0)", R0(al)),
               F("%s @ %s -> %s", full, S(2, h, 3 * hl), S(3, b, s, 3 * hl)));
            op("attention", F("causal, heads %s, head size %d", R0(al), h / x->a),
               F("%s -> %s  (keeps %s %s)", S(3, b, s, 3 * hl), S(3, b, s, hl),
                 s > MDC_GPT2_TILED_T ? "the log-sum-exp" : "the probabilities",
                 s > MDC_GPT2_TILED_T ? S(3, b, al, s) : S(4, b, al, s, s)));
        } else {
            op("c_fc",
               t == 1 ? "the MLP's first linear, h -> 4h" : F("column-parallel (MLP columns %s on rank 0)", R0(Fl)),
               F("%s @ %s -> %s", full, S(2, h, Fl), S(3, b, s, Fl)));
            op("gelu", "GeLU (elementwise: no communication)", S(3, b, s, Fl));
        }
        int K = half ? Fl : hl;
        const char *name = half ? "mlp.c_proj" : "attn.c_proj", *res = half ? "x2" : "x";
        if (t == 1) {
            op(name, F("fused with the residual: %s + y @ W + b", res),
               F("%s @ %s + %s -> %s", S(3, b, s, K), S(2, K, h), xs, xs));
            continue;
        }
        op(name, F("row-parallel (rows %s on rank 0)", R0(K)),
           F("%s @ %s -> %s partial sums", S(3, b, s, K), S(2, K, h), full));
        comm(x, "g", sp ? RS : AR, "");
        op("residual", F("%s + bias + g(...): once, after the reduction", res), xs);
    }
    x->in_block = 0;
    printf("\nhead forward (once per micro-batch)\n");
    op("ln_f", "LayerNorm", xs);
    if (sp) comm(x, "f", AG, "");
    const char *logits = F("%s @ %s -> %s", full, S(2, h, Vl), S(3, b, s, Vl));
    char bs[64];
    snprintf(bs, sizeof bs, "%s", S(2, b, s));
    if (t == 1) {
        op("lm_head", "tied to wte (padded vocabulary)", logits);
        op("loss", F("cross-entropy over the V = %d real columns", x->V), F("%s -> %s", S(3, b, s, Vl), bs));
        return;
    }
    op("lm_head", F("column-parallel over the vocabulary (rows %s)", R0(Vl)), logits);
    op("loss",
       F("row max over real columns (%d of %d on rank 0%s)", x->V < Vl ? x->V : Vl, Vl,
         x->V < x->Vp ? "; >= V masked" : ""),
       F("%s -> %s", S(3, b, s, Vl), bs));
    comm(x, "vocab", LOSS, ", max");
    op("loss", "sum of exp(logit - max) over this shard", bs);
    comm(x, "vocab", LOSS, ", sum");
    op("loss", "target logit (0 where another shard holds it)", bs);
    comm(x, "vocab", LOSS, ", sum");
    op("loss", "lse = max + log(sum-exp); loss = lse - target", F("%s; the logits are never gathered", bs));
}

static void backward(ctx *x) {
    int t = x->t, sp = x->sp, b = x->b, s = x->s, h = x->h, hl = h / t, Fl = 4 * h / t, Vl = x->Vp / t;
    char xs[64], full[64];
    snprintf(xs, sizeof xs, "%s", S(3, b, x->sl, h)), snprintf(full, sizeof full, "%s", S(3, b, s, h));
    const char *part = sp ? " (partial*)" : "", *psum = t > 1 ? " partial sums" : "";
    printf("\nhead backward (once per micro-batch)\n");
    if (sp) comm(x, "f", AG, " (ln_f's output again)");
    op("loss", t > 1 ? "dlogits = softmax - one-hot, on this shard" : "dlogits = softmax - one-hot", S(3, b, s, Vl));
    op("lm_head", "d in = dlogits @ wte, d wte += dlogits^T @ in",
       F("%s @ %s -> %s%s; d wte %s", S(3, b, s, Vl), S(2, Vl, h), full, psum, S(2, Vl, h)));
    if (t > 1) comm(x, "f", sp ? RS : AR, " (backward of f)");
    op("ln_f", F("backward: d x; d weight, d bias%s", part), xs);
    x->in_block = 1;
    printf("\nblock backward (each layer, last to first; B: input gradient, W: weight gradient, run as soon as its "
           "inputs are ready)\n");
    for (int half = 1; half >= 0; half--) {
        const char *name = half ? "mlp.c_proj" : "attn.c_proj", *col = half ? "c_fc" : "c_attn",
                   *ln = half ? "ln_2" : "ln_1";
        int K = half ? Fl : hl, N = half ? Fl : 3 * hl;
        if (sp) comm(x, "g", AG, half ? " (backward of g: d x')" : " (backward of g: d x2)");
        else if (t > 1) op("g", "identity backward (the gradient is whole on every rank)", full);
        op(name, F("W: d weight = %s^T @ dy; d bias%s", half ? "gelu output" : "attention output", part),
           F("%s, %s", S(2, K, h), S(1, h)));
        op(name, "B: dy @ W^T", F("%s @ %s -> %s", full, S(2, h, K), S(3, b, s, K)));
        if (half) op("gelu", "backward", S(3, b, s, Fl));
        else op("attention", "backward", F("%s -> %s", S(3, b, s, hl), S(3, b, s, N)));
        if (sp) comm(x, "f", AG, half ? " (ln_2's output again)" : " (ln_1's output again)");
        op(col, "W: d weight = in^T @ dy, d bias", F("%s, %s", S(2, h, N), S(1, N)));
        op(col, "B: dy @ W^T", F("%s @ %s -> %s%s", S(3, b, s, N), S(2, N, h), full, psum));
        if (t > 1) comm(x, "f", sp ? RS : AR, " (backward of f)");
        op(ln, F("W: d weight, d bias%s", part), S(1, h));
        op(ln, F("B: + the residual's gradient = %s", half ? "d x2" : "d x (to layer l-1)"), xs);
    }
    x->in_block = 0;
    printf("\nembedding backward (once per micro-batch)\n");
    if (sp) comm(x, "g", AG, " (backward of g)");
    else if (t > 1) op("g", "identity backward", full);
    op("wte, wpe", t > 1 ? "d wte: this shard's rows; d wpe: whole" : "d wte: the tokens' rows; d wpe",
       F("%s; %s", S(2, Vl, h), S(2, s, h)));
}

static void totals(ctx *x) {
    int t = x->t, L = x->L, *n = x->calls[1];
    double bsh = x->bsh, *by = x->bytes[1], got = by[AR] + by[AG] + by[RS];
    printf("\nper layer per micro-batch (the block lines above): %d AllReduce, %d AllGather, %d ReduceScatter of "
           "[b, s, h] (N = bsh = %.0f floats)\n",
           n[AR], n[AG], n[RS], bsh);
    if (t == 1) printf("  tp 1: the serial block, no communication\n");
    else if (!x->sp) {
        double want = 4 * ring(t, bsh, 1);
        printf("  TP: 4 AR(bsh) = 4 x 2(t-1)/t bsh beta = 4 x 2 x %d/%d x %.0f x 4 = %.0f bytes per rank; listed %.0f "
               "%s\n",
               t - 1, t, bsh, want, got, got == want && n[AR] == 4 ? "ok" : "DIFFERS");
    } else {
        double want = 10 * ring(t, bsh, 0);
        printf("  SP: 10 (t-1)/t bsh beta = 10 x %d/%d x %.0f x 4 = %.0f bytes per rank; listed %.0f %s\n", t - 1, t,
               bsh, want, got, got == want && n[AG] == 6 && n[RS] == 4 ? "ok" : "DIFFERS");
        printf("  (AG + RS = AR: TP's 4 AR, 4 x 2(t-1)/t bsh beta = %.0f, become 4 AG + 4 RS of the same bytes; 2 more "
               "AG gather the column-parallel inputs again in backward, as Megatron does; 8 (t-1)/t bsh beta = %.0f if "
               "the gathered inputs were kept)\n",
               4 * ring(t, bsh, 1), 8 * ring(t, bsh, 0));
    }
    if (t == 1) return;
    printf("\nper micro-batch, L = %d layers and the embedding and head once (what minidc train counts per "
           "micro-batch):\n  %-24s %6s %16s  formula\n",
           L, "collective", "calls", "bytes per rank");
    static const char *const what[KINDS] = {"AllReduce (b,s,h)", "AllReduce (b,s) loss", "AllGather (b,s,h)",
                                            "ReduceScatter (b,s,h)"};
    static const char *const form_tp[KINDS] = {"(4L+2) x 2(t-1)/t bsh beta", "3 x 2(t-1)/t bs' beta", "-", "-"};
    static const char *const form_sp[KINDS] = {"-", "3 x 2(t-1)/t bs' beta", "(6L+3) x (t-1)/t bsh beta",
                                               "(4L+2) x (t-1)/t bsh beta"};
    double wantc[KINDS] = {x->sp ? 0 : 4 * L + 2, 3, x->sp ? 6 * L + 3 : 0, x->sp ? 4 * L + 2 : 0};
    for (int k = 0; k < KINDS; k++) {
        int c = L * n[k] + x->calls[0][k];
        double b = L * by[k] + x->bytes[0][k], wb = wantc[k] * ring(t, k == LOSS ? x->bsp : bsh, k <= LOSS);
        char fv[32] = "";
        if (wantc[k]) snprintf(fv, sizeof fv, " = %.0f", wb);
        printf("  %-24s %6d %16.0f  %s%s %s\n", what[k], c, b, x->sp ? form_sp[k] : form_tp[k], fv,
               c == wantc[k] && b == wb ? "ok" : "DIFFERS");
    }
    printf("  (bs' = bs padded to a multiple of t = %.0f. The embedding's lookup adds one %s, the LM head's input "
           "gradient one %s%s)\n",
           x->bsp, x->sp ? "RS (forward) + AG (backward)" : "AR", x->sp ? "RS" : "AR",
           x->sp ? ", ln_f's gathers two AG" : "");
    if (x->sp)
        printf("  per step: the partial gradients of the LayerNorms and row-parallel biases, (6L+2) h = %d floats, one "
               "AllReduce over tp: 2(t-1)/t (6L+2) h beta = %.0f bytes per rank\n",
               (6 * L + 2) * x->h, ring(t, (6 * L + 2) * x->h, 1));
}

int mdc_explain_block(int argc, char **argv) {
    const char *config = "tiny";
    int tp = 1, sp = 0, b = 1, seq = 0, sz[5] = {0};
    static const char *const szname[5] = {"--vocab", "--ctx", "--layers", "--heads", "--channels"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1, k;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        if (!strcmp(a, "--sp")) {
            sp = 1;
            continue;
        }
        for (k = 0; k < 5 && strcmp(a, szname[k]); k++)
            ;
        if (k < 5) ok = mdc_arg_int("explain block", a, v, 1, 1 << 30, &sz[k]);
        else if (!strcmp(a, "--tp")) ok = mdc_arg_int("explain block", a, v, 1, 64, &tp);
        else if (!strcmp(a, "--batch")) ok = mdc_arg_int("explain block", a, v, 1, 1 << 20, &b);
        else if (!strcmp(a, "--seq")) ok = mdc_arg_int("explain block", a, v, 1, 1 << 20, &seq);
        else if (!strcmp(a, "--config") && v) config = v;
        else {
            fprintf(stderr, "minidc explain block: unknown option or missing value: %s\n", a);
            return usage(stderr), 2;
        }
        if (!ok) return 2;
        i++;
    }
    /* the checks and messages of minidc train */
    mdc_gpt2_config c = {0};
    mdc_status st = mdc_gpt2_config_named(config, &c, NULL);
    int *dst[5] = {&c.V, &c.T, &c.L, &c.H, &c.C};
    for (int k = 0; !st && k < 5; k++)
        if (sz[k]) *dst[k] = sz[k], c.Vp = k ? c.Vp : 0;
    if (!st) st = mdc_gpt2_config_check(&c);
    if (!st) c.Vp = mdc_gpt2_padded_vocab_tp(c.V, tp);
    if (!st && !seq) seq = c.T;
    if (!st && seq > c.T) st = mdc_fail(MDC_ERR_INVALID, "--seq %d must be in [1, %d] (the context, --ctx)", seq, c.T);
    if (!st && (double)b * seq * c.C * (6.0 * c.L + 3) * 8 > 9e15) /* byte counts must stay exact in a double */
        st = mdc_fail(MDC_ERR_INVALID, "--batch %d x --seq %d x --channels %d: too large to count", b, seq, c.C);
    mdc_gpt2_part p = mdc_gpt2_part_serial(&c);
    p.tp = tp, p.sp = sp;
    if (!st) st = mdc_gpt2_part_check(&p, &c, seq);
    if (st) {
        fprintf(stderr, "minidc explain block: %s\n", mdc_detail());
        return 2;
    }
    ctx x = {tp, sp, b, seq, sp ? seq / tp : seq, c.C, c.H, c.V, c.Vp, c.L, 0, 0, {{0}}, {{0}}, 0};
    x.bsh = (double)b * seq * c.C;
    x.bsp = ((double)b * seq + tp - 1 - ((long long)b * seq + tp - 1) % tp);
    printf("explain block: GPT-2 V=%d (padded Vp = %d) T=%d L=%d, a = %d heads, h = %d; micro-batch b = %d x s = %d; "
           "tp t = %d%s (ref/model/block.c)\n",
           c.V, c.Vp, c.T, c.L, c.H, c.C, b, seq, tp, sp ? " with sequence parallelism" : "");
    if (tp == 1) {
        printf(
            "tp 1: the serial block: one rank holds every tensor, the output projections run fused with the residual "
            "add, no communication\n");
    } else {
        int al = c.H / tp, hl = c.C / tp, F = 4 * c.C / tp, Vl = c.Vp / tp;
        printf("beta = 4 bytes (fp32); ring bytes per rank: AR(N) = 2(t-1)/t N beta, AG(N) = RS(N) = (t-1)/t N beta\n"
               "tp rank r (0..%d) holds:\n",
               tp - 1);
        printf("  heads [r a/t, (r+1) a/t) = %s: c_attn's q, k and v columns %s + {0, h, 2h} (3 x %d of %d), "
               "attn.c_proj.weight rows %s\n",
               Rr(al), Rr(hl), hl, 3 * c.C, Rr(hl));
        printf("  MLP columns [r 4h/t, (r+1) 4h/t) = %s of mlp.c_fc, the same rows of mlp.c_proj.weight\n", Rr(F));
        printf("  vocabulary rows [r Vp/t, (r+1) Vp/t) = %s of wte: the embedding's lookup and the tied LM head\n",
               Rr(Vl));
        if (sp)
            printf("  positions [r s/t, (r+1) s/t) = %s of every sequence: the residual stream, LayerNorms, bias and "
                   "residual adds;\n    their weight and bias gradients are partial (* below), summed over tp once per "
                   "step\n",
                   Rr(seq / tp));
        printf(
            "  replicated on every rank: ln_1, ln_2, ln_f, wpe, attn.c_proj.bias, mlp.c_proj.bias\n"
            "shapes are rank 0's (every rank's are the same); f and g are Megatron's conjugate operators: f before a "
            "column-parallel linear, g after a row-parallel one\n");
    }
    forward(&x);
    backward(&x);
    totals(&x);
    return 0;
}
