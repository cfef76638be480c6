/* Context parallelism's figures beside their formulas (include/minidc/cp.h): per rank the
 * visible attention pairs and the bytes sent per layer and micro-batch against the algorithm's
 * formulas (its registry entry), the layout's balance, the activation memory. */
#include <math.h>

#include "cp_internal.h"

/* per layer and micro-batch from the counters: pairs of one forward, bytes of one forward and
 * one backward, and the recomputed forwards' bytes (the forward runs 1 + again times) */
static void per_layer(const mdc_cp *cp, const double v[4], double *pairs, double *bytes, double *again) {
    double calls = v[3] > 0 ? v[3] : 1, layers = calls / (1 + cp->again);
    *pairs = v[0] / calls, *bytes = v[1] / calls + v[2] / layers, *again = cp->again * v[1] / calls;
}

void mdc_cp_figures(const mdc_cp *cp, double f[4]) {
    double v[4] = {cp->pairs, cp->fbytes, cp->bytes, cp->calls}, again;
    per_layer(cp, v, &f[0], &f[2], &again);
    f[1] = cp->algo->pairs(cp, cp->r), f[3] = cp->algo->bytes(cp);
}

size_t mdc_cp_scratch_bytes(const mdc_cp *cp) {
    size_t n = 0;
    for (int i = 0; i < 8; i++) n += cp->buf_floats[i] * sizeof(float);
    return n;
}

mdc_status mdc_cp_report(const mdc_cp *cp, size_t act_bytes, size_t serial_act_bytes, FILE *out) {
    double mine[4] = {cp->pairs, cp->fbytes, cp->bytes, cp->calls}, *all = NULL;
    if (cp->r == 0 && !(all = malloc(sizeof(double) * 4 * (size_t)cp->c)))
        return mdc_fail(MDC_ERR_OOM_HOST, "context-parallel report");
    mdc_status st = mdc_gather(mine, all, 4, MDC_F64, 0, cp->g);
    if (!st && cp->r == 0) {
        double sum = 0, mx = 0, hs = cp->hs, again = 0;
        fprintf(out,
                "\ncontext parallel: c = %d ranks, %s layout (%d chunks of %d positions), %s; per rank per layer "
                "and micro-batch:\n",
                cp->c, cp->zigzag ? "zigzag" : "contiguous", cp->zigzag ? 2 * cp->c : cp->c, cp->L, cp->algo->name);
        fprintf(out, "  %-5s %14s %14s %16s %16s\n", "rank", "attn GFLOP", "formula", "bytes sent", "formula");
        for (int q = 0; q < cp->c; q++) {
            double pr, b, f = cp->algo->pairs(cp, q), bf = cp->algo->bytes(cp), ag;
            per_layer(cp, all + 4 * q, &pr, &b, &ag);
            again = ag > again ? ag : again;
            sum += pr, mx = pr > mx ? pr : mx;
            int pok = fabs(pr - f) <= 1e-9 * f, bok = fabs(b - bf) <= 0.01 * bf;
            fprintf(out, "  %-5d %14.6f %14.6f %16.0f %16.0f %s\n", q, pr * (4 * hs + 5) * 1e-9,
                    f * (4 * hs + 5) * 1e-9, b, bf,
                    !pok        ? "DIFFERS"
                    : cp->exact ? "ok (FLOPs; bytes: exact sums)"
                    : bok       ? "ok"
                                : "DIFFERS");
        }
        if (cp->exact)
            fprintf(out,
                    "  exact mode: the bytes formula is the float algorithm's; exact mode's blocks and dK, dV travel "
                    "as exact sums (ref/parallel/cp/cp_exact.c), more bytes, not asserted here\n");
        if (cp->again)
            fprintf(out,
                    "  forwards beyond one per layer and micro-batch (full recomputation, transformers' aux loss's "
                    "counting forward): their messages %.0f bytes more per layer and micro-batch (the most of a rank; "
                    "beside the forward and backward above)\n",
                    again);
        double want = cp->algo->whole_heads || cp->zigzag ? 1.0 : (2.0 * cp->c - 1) / cp->c;
        fprintf(out, "  forward attention FLOPs (4 hs + 5 per visible pair): max/mean %.3f (%s: %.3f as chunks grow)\n",
                mx / (sum / cp->c),
                cp->algo->whole_heads ? "ulysses, whole heads"
                : cp->zigzag          ? "zigzag"
                                      : "contiguous (2c-1)/c",
                want);
        fprintf(out,
                "  activations of a micro-batch %.2f MiB on this rank (with the attention's buffers) against %.2f MiB "
                "for the whole sequence (%.3f; 1/c = %.3f)\n",
                act_bytes / 1048576.0, serial_act_bytes / 1048576.0, (double)act_bytes / (double)serial_act_bytes,
                1.0 / cp->c);
    }
    free(all);
    return st;
}
