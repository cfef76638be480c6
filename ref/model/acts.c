/* Activation sets (include/minidc/model.h): every tensor one micro-batch keeps between its
 * forward and its backward, laid out in one device allocation for this rank's partition
 * (local heads, MLP columns, vocabulary shard; with SP the residual stream's T/t positions).
 * The scratch of one call (the backward's work space, what the communication points and dropout
 * need) and the tensors recomputation rebuilds are in the model's work region, one per rank,
 * shared by every set: a set in flight holds only what its backward reads. */
#include <stdio.h>

#include "model_internal.h"

int mdc_i_acts_needs(const mdc_gpt2 *m) {
    return (m->comm || m->x.blk ? MDC_I_NEED_COMM : 0) | (m->drop_p > 0 ? MDC_I_NEED_DROPOUT : 0) |
           (m->cp ? MDC_I_NEED_LSE : 0) | (m->rc.mode == MDC_RECOMPUTE_FULL ? MDC_I_NEED_RC_FULL : 0) |
           (m->rc.mode == MDC_RECOMPUTE_SELECTIVE ? MDC_I_NEED_RC_SEL : 0) | (m->pc.prec ? MDC_I_NEED_HALF : 0);
}

mdc_i_acts_layout mdc_i_layout_acts(const mdc_gpt2_config *c, const mdc_gpt2_part *p, int needs, int B, int T,
                                    int layers, int head) {
    mdc_i_acts_layout a;
    memset(&a, 0, sizeof a);
    int t = p->tp, sp = p->sp, fam = mdc_i_family(c), kv0;
    size_t n = (size_t)B * T, nl = sp ? n / (size_t)t : n, C = (size_t)c->C, d = (size_t)mdc_i_head_dim(c);
    size_t Hl = (size_t)(c->H / t), KVl = (size_t)mdc_i_kv_local(c, t, p->tp_rank, &kv0), Cl = Hl * d;
    size_t QKVl = (Hl + 2 * KVl) * d, Fl = (size_t)mdc_i_ffn(c) / (size_t)t, FCl = fam ? 2 * Fl : Fl;
    size_t Vl = (size_t)c->Vp / (size_t)t, big = FCl > QKVl ? FCl : QKVl, qk = c->qk_norm ? (Hl + KVl) : 0;
    a.tiled = mdc_i_attn_tiled(c, T) || (needs & MDC_I_NEED_LSE);
    size_t attn = a.tiled ? (size_t)B * Hl * T : (size_t)B * Hl * T * T;
    size_t off = 0, woff = 0;
    /* a block keeps every tensor its backward reads (TAKE, per layer), or with recomputation
     * only its output (full) or all but the attention's T x T probabilities (selective): the
     * rest in the model's work region (WORK, one copy), rebuilt by the backward. The work
     * region also holds the scratch one forward or backward call uses and none keeps (after the
     * recomputed tensors): a schedule's sets in flight hold only what their backward reads. */
    int full = (needs & MDC_I_NEED_RC_FULL) != 0, sel = (needs & MDC_I_NEED_RC_SEL) && !a.tiled;
    /* F32: a tensor fp32 in every precision (statistics, log-sum-exps, losses); the rest in the
     * run's dtype (counted apart: the allocator charges each at its width) */
    size_t f32 = 0, wf32 = 0;
#define TAKE(field, k) (a.field = off, off += ((k) + 15) / 16 * 16)
#define WORK(field, k) (a.field = MDC_I_WORK | woff, woff += ((k) + 15) / 16 * 16)
#define KEEP(field, k, rc) ((rc) ? WORK(field, k) : TAKE(field, k))
#define F32(field, k, rc) (*((rc) ? &wf32 : &f32) += ((k) + 15) / 16 * 16, KEEP(field, k, rc))
    TAKE(encoded, nl * C);
    size_t l0 = off, lf0 = f32;
    KEEP(ln1, nl * C, full);
    F32(ln1_mean, nl, full);
    F32(ln1_rstd, nl, full);
    KEEP(qkv, n * QKVl, full);
    KEEP(atty, n * Cl, full);
    if (a.tiled) F32(att, attn, full || sel); /* the rows' log-sum-exp */
    else KEEP(att, attn, full || sel);
    KEEP(res2, nl * C, full);
    KEEP(ln2, nl * C, full);
    F32(ln2_mean, nl, full);
    F32(ln2_rstd, nl, full);
    KEEP(fch, n * FCl, full);
    KEEP(fchg, n * Fl, full);
    TAKE(res3, nl * C);
    KEEP(qkraw, n * qk * d, full);
    F32(qkrstd, n * qk, full);
    if (full) WORK(rcout, nl * C), WORK(rcmoe, c->E ? nl * C : 0);
    a.layer_stride = off - l0, a.layer_f32 = f32 - lf0;
    a.work_rc = woff, a.work_rc_f32 = wf32;
    off = l0 + a.layer_stride * (size_t)layers, f32 = lf0 + a.layer_f32 * (size_t)layers;
    if (head) {
        TAKE(lnf, nl * C);
        F32(lnf_mean, nl, 0);
        F32(lnf_rstd, nl, 0);
        TAKE(logits, n * Vl);
        F32(losses, n, 0);
        F32(lse, n, 0);
    }
    TAKE(dres, nl * C); /* the gradient a pipeline stage receives and sends: the set's own */
    TAKE(rope, fam ? (size_t)T * d : 0);
    WORK(dln, nl * C);
    WORK(datty, n * Cl);
    WORK(dbig, n * big);
    WORK(dbig2, n * big);
    WORK(attscratch, a.tiled ? 0 : (size_t)B * Hl * T * T);
    WORK(dqk, n * qk * d);
    if (needs & (MDC_I_NEED_COMM | MDC_I_NEED_DROPOUT | MDC_I_NEED_HALF))
        WORK(partial, n * C); /* a row-parallel product before its reduction or dropout */
    if (needs & MDC_I_NEED_COMM) {
        if (sp) {
            WORK(full, n * C);
            WORK(dfull, n * C);
        }
        F32(vstat, 2 * n, 1);
    }
    if (needs & MDC_I_NEED_DROPOUT) WORK(dmask, nl * C);
    a.work = woff, a.work_f32 = wf32;
#undef TAKE
#undef WORK
#undef KEEP
#undef F32
    a.total = off, a.f32 = f32, a.width = needs & MDC_I_NEED_HALF ? 2 : 4;
    return a;
}

size_t mdc_i_acts_charged(const mdc_i_acts_layout *a, size_t floats, size_t f32) {
    return (floats - f32) * (size_t)a->width + f32 * sizeof(float);
}

mdc_i_sizes mdc_i_sizes_of(const mdc_gpt2 *m, int B, int T) {
    mdc_i_sizes s;
    const mdc_gpt2_config *c = &m->cfg;
    int t = m->part.tp, split = m->part.sp ? t : 1, kv0;
    s.B = B, s.T = T, s.Tl = T / split, s.n = B * T, s.nl = B * s.Tl;
    s.d = mdc_i_head_dim(c), s.Hl = c->H / t, s.KVl = mdc_i_kv_local(c, t, m->part.tp_rank, &kv0);
    s.C = c->C, s.Cl = s.Hl * s.d, s.QKVl = (s.Hl + 2 * s.KVl) * s.d, s.Fl = mdc_i_ffn(c) / t, s.Vl = c->Vp / t;
    s.FCl = mdc_i_family(c) ? 2 * s.Fl : s.Fl;
    return s;
}

/* The layout of chunk k's set: its layers, and the head's tensors on the last chunk. */
static mdc_i_acts_layout chunk_layout(const mdc_gpt2 *m, int B, int T, int k) {
    const mdc_gpt2_part *p = &m->part;
    return mdc_i_layout_acts(&m->cfg, p, mdc_i_acts_needs(m), B, T, p->hi[k] - p->lo[k],
                             p->has_head && k == p->chunks - 1);
}

size_t mdc_gpt2_acts_layer_floats(const mdc_gpt2 *m, int B, int T) { return chunk_layout(m, B, T, 0).layer_stride; }
size_t mdc_gpt2_acts_work_floats(const mdc_gpt2 *m, int B, int T) { return chunk_layout(m, B, T, 0).work_rc; }
size_t mdc_gpt2_acts_layer_bytes(const mdc_gpt2 *m, int B, int T) {
    mdc_i_acts_layout l = chunk_layout(m, B, T, 0);
    return mdc_i_acts_charged(&l, l.layer_stride, l.layer_f32);
}
size_t mdc_gpt2_acts_work_bytes(const mdc_gpt2 *m, int B, int T) {
    mdc_i_acts_layout l = chunk_layout(m, B, T, 0);
    return mdc_i_acts_charged(&l, l.work_rc, l.work_rc_f32);
}

/* The work region: one per model (the scratch of one call and the recomputed tensors), as large as the
 * largest set's layout asks, while a set uses it. */
static mdc_status work_take(mdc_gpt2 *m, const mdc_i_acts_layout *l) {
    size_t floats = l->work;
    if (!floats) return MDC_OK;
    if (floats > m->rc.work_floats) {
        mdc_dev_free(m->dev, m->rc.work);
        m->rc.work = NULL, m->rc.work_floats = 0;
        TRY(mdc_dev_alloc_held(m->dev, (void **)&m->rc.work, floats * sizeof(float),
                               mdc_i_acts_charged(l, floats, l->work_f32), MDC_MEM_ACTS,
                               "work region (scratch, recomputed tensors)"));
        m->rc.work_floats = floats;
    }
    m->rc.users++;
    return MDC_OK;
}
static void work_drop(mdc_gpt2 *m) {
    if (--m->rc.users > 0) return;
    mdc_dev_free(m->dev, m->rc.work);
    m->rc.work = NULL, m->rc.work_floats = 0;
}

size_t mdc_gpt2_acts_bytes(const mdc_gpt2 *m, int B, int T) {
    size_t bytes = 0, work = 0, wb = 0;
    for (int k = 0; k < m->part.chunks; k++) {
        mdc_i_acts_layout l = chunk_layout(m, B, T, k);
        bytes += mdc_i_acts_charged(&l, l.total, l.f32) + 2 * (size_t)B * T * sizeof(int);
        if (l.work > work) work = l.work, wb = mdc_i_acts_charged(&l, l.work, l.work_f32);
    }
    return bytes + wb;
}

mdc_status mdc_gpt2_acts_create(mdc_gpt2_acts **out, mdc_gpt2 *m, int B, int T) {
    return mdc_gpt2_acts_create_chunk(out, m, B, T, 0);
}

void mdc_gpt2_acts_layers(const mdc_gpt2_acts *a, int *lo, int *hi) { *lo = a->lo, *hi = a->hi; }

mdc_status mdc_gpt2_acts_create_chunk(mdc_gpt2_acts **out, mdc_gpt2 *m, int B, int T, int chunk) {
    *out = NULL;
    if (chunk < 0 || chunk >= m->part.chunks)
        return mdc_fail(MDC_ERR_INVALID, "activation set: chunk %d of %d", chunk, m->part.chunks);
    if (B <= 0) return mdc_fail(MDC_ERR_INVALID, "--batch: batch size %d must be positive", B);
    if (T <= 0 || T > m->cfg.T)
        return mdc_fail(MDC_ERR_INVALID, "--seq: sequence length %d must be in [1, context %d]", T, m->cfg.T);
    if (m->part.sp && T % m->part.tp)
        return mdc_fail(MDC_ERR_INVALID, "--sp: the sequence length %d (--seq) is not divisible by --tp %d", T,
                        m->part.tp);
    mdc_gpt2_acts *a = calloc(1, sizeof *a);
    if (!a) return mdc_fail(MDC_ERR_OOM_HOST, "activation set: out of host memory");
    a->dev = m->dev, a->m = m, a->maxB = B, a->maxT = T;
    a->lo = m->part.lo[chunk], a->hi = m->part.hi[chunk], a->head = m->part.has_head && chunk == m->part.chunks - 1;
    a->lay = chunk_layout(m, B, T, chunk);
    int layers = a->hi - a->lo;
    a->wstash = calloc((size_t)(layers > 0 ? layers : 1), sizeof *a->wstash);
    a->wpending = calloc((size_t)(layers > 0 ? layers : 1), 1);
    a->moe = calloc((size_t)(layers > 0 ? layers : 1), sizeof *a->moe);
    a->wwork = calloc((size_t)(layers > 0 ? layers : 1), sizeof *a->wwork);
    mdc_status st = a->wstash && a->wpending && a->moe && a->wwork ? MDC_OK
                                                                   : mdc_fail(MDC_ERR_OOM_HOST, "activation set");
    if (!st)
        st = mdc_dev_alloc_held(m->dev, (void **)&a->buf, a->lay.total * sizeof(float),
                                mdc_i_acts_charged(&a->lay, a->lay.total, a->lay.f32), MDC_MEM_ACTS, "activations");
    if (!st) st = work_take(m, &a->lay), a->work_held = !st && a->lay.work;
    if (!st) st = mdc_dev_alloc(m->dev, (void **)&a->inputs, 2 * (size_t)B * T * sizeof(int), MDC_MEM_ACTS, "tokens");
    if (st) {
        mdc_gpt2_acts_free(a);
        return st;
    }
    a->targets = a->inputs + (size_t)B * T;
    *out = a;
    return MDC_OK;
}

void mdc_gpt2_acts_free(mdc_gpt2_acts *a) {
    if (!a) return;
    int layers = a->hi - a->lo;
    for (int i = 0; a->wstash && i < layers; i++) mdc_dev_free(a->dev, a->wstash[i]);
    for (int i = 0; a->wwork && i < layers; i++) mdc_dev_free(a->dev, a->wwork[i]);
    for (int i = 0; a->moe && i < layers; i++) mdc_i_moe_free(a, a->lo + i);
    free(a->wstash), free(a->wpending), free(a->moe), free(a->wwork);
    mdc_dev_free(a->dev, a->buf);
    mdc_dev_free(a->dev, a->inputs);
    if (a->work_held) work_drop((mdc_gpt2 *)a->m);
    free(a);
}

mdc_status mdc_gpt2_set_batch(mdc_gpt2_acts *a, const int *inputs, const int *targets, int B, int T) {
    const mdc_gpt2_config *c = &a->m->cfg;
    if (B <= 0 || B > a->maxB)
        return mdc_fail(MDC_ERR_INVALID, "forward: batch %d not in [1, %d] (the creation batch)", B, a->maxB);
    if (T <= 0 || T > a->maxT)
        return mdc_fail(MDC_ERR_INVALID, "forward: sequence %d not in [1, %d] (the creation length)", T, a->maxT);
    if (a->m->part.sp && T % a->m->part.tp)
        return mdc_fail(MDC_ERR_INVALID, "--sp: the sequence length %d is not divisible by --tp %d", T, a->m->part.tp);
    int blk = a->m->x.blk, Tl = T / (a->m->part.sp ? a->m->part.tp : 1);
    if (blk && Tl % blk)
        return mdc_fail(
            MDC_ERR_INVALID,
            "--exact-block %d does not divide the %d positions of a sequence this rank holds (sequence %d%s); "
            "use a block that divides %d",
            blk, Tl, T, a->m->part.sp ? ", split over --tp by --sp" : "", Tl);
    size_t N = (size_t)B * T;
    for (size_t i = 0; i < N; i++) {
        if (inputs && (inputs[i] < 0 || inputs[i] >= c->V))
            return mdc_fail(MDC_ERR_INVALID, "forward: input token %d at position %zu not in [0, %d)", inputs[i], i,
                            c->V);
        if (targets && (targets[i] < 0 || targets[i] >= c->V))
            return mdc_fail(MDC_ERR_INVALID, "forward: target %d at position %zu not in [0, %d)", targets[i], i, c->V);
    }
    if (inputs) memcpy(a->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(a->targets, targets, N * sizeof(int));
    mdc_dev_copy(a->dev, (double)N * sizeof(int) * ((inputs != NULL) + (targets != NULL)), MDC_LINK_PCIE);
    a->B = B, a->T = T, a->have_targets = targets != NULL, a->moe_loss = 0;
    return MDC_OK;
}

float *mdc_gpt2_acts_residual(mdc_gpt2_acts *a) {
    return a->hi > a->lo ? lact(a, a->lay.res3, a->hi - 1) : buf(a, a->lay.encoded);
}
const float *mdc_gpt2_acts_logits(const mdc_gpt2_acts *a) { return a->buf + a->lay.logits; }
float *mdc_gpt2_acts_input(mdc_gpt2_acts *a) { return a->buf + a->lay.encoded; }
float *mdc_gpt2_acts_dresidual(mdc_gpt2_acts *a) { return a->buf + a->lay.dres; }
int mdc_gpt2_acts_forward_uses_dresidual(const mdc_gpt2_acts *a) {
    return mdc_i_moe_before(&a->m->cfg, a->hi) > mdc_i_moe_before(&a->m->cfg, a->lo); /* moe_mlp_forward's y */
}
const float *mdc_gpt2_acts_losses(const mdc_gpt2_acts *a) { return a->buf + a->lay.losses; }
void mdc_gpt2_acts_set_row0(mdc_gpt2_acts *a, int row0) { a->row0 = row0; }
