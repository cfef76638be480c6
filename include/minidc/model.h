/* minidc serial reference: a GPT-2 decoder (pre-LayerNorm, learned positions, causal
 * multi-head attention, 4C GELU MLP, LM head tied to the token embedding), fp32, on one
 * emulated device. This is the specification every parallel scheme is tested against.
 *
 * Parameters live in ONE device allocation (MDC_MEM_PARAMS) carved into tensors named and
 * shaped as Hugging Face's GPT-2 (Conv1D weights are [in, out]); gradients, and AdamW's
 * m and v, are allocations with the same layout (same offsets). The tensors are in the order
 *   wte, wpe, h.0.ln_1.weight, h.0.ln_1.bias, h.0.attn.c_attn.weight, h.0.attn.c_attn.bias,
 *   h.0.attn.c_proj.weight, h.0.attn.c_proj.bias, h.0.ln_2.weight, h.0.ln_2.bias,
 *   h.0.mlp.c_fc.weight, h.0.mlp.c_fc.bias, h.0.mlp.c_proj.weight, h.0.mlp.c_proj.bias,
 *   h.1.* ..., ln_f.weight, ln_f.bias
 * so each layer is one contiguous range. wte is allocated with Vp rows (the padded
 * vocabulary); its first V rows are Hugging Face's [V, C] wte, the padding rows stay 0
 * (their gradient is 0), and the tensor table reports shape [V, C].
 *
 * Activations (MDC_MEM_ACTS) are allocated at creation for a maximum batch B x T, so the
 * emulated HBM limit applies to them; gradients on the first mdc_gpt2_zero_grad/backward,
 * the optimizer state on the first update. */
#ifndef MINIDC_MODEL_H
#define MINIDC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "minidc/collectives.h"
#include "minidc/device.h"
#include "minidc/exact.h"
#include "minidc/kernels.h"
#include "minidc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int V;  /* vocabulary */
    int Vp; /* padded vocabulary: V rounded up to a multiple of 128 (50257 -> 50304, as llm.c);
                rows of wte and columns of logits; 0 in a config means "compute it" */
    int T;  /* context length (wpe rows) */
    int L;  /* layers */
    int H;  /* heads */
    int C;  /* channels; H must divide C */
    /* mixture of experts (ref/model/moe/moe.c): 0 experts is the dense GPT-2. With E > 0 the MLP of every
     * block l with l % moe_every == 0 (blocks 0, n, 2n, ...; 0 or 1: every block) is E experts,
     * each a GPT-2 MLP, and a router choosing topk of them per token. The MoE families (Mixtral,
     * Qwen3-MoE): every block l with (l + 1) % moe_every == 0 (decoder_sparse_step), experts of
     * SwiGLU, moe_ffn wide */
    int E, topk, moe_every; /* topk 0 in a config means 2 (1 with one expert) */
    /* The family (docs/models.md). GPT-2 (0): the above. Llama, Qwen2, Qwen3 (Hugging Face's
     * modeling_llama / qwen2 / qwen3): RMSNorm, rotary positions on q and k (no wpe), grouped-query
     * attention, the SwiGLU MLP, weights in nn.Linear's [out, in], named as transformers names them;
     * the sizes and switches below (0 where a GPT-2 has no such setting). */
    int family;           /* MDC_FAMILY_GPT2, _LLAMA, _QWEN2, _QWEN3 */
    int KV;               /* key/value heads, num_key_value_heads (0: H); KV divides H */
    int head_dim;         /* 0: C / H */
    int ffn;              /* the MLP's width, intermediate_size (0: 4C) */
    int qkv_bias;         /* q, k, v projections with biases (Qwen2; Llama's attention_bias) */
    int o_bias;           /* o_proj with a bias (Llama's attention_bias) */
    int mlp_bias;         /* gate, up, down projections with biases (Llama's mlp_bias) */
    int qk_norm;          /* Qwen3: RMSNorm over each head of q and k before the rotation */
    int untied;           /* lm_head.weight of its own (tie_word_embeddings false) */
    float eps;            /* rms_norm_eps (0: 1e-6) */
    double rope_theta;    /* 0: 10000 */
    mdc_rope_llama3 rope; /* rope_scaling of rope_type llama3 (factor 0: none) */
    int moe_ffn;          /* an expert's width: moe_intermediate_size (Qwen3-MoE; 0: ffn, as Mixtral) */
    int moe_renorm;       /* gates renormalized over the chosen k: Mixtral always, Qwen3-MoE norm_topk_prob */
    int shared_ffn;       /* a MoE block's shared expert (every token, beside the routed ones), this wide:
                             Qwen2-MoE's shared_expert_intermediate_size; 0: none */
    int shared_gate;      /* the shared expert's output scaled by sigmoid(x w), shared_expert_gate [1, C]
                             (Qwen2-MoE's mlp.shared_expert; ungated: DeepSeek's mlp.shared_experts) */
    /* DeepSeek-V3 routing on a MoE family's attention (ref/model/moe/moe_route.c): scores
     * s = sigmoid(z); the routing bias added to s for the choice only; the experts in
     * n_group groups, the topk_group groups of the highest sum of their two best biased scores
     * kept (the others' scores 0); the top k of those; gates the chosen s (renormalized with
     * moe_renorm) times routed_scale. Blocks below first_dense are dense. */
    int router;         /* MDC_ROUTER_SOFTMAX (the family's own), MDC_ROUTER_SIGMOID (DeepSeek-V3) */
    int n_group;        /* 0: 1 */
    int topk_group;     /* 0: n_group */
    float routed_scale; /* routed_scaling_factor (0: 1) */
    int first_dense;    /* first_k_dense_replace */
    int n_shared;       /* n_shared_experts: the ungated shared expert is n_shared x moe_ffn wide */
    /* transformers' auxiliary loss (output_router_logits true): this x load_balancing_loss_func
     * of each micro-batch's router logits, every MoE block pooled (0: none) */
    float lb_coef;
    /* the attention's kernel: MDC_ATTENTION_AUTO (0: tiled above MDC_GPT2_TILED_T tokens),
     * _MATERIALIZED (the T x T probabilities kept, as Megatron before FlashAttention), _TILED */
    int attention;
} mdc_gpt2_config;
enum { MDC_ATTENTION_AUTO = 0, MDC_ATTENTION_MATERIALIZED, MDC_ATTENTION_TILED };
/* 1: the model runs sequences of T tokens with the tiled attention kernel (cfg->attention) */
int mdc_gpt2_attention_tiled(const mdc_gpt2_config *c, int T);
enum { MDC_ROUTER_SOFTMAX = 0, MDC_ROUTER_SIGMOID };
enum {
    MDC_FAMILY_GPT2 = 0,
    MDC_FAMILY_LLAMA,
    MDC_FAMILY_QWEN2,
    MDC_FAMILY_QWEN3,
    MDC_FAMILY_MIXTRAL,
    MDC_FAMILY_QWEN3_MOE,
    MDC_FAMILY_QWEN2_MOE
};
/* "gpt2", "llama", "qwen2", "qwen3", "mixtral", "qwen3_moe", "qwen2_moe" (transformers' model_type);
 * NULL for an unknown family. */
const char *mdc_gpt2_family_name(int family);
/* 1 when the LM head is the token embedding (GPT-2; a family with tie_word_embeddings). */
int mdc_gpt2_tied(const mdc_gpt2_config *cfg);
/* The tp ranks that hold one kv head: tp / KV when tp is larger than the kv heads (each kv head
 * replicated on that many consecutive tp ranks), else 1. */
int mdc_gpt2_kv_replicas(const mdc_gpt2_config *cfg, int tp);
/* The kv heads a tp rank holds: KV / tp, or with tp > KV the one it shares. */
int mdc_gpt2_kv_heads_local(const mdc_gpt2_config *cfg, int tp);
enum { MDC_GPT2_MAX_EXPERTS = 1024, MDC_GPT2_MAX_TOPK = 8 };

/* Attention: the materialized kernel when the sequence T <= this (fast, B*H*T*T floats per
 * layer), the tiled online-softmax kernel above it (O(T) per row). */
enum { MDC_GPT2_TILED_T = 256 };

/* V rounded up to a multiple of 128. */
int mdc_gpt2_padded_vocab(int V);
/* The padded vocabulary a run with tensor parallelism tp uses: V rounded up to a multiple of
 * 128 that tp divides into shards of whole exact-mode vocabulary blocks (lcm(128, 32 tp);
 * 128 for tp 1, 2 and 4). Megatron pads the same way (make-vocab-size-divisible-by x tp).
 * The rows past V are padding: masked out of the loss, zero, never in a file (files hold
 * [V, C]), so checkpoints keep their shape on every mesh. */
int mdc_gpt2_padded_vocab_tp(int V, int tp);

/* Named configs: "tiny" (V=512 T=64 L=2 H=4 C=128), "small" (V=4096 T=128 L=4 H=8 C=256),
 * "gpt2" (V=50257 Vp=50304 T=1024 L=12 H=12 C=768); the families' small ones "llama-tiny",
 * "qwen2-tiny", "qwen3-tiny" (V=512 T=64 L=2 C=128 H=4 KV=2; docs/models.md). *batch (may be NULL) gets the config's
 * default batch (24, 12, 12: divisible by 2, 3 and 4). MDC_ERR_INVALID names the unknown
 * config and lists the known ones. */
mdc_status mdc_gpt2_config_named(const char *name, mdc_gpt2_config *cfg, int *batch);
/* Sets Vp if 0 and checks every size (positive, H divides C, Vp >= V, sizes that fit in int
 * indexing). The detail names the offending option: --heads, --channels, ... */
mdc_status mdc_gpt2_config_check(mdc_gpt2_config *cfg);

/* ---- the parameter table ---------------------------------------------------------------- */
typedef struct {
    char name[64]; /* Hugging Face name without "transformer.", e.g. "h.3.attn.c_attn.weight",
                      "model.layers.3.self_attn.k_proj.weight" */
    int ndim;      /* 1 or 2 */
    int shape[2];  /* Hugging Face shape (wte: [V, C]; the families' linear weights [out, in]) */
    size_t offset; /* floats from the start of the parameter allocation (same in grads, m, v) */
    size_t numel;  /* shape[0] * shape[1] */
    size_t alloc;  /* floats reserved (wte: Vp * C; else numel) */
    int decay;     /* 1 if AdamW weight decay applies (the 2-D tensors: embeddings and
                        weights), 0 for biases and LayerNorm (nanoGPT's grouping) */
    /* the slice of the global tensor (a local table's entry; the global table's own entries
     * are whole: split NONE, global = their index). Local shape[0] of wte counts its rows
     * below V; alloc covers the shard's Vp/t rows. */
    int global; /* index in the global table */
    int split;  /* MDC_SPLIT_NONE, _ROWS or _COLS */
    int row0;   /* first global row (ROWS) */
    int col0;   /* first global column of the first piece (COLS) */
    int pieces; /* column pieces (COLS: 3 for c_attn, else 1), each shape[1]/pieces wide,
                        `pstride` global columns apart */
    int pstride;
} mdc_param_tensor;

/* Number of tensors: 2 + 12 L + 2, and 4 E - 3 more per MoE block (its router and E experts'
 * c_fc, c_proj weights and biases in place of the MLP's four): h.N.mlp.router.weight [C, E],
 * h.N.mlp.experts.J.c_fc.weight [C, 4C], .c_fc.bias, .c_proj.weight [4C, C], .c_proj.bias. */
int mdc_gpt2_tensor_count(const mdc_gpt2_config *cfg);
/* The i-th tensor of a config (no model needed); MDC_ERR_INVALID if i is out of range. */
mdc_status mdc_gpt2_tensor_at(const mdc_gpt2_config *cfg, int i, mdc_param_tensor *out);
/* The expert j of global tensor i (h.N.mlp.experts.j.*), or -1. */
int mdc_gpt2_tensor_expert(const mdc_gpt2_config *cfg, int i);
/* Index of a tensor by name (a leading "transformer." is ignored), or -1. */
int mdc_gpt2_tensor_find(const mdc_gpt2_config *cfg, const char *name);
/* Floats in the parameter allocation (with the wte padding) and parameters proper (without). */
size_t mdc_gpt2_param_floats(const mdc_gpt2_config *cfg);
size_t mdc_gpt2_param_count(const mdc_gpt2_config *cfg);

/* ---- memory --------------------------------------------------------------------------- */
typedef struct {
    size_t params, grads, optim, acts, total; /* bytes */
} mdc_gpt2_memory;
/* Bytes the model allocates for training batch B x T: params + grads + AdamW m,v + activations
 * (exactly what mdc_gpt2_create + backward + update allocate on the device). */
mdc_gpt2_memory mdc_gpt2_memory_need(const mdc_gpt2_config *cfg, int B, int T);

/* FLOPs of one training step (forward + backward + update) as the kernels charge them. */
double mdc_gpt2_step_flops(const mdc_gpt2_config *cfg, int B, int T);

/* ---- the model ---------------------------------------------------------------------------- */
typedef struct mdc_gpt2 mdc_gpt2;

/* Creates a model on `dev` for batches up to B x T (T <= cfg->T); allocates parameters (zero)
 * and activations on the device. Fails on a bad config (MDC_ERR_INVALID, naming the size) or
 * when the device is full (MDC_ERR_OOM_DEVICE). Free with mdc_gpt2_free (NULL is a no-op),
 * which frees every device allocation the model made. The device must outlive the model. */
mdc_status mdc_gpt2_create(mdc_gpt2 **out, mdc_device *dev, const mdc_gpt2_config *cfg, int B, int T);
void mdc_gpt2_free(mdc_gpt2 *m);

/* GPT-2 initialization from a seed: wte, wpe and every weight N(0, 0.02), the residual
 * projections (attn.c_proj.weight, mlp.c_proj.weight; the families' o_proj, down_proj and every
 * expert's down) N(0, 0.02/sqrt(2L)), biases 0, norm weights 1 and biases 0, wte padding rows 0. Deterministic: each element's value
 * depends only on the seed and its offset (a counter-based generator), not on threads. */
void mdc_gpt2_init(mdc_gpt2 *m, uint64_t seed);

const mdc_gpt2_config *mdc_gpt2_get_config(const mdc_gpt2 *m);
mdc_device *mdc_gpt2_device(const mdc_gpt2 *m);

/* How the model's files spell tensor names, so that what minidc writes (checkpoints, dumps,
 * gradients) is found under the names its input used: prefixed puts "transformer." in front
 * (as a transformers checkpoint does), table_embed writes the embeddings as minidc's table
 * spells them ("wte", "wpe") instead of Hugging Face's "wte.weight", "wpe.weight". Weights
 * minidc made itself are spelled as Hugging Face does: {0, 0}. The weights loader records the
 * spelling of the file it reads (datasets/weights.c). */
typedef struct {
    int prefixed, table_embed;
} mdc_gpt2_spelling;
void mdc_gpt2_set_spelling(mdc_gpt2 *m, mdc_gpt2_spelling s);
/* Parameter tensor p's name in the model's spelling, in buf (returned). */
const char *mdc_gpt2_spelled(const mdc_gpt2 *m, const mdc_param_tensor *p, char *buf, size_t cap);
/* The parameter allocation (mdc_gpt2_param_floats floats): read and write freely. */
float *mdc_gpt2_params(mdc_gpt2 *m);
/* The gradient allocation, NULL before the first mdc_gpt2_zero_grad/backward. */
float *mdc_gpt2_grads(mdc_gpt2 *m);
/* AdamW's first and second moments, NULL before the first update. */
float *mdc_gpt2_adam_m(mdc_gpt2 *m);
float *mdc_gpt2_adam_v(mdc_gpt2 *m);
/* Number of AdamW steps taken (the t of the bias correction); settable for --resume. */
int mdc_gpt2_adam_step(const mdc_gpt2 *m);
mdc_status mdc_gpt2_set_adam_step(mdc_gpt2 *m, int t); /* allocates m,v (zero) if needed */

/* Forward over inputs (B,T) token ids in [0, V). With targets (B,T) in [0, V) it also
 * computes the per-position losses and *loss = their mean; with targets NULL, *loss (if not
 * NULL) is set to -1. B, T must not exceed the creation sizes. */
mdc_status mdc_gpt2_forward(mdc_gpt2 *m, const int *inputs, const int *targets, int B, int T, float *loss);
/* Logits (B,T,Vp) of the last forward (row stride Vp; columns >= V are padding, 0). Valid
 * until the next backward, which overwrites them with their gradient. */
const float *mdc_gpt2_logits(const mdc_gpt2 *m);
/* Per-position losses (B,T) of the last forward with targets. */
const float *mdc_gpt2_losses(const mdc_gpt2 *m);

/* Sets the gradients to 0 (allocating them on first use). */
mdc_status mdc_gpt2_zero_grad(mdc_gpt2 *m);
/* Backward of the mean loss of the last forward (which must have had targets): ADDS the
 * gradients to the gradient allocation (call zero_grad first; repeated calls accumulate
 * micro-batches). */
mdc_status mdc_gpt2_backward(mdc_gpt2 *m);
/* Like mdc_gpt2_backward with d(loss)/d(loss_i) = dloss for each position instead of 1/(B T)
 * (gradient accumulation over micro-batches: dloss = 1/(total tokens)). */
mdc_status mdc_gpt2_backward_scaled(mdc_gpt2 *m, float dloss);

typedef struct {
    float lr;           /* learning rate (3e-4) */
    float beta1, beta2; /* 0.9, 0.95 */
    float eps;          /* 1e-8 */
    float weight_decay; /* 0.1, on tensors with decay = 1 only */
    float grad_clip;    /* global norm clip (1.0); <= 0 disables */
} mdc_adamw_config;
void mdc_adamw_config_default(mdc_adamw_config *c);

/* One AdamW step on the gradients (allocating m, v on first use): computes the global
 * gradient norm (returned in *grad_norm if not NULL, before clipping), scales the gradients by
 * mdc_clip_scale, then updates every tensor. Does not zero the gradients. */
mdc_status mdc_gpt2_update(mdc_gpt2 *m, const mdc_adamw_config *opt, float *grad_norm);

/* ---- partitions: which part of the global model this rank holds ------------------------------
 * A partition names the tensor-parallel rank, the blocks held (a pipeline stage's range) and
 * whether the embedding and the head are here. Its local tensor table says, for every tensor
 * held, which slice of which global (Hugging Face named) tensor it is:
 *   replicated  the whole tensor on every tp rank: LayerNorms, wpe, row-parallel biases;
 *   rows        wte: rows [tp_rank Vp/t, (tp_rank+1) Vp/t) of the padded vocabulary (the
 *               vocab-parallel embedding and the tied LM head use the same shard);
 *               attn.c_proj.weight, mlp.c_proj.weight: rows (the row-parallel input);
 *   columns     mlp.c_fc: columns [r 4C/t, (r+1) 4C/t) of weight and bias;
 *               attn.c_attn: the q, k and v columns of heads [r H/t, (r+1) H/t): three pieces
 *               of C/t columns, at r C/t, C + r C/t and 2C + r C/t.
 * A MoE block's router, shared expert and routed experts are whole on every tp rank, unless
 * etp > 1: then a routed expert's c_fc (the families' gate_proj and up_proj) holds the columns
 * (rows of [out, in]) [e F/etp, (e+1) F/etp) of etp rank e = tp_rank % etp, its c_proj (down_proj)
 * those rows (columns of [out, in]); GPT-2's c_proj bias stays whole (added after the sum). 
 * A 1-D tensor is a row vector for this purpose. Initialization draws each element from its
 * global index, so a shard equals the serial tensor's slice bit for bit. */
#define MDC_GPT2_MAX_CHUNKS 16
typedef struct {
    int tp, tp_rank; /* tensor-parallel size and this rank's index (1, 0: serial) */
    int sp;          /* Megatron sequence parallelism over the tp ranks (tp > 1) */
    int chunks;      /* model chunks held: 1, or v on an interleaved pipeline's stage */
    int lo[MDC_GPT2_MAX_CHUNKS], hi[MDC_GPT2_MAX_CHUNKS]; /* chunk k: blocks [lo[k], hi[k]), ascending */
    int has_embed, has_head; /* the embedding before chunk 0, the head after the last chunk */
    int ep, ep_rank;         /* expert parallelism: experts [ep_rank E/ep, (ep_rank+1) E/ep) here
                               (0 or 1: every expert) */
    int etp;                 /* expert tensor parallelism (0 or 1: none): each routed expert split over etp
                                consecutive tp ranks, etp rank tp_rank % etp holding columns [r F/etp,
                                (r+1) F/etp) of its gate/up (c_fc) and those rows of its down (c_proj) */
} mdc_gpt2_part;
enum { MDC_SPLIT_NONE = 0, MDC_SPLIT_ROWS, MDC_SPLIT_COLS };
/* The whole model on one rank. */
mdc_gpt2_part mdc_gpt2_part_serial(const mdc_gpt2_config *cfg);
/* Checks a partition against a config and a sequence length: H, 4C and Vp divisible by tp,
 * T divisible by tp with sp, the chunks' layer ranges ascending inside [0, L]. The detail names the option
 * (--tp, --sp, --heads, --vocab, --seq) and the sizes. */
mdc_status mdc_gpt2_part_check(const mdc_gpt2_part *p, const mdc_gpt2_config *cfg, int T);

/* ---- communication points inside the model ----------------------------------------------
 * Megatron's conjugate operators, named once. The block code calls them at fixed places; a
 * model without them (comm NULL: the serial model) runs the fused serial kernels instead.
 *   f  before a column-parallel linear: forward identity (SP: AllGather over the sequence),
 *      backward AllReduce of the input gradient (SP: ReduceScatter);
 *   g  after a row-parallel linear: forward AllReduce of the partial sums (SP:
 *      ReduceScatter), backward identity (SP: AllGather);
 *   vocab  the vocab-parallel loss: max, sum-exp and the target logit reduced over tp.
 * Shapes: `full` is (B, T, C); `local` is (B, T/seq_split, C), this rank's positions
 * [rank T/s, (rank+1) T/s) of every sequence. With seq_split 1 they are the same buffer. */
typedef struct mdc_gpt2_comm {
    void *ctx;
    int seq_split; /* 1, or tp with SP */
    mdc_status (*f_forward)(void *ctx, float *full, const float *local, int B, int T, int C);
    mdc_status (*f_backward)(void *ctx, float *dlocal, float *dfull, int B, int T, int C);
    mdc_status (*g_forward)(void *ctx, float *local, float *full, int B, int T, int C);
    mdc_status (*g_backward)(void *ctx, float *dfull, const float *dlocal, int B, int T, int C);
    mdc_status (*vocab)(void *ctx, float *buf, int n, int is_max);
    /* exact mode: g's forward and f's backward on exact partial sums (part, (B, T, C) as the
     * float `full`): summed over tp as accumulators, rounded once into `local`; and the
     * per-position sum-exp accumulators of the loss summed over tp */
    mdc_status (*x_reduce)(void *ctx, float *local, const mdc_xsum *part, int B, int T, int C);
    mdc_status (*x_vocab)(void *ctx, mdc_exact *acc, int n);
    /* tp > KV (mdc_gpt2_kv_replicas): the attention's dk, dv of the kv head this rank shares,
     * columns [col0, col0 + width) of rows rows of ld floats, summed over the head's replicas
     * (each saw its own query heads); exact mode: the exact sums of part's same elements, rounded
     * once into out. NULL where tp <= KV. */
    mdc_status (*kv_sum)(void *ctx, float *buf, int rows, int ld, int col0, int width);
    mdc_status (*x_kv_sum)(void *ctx, float *out, const mdc_xsum *part, int rows, int ld, int col0, int width);
} mdc_gpt2_comm;

/* ---- exact mode (docs/exactness.md) -------------------------------------------------------
 * Every sum a mesh can split is cut into canonical blocks and the blocks are combined exactly,
 * so every mesh's gradients, losses and updates are the serial run's bits:
 *   over tokens (weight, bias, LayerNorm gradients): blocks of token_block positions of one
 *     sequence (a rank's positions of a sequence, with SP, must be a multiple);
 *   over the contraction of a row-parallel product or a column-parallel input gradient:
 *     blocks of one head (C/H) for attention, 4C/H for the MLP;
 *   over the vocabulary (the loss's sum-exp, the LM head's input gradient): blocks of
 *     MDC_EXACT_VOCAB_BLOCK entries (Vp / tp must be a multiple);
 *   embedding rows: token by token; the loss and the gradient norm: exactly.
 * Gradients accumulate as exact sums (mdc_gpt2_exact_grads) until the step rounds them into
 * the float gradients once, after every reduction over ranks. */
enum { MDC_EXACT_DEFAULT_BLOCK = 32, MDC_EXACT_VOCAB_BLOCK = 32 };
/* token_block > 0 turns exact mode on (allocating the exact gradient sums, 8 bytes a float,
 * MDC_MEM_GRADS), 0 off. MDC_ERR_INVALID names --exact-block or --tp when a block does not fit. */
mdc_status mdc_gpt2_set_exact(mdc_gpt2 *m, int token_block);
int mdc_gpt2_exact_block(const mdc_gpt2 *m); /* 0: off */
/* The gradients' exact sums since zero_grad (local layout, offsets as the float gradients). */
mdc_xsum *mdc_gpt2_exact_grads(mdc_gpt2 *m);
/* The sum of the per-position losses of the forwards since zero_grad (exact mode). */
mdc_exact *mdc_gpt2_exact_loss(mdc_gpt2 *m);
/* The gradient sink as a scheme reduces it: n elements of mdc_gpt2_grad_dtype (MDC_F32 floats,
 * or in exact mode MDC_EXACT sums, which the collectives sum exactly) from offset off of the
 * local gradient layout, copied out (pack) or back in (unpack). A sink of floats is complete
 * bucket by bucket as the backward goes; a sink of sums holds them to the step's end, and after
 * the last reduction mdc_gpt2_grad_round turns them into the float gradients (the whole local
 * layout; a no-op for floats; MDC_ERR_OOM_HOST if a sum could not get its accumulator). */
mdc_dtype mdc_gpt2_grad_dtype(const mdc_gpt2 *m);
void mdc_gpt2_grad_pack(mdc_gpt2 *m, size_t off, size_t n, void *buf);
void mdc_gpt2_grad_unpack(mdc_gpt2 *m, size_t off, size_t n, const void *buf);
mdc_status mdc_gpt2_grad_round(mdc_gpt2 *m);
/* The step's scalars as the mesh sums them, one element of mdc_gpt2_scalar_dtype each (MDC_F64;
 * exact mode MDC_EXACT: the same bits however tokens and tensors are spread): the objective
 * since zero_grad (loss_sum, the forwards' sums, if count_loss; MoE's aux and z terms if
 * count_moe) into *slot; the squares of g[0..n) added into *slot; a slot's value. */
mdc_dtype mdc_gpt2_scalar_dtype(const mdc_gpt2 *m);
void mdc_gpt2_scalar_objective(mdc_gpt2 *m, double loss_sum, int count_loss, int count_moe, void *slot);
void mdc_gpt2_scalar_add_squares(mdc_gpt2 *m, const float *g, size_t n, void *slot);
double mdc_gpt2_scalar_value(const mdc_gpt2 *m, const void *slot);

/* ---- the model as held by one rank: weights, and activation sets ---------------------------- */
/* Creates the weights of partition `part` (parameters zero; gradients and AdamW state on first
 * use) and a default activation set for batches up to B x T (the one mdc_gpt2_forward and
 * mdc_gpt2_backward use). `comm` (borrowed, may be NULL only for a tp = 1 partition) is the
 * tensor-parallel communication. Flags as mdc_gpt2_create_flags. */
mdc_status mdc_gpt2_create_part(mdc_gpt2 **out, mdc_device *dev, const mdc_gpt2_config *cfg, const mdc_gpt2_part *part,
                                const mdc_gpt2_comm *comm, int B, int T, unsigned flags);
const mdc_gpt2_part *mdc_gpt2_get_part(const mdc_gpt2 *m);
const mdc_gpt2_comm *mdc_gpt2_get_comm(const mdc_gpt2 *m); /* NULL: the serial model */
/* The local tensor table: shapes are local, offsets in the local allocation, `global` the
 * index of the global tensor (mdc_gpt2_tensor_at), `split`, `row0`, `col0`, `pieces` the slice. */
int mdc_gpt2_local_count(const mdc_gpt2 *m);
/* 1 when local tensor i is replicated over tp but its gradient on a tp rank is a partial sum,
 * to be summed over tp before the step: with SP the norms and row-parallel biases (each rank
 * sees its positions), always Qwen3's q_norm and k_norm (each rank sees its heads).
 * MDC_GRAD_PARTIAL_ETP for a routed expert's tensors with etp > 1, SP and tp > etp: each etp
 * group computed them from its own tokens, to be summed over the tp ranks of the same etp rank
 * (mesh.h's MDC_MESH_ETP_SHARD). 0 otherwise. */
enum { MDC_GRAD_PARTIAL_TP = 1, MDC_GRAD_PARTIAL_ETP = 2 };
int mdc_gpt2_grad_partial(const mdc_gpt2 *m, int i);
/* With etp > 1: 1 when local tensor i is a routed expert's (a shard, or GPT-2's c_proj bias)
 * and this rank's etp group is not the first of its tp group (tp_rank >= etp): its copy of a
 * gradient the first group's ranks hold too (left out of the gradient norm). */
int mdc_gpt2_etp_copy(const mdc_gpt2 *m, int i);
/* With tp > KV: 1 when local tensor i is a slice of a kv head replicated over tp / KV ranks
 * (k_proj, v_proj and their biases), 2 when, besides, this rank is not the kv head's first
 * replica (its copy: left out of the gradient norm). Every replica computes the same complete
 * gradient: the attention's backward sums dk, dv over the replicas (mdc_gpt2_comm.kv_sum). */
int mdc_gpt2_kv_copy(const mdc_gpt2 *m, int i);
const mdc_param_tensor *mdc_gpt2_local_tensor(const mdc_gpt2 *m, int i);
size_t mdc_gpt2_local_floats(const mdc_gpt2 *m);
/* Copies this partition's tensors from a local vector (parameters, gradients, Adam moments)
 * into a global one in the serial layout (mdc_gpt2_param_floats floats; other elements are
 * left alone), or back. Padding rows of wte are never written to the global vector. */
void mdc_gpt2_local_to_global(const mdc_gpt2 *m, const float *local, float *global);
void mdc_gpt2_global_to_local(const mdc_gpt2 *m, const float *global, float *local);
/* A model of partition `part` holding only its tables (no device, no memory): the local
 * layout of another rank, for the copies above. Free with mdc_gpt2_free. */
mdc_status mdc_gpt2_create_layout(mdc_gpt2 **out, const mdc_gpt2_config *cfg, const mdc_gpt2_part *part);

/* An activation set: every tensor one micro-batch of B x T needs between its forward and its
 * backward through one model chunk, on the device (MDC_MEM_ACTS); the last chunk's set holds
 * the head's too. A schedule keeps one per micro-batch and chunk in flight. create: chunk 0
 * (the whole partition when it has one chunk); create_chunk: chunk k. */
typedef struct mdc_gpt2_acts mdc_gpt2_acts;
mdc_status mdc_gpt2_acts_create(mdc_gpt2_acts **out, mdc_gpt2 *m, int B, int T);
mdc_status mdc_gpt2_acts_create_chunk(mdc_gpt2_acts **out, mdc_gpt2 *m, int B, int T, int chunk);
/* The blocks [*lo, *hi) of the set's chunk. */
void mdc_gpt2_acts_layers(const mdc_gpt2_acts *a, int *lo, int *hi);
void mdc_gpt2_acts_free(mdc_gpt2_acts *a); /* NULL is a no-op */
mdc_gpt2_acts *mdc_gpt2_default_acts(mdc_gpt2 *m);
/* Creates the default set (of the creation's B x T) if the model has none: a model created with
 * MDC_GPT2_LAZY_ACTS gets it once its modes are set (a pipeline stage, whose schedule keeps its
 * own sets, never does), so no set is allocated at a layout the run does not use. */
mdc_status mdc_gpt2_default_acts_create(mdc_gpt2 *m);
/* Bytes the activation sets of B x T take for one micro-batch through every chunk of this
 * partition (what create allocates when there is one chunk). */
size_t mdc_gpt2_acts_bytes(const mdc_gpt2 *m, int B, int T);
/* Floats one layer keeps from its forward to its backward (the per-layer stash). */
size_t mdc_gpt2_acts_layer_floats(const mdc_gpt2 *m, int B, int T);
/* Floats of the work region recomputation rebuilds its tensors in: one per model, shared by
 * every set and layer (0 without recomputation). */
size_t mdc_gpt2_acts_work_floats(const mdc_gpt2 *m, int B, int T);
/* The same two as the allocator charges them, in bytes: the run's dtype for activations, fp32 for
 * the norms' statistics, the log-sum-exps and the losses. */
size_t mdc_gpt2_acts_layer_bytes(const mdc_gpt2 *m, int B, int T);
size_t mdc_gpt2_acts_work_bytes(const mdc_gpt2 *m, int B, int T);

/* ---- activation recomputation (docs/recompute.md) ----------------------------------------------
 * none: a block keeps every tensor its backward reads. full: it keeps only its output (the next
 * block's input); its backward first runs its forward again (no taps, hooks or statistics, the
 * same kernels and communication, so the same bits) into the work region. selective (Korthikanti
 * et al. 2022): only the attention's T x T probabilities are recomputed, from the kept q, k, v,
 * before the attention's backward (a no-op where attention keeps only each row's lse: tiled, cp).
 * Re-creates the default activation set; call before creating others. */
enum { MDC_RECOMPUTE_NONE, MDC_RECOMPUTE_SELECTIVE, MDC_RECOMPUTE_FULL };
mdc_status mdc_gpt2_set_recompute(mdc_gpt2 *m, int mode);
int mdc_gpt2_get_recompute(const mdc_gpt2 *m);
/* The activation memory a layer keeps in this mode for micro-batches of b x s (this rank's
 * positions) against minidc's formula and the allocator, the work region, and Korthikanti et
 * al. 2022's Table 2 for the same mode (ref/model/acts_report.c). */
void mdc_gpt2_recompute_report(const mdc_gpt2 *m, int b, int s, FILE *out);

/* ---- mixed precision (docs/precision.md) ----------------------------------------------------------
 * fp32 (the default): every tensor in fp32. bf16, fp16: Megatron-LM's mixed precision. The fp32
 * parameters (mdc_gpt2_params) are the master copy AdamW updates; the layers read a compute copy
 * rounded to the dtype (round to nearest even), refreshed from the master as each unit starts its
 * forward or backward. Each layer's output is rounded to the dtype (the products' inputs are then
 * 16-bit and their fp32 accumulation exact per product), as are the activation gradients; norms'
 * statistics, softmax, the loss, the router and the weight gradients (fp32 main_grad) stay fp32.
 * Exact mode rounds its exact sums once to fp32 and then to the dtype: every mesh gives serial's
 * bits. fp16's loss scaling is the trainer's (include/minidc/train.h). Re-creates the default
 * activation set; call before creating others. */
enum { MDC_PRECISION_FP32, MDC_PRECISION_BF16, MDC_PRECISION_FP16 };
mdc_status mdc_gpt2_set_precision(mdc_gpt2 *m, int prec);
int mdc_gpt2_get_precision(const mdc_gpt2 *m);
/* In 16 bits, where ZeRO-1/2 keep the fp32 master in shards: the model's full fp32 parameters move
 * to host memory (uncharged; the forward reads the 16-bit copy, still charged). */
mdc_status mdc_gpt2_master_to_host(mdc_gpt2 *m);
/* bf16 gradients (--grad-reduce bf16): the buffer the backward accumulates into is bf16 (each
 * unit's gradients rounded when its backward ends, every micro-batch; charged 2 bytes an element),
 * as Megatron's without --accumulate-allreduce-grads-in-fp32 and the ZeRO paper's 2 Psi; not in
 * exact mode, 16-bit runs only. */
mdc_status mdc_gpt2_set_grad16(mdc_gpt2 *m, int on);
int mdc_gpt2_grad16(const mdc_gpt2 *m);
/* A tensor rounded in place to the dtype: mdc_round_half(x, n, prec) (include/minidc/device.h),
 * whose kinds are these values (MDC_PRECISION_FP32 leaves x unchanged). */

/* ---- the block API ----------------------------------------------------------------------------
 * One micro-batch moves through: set_batch, embed_forward, block_forward(l) for each held l,
 * head_forward (loss); then head_backward, block_backward(l) in reverse, embed_backward. Every
 * backward ADDS into the gradients; l must be in the set's chunk. A pipeline stage holds a layer
 * range (or v of them, interleaved), the first stage the embedding and the last the head; the stages pass the residual stream and its gradient
 * (mdc_gpt2_acts_input, mdc_gpt2_acts_dresidual; ref/parallel/pp/pp.c). */
mdc_status mdc_gpt2_set_batch(mdc_gpt2_acts *a, const int *inputs, const int *targets, int B, int T);
mdc_status mdc_gpt2_embed_forward(mdc_gpt2 *m, mdc_gpt2_acts *a);
mdc_status mdc_gpt2_block_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l);
/* ln_f, the LM head and the loss (with targets): per-position losses of every position of the
 * micro-batch (mdc_gpt2_acts_losses), *loss_sum their sum in double (may be NULL). */
mdc_status mdc_gpt2_head_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, double *loss_sum);
/* dloss: d(loss)/d(loss_i) for every position (1 / global tokens). */
mdc_status mdc_gpt2_head_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, float dloss);
/* parts: MDC_BWD_INPUT (the input gradient, B), MDC_BWD_WEIGHT (the weight gradients, W), or
 * both. B alone keeps the gradients W needs in the activation set (allocated on first use)
 * until W of the same layer runs; B then W gives the same bits as both at once. */
enum { MDC_BWD_INPUT = 1, MDC_BWD_WEIGHT = 2, MDC_BWD_BOTH = 3 };
mdc_status mdc_gpt2_block_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int parts);
mdc_status mdc_gpt2_embed_backward(mdc_gpt2 *m, mdc_gpt2_acts *a);
/* The residual stream after the last held block, (B, T/seq_split, C): the head's input. */
float *mdc_gpt2_acts_residual(mdc_gpt2_acts *a);
const float *mdc_gpt2_acts_logits(const mdc_gpt2_acts *a); /* (B,T,Vp/t) */
/* A pipeline stage's boundaries, (B, T/seq_split, C): the residual stream entering the first
 * held block (a stage without the embedding receives it here before block_forward), and the
 * gradient of the residual stream: after the last held block's output (a stage without the
 * head receives it here before block_backward), after block_backward of the first held block
 * the gradient of the stage's input (sent to the previous stage). */
float *mdc_gpt2_acts_input(mdc_gpt2_acts *a);
float *mdc_gpt2_acts_dresidual(mdc_gpt2_acts *a);
/* 1 when the set's forward writes its dresidual buffer (a MoE block's work space there): a send
 * from it must be done before the set's next forward. */
int mdc_gpt2_acts_forward_uses_dresidual(const mdc_gpt2_acts *a);
const float *mdc_gpt2_acts_losses(const mdc_gpt2_acts *a); /* (B,T) */
/* The global batch row of the set's row 0 (its place in the step's whole batch: dropout masks
 * are keyed by it); 0 by default. */
void mdc_gpt2_acts_set_row0(mdc_gpt2_acts *a, int row0);

/* Dropout with probability p in [0, 1) on the attention probabilities and on both residual
 * branches of every block (0: none, the model's exact serial kernels), masks from a
 * counter-based hash of (seed, step, layer, site, global batch row, position, channel or head
 * and key), so every mesh drops exactly the elements serial drops. Re-creates the default
 * activation set when its buffers change. The step (set before each optimizer step; the AdamW
 * step count, so a resumed run draws the same masks) keys a new mask every step. */
mdc_status mdc_gpt2_set_dropout(mdc_gpt2 *m, float p, uint64_t seed);

/* ---- context parallelism (ref/parallel/cp/cp.c) -------------------------------------------------------
 * The sequence of every micro-batch is split over c ranks: this rank holds T/c positions of
 * each sequence, at global positions pos[0 .. T/c) (ascending). The model sees them as a
 * sequence of its own (its activation sets are of T/c positions; set_batch takes the local
 * tokens); the embedding and dropout use the global positions, and attention calls forward
 * (block `layer`'s out, and the rows' lse, from the local qkv; it may overwrite qkv with what its backward
 * needs) and backward (dqkv += from dout, the forward's out and lse and qkv as it left it). */
typedef struct mdc_gpt2_cp {
    void *ctx;
    int c, T;       /* ranks the sequence is split over, the global sequence length */
    const int *pos; /* T/c global positions */
    mdc_status (*forward)(void *ctx, mdc_device *dev, int layer, float *out, float *lse, float *qkv,
                          const mdc_dropout *drop, int B, int C, int NH);
    mdc_status (*backward)(void *ctx, mdc_device *dev, float *dqkv, const float *dout, const float *out,
                           const float *qkv, const float *lse, const mdc_dropout *drop, int B, int C, int NH);
} mdc_gpt2_cp;
/* Attaches (or with NULL detaches) context parallelism; call before creating activation sets
 * other than the default one (it is rebuilt: attention then saves the lse, never T x T). */
mdc_status mdc_gpt2_set_cp(mdc_gpt2 *m, const mdc_gpt2_cp *cp);
const mdc_gpt2_cp *mdc_gpt2_get_cp(const mdc_gpt2 *m);
void mdc_gpt2_set_dropout_step(mdc_gpt2 *m, uint64_t step);

/* ---- mixture of experts (ref/model/moe/moe.c; docs/expert-parallel.md) ------------------------------
 * A MoE block's MLP: router logits z = ln2(x) W_r, p = softmax(z) in fp32, each token's topk
 * experts by p (ties to the lower index), gates = the chosen p (renormalized over the k with
 * renorm); its output = sum over its kept experts of gate x expert(x). Capacity (factor f > 0):
 * tokens route in groups of one sequence and each expert keeps at most ceil(k T f / E) of a
 * group's assignments, by priority (every token's first choice in position order, then every
 * second choice, ...) or with drop_probs by the highest score (p; DeepSeek's s; ties to the earlier position); a
 * dropped assignment adds 0. Aux losses added to the objective: alpha E sum_i f_i P_i per group
 * (f_i the share of its k T assignments made to expert i before dropping, P_i the mean p_i),
 * averaged over the groups, and beta x the mean over tokens of logsumexp(z)^2. */
typedef struct {
    float capacity_factor; /* 0: dropless */
    int drop_probs;        /* 1: keep the highest p; 0: by priority (slot, then position) */
    int renorm;            /* gates renormalized over the k chosen */
    float aux_alpha, z_beta;
    float bias_rate; /* aux-loss-free balancing (DeepSeek-V3): g of the bias update, 0: off */
    int balanced;    /* the choice by position, not by p: token g (its global index row T + position)
                        takes experts (g k + r) mod E, r < k, so every expert gets k/E of any run of
                        tokens whose count times k is a multiple of E (the routing minidc predict
                        assumes); the gates as the router gives them, so the router still learns */
} mdc_moe_opts;
mdc_status mdc_gpt2_set_moe(mdc_gpt2 *m, const mdc_moe_opts *o);
/* 1: the experts chosen by position (mdc_moe_opts.balanced), not by the router's scores. */
int mdc_gpt2_moe_balanced(const mdc_gpt2 *m);
/* d(objective)/d(per-position loss) of the coming backward (the aux losses' gradient scale:
 * 1 / global tokens); mdc_gpt2_backward_scaled sets it. */
void mdc_gpt2_set_moe_scale(mdc_gpt2 *m, float dloss);
/* Expert parallelism (ref/parallel/ep/ep.c): how rows move between the ranks of the expert-parallel group.
 * counts: n ints to every rank, recv[r n + i] the i-th from rank r; rows: scount[r] rows of
 * `width` floats to rank r (send grouped by destination), rcount[r] from rank r (recv grouped
 * by source). */
typedef struct mdc_gpt2_ep {
    void *ctx;
    int e, rank;
    mdc_status (*counts)(void *ctx, const int *send, int *recv, int n);
    mdc_status (*rows)(void *ctx, const float *send, const int *scount, float *recv, const int *rcount, int width);
} mdc_gpt2_ep;
mdc_status mdc_gpt2_set_ep(mdc_gpt2 *m, const mdc_gpt2_ep *ep);
/* Expert tensor parallelism (ref/parallel/ep/etp.c): the members of the etp group (n of them,
 * this rank the rank-th) each compute every row the group's experts got with their shard of
 * the experts, and sum the partial outputs (and the gate/up input gradients) over the group.
 * gather 1: the members hold different tokens (SP), so rows are gathered first (member order)
 * and the sums scattered back to each member's rows; 0: they hold the same rows (allreduce).
 *   counts  n ints of this member to every member: all[q n + i] member q's
 *   rows    rows[q] rows of width floats of member q gathered from mine into all (member order)
 *   sum     part (sum of rows[], or with gather 0 rows[0], rows of width) summed over the
 *           members: out gets this member's rows (gather) or all of them; part is overwritten
 *   x_sum   the same for exact partial sums (exact mode), each element rounded once */
typedef struct mdc_gpt2_etp {
    void *ctx;
    int n, rank, gather;
    mdc_status (*counts)(void *ctx, const int *mine, int *all, int n);
    mdc_status (*rows)(void *ctx, const float *mine, float *all, const int *rows, int width);
    mdc_status (*sum)(void *ctx, float *part, float *out, const int *rows, int width);
    mdc_status (*x_sum)(void *ctx, const mdc_xsum *part, float *out, const int *rows, int width);
} mdc_gpt2_etp;
/* Attaches (NULL detaches) the etp group's communication; n must be the partition's etp. */
mdc_status mdc_gpt2_set_etp(mdc_gpt2 *m, const mdc_gpt2_etp *etp);
/* Figures since the last zero_grad, summed over this rank's MoE blocks: assignments per expert
 * before dropping (E), dropped assignments, then the sums the objective adds (to be divided by
 * the global tokens): T x the aux loss per group and beta lse^2 per token. */
typedef struct {
    double tokens[MDC_GPT2_MAX_EXPERTS];
    double dropped, aux_sum, z_sum;
    double lb_sum; /* transformers' aux loss's terms (lb_coef): tokens x sum_i w_i p_i per token */
    double digest; /* sum over assignments of a 20-bit hash of (global row, position, slot, expert, kept):
                      the same on every mesh exactly when every decision is serial's */
} mdc_moe_stats;
void mdc_gpt2_moe_stats(const mdc_gpt2 *m, mdc_moe_stats *s);
/* Aux-loss-free balancing: every MoE block has a per-expert bias added to p for the choice only
 * (the gates use p), h.N.mlp.router.e_score_correction_bias [E] in a checkpoint (a weights file
 * may hold it; 0 if not). After each step, from the global batch's assignments per block and
 * expert before dropping, bias_i += g sign(mean load - load_i). The bias of every MoE block is on
 * every rank (moe_blocks x E floats, NULL for a dense model), and the counts: this rank's since
 * zero_grad, 0 for blocks it does not hold. */
int mdc_gpt2_moe_blocks(const mdc_gpt2_config *cfg);
int mdc_gpt2_moe_index(const mdc_gpt2_config *cfg, int l); /* block l among the MoE blocks, -1: dense */
float *mdc_gpt2_moe_bias(mdc_gpt2 *m);
const double *mdc_gpt2_moe_counts(const mdc_gpt2 *m);
void mdc_gpt2_moe_bias_update(mdc_gpt2 *m, const double *global_counts);
/* transformers' aux loss over the global batch (cfg lb_coef > 0; ref/model/moe/moe_aux.c): every
 * step first runs a counting forward of its micro-batches between lb_begin (nothing recorded,
 * nothing dumped) and lb_end (this rank's top-k counts, E doubles: sum them over the ranks that
 * route distinct tokens); lb_set then takes the summed counts and the global batch's tokens. */
int mdc_gpt2_lb_on(const mdc_gpt2 *m);
mdc_status mdc_gpt2_lb_begin(mdc_gpt2 *m);
double *mdc_gpt2_lb_end(mdc_gpt2 *m);
void mdc_gpt2_lb_set(mdc_gpt2 *m, double tokens);
/* Exact mode: aux_sum + z_sum + lb_sum as one exact accumulator. */
const mdc_exact *mdc_gpt2_moe_exact_loss(const mdc_gpt2 *m);

/* ---- hooks for the data-parallel component (ref/parallel/dp/dp.c, ref/parallel/dp/zero.c) -----------------------------
 * Units: 0 = the embedding (wte, wpe), 1..L = the transformer blocks, L+1 = the head (ln_f;
 * the tied LM head also reads wte, unit 0). Each unit is one contiguous range of the local
 * parameter layout (mdc_gpt2_local_unit). The block API calls the hook with:
 *   PRE_FORWARD(u)   before unit u's parameters are read in forward (L+1: also wte)
 *   POST_FORWARD(u)  after the last forward read of unit u's parameters
 *   PRE_BACKWARD(u)  before backward reads unit u's parameters (L+1: also wte, and the LM
 *                    head starts adding to wte's gradient)
 *   POST_BACKWARD(u) when unit u's gradients are complete for this micro-batch (wte's only at
 *                    unit 0, which comes last; a block's after its weight part W)
 * A non-zero status from the hook stops the call and is returned. */
typedef enum {
    MDC_HOOK_PRE_FORWARD = 0,
    MDC_HOOK_POST_FORWARD,
    MDC_HOOK_PRE_BACKWARD,
    MDC_HOOK_POST_BACKWARD
} mdc_gpt2_hook_event;
typedef struct {
    mdc_status (*fn)(void *ctx, mdc_gpt2_hook_event ev, int unit); /* NULL: no hooks */
    void *ctx;
} mdc_gpt2_hooks;
/* Sets (copies) the hooks; NULL removes them. */
void mdc_gpt2_set_hooks(mdc_gpt2 *m, const mdc_gpt2_hooks *h);
/* L + 2 units; unit u covers floats [*offset, *offset + *count) of this model's local
 * allocation (a unit that is not held has count 0). */
int mdc_gpt2_unit_count(const mdc_gpt2_config *cfg);
void mdc_gpt2_local_unit(const mdc_gpt2 *m, int unit, size_t *offset, size_t *count);
/* Creation flags: the parameters (HOST_PARAMS) and/or gradients (HOST_GRADS) live in plain host
 * memory that is NOT charged to the emulated HBM; a ZeRO scheme then owns residency and charges
 * what is really resident (shards, gathered units, buckets) with mdc_dev_alloc. LAZY_ACTS: no
 * default activation set until mdc_gpt2_default_acts_create (after the modes that lay it out:
 * recomputation, cp, dropout, exact mode), so none is allocated at a layout the run does not use.
 * MASTER: the fp32 parameters are a mixed-precision run's master, charged as optimizer state from
 * the start (mdc_gpt2_set_precision moves them there otherwise). */
enum { MDC_GPT2_HOST_PARAMS = 1u, MDC_GPT2_HOST_GRADS = 2u, MDC_GPT2_LAZY_ACTS = 4u, MDC_GPT2_MASTER = 8u };
mdc_status mdc_gpt2_create_flags(mdc_gpt2 **out, mdc_device *dev, const mdc_gpt2_config *cfg, int B, int T,
                                 unsigned flags);
unsigned mdc_gpt2_flags(const mdc_gpt2 *m); /* the creation flags */
/* The sum of squares of gradients, in double over fixed chunks (mdc_grad_norm's order). */
double mdc_gpt2_grad_sumsq(mdc_gpt2 *m);
/* AdamW on every local tensor with a given clip scale (t is advanced first; m, v allocated on
 * first use). */
mdc_status mdc_gpt2_adamw_all(mdc_gpt2 *m, const mdc_adamw_config *o, float scale);

#ifdef __cplusplus
}
#endif
#endif
