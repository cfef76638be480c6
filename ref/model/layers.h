/* The layers the block is written in (ref/model/block.c, block_backward.c) and the interfaces
 * behind them. The block never asks how the model is run: serial or tensor parallel, with or
 * without SP, exact or default arithmetic, context parallel or not. That is chosen once, when
 * the model is set up (mdc_i_install), as the implementations below:
 *   linear     col_linear / row_linear (Megatron's ColumnParallelLinear / RowParallelLinear):
 *              f and g, SP's gathered buffers, the bias after the reduction, the residual and
 *              its dropout, the taps (ref/model/linear.c);
 *   ops        the arithmetic: the default kernels or exact mode's canonical blocks, and the
 *              gradient sink they add into (ref/model/ops.c, ref/model/exact/exact_ops.c);
 *   attention  materialized or tiled, exact, context parallel (ref/model/attention.c);
 *   mlp        dense GELU, SwiGLU (the families), or MoE (ref/model/mlp.c, ref/model/moe/moe.c);
 *   norm       LayerNorm or RMSNorm (ref/model/norm.c);
 *   positions  learned: the embedding's (ops->embed_forward, embed_backward) at each row's
 *              global position (mdc_i_positions_of); rotary: q and k turned after their
 *              projection (ref/model/positions.c).
 * Taps: the observation points of the block (dumps: ref/model/dump.c), each site's layout in
 * one table (ref/model/taps.c). */
#ifndef MINIDC_REF_MODEL_LAYERS_H
#define MINIDC_REF_MODEL_LAYERS_H

/* ---- taps ------------------------------------------------------------------------------------- */
/* The sites of a unit, in forward order (the backward taps their gradients in reverse). */
enum {
    MDC_I_DS_EMBED,
    MDC_I_DS_IN,
    MDC_I_DS_LN1,
    MDC_I_DS_QKV,
    MDC_I_DS_QNORM, /* the families: q, k after q_norm, k_norm (Qwen3), after the rotation */
    MDC_I_DS_KNORM,
    MDC_I_DS_ROPEQ,
    MDC_I_DS_ROPEK,
    MDC_I_DS_Y,
    MDC_I_DS_ATTP,
    MDC_I_DS_RES2,
    MDC_I_DS_LN2,
    MDC_I_DS_FC,
    MDC_I_DS_GATE, /* SwiGLU: gate_proj's and up_proj's outputs (the fused product's halves) */
    MDC_I_DS_UP,
    MDC_I_DS_GELU, /* the activation's output (SwiGLU: silu(gate) * up, "mlp.product") */
    MDC_I_DS_MLPP,
    MDC_I_DS_ROUTER, /* the scores the choice reads: softmax p, or DeepSeek's sigmoid s */
    MDC_I_DS_CHOICE, /* each token's k experts (slot order; int32 in a dump) */
    MDC_I_DS_GATES,  /* and their gates */
    MDC_I_DS_EXPERTS,
    MDC_I_DS_SHARED, /* Qwen2-MoE: the shared expert's output, before its sigmoid scale */
    MDC_I_DS_MOE,
    MDC_I_DS_OUT,
    MDC_I_DS_LNF,
    MDC_I_DS_LOGITS,
    MDC_I_DS_LOSSES,
    MDC_I_DS_N
};
/* Where a tensor is observed: at a site without communication, or just before or after the
 * site's communication point (f before a column-parallel linear, g after a row-parallel one). */
enum { MDC_TAP_AT, MDC_TAP_PRE, MDC_TAP_POST };
enum { MDC_TAP_FWD, MDC_TAP_BWD };
/* A site's place in the block: in the residual stream (its local rows: (B, T/t) with SP), inside
 * the tensor-parallel region (every local position: (B, T)), or a communication point of f
 * (the residual stream before it, the region after it; reversed for gradients) or of g. */
enum { MDC_TAP_STREAM, MDC_TAP_REGION, MDC_TAP_F, MDC_TAP_G };
/* Widths: C, the heads' qkv ((Hl + 2 KVl) d), the query heads' Hl d, the MLP's 4C/t (I/t), the
 * vocabulary shard, none ((B, T)), the experts E, k C (a token's k slots), the kv heads' KVl d,
 * k, and k integers (int32 in a dump). */
enum {
    MDC_I_W_C,
    MDC_I_W_QKV,
    MDC_I_W_HEADS,
    MDC_I_W_FC,
    MDC_I_W_V,
    MDC_I_W_NONE,
    MDC_I_W_E,
    MDC_I_W_KC,
    MDC_I_W_KV,
    MDC_I_W_K,
    MDC_I_W_KI
};
typedef struct {
    const char *name;
    int place, width;
} mdc_i_tap_site;
extern const mdc_i_tap_site mdc_i_tap_sites[MDC_I_DS_N];
/* A site's name; the Llama and Qwen families call the activation's output mlp.product. */
const char *mdc_i_tap_site_name(const mdc_gpt2 *m, int site);
/* The rows of a tap: MDC_I_ROWS (the residual stream's) or MDC_I_SEQ (every local position);
 * sum: a partial sum over tp (g's input forward, f's backward). */
enum { MDC_I_ROWS, MDC_I_SEQ };
void mdc_i_tap_layout(int site, int dir, int phase, int *rows, int *sum);
/* A tap: tensor x of site `site` of unit `unit` (0 the embedding, 1 + l block l, L + 1 the
 * head), in direction dir, at phase. */
typedef mdc_status (*mdc_i_tap_fn)(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, int dir, int phase,
                                   const float *x);
/* A tap of columns [col0, col0 + the site's width) of every local position's row of ld floats
 * (copied out only when something observes). */
mdc_status mdc_i_tap_cols(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, int dir, const float *x, int ld, int col0);
static inline mdc_status mdc_i_tap(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, int dir, int phase,
                                   const float *x) {
    return m->tap && site >= 0 ? m->tap(m, a, unit, site, dir, phase, x) : MDC_OK; /* site -1: not observed */
}
#define TAP(unit, site, dir, phase, x) TRY(mdc_i_tap(m, a, (unit), (site), (dir), (phase), (x)))

/* ---- linear layers ---------------------------------------------------------------------------- */
/* One linear layer of block l as this rank holds it: out (rows, N) = in (rows, K) W + b (W^T with wt). */
typedef struct {
    int l;     /* the block */
    int w, b;  /* global tensors of the weight (K, N) and the bias (-1: none) */
    int K, N;  /* local sizes */
    int kblk;  /* exact mode's contraction block (row-parallel: over K; column: over N): mdc_i_contract_block */
    int row;   /* 1: row-parallel (input split over tp, output reduced by g), 0: column */
    int site;  /* its tap site: the input of a column-parallel linear (f), the output of a row one (g); -1 none */
    int osite; /* column: the tap site of its output */
    int drop;  /* row: the residual branch's dropout site (MDC_DROP_*; -1: none) */
    int wt;    /* 1: W is stored (N, K), nn.Linear's [out, in] (the families); 0: Conv1D's (K, N) */
    int dx_n;  /* column: the input gradient from the first dx_n output columns only (0: all); the
                  rest are a shared kv head's k, v, whose input gradient its first replica gives */
} mdc_i_linear;

/* out (B, T, N) = f(x) W + b; x the residual stream's rows. */
mdc_status mdc_i_col_linear(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *x);
/* out = res + dropout(g(in W) + b): the product reduced over tp, the bias once, the residual. */
mdc_status mdc_i_row_linear(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *res,
                            const float *in);

/* What a weight gradient reads besides the saved activations (B without W keeps copies). */
typedef struct {
    const float *in;    /* the layer's input over every position (col: f's output) */
    const float *dout;  /* its output gradient over every position */
    const float *drows; /* a row-parallel bias's gradient rows (the residual stream's) */
} mdc_i_wslot;
/* The weight part of a layer is run now (keep NULL) or its inputs copied into keep. */
void mdc_i_wready(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, const mdc_i_wslot *live, mdc_i_wslot *keep);
void mdc_i_linear_wgrad(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, const mdc_i_wslot *w);
/* The backward of a row-parallel linear's input part: dy the branch's gradient (through the
 * residual's dropout), g^T(dy) over every position, din (B, T, K) = g^T(dy) W^T; its weight
 * part ready (in: the layer's saved input). */
mdc_status mdc_i_row_linear_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *din,
                                     const float *dres, const float *in, mdc_i_wslot *keep);
/* dx (the residual stream's rows) = f^T(dout W^T); its weight part ready (x: the layer's saved
 * input rows, gathered again with SP as Megatron does). */
mdc_status mdc_i_col_linear_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *dx, const float *dout,
                                     const float *x, mdc_i_wslot *keep);
/* in = f(x): the column-parallel input (SP: gathered into the set's `full`, else x itself). */
mdc_status mdc_i_gather(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *x, const float **in);
/* in = f(x) tapped at site `site` of unit `unit`: with SP x before the gather, then in. */
mdc_status mdc_i_gather_tapped(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, const float *x, const float **in);
/* The residual branch out = res + dropout(y) of site drop of block l. */
void mdc_i_residual(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int drop, float *out, const float *res, const float *y);
/* The tail of a row-parallel linear: out = res + dropout(red + b), red (local rows) reduced. */
void mdc_i_row_tail(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *res, float *red,
                    const mdc_dropout *drop);
/* The gradient of a residual branch of site drop: dres itself, or through its dropout mask. */
const float *mdc_i_branch_grad(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, int drop, const float *dres);
/* The global positions of the set's rows (MDC_I_ROWS: the residual stream's, Tl per sequence;
 * MDC_I_SEQ: every local position) with context parallelism, else NULL (position = index +
 * *pos0, the SP shard's first). */
const int *mdc_i_positions_of(const mdc_gpt2 *m, int rows, int Tl, int *pos0);
/* *dout = g^T(dy): the residual stream's gradient over every position (SP: gathered into the
 * set's `full`, else dy itself). */
mdc_status mdc_i_gather_grad(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *dy, const float **dout);

/* A norm of block l (or ln_f): weight and bias tensors and the saved statistics. */
typedef struct {
    int w, b;
    float *mean, *rstd;
} mdc_i_norm;
/* ---- the arithmetic: default kernels or exact mode's blocks --------------------------------- */
typedef struct mdc_i_ops {
    const char *name;
    /* out (n, N) = in (n, K) W + b (b may be NULL); wt: W stored (N, K), the product in W^T */
    void (*matmul)(mdc_gpt2 *m, float *out, const float *in, const float *W, const float *b, int n, int K, int N,
                   int wt);
    /* din (n, K) = dout (n, N) W^T, din zero before */
    void (*dinput)(mdc_gpt2 *m, float *din, const float *dout, const float *W, int n, int K, int N, int wt);
    /* out = res + dropout(g(in W) + b) (drop may be NULL) */
    mdc_status (*row_forward)(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *out, const float *res,
                              const float *in, const mdc_dropout *drop);
    /* red (local rows, C) = g(in W): the product alone, reduced over tp (no bias, no residual), tapped
     * at L->site; red may be the set's `partial` or `full` or a buffer of the caller's */
    mdc_status (*row_reduce)(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *red, const float *in);
    /* dx (local rows) = f^T(dout (B, T, N) W^T) for W (K, N) of a column-parallel linear */
    mdc_status (*col_dinput)(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, float *dx, const float *dout);
    /* the gradient sink. Weight gw (K, N) from in (n, K) and dout (n, N); bias gb (-1: none)
     * from drows (nl, N: a row-parallel layer's residual-stream rows) or, NULL, from dout;
     * blk: the token block of the sums (0: the model's) */
    void (*wgrad)(mdc_gpt2 *m, int gw, int gb, const float *in, const float *dout, const float *drows, int n, int nl,
                  int K, int N, int blk, int wt);
    /* LayerNorm weight and bias gradients from dout, its input x and saved statistics (n rows) */
    void (*layernorm_wgrad)(mdc_gpt2 *m, const mdc_i_norm *N, const float *dout, const float *x, int n, int C);
    /* dx += LayerNorm's input gradient, with its weight gradients at once (the head's ln_f) */
    void (*layernorm_backward)(mdc_gpt2 *m, const mdc_i_norm *N, float *dx, const float *dout, const float *x, int n,
                               int C);
    /* RMSNorm's weight gradient (tensor gw, d) over the heads of n strided rows (a block's norm:
     * heads 1, d = C; q_norm, k_norm: every head of q or k) from dout, its input x and the rstd */
    void (*rmsnorm_wgrad)(mdc_gpt2 *m, int gw, const float *dout, int ldo, const float *x, int ldx, const float *rstd,
                          int n, int heads, int d);
    /* the sink as schemes see it: elements of grad_dtype (MDC_F32 floats, or MDC_EXACT sums),
     * n of them from offset off of the local gradient layout out of the sink or back into it */
    mdc_dtype grad_dtype;
    /* the token block the sink's sums are cut into (0: none; exact mode's --exact-block): a MoE
     * block's expert rows are grouped in segments of it, one weight-gradient sum each */
    int grad_block;
    void (*grad_pack)(mdc_gpt2 *m, size_t off, size_t n, void *buf);
    void (*grad_unpack)(mdc_gpt2 *m, size_t off, size_t n, const void *buf);
    /* the sink's last step, after the last reduction: its elements into the float gradients
     * (floats: nothing to do) */
    mdc_status (*grad_round)(mdc_gpt2 *m);
    /* the step's two scalars as the mesh sums them, elements of scalar_dtype (MDC_F64; exact
     * mode: MDC_EXACT, the same bits however tokens and tensors are spread): the objective
     * (the forwards' loss_sum if count_loss, MoE's aux and z terms if count_moe) into *slot;
     * the squares of g[0..n) added to *slot; a slot's value */
    mdc_dtype scalar_dtype;
    void (*objective)(mdc_gpt2 *m, double loss_sum, int count_loss, int count_moe, void *slot);
    void (*add_squares)(mdc_gpt2 *m, const float *g, size_t n, void *slot);
    double (*scalar_value)(const void *slot);
    /* the embedding: tokens and learned positions into enc (the residual stream's rows), and
     * its backward from the stream's gradient dres */
    mdc_status (*embed_forward)(mdc_gpt2 *m, mdc_gpt2_acts *a, float *enc);
    mdc_status (*embed_backward)(mdc_gpt2 *m, mdc_gpt2_acts *a, const float *dres);
    /* logits (B, T, Vl) = in wte^T (the tied LM head, column-parallel over the vocabulary) */
    void (*lm_head)(mdc_gpt2 *m, mdc_gpt2_acts *a, float *logits, const float *in);
    /* the per-position losses and their lse from the logits; *sum their sum */
    mdc_status (*loss)(mdc_gpt2 *m, mdc_gpt2_acts *a, double *sum);
    /* the loss's backward into the logits, the LM head's: dlnf (local rows) and wte's gradient */
    mdc_status (*head_backward)(mdc_gpt2 *m, mdc_gpt2_acts *a, float dloss, const float *in, float *dlnf);
} mdc_i_ops;
/* serial and tp: the default kernels (ref/model/ops.c). Exact mode replaces the arithmetic's
 * entries of either, keeping its communication (the embedding's forward): token_block its
 * --exact-block (ref/model/exact/exact_ops.c). */
extern const mdc_i_ops mdc_i_ops_serial, mdc_i_ops_tp;
void mdc_i_ops_exact_over(mdc_i_ops *o, int token_block);

/* ---- attention, MLP, norm, positions ------------------------------------------------------- */
typedef struct mdc_i_attention {
    const char *name;
    /* out (B, T, C/t) and what the backward needs (att: probabilities or lse) from qkv */
    mdc_status (*forward)(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, float *att, float *qkv,
                          const mdc_dropout *drop);
    /* dqkv (zero before) += from dout */
    mdc_status (*backward)(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv, const float *dout, const float *out,
                           const float *qkv, const float *att, const mdc_dropout *drop);
} mdc_i_attention;
extern const mdc_i_attention mdc_i_attention_kernel, mdc_i_attention_exact, mdc_i_attention_cp;
/* In 16 bits attention reads q, k, v of the dtype and rounds its output and their gradients; inside,
 * the scores and softmax stay fp32 and the kernels round the probabilities before P V and dV's
 * P^T dO (mdc_dev_half), as FlashAttention does. */
static inline mdc_status mdc_i_attend(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, float *att, float *qkv) {
    mdc_dropout dd;
    TRY(m->attn->forward(m, a, l, out, att, qkv, drop_of(m, a, l, MDC_DROP_ATTN, &dd)));
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_round(m, out, (size_t)s.n * s.Cl);
    return MDC_OK;
}
static inline mdc_status mdc_i_attend_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv, const float *dout,
                                               const float *out, const float *qkv, const float *att) {
    mdc_dropout dd;
    TRY(m->attn->backward(m, a, l, dqkv, dout, out, qkv, att, drop_of(m, a, l, MDC_DROP_ATTN, &dd)));
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_i_round(m, dqkv, (size_t)s.n * s.QKVl);
    return MDC_OK;
}

typedef struct mdc_i_mlp {
    const char *name;
    /* out = res + dropout(mlp(x)); x = ln_2's output (the residual stream's rows) */
    mdc_status (*forward)(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *out, const float *res, const float *x);
    /* dx = the input gradient from dres (the output's gradient); its weight parts into keep
     * (NULL: run now) */
    mdc_status (*backward)(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dx, const float *dres, mdc_i_wslot *keep);
    /* the weight parts kept by a backward with keep */
    void (*wgrad)(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const mdc_i_wslot *keep);
} mdc_i_mlp;
extern const mdc_i_mlp mdc_i_mlp_gelu, mdc_i_mlp_swiglu, mdc_i_mlp_moe;
static inline const mdc_i_mlp *mdc_i_mlp_of(const mdc_gpt2 *m, int l) {
    return mdc_i_is_moe(&m->cfg, l) ? &mdc_i_mlp_moe : mdc_i_family(&m->cfg) ? &mdc_i_mlp_swiglu : &mdc_i_mlp_gelu;
}

typedef struct mdc_i_norm_impl {
    const char *name;
    void (*forward)(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *out, const float *x);
    /* dx += the input gradient from dout; its weight part ready */
    void (*backward)(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *dx, const float *dout, const float *x,
                     mdc_i_wslot *keep);
    void (*wgrad)(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, const float *dout, const float *x);
    /* dx += the input gradient and the weight gradients at once (no B/W split: ln_f) */
    void (*backward_all)(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_norm *N, float *dx, const float *dout,
                         const float *x);
} mdc_i_norm_impl;
extern const mdc_i_norm_impl mdc_i_layernorm, mdc_i_rmsnorm;
/* Qwen3's q_norm and k_norm on the q and k heads of qkv (before the rotation), and their
 * backward on dqkv (after it is turned back); nothing without them (ref/model/norm.c). The
 * weight gradients are taken in the input part (B) of a split backward. */
mdc_status mdc_i_qk_norm(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *qkv);
mdc_status mdc_i_qk_norm_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv);

/* Where positions enter (ref/model/positions.c). Learned positions (GPT-2) are rows of a
 * table, wpe, that the embedding adds (the ops' embed entries); rotary positions turn q and k
 * after their projection instead (rotate; unrotate turns their gradients back before the
 * projection's backward). NULL entries: nothing to do at q and k. */
typedef struct mdc_i_positions {
    const char *name;
    mdc_status (*rotate)(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *qkv);
    mdc_status (*unrotate)(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv);
} mdc_i_positions;
extern const mdc_i_positions mdc_i_positions_learned, mdc_i_positions_rotary;
static inline mdc_status mdc_i_rotate(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *qkv) {
    return m->pos->rotate ? m->pos->rotate(m, a, l, qkv) : MDC_OK;
}
static inline mdc_status mdc_i_unrotate(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *dqkv) {
    return m->pos->unrotate ? m->pos->unrotate(m, a, l, dqkv) : MDC_OK;
}

/* ---- a block: its layers ---------------------------------------------------------------------- */
typedef struct {
    mdc_i_norm ln1, ln2;
    mdc_i_linear qkv, attp; /* attention's input (column-parallel: this rank's heads) and output (row) */
    mdc_i_linear fc, fcp;   /* the dense MLP's (column, row) */
} mdc_i_block;
void mdc_i_block_of(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, mdc_i_block *b);
/* The weight parts of a block, in the order the backward makes them ready; the MLP's first. */
enum { MDC_W_FCP, MDC_W_FC, MDC_W_LN2, MDC_W_ATTP, MDC_W_QKV, MDC_W_LN1, MDC_W_N };

/* Chooses every implementation above for the model as it is now set up (tp, sp, exact, cp);
 * called whenever one of them changes. */
void mdc_i_install(mdc_gpt2 *m);

#endif
