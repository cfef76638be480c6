/* Grouped-query attention (kernels/attention.c, attention_tiled.c, attention_pair.c,
 * exact_attention.c): H query heads over KV kv heads of width d, query head h reading kv head
 * h / (H/KV) (Hugging Face repeat_kv), d not tied to C/H. Checked against a double-precision
 * reference that repeats the kv heads explicitly: the forward, dq, dk and dv against the
 * reference's analytic gradient and against central differences of it, with and without
 * dropout; materialized and tiled agree; the charges follow the formulas (FLOPs of H heads, the
 * k and v bytes of KV heads); KV = H, d = C/H is the GPT-2 kernels bit for bit (outputs and
 * charges); 1 and 4 threads give the same bits; the reference with the wrong kv mapping (h % KV)
 * disagrees with the kernels, so the checks would catch that mistake; the pair kernels (context
 * parallelism) and exact mode's, with group = H/KV over split query and key runs, equal the
 * materialized kernel, exact mode bit for bit whatever the split. Prints a line per check; exits
 * 1 on a mismatch, naming the first bad index. */
#include <omp.h>

#include "testutil.h"

enum { BLK = 4 }; /* exact mode's canonical block (the runs below are cut at multiples of it) */

static float *fvec(size_t n, float scale) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = scale * tu_frand();
    return x;
}
static float *fzeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *dcopy(const float *x, size_t n) {
    double *y = malloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

/* |got - want| <= tol * max(max|want|, 1e-6): prints the max error; a failure names the first
 * element over the tolerance and the worst one */
static double near(const char *what, const float *got, const double *want, size_t n, double tol) {
    double maxw = 1e-6, maxe = 0;
    size_t worst = 0, first = n;
    for (size_t i = 0; i < n; i++) maxw = fmax(maxw, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= maxe)) maxe = e, worst = i;
        if (first == n && !(e <= tol * maxw)) first = i;
    }
    int ok = first == n;
    printf("%-60s max err %.3g (rel %.3g)%s\n", what, maxe, maxe / maxw, ok ? "" : "  FAIL");
    TU_CHECK(ok, "%s: first bad element %zu: got %.9g want %.9g; worst %zu: got %.9g want %.9g", what, first,
             got[first], want[first], worst, got[worst], want[worst]);
    return maxe / maxw;
}
static void near_ff(const char *what, const float *got, const float *want, size_t n, double tol) {
    double *w = dcopy(want, n);
    near(what, got, w, n, tol);
    free(w);
}
static void same_bits(const char *what, const float *got, const float *want, size_t n) {
    int ok = tu_cmp_f32(what, got, want, n);
    printf("%-60s %s\n", what, ok ? "bit-identical" : "DIFFERENT  FAIL");
}

/* ---- the double reference: repeat_kv, then causal attention per query head ------------------ */
typedef struct {
    int B, T, H, KV, d, wrong; /* wrong: kv head h % KV, the planted fault */
    const mdc_dropout *drop;
    double *qkv, *dy, *out; /* (B,T,(H+2KV)d), (B,T,Hd), (B,T,Hd) */
} ref_ctx;

static int kv_of(const ref_ctx *r, int h) { return r->wrong ? h % r->KV : h / (r->H / r->KV); }

/* out; with dqkv (zeroed here) the analytic gradient of sum(out * dy) */
static void ref_run(ref_ctx *r, double *dqkv) {
    int B = r->B, T = r->T, H = r->H, KV = r->KV, d = r->d, W = (H + 2 * KV) * d, Cq = H * d;
    double sc = 1 / sqrt((double)d);
    double *K = malloc(sizeof(double) * T * d), *V = malloc(sizeof(double) * T * d);
    double *dK = malloc(sizeof(double) * T * d), *dV = malloc(sizeof(double) * T * d);
    double *P = malloc(sizeof(double) * T * T), *M = malloc(sizeof(double) * T * T), *dP = malloc(sizeof(double) * T);
    if (dqkv) memset(dqkv, 0, sizeof(double) * B * T * W);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int g = kv_of(r, h);
            const double *base = r->qkv + (size_t)b * T * W;
            for (int s = 0; s < T; s++) /* repeat_kv: this head's own copy of kv head g */
                for (int x = 0; x < d; x++) {
                    K[s * d + x] = base[(size_t)s * W + Cq + g * d + x];
                    V[s * d + x] = base[(size_t)s * W + Cq + KV * d + g * d + x];
                }
            for (int t = 0; t < T; t++) {
                const double *q = base + (size_t)t * W + h * d;
                double *p = P + (size_t)t * T, mx = -1e300, sum = 0;
                for (int s = 0; s <= t; s++) {
                    double dd = 0;
                    for (int x = 0; x < d; x++) dd += q[x] * K[s * d + x];
                    p[s] = dd * sc, mx = fmax(mx, p[s]);
                }
                for (int s = 0; s <= t; s++) sum += p[s] = exp(p[s] - mx);
                for (int s = 0; s <= t; s++) {
                    p[s] /= sum;
                    int keep = !r->drop || mdc_dropout_keep_attn(r->drop, r->drop->row0 + b, r->drop->head0 + h,
                                                                 r->drop->pos0 + t, r->drop->pos0 + s);
                    M[(size_t)t * T + s] = !keep ? 0 : r->drop ? 1 / (1 - (double)r->drop->p) : 1;
                }
                double *o = r->out + ((size_t)b * T + t) * Cq + h * d;
                for (int x = 0; x < d; x++) {
                    double acc = 0;
                    for (int s = 0; s <= t; s++) acc += p[s] * M[(size_t)t * T + s] * V[s * d + x];
                    o[x] = acc;
                }
            }
            if (!dqkv) continue;
            memset(dK, 0, sizeof(double) * T * d), memset(dV, 0, sizeof(double) * T * d);
            for (int t = 0; t < T; t++) {
                const double *q = base + (size_t)t * W + h * d, *dO = r->dy + ((size_t)b * T + t) * Cq + h * d;
                double *dq = dqkv + (size_t)b * T * W + (size_t)t * W + h * d, *p = P + (size_t)t * T, dot = 0;
                for (int s = 0; s <= t; s++) {
                    double m = M[(size_t)t * T + s], e = 0;
                    for (int x = 0; x < d; x++) dV[s * d + x] += p[s] * m * dO[x], e += dO[x] * V[s * d + x];
                    dP[s] = e * m, dot += p[s] * dP[s];
                }
                for (int s = 0; s <= t; s++) {
                    double ds = p[s] * (dP[s] - dot) * sc;
                    for (int x = 0; x < d; x++) dq[x] += ds * K[s * d + x], dK[s * d + x] += ds * q[x];
                }
            }
            for (int s = 0; s < T; s++) /* repeat_kv's backward: the copies' gradients summed */
                for (int x = 0; x < d; x++) {
                    double *row = dqkv + (size_t)b * T * W + (size_t)s * W;
                    row[Cq + g * d + x] += dK[s * d + x];
                    row[Cq + KV * d + g * d + x] += dV[s * d + x];
                }
        }
    free(K), free(V), free(dK), free(dV), free(P), free(M), free(dP);
}

static double ref_loss(ref_ctx *r) {
    ref_run(r, NULL);
    double s = 0;
    for (size_t i = 0; i < (size_t)r->B * r->T * r->H * r->d; i++) s += r->out[i] * r->dy[i];
    return s;
}

/* the q, k and v columns of a (B,T,W) gradient apart */
static void parts(const char *what, const float *got, const double *want, const ref_ctx *r, double tol) {
    int W = (r->H + 2 * r->KV) * r->d, lo[3] = {0, r->H * r->d, (r->H + r->KV) * r->d}, hi[3] = {lo[1], lo[2], W};
    const char *nm[3] = {"dq", "dk", "dv"};
    size_t rows = (size_t)r->B * r->T;
    for (int c = 0; c < 3; c++) {
        size_t w = (size_t)(hi[c] - lo[c]), n = rows * w;
        float *g = malloc(sizeof(float) * n);
        double *e = malloc(sizeof(double) * n);
        for (size_t i = 0; i < rows; i++)
            for (size_t x = 0; x < w; x++)
                g[i * w + x] = got[i * W + lo[c] + x], e[i * w + x] = want[i * W + lo[c] + x];
        char name[128];
        snprintf(name, sizeof name, "%s %s", what, nm[c]);
        near(name, g, e, n, tol);
        free(g), free(e);
    }
}

/* central differences of the reference's loss at about 40 elements of each of q, k and v */
static void fd(const char *what, ref_ctx *r, const float *g1, const float *g2) {
    int W = (r->H + 2 * r->KV) * r->d, lo[3] = {0, r->H * r->d, (r->H + r->KV) * r->d}, hi[3] = {lo[1], lo[2], W};
    const char *nm[3] = {"dq", "dk", "dv"};
    size_t rows = (size_t)r->B * r->T;
    for (int c = 0; c < 3; c++) {
        size_t w = (size_t)(hi[c] - lo[c]), n = rows * w, step = n / 40 + 1, m = 0;
        while (step > 1 && n % step == 0) step++;
        double *num = malloc(sizeof(double) * (n / step + 2));
        float *a1 = malloc(sizeof(float) * (n / step + 2)), *a2 = malloc(sizeof(float) * (n / step + 2));
        for (size_t j = 0; j < n; j += step) {
            size_t i = (j / w) * W + lo[c] + j % w;
            double s = r->qkv[i], hh = 1e-5 * fmax(1.0, fabs(s));
            r->qkv[i] = s + hh;
            double lp = ref_loss(r);
            r->qkv[i] = s - hh;
            double lm = ref_loss(r);
            r->qkv[i] = s;
            num[m] = (lp - lm) / (2 * hh), a1[m] = g1[i], a2[m++] = g2[i];
        }
        char name[128];
        snprintf(name, sizeof name, "%s %s vs finite diff (materialized)", what, nm[c]);
        near(name, a1, num, m, 2e-5);
        snprintf(name, sizeof name, "%s %s vs finite diff (tiled)", what, nm[c]);
        near(name, a2, num, m, 2e-5);
        free(num), free(a1), free(a2);
    }
}

/* ---- charges ------------------------------------------------------------------------------- */
static void expect_charge(mdc_device *d, const char *what, double flops, double bytes) {
    mdc_dev_counters c;
    mdc_dev_get_counters(d, &c);
    int ok = fabs(c.flops - flops) <= 1e-12 * flops && fabs(c.hbm_bytes - bytes) <= 1e-12 * bytes && c.kernels == 1;
    printf("%-60s %.6g FLOPs %.6g bytes%s\n", what, c.flops, c.hbm_bytes, ok ? "" : "  FAIL");
    TU_CHECK(ok, "%s: charged %.17g FLOPs %.17g bytes in %g kernels, formula %.17g, %.17g", what, c.flops, c.hbm_bytes,
             c.kernels, flops, bytes);
    mdc_dev_reset_counters(d);
}
static double kv_reads(int T) { /* keys read by the tiled forward's query tiles */
    double kv = 0;
    for (int i0 = 0; i0 < T; i0 += MDC_ATTN_TILE) kv += fmin(T, i0 + MDC_ATTN_TILE);
    return kv;
}
static double tile_rows(int T) { /* query rows over the tiled backward's (key tile, query tile) pairs */
    double pairs = 0;
    for (int j0 = 0; j0 < T; j0 += MDC_ATTN_TILE)
        for (int i0 = j0; i0 < T; i0 += MDC_ATTN_TILE) pairs += fmin(MDC_ATTN_TILE, T - i0);
    return pairs;
}

/* ---- the pair kernels over runs ------------------------------------------------------------- */
typedef struct {
    int B, T, H, KV, d;
} shape;

/* query rows [qa, qa + nq) against keys [ka, ka + nk) of (B,T,(H+2KV)d) rows */
static mdc_attn_pair pair_of(const shape *s, const float *qkv, int qa, int nq, int ka, int nk, float *o, float *m,
                             float *l) {
    int W = (s->H + 2 * s->KV) * s->d, Cq = s->H * s->d;
    mdc_attn_pair p;
    memset(&p, 0, sizeof p);
    p.B = s->B, p.NH = s->H, p.hs = s->d, p.group = s->H / s->KV;
    p.nq = nq, p.nk = nk, p.qpos0 = qa, p.kpos0 = ka;
    p.q = qkv + (size_t)qa * W, p.q_bs = (size_t)s->T * W, p.q_ld = W;
    p.k = qkv + (size_t)ka * W + Cq, p.v = p.k + s->KV * s->d, p.kv_bs = (size_t)s->T * W, p.kv_ld = W;
    p.o = o + (size_t)qa * Cq, p.o_bs = (size_t)s->T * Cq, p.o_ld = Cq;
    p.m = m ? m + qa : NULL, p.l = l ? l + qa : NULL, p.s_bs = (size_t)s->H * s->T, p.s_hs = (size_t)s->T;
    return p;
}

/* the float pair kernels: every query run merges every key run (last first); dqkv += */
static void pair_run(mdc_device *dev, const shape *s, const float *qkv, const float *dy, const mdc_dropout *drop,
                     int nqr, const int *qc, int nkr, const int *kc, float *o, float *lse, float *dqkv) {
    int W = (s->H + 2 * s->KV) * s->d, Cq = s->H * s->d;
    size_t nl = (size_t)s->B * s->H * s->T;
    float *m = fzeros(nl), *l = fzeros(nl), *D = fzeros(nl);
    for (int a = 0; a < nqr; a++) {
        int qa = qc[a], nq = qc[a + 1] - qa;
        mdc_attn_pair p0 = pair_of(s, qkv, qa, nq, 0, 0, o, m, l);
        mdc_attn_pair_begin(&p0);
        for (int k = nkr - 1; k >= 0; k--) {
            mdc_attn_pair p = pair_of(s, qkv, qa, nq, kc[k], kc[k + 1] - kc[k], o, m, l);
            p.drop = drop;
            mdc_attn_pair_forward(dev, &p);
        }
        mdc_attn_pair_finish(dev, &p0, lse + qa);
        p0.dout = dy + (size_t)qa * Cq;
        mdc_attn_rowdot(dev, &p0, D + qa);
        for (int k = 0; k < nkr; k++) {
            mdc_attn_pair p = pair_of(s, qkv, qa, nq, kc[k], kc[k + 1] - kc[k], o, m, l);
            p.drop = drop, p.dout = dy + (size_t)qa * Cq, p.lse = lse + qa, p.D = D + qa;
            p.dq = dqkv + (size_t)qa * W, p.dk = dqkv + (size_t)kc[k] * W + Cq, p.dv = p.dk + s->KV * s->d;
            mdc_attn_pair_backward(dev, &p);
        }
    }
    free(m), free(l), free(D);
}

/* exact mode's pair kernels over the same runs; dqkv = the exact gradient rounded once */
static void exact_run(mdc_device *dev, const shape *s, const float *qkv, const float *dy, const mdc_dropout *drop,
                      int nqr, const int *qc, int nkr, const int *kc, float *o, float *lse, float *dqkv) {
    int W = (s->H + 2 * s->KV) * s->d, Cq = s->H * s->d;
    size_t nl = (size_t)s->B * s->H * s->T, nq3 = (size_t)s->B * s->T * W;
    float *m = fzeros(nl), *D = fzeros(nl);
    for (size_t i = 0; i < nl; i++) m[i] = -INFINITY;
    mdc_xsum xa, xg;
    TU_CHECK(!mdc_xsum_init(&xa, nl + (size_t)s->B * s->T * Cq) && !mdc_xsum_init(&xg, nq3), "exact sums");
    for (int a = 0; a < nqr; a++) {
        int qa = qc[a], nq = qc[a + 1] - qa;
        for (int k = 0; k < nkr; k++) {
            mdc_attn_pair p = pair_of(s, qkv, qa, nq, kc[k], kc[k + 1] - kc[k], o, m, NULL);
            mdc_x_attn_max(dev, &p, BLK);
        }
        for (int k = nkr - 1; k >= 0; k--) {
            mdc_attn_pair p = pair_of(s, qkv, qa, nq, kc[k], kc[k + 1] - kc[k], o, m, NULL);
            p.drop = drop;
            mdc_x_attn_sum(dev, &p, &xa, (size_t)qa, nl + (size_t)qa * Cq, BLK);
        }
        mdc_attn_pair p0 = pair_of(s, qkv, qa, nq, 0, 0, o, m, NULL);
        mdc_x_attn_finish(dev, &p0, &xa, (size_t)qa, nl + (size_t)qa * Cq, lse + qa);
        p0.dout = dy + (size_t)qa * Cq;
        mdc_x_attn_rowdot(dev, &p0, D + qa);
        for (int k = 0; k < nkr; k++) {
            mdc_attn_pair p = pair_of(s, qkv, qa, nq, kc[k], kc[k + 1] - kc[k], o, m, NULL);
            size_t xk = (size_t)kc[k] * W + Cq;
            p.drop = drop, p.dout = dy + (size_t)qa * Cq, p.lse = lse + qa, p.D = D + qa;
            mdc_x_attn_backward(dev, &p, &xg, (size_t)qa * W, xk, xk + (size_t)s->KV * s->d, BLK);
        }
    }
    TU_CHECK(mdc_xsum_ok(&xa) && mdc_xsum_ok(&xg), "exact sums ran out of memory");
    mdc_xsum_round(&xg, 0, nq3, dqkv);
    mdc_xsum_free(&xa), mdc_xsum_free(&xg);
    free(m), free(D);
}

/* ---- one shape ------------------------------------------------------------------------------ */
static void check_shape(mdc_device *dev, int B, int T, int H, int KV, int d) {
    int W = (H + 2 * KV) * d, Cq = H * d;
    size_t nq = (size_t)B * T * W, ny = (size_t)B * T * Cq, na = (size_t)B * H * T * T, nl = (size_t)B * H * T;
    float *qkv = fvec(nq, 1.5f), *dy = fvec(ny, 1);
    float *o1 = fzeros(ny), *o2 = fzeros(ny), *att = fzeros(na), *scr = fzeros(na), *lse = fzeros(nl);
    float *g1 = fzeros(nq), *g2 = fzeros(nq);
    ref_ctx r = {B, T, H, KV, d, 0, NULL, dcopy(qkv, nq), dcopy(dy, ny), malloc(sizeof(double) * ny)};
    double *dref = malloc(sizeof(double) * nq), pc = 0.5 * T * (T + 1.0), n = (double)B * H;
    char tag[64], name[160];
    snprintf(tag, sizeof tag, "H%d KV%d d%d T%d", H, KV, d, T);
    ref_run(&r, dref);

    mdc_attention_gqa_forward(dev, o1, att, qkv, NULL, B, T, H, KV, d);
    snprintf(name, sizeof name, "%s: charge forward", tag);
    expect_charge(dev, name, n * (4.0 * d + 5) * pc, 4.0 * B * ((2.0 * H + 2.0 * KV) * T * d + 4.0 * H * pc));
    snprintf(name, sizeof name, "%s: forward vs reference", tag);
    near(name, o1, r.out, ny, 1e-5);
    mdc_attention_gqa_forward_tiled(dev, o2, lse, qkv, NULL, B, T, H, KV, d);
    snprintf(name, sizeof name, "%s: charge forward tiled", tag);
    expect_charge(dev, name, n * (4.0 * d + 5) * pc, 4.0 * B * (H * (2.0 * T * d + T) + 2.0 * KV * d * kv_reads(T)));
    snprintf(name, sizeof name, "%s: forward tiled vs reference", tag);
    near(name, o2, r.out, ny, 1e-5);
    snprintf(name, sizeof name, "%s: forward tiled vs materialized", tag);
    near_ff(name, o2, o1, ny, 1e-5);

    mdc_attention_gqa_backward(dev, g1, scr, dy, qkv, att, NULL, B, T, H, KV, d);
    snprintf(name, sizeof name, "%s: charge backward", tag);
    expect_charge(dev, name, n * (8.0 * d + 4) * pc, 4.0 * B * ((4.0 * H + 6.0 * KV) * T * d + 7.0 * H * pc));
    mdc_attention_gqa_backward_tiled(dev, g2, dy, o2, qkv, lse, NULL, B, T, H, KV, d);
    snprintf(name, sizeof name, "%s: charge backward tiled", tag);
    expect_charge(dev, name, n * ((10.0 * d + 4) * pc + 2.0 * T * d),
                  4.0 * B * (H * (3.0 * T * d + tile_rows(T) * (4.0 * d + 2)) + 6.0 * KV * T * d));
    snprintf(name, sizeof name, "%s: backward vs reference", tag);
    parts(name, g1, dref, &r, 1e-5);
    snprintf(name, sizeof name, "%s: backward tiled vs reference", tag);
    parts(name, g2, dref, &r, 1e-5);
    snprintf(name, sizeof name, "%s: backward tiled vs materialized", tag);
    near_ff(name, g2, g1, nq, 1e-5);
    snprintf(name, sizeof name, "%s:", tag);
    fd(name, &r, g1, g2);

    /* the planted fault: kv head h % KV in the reference */
    r.wrong = 1;
    ref_run(&r, NULL);
    double maxw = 1e-6, maxe = 0;
    for (size_t i = 0; i < ny; i++) maxw = fmax(maxw, fabs(r.out[i])), maxe = fmax(maxe, fabs(o1[i] - r.out[i]));
    int differs = KV != 1 && KV != H;
    int ok = differs ? maxe / maxw > 1e-2 : maxe / maxw < 1e-5;
    printf("%-60s rel diff %.3g (%s)%s\n",
           differs ? "  planted fault h % KV: the kernel disagrees" : "  h % KV: the same heads", maxe / maxw, tag,
           ok ? "" : "  FAIL");
    TU_CHECK(ok, "%s: the wrong kv mapping gave a relative difference of %g", tag, maxe / maxw);
    r.wrong = 0;

    /* dropout: against the reference with the mask, materialized and tiled agree */
    mdc_dropout dr = {0.1f, 21, 3, 1, MDC_DROP_ATTN, 1, 0, NULL, T, 0, Cq, 1, H + 1};
    float *o3 = fzeros(ny), *o4 = fzeros(ny), *g3 = fzeros(nq), *g4 = fzeros(nq);
    r.drop = &dr;
    ref_run(&r, dref);
    mdc_attention_gqa_forward(dev, o3, att, qkv, &dr, B, T, H, KV, d);
    mdc_attention_gqa_forward_tiled(dev, o4, lse, qkv, &dr, B, T, H, KV, d);
    mdc_attention_gqa_backward(dev, g3, scr, dy, qkv, att, &dr, B, T, H, KV, d);
    mdc_attention_gqa_backward_tiled(dev, g4, dy, o4, qkv, lse, &dr, B, T, H, KV, d);
    mdc_dev_reset_counters(dev);
    snprintf(name, sizeof name, "%s drop 0.1: forward vs reference", tag);
    near(name, o3, r.out, ny, 1e-5);
    snprintf(name, sizeof name, "%s drop 0.1: forward tiled vs materialized", tag);
    near_ff(name, o4, o3, ny, 1e-5);
    snprintf(name, sizeof name, "%s drop 0.1: backward vs reference", tag);
    parts(name, g3, dref, &r, 1e-5);
    snprintf(name, sizeof name, "%s drop 0.1: backward tiled vs materialized", tag);
    near_ff(name, g4, g3, nq, 1e-5);
    snprintf(name, sizeof name, "%s drop 0.1:", tag);
    fd(name, &r, g3, g4);
    r.drop = NULL;

    /* the pair kernels, group H/KV, over two query runs and two key runs (merged last first), cut
     * at exact mode's blocks */
    shape s = {B, T, H, KV, d};
    int qc[3] = {0, (T / 2 + BLK - 1) / BLK * BLK, T}, kc[3] = {0, (T / 3 + BLK) / BLK * BLK, T}, whole[2] = {0, T};
    for (int dd = 0; dd < 2; dd++) {
        const mdc_dropout *drop = dd ? &dr : NULL;
        const float *wo = dd ? o3 : o1, *wg = dd ? g3 : g1;
        float *po = fzeros(ny), *pl = fzeros(nl), *pg = fzeros(nq), *xo = fzeros(ny), *xl = fzeros(nl),
              *xg = fzeros(nq), *yo = fzeros(ny), *yl = fzeros(nl), *yg = fzeros(nq);
        if (dd) mdc_attention_gqa_forward_tiled(dev, o4, lse, qkv, &dr, B, T, H, KV, d);
        else mdc_attention_gqa_forward_tiled(dev, o2, lse, qkv, NULL, B, T, H, KV, d);
        pair_run(dev, &s, qkv, dy, drop, 2, qc, 2, kc, po, pl, pg);
        snprintf(name, sizeof name, "%s%s: pair kernels out vs materialized", tag, dd ? " drop 0.1" : "");
        near_ff(name, po, wo, ny, 1e-5);
        snprintf(name, sizeof name, "%s%s: pair kernels lse vs tiled", tag, dd ? " drop 0.1" : "");
        near_ff(name, pl, lse, nl, 1e-5);
        snprintf(name, sizeof name, "%s%s: pair kernels dqkv vs materialized", tag, dd ? " drop 0.1" : "");
        near_ff(name, pg, wg, nq, 1e-5);
        exact_run(dev, &s, qkv, dy, drop, 2, qc, 2, kc, xo, xl, xg);
        exact_run(dev, &s, qkv, dy, drop, 1, whole, 1, whole, yo, yl, yg);
        mdc_dev_reset_counters(dev);
        snprintf(name, sizeof name, "%s%s: exact pair out vs materialized", tag, dd ? " drop 0.1" : "");
        near_ff(name, xo, wo, ny, 1e-5);
        snprintf(name, sizeof name, "%s%s: exact pair dqkv vs materialized", tag, dd ? " drop 0.1" : "");
        near_ff(name, xg, wg, nq, 1e-5);
        snprintf(name, sizeof name, "%s%s: exact split runs vs one run (out)", tag, dd ? " drop 0.1" : "");
        same_bits(name, xo, yo, ny);
        snprintf(name, sizeof name, "%s%s: exact split runs vs one run (lse)", tag, dd ? " drop 0.1" : "");
        same_bits(name, xl, yl, nl);
        snprintf(name, sizeof name, "%s%s: exact split runs vs one run (dqkv)", tag, dd ? " drop 0.1" : "");
        same_bits(name, xg, yg, nq);
        free(po), free(pl), free(pg), free(xo), free(xl), free(xg), free(yo), free(yl), free(yg);
    }
    /* the pair kernels' charges: FLOPs of H heads, the k, v (dk, dv) bytes of KV heads */
    mdc_attn_pair pw = pair_of(&s, qkv, 0, T, 0, T, o1, NULL, NULL), p1 = pw;
    p1.group = 0;
    double f, by, f1, by1, pairs = mdc_attn_pair_visible(&pw), rows = n * T, G = H / KV;
    mdc_attn_pair_cost(&pw, MDC_ATTN_FORWARD, &f, &by), mdc_attn_pair_cost(&p1, MDC_ATTN_FORWARD, &f1, &by1);
    int cok = pairs == n * pc && f == f1 && f == (4.0 * d + 5) * pairs &&
              fabs(by - 4.0 * (2.0 * d * pairs / MDC_ATTN_TILE / G + 3.0 * rows * (d + 1))) <= 1e-12 * by;
    mdc_attn_pair_cost(&pw, MDC_ATTN_BACKWARD, &f, &by), mdc_attn_pair_cost(&p1, MDC_ATTN_BACKWARD, &f1, &by1);
    cok &= f == f1 && f == (10.0 * d + 4) * pairs &&
           fabs(by - 4.0 * (6.0 * d * pairs / MDC_ATTN_TILE / G + rows * (4.0 * d + 2) + 6.0 * n * T * d / G)) <=
               1e-12 * by;
    snprintf(name, sizeof name, "%s: pair kernels' charges (group %d)", tag, H / KV);
    printf("%-60s %s\n", name, cok ? "as the formulas" : "FAIL");
    TU_CHECK(cok, "%s", name);
    free(qkv), free(dy), free(o1), free(o2), free(o3), free(o4), free(att), free(scr), free(lse), free(g1), free(g2),
        free(g3), free(g4);
    free(r.qkv), free(r.dy), free(r.out), free(dref);
}

/* ---- KV = H, d = C/H: the GPT-2 kernels bit for bit, outputs and charges ---------------------- */
static void check_gpt2(int B, int T, int C, int NH, float p) {
    int d = C / NH;
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * NH * T * T, nl = (size_t)B * NH * T;
    mdc_dropout dr = {p, 5, 2, 0, MDC_DROP_ATTN, 2, 0, NULL, T, 0, C, 0, NH};
    const mdc_dropout *drop = p > 0 ? &dr : NULL;
    float *qkv = fvec(nq, 1.5f), *dy = fvec(ny, 1);
    float *out[2][4], *grad[2][2];
    mdc_dev_counters c[2];
    for (int w = 0; w < 2; w++) {
        mdc_device *dev = tu_device(1.0);
        float *o = fzeros(ny), *att = fzeros(na), *o2 = fzeros(ny), *lse = fzeros(nl), *g = fzeros(nq),
              *g2 = fzeros(nq), *scr = fzeros(na);
        if (w) {
            mdc_attention_gqa_forward(dev, o, att, qkv, drop, B, T, NH, NH, d);
            mdc_attention_gqa_backward(dev, g, scr, dy, qkv, att, drop, B, T, NH, NH, d);
            mdc_attention_gqa_forward_tiled(dev, o2, lse, qkv, drop, B, T, NH, NH, d);
            mdc_attention_gqa_backward_tiled(dev, g2, dy, o2, qkv, lse, drop, B, T, NH, NH, d);
        } else if (drop) {
            mdc_attention_forward_drop(dev, o, att, qkv, drop, B, T, C, NH);
            mdc_attention_backward_drop(dev, g, scr, dy, qkv, att, drop, B, T, C, NH);
            mdc_attention_forward_tiled_drop(dev, o2, lse, qkv, drop, B, T, C, NH);
            mdc_attention_backward_tiled_drop(dev, g2, dy, o2, qkv, lse, drop, B, T, C, NH);
        } else {
            mdc_attention_forward(dev, o, att, qkv, B, T, C, NH);
            mdc_attention_backward(dev, g, scr, dy, qkv, att, B, T, C, NH);
            mdc_attention_forward_tiled(dev, o2, lse, qkv, B, T, C, NH);
            mdc_attention_backward_tiled(dev, g2, dy, o2, qkv, lse, B, T, C, NH);
        }
        mdc_dev_get_counters(dev, &c[w]);
        mdc_device_free(dev);
        out[w][0] = o, out[w][1] = att, out[w][2] = o2, out[w][3] = lse, grad[w][0] = g, grad[w][1] = g2;
        free(scr);
    }
    char name[160];
    const char *nm[6] = {"out", "att", "tiled out", "tiled lse", "dqkv", "tiled dqkv"};
    size_t ns[6] = {ny, na, ny, nl, nq, nq};
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "GPT-2 B%d T%d C%d NH%d drop %.1f: gqa %s", B, T, C, NH, p, nm[i]);
        same_bits(name, i < 4 ? out[1][i] : grad[1][i - 4], i < 4 ? out[0][i] : grad[0][i - 4], ns[i]);
    }
    int same = c[0].flops == c[1].flops && c[0].hbm_bytes == c[1].hbm_bytes && c[0].kernels == c[1].kernels &&
               c[0].t_compute == c[1].t_compute;
    snprintf(name, sizeof name, "GPT-2 B%d T%d C%d NH%d drop %.1f: gqa charges", B, T, C, NH, p);
    printf("%-60s %s\n", name, same ? "identical" : "DIFFERENT  FAIL");
    TU_CHECK(same, "%s: %.17g vs %.17g FLOPs, %.17g vs %.17g bytes", name, c[1].flops, c[0].flops, c[1].hbm_bytes,
             c[0].hbm_bytes);
    for (int w = 0; w < 2; w++) {
        for (int i = 0; i < 4; i++) free(out[w][i]);
        free(grad[w][0]), free(grad[w][1]);
    }
    free(qkv), free(dy);
}

/* ---- 1 and 4 threads ----------------------------------------------------------------------- */
enum { NRES = 13 };
static const char *res_names[NRES] = {
    "forward drop", "backward drop", "tiled forward drop", "tiled backward drop", "tiled lse", "forward",   "backward",
    "pair out",     "pair lse",      "pair dqkv",          "exact out",           "exact lse", "exact dqkv"};
static void run_all(int threads, float **res, size_t *ns) {
    omp_set_num_threads(threads);
    tu_seed(4242);
    int B = 2, T = 150, H = 8, KV = 2, d = 12, W = (H + 2 * KV) * d, Cq = H * d;
    size_t nq = (size_t)B * T * W, ny = (size_t)B * T * Cq, na = (size_t)B * H * T * T, nl = (size_t)B * H * T;
    size_t sizes[NRES] = {ny, nq, ny, nq, nl, ny, nq, ny, nl, nq, ny, nl, nq};
    mdc_device *dev = tu_device(1.0);
    mdc_dropout dr = {0.1f, 3, 1, 0, MDC_DROP_ATTN, 0, 0, NULL, T, 0, Cq, 0, H};
    float *qkv = fvec(nq, 1.5f), *dy = fvec(ny, 1), *att = fzeros(na), *scr = fzeros(na);
    shape s = {B, T, H, KV, d};
    int qc[3] = {0, 72, T}, kc[3] = {0, 64, T};
    for (int i = 0; i < NRES; i++) ns[i] = sizes[i], res[i] = fzeros(sizes[i]);
    mdc_attention_gqa_forward(dev, res[0], att, qkv, &dr, B, T, H, KV, d);
    mdc_attention_gqa_backward(dev, res[1], scr, dy, qkv, att, &dr, B, T, H, KV, d);
    mdc_attention_gqa_forward_tiled(dev, res[2], res[4], qkv, &dr, B, T, H, KV, d);
    mdc_attention_gqa_backward_tiled(dev, res[3], dy, res[2], qkv, res[4], &dr, B, T, H, KV, d);
    mdc_attention_gqa_forward(dev, res[5], att, qkv, NULL, B, T, H, KV, d);
    mdc_attention_gqa_backward(dev, res[6], scr, dy, qkv, att, NULL, B, T, H, KV, d);
    pair_run(dev, &s, qkv, dy, &dr, 2, qc, 2, kc, res[7], res[8], res[9]);
    exact_run(dev, &s, qkv, dy, &dr, 2, qc, 2, kc, res[10], res[11], res[12]);
    free(qkv), free(dy), free(att), free(scr);
    mdc_device_free(dev);
}
static void check_threads(void) {
    float *r1[NRES], *r4[NRES];
    size_t n1[NRES], n4[NRES];
    run_all(1, r1, n1);
    run_all(4, r4, n4);
    for (int i = 0; i < NRES; i++) {
        char what[96];
        snprintf(what, sizeof what, "H8 KV2 d12 T150, 1 vs 4 threads: %s", res_names[i]);
        same_bits(what, r4[i], r1[i], n1[i]);
        free(r1[i]), free(r4[i]);
    }
    omp_set_num_threads(omp_get_num_procs());
}

int main(void) {
    mdc_device *dev = tu_device(1.0);
    tu_seed(20240601);
    check_shape(dev, 2, 7, 6, 2, 8);
    check_shape(dev, 2, 9, 4, 4, 5);
    check_shape(dev, 2, 33, 8, 1, 16);
    check_shape(dev, 2, 70, 6, 3, 7); /* two tiles of MDC_ATTN_TILE, a partial one */
    mdc_device_free(dev);
    check_gpt2(2, 9, 20, 4, 0);
    check_gpt2(2, 70, 24, 3, 0);
    check_gpt2(2, 70, 24, 3, 0.1f);
    check_gpt2(1, 130, 64, 4, 0.2f);
    check_threads();
    return tu_finish("test_attention_gqa");
}
