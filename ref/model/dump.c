/* Tensor dumps at the model's sites (include/minidc/dump.h): each call adds this rank's piece
 * of one global tensor to the attached file, with where the piece lies in the global tensor.
 * A piece's place follows from the partition: its batch rows from the activation set's row0,
 * its positions from SP's shard and the context-parallel positions, its columns from the
 * tensor-parallel shard (the heads of qkv are three runs, the vocabulary's padding is left out).
 * The dump only reads: no kernel is charged and no result changes. */
#include <cblas.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "minidc/dump.h"
#include "model_internal.h"

mdc_status mdc_gpt2_set_dump(mdc_gpt2 *m, mdc_tensorfile *tf, int step, int batch) {
    if (tf && (step < 0 || batch <= 0))
        return mdc_fail(MDC_ERR_INVALID, "dump: step %d and batch %d (want step >= 0, batch > 0)", step, batch);
    m->dump.tf = tf, m->dump.step = step, m->dump.batch = batch;
    m->tap = tf ? mdc_i_dump_tap : NULL;
    return MDC_OK;
}

/* A growing string for an entry's JSON. */
typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            t->oom = 1;
            return;
        }
        if (t->s && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = (t->cap ? 2 * t->cap : 256) + (size_t)k;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->oom = 1;
            return;
        }
        t->s = s, t->cap = cap;
    }
}

/* One dimension's runs: local start, global start, length. */
typedef struct {
    int n, (*r)[3];
} runs;

static int add_run(runs *d, int loc, int glob, int len) {
    if (len <= 0) return 0;
    if (d->n && d->r[d->n - 1][0] + d->r[d->n - 1][2] == loc && d->r[d->n - 1][1] + d->r[d->n - 1][2] == glob) {
        d->r[d->n - 1][2] += len;
        return 0;
    }
    void *p = realloc(d->r, sizeof *d->r * (size_t)(d->n + 1));
    if (!p) return -1;
    d->r = p;
    d->r[d->n][0] = loc, d->r[d->n][1] = glob, d->r[d->n][2] = len;
    d->n++;
    return 0;
}

/* Writes the entry: data (ndim, local shape) as dt (F32, or I32 for integer values) under `name`,
 * its metadata beside it. */
static mdc_status add_entry(mdc_tensorfile *tf, const char *name, const char *global, int ndim, const int64_t *lshape,
                            const int64_t *gshape, runs *dims, int sum, int64_t order, mdc_tdtype dt,
                            const float *data) {
    text t = {0};
    put(&t, "{\"global\":\"%s\",\"shape\":[", global);
    for (int i = 0; i < ndim; i++) put(&t, "%s%" PRId64, i ? "," : "", gshape[i]);
    put(&t, "],\"sum\":%d,\"order\":%" PRId64 ",\"map\":[", sum, order);
    for (int i = 0; i < ndim; i++) {
        put(&t, "%s[", i ? "," : "");
        for (int k = 0; k < dims[i].n; k++)
            put(&t, "%s[%d,%d,%d]", k ? "," : "", dims[i].r[k][0], dims[i].r[k][1], dims[i].r[k][2]);
        put(&t, "]");
    }
    put(&t, "]}");
    mdc_status st = t.oom ? mdc_fail(MDC_ERR_OOM_HOST, "dump: the entry %s", name) : MDC_OK;
    char key[320];
    snprintf(key, sizeof key, "dump:%s", name);
    if (!st) st = mdc_tensorfile_add_f32(tf, name, dt, ndim, lshape, data);
    if (!st) st = mdc_tensorfile_set_meta(tf, key, t.s);
    free(t.s);
    return st;
}

/* Execution order: the step, forward / backward / parameter gradients, then the unit in the
 * direction of execution, the site in it, a ":pre" before its tensor. */
static int64_t order_of(int step, int L, int phase, int unit, int site, int pre) {
    int up = phase == 1 ? L + 1 - unit : unit, sp = phase == 1 ? MDC_I_DS_N - site : site;
    return (((int64_t)step * 3 + phase) << 32) + ((int64_t)up * (MDC_I_DS_N + 1) + sp) * 2 + !pre;
}

/* Adds x, this rank's piece of site `site` of unit `unit`, as a gradient (bwd), before a
 * communication point (pre), a partial sum over tp (sum), in its rows and width. */
static mdc_status dump(mdc_gpt2 *m, const mdc_gpt2_acts *a, int unit, int bwd, int site, int pre, int sum, int rows,
                       int width, const float *x) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    const mdc_gpt2_config *c = &m->cfg;
    int r = m->part.tp_rank, Tloc = rows == MDC_I_ROWS ? s.Tl : a->T;
    int pos0 = rows == MDC_I_ROWS && m->part.sp ? r * s.Tl : 0, Tg = m->cp ? m->cp->T : a->T;
    runs d[3] = {{0, NULL}, {0, NULL}, {0, NULL}};
    int ndim = width == MDC_I_W_NONE ? 2 : 3, bad = add_run(&d[0], 0, a->row0, a->B);
    for (int t = 0; t < Tloc && !bad; t++) bad = add_run(&d[1], t, m->cp ? m->cp->pos[pos0 + t] : pos0 + t, 1);
    int64_t gw = 0, lw = 0;
    switch (width) {
    case MDC_I_W_C: gw = lw = c->C, bad |= add_run(&d[2], 0, 0, c->C); break;
    case MDC_I_W_QKV: { /* this rank's q heads, then its kv heads' k and v (with tp > KV: a replica's) */
        int kv0, Q = c->H * s.d, KVd = mdc_i_kv_heads(c) * s.d, kvl = s.KVl * s.d;
        mdc_i_kv_local(c, m->part.tp, r, &kv0);
        gw = Q + 2 * KVd, lw = s.QKVl;
        bad |= add_run(&d[2], 0, r * s.Cl, s.Cl);
        bad |= add_run(&d[2], s.Cl, Q + kv0 * s.d, kvl);
        bad |= add_run(&d[2], s.Cl + kvl, Q + KVd + kv0 * s.d, kvl);
        break;
    }
    case MDC_I_W_HEADS: gw = c->H * s.d, lw = s.Cl, bad |= add_run(&d[2], 0, r * s.Cl, s.Cl); break;
    case MDC_I_W_FC: gw = mdc_i_ffn(c), lw = s.Fl, bad |= add_run(&d[2], 0, r * s.Fl, s.Fl); break;
    case MDC_I_W_KV: { /* this rank's kv heads (with tp > KV: a replica's) */
        int kv0;
        mdc_i_kv_local(c, m->part.tp, r, &kv0);
        gw = (int64_t)mdc_i_kv_heads(c) * s.d, lw = s.KVl * s.d, bad |= add_run(&d[2], 0, kv0 * s.d, s.KVl * s.d);
        break;
    }
    case MDC_I_W_E: gw = lw = c->E, bad |= add_run(&d[2], 0, 0, c->E); break;
    case MDC_I_W_KC: gw = lw = (int64_t)c->topk * c->C, bad |= add_run(&d[2], 0, 0, c->topk * c->C); break;
    case MDC_I_W_K:
    case MDC_I_W_KI: gw = lw = c->topk, bad |= add_run(&d[2], 0, 0, c->topk); break;
    case MDC_I_W_V: {
        int lo = r * s.Vl, valid = c->V - lo;
        gw = c->V, lw = s.Vl, bad |= add_run(&d[2], 0, lo, valid < 0 ? 0 : valid > s.Vl ? s.Vl : valid);
        break;
    }
    default: break;
    }
    mdc_status st = bad ? mdc_fail(MDC_ERR_OOM_HOST, "dump: a piece's map") : MDC_OK;
    const char *sn = mdc_i_tap_site_name(m, site);
    char where[96], global[192], name[224];
    if (unit >= 1 && unit <= c->L) snprintf(where, sizeof where, "%sh.%d.%s", bwd ? "grad." : "", unit - 1, sn);
    else snprintf(where, sizeof where, "%s%s", bwd ? "grad." : "", sn);
    snprintf(global, sizeof global, "step%d.%s%s", m->dump.step, where, pre ? ":pre" : "");
    snprintf(name, sizeof name, "step%d.mb%d.%s%s", m->dump.step, a->row0 / a->B, where, pre ? ":pre" : "");
    int64_t ls[3] = {a->B, Tloc, lw}, gs[3] = {m->dump.batch, Tg, gw};
    if (!st)
        st = add_entry(m->dump.tf, name, global, ndim, ls, gs, d, sum,
                       order_of(m->dump.step, c->L, bwd, unit, site, pre),
                       width == MDC_I_W_KI ? MDC_TD_I32 : MDC_TD_F32, x);
    for (int i = 0; i < 3; i++) free(d[i].r);
    return st;
}

mdc_status mdc_i_dump_tap(mdc_gpt2 *m, mdc_gpt2_acts *a, int unit, int site, int dir, int phase, const float *x) {
    int rows, sum;
    mdc_i_tap_layout(site, dir, phase, &rows, &sum);
    return dump(m, a, unit, dir == MDC_TAP_BWD, site, phase == MDC_TAP_PRE, sum, rows, mdc_i_tap_sites[site].width, x);
}

mdc_status mdc_i_dump_product(mdc_gpt2 *m, mdc_gpt2_acts *a, const mdc_i_linear *L, const float *inp) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    int K = L->K;
    float *y = malloc((size_t)s.n * s.C * sizeof *y);
    if (!y) return mdc_fail(MDC_ERR_OOM_HOST, "dump: the product of layer %d", L->l);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, L->wt ? CblasTrans : CblasNoTrans, s.n, s.C, K, 1.0f, inp, K, P(m, L->w),
                L->wt ? K : s.C, 0.0f, y, s.C);
    mdc_status st = mdc_i_dump_tap(m, a, 1 + L->l, L->site, MDC_TAP_FWD, MDC_TAP_POST, y);
    free(y);
    return st;
}

/* Local column k of tensor p -> its global column (COLS: the pieces), as runs over [c0, c0 + n). */
static int col_runs(const mdc_param_tensor *p, int last, int c0, int n, runs *d) {
    int w = p->split == MDC_SPLIT_COLS ? p->shape[last] / p->pieces : p->shape[last], bad = 0;
    for (int k = c0; k < c0 + n && !bad;) {
        int q = k / w, len = (q + 1) * w - k < c0 + n - k ? (q + 1) * w - k : c0 + n - k;
        int g = p->split == MDC_SPLIT_COLS ? p->col0 + q * p->pstride + k % w : k;
        bad = add_run(d, k - c0, g, len);
        k += len;
    }
    return bad;
}

/* The rectangle of local rows [r0, r0 + nr) x columns [c0, c0 + nc) of tensor p (data: its
 * first element) as one entry; part numbers the entries of one tensor. */
static mdc_status grad_rect(const mdc_gpt2 *m, mdc_tensorfile *tf, int step, const mdc_param_tensor *p,
                            const mdc_param_tensor *g, const float *data, int r0, int nr, int c0, int nc, int part) {
    int nd = p->ndim, bad = 0;
    runs d[2] = {{0, NULL}, {0, NULL}};
    int64_t ls[2] = {nd > 1 ? nr : nc, nc}, gs[2] = {g->shape[0], nd > 1 ? g->shape[1] : 0};
    if (nd > 1) bad |= add_run(&d[0], 0, (p->split == MDC_SPLIT_ROWS ? p->row0 : 0) + r0, nr);
    bad |= col_runs(p, nd - 1, c0, nc, &d[nd - 1]);
    char global[192], name[224], spelled[160];
    snprintf(global, sizeof global, "step%d.grad.%s", step, mdc_gpt2_spelled(m, g, spelled, sizeof spelled));
    snprintf(name, sizeof name, part ? "%s.part%d" : "%s", global, part);
    mdc_status st = bad ? mdc_fail(MDC_ERR_OOM_HOST, "dump: a gradient's map")
                        : add_entry(tf, name, global, nd, ls, gs, d, 0, order_of(step, 0, 2, 0, 0, 0) + p->global,
                                    MDC_TD_F32, data);
    for (int k = 0; k < 2; k++) free(d[k].r);
    return st;
}

mdc_status mdc_gpt2_dump_grad_piece(mdc_gpt2 *m, mdc_tensorfile *tf, int step, int i, const float *grad, size_t at,
                                    size_t n) {
    if (i < 0 || i >= m->ntensors) return mdc_fail(MDC_ERR_INVALID, "dump: local tensor %d of %d", i, m->ntensors);
    const mdc_param_tensor *p = &m->tensors[i];
    mdc_param_tensor g;
    mdc_status st = mdc_gpt2_tensor_at(&m->cfg, p->global, &g);
    size_t W = p->ndim > 1 ? (size_t)p->shape[1] : p->numel,
           e = at + n < p->numel ? at + n : p->numel; /* no padding rows */
    /* a flat run of a row-major tensor: a part of a row, whole rows, a part of a row */
    for (int part = 0; !st && at < e; part++) {
        size_t r = at / W, c = at % W, nc = c || e - at < W ? (e - at < W - c ? e - at : W - c) : W;
        size_t nr = c || nc < W ? 1 : (e - at) / W;
        st = grad_rect(m, tf, step, p, &g, grad, (int)r, (int)nr, (int)c, (int)nc, part);
        grad += nr * nc, at += nr * nc;
    }
    return st;
}

mdc_status mdc_gpt2_dump_grads(mdc_gpt2 *m, mdc_tensorfile *tf, int step) {
    const float *G = mdc_gpt2_grads(m);
    mdc_status st = G ? MDC_OK : mdc_fail(MDC_ERR_INVALID, "dump: no gradients yet (run a backward first)");
    for (int i = 0; !st && i < m->ntensors; i++)
        st = mdc_gpt2_dump_grad_piece(m, tf, step, i, G + m->tensors[i].offset, 0, m->tensors[i].numel);
    return st;
}
