/* Tensor parallelism (ref/parallel/tp/tp.c) and Megatron sequence parallelism (ref/parallel/tp/sp.c): the model's
 * communication points (model.h, mdc_gpt2_comm) over a tensor-parallel group, counted.
 *
 * TP (Shoeybi et al. 2019): c_fc and c_attn are column-parallel (no communication forward),
 * the output projections row-parallel (one AllReduce of the partial sums, g); backward the
 * conjugates (f: one AllReduce of the input gradient before each column-parallel linear).
 * The vocabulary is split too: the embedding's lookup is reduced by g, and the LM head is
 * column-parallel over the vocabulary (its input gradient is f's), the loss reduces max,
 * sum-exp and the target logit over tp, never the logits.
 * SP (Korthikanti et al. 2022): the residual stream, LayerNorms and dropout hold T/t positions
 * per rank; f becomes AllGather forward / ReduceScatter backward, g ReduceScatter forward /
 * AllGather backward: the same bytes as the AllReduce they replace (AR = RS + AG). The inputs
 * of column-parallel linears are gathered again in backward (Megatron), and the partial
 * gradients of LayerNorm weights and row-parallel biases are summed over tp once per step.
 * Per rank, every figure of mdc_tp_figures is counted as it happens. */
#ifndef MINIDC_TP_H
#define MINIDC_TP_H

#include <stdio.h>

#include "minidc/collectives.h"
#include "minidc/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mdc_tp mdc_tp;

/* On group g (borrowed; its size is t, its rank this rank's tp rank). `sp`: sequence
 * parallelism. No messages. */
mdc_status mdc_tp_create(mdc_tp **out, mdc_group *g, int sp);
/* Exact mode: the reductions carry accumulators; the report's formulas count them so. */
void mdc_tp_set_exact(mdc_tp *tp, int on);
/* tp > KV: the group of tp ranks that share this rank's kv head (borrowed), over which the
 * attention's dk, dv are summed (an AllReduce of (b, s, 2 d) per layer, MDC_TP_AR_KV). */
void mdc_tp_set_kv_group(mdc_tp *tp, mdc_group *kv);
/* Exact mode with context parallelism: n accumulators of a key block's dK, dV summed over the kv
 * group (ctx: the mdc_tp; counted under MDC_TP_AR_KV); cp.h's mdc_cp_set_kv_sum takes it. */
mdc_status mdc_tp_kv_sum_exact(void *ctx, mdc_exact *acc, size_t n);
void mdc_tp_free(mdc_tp *tp); /* NULL is a no-op */
const mdc_gpt2_comm *mdc_tp_comm(mdc_tp *tp);
mdc_group *mdc_tp_group(mdc_tp *tp);
/* What f and g move (default mode): MDC_F32, or a mixed-precision run's MDC_BF16 / MDC_F16, whose
 * activations hold values of that dtype (packed to 2 bytes an element: the same values, half the
 * bytes; a reduction sums as the collective sums the dtype). */
void mdc_tp_set_dtype(mdc_tp *tp, mdc_dtype act);

enum { MDC_TP_AR = 0, MDC_TP_AR_LOSS, MDC_TP_AG, MDC_TP_RS, MDC_TP_AR_KV, MDC_TP_KINDS };
typedef struct {
    unsigned long long calls[MDC_TP_KINDS]; /* AllReduce (B,T,C), AllReduce of loss statistics, AllGather,
                                               ReduceScatter, AllReduce of a shared kv head's dk, dv */
    double bytes[MDC_TP_KINDS];             /* sent by this rank */
} mdc_tp_counts;
void mdc_tp_get_counts(const mdc_tp *tp, mdc_tp_counts *c);
void mdc_tp_reset_counts(mdc_tp *tp);

/* Prints (on world rank 0) the last step's collectives next to their formulas for this
 * schedule (k micro-batches of b x s), the parameter and activation memory per rank next to
 * the formulas, and the LayerNorm work that SP divides. */
void mdc_tp_report(const mdc_tp *tp, const mdc_gpt2 *m, int b, int s, int k, double sp_grad_bytes, FILE *out);
/* The calls and bytes per rank per step that schedule should take, by MDC_TP_* kind. */
void mdc_tp_formulas(const mdc_tp *tp, const mdc_gpt2 *m, int b, int s, int k, double *calls, double *bytes);

/* The loss statistics' allreduces are padded to a multiple of t elements, so every
 * tensor-parallel collective moves exactly the ring's (t-1)/t or 2(t-1)/t of its bytes. */
size_t mdc_tp_padded(const mdc_tp *tp, size_t n);

/* ---- ref/parallel/tp/sp.c: sequence parallelism's gathers and scatters along the sequence ---------------
 * (B, T/t, C) per rank <-> (B, T, C): the collective moves [t][B][T/t][C], a permutation away
 * from the (B, T, C) layout (a layout detail of this host: the [s, b, h] layout of Megatron
 * needs none, so the copies are not charged). */
mdc_status mdc_sp_allgather(mdc_tp *tp, float *full, const float *local, int B, int T, int C);
mdc_status mdc_sp_reduce_scatter(mdc_tp *tp, float *local, const float *full, int B, int T, int C);

#ifdef __cplusplus
}
#endif
#endif
