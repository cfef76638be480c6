/* Training: the one step every mesh runs (ref/train/train.c), and the trainer that builds a mesh's
 * model, communication and data-parallel component from options (ref/train/trainer.c).
 *
 * The step: zero the gradients; for each micro-batch, the block API forward and backward
 * (each backward scaled by dloss = 1 / global tokens, so sums over ranks are the serial
 * gradient of the mean loss); the data-parallel component reduces buckets as backward
 * completes them; SP's partial gradients of replicated tensors are summed over tp once; the
 * loss sum and every rank's share of the squared gradient norm are summed over the mesh in one
 * allreduce; then AdamW with the global norm's clip. The serial model is the case with no
 * groups at all. */
#ifndef MINIDC_TRAIN_H
#define MINIDC_TRAIN_H

#include <stdio.h>

#include "minidc/cp.h"
#include "minidc/dump.h"
#include "minidc/dp.h"
#include "minidc/mesh.h"
#include "minidc/model.h"
#include "minidc/pp.h"
#include "minidc/tp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mdc_pp mdc_pp;

typedef struct {
    mdc_gpt2 *m;
    mdc_gpt2_acts *acts;             /* NULL: the model's default activation set */
    mdc_pp *pp;                      /* a pipeline stage: its schedule runs the micro-batches (ref/parallel/pp/pp.c) */
    mdc_group *embed_group;          /* pipeline: the first and last stage, which both hold the tied wte */
    mdc_dp *dp;                      /* NULL: one replica, no gradient sync */
    mdc_status (*reduce)(void *ctx); /* without dp: the step's gradient sums (expert parallelism) */
    void *reduce_ctx;
    mdc_group *sum_group;   /* loss and squared norm summed over it (every rank); NULL: this rank */
    mdc_group *sum_axes[5]; /* if set: summed over each of these in turn instead (a mesh's axis groups,
                               whose product is sum_group: every collective of a step then runs over
                               ranks of one role or of one axis, which predict's folding needs) */
    mdc_group *tp_group;    /* SP: partial gradients of replicated tensors summed here; or NULL */
    mdc_group *etp_group;   /* SP, tp > etp: the expert shards' partial gradients summed here (the tp
                               ranks of this rank's etp rank); or NULL */
    int count_loss;         /* this rank's losses count (1 on tp rank 0: the others repeat them) */
    int count_moe;          /* this rank's MoE aux losses count (tp rank 0, or every tp rank with SP) */
    int row0;               /* global batch row of this rank's first row (dropout masks' key) */
    const char *skip;       /* per local tensor, 1: left out of this rank's norm share (a tp copy) */
    const char *sp_partial; /* per local tensor, MDC_GRAD_PARTIAL_TP: its gradient is partial over tp
                               (SP), _ETP: over etp_group */
    int micro_batch, accum, seq;
    double tokens;                 /* global tokens per step (the loss is their mean) */
    float dloss;                   /* 1 / tokens, in float */
    double loss_sum;               /* out: this rank's sum of losses in the last step */
    double scalar_bytes, sp_bytes; /* out: bytes the last step's scalar and SP reductions sent */
    double tied_bytes;             /* out: pipeline: bytes of the tied wte's gradient sum */
    float loss_scale;              /* fp16: the backward's dloss times it, the gradients divided by it
                                      after the reduction (0 or 1: none) */
    int plant_inf;                 /* a fault for tests: this rank's first gradient element inf */
    int skipped;                   /* out: with a loss scale, the update was skipped (an inf or NaN
                                      gradient somewhere in the mesh) */
} mdc_step_plan;

/* The loss gradient the backward starts from: dloss, times the loss scale in fp16. */
static inline float mdc_plan_dloss(const mdc_step_plan *p) {
    return p->loss_scale > 0 ? p->dloss * p->loss_scale : p->dloss;
}
/* A plan for model m alone: one micro-batch of the default set's size, no groups. */
mdc_step_plan mdc_step_plan_default(mdc_gpt2 *m);
/* The forward of one micro-batch (micro_batch rows of seq tokens; targets may be NULL) on the
 * plan's activation set: logits and per-position losses there, *loss_sum their sum. */
mdc_status mdc_step_forward(mdc_step_plan *p, const int *inputs, const int *targets, double *loss_sum);
/* Forward and backward of every micro-batch (inputs, targets: this rank's accum x
 * micro_batch rows of seq tokens), gradients complete and reduced over data parallelism and
 * SP. Leaves the loss sum in p->loss_sum. */
mdc_status mdc_step_grads(mdc_step_plan *p, const int *inputs, const int *targets);
/* The mesh-wide loss (mean over the global tokens) and gradient norm (before clipping), then
 * AdamW. Every rank of sum_group must call it. */
mdc_status mdc_step_update(mdc_step_plan *p, const mdc_adamw_config *o, float *loss, float *grad_norm);
mdc_status mdc_step_run(mdc_step_plan *p, const int *inputs, const int *targets, const mdc_adamw_config *o, float *loss,
                        float *grad_norm);
/* One optimizer step of the data-parallel model dp holds (mdc_dp_create). inputs, targets: this
 * rank's rows of the global batch, accum x micro_batch rows of seq tokens (rank r has rows
 * [r b, (r+1) b) of the global batch, b = accum x micro_batch; micro-batch k is its rows
 * [k mb, (k+1) mb)). *loss (global mean over the batch) and *grad_norm (global, before
 * clipping) are the same on every rank. */
mdc_status mdc_step_dp(mdc_dp *dp, const int *inputs, const int *targets, const mdc_adamw_config *opt, float *loss,
                       float *grad_norm);

/* ---- pipeline stages (ref/parallel/pp/pp.c) ------------------------------------------------------------------ */
/* The stage of model m (a layer range, or v chunks) in pipeline group g: schedule `schedule`
 * for `micro` micro-batches of rows x T, with as many activation sets per chunk as the
 * schedule holds at once on this stage. */
mdc_status mdc_pp_create(mdc_pp **out, mdc_gpt2 *m, mdc_group *g, const char *schedule, int micro, int rows, int T,
                         int v);
void mdc_pp_free(mdc_pp *pp);
/* This stage's actions on the plan's micro-batches (inputs, targets: accum x micro_batch rows). */
mdc_status mdc_pp_run(mdc_pp *pp, mdc_step_plan *p, const int *inputs, const int *targets);
/* Its forwards alone, in the schedule's order (a counting forward: the loss is not kept). */
mdc_status mdc_pp_run_forward(mdc_pp *pp, mdc_step_plan *p, const int *inputs, const int *targets);
const mdc_pp_schedule *mdc_pp_get_schedule(const mdc_pp *pp);
int mdc_pp_sets(const mdc_pp *pp);          /* activation sets allocated */
double mdc_pp_step_bytes(const mdc_pp *pp); /* bytes this stage sent in the last step */
/* The per-stage figures beside their formulas (rank 0 of the pipeline group prints). */
mdc_status mdc_pp_report(const mdc_pp *pp, FILE *out);
/* The last step's measured schedule as an SVG picture at path, written by stage 0 (call on every
 * rank of the pipeline group; ref/parallel/pp/pp_timeline.c). device: the preset's name for the title. */
mdc_status mdc_pp_write_timeline(const mdc_pp *pp, const char *path, const char *device);

/* ---- the trainer: one object for any mesh ------------------------------------------------------ */
typedef struct {
    mdc_gpt2_config cfg;
    mdc_mesh_dims dims;          /* tp, cp, ep, dp, pp; dp counts the data-parallel replicas, ep among
                                them (Megatron's folding: ep divides dp) */
    int sp;                      /* Megatron sequence parallelism (needs tp > 1) */
    int zero, prefetch;          /* data-parallel stage; ZeRO-3 prefetch */
    size_t bucket_bytes;         /* 0: the default */
    int micro_batch, accum, seq; /* per data-parallel rank */
    int check_replicas;          /* compare tp-replicated tensors bit for bit after every step */
    int poison;                  /* ZeRO-3: non-resident parameters are NaN */
    float dropout;               /* dropout probability (attention probabilities, residual branches) */
    int exact_block;             /* exact mode's token block (0: exact mode off; docs/exactness.md) */
    const char *schedule;        /* pipeline schedule (NULL: 1f1b); the micro-batches are accum */
    const int *pp_layout;        /* pipeline: layers per virtual stage (NULL: an even split, the first ones one more) */
    int pp_chunks;               /* model chunks per stage (interleaved: v; 0 or 1: one) */
    const char *cp_layout;       /* context parallel: "zigzag" (NULL) or "contiguous" */
    const char *cp_algo;         /* "ring" (NULL), "allgather" or "ulysses" */
    mdc_moe_opts moe;            /* routing options of a mixture of experts (cfg.E > 0) */
    int etp;                     /* expert tensor parallelism: each routed expert split over etp
                                    consecutive tp ranks (0 or 1: whole; etp divides tp) */
    int recompute;               /* MDC_RECOMPUTE_*: activation recomputation (never changes a bit) */
    int precision;               /* MDC_PRECISION_*: fp32, or bf16 / fp16 mixed precision (fp16 with
                                    dynamic loss scaling) */
    int grad_reduce;             /* MDC_PRECISION_BF16: data parallelism reduces the gradients in bf16
                                    (0: fp32) */
} mdc_trainer_config;

typedef struct mdc_trainer mdc_trainer;

/* Builds the mesh's groups on the transport (NULL: the serial model on `dev` alone), the model
 * partition of this rank, initialized from `seed` (every shard equals the serial slice), the
 * tensor-parallel communication and the data-parallel component. No messages. */
mdc_status mdc_trainer_create(mdc_trainer **out, mdc_transport *tr, mdc_device *dev, const mdc_trainer_config *tc,
                              uint64_t seed);
void mdc_trainer_free(mdc_trainer *t); /* NULL is a no-op */
/* One step on this rank's rows of the global batch: inputs and targets hold the whole global
 * batch (B = dp x accum x micro_batch rows of seq tokens); this rank reads its data-parallel
 * rows. loss and grad_norm are the same on every rank. */
mdc_status mdc_trainer_step(mdc_trainer *t, const int *inputs, const int *targets, const mdc_adamw_config *o,
                            float *loss, float *grad_norm);
/* The training state in the serial (global) layout on world rank `root` (params, Adam m, v;
 * m, v may be NULL): collective over every rank. And back from global arrays every rank holds. */
mdc_status mdc_trainer_gather(mdc_trainer *t, float *params, float *m, float *v, int root);
mdc_status mdc_trainer_load(mdc_trainer *t, const float *params, const float *m, const float *v, int adam_step);
/* The first half of a step (forward and backward of every micro-batch, gradients reduced,
 * no update), for checks: then mdc_trainer_gather_grads puts the gradients in the global
 * layout on world rank 0 (collective; --zero 0 only, MDC_ERR_INVALID for sharded gradients),
 * and mdc_trainer_finish_step updates as mdc_trainer_step would have. */
mdc_status mdc_trainer_grads(mdc_trainer *t, const int *inputs, const int *targets);
mdc_status mdc_trainer_gather_grads(mdc_trainer *t, float *grads, int root);
/* After mdc_trainer_grads: this rank's reduced parameter gradients into a dump (ZeRO: its
 * shard's segments) as pieces of the global tensors (include/minidc/dump.h). */
mdc_status mdc_trainer_dump_grads(mdc_trainer *t, mdc_tensorfile *tf, int step);
mdc_status mdc_trainer_finish_step(mdc_trainer *t, const mdc_adamw_config *o, float *loss, float *grad_norm);
int mdc_trainer_adam_step(const mdc_trainer *t);
/* fp16's dynamic loss scaling (Megatron's, apex's): the scale starts at 2^16, halves on a step with
 * an inf or NaN gradient anywhere in the mesh (the update skipped, the step counted) and doubles
 * after MDC_LOSS_SCALE_WINDOW clean steps; a scale halved below 1 stops the run with an error.
 * MINIDC_FAULT_INF_STEP=k plants an inf in world rank 0's gradients at step k (from 1; "k+": at
 * every step from k on). The
 * current scale (0: no scaling), the steps skipped so far, and whether the last one was. */
enum { MDC_LOSS_SCALE_WINDOW = 1000 };
typedef struct {
    float scale;      /* 0: no scaling (fp32, bf16) */
    int clean;        /* clean steps since the scale last changed */
    int skipped;      /* steps skipped so far (a resumed run's count included) */
    int last_skipped; /* the last step was */
} mdc_loss_scale;
mdc_loss_scale mdc_trainer_loss_scale(const mdc_trainer *t);
/* A resumed run's scaler: scale (> 0; with fp16 only), clean and skipped as saved. */
void mdc_trainer_set_loss_scale(mdc_trainer *t, const mdc_loss_scale *s);
mdc_gpt2 *mdc_trainer_model(mdc_trainer *t);
const mdc_mesh *mdc_trainer_mesh(const mdc_trainer *t);
/* Compares every replica bit for bit: the tp-replicated parameters over the tp group, every
 * parameter over the dense group (dp x cp x ep; not with ZeRO-3, whose ranks hold shards), the
 * tied wte between the first and last pipeline stage; MDC_ERR_MISMATCH names the first tensor
 * and rank that differ. Every rank of the mesh calls it. */
mdc_status mdc_trainer_check_replicas(mdc_trainer *t);
/* The last step's MoE line (mdc_moe_step_line; every rank calls it, world rank 0 gets the text). */
mdc_status mdc_trainer_moe_line(mdc_trainer *t, char *line, size_t cap);
/* Prints the mesh, the tensor-parallel figures and the data-parallel figures next to their
 * formulas (rank 0 prints; every rank calls it). */
void mdc_trainer_report(mdc_trainer *t, FILE *out);
/* --timeline: the last step's pipeline schedule as SVG (every rank calls it; a pipeline of
 * tp rank 0, dp rank 0 draws it). MDC_ERR_INVALID without a pipeline. */
mdc_status mdc_trainer_timeline(mdc_trainer *t, const char *path);
/* The same figures (this rank's) as a JSON object's text, malloc'd (free it), NULL if out of
 * memory: the --report file's "schemes" (mdc_runtime's report_schemes). */
char *mdc_trainer_report_json(mdc_trainer *t);

#ifdef __cplusplus
}
#endif
#endif
