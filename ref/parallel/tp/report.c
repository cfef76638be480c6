/* Tensor parallelism's figures beside their formulas (include/minidc/tp.h): the calls and bytes
 * of f, g and the vocab-parallel loss per kind against docs/design.md's formulas, the SP
 * gradients' reduction, the parameters and activations per rank. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tp_internal.h"

/* ---- the figures beside their formulas --------------------------------------------------------- */

/* the head width d of the families (C/H for GPT-2) */
static double kv_width(const mdc_gpt2 *m) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    return c->head_dim > 0 ? c->head_dim : c->C / c->H;
}

/* This partition's (a pipeline stage's) blocks: L, the MoE blocks among them M, and P, the pairs of
 * a column- and a row-parallel linear (f and g) they hold: the attention's, the dense MLP's, a MoE
 * block's shared expert's (its routed experts are the etp group's: the expert-parallel report) */
static void block_counts(const mdc_gpt2 *m, double *L, double *M, double *P) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    const mdc_gpt2_part *part = mdc_gpt2_get_part(m);
    *L = *M = 0;
    for (int q = 0; q < part->chunks; q++)
        for (int l = part->lo[q]; l < part->hi[q]; l++) *L += 1, *M += mdc_gpt2_moe_index(c, l) >= 0;
    *P = 2 * *L - (c->shared_ffn > 0 ? 0 : *M);
}

/* "4L" for a dense model's 2L pairs times x, else "xP" */
static const char *pairs_form(char *buf, size_t n, double L, double P, int x) {
    if (P == 2 * L) snprintf(buf, n, "%dL", 2 * x);
    else snprintf(buf, n, "%dP", x);
    return buf;
}

void mdc_tp_formulas(const mdc_tp *tp, const mdc_gpt2 *m, int b, int s, int k, double *want_calls, double *want_bytes) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    const mdc_gpt2_part *part = mdc_gpt2_get_part(m);
    double L, M, P, E = part->has_embed, Hd = part->has_head; /* this partition's (a pipeline stage's) share */
    block_counts(m, &L, &M, &P);
    (void)M;
    double rc = mdc_gpt2_get_recompute(m) == MDC_RECOMPUTE_FULL; /* each block's forward again in its backward */
    double fw = 1 + mdc_gpt2_lb_on(m); /* forwards per micro-batch: transformers' aux loss counts in one more */
    double t = tp->t, bsh = (double)b * s * c->C, beta = 4, act = mdc_tp_i_half(tp) ? 2 : 4;
    /* (t-1)/t of a block, in integers (h and bs' are multiples of t): exact, comparable with == ;
     * the activations at their dtype's width (16-bit: 2), the loss statistics and kv's fp32 */
    double ring_bsh = (t - 1) * (bsh / t) * act;
    double ring_bsp = (t - 1) * ((double)mdc_tp_padded(tp, (size_t)(b * s)) / t) * beta;
    /* per micro-batch: TP one AR per f/g pair forward (g) and one backward (f), the embedding's g,
     * the LM head's f (its input gradient); SP turns each into RS + AG, gathers the column-parallel
     * inputs again in backward (one per pair, and ln_f's). P, the embedding and the head: what this
     * partition holds (a pipeline stage: its layers; the loss only on the last) */
    /* exact mode: every reduction but the embedding's is an exact one (mdc_exact_reduce_bytes,
     * summed as they ran), and the loss's sum-exp carries 80-byte accumulators (20 x beta) */
    double red = k * ((fw + 1 + rc) * P + fw * E + Hd) * ring_bsh;
    if (tp->exact) red = fw * E * k * ring_bsh * (tp->sp ? 1 : 2) + tp->exact_bytes_want;
    if (!tp->sp) {
        want_calls[MDC_TP_AR] = k * ((fw + 1 + rc) * P + fw * E + Hd),
        want_bytes[MDC_TP_AR] = tp->exact ? red : 2 * red;
        want_calls[MDC_TP_AG] = want_calls[MDC_TP_RS] = want_bytes[MDC_TP_AG] = want_bytes[MDC_TP_RS] = 0;
    } else {
        want_calls[MDC_TP_AR] = want_bytes[MDC_TP_AR] = 0;
        want_calls[MDC_TP_AG] = k * ((fw + 2 + rc) * P + E + (fw + 1) * Hd);
        want_calls[MDC_TP_RS] = k * ((fw + 1 + rc) * P + fw * E + Hd);
        want_bytes[MDC_TP_AG] = want_calls[MDC_TP_AG] * ring_bsh, want_bytes[MDC_TP_RS] = red;
    }
    want_calls[MDC_TP_AR_LOSS] = 3 * fw * k * Hd;
    want_bytes[MDC_TP_AR_LOSS] = fw * Hd * k * 2 * ring_bsp * (tp->exact ? 22 : 3);
    /* tp > KV: each layer's dk, dv of the shared kv head (b s 2d, padded to the r replicas) */
    double r = tp->kv ? mdc_group_size(tp->kv) : 1, n = (double)b * s * 2 * kv_width(m);
    want_calls[MDC_TP_AR_KV] = tp->kv ? k * L : 0;
    want_bytes[MDC_TP_AR_KV] = !tp->kv     ? 0
                               : tp->exact ? tp->exact_kv_bytes_want
                                           : k * L * 2 * (r - 1) * (ceil(n / r) * beta);
}

/* The replicated tensors whose gradients are partial over tp, summed once per step: with SP every
 * norm and row-parallel bias of this partition (GPT-2: ln_1, ln_2, attn.c_proj.b, mlp.c_proj.b a
 * layer, ln_f's two; the families: their two RMSNorms, o_proj's and down_proj's biases where they
 * have them, model.norm) and a MoE block's router, shared-expert gate and (without etp) its E/ep
 * whole experts, each seen on this rank's positions only; and always Qwen3's q_norm and k_norm
 * (d each, every layer: this rank's heads' share). */
static void partial_line(const mdc_tp *tp, const mdc_gpt2 *m, double bytes, FILE *out) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    const mdc_gpt2_part *part = mdc_gpt2_get_part(m);
    double L, M, P, Hd = part->has_head, t = tp->t, d = kv_width(m), h = c->C;
    block_counts(m, &L, &M, &P);
    (void)P;
    double pd = c->family ? 2 + c->o_bias + c->mlp_bias : 6, pm = c->family ? 2 + c->o_bias : 5;
    double fin = c->family ? 1 : 2, gs = c->family && c->shared_ffn > 0 && c->shared_gate;
    double El = c->E / (part->ep > 1 ? part->ep : 1), F = c->moe_ffn > 0 ? c->moe_ffn : c->ffn > 0 ? c->ffn : 4 * h;
    double X = part->etp > 1 ? 0 : c->family ? 3 * F * h : (8 * h + 5) * h; /* one expert's floats */
    double Rh = tp->sp ? pd * (L - M) + pm * M + fin * Hd + M * (c->E + gs) : 0, Rx = tp->sp ? M * El * X : 0;
    double Rd = c->family && c->qk_norm ? 2 * L : 0;
    if (Rh + Rx + Rd == 0) return;
    double nf = (double)mdc_tp_padded(tp, (size_t)(Rh * h + Rx + Rd * d));
    char form[192] = "(", *e = form + 1, *end = form + sizeof form;
    if (M == 0 && !c->family) snprintf(form, sizeof form, "(6L+2)' h");
    else if (M == 0 && Rd == 0) snprintf(form, sizeof form, "((%.0f L + 1) h)'", pd);
    else if (M == 0 && Rh == 0) snprintf(form, sizeof form, "(2 L d)' (q_norm, k_norm)");
    else if (M == 0) snprintf(form, sizeof form, "((%.0f L + 1) h + 2 L d)'", pd);
    else { /* MoE blocks: their norms, router, shared-expert gate and whole experts */
        if (Rh > 0)
            e += snprintf(e, (size_t)(end - e), "(%.0f (L-M) + %.0f M + %.0f) h + M %s h", pd, pm, fin * Hd,
                          gs ? "(E + 1)" : "E");
        if (Rx > 0) e += snprintf(e, (size_t)(end - e), " + M E/ep %s", c->family ? "3Fh" : "(8h + 5)h");
        if (Rd > 0) e += snprintf(e, (size_t)(end - e), "%s2 L d", Rh > 0 ? " + " : "");
        snprintf(e, (size_t)(end - e), ")'");
    }
    fprintf(out,
            "  partial gradients of replicated tensors (%s): one AllReduce over tp per step, %.0f bytes; formula "
            "2(t-1)/t %s beta = %.0f (L = %.0f layers here%s; ' padded to a multiple of t; ZeRO-2/3: the shard's "
            "part)\n",
            tp->sp ? (M > 0 ? "SP: norms, row-parallel biases, routers, whole experts"
                            : "SP: norms and row-parallel biases")
                   : "q_norm, k_norm",
            bytes, form, 2 * (t - 1) * (nf / t) * (tp->exact ? 80 : 4), L, M > 0 && tp->sp ? ", M of them MoE" : "");
}

/* Parameters per rank: split tensors 1/t of their whole, replicated ones whole, and with tp > KV
 * the k, v slices 1/KV of theirs (one kv head, held by tp/KV ranks). */
static void params_line(const mdc_tp *tp, const mdc_gpt2 *m, FILE *out) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    double t = tp->t, repl = 0, psi = 0, kvw = 0, KV = c->KV > 0 ? c->KV : c->H;
    for (int i = 0; i < mdc_gpt2_local_count(m); i++) { /* this partition's share (a stage's tensors), whole */
        const mdc_param_tensor *p = mdc_gpt2_local_tensor(m, i);
        if (p->split == MDC_SPLIT_NONE) repl += (double)p->alloc, psi += (double)p->alloc;
        else if (mdc_gpt2_kv_copy(m, i)) kvw += (double)p->alloc * KV, psi += (double)p->alloc * KV;
        else psi += (double)p->alloc * t;
    }
    double local = (double)mdc_gpt2_local_floats(m), want = (psi - repl - kvw) / t + repl + kvw / KV;
    if (kvw > 0)
        fprintf(out,
                "  parameters per rank: (Psi - R - K)/t + R + K/KV = (%.0f - %.0f - %.0f)/%d + %.0f + %.0f/%.0f = %.0f "
                "floats; allocated %.0f %s (R = the replicated norms; K = k_proj, v_proj: one kv head on tp/KV = %.0f "
                "ranks)\n",
                psi, repl, kvw, tp->t, repl, kvw, KV, want, local, local == want ? "ok" : "DIFFERS", t / KV);
    else
        fprintf(out,
                "  parameters per rank: (Psi - R)/t + R = (%.0f - %.0f)/%d + %.0f = %.0f floats; allocated %.0f %s "
                "(R = the replicated %s)\n",
                psi, repl, tp->t, repl, want, local, local == want ? "ok" : "DIFFERS",
                c->E && c->family ? "norms, row-parallel biases, routers, shared-expert gates and whole experts"
                : c->E            ? "LayerNorms, wpe, row-parallel biases, routers and whole experts"
                : c->family       ? "norms and row-parallel biases"
                                  : "LayerNorms, wpe and row-parallel biases");
}

/* activations per layer, floats: minidc's fp32 stash (ref/model/acts.c's layout) beside
 * Korthikanti et al. 2022's 16-bit count (with dropout masks), with and without SP */
static void activations_gpt2(const mdc_tp *tp, const mdc_gpt2 *m, int b, int s, FILE *out) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    double t = tp->t, h = c->C, a = c->H, bs = (double)b * s, bsh = bs * h;
    int tiled = mdc_gpt2_attention_tiled(c, s); /* the attention kernel the model chose */
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
}

/* The families' layer keeps: the two norms' inputs and outputs (4 sbh) and their 1/rms (with the
 * layout's mean slots, 4 sb), the projection's q, k, v (a q heads, g kv heads here of d), the
 * attention's output (a d), its probabilities or log-sum-exp, gate|up (2 I) and the SwiGLU
 * product (I); Qwen3 q and k before their norms with their 1/rms. Korthikanti et al.'s count
 * derived for these layers in 16 bits without dropout: the norms' inputs and the projections'
 * inputs 2 bytes x 4 sbh, q, k, v 2 sb(a + 2g)d, the attention output 2 sbad, gate, up and the
 * product 2 x 3 sbI, the probabilities 2 as^2 b (none kept by a fused kernel). */
static void activations_family(const mdc_tp *tp, const mdc_gpt2 *m, int b, int s, FILE *out) {
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    double t = tp->t, h = c->C, a = c->H / t, d = kv_width(m), I = (c->ffn > 0 ? c->ffn : 4 * c->C) / t;
    double g = mdc_gpt2_kv_heads_local(c, tp->t), bs = (double)b * s, q = c->qk_norm ? (a + g) * (d + 1) : 0;
    int tiled = mdc_gpt2_attention_tiled(c, s);
    double att = tiled ? b * a * s : b * a * (double)s * s, sp = tp->sp ? t : 1;
    double ours = bs / sp * (4 * h + 4) + bs * ((a + 2 * g) * d + a * d + 3 * I + q) + att;
    double kor = 2 * (4 * bs * h / sp + bs * (a + 2 * g) * d + bs * a * d + 3 * bs * I) + 2 * a * (double)s * s * b;
    fprintf(out,
            "  activations per layer, bytes: minidc's fp32 stash 4 x (sb(4h + 4)%s + sb((a/t + 2g) d + a d/t + 3I/t%s) "
            "+ %s) = %.0f (g = %.0f kv heads here); this run's allocator %.0f\n",
            tp->sp ? "/t" : "", c->qk_norm ? " + (a/t + g)(d + 1)" : "",
            tiled ? "a b s/t (tiled: the log-sum-exp)" : "a b s^2/t (the probabilities)", 4 * ours, g,
            4.0 * (double)mdc_gpt2_acts_layer_floats(m, b, s));
    fprintf(
        out,
        "    beside Korthikanti et al.'s count for these layers (16-bit, no dropout): 2 x (4 sbh%s + sb(a/t + 2g)d + "
        "sbad/t + 3 sbI/t) + 2as^2b/t = %.0f (a fused attention keeps none of the as^2b/t)\n",
        tp->sp ? "/t" : "", kor);
}

void mdc_tp_report(const mdc_tp *tp, const mdc_gpt2 *m, int b, int s, int k, double sp_grad_bytes, FILE *out) {
    if (mdc_group_world_rank(tp->g, 0) != 0 || tp->r != 0) return; /* world rank 0 prints */
    const mdc_gpt2_config *c = mdc_gpt2_get_config(m);
    double t = tp->t, bs = (double)b * s, bsh = bs * c->C;
    double bsp = (double)mdc_tp_padded(tp, (size_t)(b * s));
    const mdc_tp_counts *n = &tp->counts;
    double want_calls[MDC_TP_KINDS], want_bytes[MDC_TP_KINDS];
    mdc_tp_formulas(tp, m, b, s, k, want_calls, want_bytes);
    static const char *const what[MDC_TP_KINDS] = {"AllReduce (b,s,h)", "AllReduce (b,s) loss", "AllGather (b,s,h)",
                                                   "ReduceScatter (b,s,h)", "AllReduce (b,s,2d) kv"};
    double L, M, P;
    block_counts(m, &L, &M, &P);
    int r = mdc_gpt2_get_recompute(m) == MDC_RECOMPUTE_FULL, fw = 1 + mdc_gpt2_lb_on(m);
    char p2[16], p3[16], ar[64], ag[64], rs[64], loss[40];
    pairs_form(p2, sizeof p2, L, P, fw + 1 + r), pairs_form(p3, sizeof p3, L, P, fw + 2 + r);
    snprintf(ar, sizeof ar, "k(%s+%d) x 2(t-1)/t bsh beta", p2, fw + 1);
    snprintf(ag, sizeof ag, "k(%s+%d) x (t-1)/t bsh beta", p3, fw + 2);
    snprintf(rs, sizeof rs, "k(%s+%d) x (t-1)/t bsh beta", p2, fw + 1);
    snprintf(loss, sizeof loss, "%dk x 2(t-1)/t bs' beta", 3 * fw);
    const char *const form_tp[MDC_TP_KINDS] = {ar, loss, "-", "-", "kL x 2(r-1)/r (2bsd)' beta"};
    const char *const form_x[MDC_TP_KINDS] = {
        "k x 2(t-1)/t bsh beta + exact ones (below)", "k x 2(t-1)/t bs' (2 + 20) beta", "-",
        "k x (t-1)/t bsh beta + exact ones (below)", "kL exact sums over r (2bsd, doubles)"};
    const char *const form_sp[MDC_TP_KINDS] = {"-", loss, ag, rs, "kL x 2(r-1)/r (2bsd)' beta"};
    fprintf(out,
            "\ntensor parallel t = %d%s: k = %d micro-batch(es) of b = %d x s = %d tokens, h = %d, L = %d, beta = %s "
            "bytes; per rank, last step\n",
            tp->t, tp->sp ? " with sequence parallelism" : "", k, b, s, c->C, c->L,
            mdc_tp_i_half(tp) ? "2 (the 16-bit activations; the loss statistics 4)" : "4");
    fprintf(out, "  %-24s %6s %8s %14s %14s  %s\n", "collective", "calls", "formula", "bytes sent", "formula",
            "bytes formula");
    for (int i = 0; i < MDC_TP_KINDS; i++)
        if (i != MDC_TP_AR_KV || tp->kv)
            fprintf(out, "  %-24s %6llu %8.0f %14.0f %14.0f  %s %s\n", what[i], n->calls[i], want_calls[i], n->bytes[i],
                    want_bytes[i],
                    tp->exact && i != MDC_TP_AG ? form_x[i]
                    : tp->sp                    ? form_sp[i]
                                                : form_tp[i],
                    n->calls[i] == want_calls[i] && n->bytes[i] == want_bytes[i] ? "ok" : "DIFFERS");
    if (P != 2 * L)
        fprintf(
            out,
            "  (P = %.0f pairs of a column- and a row-parallel linear here: each block's attention, each dense MLP%s; "
            "the %.0f MoE blocks' routed experts are in the expert-parallel figures)\n",
            P, c->shared_ffn > 0 ? ", each MoE block's shared expert" : "", M);
    fprintf(out, "  (bs' = bs padded to a multiple of t = %.0f. Per %s: %s; once per micro-batch: %s)\n", bsp,
            P == 2 * L ? "layer" : "pair",
            tp->sp ? (P == 2 * L
                          ? "AG + RS at f and g forward, AG + RS backward, AG of f's input again: 10 (t-1)/t bsh beta"
                          : "AG + RS at f and g forward, AG + RS backward, AG of f's input again: 5 (t-1)/t bsh beta")
                   : (P == 2 * L ? "AR at the 2 g forward, AR at the 2 f backward: 4 x 2(t-1)/t bsh beta"
                                 : "AR at g forward, AR at f backward: 2 x 2(t-1)/t bsh beta"),
            tp->sp ? "the embedding's RS forward and AG backward, ln_f's AG forward and again backward, the LM "
                     "head's input gradient RS"
                   : "the embedding's AR (g) and the LM head's input gradient AR (f)");
    if (fw > 1)
        fprintf(out, "  (transformers' aux loss: a counting forward of every micro-batch first, its f, g, the "
                     "embedding's and the loss's collectives too)\n");
    if (r)
        fprintf(out,
                "  (full recomputation: each block's forward runs again in its backward, its %s again: %s per "
                "pair more)\n",
                tp->sp ? "AG at f and RS at g" : "AR at g", tp->sp ? "1 AG + 1 RS" : "1 AR");
    if (tp->exact)
        fprintf(out,
                "  exact mode: k(%s+1) reductions (all but the embedding's) are exact sums: doubles, 2 beta, plus "
                "16(t-1) bytes of counts each, and accumulators for %zu element(s) whose double sum was not exact; "
                "the loss's sum-exp as 80-byte accumulators (20 beta); the max and the target logit stay float\n",
                p2, tp->exact_marked);
    partial_line(tp, m, sp_grad_bytes, out);
    params_line(tp, m, out);
    if (mdc_gpt2_get_recompute(m) != MDC_RECOMPUTE_NONE) {
        fprintf(out, "  activations per layer: ");
        mdc_gpt2_recompute_report(m, b, s, out);
    } else if (c->family) activations_family(tp, m, b, s, out);
    else activations_gpt2(tp, m, b, s, out);
    double red = 48 * bsh;
    fprintf(out,
            "  LayerNorm and bias+residual FLOPs per layer per micro-batch (48 per element of (b,s,h)): %.0f on every "
            "tp rank without SP (the same work t times), %.0f per rank with SP; this run: %.0f\n",
            red, red / t, tp->sp ? red / t : red);
}
