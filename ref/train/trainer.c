/* The trainer (include/minidc/train.h): one object that runs any mesh. It builds the mesh's
 * groups, this rank's model partition (initialized by global element index, so every shard is
 * the serial slice), the tensor-parallel communication points, the data-parallel component on
 * the dense data-parallel group, and the step plan; it moves state between the local layouts
 * and the serial (global) one for checkpoints and checks. The serial model is the trainer
 * without a transport. The replica check and the reports: ref/train/trainer_check.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/kernels.h"
#include "trainer_internal.h"

static int coord(const mdc_trainer *t, mdc_axis a) { return mdc_i_coord(t, a); }

/* The partition of tp rank q on pipeline stage s: chunk c holds virtual stage c p + s of the
 * p v (v chunks per stage, Megatron's interleaving map), its layers from the layout or an even
 * split with the first virtual stages one more; the embedding on the first stage, the head on
 * the last. */
static mdc_gpt2_part stage_part(const mdc_trainer_config *tc, int q, int s, int er) {
    const mdc_mesh_dims *d = &tc->dims;
    mdc_gpt2_part part = mdc_gpt2_part_serial(&tc->cfg);
    part.tp = d->tp, part.tp_rank = q, part.sp = tc->sp, part.ep = d->ep, part.ep_rank = er, part.etp = tc->etp;
    if (d->pp > 1) {
        int v = tc->pp_chunks > 1 ? tc->pp_chunks : 1, P = d->pp * v, L = tc->cfg.L, lo = 0;
        part.chunks = v;
        for (int vs = 0; vs < P; vs++) {
            int n = tc->pp_layout ? tc->pp_layout[vs] : L / P + (vs < L % P);
            if (vs % d->pp == s) part.lo[vs / d->pp] = lo, part.hi[vs / d->pp] = lo + n;
            lo += n;
        }
        part.has_embed = s == 0, part.has_head = s == d->pp - 1;
    }
    return part;
}

mdc_status mdc_trainer_create(mdc_trainer **out, mdc_transport *tr, mdc_device *dev, const mdc_trainer_config *tc,
                              uint64_t seed) {
    *out = NULL;
    const mdc_mesh_dims *d = &tc->dims;
    if (d->ep > 1 && (d->dp % d->ep || !tc->cfg.E))
        return mdc_fail(MDC_ERR_INVALID,
                        !tc->cfg.E ? "--ep %d: expert parallelism needs a mixture of experts (--experts)"
                                   : "--ep %d does not divide --dp %d (the ep ranks are data-parallel ranks)",
                        d->ep, d->dp);
    if (tc->cfg.E && (tc->moe.capacity_factor > 0 || tc->moe.aux_alpha > 0) && (tc->sp || d->cp > 1))
        return mdc_fail(MDC_ERR_INVALID,
                        "--capacity-factor and --moe-aux-loss route a whole sequence as one group, "
                        "which --%s splits over ranks: use them without it (dropless routing and --moe-z-loss work)",
                        tc->sp ? "sp" : "cp");
    if (d->ep > 1 && tc->zero)
        return mdc_fail(MDC_ERR_INVALID, "--ep %d with --zero %d: expert parallelism reduces as DDP (--zero 0)", d->ep,
                        tc->zero);
    if (d->pp * (tc->pp_chunks > 1 ? tc->pp_chunks : 1) > tc->cfg.L)
        return mdc_fail(MDC_ERR_INVALID, "--pp %d x %d chunks: more virtual stages than the model's %d layers", d->pp,
                        tc->pp_chunks > 1 ? tc->pp_chunks : 1, tc->cfg.L);
    if (tc->pp_chunks > MDC_GPT2_MAX_CHUNKS)
        return mdc_fail(MDC_ERR_INVALID, "--virtual-stages %d: at most %d", tc->pp_chunks, MDC_GPT2_MAX_CHUNKS);
    if (!tr && d->tp * d->cp * d->dp * d->pp != 1)
        return mdc_fail(MDC_ERR_INVALID, "a mesh of more than one rank needs a transport (run under mpiexec.mpich)");
    if (tc->micro_batch <= 0 || tc->accum <= 0 || tc->seq <= 0)
        return mdc_fail(MDC_ERR_INVALID, "micro-batch %d x --accum %d x --seq %d: all must be positive",
                        tc->micro_batch, tc->accum, tc->seq);
    if (d->cp > 1) {
        mdc_status cs = mdc_cp_check(d->cp, tc->seq, tc->cfg.H / d->tp, mdc_gpt2_kv_heads_local(&tc->cfg, d->tp),
                                     tc->cp_layout, tc->cp_algo);
        if (cs) return cs;
    }
    int Tl = tc->seq / (d->cp > 1 ? d->cp : 1); /* the positions of each sequence on this rank */
    mdc_trainer *t = calloc(1, sizeof *t);
    if (!t) return mdc_fail(MDC_ERR_OOM_HOST, "trainer");
    t->tc = *tc;
    t->md = *d, t->md.dp = d->dp / d->ep;
    mdc_status st = MDC_OK;
    int kvr = mdc_gpt2_kv_replicas(&tc->cfg, d->tp);
    if (tr && (st = mdc_mesh_create(&t->mesh, tr, &t->md))) goto fail;
    if (t->mesh && kvr > 1 && (st = mdc_mesh_set_kv_replicas(t->mesh, kvr))) goto fail;
    if (t->mesh && tc->etp > 1 && (st = mdc_mesh_set_etp(t->mesh, tc->etp))) goto fail;
    t->tp_rank = coord(t, MDC_AXIS_TP);
    t->dp_rank = coord(t, MDC_AXIS_EP) + d->ep * coord(t, MDC_AXIS_DP), t->dp_size = d->dp,
    t->pp_rank = coord(t, MDC_AXIS_PP);
    mdc_gpt2_part part = stage_part(tc, t->tp_rank, t->pp_rank, coord(t, MDC_AXIS_EP));
    if ((st = mdc_gpt2_part_check(&part, &tc->cfg, Tl))) goto fail;
    if (d->tp > 1 && (st = mdc_tp_create(&t->tp, mdc_mesh_group(t->mesh, MDC_MESH_TP), tc->sp))) goto fail;
    if (t->tp && kvr > 1) mdc_tp_set_kv_group(t->tp, mdc_mesh_group(t->mesh, MDC_MESH_KV));
    if ((st = mdc_gpt2_create_part(&t->m, dev, &tc->cfg, &part, t->tp ? mdc_tp_comm(t->tp) : NULL, tc->micro_batch, Tl,
                                   mdc_dp_model_flags(tc->zero) | MDC_GPT2_LAZY_ACTS |
                                       (tc->precision ? MDC_GPT2_MASTER : 0))))
        goto fail;
    mdc_gpt2_init(t->m, seed);
    if ((st = mdc_gpt2_set_moe(t->m, &tc->moe))) goto fail;
    if (d->ep > 1 &&
        (st = mdc_ep_create(&t->ep, mdc_mesh_group(t->mesh, MDC_MESH_EP), mdc_mesh_group(t->mesh, MDC_MESH_DENSE),
                            mdc_mesh_group(t->mesh, MDC_MESH_EXPERT), t->m)))
        goto fail;
    if (tc->etp > 1 && (st = mdc_etp_create(&t->etp, mdc_mesh_group(t->mesh, MDC_MESH_ETP), tc->sp, t->m))) goto fail;
    if (d->cp > 1) { /* before the activation sets: attention then keeps each row's lse */
        int hs = tc->cfg.head_dim > 0 ? tc->cfg.head_dim : tc->cfg.C / tc->cfg.H;
        if ((st = mdc_cp_create(&t->cp, mdc_mesh_group(t->mesh, MDC_MESH_CP), dev, tc->seq, tc->micro_batch,
                                tc->cfg.H / d->tp, mdc_gpt2_kv_heads_local(&tc->cfg, d->tp), hs, tc->cp_layout,
                                tc->cp_algo)))
            goto fail;
        if (kvr > 1) mdc_cp_set_kv_sum(t->cp, mdc_tp_kv_sum_exact, t->tp);
        if ((st = mdc_gpt2_set_cp(t->m, mdc_cp_model(t->cp)))) goto fail;
        mdc_cp_set_forwards(t->cp, (tc->recompute == MDC_RECOMPUTE_FULL) + mdc_gpt2_lb_on(t->m));
        if (tc->exact_block && (st = mdc_cp_set_exact(t->cp, tc->exact_block))) goto fail;
        t->cp_tok = malloc(2 * sizeof(int) * (size_t)tc->accum * tc->micro_batch * Tl);
        if (!t->cp_tok) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "trainer");
            goto fail;
        }
    }
    if (tc->dropout > 0 && (st = mdc_gpt2_set_dropout(t->m, tc->dropout, seed))) goto fail;
    if (tc->recompute && (st = mdc_gpt2_set_recompute(t->m, tc->recompute))) goto fail;
    if (tc->precision && (st = mdc_gpt2_set_precision(t->m, tc->precision))) goto fail;
    if (tc->precision == MDC_PRECISION_FP16) {
        const char *f = getenv("MINIDC_FAULT_INF_STEP");
        t->fault_inf_step = f ? atoi(f) : 0, t->fault_inf_on = f && strchr(f, '+');
    }
    if (tc->exact_block && (st = mdc_gpt2_set_exact(t->m, tc->exact_block))) goto fail; /* before dp attaches */
    if (tc->exact_block && t->tp) mdc_tp_set_exact(t->tp, 1);
    mdc_dtype half = tc->precision == MDC_PRECISION_BF16 ? MDC_BF16 : MDC_F16;
    if (tc->precision && !tc->exact_block && t->tp) mdc_tp_set_dtype(t->tp, half); /* exact: exact sums */
    if (tc->precision && t->ep) mdc_ep_set_dtype(t->ep, half); /* rows: the same values either way */
    if (tc->precision && !tc->exact_block && t->cp) mdc_cp_set_dtype(t->cp, half);
    if (tc->grad_reduce && (st = mdc_gpt2_set_grad16(t->m, 1))) goto fail; /* before dp attaches */
    if ((d->dp * d->cp > 1 || tc->zero) && !t->ep) { /* cp ranks hold the gradients of their tokens too */
        mdc_dp_config dc = {tc->zero, tc->micro_batch, tc->accum, Tl, tc->bucket_bytes, tc->poison, tc->prefetch};
        mdc_group *g = t->mesh ? mdc_mesh_group(t->mesh, MDC_MESH_DENSE) : NULL;
        if (!g) {
            st = mdc_fail(MDC_ERR_INVALID, "--zero %d needs a transport (run under mpiexec.mpich)", tc->zero);
            goto fail;
        }
        if ((st = mdc_dp_attach(&t->dp, g, t->m, &dc))) goto fail;
        if (d->pp > 1) mdc_dp_defer(t->dp);
    }
    if (tc->grad_reduce && t->ep) {
        st = mdc_fail(MDC_ERR_INVALID,
                      "--grad-reduce bf16 with --ep %d: expert parallelism reduces its gradients in "
                      "fp32 only",
                      d->ep);
        goto fail;
    }
    if (d->pp > 1 &&
        (st = mdc_pp_create(&t->pp, t->m, mdc_mesh_group(t->mesh, MDC_MESH_PP), tc->schedule ? tc->schedule : "1f1b",
                            tc->accum, tc->micro_batch, Tl, tc->pp_chunks > 1 ? tc->pp_chunks : 1)))
        goto fail;
    int n = mdc_gpt2_local_count(t->m), any_partial = 0, any_etp = 0;
    if (d->tp > 1 || d->pp > 1 || t->ep) {
        t->skip = calloc((size_t)n, 1), t->sp_partial = calloc((size_t)n, 1);
        if (!t->skip || !t->sp_partial) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "trainer");
            goto fail;
        }
        for (int i = 0; i < n; i++) {
            const mdc_param_tensor *p = mdc_gpt2_local_tensor(t->m, i);
            int replicated = p->split == MDC_SPLIT_NONE;
            t->skip[i] = replicated && t->tp_rank > 0;               /* counted once, on tp rank 0 */
            t->skip[i] |= mdc_gpt2_kv_copy(t->m, i) == 2;            /* a kv head's: on its first replica */
            t->skip[i] |= (char)mdc_gpt2_etp_copy(t->m, i);          /* an expert shard's: on the first etp group */
            t->sp_partial[i] = (char)mdc_gpt2_grad_partial(t->m, i); /* summed over tp (or etp_shard) by the step */
            any_partial |= t->sp_partial[i] == MDC_GRAD_PARTIAL_TP, any_etp |= t->sp_partial[i] == MDC_GRAD_PARTIAL_ETP;
            if (p->global == 0 && d->pp > 1 && t->pp_rank > 0) t->skip[i] = 1; /* the tied wte: the first stage's */
        }
        if (t->ep) mdc_ep_norm_skip(t->ep, t->skip); /* each sum counted once: by its group's rank 0 */
    }
    mdc_step_plan *p = &t->plan;
    *p = mdc_step_plan_default(t->m);
    p->dp = t->dp;
    p->loss_scale = tc->precision == MDC_PRECISION_FP16 ? 65536.0f : 0; /* 2^16, as Megatron and apex start */
    if (t->ep) p->reduce = mdc_ep_reduce, p->reduce_ctx = t->ep;
    p->sum_group = t->mesh ? mdc_mesh_group(t->mesh, MDC_MESH_WORLD) : NULL;
    static const mdc_mesh_group_kind axes[5] = {MDC_MESH_TP, MDC_MESH_CP, MDC_MESH_EP, MDC_MESH_DP, MDC_MESH_PP};
    for (int k = 0; t->mesh && k < 5; k++) p->sum_axes[k] = mdc_mesh_group(t->mesh, axes[k]);
    p->tp_group = any_partial && t->tp ? mdc_tp_group(t->tp) : NULL;
    p->etp_group = any_etp ? mdc_mesh_group(t->mesh, MDC_MESH_ETP_SHARD) : NULL;
    p->count_loss = t->tp_rank == 0 && t->pp_rank == d->pp - 1; /* the last stage has the loss */
    p->count_moe = tc->sp || t->tp_rank == 0;                   /* with SP each tp rank routes its own tokens */
    p->pp = t->pp;
    p->embed_group = t->pp && mdc_gpt2_tied(mdc_gpt2_get_config(t->m)) ? mdc_mesh_group(t->mesh, MDC_MESH_EMBED) : NULL;
    p->row0 = t->dp_rank * tc->accum * tc->micro_batch;
    p->skip = t->skip;
    p->sp_partial = any_partial || any_etp ? t->sp_partial : NULL;
    p->micro_batch = tc->micro_batch, p->accum = tc->accum, p->seq = Tl;
    p->tokens = (double)tc->micro_batch * tc->seq * tc->accum * d->dp;
    p->dloss = 1.0f / ((float)tc->micro_batch * (float)tc->accum * (float)d->dp * (float)tc->seq);
    /* the default activation set at its final layout (a pipeline stage's schedule keeps its own) */
    if (!t->pp && (st = mdc_gpt2_default_acts_create(t->m))) goto fail;
    *out = t;
    return MDC_OK;
fail:
    mdc_trainer_free(t);
    return st;
}

void mdc_trainer_free(mdc_trainer *t) {
    if (!t) return;
    mdc_pp_free(t->pp);
    mdc_cp_free(t->cp);
    mdc_ep_free(t->ep);
    mdc_etp_free(t->etp);
    free(t->cp_tok);
    free(t->moe_sum);
    mdc_dp_free(t->dp);
    mdc_gpt2_free(t->m);
    mdc_tp_free(t->tp);
    mdc_mesh_free(t->mesh);
    free(t->skip), free(t->sp_partial);
    free(t);
}

mdc_gpt2 *mdc_trainer_model(mdc_trainer *t) { return t->m; }
const mdc_mesh *mdc_trainer_mesh(const mdc_trainer *t) { return t->mesh; }
int mdc_trainer_adam_step(const mdc_trainer *t) { return t->dp ? mdc_dp_adam_step(t->dp) : mdc_gpt2_adam_step(t->m); }

mdc_status mdc_trainer_grads(mdc_trainer *t, const int *inputs, const int *targets) {
    int rows = t->tc.accum * t->tc.micro_batch;
    size_t off = (size_t)t->dp_rank * rows * t->tc.seq;
    if (t->tp) mdc_tp_reset_counts(t->tp);
    if (t->ep) mdc_ep_reset_counts(t->ep);
    if (t->etp) mdc_etp_reset_counts(t->etp);
    mdc_gpt2_set_dropout_step(t->m, (uint64_t)mdc_trainer_adam_step(t)); /* resumed runs draw the same masks */
    mdc_group *w = t->mesh ? mdc_mesh_group(t->mesh, MDC_MESH_WORLD) : NULL;
    int k = t->fault_inf_step, s = t->steps + 1; /* "k": step k; "k+": every step from k */
    t->plan.plant_inf = k > 0 && (s == k || (t->fault_inf_on && s > k)) && (!w || mdc_group_rank(w) == 0);
    if (t->cp) { /* this rank's chunks of every sequence */
        size_t n = (size_t)rows * t->plan.seq;
        mdc_cp_reset_counts(t->cp);
        mdc_cp_slice(t->cp, t->cp_tok, inputs + off, rows);
        mdc_cp_slice(t->cp, t->cp_tok + n, targets + off, rows);
        return mdc_step_grads(&t->plan, t->cp_tok, t->cp_tok + n);
    }
    return mdc_step_grads(&t->plan, inputs + off, targets + off);
}

/* Aux-loss-free balancing: the global batch's assignments per block and expert, the same bias
 * update on every rank. */
static mdc_status moe_bias_step(mdc_trainer *t) {
    size_t n = (size_t)mdc_gpt2_moe_blocks(&t->tc.cfg) * t->tc.cfg.E;
    double *c = calloc(n, sizeof *c);
    if (!c) return mdc_fail(MDC_ERR_OOM_HOST, "MoE bias update");
    if (t->plan.count_moe) memcpy(c, mdc_gpt2_moe_counts(t->m), n * sizeof *c);
    mdc_group *w = t->mesh ? mdc_mesh_group(t->mesh, MDC_MESH_WORLD) : NULL;
    mdc_status st = w && mdc_group_size(w) > 1 ? mdc_allreduce(MDC_IN_PLACE, c, n, MDC_F64, MDC_SUM, w) : MDC_OK;
    if (!st) mdc_gpt2_moe_bias_update(t->m, c);
    free(c);
    return st;
}

/* fp16: the scale after a step (skipped: halved; MDC_LOSS_SCALE_WINDOW clean ones: doubled) */
static mdc_status loss_scale_step(mdc_trainer *t) {
    mdc_step_plan *p = &t->plan;
    if (!p->skipped) {
        if (++t->clean_steps == MDC_LOSS_SCALE_WINDOW) p->loss_scale *= 2, t->clean_steps = 0;
        return MDC_OK;
    }
    t->skipped_steps++, t->clean_steps = 0;
    if (p->loss_scale < 2.0f)
        return mdc_fail(MDC_ERR_MISMATCH,
                        "step %d: fp16 loss scale underflow: the gradients overflow (inf or NaN) even at scale 1, "
                        "after %d skipped steps (try --precision bf16 or a smaller --lr)",
                        t->steps + 1, t->skipped_steps);
    p->loss_scale /= 2;
    return MDC_OK;
}

mdc_loss_scale mdc_trainer_loss_scale(const mdc_trainer *t) {
    mdc_loss_scale s = {t->plan.loss_scale, t->clean_steps, t->skipped_steps, t->plan.skipped};
    return s;
}

void mdc_trainer_set_loss_scale(mdc_trainer *t, const mdc_loss_scale *s) {
    if (t->plan.loss_scale > 0 && s->scale > 0) t->plan.loss_scale = s->scale, t->clean_steps = s->clean;
    t->skipped_steps = s->skipped;
}

mdc_status mdc_trainer_finish_step(mdc_trainer *t, const mdc_adamw_config *o, float *loss, float *grad_norm) {
    mdc_status st = mdc_step_update(&t->plan, o, loss, grad_norm);
    if (!st && t->plan.loss_scale > 0) st = loss_scale_step(t);
    if (!st && t->tc.moe.bias_rate > 0 && t->tc.cfg.E && !t->plan.skipped) st = moe_bias_step(t);
    t->steps++;
    if (!st && t->tc.check_replicas && t->mesh) st = mdc_trainer_check_replicas(t);
    return st;
}

mdc_status mdc_trainer_step(mdc_trainer *t, const int *inputs, const int *targets, const mdc_adamw_config *o,
                            float *loss, float *grad_norm) {
    mdc_status st = mdc_trainer_grads(t, inputs, targets);
    return st ? st : mdc_trainer_finish_step(t, o, loss, grad_norm);
}

/* ---- state in the global layout ------------------------------------------------------------- */

/* This rank's local arrays (params, m, v) in full local layout, gathered over data parallelism
 * to the dense group's rank 0 (the others get nothing: *have = 0). */
static int dense_root(const mdc_trainer *t) { /* rank 0 of the dense group (dp x cp x ep); with ep every
                                                 ep rank of it (each holds its own experts) */
    return coord(t, MDC_AXIS_DP) == 0 && coord(t, MDC_AXIS_CP) == 0 && (t->ep || coord(t, MDC_AXIS_EP) == 0);
}

static mdc_status local_state(mdc_trainer *t, float *lp, float *lm, float *lv, int *have) {
    size_t bytes = mdc_gpt2_local_floats(t->m) * sizeof(float);
    *have = dense_root(t);
    if (t->dp) return mdc_dp_gather_state(t->dp, lp, lm, lv, 0);
    memcpy(lp, mdc_gpt2_params(t->m), bytes);
    float *am = mdc_gpt2_adam_m(t->m), *av = mdc_gpt2_adam_v(t->m);
    am ? (void)memcpy(lm, am, bytes) : (void)memset(lm, 0, bytes);
    av ? (void)memcpy(lv, av, bytes) : (void)memset(lv, 0, bytes);
    return MDC_OK;
}

static mdc_status gather_global(mdc_trainer *t, float *params, float *m, float *v, float *grads, int root);

mdc_status mdc_trainer_gather(mdc_trainer *t, float *params, float *m, float *v, int root) {
    return gather_global(t, params, m, v, NULL, root);
}

mdc_status mdc_trainer_gather_grads(mdc_trainer *t, float *grads, int root) {
    if (t->tc.zero)
        return mdc_fail(MDC_ERR_INVALID, "gathering gradients: ZeRO-%d shards them (use --zero 0)", t->tc.zero);
    return gather_global(t, NULL, NULL, NULL, grads, root);
}

static mdc_status gather_global(mdc_trainer *t, float *params, float *m, float *v, float *grads, int root) {
    size_t L = mdc_gpt2_local_floats(t->m);
    int tp = t->tc.dims.tp, pp = t->tc.dims.pp, have = 0;
    mdc_group *world = t->mesh ? mdc_mesh_group(t->mesh, MDC_MESH_WORLD) : NULL;
    int me = !world || mdc_group_rank(world) == root;
    if (root != 0) return mdc_fail(MDC_ERR_INVALID, "mdc_trainer_gather: root %d (only world rank 0)", root);
    int K = grads ? 1 : 3; /* arrays moved: the gradients, or parameters and both moments */
    float *loc = malloc((size_t)K * L * sizeof(float)), *buf = NULL;
    mdc_gpt2 *lay = NULL;
    mdc_status st = loc ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "gathering the training state");
    if (!st && grads) { /* DDP: every replica holds the reduced gradients */
        memcpy(loc, mdc_gpt2_grads(t->m), L * sizeof(float));
        have = dense_root(t);
    } else if (!st) {
        st = local_state(t, loc, loc + L, loc + 2 * L, &have);
    }
    /* the dp-rank-0 rank of every (tp rank, stage) sends its local state to world rank 0 */
    if (!st && have && !me) st = mdc_send(loc, (size_t)K * L * sizeof(float), 0, 7, world);
    if (!st && me) {
        float *dst[3] = {grads ? grads : params, grads ? NULL : m, grads ? NULL : v};
        int E = t->ep ? t->md.ep : 1;
        for (int s = 0; s < pp && !st; s++)
            for (int q = 0; q < tp * E && !st; q++) {
                mdc_gpt2_part part = stage_part(&t->tc, q % tp, s, q / tp);
                if ((st = mdc_gpt2_create_layout(&lay, mdc_gpt2_get_config(t->m), &part))) break;
                size_t Lq = mdc_gpt2_local_floats(lay);
                const float *src = loc;
                /* dp and cp coordinate 0: rank = tp + t (cp + c (ep + e (dp + d pp))) */
                int from = q % tp + tp * t->md.cp * (q / tp + t->md.ep * t->md.dp * s);
                if (from != 0) {
                    float *nb = realloc(buf, (size_t)K * Lq * sizeof(float));
                    if (!nb) st = mdc_fail(MDC_ERR_OOM_HOST, "gathering the shards");
                    else buf = nb, st = mdc_recv(buf, (size_t)K * Lq * sizeof(float), from, 7, world);
                    src = buf;
                }
                for (int k = 0; !st && k < K; k++)
                    if (dst[k]) mdc_gpt2_local_to_global(lay, src + (size_t)k * Lq, dst[k]);
                mdc_gpt2_free(lay);
                lay = NULL;
            }
    }
    free(buf), free(loc);
    return st;
}

mdc_status mdc_trainer_load(mdc_trainer *t, const float *params, const float *m, const float *v, int adam_step) {
    size_t L = mdc_gpt2_local_floats(t->m);
    float *loc = malloc(3 * L * sizeof(float));
    if (!loc) return mdc_fail(MDC_ERR_OOM_HOST, "loading the training state");
    mdc_gpt2_global_to_local(t->m, params, loc);
    if (m) mdc_gpt2_global_to_local(t->m, m, loc + L);
    else memset(loc + L, 0, L * sizeof(float));
    if (v) mdc_gpt2_global_to_local(t->m, v, loc + 2 * L);
    else memset(loc + 2 * L, 0, L * sizeof(float));
    mdc_status st = MDC_OK;
    if (t->dp) {
        st = mdc_dp_load_state(t->dp, loc, loc + L, loc + 2 * L, adam_step);
    } else {
        memcpy(mdc_gpt2_params(t->m), loc, L * sizeof(float));
        if (adam_step > 0 && !(st = mdc_gpt2_set_adam_step(t->m, adam_step))) {
            memcpy(mdc_gpt2_adam_m(t->m), loc + L, L * sizeof(float));
            memcpy(mdc_gpt2_adam_v(t->m), loc + 2 * L, L * sizeof(float));
        }
    }
    free(loc);
    return st;
}
