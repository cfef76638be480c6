/* The trainer's replica check and reports (include/minidc/train.h): every replica compared bit
 * for bit over its group, the schemes' figures beside their formulas, as text and as JSON. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "minidc/kernels.h"
#include "trainer_internal.h"

/* ---- replicas --------------------------------------------------------------------------------- */

typedef struct {
    uint64_t *h, *kv, *xs; /* per local tensor: the tp replicas', a shared kv head's, an expert shard's */
    const mdc_gpt2 *m;
} hash_ctx;
static void hash_run(uint64_t *h, const float *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n * sizeof(float); i++) *h = (*h ^ b[i]) * 0x100000001b3ull; /* FNV-1a */
}
static void hash_visit(void *vc, int ti, size_t at, float *grad, float *param, size_t n) {
    (void)grad, (void)at;
    hash_ctx *c = vc;
    const mdc_param_tensor *t = mdc_gpt2_local_tensor(c->m, ti);
    if (t->split == MDC_SPLIT_NONE) hash_run(&c->h[ti], param, n);
    else if (mdc_gpt2_kv_copy(c->m, ti)) hash_run(&c->kv[ti], param, n);
    else if (mdc_gpt2_tensor_expert(mdc_gpt2_get_config(c->m), t->global) >= 0) hash_run(&c->xs[ti], param, n);
}

/* Tensor ti's hashes gathered over g: the first member whose hash differs from member 0's, or -1. */
static mdc_status differs(const uint64_t *mine, int n, mdc_group *g, int *who, int *which) {
    int k = mdc_group_size(g);
    uint64_t *all = malloc(sizeof(uint64_t) * (size_t)n * (size_t)k);
    if (!all) return mdc_fail(MDC_ERR_OOM_HOST, "replica check");
    mdc_status st = mdc_allgather(mine, all, (size_t)n, MDC_I64, g);
    *who = *which = -1;
    for (int q = 1; !st && q < k && *who < 0; q++)
        for (int i = 0; i < n; i++)
            if (all[(size_t)q * n + i] != all[i]) {
                *who = q, *which = i;
                break;
            }
    free(all);
    return st;
}

mdc_status mdc_trainer_check_replicas(mdc_trainer *t) {
    int n = mdc_gpt2_local_count(t->m), who, which;
    uint64_t *h = malloc(sizeof(uint64_t) * (size_t)n * 4), *full = h + n, *kv = h + 2 * n, *es = h + 3 * n;
    if (!h) return mdc_fail(MDC_ERR_OOM_HOST, "replica check");
    for (int i = 0; i < 4 * n; i++) h[i] = 0xcbf29ce484222325ull;
    hash_ctx c = {h, kv, es, t->m};
    if (t->dp) mdc_dp_for_each_segment(t->dp, hash_visit, &c);
    else
        for (int i = 0; i < n; i++) {
            const mdc_param_tensor *p = mdc_gpt2_local_tensor(t->m, i);
            hash_visit(&c, i, 0, NULL, mdc_gpt2_params(t->m) + p->offset, p->alloc);
        }
    /* every tensor whole, where each rank of the dense group holds all of it (not ZeRO-3's shards);
     * with ep an expert's tensors only where its replicas are: the expert group */
    uint64_t *xh = calloc((size_t)n, sizeof *xh);
    if (!xh) {
        free(h);
        return mdc_fail(MDC_ERR_OOM_HOST, "replica check");
    }
    if (t->tc.zero < 3)
        for (int i = 0; i < n; i++) {
            const mdc_param_tensor *p = mdc_gpt2_local_tensor(t->m, i);
            int expert = t->ep && mdc_gpt2_tensor_expert(&t->tc.cfg, p->global) >= 0;
            hash_run(expert ? &xh[i] : &full[i], mdc_gpt2_params(t->m) + p->offset, p->alloc);
        }
    mdc_status st = MDC_OK;
    const char *name = "";
    /* 1. tp: the replicated tensors (LayerNorms, wpe, row-parallel biases) */
    if (t->tp && !(st = differs(h, n, mdc_tp_group(t->tp), &who, &which)) && who >= 0)
        st = mdc_fail(MDC_ERR_MISMATCH,
                      "--check-replicas: after step %d the replicated tensor '%s' differs between tp "
                      "rank 0 and tp rank %d (dp rank %d): the tp ranks computed different bits (a reduction that did "
                      "not give every rank the same result)",
                      t->steps, mdc_gpt2_local_tensor(t->m, which)->name, who, t->dp_rank);
    /* 1b. tp > KV: a kv head's k, v slices on the tp ranks that share it */
    mdc_group *kvg = t->mesh && mdc_gpt2_kv_replicas(&t->tc.cfg, t->md.tp) > 1 ? mdc_mesh_group(t->mesh, MDC_MESH_KV)
                                                                               : NULL;
    if (!st && kvg && !(st = differs(kv, n, kvg, &who, &which)) && who >= 0)
        st = mdc_fail(MDC_ERR_MISMATCH,
                      "--check-replicas: after step %d the shared kv head's '%s' differs between tp rank %d and "
                      "tp rank %d (dp rank %d): its replicas' dk, dv sum or update did not give them the same bits",
                      t->steps, mdc_gpt2_local_tensor(t->m, which)->name, mdc_group_world_rank(kvg, 0) % t->md.tp,
                      mdc_group_world_rank(kvg, who) % t->md.tp, t->dp_rank);
    /* 1c. tp > etp: an expert shard on the tp ranks of the same etp rank */
    mdc_group *esg = t->etp && t->tc.etp < t->md.tp ? mdc_mesh_group(t->mesh, MDC_MESH_ETP_SHARD) : NULL;
    if (!st && esg && !(st = differs(es, n, esg, &who, &which)) && who >= 0)
        st = mdc_fail(MDC_ERR_MISMATCH,
                      "--check-replicas: after step %d the expert shard '%s' differs between tp rank %d and tp rank "
                      "%d (dp rank %d): the shard's gradient sum over its tp replicas or the update gave them other "
                      "bits",
                      t->steps, mdc_gpt2_local_tensor(t->m, which)->name, mdc_group_world_rank(esg, 0) % t->md.tp,
                      mdc_group_world_rank(esg, who) % t->md.tp, t->dp_rank);
    /* 2. the dense group (dp x cp x ep): every replica of the partition holds the same parameters */
    mdc_group *dense = t->mesh ? mdc_mesh_group(t->mesh, MDC_MESH_DENSE) : NULL;
    if (!st && t->tc.zero < 3 && dense && mdc_group_size(dense) > 1 && !(st = differs(full, n, dense, &who, &which)) &&
        who >= 0)
        st = mdc_fail(MDC_ERR_MISMATCH,
                      "--check-replicas: after step %d tensor '%s' differs between the data-parallel "
                      "replicas 0 and %d of the dense group (dp x cp x ep; tp rank %d, stage %d): the gradient "
                      "reduction or the update did not give every replica the same bits",
                      t->steps, mdc_gpt2_local_tensor(t->m, which)->name, who, t->tp_rank, t->pp_rank);
    mdc_group *xg = t->ep ? mdc_mesh_group(t->mesh, MDC_MESH_EXPERT) : NULL;
    if (!st && xg && mdc_group_size(xg) > 1 && !(st = differs(xh, n, xg, &who, &which)) && who >= 0)
        st = mdc_fail(MDC_ERR_MISMATCH,
                      "--check-replicas: after step %d expert tensor '%s' differs between replicas 0 "
                      "and %d of its expert-data-parallel group (tp rank %d, stage %d): the expert gradients' sum or "
                      "the update did not give every replica the same bits",
                      t->steps, mdc_gpt2_local_tensor(t->m, which)->name, who, t->tp_rank, t->pp_rank);
    free(xh);
    /* 3. the tied wte on the first and the last pipeline stage */
    mdc_group *embed = t->pp ? mdc_mesh_group(t->mesh, MDC_MESH_EMBED) : NULL;
    if (!st && embed && t->tc.zero < 3) {
        uint64_t w = 0xcbf29ce484222325ull;
        for (int i = 0; i < n; i++)
            if (mdc_gpt2_local_tensor(t->m, i)->global == 0) w = full[i], name = mdc_gpt2_local_tensor(t->m, i)->name;
        if (!(st = differs(&w, 1, embed, &who, &which)) && who >= 0)
            st = mdc_fail(MDC_ERR_MISMATCH,
                          "--check-replicas: after step %d the tied '%s' differs between the first "
                          "and the last pipeline stage (tp rank %d, dp rank %d): their gradient sum or update differed",
                          t->steps, name, t->tp_rank, t->dp_rank);
    }
    free(h);
    return st;
}

mdc_status mdc_trainer_moe_line(mdc_trainer *t, char *line, size_t cap) {
    if (t->tc.cfg.E && !t->moe_sum && !(t->moe_sum = calloc((size_t)t->tc.cfg.E + MDC_MOE_FIGURES, sizeof(double))))
        return mdc_fail(MDC_ERR_OOM_HOST, "MoE figures");
    return mdc_moe_step_line(t->m, t->ep, t->etp, t->mesh ? mdc_mesh_group(t->mesh, MDC_MESH_WORLD) : NULL,
                             t->plan.count_moe, t->plan.tokens, line, cap, t->moe_sum);
}

mdc_status mdc_trainer_timeline(mdc_trainer *t, const char *path) {
    if (!t->pp) return mdc_fail(MDC_ERR_INVALID, "--timeline draws a pipeline's schedule: it needs --pp 2 or more");
    if (t->tp_rank || t->dp_rank) return MDC_OK; /* one pipeline draws it: tp rank 0 of dp rank 0 */
    return mdc_pp_write_timeline(t->pp, path, mdc_device_get_spec(mdc_gpt2_device(t->m))->name);
}

void mdc_trainer_report(mdc_trainer *t, FILE *out) {
    if (t->pp && t->tp_rank == 0 && t->dp_rank == 0) (void)mdc_pp_report(t->pp, out);
    if (t->tp) mdc_tp_report(t->tp, t->m, t->tc.micro_batch, t->plan.seq, t->tc.accum, t->plan.sp_bytes, out);
    if (t->cp && t->tp_rank == 0 && t->dp_rank == 0 && t->pp_rank == 0)
        (void)mdc_cp_report(t->cp,
                            mdc_gpt2_acts_bytes(t->m, t->tc.micro_batch, t->plan.seq) + mdc_cp_scratch_bytes(t->cp),
                            mdc_gpt2_acts_bytes(t->m, t->tc.micro_batch, t->tc.seq), out);
    if (t->dp && t->tp_rank == 0) mdc_dp_report(t->dp, out);
    if (t->mesh && mdc_mesh_group(t->mesh, MDC_MESH_WORLD) &&
        mdc_group_rank(mdc_mesh_group(t->mesh, MDC_MESH_WORLD)) == 0 &&
        mdc_group_size(mdc_mesh_group(t->mesh, MDC_MESH_WORLD)) > 1)
        fprintf(out,
                "loss and gradient norm: an allreduce of 2 x %d doubles per step over each mesh axis of more than "
                "one rank in turn, %.0f bytes sent by rank 0\n",
                mdc_group_size(mdc_mesh_group(t->mesh, MDC_MESH_WORLD)), t->plan.scalar_bytes);
}

/* The figures of mdc_trainer_report as JSON (the --report file's "schemes"). */
char *mdc_trainer_report_json(mdc_trainer *t) {
    cJSON *root = cJSON_CreateObject(), *mesh = cJSON_AddObjectToObject(root, "mesh");
    const mdc_mesh_dims *d = &t->tc.dims;
    cJSON_AddNumberToObject(mesh, "tp", d->tp), cJSON_AddNumberToObject(mesh, "cp", d->cp);
    cJSON_AddNumberToObject(mesh, "ep", d->ep), cJSON_AddNumberToObject(mesh, "dp", d->dp);
    cJSON_AddNumberToObject(mesh, "pp", d->pp), cJSON_AddBoolToObject(mesh, "sp", t->tc.sp);
    cJSON_AddNumberToObject(root, "scalar_allreduce_bytes", t->plan.scalar_bytes);
    { /* activation recomputation: the mode, a layer's kept floats and the work region's */
        static const char *const rc[3] = {"none", "selective", "full"};
        cJSON *r = cJSON_AddObjectToObject(root, "recompute");
        cJSON_AddStringToObject(r, "mode", rc[mdc_gpt2_get_recompute(t->m)]);
        cJSON_AddNumberToObject(r, "layer_floats",
                                (double)mdc_gpt2_acts_layer_floats(t->m, t->tc.micro_batch, t->plan.seq));
        cJSON_AddNumberToObject(r, "work_floats",
                                (double)mdc_gpt2_acts_work_floats(t->m, t->tc.micro_batch, t->plan.seq));
    }
    if (t->tp) {
        static const char *const kind[MDC_TP_KINDS] = {"allreduce_bsh", "allreduce_loss", "allgather_bsh",
                                                       "reduce_scatter_bsh"};
        mdc_tp_counts c;
        double fc[MDC_TP_KINDS], fb[MDC_TP_KINDS];
        mdc_tp_get_counts(t->tp, &c);
        mdc_tp_formulas(t->tp, t->m, t->tc.micro_batch, t->plan.seq, t->tc.accum, fc, fb);
        cJSON *tp = cJSON_AddObjectToObject(root, "tensor_parallel");
        for (int i = 0; i < MDC_TP_KINDS; i++) {
            cJSON *k = cJSON_AddObjectToObject(tp, kind[i]);
            cJSON_AddNumberToObject(k, "calls", (double)c.calls[i]), cJSON_AddNumberToObject(k, "calls_formula", fc[i]);
            cJSON_AddNumberToObject(k, "bytes", c.bytes[i]), cJSON_AddNumberToObject(k, "bytes_formula", fb[i]);
        }
        cJSON_AddNumberToObject(tp, "sp_gradient_allreduce_bytes", t->plan.sp_bytes);
        cJSON_AddNumberToObject(tp, "parameter_floats", (double)mdc_gpt2_local_floats(t->m));
        cJSON_AddNumberToObject(tp, "activation_floats_per_layer",
                                (double)mdc_gpt2_acts_layer_floats(t->m, t->tc.micro_batch, t->plan.seq));
    }
    if (t->cp) {
        double f[4];
        mdc_cp_figures(t->cp, f);
        cJSON *cp = cJSON_AddObjectToObject(root, "context_parallel");
        cJSON_AddNumberToObject(cp, "attention_pairs_per_layer", f[0]),
            cJSON_AddNumberToObject(cp, "pairs_formula", f[1]);
        cJSON_AddNumberToObject(cp, "bytes_per_layer", f[2]), cJSON_AddNumberToObject(cp, "bytes_formula", f[3]);
    }
    if (t->dp) {
        mdc_dp_figures f;
        mdc_dp_get_figures(t->dp, &f);
        cJSON *dp = cJSON_AddObjectToObject(root, "data_parallel");
        cJSON_AddNumberToObject(dp, "zero", f.zero), cJSON_AddNumberToObject(dp, "ranks", f.N);
        cJSON_AddNumberToObject(dp, "psi_floats", (double)f.psi),
            cJSON_AddNumberToObject(dp, "shard_floats", (double)f.shard);
        static const char *const mem[3] = {"parameter_bytes", "gradient_bytes", "optimizer_bytes"};
        for (int i = 0; i < 3; i++) {
            cJSON *k = cJSON_AddObjectToObject(dp, mem[i]);
            cJSON_AddNumberToObject(k, "measured", (double)f.mem[i]),
                cJSON_AddNumberToObject(k, "exact", (double)f.mem_want[i]);
            cJSON_AddNumberToObject(k, "formula", f.mem_formula[i]);
        }
        cJSON_AddNumberToObject(dp, "step_bytes", f.step_bytes);
        cJSON_AddNumberToObject(dp, "step_bytes_exact", f.step_bytes_want);
        cJSON_AddNumberToObject(dp, "step_bytes_formula", f.step_bytes_formula);
    }
    if (t->tc.cfg.E) mdc_moe_report_json(t->m, t->ep, t->etp, t->moe_sum, root);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    char *out = text ? strdup(text) : NULL; /* plain malloc'd text for the caller's free() */
    cJSON_free(text);
    return out;
}

/* ---- the dump's parameter gradients ------------------------------------------------------- */
typedef struct {
    mdc_gpt2 *m;
    mdc_tensorfile *tf;
    int step;
    mdc_status st;
} dump_ctx;
static void dump_visit(void *vc, int ti, size_t at, float *grad, float *param, size_t n) {
    (void)param;
    dump_ctx *c = vc;
    if (!c->st) c->st = mdc_gpt2_dump_grad_piece(c->m, c->tf, c->step, ti, grad, at, n);
}

mdc_status mdc_trainer_dump_grads(mdc_trainer *t, mdc_tensorfile *tf, int step) {
    if (!t->dp) return mdc_gpt2_dump_grads(t->m, tf, step);
    dump_ctx c = {t->m, tf, step, MDC_OK};
    mdc_dp_for_each_segment(t->dp, dump_visit, &c); /* ZeRO: this rank's shard */
    return c.st;
}
