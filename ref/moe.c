/* A MoE block's MLP (include/minidc/model.h, "mixture of experts"): the router, the top-k
 * choice, capacity and drops, the aux losses, dispatch to the experts, the experts, combine,
 * and the backward of all of it.
 *
 * Routing runs on the rank that holds the tokens. The kept assignments are laid out grouped
 * by expert (then by segment, then by token: the send buffer), moved to the experts' ranks by
 * the expert-parallel component's all-to-all (ref/ep.c; without it the send buffer is the
 * receive buffer), computed there, and moved back the same way; the backward moves gradients
 * along the same paths. A segment is a canonical block of exact mode (--exact-block positions
 * of one sequence; one segment per expert otherwise): each expert weight gradient is a float
 * sum over one segment's rows added into the exact sums, so every mesh gets serial's bits. */
#include <math.h>
#include <stdio.h>

#include "minidc/splitmix.h"
#include "model_internal.h"

typedef struct mdc_i_moe_state {
    int n, S, Tg;         /* local tokens, segments, tokens per routing group */
    float *probs, *lse;   /* n x E router probabilities; n logsumexp(z) */
    int *choice, *row;    /* n x k: chosen experts (slot order); row in the send buffer, -1 dropped */
    float *gate;          /* n x k gate weights */
    int *scnt, *rcnt;     /* E x S rows sent per (expert, segment); e x El x S received per (source,
                             local expert, segment) */
    int A, R;             /* rows sent, rows received */
    float *xs, *ys;       /* A x C dispatched inputs; the expert outputs back (source side) */
    float *xr, *h, *u;    /* R x C received inputs; R x 4C before and after GELU (expert side) */
    float *fbuf, *vbuf;   /* the device allocations behind them: per token, per row */
    float *f_aux;         /* E: each expert's share f_i per group (n/T groups x E) */
} moe_state;

mdc_status mdc_gpt2_set_moe(mdc_gpt2 *m, const mdc_moe_opts *o) {
    if (o->capacity_factor < 0 || !isfinite(o->capacity_factor))
        return mdc_fail(MDC_ERR_INVALID, "--capacity-factor %g: 0 (dropless) or positive", o->capacity_factor);
    if (o->aux_alpha < 0 || o->z_beta < 0 || !isfinite(o->aux_alpha) || !isfinite(o->z_beta))
        return mdc_fail(MDC_ERR_INVALID, "--moe-aux-loss %g --moe-z-loss %g: must be 0 or positive", o->aux_alpha,
                        o->z_beta);
    m->moe.o = *o;
    return MDC_OK;
}
const mdc_moe_opts *mdc_gpt2_get_moe(const mdc_gpt2 *m) { return &m->moe.o; }
void mdc_gpt2_set_moe_scale(mdc_gpt2 *m, float dloss) { m->moe.dloss = dloss; }
mdc_status mdc_gpt2_set_ep(mdc_gpt2 *m, const mdc_gpt2_ep *ep) {
    int e = m->part.ep > 1 ? m->part.ep : 1;
    if (ep && ep->e != e)
        return mdc_fail(MDC_ERR_INVALID, "expert parallelism over %d ranks on a partition of --ep %d", ep->e, e);
    if (!ep && e > 1) return mdc_fail(MDC_ERR_INVALID, "--ep %d: the partition needs its all-to-all", e);
    m->moe.ep = ep;
    return MDC_OK;
}
void mdc_gpt2_moe_stats(const mdc_gpt2 *m, mdc_moe_stats *s) { *s = m->moe.st; }
int mdc_gpt2_moe_blocks(const mdc_gpt2_config *cfg) { return mdc_i_moe_before(cfg, cfg->L); }
float *mdc_gpt2_moe_bias(mdc_gpt2 *m) { return m->moe.bias; }
const double *mdc_gpt2_moe_counts(const mdc_gpt2 *m) { return m->moe.counts; }

mdc_status mdc_i_moe_alloc(mdc_gpt2 *m) {
    size_t n = (size_t)mdc_gpt2_moe_blocks(&m->cfg) * m->cfg.E;
    if (!n) return MDC_OK;
    m->moe.bias = calloc(n, sizeof(float)), m->moe.counts = calloc(n, sizeof(double));
    return m->moe.bias && m->moe.counts ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "the MoE blocks' biases");
}

void mdc_gpt2_moe_bias_update(mdc_gpt2 *m, const double *c) {
    int E = m->cfg.E, nb = mdc_gpt2_moe_blocks(&m->cfg);
    float g = m->moe.o.bias_rate;
    for (int b = 0; b < nb; b++) {
        double mean = 0;
        for (int i = 0; i < E; i++) mean += c[(size_t)b * E + i];
        mean /= E;
        for (int i = 0; i < E; i++) {
            double d = mean - c[(size_t)b * E + i];
            m->moe.bias[(size_t)b * E + i] += d > 0 ? g : d < 0 ? -g : 0.0f;
        }
    }
}
const mdc_exact *mdc_gpt2_moe_exact_loss(const mdc_gpt2 *m) { return &m->moe.xloss; }

void mdc_i_moe_free(mdc_gpt2_acts *a, int l) {
    moe_state *q = a->moe ? a->moe[l - a->lo] : NULL;
    if (!q) return;
    mdc_dev_free(a->dev, q->fbuf), mdc_dev_free(a->dev, q->vbuf);
    free(q->choice), free(q);
    a->moe[l - a->lo] = NULL;
}

/* softmax over E with the row's logsumexp (fp32, one pass order) */
static void router_softmax(mdc_device *d, float *p, float *lse, int n, int E) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        float *r = p + (size_t)t * E, mx = r[0], s = 0;
        for (int i = 1; i < E; i++) mx = r[i] > mx ? r[i] : mx;
        for (int i = 0; i < E; i++) r[i] = expf(r[i] - mx), s += r[i];
        for (int i = 0; i < E; i++) r[i] /= s;
        lse[t] = mx + logf(s);
    }
    mdc_dev_kernel(d, 5.0 * n * E, 8.0 * n * E, MDC_PREC_FP32);
}

/* The kept flags of one group (its tokens [t0, t0 + T)): capacity per expert, by priority or by
 * probability. keep[t k + s] on entry 1 for every assignment. */
static void capacity(const mdc_gpt2 *m, const moe_state *q, int t0, int T, char *keep) {
    int E = m->cfg.E, k = m->cfg.topk;
    int cap = (int)ceil((double)k * T * m->moe.o.capacity_factor / E);
    int used[MDC_GPT2_MAX_EXPERTS] = {0};
    if (!m->moe.o.drop_probs) {
        for (int s = 0; s < k; s++)
            for (int t = t0; t < t0 + T; t++) {
                int j = q->choice[(size_t)t * k + s];
                keep[(size_t)t * k + s] = used[j] < cap;
                used[j] += used[j] < cap;
            }
        return;
    }
    /* per expert: its assignments by p descending, ties to the earlier position; keep cap */
    for (int j = 0; j < E; j++) {
        for (int kept = 0; kept < cap; kept++) {
            int best = -1;
            float bp = -1;
            for (int t = t0; t < t0 + T; t++)
                for (int s = 0; s < k; s++)
                    if (q->choice[(size_t)t * k + s] == j && keep[(size_t)t * k + s] == 1 &&
                        q->probs[(size_t)t * E + j] > bp)
                        best = t * k + s, bp = q->probs[(size_t)t * E + j];
            if (best < 0) break;
            keep[best] = 2; /* kept */
        }
        for (int t = t0; t < t0 + T; t++)
            for (int s = 0; s < k; s++)
                if (q->choice[(size_t)t * k + s] == j) keep[(size_t)t * k + s] = keep[(size_t)t * k + s] == 2;
    }
}

/* The received rows, grouped by (source, local expert, segment): body runs for each
 * non-empty group with src, jl, sg, r0 (its first row) and nr (its rows). */
#define FOR_SEGMENTS(q, e, El, ...)                                                                \
    do {                                                                                           \
        int row_ = 0;                                                                              \
        for (int src = 0; src < (e); src++)                                                        \
            for (int jl = 0; jl < (El); jl++)                                                      \
                for (int sg = 0; sg < (q)->S; sg++) {                                              \
                    int r0 = row_, nr = (q)->rcnt[((size_t)src * (El) + jl) * (q)->S + sg];        \
                    row_ += nr;                                                                    \
                    if (nr) { __VA_ARGS__ }                                                        \
                }                                                                                  \
    } while (0)
/* The same rows by (source, local expert): one expert's rows from one source, contiguous. */
#define FOR_BLOCKS(q, e, El, ...)                                                                  \
    do {                                                                                           \
        int row_ = 0;                                                                              \
        for (int src = 0; src < (e); src++)                                                        \
            for (int jl = 0; jl < (El); jl++) {                                                    \
                int r0 = row_, nr = 0;                                                             \
                for (int sg = 0; sg < (q)->S; sg++) nr += (q)->rcnt[((size_t)src * (El) + jl) * (q)->S + sg]; \
                row_ += nr;                                                                        \
                if (nr) { __VA_ARGS__ }                                                            \
            }                                                                                      \
    } while (0)

/* Rows per rank of the send (expert-major counts) or receive (source-major) layout. */
static void rows_per_rank(const int *cnt, int e, int per, int *rows) {
    for (int r = 0; r < e; r++) {
        rows[r] = 0;
        for (int i = 0; i < per; i++) rows[r] += cnt[(size_t)r * per + i];
    }
}

/* dir 0: send layout -> receive layout (dispatch); 1: back (combine). */
static mdc_status exchange(mdc_gpt2 *m, const moe_state *q, const float *from, float *to, int width, int dir) {
    const mdc_gpt2_ep *ep = m->moe.ep;
    int e = ep->e, per = m->cfg.E / e * q->S;
    int *rows = malloc(2 * sizeof(int) * (size_t)e);
    if (!rows) return mdc_fail(MDC_ERR_OOM_HOST, "MoE exchange");
    rows_per_rank(q->scnt, e, per, rows);
    rows_per_rank(q->rcnt, e, per, rows + e);
    mdc_status st = dir ? ep->rows(ep->ctx, from, rows + e, to, rows, width) : ep->rows(ep->ctx, from, rows, to, rows + e, width);
    free(rows);
    return st;
}

static mdc_status route(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, moe_state **out);

mdc_status mdc_i_moe_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, float *out) {
    mdc_i_moe_free(a, l);
    moe_state *q;
    TRY(route(m, a, l, x, &q));
    mdc_device *d = m->dev;
    int C = m->cfg.C, F = 4 * C, k = m->cfg.topk, e = m->moe.ep ? m->moe.ep->e : 1, El = m->cfg.E / e;
    int j0 = (m->moe.ep ? m->moe.ep->rank : 0) * El;
    float *yr = q->ys; /* serial: the experts write the combine's input directly */
    if (m->moe.ep) TRY(mdc_dev_alloc(d, (void **)&yr, (size_t)q->R * C * sizeof(float) + 4, MDC_MEM_ACTS, "MoE expert outputs"));
    FOR_BLOCKS(q, e, El, {
        int j = j0 + jl;
        mm_forward(m, q->h + (size_t)r0 * F, q->xr + (size_t)r0 * C, P(m, mdc_i_gl(&m->cfg, l, mdc_i_expert_k(j, X_FCW))),
                   P(m, mdc_i_gl(&m->cfg, l, mdc_i_expert_k(j, X_FCB))), nr, C, F);
        mdc_gelu_forward(d, q->u + (size_t)r0 * F, q->h + (size_t)r0 * F, (size_t)nr * F);
        mm_forward(m, yr + (size_t)r0 * C, q->u + (size_t)r0 * F, P(m, mdc_i_gl(&m->cfg, l, mdc_i_expert_k(j, X_FCPW))),
                   P(m, mdc_i_gl(&m->cfg, l, mdc_i_expert_k(j, X_FCPB))), nr, F, C);
    });
    if (m->moe.ep) { /* back to the tokens' ranks: the reverse of the dispatch */
        mdc_status st = exchange(m, q, yr, q->ys, C, 1);
        mdc_dev_free(d, yr);
        TRY(st);
    }
    /* combine: each token's kept outputs weighted by its gates, in slot order */
    int n = q->n;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        float *o = out + (size_t)t * C;
        for (int c = 0; c < C; c++) o[c] = 0;
        for (int s = 0; s < k; s++) {
            int r = q->row[(size_t)t * k + s];
            if (r < 0) continue;
            float g = q->gate[(size_t)t * k + s];
            const float *y = q->ys + (size_t)r * C;
            for (int c = 0; c < C; c++) o[c] += g * y[c];
        }
    }
    mdc_dev_kernel(d, 2.0 * q->A * C, 4.0 * (q->A + n) * C, MDC_PREC_FP32);
    return MDC_OK;
}

/* The router, the choice, capacity, the aux terms and the dispatch of one MoE block. */
static mdc_status route(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, moe_state **out) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_moe_opts *o = &m->moe.o;
    int n = s.nl, C = m->cfg.C, F = 4 * C, E = m->cfg.E, k = m->cfg.topk, Tg = s.Tl, G = n / Tg;
    int e = m->moe.ep ? m->moe.ep->e : 1, blk = m->x.blk, S = blk ? n / blk : 1;
    int Tseq = m->cp ? m->cp->T : a->T; /* the whole sequence: a routing group */
    if ((o->capacity_factor > 0 || o->aux_alpha > 0) && Tg != Tseq)
        return mdc_fail(MDC_ERR_INVALID, "--capacity-factor and --moe-aux-loss route a whole sequence as one group; "
                        "this rank holds %d of its %d positions (--sp or --cp): use them without --sp/--cp", Tg, Tseq);
    moe_state *q = calloc(1, sizeof *q);
    if (!q) return mdc_fail(MDC_ERR_OOM_HOST, "MoE block %d", l);
    a->moe[l - a->lo] = q;
    q->n = n, q->S = S, q->Tg = Tg;
    size_t nk = (size_t)n * k;
    q->choice = malloc(sizeof(int) * (2 * nk + 2 * (size_t)E * S) + nk + sizeof(float) * (size_t)G * E);
    if (!q->choice) return mdc_fail(MDC_ERR_OOM_HOST, "MoE block %d: routing tables", l);
    q->row = q->choice + nk, q->scnt = q->row + nk, q->rcnt = q->scnt + (size_t)E * S;
    q->f_aux = (float *)(q->rcnt + (size_t)E * S);
    char *keep = (char *)(q->f_aux + (size_t)G * E), name[48];
    size_t fixed = (size_t)n * E + n + nk;
    snprintf(name, sizeof name, "MoE block %d routing", l);
    TRY(mdc_dev_alloc(d, (void **)&q->fbuf, fixed * sizeof(float), MDC_MEM_ACTS, name));
    q->probs = q->fbuf, q->lse = q->probs + (size_t)n * E, q->gate = q->lse + n;
    /* router: z = x W_r, p = softmax(z) */
    mm_forward(m, q->probs, x, P(m, mdc_i_gl(&m->cfg, l, ROUTERW)), NULL, n, C, E);
    router_softmax(d, q->probs, q->lse, n, E);
    const float *bias = m->moe.bias + (size_t)mdc_i_moe_before(&m->cfg, l) * E;
    double *cnt = m->moe.counts + (size_t)mdc_i_moe_before(&m->cfg, l) * E;
    for (int t = 0; t < n; t++) { /* the top k by p + bias, ties to the lower index; the gates from p */
        const float *p = q->probs + (size_t)t * E;
        int *ch = q->choice + (size_t)t * k;
        float sum = 0;
        for (int r = 0; r < k; r++) {
            int best = -1;
            for (int i = 0; i < E; i++) {
                int taken = 0;
                for (int u = 0; u < r; u++) taken |= ch[u] == i;
                if (!taken && (best < 0 || p[i] + bias[i] > p[best] + bias[best])) best = i;
            }
            ch[r] = best, sum += p[best];
            m->moe.st.tokens[best] += 1, cnt[best] += 1;
        }
        for (int r = 0; r < k; r++) q->gate[(size_t)t * k + r] = o->renorm ? p[ch[r]] / sum : p[ch[r]];
        float z = o->z_beta * q->lse[t] * q->lse[t];
        if (o->z_beta > 0) m->moe.st.z_sum += z, a->moe_loss += z, mdc_exact_add_f32(&m->moe.xloss, z);
    }
    memset(keep, 1, nk);
    for (int g = 0; g < G; g++) { /* per group: the aux loss's f_i and P_i, then capacity */
        float *f = q->f_aux + (size_t)g * E, aux = 0;
        for (int i = 0; i < E; i++) f[i] = 0;
        for (int t = g * Tg; t < (g + 1) * Tg; t++)
            for (int r = 0; r < k; r++) f[q->choice[(size_t)t * k + r]] += 1;
        for (int i = 0; i < E; i++) {
            float Pi = 0;
            f[i] /= (float)k * Tg;
            for (int t = g * Tg; t < (g + 1) * Tg; t++) Pi += q->probs[(size_t)t * E + i];
            aux += f[i] * (Pi / Tg);
        }
        aux = (float)Tg * (o->aux_alpha * E * aux); /* the group's T x alpha E sum f_i P_i */
        if (o->aux_alpha > 0) m->moe.st.aux_sum += aux, mdc_exact_add_f32(&m->moe.xloss, aux);
        a->moe_loss += (double)aux;
        if (o->capacity_factor > 0) capacity(m, q, g * Tg, Tg, keep);
    }
    /* invariants: no expert over its capacity in a group; the decisions' digest */
    int cap = (int)ceil((double)k * Tg * o->capacity_factor / E), pos0 = m->part.sp ? m->part.tp_rank * Tg : 0;
    for (int g = 0; g < G && o->capacity_factor > 0; g++) {
        int used[MDC_GPT2_MAX_EXPERTS] = {0};
        for (size_t i = (size_t)g * Tg * k; i < (size_t)(g + 1) * Tg * k; i++) used[q->choice[i]] += keep[i];
        for (int j = 0; j < E; j++)
            if (used[j] > cap)
                return mdc_fail(MDC_ERR_MISMATCH, "MoE block %d: expert %d kept %d assignments of a sequence, over its "
                                "capacity %d", l, j, used[j], cap);
    }
    for (int t = 0; t < n; t++) {
        int p = t % Tg, gp = m->cp ? m->cp->pos[p] : pos0 + p;
        for (int r = 0; r < k; r++) {
            uint64_t key = ((((uint64_t)(a->row0 + t / Tg) * 1048576u + (uint64_t)gp) * 16u + (uint64_t)r) * 4096u +
                            (uint64_t)q->choice[(size_t)t * k + r]) * 2u + (uint64_t)keep[(size_t)t * k + r];
            m->moe.st.digest += (double)(mdc_splitmix64(key ^ (uint64_t)l << 56) >> 44);
        }
    }
    /* the send layout: expert-major, then segment, then token */
    memset(q->scnt, 0, sizeof(int) * (size_t)E * S);
    for (int t = 0; t < n; t++)
        for (int r = 0; r < k; r++) {
            if (!keep[(size_t)t * k + r]) { m->moe.st.dropped += 1; continue; }
            q->scnt[(size_t)q->choice[(size_t)t * k + r] * S + (blk ? t / blk : 0)]++;
        }
    int *off = malloc(sizeof(int) * (size_t)E * S);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "MoE block %d: routing tables", l);
    for (int i = 0, sum = 0; i < E * S; i++) off[i] = sum, sum += q->scnt[i], q->A = sum;
    for (int t = 0; t < n; t++)
        for (int r = 0; r < k; r++) {
            size_t i = (size_t)t * k + r;
            q->row[i] = keep[i] ? off[(size_t)q->choice[i] * S + (blk ? t / blk : 0)]++ : -1;
        }
    free(off);
    mdc_status st = MDC_OK;
    if (m->moe.ep) st = m->moe.ep->counts(m->moe.ep->ctx, q->scnt, q->rcnt, E / e * S);
    else memcpy(q->rcnt, q->scnt, sizeof(int) * (size_t)E * S);
    if (st) return st;
    for (int i = 0; i < E * S; i++) q->R += q->rcnt[i];
    /* the rows: xs and ys here; xr (its own only with ep), h and u on the experts' side */
    size_t A = (size_t)q->A, R = (size_t)q->R, vb = 2 * A * C + (m->moe.ep ? R * C : 0) + 2 * R * F;
    snprintf(name, sizeof name, "MoE block %d rows", l);
    TRY(mdc_dev_alloc(d, (void **)&q->vbuf, (vb + 4) * sizeof(float), MDC_MEM_ACTS, name));
    q->xs = q->vbuf, q->ys = q->xs + A * C, q->xr = m->moe.ep ? q->ys + A * C : q->xs;
    q->h = q->vbuf + 2 * A * C + (m->moe.ep ? R * C : 0), q->u = q->h + R * F;
    for (int t = 0; t < n; t++)
        for (int r = 0; r < k; r++)
            if (q->row[(size_t)t * k + r] >= 0)
                memcpy(q->xs + (size_t)q->row[(size_t)t * k + r] * C, x + (size_t)t * C, sizeof(float) * C);
    mdc_dev_kernel(d, 0, 8.0 * A * C, MDC_PREC_FP32);
    if (m->moe.ep) TRY(exchange(m, q, q->xs, q->xr, C, 0));
    *out = q;
    return MDC_OK;
}

/* dz (n x E): the gates' gradient through the renormalization and the softmax, with the aux
 * loss's (alpha E f_i per p_i, times the loss scale) and the z-loss's (2 beta lse p_i). */
static void router_grad(const mdc_gpt2 *m, const moe_state *q, const float *dgate, float *dz) {
    const mdc_moe_opts *o = &m->moe.o;
    int n = q->n, E = m->cfg.E, k = m->cfg.topk;
    float scale = m->moe.dloss, aux = o->aux_alpha * (float)E * scale;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        const float *p = q->probs + (size_t)t * E, *f = q->f_aux + (size_t)(t / q->Tg) * E;
        const int *ch = q->choice + (size_t)t * k;
        const float *dg = dgate + (size_t)t * k, *g = q->gate + (size_t)t * k;
        float *dp = dz + (size_t)t * E, dot = 0;
        for (int i = 0; i < E; i++) dp[i] = o->aux_alpha > 0 ? aux * f[i] : 0;
        if (o->renorm) { /* g_r = p_r / sum: dp_r = (dg_r - sum_u dg_u g_u) / sum */
            float sum = 0, gd = 0;
            for (int r = 0; r < k; r++) sum += p[ch[r]], gd += dg[r] * g[r];
            for (int r = 0; r < k; r++) dp[ch[r]] += (dg[r] - gd) / sum;
        } else {
            for (int r = 0; r < k; r++) dp[ch[r]] += dg[r];
        }
        for (int i = 0; i < E; i++) dot += p[i] * dp[i];
        float zl = 2.0f * o->z_beta * q->lse[t] * scale;
        for (int i = 0; i < E; i++) dp[i] = p[i] * (dp[i] - dot) + (o->z_beta > 0 ? zl * p[i] : 0);
    }
    mdc_dev_kernel(m->dev, 8.0 * n * E, 12.0 * n * E, MDC_PREC_FP32);
}

mdc_status mdc_i_moe_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *dout, float *dx) {
    moe_state *q = a->moe ? a->moe[l - a->lo] : NULL;
    if (!q) return mdc_fail(MDC_ERR_INVALID, "block_backward: MoE block %d has no forward state", l);
    mdc_device *d = m->dev;
    const mdc_gpt2_config *c = &m->cfg;
    int n = q->n, C = c->C, F = 4 * C, E = c->E, k = c->topk, e = m->moe.ep ? m->moe.ep->e : 1, El = E / e;
    int j0 = (m->moe.ep ? m->moe.ep->rank : 0) * El;
    size_t A = (size_t)q->A, R = (size_t)q->R, nk = (size_t)n * k;
    float *tmp;
    /* dgate, dz; dyr (ep), du, dh, dxr */
    size_t tn = nk + (size_t)n * E + (m->moe.ep ? R * C : 0) + 2 * R * F + R * C;
    TRY(mdc_dev_alloc(d, (void **)&tmp, (tn + 4) * sizeof(float), MDC_MEM_ACTS, "MoE backward"));
    float *dgate = tmp, *dz = dgate + nk, *dyr = dz + (size_t)n * E, *du = dyr + (m->moe.ep ? R * C : 0);
    float *dh = du + R * F, *dxr = dh + R * F;
    /* the gates' gradient, then dys = gate x dout in place of ys */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++)
        for (int r = 0; r < k; r++) {
            int row = q->row[(size_t)t * k + r];
            float acc = 0, g = q->gate[(size_t)t * k + r];
            const float *o = dout + (size_t)t * C;
            float *y = row >= 0 ? q->ys + (size_t)row * C : NULL;
            if (y) {
                for (int i = 0; i < C; i++) acc += o[i] * y[i];
                for (int i = 0; i < C; i++) y[i] = g * o[i];
            }
            dgate[(size_t)t * k + r] = acc;
        }
    mdc_dev_kernel(d, 3.0 * A * C, 12.0 * A * C, MDC_PREC_FP32);
    mdc_status st = MDC_OK;
    if (m->moe.ep) st = exchange(m, q, q->ys, dyr, C, 0);
    else dyr = q->ys;
    int blk = m->x.blk;
    memset(du, 0, 2 * R * F * sizeof(float));
    memset(dxr, 0, R * C * sizeof(float));
    if (!st) FOR_BLOCKS(q, e, El, {
        int j = j0 + jl;
        size_t gp = (size_t)mdc_i_gl(c, l, mdc_i_expert_k(j, X_FCPW)), gf = (size_t)mdc_i_gl(c, l, mdc_i_expert_k(j, X_FCW));
        float *dyb = dyr + (size_t)r0 * C, *dub = du + (size_t)r0 * F, *dhb = dh + (size_t)r0 * F;
        mm_dinput(m, dub, dyb, P(m, (int)gp), nr, F, C);
        mdc_gelu_backward(d, dhb, q->h + (size_t)r0 * F, dub, (size_t)nr * F);
        if (!blk) {
            mdc_matmul_backward(d, NULL, G(m, (int)gp), G(m, (int)gp + 1), dyb, q->u + (size_t)r0 * F, NULL, nr, F, C);
            mdc_matmul_backward(d, NULL, G(m, (int)gf), G(m, (int)gf + 1), dhb, q->xr + (size_t)r0 * C, NULL, nr, C, F);
        }
        mm_dinput(m, dxr + (size_t)r0 * C, dhb, P(m, (int)gf), nr, C, F);
    });
    if (!st && blk) FOR_SEGMENTS(q, e, El, { /* exact: one float sum per segment, added exactly */
        int j = j0 + jl;
        size_t gp = (size_t)mdc_i_gl(c, l, mdc_i_expert_k(j, X_FCPW)), gf = (size_t)mdc_i_gl(c, l, mdc_i_expert_k(j, X_FCW));
        const float *dyb = dyr + (size_t)r0 * C, *dhb = dh + (size_t)r0 * F;
        mdc_x_wgrad(d, &m->x.g, mdc_i_xoff(m, (int)gp), q->u + (size_t)r0 * F, F, dyb, C, nr, F, C, nr);
        mdc_x_colsum(d, &m->x.g, mdc_i_xoff(m, (int)gp + 1), dyb, C, nr, C, nr);
        mdc_x_wgrad(d, &m->x.g, mdc_i_xoff(m, (int)gf), q->xr + (size_t)r0 * C, C, dhb, F, nr, C, F, nr);
        mdc_x_colsum(d, &m->x.g, mdc_i_xoff(m, (int)gf + 1), dhb, F, nr, F, nr);
    });
    /* dxs back on the tokens' ranks (into ys: dys is spent) */
    float *dxs = dxr;
    if (!st && m->moe.ep) st = exchange(m, q, dxr, q->ys, C, 1), dxs = q->ys;
    if (!st) {
        const float *x = lact(a, a->lay.ln2, l);
        int gr = mdc_i_gl(c, l, ROUTERW);
        router_grad(m, q, dgate, dz);
        if (blk) mdc_x_wgrad(d, &m->x.g, mdc_i_xoff(m, gr), x, C, dz, E, n, C, E, blk);
        else mdc_matmul_backward(d, NULL, G(m, gr), NULL, dz, x, NULL, n, C, E);
        memset(dx, 0, (size_t)n * C * sizeof(float));
        mm_dinput(m, dx, dz, P(m, gr), n, C, E);
#pragma omp parallel for schedule(static)
        for (int t = 0; t < n; t++)
            for (int r = 0; r < k; r++) {
                int row = q->row[(size_t)t * k + r];
                if (row < 0) continue;
                const float *g = dxs + (size_t)row * C;
                float *o = dx + (size_t)t * C;
                for (int i = 0; i < C; i++) o[i] += g[i];
            }
        mdc_dev_kernel(d, 1.0 * A * C, 8.0 * (A + n) * C, MDC_PREC_FP32);
    }
    mdc_dev_free(d, tmp);
    mdc_i_moe_free(a, l);
    return st;
}
