/* Data parallelism: DDP (ref/parallel/dp/dp.c) and ZeRO stages 1, 2, 3 (ref/parallel/dp/zero.c) around the serial GPT-2
 * reference. Every rank of a group holds a model replica (ZeRO-3: a parameter shard) and trains
 * on its rows of the global batch; after each step every rank's parameters equal the serial
 * model's trained on the whole batch (to float rounding: sums are taken in another order).
 *
 * Layout. The flat parameter vector (mdc_gpt2_param_floats floats, Psi) is cut into units
 * (model.h: 0 embedding, 1..L blocks, L+1 head). Unit u of n_u floats is padded to
 * P_u = ceil(n_u / N) * N and rank r owns its floats [r s_u, (r+1) s_u), s_u = P_u / N; the
 * shard of a rank is the concatenation of its pieces in unit order, S = sum_u s_u floats.
 * Padding is at most N-1 floats per unit: N S - Psi <= (L+2)(N-1) (docs/data-parallel.md).
 *
 * Buckets. Gradients are reduced in buckets of consecutive units in the order backward
 * completes them (L+1, L, ..., 0), closed when they reach the bucket size. A bucket is packed
 * rank-major (block q = every unit's piece q) into a padded buffer, so one allreduce (DDP) or
 * one reduce-scatter (ZeRO) moves it, and the reduce-scatter leaves each rank exactly its shard.
 * The reduction runs on the device's communication stream (device_stream.h): in virtual time it
 * overlaps the rest of backward.
 *
 * Stages (per rank resident state between steps; fp32 Adam, bytes; formulas of docs/design.md):
 *   0 DDP     params 4 Psi, grads 4 Psi, Adam 8 Psi                    = 16 Psi
 *   1 ZeRO-1  params 4 Psi, grads 4 Psi, Adam 8 S                      = 8 Psi + 8 Psi/N
 *   2 ZeRO-2  params 4 Psi, grads 4 S (shard), Adam 8 S                = 4 Psi + 12 Psi/N
 *   3 ZeRO-3  params 4 S (shard), grads 4 S, Adam 8 S                  = 16 Psi/N
 * (S = Psi/N plus the padding.) Gradient accumulation: DDP and ZeRO-1 reduce once per step (on
 * the last micro-batch); ZeRO-2/3 keep only gradient shards, so they reduce-scatter every
 * micro-batch. ZeRO-3 gathers unit by unit: the embedding and the head (which share wte)
 * stay gathered from their forward to their backward; each block is gathered before its
 * forward, freed after it, gathered again before its backward and freed after it. */
#ifndef MINIDC_DP_H
#define MINIDC_DP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "minidc/collectives.h"
#include "minidc/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int zero;            /* 0 = DDP, 1, 2, 3 */
    int micro_batch;     /* sequences per micro-batch on one rank */
    int accum;           /* micro-batches per step (gradient accumulation) */
    int seq;             /* T */
    size_t bucket_bytes; /* 0 = default: min(25 MiB, parameter bytes / 4) */
    int poison;          /* ZeRO-3: fill parameter ranges that are not resident with NaN */
    int prefetch;        /* ZeRO-3: gather the next unit on the comm stream while this one
                          * computes (FSDP's forward_prefetch + BACKWARD_PRE, one unit ahead) */
} mdc_dp_config;

typedef struct mdc_dp mdc_dp;

/* The component on its own: attached to a model (any partition's local layout) over the
 * data-parallel group g (both borrowed; the model must be created with
 * mdc_dp_model_flags(zero)). It sets the model's hooks (buckets reduce as backward completes
 * them; ZeRO-3 gathers and frees units); the step (ref/train/train.c) drives it: begin_step,
 * begin_micro before each micro-batch, finish after the last backward, then the norm from
 * mdc_dp_sumsq summed over the mesh, then mdc_dp_update. dc->micro_batch and dc->seq are
 * not read. Free with mdc_dp_free (the model stays). */
unsigned mdc_dp_model_flags(int zero);
/* "DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3" for stages 0..3. */
const char *mdc_dp_stage_name(int zero);
mdc_status mdc_dp_attach(mdc_dp **out, mdc_group *g, mdc_gpt2 *m, const mdc_dp_config *dc);
/* Mixed precision (the model's, set before attaching): ZeRO-1/2 keep the fp32 master in shards
 * beside the optimizer's (the model's full fp32 parameters move to host memory) and gather the
 * updated parameters in the 16-bit dtype; ZeRO-3 keeps a 16-bit shard of the parameters beside its
 * fp32 master shard and gathers that; a model with bf16 gradients (mdc_gpt2_set_grad16) has its
 * buckets reduced in bf16 (rounded, summed as NCCL sums bf16, widened back). The memory table is
 * then the ZeRO paper's mixed-precision one (2 Psi + 2 Psi + 12 Psi; 4 Psi gradients in fp32). */
void mdc_dp_begin_step(mdc_dp *dp);
void mdc_dp_begin_micro(mdc_dp *dp, int k);
/* Every bucket reduces at finish instead of during the last micro-batch's backward (a pipeline
 * stage, whose micro-batches interleave; ZeRO 0 and 1). */
void mdc_dp_defer(mdc_dp *dp);
mdc_status mdc_dp_finish(mdc_dp *dp);
/* This rank's share of the squared gradient norm added into *slot, an element of the model's
 * mdc_gpt2_scalar_dtype (a double; exact mode an exact sum): DDP rank 0 the whole (others
 * nothing), ZeRO the shard. Tensors with skip[i] set (local index) are left out; skip may be NULL. */
void mdc_dp_sumsq(mdc_dp *dp, const char *skip, void *slot);
/* AdamW with the clip of `norm` (the global norm), DDP on the replica, ZeRO on the shard. */
mdc_status mdc_dp_update(mdc_dp *dp, const mdc_adamw_config *o, double norm);
/* Every run of gradient state this rank holds, one tensor at a time: DDP whole tensors, ZeRO
 * its shard's segments; `at` the run's first element in the tensor's local allocation, grad
 * and param point at the data (ZeRO-3: the parameter shard). */
typedef void (*mdc_dp_seg_fn)(void *ctx, int tensor, size_t at, float *grad, float *param, size_t n);
void mdc_dp_for_each_segment(mdc_dp *dp, mdc_dp_seg_fn fn, void *ctx);

/* Creates a serial-partition model on the group's device, initialized from `seed` exactly as
 * the serial model, and attaches the component to it (every rank calls it with the same
 * arguments; no messages); the model is freed with the component.
 * Fails on a bad config (MDC_ERR_INVALID naming the option) or a full device. */
mdc_status mdc_dp_create(mdc_dp **out, mdc_group *g, const mdc_gpt2_config *cfg, const mdc_dp_config *dc,
                         uint64_t seed);
void mdc_dp_free(mdc_dp *dp); /* NULL is a no-op; frees the model and every device buffer */

mdc_gpt2 *mdc_dp_model(mdc_dp *dp);
int mdc_dp_adam_step(const mdc_dp *dp);

/* The component's group and configuration (the step that drives it: mdc_step_dp, ref/train/). */
mdc_group *mdc_dp_group(mdc_dp *dp);
const mdc_dp_config *mdc_dp_get_config(const mdc_dp *dp);

/* Full training state in the serial layout (mdc_gpt2_param_floats floats each), for
 * checkpoints and parity checks. gather: collective; the root gets params, Adam m and v (which
 * may be NULL on other ranks; m and v are zero before the first step). load: every rank passes
 * the full arrays (m, v may be NULL: zero) and the AdamW step; no messages. */
mdc_status mdc_dp_gather_state(mdc_dp *dp, float *params, float *m, float *v, int root);
mdc_status mdc_dp_load_state(mdc_dp *dp, const float *params, const float *m, const float *v, int adam_step);

/* Measured figures beside their formulas (bytes; per rank). */
typedef struct {
    int zero, N, units, buckets;
    size_t psi;                /* parameter floats (allocation, with the Vp padding) */
    size_t shard;              /* S */
    size_t mem[3];             /* measured in use after a step: params, grads, optimizer */
    size_t mem_want[3];        /* the formula with S for Psi/N (exact) */
    double mem_formula[3];     /* the formula with Psi/N (real numbers) */
    size_t peak[3], comm_peak; /* peaks during the run (gathered units, live gradients, buckets) */
    double step_bytes;         /* bytes this component's collectives sent in the last step */
    double step_bytes_want;    /* exact count for this schedule */
    double step_bytes_formula; /* the textbook figure: 2(N-1)/N x 4 Psi (DDP, ZeRO-1), ... */
    double t_compute, t_comm, t_overlap, t_idle, now; /* virtual seconds, whole run */
} mdc_dp_figures;
void mdc_dp_get_figures(const mdc_dp *dp, mdc_dp_figures *f);
/* Prints the memory, communication and time tables (rank 0 prints; call on every rank). */
void mdc_dp_report(const mdc_dp *dp, FILE *out);

/* Default bucket size for a config (bytes). */
size_t mdc_dp_default_bucket_bytes(const mdc_gpt2_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
