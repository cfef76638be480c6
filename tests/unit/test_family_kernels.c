/* The Llama / Qwen layer kernels (kernels/rmsnorm.c, swiglu.c, rope.c): RMSNorm forward against a
 * double reference, backward against finite differences of it and an analytic double gradient,
 * each backward part alone bit-identical to both at once; SwiGLU against double references and
 * finite for extreme gates; RoPE's inverse frequencies (default and llama3) against double
 * formulas, minidc's sin/cos against the C library's, the tables against libm's float results,
 * the rotation against HF's float32 expression and a double reference, its transpose, and a
 * planted interleaved rotation (Meta's convention) that must differ. Bits identical with 1 and
 * 4 OpenMP threads; the charges equal the kernels' formulas. One line per check; exits 1 on a
 * failure, printing the first bad index. */
#include <float.h>
#include <omp.h>
#include <stdarg.h>

#include "testutil.h"

/* ---- helpers --------------------------------------------------------------------------------- */
static float *fvec(size_t n, float scale) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = scale * tu_frand();
    return x;
}
static float *fzeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *dalloc(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static double *dcopy(const float *x, size_t n) {
    double *d = dalloc(n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static float *fdup(const float *x, size_t n) {
    float *y = malloc(sizeof(float) * (n ? n : 1));
    memcpy(y, x, sizeof(float) * n);
    return y;
}
static double dot_w(const double *out, const double *w, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += out[i] * w[i];
    return s;
}

/* one line per check */
static void report(const char *what, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(const char *what, int ok, const char *fmt, ...) {
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("%-56s %s%s\n", what, buf, ok ? "" : "  FAIL");
    if (!ok) tu_failures++;
}

/* |got - want| <= tol |want| for every element; prints the max relative error, a failure the
 * first bad index */
static void near_each(const char *what, const float *got, const double *want, size_t n, double tol) {
    double maxe = 0;
    size_t first = n;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]), rel = want[i] != 0 ? e / fabs(want[i]) : e;
        if (!(rel <= maxe)) maxe = rel;
        if (!(rel <= tol) && first == n) first = i;
    }
    report(what, first == n, "max rel err %.3g (tol %g)", maxe, tol);
    if (first < n)
        fprintf(stderr, "%s: first bad index %zu: got %.9g want %.17g\n", what, first, got[first], want[first]);
}

/* |got - want| <= tol max(max|want|, 1e-30): relative to the tensor's largest element */
static void near_max(const char *what, const float *got, const double *want, size_t n, double tol) {
    double maxw = 1e-30, maxe = 0;
    size_t first = n;
    for (size_t i = 0; i < n; i++) maxw = fmax(maxw, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= maxe)) maxe = e;
        if (!(e <= tol * maxw) && first == n) first = i;
    }
    report(what, first == n, "max err %.3g (rel to max %.3g, tol %g)", maxe, maxe / maxw, tol);
    if (first < n)
        fprintf(stderr, "%s: first bad index %zu: got %.9g want %.17g\n", what, first, got[first], want[first]);
}

static void same_bits(const char *what, const float *got, const float *want, size_t n) {
    int ok = tu_cmp_f32(what, got, want, n);
    printf("%-56s %s\n", what, ok ? "bit-identical" : "DIFFERENT  FAIL");
}

static void expect_charge(mdc_device *d, const char *what, double flops, double bytes) {
    mdc_dev_counters c;
    mdc_dev_get_counters(d, &c);
    int ok = c.flops == flops && c.hbm_bytes == bytes && c.kernels == 1;
    report(what, ok, "%.17g FLOPs, %.17g bytes, %g kernel(s)", c.flops, c.hbm_bytes, c.kernels);
    if (!ok) fprintf(stderr, "%s: formula %.17g FLOPs, %.17g bytes, 1 kernel\n", what, flops, bytes);
    mdc_dev_reset_counters(d);
}

/* ---- RMSNorm --------------------------------------------------------------------------------- */
typedef struct {
    double *x, *w, *dy, *out;
    int N, C;
    double eps;
} rms_ctx;
static void rms_ref(rms_ctx *k) {
    for (int i = 0; i < k->N; i++) {
        const double *x = k->x + (size_t)i * k->C;
        double v = 0;
        for (int c = 0; c < k->C; c++) v += x[c] * x[c];
        double r = 1 / sqrt(v / k->C + k->eps);
        for (int c = 0; c < k->C; c++) k->out[(size_t)i * k->C + c] = k->w[c] * (x[c] * r);
    }
}
static double rms_loss(void *p) {
    rms_ctx *k = p;
    rms_ref(k);
    return dot_w(k->out, k->dy, (size_t)k->N * k->C);
}
/* the analytic gradient in double: dx = r (g - n mean(g n)), dw = sum_rows dy n */
static void rms_grad_ref(const rms_ctx *k, double *dx, double *dw) {
    for (int c = 0; c < k->C; c++) dw[c] = 0;
    for (int i = 0; i < k->N; i++) {
        const double *x = k->x + (size_t)i * k->C, *dy = k->dy + (size_t)i * k->C;
        double v = 0, sgn = 0;
        for (int c = 0; c < k->C; c++) v += x[c] * x[c];
        double r = 1 / sqrt(v / k->C + k->eps);
        for (int c = 0; c < k->C; c++) sgn += dy[c] * k->w[c] * x[c] * r;
        sgn /= k->C;
        for (int c = 0; c < k->C; c++) {
            double n = x[c] * r;
            dx[(size_t)i * k->C + c] = r * (dy[c] * k->w[c] - n * sgn);
            dw[c] += dy[c] * n;
        }
    }
}

static void test_rmsnorm(mdc_device *d, int N, int C, float eps) {
    size_t n = (size_t)N * C;
    char what[96];
    float *x = fvec(n, 2), *w = fvec(C, 1), *dy = fvec(n, 1), *out = fzeros(n), *rstd = fzeros(N);
    for (size_t i = 0; i < n; i++) x[i] += 0.25f;
    float *dx = fzeros(n), *dw = fzeros(C), *dx0 = fvec(n, 1), *dw0 = fvec(C, 1);
    rms_ctx k = {dcopy(x, n), dcopy(w, C), dcopy(dy, n), dalloc(n), N, C, eps};
    double nc = (double)N * C;

    mdc_rmsnorm_forward(d, out, rstd, x, w, N, C, eps);
    snprintf(what, sizeof what, "rmsnorm forward charge (N=%d C=%d)", N, C);
    expect_charge(d, what, 4 * nc, 4.0 * (2 * nc + C + N));
    rms_ref(&k);
    snprintf(what, sizeof what, "rmsnorm forward vs double (N=%d C=%d)", N, C);
    near_each(what, out, k.out, n, 1e-6);

    mdc_rmsnorm_backward(d, dx, dw, dy, x, w, rstd, N, C);
    snprintf(what, sizeof what, "rmsnorm backward charge (N=%d C=%d)", N, C);
    expect_charge(d, what, 13 * nc, 4.0 * (4 * nc + 3 * C + N));
    float *gx = dx, *gw = dw;
    double *rdx = dalloc(n), *rdw = dalloc(C);
    rms_grad_ref(&k, rdx, rdw);
    snprintf(what, sizeof what, "rmsnorm dinp vs analytic double (N=%d C=%d)", N, C);
    near_max(what, gx, rdx, n, 1e-5);
    snprintf(what, sizeof what, "rmsnorm dweight vs analytic double (N=%d C=%d)", N, C);
    near_max(what, gw, rdw, C, 1e-5);
    /* the analytic formula itself against finite differences, and the float kernel too */
    float *rdxf = fzeros(n), *rdwf = fzeros(C);
    for (size_t i = 0; i < n; i++) rdxf[i] = (float)rdx[i];
    for (int c = 0; c < C; c++) rdwf[c] = (float)rdw[c];
    snprintf(what, sizeof what, "rmsnorm dinp (N=%d C=%d)", N, C);
    tu_fd_check(what, k.x, n, gx, rms_loss, &k);
    snprintf(what, sizeof what, "rmsnorm dweight (N=%d C=%d)", N, C);
    tu_fd_check(what, k.w, C, gw, rms_loss, &k);
    snprintf(what, sizeof what, "rmsnorm analytic double dinp (N=%d C=%d)", N, C);
    tu_fd_check(what, k.x, n, rdxf, rms_loss, &k);

    /* accumulation (+=) from nonzero gradients: the float sums dx0 + (the gradient from zero);
     * either part alone: the same bits as both at once */
    float *bx = fdup(dx0, n), *bw = fdup(dw0, C), *ax = fdup(dx0, n), *aw = fdup(dw0, C);
    mdc_rmsnorm_backward(NULL, bx, bw, dy, x, w, rstd, N, C);
    for (size_t i = 0; i < n; i++) dx0[i] += dx[i];
    for (int c = 0; c < C; c++) dw0[c] += dw[c];
    snprintf(what, sizeof what, "rmsnorm dinp accumulates (+=) (N=%d C=%d)", N, C);
    same_bits(what, bx, dx0, n);
    snprintf(what, sizeof what, "rmsnorm dweight accumulates (+=) (N=%d C=%d)", N, C);
    same_bits(what, bw, dw0, C);
    mdc_rmsnorm_backward(d, ax, NULL, dy, x, w, rstd, N, C);
    expect_charge(d, "rmsnorm backward dinp-only charge", 10 * nc, 4.0 * (4 * nc + C + N));
    mdc_rmsnorm_backward(d, NULL, aw, dy, x, w, rstd, N, C);
    expect_charge(d, "rmsnorm backward dweight-only charge", 3 * nc, 4.0 * (2 * nc + 2 * C + N));
    snprintf(what, sizeof what, "rmsnorm dinp alone vs both (N=%d C=%d)", N, C);
    same_bits(what, ax, bx, n);
    snprintf(what, sizeof what, "rmsnorm dweight alone vs both (N=%d C=%d)", N, C);
    same_bits(what, aw, bw, C);

    free(x), free(w), free(dy), free(out), free(rstd), free(dx), free(dw), free(dx0), free(dw0), free(bx), free(bw);
    free(rdx), free(rdw), free(rdxf), free(rdwf), free(ax), free(aw);
    free(k.x), free(k.w), free(k.dy), free(k.out);
}

/* forward and backward outputs with `threads` threads, into r[0..3] */
static void rms_run(int threads, int N, int C, float *r[4]) {
    size_t n = (size_t)N * C;
    tu_seed(12345);
    float *x = fvec(n, 3), *w = fvec(C, 1), *dy = fvec(n, 1);
    r[0] = fzeros(n), r[1] = fzeros(N), r[2] = fvec(n, 1), r[3] = fvec(C, 1);
    omp_set_num_threads(threads);
    mdc_rmsnorm_forward(NULL, r[0], r[1], x, w, N, C, 1e-6f);
    mdc_rmsnorm_backward(NULL, r[2], r[3], dy, x, w, r[1], N, C);
    free(x), free(w), free(dy);
}
static void test_rmsnorm_threads(int N, int C) {
    static const char *names[] = {"out", "rstd", "dinp", "dweight"};
    size_t ns[] = {(size_t)N * C, (size_t)N, (size_t)N * C, (size_t)C};
    float *a[4], *b[4];
    int nt = omp_get_max_threads();
    rms_run(1, N, C, a);
    rms_run(4, N, C, b);
    omp_set_num_threads(nt);
    for (int i = 0; i < 4; i++) {
        char what[96];
        snprintf(what, sizeof what, "rmsnorm 1 vs 4 threads: %s (N=%d C=%d)", names[i], N, C);
        same_bits(what, b[i], a[i], ns[i]);
        free(a[i]), free(b[i]);
    }
}

/* ---- SwiGLU ---------------------------------------------------------------------------------- */
typedef struct {
    double *g, *u, *dy, *out;
    size_t n;
} sw_ctx;
static double silu_d(double g) { return g / (1 + exp(-g)); }
static void sw_ref(sw_ctx *k) {
    for (size_t i = 0; i < k->n; i++) k->out[i] = silu_d(k->g[i]) * k->u[i];
}
static double sw_loss(void *p) {
    sw_ctx *k = p;
    sw_ref(k);
    return dot_w(k->out, k->dy, k->n);
}
/* the kernels take the fused gate|up rows (N, 2F); these pack separate gate and up (N, F) arrays */
static float *sw_pack(const float *g, const float *u, int N, int F) {
    float *gu = malloc((size_t)N * 2 * F * sizeof(float));
    for (int r = 0; r < N; r++)
        for (int i = 0; i < F; i++)
            gu[(size_t)r * 2 * F + i] = g[(size_t)r * F + i], gu[(size_t)r * 2 * F + F + i] = u[(size_t)r * F + i];
    return gu;
}
static void sw_fwd(mdc_device *d, float *out, const float *g, const float *u, int N, int F) {
    float *gu = sw_pack(g, u, N, F);
    mdc_swiglu_forward(d, out, gu, N, F);
    free(gu);
}
static void sw_bwd(mdc_device *d, float *dg, float *du, const float *g, const float *u, const float *dy, int N, int F) {
    float *gu = sw_pack(g, u, N, F), *dgu = sw_pack(dg, du, N, F);
    mdc_swiglu_backward(d, dgu, gu, dy, N, F);
    for (int r = 0; r < N; r++)
        for (int i = 0; i < F; i++)
            dg[(size_t)r * F + i] = dgu[(size_t)r * 2 * F + i], du[(size_t)r * F + i] = dgu[(size_t)r * 2 * F + F + i];
    free(gu), free(dgu);
}
static void test_swiglu(mdc_device *d) {
    int N = 17, F = 59; /* n = 1003 */
    size_t n = (size_t)N * F;
    float *g = fvec(n, 6), *u = fvec(n, 2), *dy = fvec(n, 1), *out = fzeros(n);
    float *dg = fzeros(n), *du = fzeros(n);
    sw_ctx k = {dcopy(g, n), dcopy(u, n), dcopy(dy, n), dalloc(n), n};
    sw_fwd(d, out, g, u, N, F);
    expect_charge(d, "swiglu forward charge", 5.0 * n, 12.0 * n);
    sw_ref(&k);
    near_each("swiglu forward vs double", out, k.out, n, 1e-6);
    sw_bwd(d, dg, du, g, u, dy, N, F);
    expect_charge(d, "swiglu backward charge", 14.0 * n, 28.0 * n);
    double *rdg = dalloc(n), *rdu = dalloc(n);
    for (size_t i = 0; i < n; i++) {
        double x = k.g[i], s = 1 / (1 + exp(-x));
        rdu[i] = k.dy[i] * silu_d(x);
        rdg[i] = k.dy[i] * k.u[i] * s * (1 + x * (1 - s));
    }
    near_max("swiglu dgate vs analytic double", dg, rdg, n, 1e-6);
    near_each("swiglu dup vs analytic double", du, rdu, n, 1e-6);
    tu_fd_check("swiglu dgate", k.g, n, dg, sw_loss, &k);
    tu_fd_check("swiglu dup", k.u, n, du, sw_loss, &k);
    /* the backward accumulates: from g0, the float sums g0 + (the gradients from zero) */
    float *dg0 = fvec(n, 1), *du0 = fvec(n, 1), *ag = fdup(dg0, n), *au = fdup(du0, n);
    sw_bwd(NULL, ag, au, g, u, dy, N, F);
    for (size_t i = 0; i < n; i++) dg0[i] += dg[i], du0[i] += du[i];
    same_bits("swiglu dgate accumulates (+=)", ag, dg0, n);
    same_bits("swiglu dup accumulates (+=)", au, du0, n);

    /* 1 vs 4 threads */
    int nt = omp_get_max_threads();
    float *o1 = fzeros(n), *o4 = fzeros(n), *g1 = fzeros(n), *g4 = fzeros(n), *u1 = fzeros(n), *u4 = fzeros(n);
    omp_set_num_threads(1);
    sw_fwd(NULL, o1, g, u, N, F);
    sw_bwd(NULL, g1, u1, g, u, dy, N, F);
    omp_set_num_threads(4);
    sw_fwd(NULL, o4, g, u, N, F);
    sw_bwd(NULL, g4, u4, g, u, dy, N, F);
    omp_set_num_threads(nt);
    same_bits("swiglu 1 vs 4 threads: out", o4, o1, n);
    same_bits("swiglu 1 vs 4 threads: dgate", g4, g1, n);
    same_bits("swiglu 1 vs 4 threads: dup", u4, u1, n);

    /* extreme gates: finite, silu(-100) and sigmoid(-100) ~ 0, silu(100) = 100 */
    static const float ge[] = {100,    -100, 1e30f, -1e30f,  87.5f,    -87.5f, 88.5f,
                               -88.5f, 89,   -89,   FLT_MAX, -FLT_MAX, 0,      -0.0f};
    size_t m = sizeof ge / sizeof ge[0];
    float eu[16], edy[16], eo[16], eg[16], eup[16];
    for (size_t i = 0; i < m; i++) eu[i] = 0.25f, edy[i] = -0.5f, eg[i] = eup[i] = 0;
    sw_fwd(NULL, eo, ge, eu, 1, (int)m);
    sw_bwd(NULL, eg, eup, ge, eu, edy, 1, (int)m);
    size_t bad = m;
    for (size_t i = 0; i < m && bad == m; i++)
        if (!isfinite(eo[i]) || !isfinite(eg[i]) || !isfinite(eup[i])) bad = i;
    report("swiglu extreme gates (|g| = 87.5 .. FLT_MAX) finite", bad == m, "%zu inputs", m);
    if (bad < m)
        fprintf(stderr, "first bad index %zu: g %g out %g dgate %g dup %g\n", bad, ge[bad], eo[bad], eg[bad], eup[bad]);
    int ok = fabsf(eo[1]) < 1e-30f && fabsf(eg[1]) < 1e-30f && fabsf(eup[1]) < 1e-30f && eo[0] == 25.0f &&
             eg[0] == -0.125f && eup[0] == -50.0f && eo[2] == 0.25e30f && eo[3] == 0 && eg[3] == 0;
    report("swiglu g = +-100, +-1e30: the limits", ok, "silu(-100)*u %g, dgate(-100) %g, silu(100)*u %g", eo[1], eg[1],
           eo[0]);

    free(g), free(u), free(dy), free(out), free(dg), free(du), free(dg0), free(du0), free(ag), free(au), free(rdg);
    free(rdu);
    free(o1), free(o4), free(g1), free(g4), free(u1), free(u4);
    free(k.g), free(k.u), free(k.dy), free(k.out);
}

/* ---- RoPE: frequencies ----------------------------------------------------------------------- */
/* 1 / theta^(2i/d) in double, the exponent as the float HF divides */
static double inv_freq_d(int i, int d, double theta) { return 1.0 / pow(theta, (double)((float)(2 * i) / (float)d)); }

static void test_inv_freq(int d, double theta) {
    float f[256];
    double r[256];
    mdc_rope_inv_freq(f, d, theta, NULL);
    for (int i = 0; i < d / 2; i++) r[i] = inv_freq_d(i, d, theta);
    char what[96];
    snprintf(what, sizeof what, "rope inv_freq d=%d theta=%g vs double", d, theta);
    near_each(what, f, r, (size_t)d / 2, 2e-7);
}

/* Llama 3.1: factor 8, low 1, high 4, original 8192, theta 500000, d 128 */
static void test_llama3(void) {
    int d = 128;
    double theta = 500000, factor = 8, lo = 1, hi = 4, old = 8192;
    mdc_rope_llama3 l3 = {8.0f, 1.0f, 4.0f, 8192};
    float f[64];
    double r[64];
    int regime[3] = {0, 0, 0};
    mdc_rope_inv_freq(f, d, theta, &l3);
    for (int i = 0; i < d / 2; i++) {
        double inv = inv_freq_d(i, d, theta), wl = 2 * M_PI / inv;
        if (wl < old / hi) r[i] = inv, regime[0]++;
        else if (wl > old / lo) r[i] = inv / factor, regime[2]++;
        else {
            double s = (old / wl - lo) / (hi - lo);
            r[i] = (1 - s) * inv / factor + s * inv;
            regime[1]++;
        }
    }
    near_each("rope llama3 inv_freq (Llama-3.1) vs double", f, r, (size_t)d / 2, 1e-6);
    report("rope llama3: high, medium, low frequencies all present", regime[0] && regime[1] && regime[2],
           "%d kept, %d smoothed, %d divided", regime[0], regime[1], regime[2]);
}

/* ---- RoPE: sin and cos ----------------------------------------------------------------------- */
static void test_sincos(void) {
    double maxe = 0;
    size_t first = 0, bad = 0;
    int n = 100000;
    for (int i = 0; i < n + 2000; i++) {
        double x;
        if (i < n) x = 2e6 * ((double)tu_frand() + (double)tu_frand() * 0x1p-24); /* ~48 random bits */
        else if (i < n + 1000) x = (double)(i - n - 500) * (M_PI / 2);            /* near multiples of pi/2 */
        else x = (double)((i - n - 1000) * 1273) * (M_PI / 2);                    /* ... up to 1.3e6 of them */
        double s, c;
        mdc_rope_sincos(x, &s, &c);
        double e = fmax(fabs(s - sin(x)), fabs(c - cos(x)));
        if (!(e <= maxe)) maxe = e;
        if (!(e <= 1e-12) && !bad++) first = (size_t)i;
    }
    report("rope sin/cos vs libm, 1e5 in [-2e6, 2e6] + 2000 near k pi/2", !bad, "max abs err %.3g (tol 1e-12)", maxe);
    if (bad) fprintf(stderr, "sincos: %zu bad, first bad index %zu\n", bad, first);
    double s, c;
    mdc_rope_sincos(0.0, &s, &c);
    int ok = s == 0 && c == 1;
    mdc_rope_sincos(INFINITY, &s, &c);
    ok &= isnan(s) && isnan(c);
    mdc_rope_sincos(NAN, &s, &c);
    ok &= isnan(s) && isnan(c);
    report("rope sin/cos of 0, inf, NaN", ok, "%s", ok ? "0 1, NaN, NaN" : "wrong");
}

/* ulps between two finite floats of the same sign (or both near 0) */
static long ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return labs((long)ia - (long)ib);
}

static void test_tables(void) {
    int d = 128, h = d / 2, P = 300;
    mdc_rope_llama3 l3 = {8.0f, 1.0f, 4.0f, 8192};
    float inv[64];
    mdc_rope_inv_freq(inv, d, 500000, &l3);
    int *pos = malloc(sizeof(int) * P);
    for (int p = 0; p < P; p++) pos[p] = p < 100 ? p : p < 200 ? 8000 + 37 * p : 131072 - 1 - 3 * (p - 200);
    float *ct = fzeros((size_t)P * h), *st = fzeros((size_t)P * h);
    mdc_rope_table(ct, st, inv, d, pos, 0, P);
    double maxn = 0;
    long maxu = 0, differ = 0;
    size_t first = (size_t)-1;
    for (int p = 0; p < P; p++)
        for (int j = 0; j < h; j++) {
            size_t i = (size_t)p * h + j;
            float a = (float)pos[p] * inv[j];
            float lc = (float)cos((double)a), ls = (float)sin((double)a);
            long u = ulps(ct[i], lc) > ulps(st[i], ls) ? ulps(ct[i], lc) : ulps(st[i], ls);
            if (u > maxu) maxu = u;
            if (u) differ++;
            if (u > 1 && first == (size_t)-1) first = i;
            double nn = fabs((double)ct[i] * ct[i] + (double)st[i] * st[i] - 1);
            if (nn > maxn) maxn = nn;
        }
    report("rope tables vs libm's float cos/sin (pos to 131071)", maxu <= 1, "max %ld ulp, %ld of %d differ", maxu,
           differ, 2 * P * h);
    if (first != (size_t)-1) fprintf(stderr, "tables: first bad index %zu\n", first);
    report("rope tables: cos^2 + sin^2 - 1", maxn <= 4e-7, "max |err| %.3g (tol 4e-7)", maxn);
    /* pos NULL: pos0 + p, the same as the explicit positions */
    float *c2 = fzeros(100 * (size_t)h), *s2 = fzeros(100 * (size_t)h);
    mdc_rope_table(c2, s2, inv, d, NULL, 0, 100);
    same_bits("rope table pos NULL vs explicit pos (cos)", c2, ct, 100 * (size_t)h);
    same_bits("rope table pos NULL vs explicit pos (sin)", s2, st, 100 * (size_t)h);
    free(pos), free(ct), free(st), free(c2), free(s2);
}

/* ---- RoPE: the rotation ---------------------------------------------------------------------- */
static void test_rope_apply(mdc_device *d) {
    int B = 2, T = 5, heads = 3, hd = 16, h = hd / 2, ld = heads * hd + 7, N = B * T;
    size_t n = (size_t)N * ld;
    float inv[8], *ct = fzeros((size_t)T * h), *st = fzeros((size_t)T * h);
    mdc_rope_inv_freq(inv, hd, 10000, NULL);
    mdc_rope_table(ct, st, inv, hd, NULL, 3, T);
    float *x0 = fvec(n, 1), *x = fdup(x0, n), *hf = fdup(x0, n);
    double *ref = dcopy(x0, n), *meta = dcopy(x0, n);
    mdc_rope_forward(d, x, ld, heads, hd, ct, st, B, T);
    expect_charge(d, "rope forward charge", 3.0 * N * heads * hd, 4.0 * (2.0 * N * heads * hd + (double)T * hd));
    for (int r = 0; r < N; r++)
        for (int k = 0; k < heads; k++) {
            size_t o = (size_t)r * ld + (size_t)k * hd;
            const float *c = ct + (size_t)(r % T) * h, *s = st + (size_t)(r % T) * h;
            float q[16], rot[16], cf[16], sf[16];
            for (int j = 0; j < hd; j++) q[j] = x0[o + j];
            /* HF: cos = cat(freqs, freqs).cos(); q * cos + rotate_half(q) * sin in float32 */
            for (int j = 0; j < hd; j++) cf[j] = c[j % h], sf[j] = s[j % h];
            for (int j = 0; j < h; j++) rot[j] = -q[j + h], rot[j + h] = q[j];
            for (int j = 0; j < hd; j++) hf[o + j] = q[j] * cf[j] + rot[j] * sf[j];
            for (int j = 0; j < h; j++) {
                double a = x0[o + j], b = x0[o + j + h];
                ref[o + j] = a * c[j] - b * s[j];
                ref[o + j + h] = b * c[j] + a * s[j];
                /* Meta's convention: pairs (x[2j], x[2j+1]) */
                double e = x0[o + 2 * j], f = x0[o + 2 * j + 1];
                meta[o + 2 * j] = e * c[j] - f * s[j];
                meta[o + 2 * j + 1] = f * c[j] + e * s[j];
            }
        }
    same_bits("rope forward vs HF's float32 q*cos + rotate_half(q)*sin", x, hf, n);
    near_max("rope forward vs double reference", x, ref, n, 1e-6);
    double maxm = 0;
    for (size_t i = 0; i < n; i++) maxm = fmax(maxm, fabs((double)x[i] - meta[i]));
    report("planted: interleaved pairs (Meta's convention) differ", maxm > 0.1, "max diff %.3g (must be > 0.1)", maxm);
    float *y = fdup(x, n);
    mdc_rope_backward(d, y, ld, heads, hd, ct, st, B, T);
    expect_charge(d, "rope backward charge", 3.0 * N * heads * hd, 4.0 * (2.0 * N * heads * hd + (double)T * hd));
    double *x0d = dcopy(x0, n);
    near_max("rope backward(forward(x)) = x", y, x0d, n, 1e-6);
    /* the backward is the transpose: <R x, g> = <x, R^T g> */
    float *g = fvec(n, 1), *gt = fdup(g, n);
    mdc_rope_backward(NULL, gt, ld, heads, hd, ct, st, B, T);
    double l = 0, rr = 0;
    for (size_t i = 0; i < n; i++) l += (double)x[i] * g[i], rr += (double)x0[i] * gt[i];
    report("rope backward is the transpose: <Rx,g> = <x,R^T g>", fabs(l - rr) <= 1e-5 * fabs(l) + 1e-6, "%.9g vs %.9g",
           l, rr);
    size_t pad = n;
    for (int r = 0; r < N && pad == n; r++)
        for (int j = heads * hd; j < ld; j++)
            if (memcmp(&x[(size_t)r * ld + j], &x0[(size_t)r * ld + j], 4)) pad = (size_t)r * ld + j;
    report("rope leaves the row padding (ld > heads*d) alone", pad == n, "%d columns per row", ld - heads * hd);
    if (pad < n) fprintf(stderr, "padding: first bad index %zu\n", pad);
    /* 1 vs 4 threads */
    int nt = omp_get_max_threads();
    float *a1 = fdup(x0, n), *a4 = fdup(x0, n);
    omp_set_num_threads(1);
    mdc_rope_forward(NULL, a1, ld, heads, hd, ct, st, B, T);
    mdc_rope_backward(NULL, a1, ld, heads, hd, ct, st, B, T);
    omp_set_num_threads(4);
    mdc_rope_forward(NULL, a4, ld, heads, hd, ct, st, B, T);
    mdc_rope_backward(NULL, a4, ld, heads, hd, ct, st, B, T);
    omp_set_num_threads(nt);
    same_bits("rope 1 vs 4 threads", a4, a1, n);
    free(ct), free(st), free(x0), free(x), free(hf), free(ref), free(meta), free(y), free(x0d), free(g), free(gt);
    free(a1), free(a4);
}

int main(void) {
    mdc_device *d = tu_device(1.0);
    test_rmsnorm(d, 7, 37, 1e-5f);
    test_rmsnorm(d, 33, 8, 1e-6f); /* Qwen3's q_norm / k_norm: per head, small C, odd N */
    test_rmsnorm(d, 5, 160, 1e-6f);
    test_rmsnorm_threads(67, 200);
    test_rmsnorm_threads(1001, 8);
    test_swiglu(d);
    test_inv_freq(64, 10000);
    test_inv_freq(64, 500000);
    test_inv_freq(128, 1000000);
    test_llama3();
    test_sincos();
    test_tables();
    test_rope_apply(d);
    mdc_device_free(d);
    return tu_finish("test_family_kernels");
}
