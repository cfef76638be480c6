/* Partitions and the local parameter layout (include/minidc/model.h, "partitions").
 *
 * The local table lists the global tensors this partition holds, in global order, each with
 * its slice (replicated, rows, or column pieces) and a local offset; tensors are contiguous,
 * so every unit (embedding, block, head) is one range of the local allocation, as in the
 * serial layout, and the data-parallel component works on any partition unchanged.
 * Initialization and the local <-> global copies walk the same slice description, so a shard
 * is the serial tensor's slice bit for bit. */
#include <math.h>
#include <stdio.h>

#include "minidc/numerics.h"
#include "minidc/splitmix.h"
#include "model_internal.h"

mdc_gpt2_part mdc_gpt2_part_serial(const mdc_gpt2_config *cfg) {
    mdc_gpt2_part p;
    memset(&p, 0, sizeof p);
    p.tp = 1, p.chunks = 1, p.hi[0] = cfg->L, p.has_embed = p.has_head = 1;
    return p;
}

mdc_status mdc_gpt2_part_check(const mdc_gpt2_part *p, const mdc_gpt2_config *c, int T) {
    int t = p->tp;
    if (t < 1 || p->tp_rank < 0 || p->tp_rank >= t)
        return mdc_fail(MDC_ERR_INVALID, "--tp %d: tensor-parallel rank %d out of range", t, p->tp_rank);
    if (c->H % t)
        return mdc_fail(MDC_ERR_INVALID, "--tp %d does not divide --heads %d (attention is split by heads)", t, c->H);
    int KV = mdc_i_kv_heads(c), F = mdc_i_ffn(c);
    if (KV % t && t % KV)
        return mdc_fail(MDC_ERR_INVALID,
                        "--tp %d and the %d key/value heads: one must divide the other (kv heads split over tp, or "
                        "each replicated on tp / KV ranks)",
                        t, KV);
    if (F % t)
        return mdc_fail(MDC_ERR_INVALID, "--tp %d does not divide the MLP width %d (%s)", t, F,
                        mdc_i_family(c) ? "intermediate_size" : "4C, --channels");
    if (c->shared_ffn > 0 && c->shared_ffn % t)
        return mdc_fail(MDC_ERR_INVALID, "--tp %d does not divide the shared expert's width %d (%s)", t, c->shared_ffn,
                        c->n_shared ? "n_shared_experts x moe_intermediate_size" : "shared_expert_intermediate_size");
    if (c->Vp % t)
        return mdc_fail(MDC_ERR_INVALID,
                        "--tp %d does not divide the padded vocabulary %d (--vocab %d padded to a "
                        "multiple of 128); pick a --vocab whose padding is a multiple of %d x 128",
                        t, c->Vp, c->V, t);
    if (p->sp && t == 1) return mdc_fail(MDC_ERR_INVALID, "--sp needs --tp 2 or more (it splits the sequence over tp)");
    if (p->sp && T % t)
        return mdc_fail(MDC_ERR_INVALID, "--sp: the sequence length %d (--seq) is not divisible by --tp %d", T, t);
    if (p->ep > 1 && (!c->E || c->E % p->ep))
        return mdc_fail(MDC_ERR_INVALID, "--ep %d does not divide --experts %d (each ep rank holds E/ep experts)",
                        p->ep, c->E);
    if (p->ep > 1 && (p->ep_rank < 0 || p->ep_rank >= p->ep))
        return mdc_fail(MDC_ERR_INVALID, "--ep %d: expert-parallel rank %d out of range", p->ep, p->ep_rank);
    if (p->etp > 1 && !c->E)
        return mdc_fail(MDC_ERR_INVALID, "--etp %d: expert tensor parallelism needs a mixture of experts (--experts)",
                        p->etp);
    if (p->etp > 1 && t % p->etp)
        return mdc_fail(MDC_ERR_INVALID,
                        "--etp %d does not divide --tp %d: an expert is split over etp consecutive tp ranks (etp "
                        "divides tp; --etp %d is the usual choice)",
                        p->etp, t, t);
    int Fe = c->E ? mdc_i_expert_of(c, c->L - 1, 0).F : 0;
    if (p->etp > 1 && Fe % p->etp)
        return mdc_fail(MDC_ERR_INVALID,
                        "--etp %d does not divide an expert's width %d (%s): each etp rank holds F/etp of its columns",
                        p->etp, Fe,
                        !mdc_i_family(c) ? "4C, --channels"
                        : c->moe_ffn > 0 ? "moe_intermediate_size"
                                         : "intermediate_size");
    if (p->chunks < 1 || p->chunks > MDC_GPT2_MAX_CHUNKS)
        return mdc_fail(MDC_ERR_INVALID, "%d model chunks: between 1 and %d", p->chunks, MDC_GPT2_MAX_CHUNKS);
    for (int k = 0; k < p->chunks; k++)
        if (p->lo[k] < (k ? p->hi[k - 1] : 0) || p->hi[k] > c->L || p->lo[k] > p->hi[k])
            return mdc_fail(MDC_ERR_INVALID,
                            "chunk %d's layer range [%d, %d) is not ascending inside the model's %d layers", k,
                            p->lo[k], p->hi[k], c->L);
    return MDC_OK;
}

/* The slice of global tensor g (global table entry) that partition p holds, as a local entry. */
static void slice_of(const mdc_gpt2_config *c, const mdc_gpt2_part *p, const mdc_param_tensor *g, int gi,
                     mdc_param_tensor *t) {
    *t = *g;
    t->global = gi, t->split = MDC_SPLIT_NONE, t->row0 = 0, t->col0 = 0, t->pieces = 1, t->pstride = 0;
    int tp = p->tp, r = p->tp_rank, C = c->C, l, k, role = mdc_i_role(c, gi, &l, &k);
    if (tp == 1) return;
    if (role == MDC_I_EMBED || role == MDC_I_HEAD) { /* wte, lm_head: rows of the padded vocabulary */
        int rows = c->Vp / tp, lo = r * rows, valid = c->V - lo;
        valid = valid < 0 ? 0 : valid > rows ? rows : valid;
        t->split = MDC_SPLIT_ROWS, t->row0 = lo, t->shape[0] = valid;
        t->numel = (size_t)valid * C, t->alloc = (size_t)rows * C;
        return;
    }
    if (role != MDC_I_LAYER) return; /* wpe, the final norm */
    int last = g->ndim == 2 ? 1 : 0; /* the dimension that holds columns */
    int d = mdc_i_head_dim(c), Q = c->H / tp * d, Fl = mdc_i_ffn(c) / tp, kv0, KVl = mdc_i_kv_local(c, tp, r, &kv0);
    int lo = 0, n = 0, split = MDC_SPLIT_NONE;       /* the slice: [lo, lo + n) of the split dimension */
    if (mdc_i_family(c) && k >= FSG && k < FSGATE) { /* the shared expert: over tp like the dense MLP */
        int Fsl = c->shared_ffn / tp;
        split = k == FSD ? MDC_SPLIT_COLS : MDC_SPLIT_ROWS, lo = r * Fsl, n = Fsl;
    } else if (mdc_i_is_moe(c, l) && k >= (mdc_i_family(c) ? FSG : ROUTERW)) {
        /* the router and the shared expert's sigmoid gate whole; the routed experts whole, or over etp ranks:
         * the first product column-parallel, the second row-parallel, as the dense MLP over tp */
        int x = mdc_i_expert_part(c, l, k), N = p->etp, Fe = mdc_i_expert_of(c, l, 0).F / (N > 1 ? N : 1);
        if (N < 2 || x < 0) return;
        lo = r % N * Fe, n = Fe;
        if (mdc_i_family(c)) split = x == XD ? MDC_SPLIT_COLS : MDC_SPLIT_ROWS; /* [out, in] */
        else if (x == X_FCPB) return;                                           /* added after the sum */
        else split = x == X_FCPW ? MDC_SPLIT_ROWS : MDC_SPLIT_COLS;
    } else if (!mdc_i_family(c)) switch (k) {
        case QKVW:
        case QKVB: /* the q, k, v columns of this rank's heads */
            t->split = MDC_SPLIT_COLS, t->pieces = 3, t->pstride = C, t->col0 = r * (C / tp);
            t->shape[last] = 3 * (C / tp);
            t->numel = t->alloc = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
            return;
        case FCW:
        case FCB: split = MDC_SPLIT_COLS, lo = r * Fl, n = Fl; break;
        case ATTPW:
        case FCPW: split = MDC_SPLIT_ROWS, n = g->shape[0] / tp, lo = r * n; break; /* the row-parallel input */
        default: return; /* LayerNorms and the row-parallel biases are replicated */
        }
    else switch (k) { /* [out, in]: column-parallel layers split their rows (a bias its entries) */
        case QKVW:
        case QKVB: split = MDC_SPLIT_ROWS, lo = r * Q, n = Q; break;
        case KW:
        case VW:
        case KB:
        case VB: split = MDC_SPLIT_ROWS, lo = kv0 * d, n = KVl * d; break;
        case FCW:
        case UPW:
        case FCB:
        case UPB: split = MDC_SPLIT_ROWS, lo = r * Fl, n = Fl; break;
        case ATTPW: split = MDC_SPLIT_COLS, lo = r * Q, n = Q; break; /* row-parallel: the input columns */
        case FCPW: split = MDC_SPLIT_COLS, lo = r * Fl, n = Fl; break;
        default: return; /* the norms, q_norm, k_norm and the row-parallel biases are replicated */
        }
    if (split == MDC_SPLIT_ROWS && g->ndim == 1) split = MDC_SPLIT_COLS; /* a 1-D tensor is a row vector */
    t->split = split;
    if (split == MDC_SPLIT_ROWS) t->row0 = lo, t->shape[0] = n;
    else t->col0 = lo, t->shape[last] = n;
    t->numel = t->alloc = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

static int held(const mdc_gpt2_config *c, const mdc_gpt2_part *p, int gi) {
    int l, k, role = mdc_i_role(c, gi, &l, &k);
    if (role == MDC_I_EMBED) /* the tied wte: the embedding's and the head's */
        return p->has_embed || (p->has_head && mdc_i_ghead(c) == 0);
    if (role == MDC_I_POS) return p->has_embed;
    if (role == MDC_I_NORMF || role == MDC_I_HEAD) return p->has_head;
    int j = mdc_gpt2_tensor_expert(c, gi);
    if (j >= 0 && p->ep > 1) { /* expert j on ep rank j / (E/ep) */
        if (j / (c->E / p->ep) != p->ep_rank) return 0;
    }
    for (int q = 0; q < p->chunks; q++)
        if (l >= p->lo[q] && l < p->hi[q]) return 1;
    return 0;
}

/* unit of global tensor gi: 0 embedding (or the head's wte without the embedding), 1 + l, L + 1 */
static int unit_of(const mdc_gpt2_config *c, const mdc_gpt2_part *p, int gi) {
    int l, k, role = mdc_i_role(c, gi, &l, &k);
    if (role == MDC_I_EMBED) return p->has_embed ? 0 : c->L + 1;
    if (role == MDC_I_POS) return 0;
    if (role == MDC_I_LAYER) return 1 + l;
    return c->L + 1;
}

mdc_status mdc_i_layout_build(mdc_gpt2 *m) {
    const mdc_gpt2_config *c = &m->cfg;
    int n = mdc_gpt2_tensor_count(c), U = mdc_gpt2_unit_count(c);
    m->tensors = calloc((size_t)n, sizeof *m->tensors);
    m->tensor_of = malloc((size_t)n * sizeof(int));
    m->unit_off = calloc((size_t)U, sizeof(size_t));
    m->unit_count = calloc((size_t)U, sizeof(size_t));
    if (!m->tensors || !m->tensor_of || !m->unit_off || !m->unit_count)
        return mdc_fail(MDC_ERR_OOM_HOST, "model tensor table");
    /* wte joins the head's unit when the embedding is elsewhere: order units, then tensors */
    size_t off = 0;
    m->ntensors = 0;
    for (int u = 0; u < U; u++) {
        m->unit_off[u] = off;
        for (int gi = 0; gi < n; gi++) {
            if (u == 0) m->tensor_of[gi] = -1;
            if (!held(c, &m->part, gi) || unit_of(c, &m->part, gi) != u) continue;
            mdc_param_tensor g, *t = &m->tensors[m->ntensors];
            mdc_gpt2_tensor_at(c, gi, &g);
            slice_of(c, &m->part, &g, gi, t);
            t->offset = off;
            off += t->alloc;
            m->tensor_of[gi] = m->ntensors++;
        }
        m->unit_count[u] = off - m->unit_off[u];
    }
    m->floats = off;
    return MDC_OK;
}

float *mdc_i_tensor(const mdc_gpt2 *m, float *base, int gi) {
    int i = m->tensor_of[gi];
    return i < 0 || !base ? NULL : base + m->tensors[i].offset;
}

int mdc_gpt2_local_count(const mdc_gpt2 *m) { return m->ntensors; }

/* local tensor i is a routed expert's and the experts are split over etp ranks */
static int etp_tensor(const mdc_gpt2 *m, int i) {
    int l, k;
    if (m->part.etp < 2 || mdc_i_role(&m->cfg, m->tensors[i].global, &l, &k) != MDC_I_LAYER) return 0;
    return mdc_i_expert_part(&m->cfg, l, k) >= 0;
}
int mdc_gpt2_etp_copy(const mdc_gpt2 *m, int i) { return etp_tensor(m, i) && m->part.tp_rank >= m->part.etp; }

int mdc_gpt2_grad_partial(const mdc_gpt2 *m, int i) {
    const mdc_param_tensor *t = &m->tensors[i];
    int l, k, role = mdc_i_role(&m->cfg, t->global, &l, &k);
    /* an etp group computes an expert's gradients from every row of its members (gathered with
     * SP): complete for the group's tokens, which other etp groups of the tp group differ from
     * only with SP */
    if (etp_tensor(m, i)) return m->part.sp && m->part.tp > m->part.etp ? MDC_GRAD_PARTIAL_ETP : 0;
    if (m->part.tp < 2 || t->split != MDC_SPLIT_NONE || role == MDC_I_POS) return 0;
    if (role == MDC_I_LAYER && mdc_i_family(&m->cfg) && (k == QNW || k == KNW))
        return 1;      /* q_norm, k_norm: this rank's heads' share */
    return m->part.sp; /* SP: the norms and row-parallel biases see this rank's positions only */
}
int mdc_gpt2_kv_copy(const mdc_gpt2 *m, int i) {
    const mdc_param_tensor *t = &m->tensors[i];
    int l, k;
    if (mdc_i_role(&m->cfg, t->global, &l, &k) != MDC_I_LAYER || !mdc_i_kv_shared(m)) return 0;
    if (k != KW && k != VW && k != KB && k != VB) return 0;
    return mdc_i_kv_copy(m) ? 2 : 1;
}
const mdc_param_tensor *mdc_gpt2_local_tensor(const mdc_gpt2 *m, int i) {
    return i >= 0 && i < m->ntensors ? &m->tensors[i] : NULL;
}
size_t mdc_gpt2_local_floats(const mdc_gpt2 *m) { return m->floats; }
const mdc_gpt2_part *mdc_gpt2_get_part(const mdc_gpt2 *m) { return &m->part; }
const mdc_gpt2_comm *mdc_gpt2_get_comm(const mdc_gpt2 *m) { return m->comm; }

void mdc_gpt2_local_unit(const mdc_gpt2 *m, int unit, size_t *offset, size_t *count) {
    *offset = m->unit_off[unit], *count = m->unit_count[unit];
}

/* Walks the runs of local tensor t: fn(local offset, global offset, length) for each
 * contiguous run (one per row and piece); rows past the global shape (wte padding) skipped. */
typedef void (*run_fn)(void *ctx, size_t local, size_t global, size_t n);
static void for_each_run(const mdc_gpt2_config *c, const mdc_param_tensor *t, run_fn fn, void *ctx) {
    mdc_param_tensor g;
    mdc_gpt2_tensor_at(c, t->global, &g);
    size_t gcols = g.ndim == 2 ? (size_t)g.shape[1] : (size_t)g.shape[0];
    size_t lcols = t->ndim == 2 ? (size_t)t->shape[1] : (size_t)t->shape[0];
    size_t rows = t->ndim == 2 ? (size_t)t->shape[0] : 1, w = lcols / (size_t)t->pieces;
    if (t->pieces == 1 && lcols == gcols) { /* whole rows: one run */
        fn(ctx, t->offset, g.offset + (size_t)t->row0 * gcols, rows * lcols);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (int k = 0; k < t->pieces; k++) {
            size_t lo = t->offset + r * lcols + (size_t)k * w;
            size_t go = g.offset + ((size_t)t->row0 + r) * gcols + (size_t)t->col0 + (size_t)k * (size_t)t->pstride;
            fn(ctx, lo, go, w);
        }
}

typedef struct {
    const float *src;
    float *dst;
    int to_global;
} copy_ctx;
static void copy_run(void *vc, size_t local, size_t global, size_t n) {
    copy_ctx *c = vc;
    if (c->to_global) memcpy(c->dst + global, c->src + local, n * sizeof(float));
    else memcpy(c->dst + local, c->src + global, n * sizeof(float));
}

void mdc_gpt2_local_to_global(const mdc_gpt2 *m, const float *local, float *global) {
    copy_ctx cc = {local, global, 1};
    for (int i = 0; i < m->ntensors; i++) for_each_run(&m->cfg, &m->tensors[i], copy_run, &cc);
}

void mdc_gpt2_global_to_local(const mdc_gpt2 *m, const float *global, float *local) {
    copy_ctx cc = {global, local, 0};
    for (int i = 0; i < m->ntensors; i++) {
        const mdc_param_tensor *t = &m->tensors[i];
        memset(local + t->offset, 0, t->alloc * sizeof(float)); /* wte padding rows */
        for_each_run(&m->cfg, t, copy_run, &cc);
    }
}

/* ---- initialization by global element index ------------------------------------------------ */

/* N(0,1) for element `i` of stream `seed` (Box-Muller on two 53-bit uniforms, double). */
float mdc_i_normal_at(uint64_t seed, uint64_t i) {
    uint64_t a = mdc_splitmix64(seed * 0x632be59bd9b4e019ull ^ mdc_splitmix64(2 * i)),
             b = mdc_splitmix64(a ^ mdc_splitmix64(2 * i + 1));
    double u1 = ((double)(a >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
    double u2 = (double)(b >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * mdc_log(u1)) * mdc_cospi2(u2));
}

typedef struct {
    float *p;
    uint64_t seed, shift;
    float sd;
} init_ctx;
static void init_run(void *vc, size_t local, size_t global, size_t n) {
    init_ctx *c = vc;
    float *p = c->p + local;
    /* the key: the element's offset in the unpadded serial order (wte's V rows, then the rest),
     * so the padding a mesh adds to the vocabulary (mdc_gpt2_padded_vocab_tp) draws nothing */
    uint64_t base = global - c->shift;
    long len = (long)n;
#pragma omp parallel for schedule(static)
    for (long j = 0; j < len; j++) p[j] = c->sd * mdc_i_normal_at(c->seed, base + (uint64_t)j);
}

/* 1 for the projections that write into the residual stream (GPT-2's c_proj, the families'
 * o_proj and down_proj, every expert's and the shared expert's down): GPT-2's scaled init */
static int residual_out(const mdc_gpt2_config *c, int gi) {
    int l, k;
    if (mdc_i_role(c, gi, &l, &k) != MDC_I_LAYER) return 0;
    if (k == ATTPW || (!mdc_i_is_moe(c, l) && k == FCPW)) return 1;
    if (!mdc_i_is_moe(c, l)) return 0;
    if (!mdc_i_family(c)) return k > ROUTERW && (k - ROUTERW - 1) % 4 == X_FCPW;
    return k == FSD || (k > FROUTER && (k - FROUTER - 1) % 3 == XD);
}

void mdc_gpt2_init(mdc_gpt2 *m, uint64_t seed) {
    float resid = 0.02f / sqrtf(2.0f * m->cfg.L);
    for (int i = 0; i < m->ntensors && !mdc_dev_dry(m->dev); i++) { /* dry: the copy's cost only */
        const mdc_param_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        memset(p, 0, t->alloc * sizeof(float));
        const char *dot = strrchr(t->name, '.');
        if (strstr(t->name, "ln_") || strstr(t->name, "norm")) { /* GPT-2's ln_*, the families' *norm */
            if (!strcmp(dot, ".weight"))
                for (size_t j = 0; j < t->alloc; j++) p[j] = 1.0f;
        } else if (t->ndim == 2) {
            /* past wte's padding rows (an untied lm_head's own padding follows its V rows) */
            uint64_t pad = t->global > 0 ? (uint64_t)(m->cfg.Vp - m->cfg.V) * (uint64_t)m->cfg.C : 0;
            init_ctx ic = {m->params, seed, pad, residual_out(&m->cfg, t->global) ? resid : 0.02f};
            for_each_run(&m->cfg, t, init_run, &ic);
        }
    }
    mdc_dev_copy(m->dev, (double)m->floats * 4, MDC_LINK_PCIE);
}

mdc_status mdc_gpt2_create_layout(mdc_gpt2 **out, const mdc_gpt2_config *cfg_in, const mdc_gpt2_part *part) {
    *out = NULL;
    mdc_gpt2_config cfg = *cfg_in;
    mdc_status st = mdc_gpt2_config_check(&cfg);
    if (!st) st = mdc_gpt2_part_check(part, &cfg, part->sp ? part->tp : 1);
    if (st) return st;
    mdc_gpt2 *m = calloc(1, sizeof *m);
    if (!m) return mdc_fail(MDC_ERR_OOM_HOST, "model layout");
    m->cfg = cfg, m->part = *part;
    if ((st = mdc_i_layout_build(m)) || (st = mdc_i_moe_alloc(m))) {
        mdc_gpt2_free(m);
        return st;
    }
    *out = m;
    return MDC_OK;
}
