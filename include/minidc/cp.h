/* Context parallelism (ref/parallel/cp/: the component cp.c, one file per algorithm): the sequence of every micro-batch split over
 * the c ranks of a group, attention computed across them.
 *
 * Layouts: "zigzag" (default) cuts the sequence into 2c chunks and gives rank r chunks r and
 * 2c-1-r, so every rank's causal attention work is the same; "contiguous" gives rank r chunk r
 * of c, and rank r's work grows with r (the last does (2c-1)/c of the mean).
 * Algorithms:
 *   "ring" (default): each rank keeps its queries; the key/value blocks travel around the
 *     ring, the next block's transfer under the current block's attention, merged into each
 *     row by the log-sum-exp rule; the backward sends the blocks round again with their dK, dV,
 *     which arrive back at their owners after c transfers;
 *   "allgather" (Llama 3): keys and values all-gathered, each local query chunk attends to
 *     its causal prefix; the backward gathers them again and reduce-scatters dK, dV;
 *   "ulysses" (DeepSpeed-Ulysses): an all-to-all from sequence-sharded to head-sharded before
 *     attention and back after (the local heads divisible by c).
 * Everything but attention runs on the local positions; the model uses this component's
 * mdc_gpt2_cp (include/minidc/model.h). */
#ifndef MINIDC_CP_H
#define MINIDC_CP_H

#include <stdio.h>

#include "minidc/collectives.h"
#include "minidc/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mdc_cp mdc_cp;

/* Checks a configuration before any message: T divisible by 2c (zigzag) or c, the local query
 * heads Hl and kv heads KVl divisible by c for ulysses, known names; MDC_ERR_INVALID names the
 * option. */
mdc_status mdc_cp_check(int c, int T, int Hl, int KVl, const char *layout, const char *algo);
/* The component on group g (its size c, this rank's index r) for sequences of T positions,
 * micro-batches of B rows, Hl query heads and KVl key/value heads (grouped-query attention;
 * KVl = Hl: GPT-2) of hs channels on this rank: a qkv row is Hl q heads, KVl k, KVl v. */
mdc_status mdc_cp_create(mdc_cp **out, mdc_group *g, mdc_device *dev, int T, int B, int Hl, int KVl, int hs,
                         const char *layout, const char *algo);
/* tp > KV in exact mode: fn(ctx, acc, n) sums the n accumulators of a key block's dK, dV over the
 * tp ranks that share the kv head, before they are rounded (tp.h, mdc_tp_kv_sum_exact). */
void mdc_cp_set_kv_sum(mdc_cp *cp, mdc_status (*fn)(void *ctx, mdc_exact *acc, size_t n), void *ctx);
void mdc_cp_free(mdc_cp *cp);
/* Exact mode (token block blk; 0 off): attention over the canonical blocks of
 * kernels/exact_attention.c, bit-identical to serial's exact mode for every algorithm and
 * layout. MDC_ERR_INVALID when blk does not divide a chunk (--exact-block). */
/* What the ring's and the all-gather's key blocks move (default mode): MDC_F32, or a mixed-precision
 * run's MDC_BF16 / MDC_F16 (its k and v hold values of that dtype: 2 bytes an element, the same
 * values); their dK, dV sums and Ulysses' all-to-alls stay fp32. */
void mdc_cp_set_dtype(mdc_cp *cp, mdc_dtype act);
mdc_status mdc_cp_set_exact(mdc_cp *cp, int blk);
const mdc_gpt2_cp *mdc_cp_model(const mdc_cp *cp);
/* This rank's T/c positions of each of `rows` sequences of T tokens (NULL in: nothing). */
void mdc_cp_slice(const mdc_cp *cp, int *out, const int *in, int rows);
/* Counters since the last reset: visible attention (query, key) pairs of the forward, bytes
 * sent by attention (forward and backward apart), attention calls (forward). */
void mdc_cp_reset_counts(mdc_cp *cp);
/* The model runs each layer's forward `again` more times per backward (full recomputation,
 * transformers' aux loss's counting forward): the figures per layer and micro-batch count one
 * forward, the report the others' bytes apart. */
void mdc_cp_set_forwards(mdc_cp *cp, int again);
/* Per rank the attention pairs and bytes against their formulas, the layout's max/mean and
 * the activation memory; gathered over the group and printed by its rank 0 (every rank calls). */
mdc_status mdc_cp_report(const mdc_cp *cp, size_t act_bytes, size_t serial_act_bytes, FILE *out);
/* This rank's figures per layer and micro-batch: attention pairs, their formula, bytes sent,
 * their formula. */
void mdc_cp_figures(const mdc_cp *cp, double f[4]);
/* The device bytes of the attention's scratch buffers. */
size_t mdc_cp_scratch_bytes(const mdc_cp *cp);

#ifdef __cplusplus
}
#endif
#endif
