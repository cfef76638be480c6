/* The pipeline's figures beside their formulas (include/minidc/pp.h): the measured bubble and
 * stash per stage against the schedule's, the bytes between stages. */
#include <stdio.h>
#include <string.h>

#include "pp_internal.h"

static void action_times(const mdc_pp *pp, double t[3]) {
    double sum[3] = {0}, n[3] = {0};
    for (int k = 0; k < pp->s.n[pp->stage]; k++) {
        const double *r = pp->rec + PP_REC * (size_t)k;
        int i = r[PP_KIND] == MDC_PP_F ? 0 : r[PP_KIND] == MDC_PP_B ? 1 : 2;
        sum[i] += r[PP_END] - r[PP_START], n[i]++;
    }
    for (int i = 0; i < 3; i++) t[i] = n[i] ? sum[i] / n[i] : 0;
}

/* Per stage: the measured bubble in virtual time, the activation sets, the bytes sent, beside
 * the formulas; gathered over the pipeline group and printed by its rank 0 (call on every rank
 * of the group). */
enum { R_BUSY, R_T0, R_T1, R_HELD, R_SETS, R_SENT, R_TF, R_TB, R_TW, R_N };
mdc_status mdc_pp_report(const mdc_pp *pp, FILE *out) {
    double mine[R_N] = {pp->busy, pp->t0, pp->t1, (double)pp->held_peak, (double)pp->nsets, pp->sent}, *all = NULL;
    action_times(pp, mine + R_TF);
    if (pp->stage == 0 && !(all = malloc(sizeof(double) * R_N * (size_t)pp->p)))
        return mdc_fail(MDC_ERR_OOM_HOST, "pipeline report");
    mdc_status st = mdc_gather(mine, all, R_N, MDC_F64, 0, pp->g);
    if (!st && pp->stage == 0) {
        const mdc_pp_schedule *s = &pp->s;
        int p = pp->p, m = s->m, v = s->v;
        double per = (double)pp->floats * (pp->half ? 2 : 4), t0 = all[R_T0], t1 = all[R_T1], tf = 0, tb = 0, tw = 0;
        for (int q = 0; q < p; q++) { /* the makespan over every stage's clock; the mean action times */
            const double *f = all + R_N * q;
            t0 = f[R_T0] < t0 ? f[R_T0] : t0, t1 = f[R_T1] > t1 ? f[R_T1] : t1;
            tf += f[R_TF] / p, tb += f[R_TB] / p, tw += f[R_TW] / p;
        }
        double span = t1 - t0, form = mdc_pp_bubble_formula(s, tf, tb, tw);
        fprintf(out, "\npipeline: p = %d stages, m = %d micro-batches, schedule %s", p, m, s->name);
        if (v > 1) fprintf(out, ", v = %d model chunks per stage", v);
        fprintf(out, "; one boundary tensor (b, s/sp, h) = %.0f bytes%s\n", per,
                pp->half ? " (16-bit: 2 bytes an element)" : "");
        fprintf(out,
                "  makespan %.3f ms (the first start to the last end over the stages); mean F %.3f ms, B %.3f ms%s",
                span * 1e3, tf * 1e3, tb * 1e3, s->split ? "" : "\n");
        if (s->split) fprintf(out, ", W %.3f ms\n", tw * 1e3);
        fprintf(out, "  %-6s %12s %10s %10s %6s %10s %6s %14s %14s\n", "stage", "busy ms", "bubble", "formula", "held",
                "formula", "alloc", "bytes sent", "formula");
        for (int q = 0; q < p; q++) {
            const double *f = all + R_N * q;
            /* each boundary between virtual stages carries m tensors each way; stage q sends on
             * v chunks' outputs (not the last virtual stage's) and v inputs' gradients (not the first's) */
            double bw = ((double)v * m - (q == p - 1) * m) * per + ((double)v * m - (q == 0) * m) * per;
            int want = mdc_pp_sets_formula(s, q);
            fprintf(out, "  %-6d %12.3f %10.3f %10.3f %6.0f %10d %6.0f %14.0f %14.0f %s\n", q, f[R_BUSY] * 1e3,
                    span > 0 ? 1 - f[R_BUSY] / span : 0, form, f[R_HELD], want, f[R_SETS], f[R_SENT], bw,
                    f[R_SENT] >= bw && f[R_HELD] == want ? "ok" : "DIFFERS");
        }
        fprintf(out,
                "  bubble = 1 - busy / makespan in virtual time (the stage's kernels against the schedule's time); "
                "formula %s%s, for uniform stages and free links. held: the most activation sets%s holding a "
                "micro-batch at once (F to %s), against %s; alloc: the sets allocated%s. bytes: m boundary tensors "
                "each way across each virtual-stage boundary (the sends of other schemes count too)\n",
                mdc_pp_formula_text(s, 0), s->split ? " from the mean F, B, W" : "", v > 1 ? " (of one chunk)" : "",
                s->split ? "W" : "B", mdc_pp_formula_text(s, 1),
                v > 1 ? ", a pool per chunk (its layers' size), each as large as that chunk's own peak" : "");
    }
    free(all);
    return st;
}
