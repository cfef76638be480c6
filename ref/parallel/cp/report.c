/* Context parallelism's figures beside their formulas (include/minidc/cp.h): per rank the
 * visible attention pairs and the bytes sent per layer and micro-batch against the algorithm's
 * formulas (its registry entry), the layout's balance, the activation memory. */
#include <math.h>

#include "cp_internal.h"

void mdc_cp_figures(const mdc_cp *cp, double f[4]) {
    double calls = cp->calls > 0 ? cp->calls : 1;
    f[0] = cp->pairs / calls, f[1] = cp->algo->pairs(cp, cp->r), f[2] = cp->bytes / calls, f[3] = cp->algo->bytes(cp);
}

size_t mdc_cp_scratch_bytes(const mdc_cp *cp) {
    size_t n = 0;
    for (int i = 0; i < 8; i++) n += cp->buf_floats[i] * sizeof(float);
    return n;
}

mdc_status mdc_cp_report(const mdc_cp *cp, size_t act_bytes, size_t serial_act_bytes, FILE *out) {
    double mine[3] = {cp->pairs, cp->bytes, cp->calls}, *all = NULL;
    if (cp->r == 0 && !(all = malloc(sizeof(double) * 3 * (size_t)cp->c)))
        return mdc_fail(MDC_ERR_OOM_HOST, "context-parallel report");
    mdc_status st = mdc_gather(mine, all, 3, MDC_F64, 0, cp->g);
    if (!st && cp->r == 0) {
        double calls = all[2] > 0 ? all[2] : 1, sum = 0, mx = 0, hs = cp->hs;
        fprintf(out,
                "\ncontext parallel: c = %d ranks, %s layout (%d chunks of %d positions), %s; per rank per layer "
                "and micro-batch:\n",
                cp->c, cp->zigzag ? "zigzag" : "contiguous", cp->zigzag ? 2 * cp->c : cp->c, cp->L, cp->algo->name);
        fprintf(out, "  %-5s %14s %14s %16s %16s\n", "rank", "attn GFLOP", "formula", "bytes sent", "formula");
        for (int q = 0; q < cp->c; q++) {
            double pr = all[3 * q] / calls, f = cp->algo->pairs(cp, q), b = all[3 * q + 1] / calls,
                   bf = cp->algo->bytes(cp);
            sum += pr, mx = pr > mx ? pr : mx;
            fprintf(out, "  %-5d %14.6f %14.6f %16.0f %16.0f %s\n", q, pr * (4 * hs + 5) * 1e-9,
                    f * (4 * hs + 5) * 1e-9, b, bf,
                    fabs(pr - f) <= 1e-9 * f && fabs(b - bf) <= 0.01 * bf ? "ok" : "DIFFERS");
        }
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
