/* The router of a MoE block (include/minidc/model.h, "mixture of experts"): the options, the
 * softmax, the top-k choice (with the aux-loss-free bias), capacity and drops, the aux and z
 * terms, the invariants and the send layout's counts; the gates' and losses' gradient through the
 * softmax; the bias update. Dispatch, the experts and combine: ref/model/moe/moe.c. */
#include <math.h>
#include <stdio.h>

#include "minidc/numerics.h"
#include "minidc/splitmix.h"
#include "moe_internal.h"

mdc_status mdc_gpt2_set_moe(mdc_gpt2 *m, const mdc_moe_opts *o) {
    if (o->capacity_factor < 0 || !isfinite(o->capacity_factor))
        return mdc_fail(MDC_ERR_INVALID, "--capacity-factor %g: 0 (dropless) or positive", o->capacity_factor);
    if (o->aux_alpha < 0 || o->z_beta < 0 || !isfinite(o->aux_alpha) || !isfinite(o->z_beta))
        return mdc_fail(MDC_ERR_INVALID, "--moe-aux-loss %g --moe-z-loss %g: must be 0 or positive", o->aux_alpha,
                        o->z_beta);
    if (mdc_i_family(&m->cfg) && o->renorm && !m->cfg.moe_renorm)
        return mdc_fail(MDC_ERR_INVALID, "--moe-renorm: the %s config decides (norm_topk_prob false)",
                        mdc_gpt2_family_name(m->cfg.family));
    m->moe.o = *o;
    if (mdc_i_family(&m->cfg)) m->moe.o.renorm = m->cfg.moe_renorm; /* Mixtral always, Qwen3-MoE norm_topk_prob */
    return MDC_OK;
}
void mdc_gpt2_set_moe_scale(mdc_gpt2 *m, float dloss) { m->moe.dloss = dloss; }
int mdc_gpt2_moe_balanced(const mdc_gpt2 *m) { return m->moe.o.balanced; }
mdc_status mdc_gpt2_set_ep(mdc_gpt2 *m, const mdc_gpt2_ep *ep) {
    int e = m->part.ep > 1 ? m->part.ep : 1;
    if (ep && ep->e != e)
        return mdc_fail(MDC_ERR_INVALID, "expert parallelism over %d ranks on a partition of --ep %d", ep->e, e);
    if (!ep && e > 1) return mdc_fail(MDC_ERR_INVALID, "--ep %d: the partition needs its all-to-all", e);
    m->moe.ep = ep;
    return MDC_OK;
}
mdc_status mdc_gpt2_set_etp(mdc_gpt2 *m, const mdc_gpt2_etp *etp) {
    int n = m->part.etp > 1 ? m->part.etp : 1;
    if (etp && etp->n != n)
        return mdc_fail(MDC_ERR_INVALID, "expert tensor parallelism over %d ranks on a partition of --etp %d", etp->n,
                        n);
    m->moe.etp = etp;
    return MDC_OK;
}
void mdc_gpt2_moe_stats(const mdc_gpt2 *m, mdc_moe_stats *s) { *s = m->moe.st; }
int mdc_gpt2_moe_blocks(const mdc_gpt2_config *cfg) { return mdc_i_moe_before(cfg, cfg->L); }
int mdc_gpt2_moe_index(const mdc_gpt2_config *cfg, int l) {
    return l >= 0 && l < cfg->L && mdc_i_is_moe(cfg, l) ? mdc_i_moe_before(cfg, l) : -1;
}
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

/* softmax over E with the row's logsumexp (fp32, one pass order) */
static void router_softmax(mdc_device *d, float *p, float *lse, int n, int E) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        float *r = p + (size_t)t * E, mx = r[0], s = 0;
        for (int i = 1; i < E; i++) mx = r[i] > mx ? r[i] : mx;
        for (int i = 0; i < E; i++) r[i] = mdc_expf(r[i] - mx), s += r[i];
        for (int i = 0; i < E; i++) r[i] /= s;
        lse[t] = mx + mdc_logf(s);
    }
    mdc_dev_kernel(d, 5.0 * n * E, 8.0 * n * E, MDC_PREC_FP32);
}

/* s = sigmoid(z) of the logits in z (n x E), minidc's own exp: the same bits on every machine */
static void router_sigmoid(mdc_device *d, float *s, const float *z, int n, int E) {
    size_t N = (size_t)n * E;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) s[i] = 1.0f / (1.0f + mdc_expf(-z[i]));
    mdc_dev_kernel(d, 4.0 * N, 8.0 * N, MDC_PREC_FP32);
}

void mdc_i_moe_top_k(const float *v, int E, int k, int *ch) {
    for (int r = 0; r < k; r++) {
        int best = -1;
        for (int i = 0; i < E; i++) {
            int taken = 0;
            for (int u = 0; u < r; u++) taken |= ch[u] == i;
            if (!taken && (best < 0 || v[i] > v[best])) best = i;
        }
        ch[r] = best;
    }
}

/* One token's choice ch (k) and gates g (k). Softmax: the top k of p + bias, gates p
 * (renormalized). Sigmoid (DeepSeek-V3): v = s + bias; with groups, each scored by its two
 * best v, the topk_group best groups kept (ties to the lower group) and every other expert's v
 * set to 0 (as transformers' masked_fill); the top k of v; gates s, renormalized over
 * (their sum + 1e-20), times routed_scale. */
static void route_token(const mdc_gpt2_config *c, int renorm, const float *p, const float *s, const float *bias,
                        long long balanced, int *ch, float *g) {
    int E = c->E, k = c->topk;
    const float *w = s ? s : p;
    float v[MDC_GPT2_MAX_EXPERTS], sum = 0;
    for (int i = 0; i < E; i++) v[i] = w[i] + bias[i];
    if (s && c->n_group > 1) {
        int G = c->n_group, per = E / G, kept[MDC_GPT2_MAX_EXPERTS];
        float gs[MDC_GPT2_MAX_EXPERTS];
        for (int j = 0; j < G; j++) {
            int two[2];
            mdc_i_moe_top_k(v + j * per, per, 2, two);
            gs[j] = v[j * per + two[0]] + v[j * per + two[1]];
        }
        mdc_i_moe_top_k(gs, G, c->topk_group, kept);
        char on[MDC_GPT2_MAX_EXPERTS] = {0};
        for (int r = 0; r < c->topk_group; r++) on[kept[r]] = 1;
        for (int i = 0; i < E; i++)
            if (!on[i / per]) v[i] = 0.0f;
    }
    if (balanced >= 0) /* mdc_moe_opts.balanced: token g's experts (g k + r) mod E */
        for (int r = 0; r < k; r++) ch[r] = (int)((balanced * k + r) % E);
    else mdc_i_moe_top_k(v, E, k, ch);
    for (int r = 0; r < k; r++) sum += w[ch[r]];
    if (s) sum += 1e-20f;
    for (int r = 0; r < k; r++) {
        g[r] = renorm ? w[ch[r]] / sum : w[ch[r]];
        if (s) g[r] *= c->routed_scale;
    }
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
    const float *sc = q->score ? q->score : q->probs; /* the router's scores: p, or DeepSeek's s */
    /* per expert: its assignments by score descending, ties to the earlier position; keep cap */
    for (int j = 0; j < E; j++) {
        for (int kept = 0; kept < cap; kept++) {
            int best = -1;
            float bp = -1;
            for (int t = t0; t < t0 + T; t++)
                for (int s = 0; s < k; s++)
                    if (q->choice[(size_t)t * k + s] == j && keep[(size_t)t * k + s] == 1 && sc[(size_t)t * E + j] > bp)
                        best = t * k + s, bp = sc[(size_t)t * E + j];
            if (best < 0) break;
            keep[best] = 2; /* kept */
        }
        for (int t = t0; t < t0 + T; t++)
            for (int s = 0; s < k; s++)
                if (q->choice[(size_t)t * k + s] == j) keep[(size_t)t * k + s] = keep[(size_t)t * k + s] == 2;
    }
}
/* The router, the choice, capacity, the aux terms and the dispatch of one MoE block. */
mdc_status mdc_i_moe_route(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, moe_state **out) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_device *d = m->dev;
    const mdc_moe_opts *o = &m->moe.o;
    int n = s.nl, C = m->cfg.C, E = m->cfg.E, k = m->cfg.topk, Tg = s.Tl, G = n / Tg;
    int e = m->moe.ep ? m->moe.ep->e : 1, blk = m->ops->grad_block, S = blk ? n / blk : 1;
    int Tseq = m->cp ? m->cp->T : a->T; /* the whole sequence: a routing group */
    if ((o->capacity_factor > 0 || o->aux_alpha > 0) && Tg != Tseq)
        return mdc_fail(MDC_ERR_INVALID,
                        "--capacity-factor and --moe-aux-loss route a whole sequence as one group; "
                        "this rank holds %d of its %d positions (--sp or --cp): use them without --sp/--cp",
                        Tg, Tseq);
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
    /* the counting forward and a recomputed forward record nothing */
    int sig = m->cfg.router == MDC_ROUTER_SIGMOID, rec = !m->moe.counting && !m->rc.active;
    size_t fixed = (size_t)n * E * (sig ? 2 : 1) + n + nk;
    snprintf(name, sizeof name, "MoE block %d routing", l);
    TRY(mdc_dev_alloc(d, (void **)&q->fbuf, fixed * sizeof(float), MDC_MEM_ACTS, name));
    q->probs = q->fbuf, q->lse = q->probs + (size_t)n * E, q->gate = q->lse + n;
    q->score = sig ? q->gate + nk : NULL;
    /* router: z = x W_r, p = softmax(z) (the aux and z losses'), DeepSeek's s = sigmoid(z) */
    m->ops->matmul(m, q->probs, x, P(m, mdc_i_router_of(&m->cfg, l)), NULL, n, C, E, mdc_i_family(&m->cfg));
    if (sig) router_sigmoid(d, q->score, q->probs, n, E);
    router_softmax(d, q->probs, q->lse, n, E);
    if (m->moe.counting || (m->moe.lb_serial && !m->rc.active)) mdc_i_moe_lb_count(m, q);
    const float *bias = m->moe.bias + (size_t)mdc_i_moe_before(&m->cfg, l) * E;
    double *cnt = m->moe.counts + (size_t)mdc_i_moe_before(&m->cfg, l) * E;
    int pos0 = m->part.sp ? m->part.tp_rank * Tg : 0;
    for (int t = 0; t < n; t++) {
        int *ch = q->choice + (size_t)t * k, p = t % Tg, gp = m->cp ? m->cp->pos[p] : pos0 + p;
        long long g = o->balanced ? (long long)(a->row0 + t / Tg) * Tseq + gp : -1; /* the global index */
        route_token(&m->cfg, o->renorm, q->probs + (size_t)t * E, sig ? q->score + (size_t)t * E : NULL, bias, g, ch,
                    q->gate + (size_t)t * k);
        for (int r = 0; r < k && rec; r++) m->moe.st.tokens[ch[r]] += 1, cnt[ch[r]] += 1;
        float z = o->z_beta * q->lse[t] * q->lse[t];
        if (o->z_beta > 0 && rec) m->moe.st.z_sum += z, a->moe_loss += z, mdc_exact_add_f32(&m->moe.xloss, z);
    }
    if (sig) mdc_dev_kernel(d, (4.0 + 2.0 * m->cfg.n_group / E) * n * E, 4.0 * n * E, MDC_PREC_FP32);
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
        if (o->aux_alpha > 0 && rec) m->moe.st.aux_sum += aux, mdc_exact_add_f32(&m->moe.xloss, aux);
        if (rec) a->moe_loss += (double)aux;
        if (o->capacity_factor > 0) capacity(m, q, g * Tg, Tg, keep);
    }
    /* invariants: no expert over its capacity in a group; the decisions' digest */
    int cap = (int)ceil((double)k * Tg * o->capacity_factor / E);
    for (int g = 0; g < G && o->capacity_factor > 0; g++) {
        int used[MDC_GPT2_MAX_EXPERTS] = {0};
        for (size_t i = (size_t)g * Tg * k; i < (size_t)(g + 1) * Tg * k; i++) used[q->choice[i]] += keep[i];
        for (int j = 0; j < E; j++)
            if (used[j] > cap)
                return mdc_fail(MDC_ERR_MISMATCH,
                                "MoE block %d: expert %d kept %d assignments of a sequence, over its "
                                "capacity %d",
                                l, j, used[j], cap);
    }
    for (int t = 0; t < n; t++) {
        int p = t % Tg, gp = m->cp ? m->cp->pos[p] : pos0 + p;
        for (int r = 0; r < k; r++) {
            uint64_t key = ((((uint64_t)(a->row0 + t / Tg) * 1048576u + (uint64_t)gp) * 16u + (uint64_t)r) * 4096u +
                            (uint64_t)q->choice[(size_t)t * k + r]) *
                               2u +
                           (uint64_t)keep[(size_t)t * k + r];
            if (rec) m->moe.st.digest += (double)(mdc_splitmix64(key ^ (uint64_t)l << 56) >> 44);
        }
    }
    /* the send layout: expert-major, then segment, then token */
    memset(q->scnt, 0, sizeof(int) * (size_t)E * S);
    for (int t = 0; t < n; t++)
        for (int r = 0; r < k; r++) {
            if (!keep[(size_t)t * k + r]) {
                m->moe.st.dropped += rec;
                continue;
            }
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
    *out = q;
    return MDC_OK;
}

/* dz (n x E): the gates' gradient through the renormalization and the softmax, with the aux
 * loss's (alpha E f_i per p_i, times the loss scale) and the z-loss's (2 beta lse p_i). */
mdc_status mdc_i_moe_router_grad(mdc_gpt2 *m, const moe_state *q, const float *dgate, float *dz) {
    const mdc_moe_opts *o = &m->moe.o;
    int n = q->n, E = m->cfg.E, k = m->cfg.topk, lb = m->cfg.lb_coef > 0;
    float scale = m->moe.dloss, aux = o->aux_alpha * (float)E * scale;
    if (lb) TRY(mdc_i_moe_lb_grad(m, q));
    float *dss = NULL; /* DeepSeek's: the gates' gradient to s */
    if (q->score)
        TRY(mdc_dev_alloc(m->dev, (void **)&dss, ((size_t)n * E + 4) * sizeof(float), MDC_MEM_ACTS, "MoE ds"));
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; t++) {
        const float *p = q->probs + (size_t)t * E, *f = q->f_aux + (size_t)(t / q->Tg) * E;
        const int *ch = q->choice + (size_t)t * k;
        const float *dg = dgate + (size_t)t * k, *g = q->gate + (size_t)t * k;
        float *dp = dz + (size_t)t * E, dot = 0;
        for (int i = 0; i < E; i++) dp[i] = o->aux_alpha > 0 ? aux * f[i] : 0;
        if (lb) /* transformers' aux loss: w_i per p_i */
            for (int i = 0; i < E; i++) dp[i] += m->moe.lb_w[i];
        /* the gates' gradient to the scores they are read from: p (softmax) or s (sigmoid) */
        const float *s = q->score ? q->score + (size_t)t * E : NULL;
        float *ds = s ? dss + (size_t)t * E : dp, rs = s ? m->cfg.routed_scale : 1.0f;
        if (s)
            for (int i = 0; i < E; i++) ds[i] = 0;
        if (o->renorm) { /* g_r = rs w_r / sum: dw_r = (rs dg_r - sum_u dg_u g_u) / sum */
            float sum = 0, gd = 0;
            for (int r = 0; r < k; r++) sum += (s ? s : p)[ch[r]], gd += dg[r] * g[r];
            if (s) sum += 1e-20f;
            for (int r = 0; r < k; r++) ds[ch[r]] += (s ? rs * dg[r] - gd : dg[r] - gd) / sum;
        } else {
            for (int r = 0; r < k; r++) ds[ch[r]] += s ? rs * dg[r] : dg[r];
        }
        for (int i = 0; i < E; i++) dot += p[i] * dp[i];
        float zl = 2.0f * o->z_beta * q->lse[t] * scale;
        for (int i = 0; i < E; i++) dp[i] = p[i] * (dp[i] - dot) + (o->z_beta > 0 ? zl * p[i] : 0);
        if (s) /* ds_i s_i (1 - s_i) */
            for (int i = 0; i < E; i++) dp[i] += ds[i] * s[i] * (1.0f - s[i]);
    }
    mdc_dev_kernel(m->dev, (q->score ? 12.0 : 8.0) * n * E, 12.0 * n * E, MDC_PREC_FP32);
    mdc_dev_free(m->dev, dss);
    return MDC_OK;
}
