/* The activation memory per layer under recomputation beside its formulas (include/minidc/model.h,
 * mdc_gpt2_recompute_report; docs/recompute.md): minidc's fp32 stash derived from its layout
 * (ref/model/acts.c), the allocator's figure, and Korthikanti et al. 2022's Table 2 (16 bits, with
 * dropout masks) for the same mode.
 *   minidc, a layer without recomputation (b s the local positions, t tp, sp t with SP else 1):
 *     GPT-2     4 sbh/sp + 4 sb/sp + 12 sbh/t + A
 *     families  sb(4h + 4)/sp + sb((a/t + 2g) d + a d/t + 3I/t + q) + A
 *   A the attention's a b s^2/t probabilities (a b s/t log-sum-exp when tiled or context parallel);
 *   selective: without A (where it is the probabilities); full: the block's output alone, sbh/sp;
 *   the work region, once per rank: the tensors recomputed (one layer's, with full recomputation
 *   the recomputed output and a MoE block's MLP output beside them).
 *   Korthikanti: none sbh(34 + 5as/h) (tp 1), sbh(10 + 24/t + 5as/(ht)) (tp), (sbh/t)(34 + 5as/h)
 *   (tp + SP); selective the same without the 5as/h terms; full 2sbh. */
#include <stdio.h>

#include "model_internal.h"

/* minidc's floats of one layer without recomputation, its attention term A, and *f32 of them fp32
 * in every precision (the norms' 1/rms and means, Qwen3's q, k 1/rms, a tiled attention's lse) */
static double stash_none(const mdc_gpt2 *m, int b, int s, int tiled, double *A, double *f32) {
    const mdc_gpt2_config *c = &m->cfg;
    double t = m->part.tp, sp = m->part.sp ? t : 1, h = c->C, bs = (double)b * s, a = c->H / t;
    *A = tiled ? b * a * s : b * a * (double)s * s;
    *f32 = 4 * bs / sp + (tiled ? *A : 0);
    if (!mdc_i_family(c)) return 4 * bs * h / sp + 4 * bs / sp + 12 * bs * h / t + *A;
    double d = mdc_i_head_dim(c), I = mdc_i_ffn(c) / t, g = mdc_gpt2_kv_heads_local(c, m->part.tp);
    double q = c->qk_norm ? (a + g) * (d + 1) : 0;
    if (c->qk_norm) *f32 += bs * (a + g);
    return bs / sp * (4 * h + 4) + bs * ((a + 2 * g) * d + a * d + 3 * I + q) + *A;
}

void mdc_gpt2_recompute_report(const mdc_gpt2 *m, int b, int s, FILE *out) {
    const mdc_gpt2_config *c = &m->cfg;
    int mode = m->rc.mode, tiled = mdc_i_attn_tiled(&m->cfg, s) || m->cp != NULL;
    double t = m->part.tp, sp = m->part.sp ? t : 1, h = c->C, bs = (double)b * s, bsh = bs * h, as = c->H * (double)s;
    double A, f32, none = stash_none(m, b, s, tiled, &A, &f32), keep = none, work = 0, kf = f32, wf = 0;
    if (mode == MDC_RECOMPUTE_FULL)
        keep = bsh / sp, work = none - bsh / sp + bsh / sp * (c->E ? 2 : 1), kf = 0, wf = f32;
    if (mode == MDC_RECOMPUTE_SELECTIVE && !tiled) keep = none - A, work = A;
    /* bytes: the run's dtype (w: 4, or 2 in 16 bits) but for the fp32 floats */
    double w = m->pc.prec ? 2 : 4, kb = w * (keep - kf) + 4 * kf, nb = w * (none - f32) + 4 * f32;
    double wb = w * (work - wf) + 4 * wf;
    static const char *const dtype[3] = {"fp32", "bf16 with fp32 statistics", "fp16 with fp32 statistics"};
    double kor_none = t == 1    ? bsh * (34 + 5 * as / h)
                      : sp == 1 ? bsh * (10 + 24 / t + 5 * as / (h * t))
                                : bsh / t * (34 + 5 * as / h);
    double kor = mode == MDC_RECOMPUTE_FULL   ? 2 * bsh
                 : mode == MDC_RECOMPUTE_NONE ? kor_none
                 : t == 1                     ? 34 * bsh
                 : sp == 1                    ? bsh * (10 + 24 / t)
                                              : 34 * bsh / t;
    static const char *const names[3] = {"none", "selective", "full"};
    const char *kform = mode == MDC_RECOMPUTE_FULL   ? "2sbh"
                        : mode == MDC_RECOMPUTE_NONE ? (t == 1    ? "sbh(34 + 5as/h)"
                                                        : sp == 1 ? "sbh(10 + 24/t + 5as/(ht))"
                                                                  : "(sbh/t)(34 + 5as/h)")
                        : t == 1                     ? "34 sbh"
                        : sp == 1                    ? "sbh(10 + 24/t)"
                                                     : "34 sbh/t";
    const char *form = mode == MDC_RECOMPUTE_FULL   ? (m->pc.prec ? (sp > 1 ? "its input, 2 sbh/t" : "its input, 2 sbh")
                                                                  : (sp > 1 ? "its input, 4 sbh/t" : "its input, 4 sbh"))
                       : mode == MDC_RECOMPUTE_NONE ? "every tensor its backward reads"
                       : tiled                      ? "all it kept (attention keeps no T x T probabilities here)"
                                                    : "all but the attention's a b s^2/t probabilities";
    double alloc = (double)mdc_gpt2_acts_layer_bytes(m, b, s);
    double walloc = (double)mdc_gpt2_acts_work_bytes(m, b, s);
    fprintf(out,
            "recompute %s: a layer keeps %s = %.0f bytes (minidc's %s; %.0f without recomputation); this run's "
            "allocator %.0f %s\n",
            names[mode], form, kb, dtype[m->pc.prec], nb, alloc, alloc == kb ? "ok" : "DIFFERS");
    fprintf(out,
            "  beside Korthikanti et al. 2022, Table 2 (16-bit, with dropout masks): %s = %.0f bytes (%.0f "
            "without recomputation)\n",
            kform, kor, kor_none);
    if (mode != MDC_RECOMPUTE_NONE)
        fprintf(out,
                "  the work region the backward recomputes into, once per rank (not per layer or micro-batch): "
                "%.0f bytes (%s); allocated %.0f %s\n",
                wb,
                mode == MDC_RECOMPUTE_FULL ? (c->E ? "one layer's tensors, the recomputed output and a MoE block's"
                                                     " MLP output"
                                                   : "one layer's tensors and the recomputed output")
                : tiled                    ? "none"
                                           : "one layer's probabilities",
                walloc, walloc == wb ? "ok" : "DIFFERS");
}
