/* Data parallelism's figures beside their formulas (include/minidc/dp.h): bytes per rank per
 * step against the DDP / ZeRO formulas and the exact count for this schedule, memory per rank
 * against the ZeRO paper's 16 Psi, 8 Psi + 8 Psi/N, 4 Psi + 12 Psi/N, 16 Psi/N. */
#include <stdio.h>
#include <string.h>

#include "dp_internal.h"

void mdc_dp_get_figures(const mdc_dp *dp, mdc_dp_figures *f) {
    int sums = dp->red == &mdc_dp_i_sums; /* a sink of exact sums: one reduction per step */
    memset(f, 0, sizeof *f);
    int z = dp->dc.zero, N = dp->N, head = dp->nunits - 1;
    double psi = (double)dp->psi, S = (double)dp->S;
    f->zero = z, f->N = N, f->units = dp->nunits, f->buckets = dp->nbuckets;
    f->psi = dp->psi, f->shard = dp->S;
    for (int i = 0; i < 3; i++) {
        f->mem[i] = dp->mem_after[i];
        f->peak[i] = mdc_dev_mem_peak(dp->dev, (mdc_mem_category)i);
    }
    f->comm_peak = mdc_dev_mem_peak(dp->dev, MDC_MEM_COMM);
    /* params, grads, optimizer: full (4 Psi, 4 Psi, 8 Psi) or sharded (4 S, 4 S, 8 S); in 16 bits
     * the ZeRO paper's mixed-precision accounting: 16-bit parameters 2, gradients 2 (bf16) or 4
     * (fp32), the fp32 master with m and v 12 */
    int sharded[3] = {z >= 3, z >= 2, z >= 1}, half = dp->half != MDC_F32;
    double per[3] = {half ? 2 : 4, (double)mdc_dp_i_gwidth(dp), half ? 12 : 8};
    for (int i = 0; i < 3; i++) {
        f->mem_want[i] = (size_t)(per[i] * (sharded[i] ? S : psi));
        f->mem_formula[i] = per[i] * (sharded[i] ? psi / N : psi);
    }
    /* bytes sent per step: ring allreduce of the padded buckets (DDP: 2(N-1)/N x 4 N S),
     * reduce-scatter + allgather of 4 S per rank each moving (N-1) blocks, the scalars'
     * allreduce of 2N doubles: 2(N-1)/N x 16 N */
    /* the blocks each rank sends of gradients (reductions) and of parameters (ZeRO's gathers):
     * DDP's allreduce 2 S; a reduce-scatter S per reduction (k a step with ZeRO-2/3, one with a
     * pipeline stage, whose micro-batches interleave); ZeRO-1/2's gather of the updated shards S;
     * ZeRO-3's gathers k (2 S - the resident wte's and head's pieces), see dp.h. gb, pb: the same
     * in units of (N-1)/N Psi for the formula. --grad-reduce bf16 sends the gradients' at 2 bytes. */
    double k = dp->dc.accum, n1 = N - 1, gblocks, pblocks, gc, pc;
    double ures = (double)dp->us[0] + (double)dp->us[head];
    if (z == 0) gblocks = 2 * S, pblocks = 0, gc = 2, pc = 0;
    else if (z <= 2)
        gblocks = (z == 2 && !dp->defer ? k : 1) * S, pblocks = S, gc = z == 2 && !dp->defer ? k : 1, pc = 1;
    else gblocks = (dp->defer ? 1 : k) * S, pblocks = k * (2 * S - ures), gc = dp->defer ? 1 : k, pc = 2 * k;
    double gw = (double)mdc_dp_i_gwidth(dp), pw = dp->half != MDC_F32 ? 2.0 : 4.0; /* 16 bits: 16-bit gathers */
    f->step_bytes_want = n1 * (gw * gblocks + pw * pblocks);
    f->step_bytes_formula = n1 / N * psi * (gw * gc + pw * pc);
    if (sums) { /* one exact reduction per step (doubles, and accumulators where needed); gathers float
                 * (16-bit in a mixed-precision run) */
        double gathers = z == 0 ? 0 : z <= 2 ? S : k * (2 * S - (double)dp->us[0] - (double)dp->us[head]);
        f->step_bytes_want = dp->exact_bytes_want + n1 * pw * gathers;
        f->step_bytes_formula = (z == 0 ? 16.0 : z <= 2 ? 8.0 + pw : 8.0 + 2 * pw * k) * n1 / N * psi;
        f->mem_want[1] = (size_t)(8 * psi + (z >= 2 ? 4 * S : 4 * psi));
        f->mem_formula[1] = 8 * psi + (z >= 2 ? 4 * psi / N : 4 * psi);
    }
    f->step_bytes = dp->step_bytes;
    mdc_dev_counters c;
    mdc_dev_get_counters(dp->dev, &c);
    f->t_compute = c.t_compute + c.t_memory, f->t_comm = c.t_comm, f->t_overlap = c.t_overlap;
    f->t_idle = c.t_idle, f->now = c.now;
}

static const char *mib(char *buf, double b) {
    snprintf(buf, 32, "%.3f MiB", b / 1048576.0);
    return buf;
}

void mdc_dp_report(const mdc_dp *dp, FILE *out) {
    int sums = dp->red == &mdc_dp_i_sums;
    mdc_dp_figures f;
    mdc_dp_get_figures(dp, &f);
    if (dp->r != 0) return;
    int half = dp->half != MDC_F32, z = f.zero, gw = (int)mdc_dp_i_gwidth(dp);
    /* per category: bytes an element and whether sharded (the ZeRO stages of the paper's Table 1) */
    int per[3] = {half ? 2 : 4, gw, half ? 12 : 8}, sharded[3] = {z >= 3, z >= 2, z >= 1};
    char forms[3][24], total[48];
    double whole = 0, part = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(forms[i], sizeof forms[i], "%d Psi%s", per[i], sharded[i] ? "/N" : "");
        *(sharded[i] ? &part : &whole) += per[i];
    }
    if (!part) snprintf(total, sizeof total, "%.0f Psi", whole);
    else if (!whole) snprintf(total, sizeof total, "%.0f Psi/N", part);
    else snprintf(total, sizeof total, "%.0f Psi + %.0f Psi/N", whole, part);
    char a[32], b[32], c[32], d[32];
    fprintf(out,
            "\n%s on N = %d ranks: Psi = %zu parameter floats, shard S = %zu floats "
            "(Psi/N = %.2f; padding N S - Psi = %zu floats over %d units), %d buckets\n",
            mdc_dp_stage_name(f.zero), f.N, f.psi, f.shard, (double)f.psi / f.N, f.shard * (size_t)f.N - f.psi, f.units,
            f.buckets);
    fprintf(out, "memory per rank after a step, bytes     formula             formula value  padded (S for Psi/N)  "
                 "measured (allocator)\n");
    const char *cat[3] = {half ? "parameters (16-bit)" : "parameters", gw == 2 ? "gradients (bf16)" : "gradients",
                          half ? "optimizer (fp32 master, Adam m, v)" : "optimizer (Adam m, v)"};
    size_t tm = 0, tw = 0;
    double tf = 0;
    for (int i = 0; i < 3; i++) {
        fprintf(out, "  %-36s %-18s %14.1f %21zu %21zu %s\n", cat[i], forms[i], f.mem_formula[i], f.mem_want[i],
                f.mem[i], f.mem[i] == f.mem_want[i] ? "ok" : "DIFFERS");
        tm += f.mem[i], tw += f.mem_want[i], tf += f.mem_formula[i];
    }
    fprintf(out, "  %-36s %-18s %14.1f %21zu %21zu %s (%s)\n", "total", total, tf, tw, tm, tm == tw ? "ok" : "DIFFERS",
            mib(a, (double)tm));
    if (half) { /* the published accountings of the same mixed precision, beside this table */
        static const double paper[4][2] = {{16, 0}, {4, 12}, {2, 14}, {0, 16}}, megatron[2][2] = {{18, 0}, {6, 12}};
        double psi = (double)f.psi, N = f.N, pv = paper[z][0] * psi + paper[z][1] * psi / N;
        fprintf(out,
                "  mixed precision: the ZeRO paper's Table 1 (16-bit parameters and gradients, K = 12: the fp32 "
                "master, m and v) gives stage %d %.0f Psi + %.0f Psi/N = %.1f bytes%s",
                z, paper[z][0], paper[z][1], pv, pv == tf ? ", this table's formula" : "");
        if (z <= 1) {
            double mv = megatron[z][0] * psi + megatron[z][1] * psi / N;
            fprintf(out, "; Megatron-LM's with fp32 gradients (%s) %.0f Psi + %.0f Psi/N = %.1f bytes%s",
                    z ? "distributed optimizer" : "no distributed optimizer", megatron[z][0], megatron[z][1], mv,
                    mv == tf ? ", this table's formula" : "");
        }
        fprintf(out, " (%s)\n",
                gw == 2
                    ? "--grad-reduce bf16: the gradients a bf16 buffer, as the paper's"
                    : "the gradients fp32, as Megatron's main_grad: --grad-reduce bf16 makes them the paper's 2 Psi");
    }
    fprintf(out, "  peaks during the step: parameters %s, gradients %s, optimizer %s, comm buffers %s\n",
            mib(a, (double)f.peak[0]), mib(b, (double)f.peak[1]), mib(c, (double)f.peak[2]),
            mib(d, (double)f.comm_peak));
    static const char *const cform[4] = {"2(N-1)/N x 4 Psi", "2(N-1)/N x 4 Psi", "(k+1)(N-1)/N x 4 Psi",
                                         "3k(N-1)/N x 4 Psi"};
    static const char *const dform[4] = {"2(N-1)/N x 4 Psi", "2(N-1)/N x 4 Psi", "2(N-1)/N x 4 Psi",
                                         "(2k+1)(N-1)/N x 4 Psi"};
    static const char *const xform[4] = {"2(N-1)/N x 8 Psi", "(N-1)/N x (8 + 4) Psi", "(N-1)/N x (8 + 4) Psi",
                                         "(N-1)/N x (8 + 8k) Psi"};
    static const char *const xform16[4] = {"2(N-1)/N x 8 Psi", "(N-1)/N x (8 + 2) Psi", "(N-1)/N x (8 + 2) Psi",
                                           "(N-1)/N x (8 + 4k) Psi"};
    if (sums)
        fprintf(out,
                "  exact mode: gradients as exact sums (8 Psi, doubles) besides the float gradients (so gradients "
                "above are 8 Psi + %s), reduced once per step as doubles (8 bytes an element), %zu element(s) "
                "again as 80-byte accumulators where the double sum was not exact\n",
                f.zero >= 2 ? "4 Psi/N" : "4 Psi", dp->exact_marked);
    /* 16-bit parameter gathers or bf16 gradients: (N-1)/N x (gradient blocks x width + parameter
     * blocks x width) Psi */
    int pw = half ? 2 : 4, defer = dp->defer;
    char gen[96], g[24], pp[24];
    snprintf(g, sizeof g, "%s%d", z == 0 ? "2 x " : (z >= 2 && !defer) ? "k x " : "", gw);
    snprintf(pp, sizeof pp, "%s%d", z == 3 ? "2k x " : "", pw);
    if (z == 0) snprintf(gen, sizeof gen, "(N-1)/N x %s Psi", g);
    else snprintf(gen, sizeof gen, "(N-1)/N x (%s + %s) Psi", g, pp);
    int plain = gw == 4 && (pw == 4 || z == 0); /* fp32 bytes throughout */
    fprintf(out, "bytes sent per rank per step: formula %s = %.0f; exact for this schedule %.0f; measured %.0f %s%s\n",
            sums     ? (half ? xform16 : xform)[f.zero]
            : !plain ? gen
            : defer  ? dform[f.zero]
                     : cform[f.zero],
            f.step_bytes_formula, f.step_bytes_want, f.step_bytes, f.step_bytes == f.step_bytes_want ? "ok" : "DIFFERS",
            plain                     ? ""
            : gw == 2 && pw == 2 && z ? " (the 16-bit parameters' gathers and the bf16 gradients: 2 bytes an element)"
            : gw == 2                 ? " (the bf16 gradients: 2 bytes an element)"
                                      : " (the 16-bit parameters' gathers: 2 bytes an element)");
    if (dp->defer && !sums)
        fprintf(out,
                "  a pipeline stage: every bucket reduces once per step, after the schedule (its micro-batches "
                "interleave)%s\n",
                f.zero == 3 ? "; the units are gathered for each micro-batch's F and B" : "");
    if (sums)
        fprintf(out,
                "  exact = the buckets' exact %s (doubles, counts, and the map and accumulators where needed) + "
                "(N-1) x 4 x the gathers' blocks\n",
                f.zero ? "reduce-scatters" : "allreduces");
    else if (f.zero <= 1)
        fprintf(out, "  exact = 2 (N-1) x 4 S (padded buckets: %s)\n",
                f.zero ? "reduce-scatter + allgather" : "ring allreduce");
    else if (f.zero == 2)
        fprintf(out, "  exact = (k+1)(N-1) x 4 S (k = %d reduce-scatters, one allgather)\n", dp->dc.accum);
    else
        fprintf(out,
                "  exact = k (N-1) x 4 (3 S - s_0 - s_head): per micro-batch (k = %d) every unit is "
                "gathered for forward and the blocks again for backward, and reduce-scattered once\n",
                dp->dc.accum);
    fprintf(out,
            "virtual time (whole run): compute %.3f ms, communication %.3f ms exposed + %.3f ms hidden under "
            "%s (overlap), idle %.3f ms; total %.3f ms\n",
            f.t_compute * 1e3, f.t_comm * 1e3, f.t_overlap * 1e3,
            dp->dc.zero == 1 || dp->dc.zero == 2               ? "backward and the update (bucket allgathers)"
            : dp->dc.prefetch && dp->dc.zero == 3 && dp->N > 1 ? "compute (bucket reductions, prefetched gathers)"
                                                               : "backward",
            f.t_idle * 1e3, f.now * 1e3);
}
