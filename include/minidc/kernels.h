/* minidc kernels: forward and backward of every GPT-2 layer on the host, fp32, OpenBLAS +
 * OpenMP, each charging its FLOPs and HBM bytes to an emulated device.
 *
 * Conventions (every kernel):
 * - Plain functions: the device first (NULL skips accounting), then outputs, then const
 *   inputs, then sizes. Each pointer's shape is in the comment next to it.
 * - The FLOP and byte formulas are in the header comment of the kernel's file in kernels/
 *   and in docs/model.md; mdc_kernel_cost() in tests checks the charges against them.
 * - Backward kernels ACCUMULATE (+=) into every gradient they write (inputs and parameters),
 *   so residual branches and micro-batches add up; zero the gradients before a step.
 * - Deterministic: results are bit-identical for any OpenMP thread count. Loops are split
 *   over independent rows/heads/columns; reductions across rows use a fixed partition that
 *   depends only on the sizes. Every matrix product is cblas_sgemm called single-threaded
 *   on a block the kernel chose (see mdc_kernels_init).
 * - On a dry device (mdc_dev_set_dry) every kernel charges what it charges on a normal one and
 *   neither computes nor reads or writes its tensors (a value computed from data is 0).
 * - Sizes are int; B batch, T sequence, C channels, NH heads, V vocabulary, Vp padded
 *   vocabulary (row stride of logits), N = rows (B*T). */
#ifndef MINIDC_KERNELS_H
#define MINIDC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "minidc/device.h"
#include "minidc/exact.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes OpenBLAS single-threaded (openblas_set_num_threads(1)) so that the only threads are
 * OpenMP's: the kernels split every product into blocks themselves. Without this the
 * pthread OpenBLAS and the OpenMP team oversubscribe the cores. Called by every kernel that
 * uses sgemm (idempotent, cheap); call it yourself before timing. Returns the OpenMP
 * thread count the kernels will use. */
int mdc_kernels_init(void);

/* Debian 12's OpenBLAS 0.3.21 does not know CPUs newer than itself (this host: family 6 model
 * 207, Emerald Rapids) and falls back to its Prescott (SSE3) kernels, 3-6x slower. If
 * OPENBLAS_CORETYPE is unset, OpenBLAS chose Prescott and the CPU has AVX-512 (AVX2), this
 * sets OPENBLAS_CORETYPE=SkylakeX (Haswell) and re-executes the program's own executable
 * with the same argv, since OpenBLAS reads the variable when it is loaded. Call it first in
 * main(), before MPI_Init. Returns if there was nothing to do (or the exec failed, or the
 * system does not tell the executable's path: then the program runs on, slower).
 * MINIDC_NO_REEXEC=1 turns it off. */
void mdc_kernels_fix_blas_core(char **argv);

/* ---- embedding (kernels/encoder.c) ---------------------------------------------------- */
/* out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]. Token ids must be in [0, Vp). */
void mdc_encoder_forward(mdc_device *dev,
                         float *out,       // (B,T,C)
                         const int *inp,   // (B,T)
                         const float *wte, // (Vp,C)
                         const float *wpe, // (maxT,C)
                         int B, int T, int C);
void mdc_encoder_backward(mdc_device *dev,
                          float *dwte,       // (Vp,C) +=
                          float *dwpe,       // (maxT,C) +=
                          const float *dout, // (B,T,C)
                          const int *inp,    // (B,T)
                          int B, int T, int C);

/* Vocab-parallel embedding: this rank's rows [lo, lo+rows) of wte; ids outside give 0 rows. */
void mdc_embed_shard_forward(mdc_device *dev,
                             float *out,       // (N,C)
                             const int *inp,   // (N)
                             const float *wte, // (rows,C) the shard
                             int lo, int rows, int N, int C);
/* out[b,j,:] = in[b,j,:] + wpe[p(j),:] (out may alias in): positions after the reduction;
 * p(j) = pos[j], or pos0 + j with pos NULL (pos: the global positions of a context-parallel
 * rank's chunks). */
void mdc_embed_positions(mdc_device *dev,
                         float *out,       // (B,Tl,C)
                         const float *in,  // (B,Tl,C)
                         const float *wpe, // (maxT,C)
                         int B, int Tl, const int *pos, int pos0, int C);
/* dwte rows of the shard, and dwpe row p(t) (pos[t], or t with pos NULL) += dout[b,t]. */
void mdc_embed_shard_backward(mdc_device *dev,
                              float *dwte,       // (rows,C) += the shard
                              float *dwpe,       // (maxT,C) +=
                              const float *dout, // (B,T,C)
                              const int *inp,    // (B,T)
                              int lo, int rows, const int *pos, int B, int T, int C);

/* ---- LayerNorm (kernels/layernorm.c), eps = 1e-5, biased variance ---------------------- */
/* The backward's input part (dinp) and weight part (dweight, dbias) can run alone: pass NULL
 * for the other (the same bits as both at once). */
void mdc_layernorm_forward(mdc_device *dev,
                           float *out,          // (N,C)
                           float *mean,         // (N) saved for backward
                           float *rstd,         // (N) saved for backward
                           const float *inp,    // (N,C)
                           const float *weight, // (C)
                           const float *bias,   // (C)
                           int N, int C);
void mdc_layernorm_backward(mdc_device *dev,
                            float *dinp,         // (N,C) +=
                            float *dweight,      // (C) +=
                            float *dbias,        // (C) +=
                            const float *dout,   // (N,C)
                            const float *inp,    // (N,C)
                            const float *weight, // (C)
                            const float *mean,   // (N)
                            const float *rstd,   // (N)
                            int N, int C);

/* ---- matmul with bias (kernels/matmul.c); weights in Conv1D layout [in, out] ------------- */
/* out = inp @ weight + bias (bias may be NULL). */
void mdc_matmul_forward(mdc_device *dev,
                        float *out,          // (N,OC)
                        const float *inp,    // (N,C)
                        const float *weight, // (C,OC)
                        const float *bias,   // (OC) or NULL
                        int N, int C, int OC);
/* out = residual + inp @ weight + bias (out may alias residual): the attention and MLP
 * output projections fused with the residual add. */
void mdc_matmul_residual_forward(mdc_device *dev,
                                 float *out,            // (N,OC)
                                 const float *residual, // (N,OC)
                                 const float *inp,      // (N,C)
                                 const float *weight,   // (C,OC)
                                 const float *bias,     // (OC) or NULL
                                 int N, int C, int OC);
/* dinp += dout @ weight^T; dweight += inp^T @ dout; dbias += column sums of dout.
 * dinp may be NULL (not needed), dweight may be NULL (the input part alone), dbias may be NULL
 * (no bias, or the input part alone). */
void mdc_matmul_backward(mdc_device *dev,
                         float *dinp,         // (N,C) += or NULL
                         float *dweight,      // (C,OC) +=
                         float *dbias,        // (OC) += or NULL
                         const float *dout,   // (N,OC)
                         const float *inp,    // (N,C)
                         const float *weight, // (C,OC)
                         int N, int C, int OC);
/* The same products with the weight in nn.Linear's layout [out, in] (Llama, Qwen):
 * out = residual + inp @ weight^T + bias (residual, bias may be NULL; out may alias residual). */
void mdc_linear_forward(mdc_device *dev,
                        float *out,            // (N,OC)
                        const float *residual, // (N,OC) or NULL
                        const float *inp,      // (N,C)
                        const float *weight,   // (OC,C)
                        const float *bias,     // (OC) or NULL
                        int N, int C, int OC);
/* dinp += dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout (each may be NULL). */
void mdc_linear_backward(mdc_device *dev,
                         float *dinp,         // (N,C) += or NULL
                         float *dweight,      // (OC,C) += or NULL
                         float *dbias,        // (OC) += or NULL
                         const float *dout,   // (N,OC)
                         const float *inp,    // (N,C)
                         const float *weight, // (OC,C)
                         int N, int C, int OC);
/* The tied LM head: logits = inp @ wte^T over the padded vocabulary (no bias). */
void mdc_lmhead_forward(mdc_device *dev,
                        float *logits,    // (N,Vp)
                        const float *inp, // (N,C)
                        const float *wte, // (Vp,C)
                        int N, int C, int Vp);
/* dinp += dlogits @ wte; dwte += dlogits^T @ inp. */
void mdc_lmhead_backward(mdc_device *dev,
                         float *dinp,          // (N,C) +=
                         float *dwte,          // (Vp,C) +=
                         const float *dlogits, // (N,Vp)
                         const float *inp,     // (N,C)
                         const float *wte,     // (Vp,C)
                         int N, int C, int Vp);

/* ---- causal multi-head self-attention (kernels/attention.c) ----------------------------
 * qkv rows hold [q | k | v], each C = NH*hs wide, head h at columns h*hs..h*hs+hs-1 (the
 * GPT-2 c_attn layout). out[b,t,h*hs+j] = sum_{s<=t} P[b,h,t,s] v[b,s,h,j],
 * P = softmax_s(q.k / sqrt(hs)) over s <= t. */

/* Materializes the T x T probabilities per head (two sgemm per head). */
void mdc_attention_forward(mdc_device *dev,
                           float *out,       // (B,T,C)
                           float *att,       // (B,NH,T,T) probabilities, saved (s > t: 0 or not written)
                           const float *qkv, // (B,T,3C)
                           int B, int T, int C, int NH);
void mdc_attention_backward(mdc_device *dev,
                            float *dqkv,       // (B,T,3C) +=
                            float *scratch,    // (B,NH,T,T) work space, clobbered
                            const float *dout, // (B,T,C)
                            const float *qkv,  // (B,T,3C)
                            const float *att,  // (B,NH,T,T) from the forward
                            int B, int T, int C, int NH);
/* Tiled online softmax (flash attention): tiles of MDC_ATTN_TILE keys and queries, O(T)
 * extra memory per row; saves only the log-sum-exp of each row; the backward recomputes
 * the probabilities tile by tile. */
enum { MDC_ATTN_TILE = 64 };
void mdc_attention_forward_tiled(mdc_device *dev,
                                 float *out,       // (B,T,C)
                                 float *lse,       // (B,NH,T) log-sum-exp of scaled scores
                                 const float *qkv, // (B,T,3C)
                                 int B, int T, int C, int NH);
void mdc_attention_backward_tiled(mdc_device *dev,
                                  float *dqkv,       // (B,T,3C) +=
                                  const float *dout, // (B,T,C)
                                  const float *out,  // (B,T,C) from the forward
                                  const float *qkv,  // (B,T,3C)
                                  const float *lse,  // (B,NH,T)
                                  int B, int T, int C, int NH);

/* ---- GELU, tanh approximation (kernels/gelu.c) ----------------------------------------
 * gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void mdc_gelu_forward(mdc_device *dev,
                      float *out,       // (n)
                      const float *inp, // (n)
                      size_t n);
void mdc_gelu_backward(mdc_device *dev,
                       float *dinp,       // (n) +=
                       const float *inp,  // (n)
                       const float *dout, // (n)
                       size_t n);

/* ---- residual add (kernels/residual.c) ------------------------------------------------ */
/* out = a + b (out may alias a or b). */
void mdc_residual_forward(mdc_device *dev,
                          float *out,     // (n)
                          const float *a, // (n)
                          const float *b, // (n)
                          size_t n);
/* out = (res + bias) + y: a row-parallel output's bias and residual, added once after the
 * reduction (out may alias res or y). */
void mdc_residual_bias_forward(mdc_device *dev,
                               float *out,        // (N,C)
                               const float *res,  // (N,C)
                               const float *y,    // (N,C) the reduced product
                               const float *bias, // (C)
                               int N, int C);
/* y += bias on every row (a row-parallel output's bias, added once after the reduction). */
void mdc_bias_forward(mdc_device *dev,
                      float *y,          // (N,C)
                      const float *bias, // (C)
                      int N, int C);
/* da += dout; db += dout. */
void mdc_residual_backward(mdc_device *dev,
                           float *da,         // (n) +=
                           float *db,         // (n) +=
                           const float *dout, // (n)
                           size_t n);

/* ---- softmax and cross-entropy over the vocabulary (kernels/softmax.c) ------------------
 * Columns V..Vp-1 of logits are padding: ignored, probabilities and gradients there are 0. */
void mdc_softmax_forward(mdc_device *dev,
                         float *probs,        // (N,Vp), may alias logits
                         const float *logits, // (N,Vp)
                         int N, int V, int Vp);
/* losses[i] = lse_i - logits[i, targets[i]]; also saves lse for the backward. Targets must
 * be in [0, V). */
void mdc_crossentropy_forward(mdc_device *dev,
                              float *losses,       // (N)
                              float *lse,          // (N) log-sum-exp of each row
                              const float *logits, // (N,Vp)
                              const int *targets,  // (N)
                              int N, int V, int Vp);
/* dlogits[i,j] = dloss * (softmax(logits)[i,j] - [j == targets[i]]) for j < V, 0 for the
 * padding. Written (=, not +=); dlogits may alias logits (in place). dloss is d(loss)/d(losses[i]),
 * 1/N for the mean loss. */
void mdc_crossentropy_backward(mdc_device *dev,
                               float *dlogits,      // (N,Vp)
                               const float *logits, // (N,Vp)
                               const float *lse,    // (N)
                               const int *targets,  // (N)
                               float dloss, int N, int V, int Vp);

/* Vocab-parallel cross-entropy on a shard of Vl columns from global column lo, the first
 * `valid` of them real: row max, sum of exp(x - mx) (mx: the max over every shard), the
 * target's logit (0 when the target is another shard's), and the backward with the global
 * lse. Reduce mx (max) and se, tlogit (sum) over the shards between the calls. */
void mdc_vocab_shard_max(mdc_device *dev, float *mx, const float *logits, int N, int Vl, int valid);
void mdc_vocab_shard_sumexp(mdc_device *dev, float *se, const float *logits, const float *mx, int N, int Vl, int valid);
void mdc_vocab_shard_target(mdc_device *dev, float *tlogit, const float *logits, const int *targets, int lo, int N,
                            int Vl, int valid);
void mdc_crossentropy_backward_shard(mdc_device *dev, float *dlogits, const float *logits, const float *lse,
                                     const int *targets, int lo, float dloss, int N, int Vl, int valid);

/* ---- optimizer (kernels/adamw.c) --------------------------------------------------------- */
/* PyTorch's AdamW, step t >= 1, gradients multiplied by grad_scale first (clipping):
 *   g = grad_scale * grad; p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps) */
void mdc_adamw_update(mdc_device *dev,
                      float *params,      // (n)
                      float *m,           // (n) first moment
                      float *v,           // (n) second moment
                      const float *grads, // (n)
                      size_t n, float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                      int t);
/* Charges one AdamW launch over n elements: a multi-tensor update of segments each updated with
 * mdc_adamw_update(NULL, ...) (which charges nothing), as a fused optimizer launches one kernel. */
void mdc_adamw_charge(mdc_device *dev, size_t n);
/* How far AdamW step t >= 1 can move a parameter, in units of lr (weight decay aside): with
 * m_t = (1-b1) sum_i b1^(t-i) g_i and v_t >= (1-b2) b2^(t-i) g_i^2 for every i,
 * |m_t| <= (1-b1) / sqrt(1-b2) sqrt(v_t) sum_k r^k, r = b1 / sqrt(b2), k < t; the bias
 * corrections give the factor sqrt(1-b2^t) / (1-b1^t). It holds whatever the gradients were
 * (clipped or not): 1 at t = 1. Two runs whose gradients differ are at most 2 lr of it apart
 * after the step, per parameter (the bound --check-serial and the parity tests use). */
double mdc_adamw_reach(double beta1, double beta2, int t);
/* The L2 norm of n gradients, summed in double over fixed chunks of MDC_NORM_CHUNK
 * elements and combined in chunk order (independent of the thread count). 0 on a dry device. */
enum { MDC_NORM_CHUNK = 16384 };
double mdc_grad_norm(mdc_device *dev, const float *grads, size_t n);
/* The sum of squares mdc_grad_norm takes the root of (the same chunks, the same order); 0 on a
 * dry device. */
double mdc_grad_sumsq(mdc_device *dev, const float *grads, size_t n);
/* PyTorch's clip_grad_norm_ factor: min(1, max_norm / (norm + 1e-6)); 1 if max_norm <= 0. */
float mdc_clip_scale(double norm, float max_norm);

/* ---- dropout (kernels/dropout.c; attention with dropout in kernels/attention*.c) ----------
 * Inverted dropout: a kept element is scaled by 1/(1-p), a dropped one is 0. The mask is a
 * counter-based hash of the GLOBAL element index (no state): a rank holding a slice of a
 * tensor drops exactly the elements the serial model drops there, and backward kernels
 * regenerate the mask. p <= 0 (or a NULL descriptor) runs the kernels without dropout, the
 * same work and bits as the kernels above. */
enum { MDC_DROP_ATTN = 0, MDC_DROP_ATTN_OUT = 1, MDC_DROP_MLP_OUT = 2 };
typedef struct {
    float p;        /* drop probability, in [0, 1) */
    uint64_t seed;  /* the run's seed */
    uint64_t step;  /* the optimizer step: a new mask every step */
    int layer;      /* the block */
    int site;       /* MDC_DROP_ATTN_OUT or MDC_DROP_MLP_OUT; attention always uses MDC_DROP_ATTN */
    int row0;       /* global batch row of local row 0 (its row in the step's whole batch) */
    int pos0;       /* global position of local position 0 (0 for attention over one sequence) */
    const int *pos; /* residual sites: global position of each local position (context parallel's
                      * chunks; NULL: pos0 + t) */
    int T;          /* global sequence length */
    int chan0, C;   /* global channel of local channel 0, global channel count */
    int head0, H;   /* global head of local head 0, global head count */
} mdc_dropout;

/* 1 if the residual-branch element (row, pos, chan) (global indices) of site d->site is kept. */
int mdc_dropout_keep(const mdc_dropout *d, int row, int pos, int chan);
/* 1 if the attention probability of query qpos for key kpos of (row, head) is kept (global). */
int mdc_dropout_keep_attn(const mdc_dropout *d, int row, int head, int qpos, int kpos);
/* dst[c] = kept(row, head, qpos, kpos0 + c) ? src[c] / (1-p) : 0 for c < n (dst may alias src):
 * the attention kernels' mask of a run of keys; not charged (the caller charges). */
void mdc_dropout_attn_apply(const mdc_dropout *d,
                            float *dst,       // (n)
                            const float *src, // (n)
                            int row, int head, int qpos, int kpos0, int n);

/* out = res + keep*y/(1-p) over local (B,Tl,Cl), element (b,t,c) at global
 * (row0+b, pos0+t, chan0+c) (out may alias res or y): a residual branch's dropout. */
void mdc_dropout_residual_forward(mdc_device *dev,
                                  float *out,       // (B,Tl,Cl)
                                  const float *res, // (B,Tl,Cl) the residual stream
                                  const float *y,   // (B,Tl,Cl) the branch
                                  const mdc_dropout *drop, int B, int Tl, int Cl);
/* dy += keep*dout/(1-p); the residual's gradient is dout itself (not written here). */
void mdc_dropout_residual_backward(mdc_device *dev,
                                   float *dy,         // (B,Tl,Cl) +=
                                   const float *dout, // (B,Tl,Cl)
                                   const mdc_dropout *drop, int B, int Tl, int Cl);

/* Attention between runs of queries and keys at global positions (kernels/attention_pair.c;
 * context parallelism). Row i of the queries is at position qpos0 + i, key j at kpos0 + j; a
 * row sees the keys at positions <= its own. Layouts by strides (floats): q and dq
 * [b q_bs + i q_ld + h hs + x]; k, v, dk, dv [b kv_bs + j kv_ld + g hs + x], g = h / group
 * the kv head of query head h (group: query heads per kv head, NH a multiple of it; 0 or 1:
 * g = h); o and dout [b o_bs + i o_ld + h hs + x]; the per-row m, l, lse, D
 * [b s_bs + h s_hs + i]. drop: dropout with global positions (NULL: none). begin clears the
 * rows' state; forward merges one key run into it (the log-sum-exp rule, any order of runs);
 * finish normalizes o and writes lse; rowdot writes D = rowsum(dout * o); backward adds the
 * run's share to dq, dk and dv (dk, dv of a kv head: the sum over its group's query heads, in
 * ascending order). */
typedef struct {
    int B, NH, hs;
    int nq, nk, qpos0, kpos0;
    const float *q, *k, *v;
    size_t q_bs, kv_bs, o_bs, s_bs, s_hs;
    int q_ld, kv_ld, o_ld;
    float *o, *m, *l;
    float *dq, *dk, *dv;
    const float *dout, *lse, *D;
    const mdc_dropout *drop;
    int group; /* query heads per kv head (grouped-query attention); 0 or 1: one each */
} mdc_attn_pair;
void mdc_attn_pair_begin(const mdc_attn_pair *p);
void mdc_attn_pair_forward(mdc_device *dev, const mdc_attn_pair *p);
void mdc_attn_pair_finish(mdc_device *dev, const mdc_attn_pair *p, float *lse);
void mdc_attn_rowdot(mdc_device *dev, const mdc_attn_pair *p, float *D);
void mdc_attn_pair_backward(mdc_device *dev, const mdc_attn_pair *p);
/* The visible (query, key) pairs of p over every batch row and head. */
double mdc_attn_pair_visible(const mdc_attn_pair *p);
/* What forward, backward, finish or rowdot of p charge (FLOPs, HBM bytes): a caller that runs
 * several pairs as one kernel passes a NULL device to each and charges the sum once. */
enum { MDC_ATTN_FORWARD, MDC_ATTN_BACKWARD, MDC_ATTN_FINISH, MDC_ATTN_ROWDOT };
void mdc_attn_pair_cost(const mdc_attn_pair *p, int kind, double *flops, double *bytes);
/* Exact mode's attention on the same pairs (kernels/exact_attention.c): canonical blocks of blk
 * global positions, every dot product in channel order. max: the rows' m = max over the pair's
 * visible scores (a first pass over every key run); sum: each key block's float sums of
 * exp(s - m) and of p v added exactly into x at xl + (the row's index, laid out like m) and
 * xo + (laid out like o); finish: o = xo / xl rounded, lse = m + log xl; rowdot: D in channel
 * order; backward: each (query block, key block) tile's float sums added exactly into x at
 * xdq + (laid out like q), xdk and xdv + (like k, v; a kv head gets the exact sums of every query
 * head of its group). The result does not depend on how the runs are split or the order they
 * come in. */
void mdc_x_attn_max(mdc_device *dev, const mdc_attn_pair *p, int blk);
void mdc_x_attn_sum(mdc_device *dev, const mdc_attn_pair *p, mdc_xsum *x, size_t xl, size_t xo, int blk);
void mdc_x_attn_finish(mdc_device *dev, const mdc_attn_pair *p, const mdc_xsum *x, size_t xl, size_t xo, float *lse);
void mdc_x_attn_rowdot(mdc_device *dev, const mdc_attn_pair *p, float *D);
void mdc_x_attn_backward(mdc_device *dev, const mdc_attn_pair *p, mdc_xsum *x, size_t xdq, size_t xdk, size_t xdv,
                         int blk);

/* Attention with dropout on the probabilities: out = (keep .* P/(1-p)) V. Local head h is
 * global drop->head0 + h, batch row b global drop->row0 + b, position t global drop->pos0 + t.
 * att still saves the undropped P; the backwards regenerate the mask. The kernels above are
 * these with drop = NULL. */
void mdc_attention_forward_drop(mdc_device *dev,
                                float *out,       // (B,T,C)
                                float *att,       // (B,NH,T,T) undropped probabilities
                                const float *qkv, // (B,T,3C)
                                const mdc_dropout *drop, int B, int T, int C, int NH);
void mdc_attention_backward_drop(mdc_device *dev,
                                 float *dqkv,       // (B,T,3C) +=
                                 float *scratch,    // (B,NH,T,T) work space, clobbered
                                 const float *dout, // (B,T,C)
                                 const float *qkv,  // (B,T,3C)
                                 const float *att,  // (B,NH,T,T) from the forward
                                 const mdc_dropout *drop, int B, int T, int C, int NH);
void mdc_attention_forward_tiled_drop(mdc_device *dev,
                                      float *out,       // (B,T,C)
                                      float *lse,       // (B,NH,T) of the undropped scores
                                      const float *qkv, // (B,T,3C)
                                      const mdc_dropout *drop, int B, int T, int C, int NH);
void mdc_attention_backward_tiled_drop(mdc_device *dev,
                                       float *dqkv,       // (B,T,3C) +=
                                       const float *dout, // (B,T,C)
                                       const float *out,  // (B,T,C) from the forward
                                       const float *qkv,  // (B,T,3C)
                                       const float *lse,  // (B,NH,T)
                                       const mdc_dropout *drop, int B, int T, int C, int NH);

/* Grouped-query attention (Hugging Face Llama / Qwen, repeat_kv): H query heads, KV key/value
 * heads (KV divides H), head width d (any d >= 1, not necessarily C/H); query head h reads kv
 * head h / (H/KV); scores scaled by 1/sqrt(d). qkv rows are [q (H d) | k (KV d) | v (KV d)]:
 * query head h at columns h d, kv head g of k at H d + g d, of v at H d + KV d + g d; out rows
 * are H d wide. drop: dropout on the probabilities as the _drop kernels above (query head h is
 * global drop->head0 + h; NULL: none). dk and dv of a kv head are the sums over the query heads
 * of its group, added in ascending head order (the same bits for any thread count). Charges:
 * FLOPs of H heads; the bytes of k, v, dk, dv count KV heads. The GPT-2 kernels above
 * are these with KV = H, d = C/H (the same bits and charges). */
void mdc_attention_gqa_forward(mdc_device *dev,
                               float *out,       // (B,T,H*d)
                               float *att,       // (B,H,T,T) undropped probabilities, saved
                               const float *qkv, // (B,T,(H+2KV)*d)
                               const mdc_dropout *drop, int B, int T, int H, int KV, int d);
void mdc_attention_gqa_backward(mdc_device *dev,
                                float *dqkv,       // (B,T,(H+2KV)*d) +=
                                float *scratch,    // (B,H,T,T) work space, clobbered
                                const float *dout, // (B,T,H*d)
                                const float *qkv,  // (B,T,(H+2KV)*d)
                                const float *att,  // (B,H,T,T) from the forward
                                const mdc_dropout *drop, int B, int T, int H, int KV, int d);
void mdc_attention_gqa_forward_tiled(mdc_device *dev,
                                     float *out,       // (B,T,H*d)
                                     float *lse,       // (B,H,T) of the undropped scores
                                     const float *qkv, // (B,T,(H+2KV)*d)
                                     const mdc_dropout *drop, int B, int T, int H, int KV, int d);
void mdc_attention_gqa_backward_tiled(mdc_device *dev,
                                      float *dqkv,       // (B,T,(H+2KV)*d) +=
                                      const float *dout, // (B,T,H*d)
                                      const float *out,  // (B,T,H*d) from the forward
                                      const float *qkv,  // (B,T,(H+2KV)*d)
                                      const float *lse,  // (B,H,T)
                                      const mdc_dropout *drop, int B, int T, int H, int KV, int d);

/* ---- exact mode's block kernels (kernels/exact_blocks.c, docs/exactness.md) -----------------
 * Each adds block partial sums into arrays of exact sums (minidc/exact.h) at offsets in
 * floats of the same layout as the float tensors; n is a multiple of the block. */
/* dW (IN x OUT at off) += sum over blocks of blk rows of A^T Bm: A (n, IN) row stride lda,
 * Bm (n, OUT) row stride ldb (weight gradients over tokens; the LM head's dwte). */
void mdc_x_wgrad(mdc_device *dev, mdc_xsum *xs, size_t off, const float *A, int lda, const float *Bm, int ldb, int n,
                 int IN, int OUT, int blk);
/* db (OUT at off) += column sums of D (n, OUT) row stride ld, over blocks of blk rows. */
void mdc_x_colsum(mdc_device *dev, mdc_xsum *xs, size_t off, const float *D, int ld, int n, int OUT, int blk);
/* out (n, OUT at 0) += A (n, K) W (K, OUT), summed over blocks of kblk indices of K; transW:
 * W is stored transposed, (OUT, K) with row stride ldw (a column-parallel input gradient). */
void mdc_x_contract(mdc_device *dev, mdc_xsum *xs, const float *A, int lda, const float *W, int ldw, int transW, int n,
                    int K, int OUT, int kblk);
/* The same into the rows of xs from element off on (out (n, OUT at off)). */
void mdc_x_contract_at(mdc_device *dev, mdc_xsum *xs, size_t off, const float *A, int lda, const float *W, int ldw,
                       int transW, int n, int K, int OUT, int kblk);
/* out (n, N) = A (n, K) W (K, N) (+ bias): each element one chain over k in order from 0,
 * whatever the shape of the call (the products no scheme splits: their bits must still not
 * depend on how many rows or columns a rank holds). transW: W stored (N, K), row stride ldw. */
void mdc_x_matmul(mdc_device *dev, float *out, const float *A, int lda, const float *W, int ldw, int transW,
                  const float *bias, int n, int K, int N);
/* LayerNorm's dweight, dbias (C each) over blocks of blk rows. */
void mdc_x_layernorm_wgrad(mdc_device *dev, mdc_xsum *xs, size_t offw, size_t offb, const float *dout, const float *inp,
                           const float *mean, const float *rstd, int n, int C, int blk);
/* RMSNorm's dweight (d at offw) over the heads of n strided rows (mdc_rmsnorm_heads_backward's
 * layout), over blocks of blk rows. */
void mdc_x_rmsnorm_wgrad(mdc_device *dev, mdc_xsum *xs, size_t offw, const float *dout, int ldo, const float *inp,
                         int ldx, const float *rstd, int n, int heads, int d, int blk);
/* Embedding rows [lo, lo + rows) of wte (at off_wte) += each token's dout row; wpe (at off_wpe,
 * -1: none) += every sequence's row at each position (pos[t], or t with pos NULL). */
void mdc_x_embed(mdc_device *dev, mdc_xsum *xs, size_t off_wte, long off_wpe, const float *dout, const int *inp, int lo,
                 int rows, const int *pos, int B, int T, int C);
/* se[i] = sum over blocks of vblk of the block's float sum of exp(z - mx[i]), z the first
 * `valid` of row i of logits (row stride ld). */
void mdc_x_sumexp(mdc_device *dev, mdc_exact *se, const float *logits, int ld, const float *mx, int n, int valid,
                  int vblk);

/* ---- Llama / Qwen layers (kernels/rmsnorm.c, swiglu.c, rope.c; Hugging Face's definitions) --- */
/* RMSNorm: y = w * (x * rstd), rstd = 1/sqrt(mean(x^2) + eps) per row (any C >= 1: Qwen3's
 * q_norm / k_norm run it per head, C = head_dim, N = tokens x heads). The backward's input part
 * (dinp) and weight part (dweight) can run alone: pass NULL for the other (the same bits as both
 * at once). */
void mdc_rmsnorm_forward(mdc_device *dev,
                         float *out,          // (N,C)
                         float *rstd,         // (N) saved for backward
                         const float *inp,    // (N,C)
                         const float *weight, // (C)
                         int N, int C, float eps);
void mdc_rmsnorm_backward(mdc_device *dev,
                          float *dinp,         // (N,C) += or NULL
                          float *dweight,      // (C) += or NULL
                          const float *dout,   // (N,C)
                          const float *inp,    // (N,C)
                          const float *weight, // (C)
                          const float *rstd,   // (N) from the forward
                          int N, int C);

/* RMSNorm of every head of strided rows: head h of row r is d channels at inp + r ldi + h d,
 * normalized with weight (d) into out + r ldo + h d, its rstd at rstd[r heads + h] (Qwen3's q_norm
 * and k_norm on the q or k part of the fused qkv rows). The plain calls above are heads = 1. */
void mdc_rmsnorm_heads_forward(mdc_device *dev, float *out, int ldo, float *rstd, const float *inp, int ldi,
                               const float *weight, int N, int heads, int d, float eps);
void mdc_rmsnorm_heads_backward(mdc_device *dev, float *dinp, int ldd, float *dweight, const float *dout, int ldo,
                                const float *inp, int ldi, const float *weight, const float *rstd, int N, int heads,
                                int d);

/* SwiGLU on the fused gate|up product: out[r] = silu(gate[r]) * up[r], gate[r] the first F and
 * up[r] the last F of row r of gu; silu(g) = g / (1 + exp(-g)); finite for any finite inputs. */
void mdc_swiglu_forward(mdc_device *dev,
                        float *out,      // (N,F)
                        const float *gu, // (N,2F) [gate | up]
                        int N, int F);
/* dup += dout * silu(g); dgate += dout * up * s (1 + g (1 - s)), s = sigmoid(g). */
void mdc_swiglu_backward(mdc_device *dev,
                         float *dgu,        // (N,2F) += [dgate | dup]
                         const float *gu,   // (N,2F)
                         const float *dout, // (N,F)
                         int N, int F);

/* Rotary position embeddings, HF's rotate_half convention: pair j of a head of d channels (d
 * even) is (x[j], x[j + d/2]), rotated by the angle pos * inv_freq[j]. The tables are built with
 * minidc's own exp, log, sin and cos (the same bits on every machine). */
/* Llama 3's frequency scaling (rope_scaling "rope_type": "llama3"). */
typedef struct {
    float factor, low_freq_factor, high_freq_factor;
    int original_max_position_embeddings;
} mdc_rope_llama3;
/* inv_freq[i] = 1 / theta^(2i/d) in float32 as HF computes it, then llama3's scaling (NULL: none). */
void mdc_rope_inv_freq(float *inv_freq, // (d/2)
                       int d, double theta, const mdc_rope_llama3 *llama3);
/* cos_t[p][j], sin_t[p][j] of the float angle (float)pos(p) * inv_freq[j], pos(p) = pos[p], or
 * pos0 + p with pos NULL (a context-parallel rank's global positions). */
void mdc_rope_table(float *cos_t,          // (P,d/2)
                    float *sin_t,          // (P,d/2)
                    const float *inv_freq, // (d/2)
                    int d,
                    const int *pos, // (P) or NULL
                    int pos0, int P);
/* Rotates x in place: B*T rows ((B,T) ordered) at x + r*ld, each `heads` heads of d channels
 * side by side (head h at columns h*d); row r uses table row r % T. x1' = x1 c - x2 s,
 * x2' = x2 c + x1 s. */
void mdc_rope_forward(mdc_device *dev,
                      float *x, // (B*T, ld) rows of heads*d, rotated in place
                      int ld, int heads, int d,
                      const float *cos_t, // (T,d/2)
                      const float *sin_t, // (T,d/2)
                      int B, int T);
/* The transpose, in place on the gradient (it replaces dx, it does not accumulate):
 * dx1' = dx1 c + dx2 s, dx2' = dx2 c - dx1 s. */
void mdc_rope_backward(mdc_device *dev,
                       float *dx, // (B*T, ld) rows of heads*d, rotated in place
                       int ld, int heads, int d,
                       const float *cos_t, // (T,d/2)
                       const float *sin_t, // (T,d/2)
                       int B, int T);
/* sin and cos of x in double, minidc's own (the tables' cos and sin before rounding to float):
 * absolute error below 5e-16 for |x| < 2^26; NaN for |x| > 2^50, inf and NaN. */
void mdc_rope_sincos(double x, double *sin_x, double *cos_x);

#ifdef __cplusplus
}
#endif
#endif
