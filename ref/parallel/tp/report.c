/* Tensor parallelism's figures beside their formulas (include/minidc/tp.h): the calls and bytes
 * of f, g and the vocab-parallel loss per kind against docs/design.md's formulas, the SP
 * gradients' reduction, the parameters and activations per rank. */
#include <stdio.h>
#include <string.h>

#include "tp_internal.h"

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
    static const char *const form_tp[MDC_TP_KINDS] = {"k(4L+2) x 2(t-1)/t bsh beta", "3k x 2(t-1)/t bs' beta", "-",
                                                      "-"};
    static const char *const form_x[MDC_TP_KINDS] = {"k x 2(t-1)/t bsh beta + exact ones (below)",
                                                     "k x 2(t-1)/t bs' (2 + 20) beta", "-",
                                                     "k x (t-1)/t bsh beta + exact ones (below)"};
    static const char *const form_sp[MDC_TP_KINDS] = {"-", "3k x 2(t-1)/t bs' beta", "k(6L+3) x (t-1)/t bsh beta",
                                                      "k(4L+2) x (t-1)/t bsh beta"};
    fprintf(out,
            "\ntensor parallel t = %d%s: k = %d micro-batch(es) of b = %d x s = %d tokens, h = %d, L = %d, beta = 4 "
            "bytes; per rank, last step\n",
            tp->t, tp->sp ? " with sequence parallelism" : "", k, b, s, c->C, c->L);
    fprintf(out, "  %-24s %6s %8s %14s %14s  %s\n", "collective", "calls", "formula", "bytes sent", "formula",
            "bytes formula");
    for (int i = 0; i < MDC_TP_KINDS; i++)
        fprintf(out, "  %-24s %6llu %8.0f %14.0f %14.0f  %s %s\n", what[i], n->calls[i], want_calls[i], n->bytes[i],
                want_bytes[i],
                tp->exact && i != MDC_TP_AG ? form_x[i]
                : tp->sp                    ? form_sp[i]
                                            : form_tp[i],
                n->calls[i] == want_calls[i] && n->bytes[i] == want_bytes[i] ? "ok" : "DIFFERS");
    fprintf(out, "  (bs' = bs padded to a multiple of t = %.0f. Per layer: %s; once per micro-batch: %s)\n", bsp,
            tp->sp ? "AG + RS at f and g forward, AG + RS backward, AG of f's input again: 10 (t-1)/t bsh beta"
                   : "AR at the 2 g forward, AR at the 2 f backward: 4 x 2(t-1)/t bsh beta",
            tp->sp ? "the embedding's RS forward and AG backward, ln_f's AG forward and again backward, the LM "
                     "head's input gradient RS"
                   : "the embedding's AR (g) and the LM head's input gradient AR (f)");
    if (tp->exact)
        fprintf(out,
                "  exact mode: k(4L+1) reductions (all but the embedding's) are exact sums: doubles, 2 beta, plus "
                "16(t-1) bytes of counts each, and accumulators for %zu element(s) whose double sum was not exact; "
                "the loss's sum-exp as 80-byte accumulators (20 beta); the max and the target logit stay float\n",
                tp->exact_marked);
    if (tp->sp) { /* (6L + 2) h floats: ln_1, ln_2 and the two biases of each layer, ln_f */
        double nf = (double)mdc_tp_padded(tp, (size_t)(6 * c->L + 2) * (size_t)c->C);
        fprintf(out,
                "  SP gradients of LayerNorms and row-parallel biases: one AllReduce over tp per step, %.0f bytes; "
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
    fprintf(out,
            "  parameters per rank: (Psi - R)/t + R = (%.0f - %zu)/%d + %zu = %.0f floats; allocated %zu %s "
            "(R = the replicated LayerNorms, wpe and row-parallel biases)\n",
            psi, repl, tp->t, repl, split / t + (double)repl, local,
            (double)local == split / t + (double)repl ? "ok" : "DIFFERS");
    /* activations per layer, floats: minidc's fp32 stash (ref/model/block.c's layout) beside
     * Korthikanti et al. 2022's 16-bit count (with dropout masks), with and without SP */
    int tiled = s > MDC_GPT2_TILED_T; /* the attention kernel the model chose */
    double att = tiled ? b * (a / t) * s : b * (a / t) * (double)s * s;
    double ours_tp = 4 * bsh + 12 * bsh / t + 4 * bs + att, ours_sp = 16 * bsh / t + 4 * bs / t + att;
    double kor_tp = bsh * (10 + 24 / t + 5 * a * s / (h * t)), kor_sp = bsh / t * (34 + 5 * a * s / h);
    const char *att_form = tiled ? "a b s / t (tiled: the log-sum-exp only)" : "a b s^2 / t (the probabilities)";
    fprintf(out,
            "  activations per layer, bytes: minidc's fp32 stash 4 x (sbh(4 + 12/t) + 4 sb + %s) = %.0f without SP, "
            "4 x ((sbh/t)(4 + 12) + 4 sb/t + ...) = %.0f with SP; this run's allocator %.0f\n",
            att_form, 4 * ours_tp, 4 * ours_sp, 4.0 * (double)mdc_gpt2_acts_layer_floats(m, b, s));
    fprintf(out,
            "    beside Korthikanti et al. 2022 (16-bit, with dropout masks): sbh(10 + 24/t + 5as/(ht)) = %.0f without "
            "SP, (sbh/t)(34 + 5as/h) = %.0f with SP\n",
            kor_tp, kor_sp);
    double red = 48 * bsh;
    fprintf(out,
            "  LayerNorm and bias+residual FLOPs per layer per micro-batch (48 per element of (b,s,h)): %.0f on every "
            "tp rank without SP (the same work t times), %.0f per rank with SP; this run: %.0f\n",
            red, red / t, tp->sp ? red / t : red);
}
