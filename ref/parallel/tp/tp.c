/* Tensor parallelism: the communication points of include/minidc/tp.h over a tp group.
 * Without SP, f's forward and g's backward are the identity (the full tensor is the local
 * one), g's forward and f's backward one AllReduce in place; with SP they are ref/parallel/tp/sp.c's
 * gathers and scatters. Every call is counted with the bytes this rank sent in it. */
#include <stdlib.h>
#include <string.h>

#include "tp_internal.h"

float *mdc_tp_i_scratch(mdc_tp *tp, size_t n) {
    if (n > tp->scratch_n) {
        float *p = realloc(tp->scratch, n * sizeof(float));
        if (!p) return NULL;
        tp->scratch = p, tp->scratch_n = n;
    }
    return tp->scratch;
}

static mdc_status counted_allreduce(mdc_tp *tp, float *buf, size_t n, mdc_op op, int kind) {
    double b0 = mdc_dev_bytes_sent(tp->dev);
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, buf, n, MDC_F32, op, tp->g);
    tp->counts.calls[kind]++;
    tp->counts.bytes[kind] += mdc_dev_bytes_sent(tp->dev) - b0;
    return st;
}

static mdc_status f_forward(void *ctx, float *full, const float *local, int B, int T, int C) {
    mdc_tp *tp = ctx;
    return tp->sp ? mdc_sp_allgather(tp, full, local, B, T, C) : MDC_OK;
}
static mdc_status f_backward(void *ctx, float *dlocal, float *dfull, int B, int T, int C) {
    mdc_tp *tp = ctx;
    if (tp->sp) return mdc_sp_reduce_scatter(tp, dlocal, dfull, B, T, C);
    return counted_allreduce(tp, dfull, (size_t)B * T * C, MDC_SUM, MDC_TP_AR);
}
static mdc_status g_forward(void *ctx, float *local, float *full, int B, int T, int C) {
    mdc_tp *tp = ctx;
    if (tp->sp) return mdc_sp_reduce_scatter(tp, local, full, B, T, C);
    return counted_allreduce(tp, full, (size_t)B * T * C, MDC_SUM, MDC_TP_AR);
}
static mdc_status g_backward(void *ctx, float *dfull, const float *dlocal, int B, int T, int C) {
    mdc_tp *tp = ctx;
    return tp->sp ? mdc_sp_allgather(tp, dfull, dlocal, B, T, C) : MDC_OK;
}

size_t mdc_tp_padded(const mdc_tp *tp, size_t n) { return (n + (size_t)tp->t - 1) / (size_t)tp->t * (size_t)tp->t; }

/* max or sum over tp of n loss statistics, padded to a multiple of t */
static mdc_status vocab(void *ctx, float *buf, int n, int is_max) {
    mdc_tp *tp = ctx;
    size_t p = mdc_tp_padded(tp, (size_t)n);
    float *s = mdc_tp_i_scratch(tp, p);
    if (!s) return mdc_fail(MDC_ERR_OOM_HOST, "tp loss statistics (%zu floats)", p);
    memcpy(s, buf, (size_t)n * sizeof(float));
    for (size_t i = (size_t)n; i < p; i++) s[i] = 0;
    mdc_status st = counted_allreduce(tp, s, p, is_max ? MDC_MAX : MDC_SUM, MDC_TP_AR_LOSS);
    if (!st) memcpy(buf, s, (size_t)n * sizeof(float));
    return st;
}

mdc_status mdc_tp_create(mdc_tp **out, mdc_group *g, int sp) {
    *out = NULL;
    mdc_tp *tp = calloc(1, sizeof *tp);
    if (!tp) return mdc_fail(MDC_ERR_OOM_HOST, "mdc_tp_create");
    tp->g = g, tp->t = mdc_group_size(g), tp->r = mdc_group_rank(g), tp->sp = sp;
    tp->dev = mdc_transport_device(mdc_group_transport(g));
    mdc_gpt2_comm c = {tp, sp ? tp->t : 1, f_forward, f_backward, g_forward, g_backward, vocab, mdc_tp_i_x_reduce,
                       mdc_tp_i_x_vocab};
    tp->comm = c;
    *out = tp;
    return MDC_OK;
}

void mdc_tp_free(mdc_tp *tp) {
    if (!tp) return;
    free(tp->scratch);
    free(tp->xscratch);
    free(tp->dscratch);
    free(tp);
}

const mdc_gpt2_comm *mdc_tp_comm(mdc_tp *tp) { return &tp->comm; }
void mdc_tp_set_exact(mdc_tp *tp, int on) { tp->exact = on; }
mdc_group *mdc_tp_group(mdc_tp *tp) { return tp->g; }
void mdc_tp_get_counts(const mdc_tp *tp, mdc_tp_counts *c) { *c = tp->counts; }
void mdc_tp_reset_counts(mdc_tp *tp) {
    memset(&tp->counts, 0, sizeof tp->counts);
    tp->exact_marked = 0, tp->exact_bytes_want = 0;
}

/* ---- the figures beside their formulas --------------------------------------------------------- */

void mdc_tp_formulas(const mdc_tp *tp, const mdc_gpt2 *m, int b, int s, int k, double *want_calls, double *want_bytes) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    const mdc_gpt2_part *part = mdc_gpt2_get_part(m);
    double L = 0, E = part->has_embed, Hd = part->has_head; /* this partition's (a pipeline stage's) share */
    for (int q = 0; q < part->chunks; q++) L += part->hi[q] - part->lo[q];
    double t = tp->t, bsh = (double)b * s * c->C, beta = 4;
    /* (t-1)/t of a block, in integers (h and bs' are multiples of t): exact, comparable with == */
    double ring_bsh = (t - 1) * (bsh / t) * beta;
    double ring_bsp = (t - 1) * ((double)mdc_tp_padded(tp, (size_t)(b * s)) / t) * beta;
    /* per micro-batch: TP 2 AR per layer forward (g) and 2 backward (f), the embedding's g, the
     * LM head's f (its input gradient); SP turns each into RS + AG, gathers the column-parallel
     * inputs again in backward (2 per layer, and ln_f's). L, the embedding and the head: what this
     * partition holds (a pipeline stage: its layers; the loss only on the last) */
    /* exact mode: every reduction but the embedding's is an exact one (mdc_exact_reduce_bytes,
     * summed as they ran), and the loss's sum-exp carries 80-byte accumulators (20 x beta) */
    double red = k * (4 * L + E + Hd) * ring_bsh;
    if (tp->exact) red = E * k * ring_bsh * (tp->sp ? 1 : 2) + tp->exact_bytes_want;
    if (!tp->sp) {
        want_calls[MDC_TP_AR] = k * (4 * L + E + Hd), want_bytes[MDC_TP_AR] = tp->exact ? red : 2 * red;
        want_calls[MDC_TP_AG] = want_calls[MDC_TP_RS] = want_bytes[MDC_TP_AG] = want_bytes[MDC_TP_RS] = 0;
    } else {
        want_calls[MDC_TP_AR] = want_bytes[MDC_TP_AR] = 0;
        want_calls[MDC_TP_AG] = k * (6 * L + E + 2 * Hd), want_calls[MDC_TP_RS] = k * (4 * L + E + Hd);
        want_bytes[MDC_TP_AG] = want_calls[MDC_TP_AG] * ring_bsh, want_bytes[MDC_TP_RS] = red;
    }
    want_calls[MDC_TP_AR_LOSS] = 3 * k * Hd, want_bytes[MDC_TP_AR_LOSS] = Hd * k * 2 * ring_bsp * (tp->exact ? 22 : 3);
}

void mdc_tp_report(const mdc_tp *tp, const mdc_gpt2 *m, int b, int s, int k, double sp_grad_bytes, FILE *out) {
    if (mdc_group_world_rank(tp->g, 0) != 0 || tp->r != 0) return; /* world rank 0 prints */
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    double t = tp->t, h = c->C, a = c->H, bs = (double)b * s, bsh = bs * h;
    double bsp = (double)mdc_tp_padded(tp, (size_t)(b * s));
    const mdc_tp_counts *n = &tp->counts;
    double want_calls[MDC_TP_KINDS], want_bytes[MDC_TP_KINDS];
    mdc_tp_formulas(tp, m, b, s, k, want_calls, want_bytes);
    static const char *const what[MDC_TP_KINDS] = {"AllReduce (b,s,h)", "AllReduce (b,s) loss", "AllGather (b,s,h)",
                                                   "ReduceScatter (b,s,h)"};
    static const char *const form_tp[MDC_TP_KINDS] = {"k(4L+2) x 2(t-1)/t bsh beta", "3k x 2(t-1)/t bs' beta", "-", "-"};
    static const char *const form_x[MDC_TP_KINDS] = {"k x 2(t-1)/t bsh beta + exact ones (below)",
                                                     "k x 2(t-1)/t bs' (2 + 20) beta", "-",
                                                     "k x (t-1)/t bsh beta + exact ones (below)"};
    static const char *const form_sp[MDC_TP_KINDS] = {"-", "3k x 2(t-1)/t bs' beta", "k(6L+3) x (t-1)/t bsh beta",
                                                      "k(4L+2) x (t-1)/t bsh beta"};
    fprintf(out, "\ntensor parallel t = %d%s: k = %d micro-batch(es) of b = %d x s = %d tokens, h = %d, L = %d, beta = 4 "
                 "bytes; per rank, last step\n", tp->t, tp->sp ? " with sequence parallelism" : "", k, b, s, c->C, c->L);
    fprintf(out, "  %-24s %6s %8s %14s %14s  %s\n", "collective", "calls", "formula", "bytes sent", "formula", "bytes formula");
    for (int i = 0; i < MDC_TP_KINDS; i++)
        fprintf(out, "  %-24s %6llu %8.0f %14.0f %14.0f  %s %s\n", what[i], n->calls[i], want_calls[i], n->bytes[i],
                want_bytes[i], tp->exact && i != MDC_TP_AG ? form_x[i] : tp->sp ? form_sp[i] : form_tp[i],
                n->calls[i] == want_calls[i] && n->bytes[i] == want_bytes[i] ? "ok" : "DIFFERS");
    fprintf(out, "  (bs' = bs padded to a multiple of t = %.0f. Per layer: %s; once per micro-batch: %s)\n", bsp,
            tp->sp ? "AG + RS at f and g forward, AG + RS backward, AG of f's input again: 10 (t-1)/t bsh beta"
                   : "AR at the 2 g forward, AR at the 2 f backward: 4 x 2(t-1)/t bsh beta",
            tp->sp ? "the embedding's RS forward and AG backward, ln_f's AG forward and again backward, the LM "
                     "head's input gradient RS"
                   : "the embedding's AR (g) and the LM head's input gradient AR (f)");
    if (tp->exact)
        fprintf(out, "  exact mode: k(4L+1) reductions (all but the embedding's) are exact sums: doubles, 2 beta, plus "
                     "16(t-1) bytes of counts each, and accumulators for %zu element(s) whose double sum was not exact; "
                     "the loss's sum-exp as 80-byte accumulators (20 beta); the max and the target logit stay float\n",
            tp->exact_marked);
    if (tp->sp) { /* (6L + 2) h floats: ln_1, ln_2 and the two biases of each layer, ln_f */
        double nf = (double)mdc_tp_padded(tp, (size_t)(6 * c->L + 2) * (size_t)c->C);
        fprintf(out, "  SP gradients of LayerNorms and row-parallel biases: one AllReduce over tp per step, %.0f bytes; "
                     "formula 2(t-1)/t (6L+2)' h beta = %.0f (' padded to a multiple of t; ZeRO-2/3: the shard's part)\n",
                sp_grad_bytes, 2 * (t - 1) * (nf / t) * (tp->exact ? 80 : 4));
    }
    /* memory */
    size_t local = mdc_gpt2_local_floats(m), repl = 0;
    for (int i = 0; i < mdc_gpt2_local_count(m); i++) {
        const mdc_param_tensor *p = mdc_gpt2_local_tensor(m, i);
        if (p->split == MDC_SPLIT_NONE) repl += p->alloc;
    }
    double psi = 0; /* this partition's share of the model (a pipeline stage's tensors), whole */
    for (int i = 0; i < mdc_gpt2_local_count(m); i++) {
        const mdc_param_tensor *p = mdc_gpt2_local_tensor(m, i);
        psi += (double)p->alloc * (p->split == MDC_SPLIT_NONE ? 1 : t);
    }
    double split = psi - (double)repl;
    fprintf(out, "  parameters per rank: (Psi - R)/t + R = (%.0f - %zu)/%d + %zu = %.0f floats; allocated %zu %s "
                 "(R = the replicated LayerNorms, wpe and row-parallel biases)\n",
            psi, repl, tp->t, repl, split / t + (double)repl, local, (double)local == split / t + (double)repl ? "ok" : "DIFFERS");
    /* activations per layer, floats: minidc's fp32 stash (ref/model/block.c's layout) beside
     * Korthikanti et al. 2022's 16-bit count (with dropout masks), with and without SP */
    int tiled = s > MDC_GPT2_TILED_T; /* the attention kernel the model chose */
    double att = tiled ? b * (a / t) * s : b * (a / t) * (double)s * s;
    double ours_tp = 4 * bsh + 12 * bsh / t + 4 * bs + att, ours_sp = 16 * bsh / t + 4 * bs / t + att;
    double kor_tp = bsh * (10 + 24 / t + 5 * a * s / (h * t)), kor_sp = bsh / t * (34 + 5 * a * s / h);
    const char *att_form = tiled ? "a b s / t (tiled: the log-sum-exp only)" : "a b s^2 / t (the probabilities)";
    fprintf(out, "  activations per layer, bytes: minidc's fp32 stash 4 x (sbh(4 + 12/t) + 4 sb + %s) = %.0f without SP, "
                 "4 x ((sbh/t)(4 + 12) + 4 sb/t + ...) = %.0f with SP; this run's allocator %.0f\n",
            att_form, 4 * ours_tp, 4 * ours_sp, 4.0 * (double)mdc_gpt2_acts_layer_floats(m, b, s));
    fprintf(out, "    beside Korthikanti et al. 2022 (16-bit, with dropout masks): sbh(10 + 24/t + 5as/(ht)) = %.0f without "
                 "SP, (sbh/t)(34 + 5as/h) = %.0f with SP\n", kor_tp, kor_sp);
    double red = 48 * bsh;
    fprintf(out, "  LayerNorm and bias+residual FLOPs per layer per micro-batch (48 per element of (b,s,h)): %.0f on every "
                 "tp rank without SP (the same work t times), %.0f per rank with SP; this run: %.0f\n",
            red, red / t, tp->sp ? red / t : red);
}
