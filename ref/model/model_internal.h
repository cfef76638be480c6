/* Shared by the files of the model (ref/model/: gpt2.c configs, the serial API, the optimizer;
 * layout.c partitions and the local tensor table; acts.c activation sets; block.c and
 * block_backward.c the block API; the layers of layers.h; exact/ and moe/). Not a public
 * header: nothing outside ref/model includes it (tests/cli/rules.sh). */
#ifndef MINIDC_REF_MODEL_INTERNAL_H
#define MINIDC_REF_MODEL_INTERNAL_H

#include <stdlib.h>
#include <string.h>

#include "minidc/kernels.h"
#include "minidc/dump.h"
#include "minidc/fault.h"
#include "minidc/model.h"

/* per-layer tensors of a dense block by kind: GPT-2's twelve, in file order; a MoE block has the
 * first eight, then the router and four per expert j: mdc_i_expert_k(j, q) for q in X_FCW .. X_FCPB.
 * The families' blocks use the same kinds for the same roles (QKVW is q_proj, its k_proj and v_proj
 * follow it, so the three are one fused [(H + 2 KV) d, C] weight; FCW is gate_proj, UPW up_proj
 * after it) plus their own; a family block holds the kinds its switches ask for, in the order
 * mdc_i_layer_kind gives; a family's MoE block the attention's and post_attention_layernorm, then
 * its shared expert's gate, up and down and its sigmoid gate (FSG .. FSGATE, where the config has
 * them), FROUTER and each expert's gate, up (adjacent: one fused [2 F, C] product) and down,
 * mdc_i_fexpert_k(j, q) for q in XG, XU, XD. */
enum { LN1W, LN1B, QKVW, QKVB, ATTPW, ATTPB, LN2W, LN2B, FCW, FCB, FCPW, FCPB, NLT };
enum { KW = NLT, VW, KB, VB, QNW, KNW, UPW, UPB, NKINDS };
enum { ROUTERW = 8, X_FCW = 0, X_FCB, X_FCPW, X_FCPB };
enum { FSG = NKINDS, FSU, FSD, FSGATE, FROUTER, XG = 0, XU, XD };
extern const char *const mdc_i_layer_names[NLT];
static inline int mdc_i_expert_k(int j, int q) { return ROUTERW + 1 + 4 * j + q; }
static inline int mdc_i_fexpert_k(int j, int q) { return FROUTER + 1 + 3 * j + q; }
static inline int mdc_i_family(const mdc_gpt2_config *c) { return c->family != MDC_FAMILY_GPT2; }
static inline int mdc_i_kv_heads(const mdc_gpt2_config *c) { return c->KV > 0 ? c->KV : c->H; }
static inline int mdc_i_head_dim(const mdc_gpt2_config *c) { return c->head_dim > 0 ? c->head_dim : c->C / c->H; }
/* the tiled (online-softmax) attention kernel for sequences of T, else the materialized one */
static inline int mdc_i_attn_tiled(const mdc_gpt2_config *c, int T) {
    return c->attention == MDC_ATTENTION_AUTO ? T > MDC_GPT2_TILED_T : c->attention == MDC_ATTENTION_TILED;
}
static inline int mdc_i_ffn(const mdc_gpt2_config *c) { return c->ffn > 0 ? c->ffn : 4 * c->C; }
static inline int mdc_i_moe_ffn(const mdc_gpt2_config *c) { return c->moe_ffn > 0 ? c->moe_ffn : mdc_i_ffn(c); }
/* The kv heads tp rank r of t holds, from *kv0: KV/t of them, or with t > KV one, the kv head of
 * its query heads, replicated on t/KV ranks (Megatron's rule: KV % t == 0 or t % KV == 0). */
static inline int mdc_i_kv_local(const mdc_gpt2_config *c, int t, int r, int *kv0) {
    int KV = mdc_i_kv_heads(c);
    if (KV >= t) return *kv0 = r * (KV / t), KV / t;
    return *kv0 = r / (t / KV), 1;
}
static inline int mdc_i_moe_every(const mdc_gpt2_config *c) { return c->moe_every > 0 ? c->moe_every : 1; }
/* GPT-2: blocks 0, n, 2n, ...; the families: blocks l >= first_dense with (l + 1) % n == 0 */
static inline int mdc_i_is_moe(const mdc_gpt2_config *c, int l) {
    if (!c->E) return 0;
    return mdc_i_family(c) ? l >= c->first_dense && (l + 1) % mdc_i_moe_every(c) == 0 : l % mdc_i_moe_every(c) == 0;
}
/* MoE blocks before block l */
static inline int mdc_i_moe_before(const mdc_gpt2_config *c, int l) {
    if (!c->E) return 0;
    int n = mdc_i_moe_every(c), d = c->first_dense < l ? c->first_dense : l;
    return mdc_i_family(c) ? l / n - d / n : (l + n - 1) / n;
}
/* A family block's i-th kind, its number of tensors, the place of a kind in it (-1: none). */
int mdc_i_layer_kind(const mdc_gpt2_config *c, int l, int i);
int mdc_i_layer_kinds(const mdc_gpt2_config *c, int l);
int mdc_i_kind_slot(const mdc_gpt2_config *c, int l, int kind);
/* The MoE block's router and expert j's tensors (global indices; -1: no such bias) and widths:
 * the first product's (GPT-2 F = 4C; SwiGLU's gate|up 2F) and the activation's F. */
typedef struct {
    int w1, b1, w2, b2, wt, swiglu, F1, F;
} mdc_i_expert;
mdc_i_expert mdc_i_expert_of(const mdc_gpt2_config *c, int l, int j);
/* block l's shared expert as an expert (w1 -1: none) and its sigmoid gate's weight (-1: none) */
mdc_i_expert mdc_i_shared_of(const mdc_gpt2_config *c, int l, int *gate);
int mdc_i_router_of(const mdc_gpt2_config *c, int l);
/* Exact mode's contraction block of an MLP's F columns: F / gcd(H, F), which divides F/t for every
 * tp t (t divides H and F), so a block never straddles two ranks' columns (GPT-2: 4C/H). */
int mdc_i_contract_block(const mdc_gpt2_config *c, int F);
/* The part a routed expert's tensor of kind k plays in MoE block l: GPT-2's X_FCW .. X_FCPB, the
 * families' XG, XU, XD; -1 for every other tensor (the router, the shared expert, the rest). */
static inline int mdc_i_expert_part(const mdc_gpt2_config *c, int l, int k) {
    if (!mdc_i_is_moe(c, l)) return -1;
    if (mdc_i_family(c)) return k > FROUTER ? (k - FROUTER - 1) % 3 : -1;
    return k > ROUTERW ? (k - ROUTERW - 1) % 4 : -1;
}
static inline int mdc_i_layer_tensors(const mdc_gpt2_config *c, int l) {
    if (mdc_i_family(c)) return mdc_i_layer_kinds(c, l);
    return mdc_i_is_moe(c, l) ? ROUTERW + 1 + 4 * c->E : NLT;
}
/* The block of global tensor gi (a block's tensor) and its kind k in it. */
int mdc_i_layer_of(const mdc_gpt2_config *c, int gi, int *k);
/* What a global tensor is: the token embedding (0), GPT-2's wpe (1), a block's (*l, *k its kind),
 * the final norm's weight or bias (*k 0, 1), an untied LM head. */
enum { MDC_I_EMBED, MDC_I_POS, MDC_I_LAYER, MDC_I_NORMF, MDC_I_HEAD };
int mdc_i_role(const mdc_gpt2_config *c, int gi, int *l, int *k);
/* ref/model/family.c: the families' configs and tables (what gpt2.c's functions are for them) */
int mdc_i_family_named(const char *name, mdc_gpt2_config *c, int *batch); /* 1: known */
mdc_status mdc_i_family_check(mdc_gpt2_config *c);
int mdc_i_family_tensor_count(const mdc_gpt2_config *c);
size_t mdc_i_family_param_floats(const mdc_gpt2_config *c);
double mdc_i_family_step_flops(const mdc_gpt2_config *c, int B, int T);
int mdc_i_family_role(const mdc_gpt2_config *c, int gi, int *l, int *k);
void mdc_i_family_tensor_at(const mdc_gpt2_config *c, int i, mdc_param_tensor *t);

struct mdc_i_ops;
struct mdc_i_attention;
struct mdc_i_norm_impl;
struct mdc_i_positions;

struct mdc_gpt2 {
    mdc_gpt2_config cfg;
    mdc_gpt2_part part;
    const mdc_gpt2_comm *comm; /* NULL: the serial model (fused kernels, no communication) */
    const mdc_gpt2_cp *cp;     /* NULL: every position of the sequence here */
    mdc_device *dev;
    int t; /* AdamW steps taken */
    float *params, *grads, *m, *v;
    mdc_param_tensor *tensors; /* the local table */
    int ntensors;
    size_t floats;                 /* local allocation */
    int *tensor_of;                /* global index -> local index, -1 if not held */
    size_t *unit_off, *unit_count; /* local unit ranges, L + 2 each */
    unsigned flags;
    mdc_gpt2_hooks hooks;
    /* the layers' implementations (ref/model/layers.h), chosen by mdc_i_install */
    struct mdc_i_ops *ops; /* the arithmetic (owned; filled by mdc_i_install) */
    const struct mdc_i_attention *attn;
    const struct mdc_i_norm_impl *norm;
    const struct mdc_i_positions *pos;
    mdc_status (*tap)(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, int dir, int phase, const float *x);
    mdc_gpt2_spelling spelling; /* of the tensor names it writes (mdc_gpt2_spelled) */
    mdc_gpt2_acts *acts;        /* the default activation set (NULL: not created yet) */
    int acts_B, acts_T;         /* its batch and sequence (the creation's) */
    float loss;                 /* mean loss of the last mdc_gpt2_forward */
    struct {
        int blk;      /* canonical token block (0: exact mode off) */
        mdc_xsum g;   /* the gradients' exact sums (storage: gbuf, MDC_MEM_GRADS) */
        mdc_xsum act; /* one (B, T, C) product before its reduction (abuf, MDC_MEM_ACTS) */
        double *gbuf, *abuf;
        mdc_exact loss; /* the losses since zero_grad */
        mdc_exact *se;  /* per-position sum-exp accumulators of the loss */
        mdc_xsum xa;    /* attention's exact sums (ref/model/exact/exact_attention.c) */
        float *xf;      /* and its float rows (m, D; MDC_MEM_ACTS) */
        size_t xf_n;
    } x;
    struct {
        mdc_moe_opts o;
        const mdc_gpt2_ep *ep;   /* NULL: every expert here */
        const mdc_gpt2_etp *etp; /* NULL: every expert whole (part.etp 0 or 1) */
        float dloss;             /* the aux losses' gradient scale */
        mdc_moe_stats st;        /* since zero_grad */
        mdc_exact xloss;         /* exact mode: aux_sum + z_sum + lb_sum */
        float *bias;             /* moe blocks x E: the choice's bias */
        double *counts;          /* moe blocks x E: assignments since zero_grad */
        /* transformers' aux loss over the global batch (ref/model/moe/moe_aux.c): the counting
         * forward's top-k counts of every block (E), then the step's per-expert gradient w_i */
        int counting, lb_ready, lb_serial; /* lb_serial: the serial forward counts as it goes */
        double *lb_cnt;
        float *lb_w;
        double lb_tokens; /* the global batch's tokens (the loss sum's divisor) */
        mdc_status (*lb_tap)(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, int dir, int phase, const float *x);
    } moe;
    struct {
        mdc_tensorfile *tf; /* attached dump (include/minidc/dump.h), or NULL */
        int step, batch;
    } dump;
    struct {
        int mode;    /* MDC_RECOMPUTE_* */
        int active;  /* a block's forward is being recomputed: no taps, hooks or statistics */
        float *work; /* the work region (MDC_MEM_ACTS: scratch, recomputed tensors), work_floats, shared by
                        its users, the activation sets */
        size_t work_floats;
        int users;
    } rc;
    struct {
        int prec;    /* MDC_PRECISION_* */
        float *w;    /* the compute copy of the parameters (NULL in fp32): the master's values rounded */
        int charged; /* w is the device's (else host memory: ZeRO-3 charges its gathered units) */
        int grad16;  /* the gradients are a bf16 buffer (mdc_gpt2_set_grad16) */
    } pc;
    float drop_p;                  /* dropout probability (0: none) */
    uint64_t drop_seed, drop_step; /* the masks' keys: the run's seed and the optimizer step */
};

/* transformers' aux loss in the serial forward (ref/model/moe/moe_aux.c): start 1 before its
 * blocks, 0 after them with the batch's tokens */
mdc_status mdc_i_moe_lb_serial(mdc_gpt2 *m, int start, double tokens);

/* tp > KV: this rank's kv head is shared with other tp ranks; and this rank is not its first
 * replica (whose input gradient and k_norm gradient count for the head) */
static inline int mdc_i_kv_shared(const mdc_gpt2 *m) { return mdc_gpt2_kv_replicas(&m->cfg, m->part.tp) > 1; }
static inline int mdc_i_kv_copy(const mdc_gpt2 *m) {
    return mdc_i_kv_shared(m) && m->part.tp_rank % mdc_gpt2_kv_replicas(&m->cfg, m->part.tp) != 0;
}

/* Sizes of one rank's share of a micro-batch. */
typedef struct {
    int B, T, Tl; /* batch, sequence, positions per rank in the residual stream (T / seq_split) */
    int n, nl;    /* B T, B Tl */
    int C, Cl, Hl, Fl,
        Vl; /* channels, attention width Hl d (GPT-2: C/t), heads H/t, MLP width 4C/t (I/t), vocab Vp/t */
    int d, KVl, QKVl, FCl; /* head dim; kv heads here; qkv width (Hl + 2 KVl) d; the MLP's first product's width
                              (GPT-2 Fl; SwiGLU's gate and up 2 Fl) */
} mdc_i_sizes;

/* Offsets (floats) of every buffer in the one activation allocation. */
typedef struct {
    size_t encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, att, res2, ln2, ln2_mean, ln2_rstd, fch, fchg,
        res3,          /* per-layer buffers: base of the first held layer; stride below */
        qkraw, qkrstd; /* Qwen3: q and k before q_norm, k_norm (n (Hl + KVl) d), their rstd */
    size_t layer_stride;
    size_t lnf, lnf_mean, lnf_rstd, logits, losses, lse;
    /* backward work space (shared by the layers) */
    size_t dres, dln, datty, dbig, dbig2, attscratch, dqk;
    size_t rope; /* rotary positions: the set's cos, sin tables (T, d/2 each) */
    /* with communication: the row-parallel partial sums, the gathered input (SP), the
     * partial input gradient (SP), the vocab-parallel loss statistics */
    size_t partial, full, dfull, vstat;
    size_t dmask; /* dropout: a residual branch's gradient */
    /* full recomputation (work region): the recomputed block's output, a MoE block's MLP output */
    size_t rcout, rcmoe;
    size_t total;
    size_t work_rc; /* floats of the recomputed tensors at the work region's start (0: none) */
    size_t work;    /* floats of the work region this layout needs: those and the shared scratch */
    int tiled;
    /* of each count, the floats fp32 in every precision (statistics, log-sum-exps, losses); the
     * others are the run's dtype, of `width` bytes (4, or 2 in 16 bits) */
    size_t f32, layer_f32, work_rc_f32, work_f32;
    int width;
} mdc_i_acts_layout;
/* The bytes the allocator charges for `floats` of a layout's, f32 of them fp32. */
size_t mdc_i_acts_charged(const mdc_i_acts_layout *a, size_t floats, size_t f32);

struct mdc_gpt2_acts {
    mdc_device *dev;
    const mdc_gpt2 *m;
    int maxB, maxT, B, T, have_targets;
    int row0;         /* global batch row of row 0 (the dropout masks' key) */
    int rope_T;       /* the sequence length its rotary tables were built for (0: none yet) */
    int lo, hi, head; /* its chunk's blocks [lo, hi); 1: it holds the head's tensors */
    mdc_i_acts_layout lay;
    float *buf;
    int *inputs, *targets;
    /* B without W: per held layer, the gradients the weight part needs (allocated on first use) */
    float **wstash;
    size_t wstash_floats;
    char *wpending;
    struct mdc_i_moe_state **moe; /* per held layer: a MoE block's routing and expert buffers,
                                     from its forward to its backward (ref/model/moe/moe.c) */
    double moe_loss;              /* the MoE blocks' objective terms of the set's last forward */
    int work_held;                /* it counts among the users of the model's work region */
    float **wwork;                /* B without W under full recomputation: per held layer, the work
                                     region its B recomputed, kept for its W */
};

/* Full recomputation: block l's forward again before its backward, into the work region (its
 * output into rcout), with no taps, hooks or statistics. Selective: the attention's
 * probabilities again from the kept q, k, v (its output into scratch, n x Cl). */
mdc_status mdc_i_recompute_block(mdc_gpt2 *m, mdc_gpt2_acts *a, int l);
mdc_status mdc_i_recompute_attention(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, float *scratch);
/* needs: MDC_I_NEED_COMM (communication points), MDC_I_NEED_DROPOUT, MDC_I_NEED_LSE (attention
 * keeps each row's lse), recomputation (the recomputed tensors in the rank's work region) */
enum {
    MDC_I_NEED_COMM = 1,
    MDC_I_NEED_DROPOUT = 2,
    MDC_I_NEED_LSE = 4,
    MDC_I_NEED_RC_SEL = 8,
    MDC_I_NEED_RC_FULL = 16,
    MDC_I_NEED_HALF = 32 /* 16-bit: the row-parallel product rounded apart from its residual */
};
/* An offset with this bit is in the model's work region (m->rc.work), shared by every set and
 * layer: the scratch of one forward or backward call, and what recomputation rebuilds in the
 * backward instead of keeping. */
#define MDC_I_WORK ((size_t)1 << 60)
/* layers: the chunk's blocks; head: the head's tensors too */
mdc_i_acts_layout mdc_i_layout_acts(const mdc_gpt2_config *c, const mdc_gpt2_part *p, int needs, int B, int T,
                                    int layers, int head);
int mdc_i_acts_needs(const mdc_gpt2 *m);
/* The default activation set rebuilt if the needs changed from `before` (ref/model/gpt2.c). */
mdc_status mdc_i_acts_refresh(mdc_gpt2 *m, int before);
mdc_i_sizes mdc_i_sizes_of(const mdc_gpt2 *m, int B, int T);

/* ref/model/layout.c: builds the local table and unit ranges of m->part (m->cfg set). */
mdc_status mdc_i_layout_build(mdc_gpt2 *m);
/* pointer to local tensor of global index `gi` in base (params, grads, m, v), NULL if not held */
float *mdc_i_tensor(const mdc_gpt2 *m, float *base, int gi);
/* global index of layer l's tensor of kind k (-1: the block has none), of ln_f's weight and bias
 * (-1: none), of the LM head's weight (the token embedding when tied) */
int mdc_i_gl_family(const mdc_gpt2_config *c, int l, int k);
static inline int mdc_i_gl(const mdc_gpt2_config *c, int l, int k) {
    if (mdc_i_family(c)) return mdc_i_gl_family(c, l, k);
    return 2 + l * NLT + mdc_i_moe_before(c, l) * (4 * c->E + ROUTERW + 1 - NLT) + k;
}
static inline int mdc_i_glnf(const mdc_gpt2_config *c, int bias) {
    if (mdc_i_family(c)) return bias ? -1 : mdc_i_gl_family(c, c->L, -1);
    return mdc_i_gl(c, c->L, 0) + bias;
}
static inline int mdc_i_ghead(const mdc_gpt2_config *c) {
    return mdc_i_family(c) && c->untied ? mdc_i_glnf(c, 0) + 1 : 0;
}
static inline int mdc_i_gpos(const mdc_gpt2_config *c) { return mdc_i_family(c) ? -1 : 1; }

/* splitmix64 and the normal at a counter (initialization by global element index) */
float mdc_i_normal_at(uint64_t seed, uint64_t i);

/* ---- helpers of ref/model/block.c and ref/model/block_backward.c ------------------------------------------ */
#define HOOK(ev, unit)                                                     \
    do {                                                                   \
        if (m->hooks.fn) {                                                 \
            mdc_status hook_st_ = m->hooks.fn(m->hooks.ctx, (ev), (unit)); \
            if (hook_st_) return hook_st_;                                 \
        }                                                                  \
    } while (0)
/* A unit's forward or backward starts: the hook (ZeRO-3 gathers the unit there), then its compute
 * weights */
#define UNIT_START(ev, unit)          \
    do {                              \
        HOOK(ev, unit);               \
        mdc_i_weights_ready(m, unit); \
    } while (0)
/* A unit's backward ends: its gradients rounded where the buffer is bf16, then the hook (data
 * parallelism reduces them there) */
#define UNIT_GRADS_DONE(unit)               \
    do {                                    \
        mdc_i_grads_done(m, unit);          \
        HOOK(MDC_HOOK_POST_BACKWARD, unit); \
    } while (0)
#define TRY(expr)                    \
    do {                             \
        mdc_status try_st_ = (expr); \
        if (try_st_) return try_st_; \
    } while (0)

static inline float *buf(mdc_gpt2_acts *a, size_t off) {
    return off & MDC_I_WORK ? a->m->rc.work + (off & ~MDC_I_WORK) : a->buf + off; /* the shared scratch */
}
static inline float *lact(mdc_gpt2_acts *a, size_t off, int l) {
    if (off & MDC_I_WORK) return buf(a, off); /* recomputed, not kept */
    return a->buf + off + (size_t)(l - a->lo) * a->lay.layer_stride;
}
/* the residual stream entering layer l */
static inline float *x_in(mdc_gpt2_acts *a, int l) {
    return l > a->lo ? lact(a, a->lay.res3, l - 1) : buf(a, a->lay.encoded);
}
/* The vocabulary shard of this tp rank: its first row *lo and its rows below V (the rest pad). */
static inline int mdc_i_vocab_shard(const mdc_gpt2 *m, int Vl, int *lo) {
    *lo = m->part.tp_rank * Vl;
    int valid = m->cfg.V - *lo;
    return valid < 0 ? 0 : valid > Vl ? Vl : valid;
}
/* the weights the layers read: the compute copy in bf16 and fp16 (ref/model/precision.c) */
static inline float *P(mdc_gpt2 *m, int gi) {
    return gi < 0 ? NULL : mdc_i_tensor(m, m->pc.w ? m->pc.w : m->params, gi);
}
static inline float *G(mdc_gpt2 *m, int gi) { return gi < 0 ? NULL : mdc_i_tensor(m, m->grads, gi); }

/* The dropout of a site of layer l on this rank's share of the micro-batch, keyed by global
 * indices (batch row, position, channel; for attention the global head); NULL when off. */
static inline const mdc_dropout *drop_of(const mdc_gpt2 *m, const mdc_gpt2_acts *a, int l, int site, mdc_dropout *d) {
    if (!(m->drop_p > 0) || site < 0) return NULL;
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    memset(d, 0, sizeof *d);
    d->p = m->drop_p, d->seed = m->drop_seed, d->step = m->drop_step, d->layer = l, d->site = site;
    d->row0 = a->row0, d->T = m->cp ? m->cp->T : a->T, d->C = m->cfg.C, d->H = m->cfg.H;
    if (mdc_plant_here(MDC_PLANT_DROPOUT, l)) d->row0++; /* a planted fault: the next row's key */
    if (site == MDC_DROP_ATTN) d->head0 = m->part.tp_rank * s.Hl;
    else d->pos0 = m->part.sp ? m->part.tp_rank * s.Tl : 0;
    if (m->cp && site != MDC_DROP_ATTN) d->pos = m->cp->pos + d->pos0; /* the SP shard of the chunks */
    return d;
}

/* ---- mixed precision (ref/model/precision.c) ------------------------------------------------------- */
/* x[0..n) rounded to the run's dtype: a layer's output or input gradient (nothing in fp32) */
static inline void mdc_i_round(const mdc_gpt2 *m, float *x, size_t n) { mdc_round_half(x, n, m->pc.prec); }
/* The compute copy of unit `unit`'s parameters from the master (its forward or backward starts). */
void mdc_i_weights_ready(mdc_gpt2 *m, int unit);
/* A unit's gradients of this micro-batch are complete: a bf16 gradient buffer rounds them. */
void mdc_i_grads_done(mdc_gpt2 *m, int unit);
void mdc_i_precision_free(mdc_gpt2 *m);

/* ---- exact mode (ref/model/exact/exact_mode.c) -------------------------------------------------------- */
/* Offset (floats) of global tensor gi's local gradient in the gradient layout. */
size_t mdc_i_xoff(const mdc_gpt2 *m, int gi);
/* The exact (B, T, C) partial sums act -> their sum over tp rounded into the local rows
 * (serial: rounded). Then act is empty again. */
mdc_status mdc_i_x_reduce(mdc_gpt2 *m, mdc_gpt2_acts *a, float *local);
/* act emptied for the next product. */
void mdc_i_x_begin(mdc_gpt2 *m, mdc_gpt2_acts *a);
void mdc_i_exact_free(mdc_gpt2 *m);
/* Exact mode's attention over the set's whole sequence (ref/model/exact/exact_attention.c): out and the
 * rows' lse (B, Hl, T) from qkv; the backward adds into dqkv (zero before: the rounded sums land
 * exactly). */
mdc_status mdc_i_x_attention_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, float *out, float *lse, const float *qkv,
                                     const mdc_dropout *drop);
mdc_status mdc_i_x_attention_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, float *dqkv, const float *dout, const float *out,
                                      const float *qkv, const float *lse, const mdc_dropout *drop);
/* ---- MoE blocks (ref/model/moe/moe.c) ------------------------------------------------------------------ */
/* out (local rows, C) = the MoE MLP of x (= ln2 of layer l, local rows); its backward: dx (local
 * rows) from dout, adding the router's and experts' gradients. free: the set's state of layer l. */
mdc_status mdc_i_moe_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, float *out);
mdc_status mdc_i_moe_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *dout, float *dx);
void mdc_i_moe_free(mdc_gpt2_acts *a, int l);
/* The bias and counts of every MoE block (m->cfg set). */
mdc_status mdc_i_moe_alloc(mdc_gpt2 *m);

/* ---- tensor dumps (ref/model/dump.c): the tap that writes them --------------------------- */
mdc_status mdc_i_dump_tap(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, int dir, int phase, const float *x);

#include "layers.h"

/* The serial model's row-parallel product inp (n, K) W of linear L (fused with the residual there). */
mdc_status mdc_i_dump_product(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, const float *inp);

#endif
