/* minidc predict's report (tools/predict_report.h): the step time, its parts, MFU and HFU,
 * peak memory against capacity, energy, each beside what it is computed from. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/device.h"
#include "minidc/algorithms.h"
#include "predict_report.h"

#define TAG_PREDICT 4093 /* tag space 0 of a device-less world, as the runtime's report */

typedef struct {
    int mesh_rank;
    mdc_dev_counters a, b; /* after the first step, after the second */
    double e;              /* the second step's joules */
    size_t peak[MDC_MEM_COUNT + 1];
} proc_summary;

/* Model FLOPs of a step (Korthikanti et al. 2022's count, the one MFU is quoted with): 6 per
 * matrix-multiply parameter per token (forward 2, backward 4; the LM head included, the
 * embedding lookups and positions not) plus the attention's two T x T products, 12 L T d per
 * token for d = heads x head_dim (no causal halving). For GPT, 72 B s L h^2 (1 + s/6h + V/12hL).
 * A mixture of experts counts the k experts a token takes (its active parameters). */
static double model_flops(const mdc_gpt2_config *c, double tokens, int seq) {
    double hd = c->head_dim ? c->head_dim : (double)c->C / c->H, d = c->H * hd;
    double matmul = (double)mdc_gpt2_param_count(c);
    if (c->family == MDC_FAMILY_GPT2) matmul -= (double)c->T * c->C; /* learned positions: a lookup */
    if (c->untied) matmul -= (double)c->V * c->C;                    /* the input embedding: a lookup */
    else matmul += 0;                                                /* tied: wte is the LM head's matmul */
    if (c->E > c->topk) { /* a mixture of experts: a token's k routed experts, not all E (the router all) */
        mdc_gpt2_config k = *c;
        k.E = c->topk;
        matmul -= (double)(mdc_gpt2_param_count(c) - mdc_gpt2_param_count(&k)) -
                  (double)mdc_gpt2_moe_blocks(c) * c->C * (c->E - c->topk);
    }
    return tokens * (6.0 * matmul + 12.0 * c->L * (double)seq * d);
}

static const char *gib(char *b, size_t n, double bytes) {
    snprintf(b, n, "%.4g GiB", bytes / 1073741824.0);
    return b;
}

static void part(FILE *f, const char *name, double t, double step) {
    if (t > 0) fprintf(f, "  %-36s %12.6g s  %5.1f%%\n", name, t, step > 0 ? 100 * t / step : 0);
}

static mdc_status write_json(const char *path, const mdc_predict_input *in, double step, const double *parts,
                             const char *const *names, int nparts, double mfu, double hfu, const size_t *peak,
                             double cap, double energy, double tokens) {
    mdc_atomic a;
    mdc_status st = mdc_atomic_open(&a, path);
    if (st) return st;
    FILE *f = a.f;
    fprintf(f, "{\n  \"device\": \"%s\",\n  \"gpus\": %d,\n  \"step_s\": %.9g,\n  \"parts_s\": {",
            in->dev ? mdc_device_get_spec(in->dev)->name : "?", in->gpus, step);
    for (int k = 0; k < nparts; k++) fprintf(f, "%s\"%s\": %.9g", k ? ", " : "", names[k], parts[k]);
    fprintf(f, "},\n  \"mfu\": %.6g,\n  \"hfu\": %.6g,\n  \"peak_hbm_bytes\": {", mfu, hfu);
    for (int k = 0; k <= MDC_MEM_COUNT; k++)
        fprintf(f, "%s\"%s\": %zu", k ? ", " : "", mdc_mem_category_name((mdc_mem_category)k), peak[k]);
    fprintf(f, "},\n  \"hbm_capacity_bytes\": %.0f,\n  \"energy_j_per_step\": %.9g,\n  \"energy_j_per_token\": %.9g,\n",
            cap, energy, energy / tokens);
    fprintf(f, "  \"folded\": %s,\n  \"wall_s\": %.3f\n}\n", in->fold ? "true" : "false", in->wall);
    return mdc_atomic_commit(&a, !ferror(f), path);
}

mdc_status mdc_predict_report(mdc_runtime *rt, const mdc_predict_input *in, FILE *f) {
    proc_summary mine, *all = NULL;
    memset(&mine, 0, sizeof mine);
    mine.mesh_rank = mdc_transport_rank(rt->tr);
    mine.a = in->at[1], mine.b = in->at[2];
    mine.e = in->en[2].total - in->en[1].total;
    for (int k = 0; k <= MDC_MEM_COUNT; k++) mine.peak[k] = mdc_dev_mem_peak(in->dev, (mdc_mem_category)k);
    mdc_transport *t = NULL;
    mdc_group *g = NULL;
    mdc_status st = mdc_transport_create(&t, NULL, NULL, rt->opts.gpus_per_node);
    if (!st) st = mdc_group_world(&g, t);
    int me = st ? 0 : mdc_group_rank(g), np = st ? 1 : mdc_group_size(g);
    if (!st && me != 0) st = mdc_send(&mine, sizeof mine, 0, TAG_PREDICT, g);
    if (st || me != 0) goto done;
    all = calloc((size_t)np, sizeof *all);
    if (!all) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "predict: the report of %d processes", np);
        goto done;
    }
    all[0] = mine;
    for (int r = 1; r < np && !st; r++) st = mdc_recv(&all[r], sizeof all[r], r, TAG_PREDICT, g);
    if (st) goto done;

    const mdc_train_options *o = in->o;
    const mdc_gpt2_config *c = in->cfg;
    const mdc_device_spec *sp = mdc_device_get_spec(in->dev);
    double end1 = 0, end2 = 0, flops = 0, energy = 0,
           mult = in->fold ? (double)o->tp * o->dp * (in->fold_cp ? o->cp : 1) : 1;
    int crit = 0;
    size_t peak[MDC_MEM_COUNT + 1] = {0};
    int worst = 0;
    for (int r = 0; r < np; r++) {
        if (all[r].a.now > end1) end1 = all[r].a.now;
        if (all[r].b.now > end2) end2 = all[r].b.now, crit = r;
        flops += (all[r].b.flops - all[r].a.flops) * mult;
        energy += all[r].e * mult;
        if (all[r].peak[MDC_MEM_COUNT] > peak[MDC_MEM_COUNT]) worst = r, memcpy(peak, all[r].peak, sizeof peak);
    }
    double step = end2 - end1, tokens = (double)o->B * o->seq;
    const mdc_dev_counters *a = &all[crit].a, *b = &all[crit].b;
    enum { NP = 3 + 2 * MDC_TRAFFIC_COUNT };
    double parts[NP];
    const char *names[NP];
    char label[NP][48];
    int np2 = 0;
    parts[np2] = b->t_compute - a->t_compute, names[np2++] = "compute-bound kernels";
    parts[np2] = b->t_memory - a->t_memory, names[np2++] = "memory-bound kernels";
    for (int k = 1; k <= MDC_TRAFFIC_COUNT; k++) {
        int cls = k % MDC_TRAFFIC_COUNT; /* "other" last */
        snprintf(label[np2], sizeof label[np2], "%s communication exposed", mdc_traffic_name((mdc_traffic)cls));
        parts[np2] = b->t_comm_by[cls] - a->t_comm_by[cls], names[np2] = label[np2], np2++;
        snprintf(label[np2], sizeof label[np2],
                 cls == MDC_TRAFFIC_PP ? "pipeline bubble (waiting on a stage)" : "waiting on %s peers",
                 mdc_traffic_name((mdc_traffic)cls));
        parts[np2] = b->t_idle_by[cls] - a->t_idle_by[cls], names[np2] = label[np2], np2++;
    }
    double opt = b->t_optimizer - a->t_optimizer;
    int half = o->precision != 0;
    double peak_flops = half ? sp->flops_bf16 : sp->flops_fp32;
    double mf = model_flops(c, tokens, o->seq), mfu = mf / (in->gpus * step * peak_flops);
    double hfu = flops / (in->gpus * step * peak_flops), cap = mdc_device_capacity(in->dev);

    fprintf(f,
            "predict: %s L=%d C=%d H=%d V=%d seq %d (%.4g parameters), global batch %d x %d tokens, %s, recompute %s\n",
            mdc_gpt2_family_name(c->family), c->L, c->C, c->H, c->V, o->seq, (double)mdc_gpt2_param_count(c), o->B,
            o->seq, half ? (o->precision == MDC_PRECISION_BF16 ? "bf16" : "fp16") : "fp32",
            o->recompute == 2   ? "full"
            : o->recompute == 1 ? "selective"
                                : "none");
    fprintf(
        f, "mesh: tp %d%s x cp %d x dp %d x pp %d = %d GPUs (%s, %d per node); %s schedule, %d micro-batch(es) of %d\n",
        o->tp, o->sp ? " (SP)" : "", o->cp, o->dp, o->pp, in->gpus, sp->name, rt->opts.gpus_per_node,
        o->pp > 1 ? (o->schedule ? o->schedule : "1f1b") : "no pipeline", o->accum, o->B / o->dp / o->accum);
    const char *ar = mdc_coll_get_algo(MDC_COLL_ALLREDUCE);
    fprintf(f, "collectives: reduce-scatter %s, all-gather %s, all-reduce %s\n",
            mdc_coll_get_algo(MDC_COLL_REDUCE_SCATTER), mdc_coll_get_algo(MDC_COLL_ALLGATHER),
            strcmp(ar, "nccl") ? ar : "ring or tree, whichever costs less on its group's links (NCCL's choice)");
    if (c->E > 0)
        fprintf(f,
                "moe: %d experts, top %d, balanced routing (every expert gets %d/%d of the tokens: the routing a "
                "prediction assumes; train --moe-routing balanced runs it)\n",
                c->E, c->topk, c->topk, c->E);
    if (in->fold)
        fprintf(f,
                "folded: %d process(es) ran, one per pipeline stage%s, each standing for its tp x %sdp = %.0f GPUs%s "
                "(%.1f s on this host)\n",
                np, in->fold_cp ? "" : " and cp rank", in->fold_cp ? "cp x " : "", mult,
                in->replays > 0
                    ? "; not exact: the tree's all-reduces over folded ranks were replayed, each charged its last "
                      "member's end (an upper bound)"
                : in->fold_mismatch > 0 ? "; mirrored messages differed from their receives by a ring's uneven chunks"
                                        : "; exact: every mirrored message matched its receive",
                in->wall);
    else fprintf(f, "not folded: every rank ran (%.1f s on this host)\n", in->wall);
    fprintf(f, "predicted step %.6g s  (mesh rank %d's step ends last; its parts:)\n", step, all[crit].mesh_rank);
    for (int k = 0; k < np2; k++) part(f, names[k], parts[k], step);
    if (opt > 0) fprintf(f, "  (of the kernels, the optimizer's update %.6g s)\n", opt);
    fprintf(f,
            "MFU %.1f%%: model FLOPs 6 x %smatmul parameters + 12 L seq d per token = %.4g per step, over %d GPUs x "
            "%.4g s x %.4g FLOP/s\n",
            100 * mfu, c->E ? "active " : "", mf, in->gpus, step, peak_flops);
    fprintf(f, "HFU %.1f%%: the %.4g FLOPs the kernels charged (recomputation included)\n", 100 * hfu, flops);
    char x[32], y[32];
    fprintf(f, "peak HBM per GPU %s of %s (mesh rank %d):", gib(x, sizeof x, (double)peak[MDC_MEM_COUNT]),
            gib(y, sizeof y, cap), all[worst].mesh_rank);
    int big = 0;
    for (int k = 0; k < MDC_MEM_COUNT; k++) {
        if (peak[k] > peak[big]) big = k;
        if (peak[k])
            fprintf(f, " %s %s", mdc_mem_category_name((mdc_mem_category)k), gib(x, sizeof x, (double)peak[k]));
    }
    fprintf(f, "\n");
    if ((double)peak[MDC_MEM_COUNT] > cap)
        fprintf(f, "OUT OF MEMORY: %s over the capacity; the largest category is %s (%s)\n",
                gib(x, sizeof x, (double)peak[MDC_MEM_COUNT] - cap), mdc_mem_category_name((mdc_mem_category)big),
                gib(y, sizeof y, (double)peak[big]));
    fprintf(f, "energy per step %.6g J (all %d GPUs), %.6g J per token\n", energy, in->gpus, energy / tokens);
    if (in->json) st = write_json(in->json, in, step, parts, names, np2, mfu, hfu, peak, cap, energy, tokens);
done:
    free(all);
    mdc_group_free(g);
    mdc_transport_free(t);
    return st;
}
