/* Kernel tests: every backward against central finite differences of a double-precision
 * reference forward; every forward against that reference; tiled against plain attention;
 * bits identical with 1 and 2 OpenMP threads; charged FLOPs and bytes equal the formulas of
 * the kernels' header comments (recomputed here); AdamW and the gradient norm against
 * double-precision formulas; NaN, inf and huge inputs to the exp-based kernels give the IEEE
 * results (and, under UBSan, no undefined behaviour). Exits 1 on any mismatch, printing the
 * worst element. */
#include <float.h>
#include <omp.h>

#include <cblas.h>

#include "testutil.h"
/* mdc_k_exp, tested directly */
#include "../kernels/internal.h"

/* ---- helpers --------------------------------------------------------------------------------- */
static float *fvec(size_t n, float scale) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = scale * tu_frand();
    return x;
}
static float *fzeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *dcopy(const float *x, size_t n) {
    double *d = malloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static float *fdup(const float *x, size_t n) {
    float *y = malloc(sizeof(float) * (n ? n : 1));
    memcpy(y, x, sizeof(float) * n);
    return y;
}

static void expect_charge(mdc_device *d, const char *what, double flops, double bytes) {
    mdc_dev_counters c;
    mdc_dev_get_counters(d, &c);
    TU_CHECK(c.flops == flops, "%s: charged %.17g FLOPs, formula %.17g", what, c.flops, flops);
    TU_CHECK(c.hbm_bytes == bytes, "%s: charged %.17g bytes, formula %.17g", what, c.hbm_bytes, bytes);
    TU_CHECK(c.kernels == 1, "%s: %g kernels charged, expected 1", what, c.kernels);
    mdc_dev_reset_counters(d);
}

static double dot_w(const double *out, const double *w, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += out[i] * w[i];
    return s;
}

/* ---- LayerNorm ---------------------------------------------------------------------------------- */
typedef struct {
    double *x, *w, *b, *dy, *out;
    int N, C;
} ln_ctx;
static void ln_ref(ln_ctx *k) {
    for (int i = 0; i < k->N; i++) {
        const double *x = k->x + (size_t)i * k->C;
        double m = 0, v = 0;
        for (int c = 0; c < k->C; c++) m += x[c];
        m /= k->C;
        for (int c = 0; c < k->C; c++) v += (x[c] - m) * (x[c] - m);
        double r = 1 / sqrt(v / k->C + 1e-5);
        for (int c = 0; c < k->C; c++) k->out[(size_t)i * k->C + c] = (x[c] - m) * r * k->w[c] + k->b[c];
    }
}
static double ln_loss(void *p) {
    ln_ctx *k = p;
    ln_ref(k);
    return dot_w(k->out, k->dy, (size_t)k->N * k->C);
}
static void test_layernorm(mdc_device *d) {
    int N = 7, C = 37;
    size_t n = (size_t)N * C;
    float *x = fvec(n, 2), *w = fvec(C, 1), *b = fvec(C, 1), *dy = fvec(n, 1);
    for (size_t i = 0; i < n; i++) x[i] += 0.5f; /* a mean to remove */
    float *out = fzeros(n), *mean = fzeros(N), *rstd = fzeros(N);
    float *dx = fvec(n, 1), *dw = fvec(C, 1), *db = fvec(C, 1);
    float *dx0 = fdup(dx, n), *dw0 = fdup(dw, C), *db0 = fdup(db, C);
    ln_ctx k = {dcopy(x, n), dcopy(w, C), dcopy(b, C), dcopy(dy, n), malloc(sizeof(double) * n), N, C};
    mdc_layernorm_forward(d, out, mean, rstd, x, w, b, N, C);
    expect_charge(d, "layernorm forward", 8.0 * N * C, 4.0 * (2.0 * N * C + 2 * C + 2 * N));
    ln_ref(&k);
    tu_near_vec("layernorm forward", out, k.out, n, 1e-6);
    mdc_layernorm_backward(d, dx, dw, db, dy, x, w, mean, rstd, N, C);
    expect_charge(d, "layernorm backward", 14.0 * N * C, 4.0 * (4.0 * N * C + 5 * C + 2 * N));
    for (size_t i = 0; i < n; i++) dx[i] -= dx0[i]; /* the kernel accumulates */
    for (int i = 0; i < C; i++) dw[i] -= dw0[i], db[i] -= db0[i];
    tu_fd_check("layernorm dinp", k.x, n, dx, ln_loss, &k);
    tu_fd_check("layernorm dweight", k.w, C, dw, ln_loss, &k);
    tu_fd_check("layernorm dbias", k.b, C, db, ln_loss, &k);
    free(x), free(w), free(b), free(dy), free(out), free(mean), free(rstd), free(dx), free(dw), free(db);
    free(dx0), free(dw0), free(db0), free(k.x), free(k.w), free(k.b), free(k.dy), free(k.out);
}

/* ---- matmul ---------------------------------------------------------------------------------- */
typedef struct {
    double *x, *w, *b, *dy, *out;
    int N, C, OC;
} mm_ctx;
static void mm_ref(mm_ctx *k) {
    for (int i = 0; i < k->N; i++)
        for (int o = 0; o < k->OC; o++) {
            double s = k->b ? k->b[o] : 0;
            for (int c = 0; c < k->C; c++) s += k->x[(size_t)i * k->C + c] * k->w[(size_t)c * k->OC + o];
            k->out[(size_t)i * k->OC + o] = s;
        }
}
static double mm_loss(void *p) {
    mm_ctx *k = p;
    mm_ref(k);
    return dot_w(k->out, k->dy, (size_t)k->N * k->OC);
}
static void test_matmul(mdc_device *d, int N, int C, int OC) {
    size_t nx = (size_t)N * C, nw = (size_t)C * OC, ny = (size_t)N * OC;
    float *x = fvec(nx, 1), *w = fvec(nw, 0.3f), *b = fvec(OC, 1), *dy = fvec(ny, 1), *out = fzeros(ny);
    float *res = fvec(ny, 1);
    float *dx = fzeros(nx), *dw = fzeros(nw), *db = fzeros(OC);
    mm_ctx k = {dcopy(x, nx), dcopy(w, nw), dcopy(b, OC), dcopy(dy, ny), malloc(sizeof(double) * ny), N, C, OC};
    double n = N, c = C, oc = OC;
    char name[64];
    snprintf(name, sizeof name, "matmul forward %dx%dx%d", N, C, OC);
    mdc_matmul_forward(d, out, x, w, b, N, C, OC);
    expect_charge(d, name, 2 * n * c * oc + n * oc, 4 * (n * c + c * oc + oc + n * oc));
    mm_ref(&k);
    tu_near_vec(name, out, k.out, ny, 1e-6);
    mdc_matmul_residual_forward(d, out, res, x, w, b, N, C, OC);
    expect_charge(d, "matmul residual", 2 * n * c * oc + 2 * n * oc, 4 * (n * c + c * oc + oc + 2 * n * oc));
    for (size_t i = 0; i < ny; i++) k.out[i] += res[i];
    tu_near_vec("matmul residual forward", out, k.out, ny, 1e-6);
    memcpy(out, res, ny * sizeof(float)); /* in place: out aliases residual */
    mdc_matmul_residual_forward(d, out, out, x, w, b, N, C, OC);
    mdc_dev_reset_counters(d);
    tu_near_vec("matmul residual forward in place", out, k.out, ny, 1e-6);
    mdc_matmul_backward(d, dx, dw, db, dy, x, w, N, C, OC);
    expect_charge(d, "matmul backward", 4 * n * c * oc + n * oc,
                  4 * (n * oc + n * c + 2 * c * oc) + 4 * (n * oc + c * oc + 2 * n * c) + 4 * (n * oc + 2 * oc));
    tu_fd_check("matmul dinp", k.x, nx, dx, mm_loss, &k);
    tu_fd_check("matmul dweight", k.w, nw, dw, mm_loss, &k);
    tu_fd_check("matmul dbias", k.b, OC, db, mm_loss, &k);
    free(x), free(w), free(b), free(dy), free(out), free(res), free(dx), free(dw), free(db);
    free(k.x), free(k.w), free(k.b), free(k.dy), free(k.out);
}

/* LM head: logits = x @ wte^T */
static void test_lmhead(mdc_device *d) {
    int N = 6, C = 10, Vp = 24;
    size_t nx = (size_t)N * C, nw = (size_t)Vp * C, ny = (size_t)N * Vp;
    float *x = fvec(nx, 1), *wte = fvec(nw, 1), *dy = fvec(ny, 1), *out = fzeros(ny);
    float *dx = fzeros(nx), *dw = fzeros(nw);
    /* as a matmul with w = wte^T */
    float *wt = malloc(sizeof(float) * nw);
    for (int v = 0; v < Vp; v++)
        for (int c = 0; c < C; c++) wt[(size_t)c * Vp + v] = wte[(size_t)v * C + c];
    mm_ctx k = {dcopy(x, nx), dcopy(wt, nw), NULL, dcopy(dy, ny), malloc(sizeof(double) * ny), N, C, Vp};
    double n = N, c = C, v = Vp;
    mdc_lmhead_forward(d, out, x, wte, N, C, Vp);
    expect_charge(d, "lm head forward", 2 * n * c * v, 4 * (n * c + v * c + n * v));
    mm_ref(&k);
    tu_near_vec("lm head forward", out, k.out, ny, 1e-6);
    mdc_lmhead_backward(d, dx, dw, dy, x, wte, N, C, Vp);
    expect_charge(d, "lm head backward", 4 * n * c * v, 4 * (2 * n * v + 3 * v * c + 3 * n * c));
    tu_fd_check("lm head dinp", k.x, nx, dx, mm_loss, &k);
    float *dwt = malloc(sizeof(float) * nw);
    for (int vv = 0; vv < Vp; vv++)
        for (int cc = 0; cc < C; cc++) dwt[(size_t)cc * Vp + vv] = dw[(size_t)vv * C + cc];
    tu_fd_check("lm head dwte", k.w, nw, dwt, mm_loss, &k);
    free(x), free(wte), free(dy), free(out), free(dx), free(dw), free(wt), free(dwt);
    free(k.x), free(k.w), free(k.dy), free(k.out);
}

/* ---- attention --------------------------------------------------------------------------------- */
typedef struct {
    double *qkv, *dy, *out;
    int B, T, C, NH;
} at_ctx;
static void at_ref(at_ctx *k) {
    int B = k->B, T = k->T, C = k->C, NH = k->NH, hs = C / NH;
    double *p = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = k->qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                double mx = -1e300, sum = 0;
                for (int s = 0; s <= t; s++) {
                    const double *kk = k->qkv + ((size_t)b * T + s) * 3 * C + C + h * hs;
                    double dd = 0;
                    for (int j = 0; j < hs; j++) dd += q[j] * kk[j];
                    p[s] = dd / sqrt((double)hs);
                    mx = fmax(mx, p[s]);
                }
                for (int s = 0; s <= t; s++) sum += p[s] = exp(p[s] - mx);
                double *o = k->out + ((size_t)b * T + t) * C + h * hs;
                for (int j = 0; j < hs; j++) {
                    double acc = 0;
                    for (int s = 0; s <= t; s++)
                        acc += p[s] / sum * k->qkv[((size_t)b * T + s) * 3 * C + 2 * C + h * hs + j];
                    o[j] = acc;
                }
            }
    free(p);
}
static double at_loss(void *p) {
    at_ctx *k = p;
    at_ref(k);
    return dot_w(k->out, k->dy, (size_t)k->B * k->T * k->C);
}
static double tiled_bytes_fwd(int T, int hs) {
    double kv = 0;
    for (int i0 = 0; i0 < T; i0 += MDC_ATTN_TILE) kv += fmin(T, i0 + MDC_ATTN_TILE);
    return 4.0 * (2.0 * T * hs + T + 2.0 * hs * kv);
}
static double tiled_bytes_bwd(int T, int hs) {
    double pairs = 0;
    for (int j0 = 0; j0 < T; j0 += MDC_ATTN_TILE)
        for (int i0 = j0; i0 < T; i0 += MDC_ATTN_TILE) pairs += fmin(MDC_ATTN_TILE, T - i0);
    return 4.0 * (9.0 * T * hs + pairs * (4.0 * hs + 2));
}
static void test_attention(mdc_device *d, int B, int T, int C, int NH, int fd) {
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    int hs = C / NH;
    float *qkv = fvec(nq, 1.5f), *dy = fvec(ny, 1), *out = fzeros(ny), *out2 = fzeros(ny);
    float *att = fzeros(na), *scr = fzeros(na), *lse = fzeros((size_t)B * NH * T);
    float *dq = fzeros(nq), *dq2 = fzeros(nq);
    at_ctx k = {dcopy(qkv, nq), dcopy(dy, ny), malloc(sizeof(double) * ny), B, T, C, NH};
    char name[96];
    double pc = 0.5 * T * (T + 1.0), bh = (double)B * NH;
    snprintf(name, sizeof name, "attention forward B%d T%d C%d NH%d", B, T, C, NH);
    mdc_attention_forward(d, out, att, qkv, B, T, C, NH);
    expect_charge(d, name, bh * (4.0 * hs + 5) * pc, bh * 4 * (4.0 * T * hs + 4 * pc));
    at_ref(&k);
    tu_near_vec(name, out, k.out, ny, 2e-6);
    mdc_attention_forward_tiled(d, out2, lse, qkv, B, T, C, NH);
    expect_charge(d, "attention forward tiled", bh * (4.0 * hs + 5) * pc, bh * tiled_bytes_fwd(T, hs));
    tu_near_vec("attention forward tiled vs reference", out2, k.out, ny, 2e-6);
    double *o1 = dcopy(out, ny);
    tu_near_vec("attention forward tiled vs plain", out2, o1, ny, 2e-6);
    mdc_attention_backward(d, dq, scr, dy, qkv, att, B, T, C, NH);
    expect_charge(d, "attention backward", bh * (8.0 * hs + 4) * pc, bh * 4 * (10.0 * T * hs + 7 * pc));
    mdc_attention_backward_tiled(d, dq2, dy, out2, qkv, lse, B, T, C, NH);
    expect_charge(d, "attention backward tiled", bh * ((10.0 * hs + 4) * pc + 2.0 * T * hs),
                  bh * tiled_bytes_bwd(T, hs));
    double *g1 = dcopy(dq, nq);
    tu_near_vec("attention backward tiled vs plain", dq2, g1, nq, 1e-5);
    if (fd) {
        tu_fd_check("attention dqkv (plain)", k.qkv, nq, dq, at_loss, &k);
        tu_fd_check("attention dqkv (tiled)", k.qkv, nq, dq2, at_loss, &k);
    }
    free(qkv), free(dy), free(out), free(out2), free(att), free(scr), free(lse), free(dq), free(dq2);
    free(k.qkv), free(k.dy), free(k.out), free(o1), free(g1);
}

/* ---- elementwise, embedding, softmax, cross-entropy ------------------------------------------------ */
typedef struct {
    double *x, *dy, *out;
    size_t n;
} ew_ctx;
static double gelu_ref(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
static double gelu_loss(void *p) {
    ew_ctx *k = p;
    double s = 0;
    for (size_t i = 0; i < k->n; i++) s += gelu_ref(k->x[i]) * k->dy[i];
    return s;
}
static void test_gelu(mdc_device *d) {
    size_t n = 1001;
    float *x = fvec(n, 5), *dy = fvec(n, 1), *out = fzeros(n), *dx = fzeros(n);
    x[0] = 0, x[1] = -30, x[2] = 30, x[3] = 1e-30f, x[4] = -9;
    ew_ctx k = {dcopy(x, n), dcopy(dy, n), malloc(sizeof(double) * n), n};
    mdc_gelu_forward(d, out, x, n);
    expect_charge(d, "gelu forward", 10.0 * n, 8.0 * n);
    for (size_t i = 0; i < n; i++) k.out[i] = gelu_ref(k.x[i]);
    tu_near_vec("gelu forward", out, k.out, n, 1e-6);
    mdc_gelu_backward(d, dx, x, dy, n);
    expect_charge(d, "gelu backward", 16.0 * n, 16.0 * n);
    tu_fd_check("gelu", k.x, n, dx, gelu_loss, &k);
    free(x), free(dy), free(out), free(dx), free(k.x), free(k.dy), free(k.out);
}

static void test_residual_encoder(mdc_device *d) {
    size_t n = 333;
    float *a = fvec(n, 1), *b = fvec(n, 1), *o = fzeros(n), *da = fvec(n, 1), *db = fvec(n, 1), *dy = fvec(n, 1);
    float *da0 = fdup(da, n), *db0 = fdup(db, n);
    mdc_residual_forward(d, o, a, b, n);
    expect_charge(d, "residual forward", (double)n, 12.0 * n);
    mdc_residual_backward(d, da, db, dy, n);
    expect_charge(d, "residual backward", 2.0 * n, 20.0 * n);
    for (size_t i = 0; i < n; i++) {
        TU_CHECK(o[i] == a[i] + b[i], "residual forward at %zu", i);
        TU_CHECK(da[i] == da0[i] + dy[i] && db[i] == db0[i] + dy[i], "residual backward at %zu", i);
    }
    free(a), free(b), free(o), free(da), free(db), free(dy), free(da0), free(db0);
    /* embedding, with repeated tokens: exact sums (integer-valued floats) */
    int B = 3, T = 5, C = 70, V = 9;
    int inp[15];
    for (int i = 0; i < B * T; i++) inp[i] = (i * 7) % 4;
    float *wte = fvec((size_t)V * C, 1), *wpe = fvec((size_t)T * C, 1), *out = fzeros((size_t)B * T * C);
    float *dout = malloc(sizeof(float) * B * T * C), *dwte = fzeros((size_t)V * C), *dwpe = fzeros((size_t)T * C);
    for (int i = 0; i < B * T * C; i++) dout[i] = (float)(i % 13 - 6);
    mdc_encoder_forward(d, out, inp, wte, wpe, B, T, C);
    double bt = B * T;
    expect_charge(d, "encoder forward", bt * C, 4 * (bt + 3 * bt * C));
    mdc_encoder_backward(d, dwte, dwpe, dout, inp, B, T, C);
    expect_charge(d, "encoder backward", 2 * bt * C, 4 * (bt + 5 * bt * C));
    for (int bb = 0; bb < B; bb++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                size_t i = ((size_t)bb * T + t) * C + c;
                TU_CHECK(out[i] == wte[(size_t)inp[bb * T + t] * C + c] + wpe[(size_t)t * C + c], "encoder at %zu", i);
            }
    for (int v = 0; v < V; v++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int i = 0; i < B * T; i++)
                if (inp[i] == v) s += dout[(size_t)i * C + c];
            TU_CHECK(dwte[(size_t)v * C + c] == s, "encoder dwte[%d,%d] %g != %g", v, c, dwte[(size_t)v * C + c], s);
        }
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int bb = 0; bb < B; bb++) s += dout[((size_t)bb * T + t) * C + c];
            TU_CHECK(dwpe[(size_t)t * C + c] == s, "encoder dwpe[%d,%d]", t, c);
        }
    free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe);
}

typedef struct {
    double *x;
    const int *tg;
    double dloss;
    int N, V, Vp;
} ce_ctx;
static double ce_loss(void *p) {
    ce_ctx *k = p;
    double tot = 0;
    for (int i = 0; i < k->N; i++) {
        const double *x = k->x + (size_t)i * k->Vp;
        double mx = -1e300, s = 0;
        for (int j = 0; j < k->V; j++) mx = fmax(mx, x[j]);
        for (int j = 0; j < k->V; j++) s += exp(x[j] - mx);
        tot += mx + log(s) - x[k->tg[i]];
    }
    return tot * k->dloss;
}
static void test_softmax_ce(mdc_device *d) {
    int N = 5, V = 37, Vp = 48;
    size_t n = (size_t)N * Vp;
    float *x = fvec(n, 8), *p = fzeros(n), *losses = fzeros(N), *lse = fzeros(N), *dx = fzeros(n);
    int tg[5] = {0, 36, 5, 5, 20};
    for (int i = 0; i < N; i++)
        for (int j = V; j < Vp; j++) x[(size_t)i * Vp + j] = 1e4f; /* padding ignored */
    ce_ctx k = {dcopy(x, n), tg, 1.0 / N, N, V, Vp};
    mdc_softmax_forward(d, p, x, N, V, Vp);
    expect_charge(d, "softmax forward", 5.0 * N * V, 4.0 * ((double)N * V + (double)N * Vp));
    double *pr = malloc(sizeof(double) * n), *lr = malloc(sizeof(double) * N);
    for (int i = 0; i < N; i++) {
        double mx = -1e300, s = 0;
        for (int j = 0; j < V; j++) mx = fmax(mx, k.x[(size_t)i * Vp + j]);
        for (int j = 0; j < V; j++) s += exp(k.x[(size_t)i * Vp + j] - mx);
        for (int j = 0; j < Vp; j++) pr[(size_t)i * Vp + j] = j < V ? exp(k.x[(size_t)i * Vp + j] - mx) / s : 0;
        lr[i] = mx + log(s) - k.x[(size_t)i * Vp + tg[i]];
    }
    tu_near_vec("softmax forward", p, pr, n, 1e-6);
    mdc_crossentropy_forward(d, losses, lse, x, tg, N, V, Vp);
    expect_charge(d, "cross-entropy forward", 4.0 * N * V + N, 4.0 * ((double)N * V + 3.0 * N));
    tu_near_vec("cross-entropy forward", losses, lr, N, 1e-6);
    mdc_crossentropy_backward(d, dx, x, lse, tg, 1.0f / N, N, V, Vp);
    expect_charge(d, "cross-entropy backward", 3.0 * N * V + N, 4.0 * ((double)N * V + (double)N * Vp + 2.0 * N));
    tu_fd_check("cross-entropy dlogits", k.x, n, dx, ce_loss, &k);
    float *xin = fdup(x, n); /* in place */
    mdc_crossentropy_backward(d, xin, xin, lse, tg, 1.0f / N, N, V, Vp);
    mdc_dev_reset_counters(d);
    tu_cmp_f32("cross-entropy backward in place", xin, dx, n);
    free(x), free(p), free(losses), free(lse), free(dx), free(k.x), free(pr), free(lr), free(xin);
}

/* ---- optimizer --------------------------------------------------------------------------------------- */
static void test_adamw(mdc_device *d) {
    size_t n = 50000;
    float *p = fvec(n, 1), *g = fvec(n, 0.1f), *m = fzeros(n), *v = fzeros(n);
    double *pd = dcopy(p, n), *md = calloc(n, sizeof(double)), *vd = calloc(n, sizeof(double));
    double norm = mdc_grad_norm(d, g, n);
    expect_charge(d, "grad norm", 2.0 * n, 4.0 * n);
    double nd = 0;
    for (size_t i = 0; i < n; i++) nd += (double)g[i] * g[i];
    TU_NEAR(norm, sqrt(nd), 1e-13);
    TU_CHECK(mdc_clip_scale(norm, 1.0f) == (float)(1.0 / (norm + 1e-6)), "clip scale");
    TU_CHECK(mdc_clip_scale(0.5, 1.0f) == 1.0f && mdc_clip_scale(5, 0) == 1.0f, "clip scale <= 1");
    float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, sc = 0.5f;
    for (int t = 1; t <= 3; t++) {
        mdc_adamw_update(d, p, m, v, g, n, lr, b1, b2, eps, wd, sc, t);
        expect_charge(d, "adamw", 15.0 * n, 28.0 * n);
        for (size_t i = 0; i < n; i++) {
            double gg = (double)g[i] * sc;
            pd[i] *= 1 - (double)lr * wd;
            md[i] = b1 * md[i] + (1 - (double)b1) * gg;
            vd[i] = b2 * vd[i] + (1 - (double)b2) * gg * gg;
            double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
            pd[i] -= lr / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + eps);
        }
    }
    tu_near_vec("adamw params after 3 steps", p, pd, n, 1e-6);
    tu_near_vec("adamw m", m, md, n, 1e-6);
    tu_near_vec("adamw v", v, vd, n, 1e-6);
    free(p), free(g), free(m), free(v), free(pd), free(md), free(vd);
}

/* ---- threads: the same bits with 1 and 2 OpenMP threads ----------------------------------------------- */
static void run_all(int threads, float **res, int *nres) {
    omp_set_num_threads(threads);
    tu_seed(12345);
    int B = 2, T = 150, C = 96, NH = 4, N = B * T, OC = 3 * C, V = 1000, Vp = 1024;
    size_t nq = (size_t)N * 3 * C, ny = (size_t)N * C, na = (size_t)B * NH * T * T;
    float *x = fvec(ny, 1), *w = fvec((size_t)C * OC, 0.1f), *b = fvec(OC, 1), *qkv = fzeros(nq);
    float *att = fzeros(na), *scr = fzeros(na), *lse = fzeros((size_t)B * NH * T), *o = fzeros(ny), *o2 = fzeros(ny);
    float *dy = fvec(ny, 1), *dq = fzeros(nq), *dq2 = fzeros(nq), *dx = fzeros(ny), *dw = fzeros((size_t)C * OC),
          *db = fzeros(OC);
    float *wte = fvec((size_t)Vp * C, 0.1f), *logits = fzeros((size_t)N * Vp), *losses = fzeros(N), *clse = fzeros(N);
    float *dwte = fzeros((size_t)Vp * C), *ln = fzeros(ny), *mean = fzeros(N), *rstd = fzeros(N), *dln = fzeros(ny),
          *lw = fzeros(C), *lb = fzeros(C);
    float *big = fvec((size_t)40000 * 7, 1.0f);
    int *tg = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) tg[i] = (i * 31) % V;
    mdc_layernorm_forward(NULL, ln, mean, rstd, x, b, b, N, C);
    mdc_matmul_forward(NULL, qkv, ln, w, b, N, C, OC);
    mdc_attention_forward(NULL, o, att, qkv, B, T, C, NH);
    mdc_attention_forward_tiled(NULL, o2, lse, qkv, B, T, C, NH);
    mdc_attention_backward(NULL, dq, scr, dy, qkv, att, B, T, C, NH);
    mdc_attention_backward_tiled(NULL, dq2, dy, o2, qkv, lse, B, T, C, NH);
    mdc_matmul_backward(NULL, dx, dw, db, dq, ln, w, N, C, OC);
    mdc_layernorm_backward(NULL, dln, lw, lb, dx, x, b, mean, rstd, N, C);
    mdc_lmhead_forward(NULL, logits, o, wte, N, C, Vp);
    mdc_crossentropy_forward(NULL, losses, clse, logits, tg, N, V, Vp);
    mdc_crossentropy_backward(NULL, logits, logits, clse, tg, 1.0f / N, N, V, Vp);
    mdc_lmhead_backward(NULL, dln, dwte, logits, o, wte, N, C, Vp);
    mdc_gelu_backward(NULL, dln, o, o2, ny);
    float norm = (float)mdc_grad_norm(NULL, big, (size_t)40000 * 7);
    float *outs[] = {o, o2, dq, dq2, dx, dw, db, dln, lw, lb, logits, losses, dwte};
    size_t ns[] = {ny, ny, nq, nq, ny, (size_t)C * OC, OC, ny, C, C, (size_t)N * Vp, N, (size_t)Vp * C};
    int k = 0;
    for (int i = 0; i < 13; i++) res[k++] = fdup(outs[i], ns[i]);
    res[k] = malloc(sizeof(float));
    res[k++][0] = norm;
    *nres = k;
    free(x), free(w), free(b), free(qkv), free(att), free(scr), free(lse), free(o), free(o2), free(dy), free(dq);
    free(dq2), free(dx), free(dw), free(db), free(wte), free(logits), free(losses), free(clse), free(dwte);
    free(ln), free(mean), free(rstd), free(dln), free(lw), free(lb), free(big), free(tg);
}
static void test_threads(void) {
    static const char *names[] = {
        "attention out",     "tiled out",       "attention dqkv", "tiled dqkv",
        "matmul dinp",       "matmul dweight",  "matmul dbias",   "layernorm/lmhead/gelu dinp",
        "layernorm dweight", "layernorm dbias", "dlogits",        "losses",
        "lm head dwte",      "grad norm"};
    size_t ns[] = {300 * 96, 300 * 96, 300 * 288, 300 * 288,  300 * 96, 96 * 288,  288,
                   300 * 96, 96,       96,        300 * 1024, 300,      1024 * 96, 1};
    float *r1[16], *r2[16];
    int n1, n2;
    run_all(1, r1, &n1);
    run_all(2, r2, &n2);
    int same = 1;
    for (int i = 0; i < n1; i++) {
        char what[80];
        snprintf(what, sizeof what, "1 vs 2 threads: %s", names[i]);
        same &= tu_cmp_f32(what, r2[i], r1[i], ns[i]);
        free(r1[i]), free(r2[i]);
    }
    printf("thread-count independence (1 vs 2 threads, 14 outputs): %s\n", same ? "bit-identical" : "DIFFERENT");
}

/* the fixed partition of the blocked sgemm: products big enough to be split, and one with the
 * K split (K >= 8 max(M, N)), equal to a double reference */
static void test_big_products(mdc_device *d) {
    int M = 20, K = 9000, OC = 30;
    float *a = fvec((size_t)M * K, 1), *w = fvec((size_t)K * OC, 1), *out = fzeros((size_t)M * OC);
    mm_ctx k = {
        dcopy(a, (size_t)M * K), dcopy(w, (size_t)K * OC), NULL, NULL, malloc(sizeof(double) * M * OC), M, K, OC};
    mdc_matmul_forward(d, out, a, w, NULL, M, K, OC);
    mdc_dev_reset_counters(d);
    mm_ref(&k);
    tu_near_vec("matmul with the K split (20x9000x30)", out, k.out, (size_t)M * OC, 1e-5);
    free(a), free(w), free(out), free(k.x), free(k.w), free(k.out);
}

/* ---- non-finite and huge inputs ----------------------------------------------------------------- */
/* the bits of got equal those of want (NaN: any NaN) */
static void same_float(const char *what, size_t i, float got, float want) {
    int ok = isnan(want) ? isnan(got) != 0 : !memcmp(&got, &want, sizeof got);
    TU_CHECK(ok, "%s: element %zu: got %a, want %a", what, i, got, want);
}
static void test_nonfinite(mdc_device *d) {
    /* mdc_k_exp itself, scalar and in a vectorized loop as the kernels call it */
    enum { NE = 13 };
    const float ex[NE] = {NAN,      -NAN,  INFINITY,      -INFINITY, 1e30f,  -1e30f, FLT_MAX,
                          -FLT_MAX, 88.8f, MDC_K_EXP_MAX, 0.0f,      -88.0f, 3e9f};
    const float ew[NE] = {NAN,  NAN,      INFINITY, 0.0f,     INFINITY,
                          0.0f, INFINITY, 0.0f,     INFINITY, -1 /* finite, checked below */,
                          1.0f, 0.0f,     INFINITY};
    float ev[NE];
#pragma omp simd
    for (int i = 0; i < NE; i++) ev[i] = mdc_k_exp(ex[i]);
    for (int i = 0; i < NE; i++) {
        if (ew[i] == -1) {
            TU_CHECK(isfinite(ev[i]) && ev[i] > 1e38f, "exp(%a) = %a, want finite", ex[i], ev[i]);
            continue;
        }
        same_float("mdc_k_exp (vectorized)", (size_t)i, ev[i], ew[i]);
        same_float("mdc_k_exp", (size_t)i, mdc_k_exp(ex[i]), ew[i]);
    }
    TU_CHECK(fabs(mdc_k_exp(1.0f) - M_E) < 1e-6, "exp(1) = %.9g", mdc_k_exp(1.0f));

    /* GELU: exp(-2u) overflows to inf for x < about -10.3, so y is exactly -0 there (as
     * 0.5 x (1 + tanh u) is in float), not x / exp(88.3) */
    enum { NG = 8 };
    float gx[NG] = {NAN, INFINITY, -INFINITY, -20.0f, -1e30f, 1e30f, 0.0f, -3e9f};
    const float gy[NG] = {NAN, INFINITY, NAN, -0.0f, -0.0f, 1e30f, 0.0f, -0.0f};
    float gout[NG], gdx[NG] = {0}, gdy[NG] = {1, 1, 1, 1, 1, 1, 1, 1};
    mdc_gelu_forward(d, gout, gx, NG);
    mdc_gelu_backward(d, gdx, gx, gdy, NG);
    mdc_dev_reset_counters(d);
    for (int i = 0; i < NG; i++) same_float("gelu forward, non-finite", (size_t)i, gout[i], gy[i]);
    same_float("gelu backward at NaN", 0, gdx[0], NAN);
    same_float("gelu backward at -20", 3, gdx[3], 0.0f);

    /* softmax and cross-entropy: a NaN row is NaN; -inf logits get probability exactly 0 */
    enum { V = 4, Vp = 5 };
    float lx[3 * Vp] = {NAN, 0, 1, 2, 0, /* */ -INFINITY, 0, -INFINITY, 0, 0, /* */ 1, -1e30f, -INFINITY, 1, 7};
    float lp[3 * Vp], ll[3], lse[3], ldx[3 * Vp];
    int tg[3] = {1, 1, 0};
    mdc_softmax_forward(d, lp, lx, 3, V, Vp);
    mdc_crossentropy_forward(d, ll, lse, lx, tg, 3, V, Vp);
    mdc_crossentropy_backward(d, ldx, lx, lse, tg, 1.0f, 3, V, Vp);
    mdc_dev_reset_counters(d);
    const float pw[3 * Vp] = {NAN, NAN, NAN, NAN, 0, 0, 0.5f, 0, 0.5f, 0, 0.5f, 0, 0, 0.5f, 0};
    for (int i = 0; i < 3 * Vp; i++) same_float("softmax forward, non-finite", (size_t)i, lp[i], pw[i]);
    same_float("cross-entropy of a NaN row", 0, ll[0], NAN);
    same_float("cross-entropy dlogits of a NaN row", 0, ldx[0], NAN);
    same_float("cross-entropy with -inf logits", 1, ll[1], logf(2.0f));
    same_float("cross-entropy dlogits of a -inf logit", 5, ldx[5], 0.0f);
    same_float("cross-entropy dlogits of a -1e30 logit", 11, ldx[11], 0.0f);

    /* attention, plain and tiled (whose running max starts at -inf: exp(-inf - -inf) is
     * exp(NaN)): a NaN query makes its own row of the head NaN and leaves the others finite */
    int B = 1, T = 3, C = 4, NH = 2, hs = C / NH;
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C;
    float *qkv = fvec(nq, 1), *o1 = fzeros(ny), *o2 = fzeros(ny), *att = fzeros((size_t)B * NH * T * T);
    float *lse2 = fzeros((size_t)B * NH * T);
    qkv[0] = NAN; /* q of token 0, head 0 */
    mdc_attention_forward(d, o1, att, qkv, B, T, C, NH);
    mdc_attention_forward_tiled(d, o2, lse2, qkv, B, T, C, NH);
    mdc_dev_reset_counters(d);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)t * C + c;
            int want_nan = t == 0 && c < hs, nan1 = isnan(o1[i]) != 0, nan2 = isnan(o2[i]) != 0;
            TU_CHECK(nan1 == want_nan && nan2 == want_nan,
                     "attention with a NaN query: out[%d][%d] = %g (plain), %g (tiled)", t, c, o1[i], o2[i]);
        }
    free(qkv), free(o1), free(o2), free(att), free(lse2);
}

int main(void) {
    mdc_device *d = tu_device(1.0);
    test_layernorm(d);
    test_matmul(d, 5, 7, 9);
    test_matmul(d, 300, 40, 200); /* blocked: 2+ sgemm blocks */
    test_lmhead(d);
    test_attention(d, 2, 5, 12, 3, 1);
    test_attention(d, 1, 70, 8, 2, 1);   /* two tiles, a partial one */
    test_attention(d, 2, 200, 64, 4, 0); /* 4 tiles: tiled vs plain only */
    test_gelu(d);
    test_residual_encoder(d);
    test_softmax_ce(d);
    test_adamw(d);
    test_big_products(d);
    test_nonfinite(d);
    test_threads();
    mdc_device_free(d);
    return tu_finish("test_kernels");
}
