/* Dropout tests (kernels/dropout.c, the _drop attention kernels):
 * (a) the mask is a pure function of its key, every key field changes it, and its kept
 *     fraction is within 3 sigma of 1-p; the residual kernel equals its formula bit for bit;
 * (b) a slice (rows, positions, channels; rows and heads for attention) computed alone with
 *     its global offsets gives the bits of the whole tensor's run, forward and backward;
 * (c) attention with dropout against a double-precision loop reference, plain and tiled;
 * (d) p = 0 and a NULL descriptor give the bits and charges of the kernels without dropout;
 * (e) gradients against central finite differences of the double reference;
 * (f) the same bits with 1 and 2 OpenMP threads; and the charges equal the header formulas. */
#include <omp.h>

#include "testutil.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* uniform [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float *fvec(size_t n, float scale) {
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = scale * frand();
    return x;
}
static float *fzeros(size_t n) { return calloc(n, sizeof(float)); }
static double *dcopy(const float *x, size_t n) {
    double *d = malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static void expect_charge(mdc_device *d, const char *what, double flops, double bytes) {
    mdc_dev_counters c;
    mdc_dev_get_counters(d, &c);
    TU_CHECK(c.flops == flops, "%s: charged %.17g FLOPs, formula %.17g", what, c.flops, flops);
    TU_CHECK(c.hbm_bytes == bytes, "%s: charged %.17g bytes, formula %.17g", what, c.hbm_bytes, bytes);
    mdc_dev_reset_counters(d);
}

static mdc_dropout desc(float p, int T, int C, int H) {
    mdc_dropout d = {.p = p, .seed = 1234, .step = 7, .layer = 3, .site = MDC_DROP_ATTN_OUT, .T = T, .C = C, .H = H};
    return d;
}

/* ---- (a) the mask ---------------------------------------------------------------------------- */
static void fraction(const char *what, long kept, long n, double p) {
    double want = n * (1 - p), sigma = sqrt(n * p * (1 - p));
    int ok = fabs(kept - want) <= 3 * sigma;
    printf("%-52s kept %.5f, want %.5f +- %.5f%s\n", what, (double)kept / n, 1 - p, 3 * sigma / n, ok ? "" : "  FAIL");
    TU_CHECK(ok, "%s: kept %ld of %ld, expected %.0f +- %.0f", what, kept, n, want, 3 * sigma);
}
static void test_mask(void) {
    int R = 2, T = 512, C = 1024, H = 4, Ta = 256;
    long n = (long)R * T * C, kept = 0, na = (long)R * H * Ta * Ta, kepta = 0;
    mdc_dropout d = desc(0.1f, T, C, H);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) kept += mdc_dropout_keep(&d, r, t, c);
    fraction("residual mask p=0.1 (1M elements)", kept, n, 0.1);
    mdc_dropout a = desc(0.3f, Ta, 0, H);
    for (int r = 0; r < R; r++)
        for (int h = 0; h < H; h++)
            for (int q = 0; q < Ta; q++)
                for (int s = 0; s < Ta; s++) kepta += mdc_dropout_keep_attn(&a, r, h, q, s);
    fraction("attention mask p=0.3 (512K elements)", kepta, na, 0.3);
    /* each key field makes another mask: agreement with the base mask is 1/2 at p = 1/2 */
    mdc_dropout base = desc(0.5f, T, C, H), var[4] = {base, base, base, base};
    var[0].seed++, var[1].step++, var[2].layer++, var[3].site = MDC_DROP_MLP_OUT;
    static const char *field[4] = {"seed", "step", "layer", "site"};
    for (int i = 0; i < 4; i++) {
        long same = 0, m = 256L * C;
        for (int t = 0; t < 256; t++)
            for (int c = 0; c < C; c++) same += mdc_dropout_keep(&base, 0, t, c) == mdc_dropout_keep(&var[i], 0, t, c);
        char what[64];
        snprintf(what, sizeof what, "mask agreement after changing the %s", field[i]);
        fraction(what, same, m, 0.5);
    }
    /* the kernel is its formula, and the same bits on a second run */
    int B = 2, Tl = 33, Cl = 40;
    size_t ne = (size_t)B * Tl * Cl;
    mdc_dropout r = desc(0.25f, Tl, Cl, 1);
    float *res = fvec(ne, 1), *y = fvec(ne, 1), *o1 = fzeros(ne), *o2 = fzeros(ne), *want = fzeros(ne);
    float s = 1.0f / (1.0f - r.p);
    for (size_t i = 0; i < ne; i++) {
        int keep = mdc_dropout_keep(&r, (int)(i / ((size_t)Tl * Cl)), (int)(i / Cl % Tl), (int)(i % Cl));
        want[i] = keep ? res[i] + y[i] * s : res[i];
    }
    mdc_dropout_residual_forward(NULL, o1, res, y, &r, B, Tl, Cl);
    mdc_dropout_residual_forward(NULL, o2, res, y, &r, B, Tl, Cl);
    tu_cmp_f32("residual dropout = res + keep*y/(1-p)", o1, want, ne);
    tu_cmp_f32("residual dropout, second run", o2, o1, ne);
    free(res), free(y), free(o1), free(o2), free(want);
}

/* ---- attention helpers -------------------------------------------------------------------------- */
/* the charges of a kernel in c (if c), then reset */
static void take(mdc_device *dev, mdc_dev_counters *c) {
    if (!dev) return;
    if (c) mdc_dev_get_counters(dev, c);
    mdc_dev_reset_counters(dev);
}
/* forward then backward of the plain (tiled = 0) or tiled kernel; sv: att or lse; c[2]: charges */
static void run_attn(mdc_device *dev, mdc_dev_counters *c, int tiled, const mdc_dropout *d, float *out, float *sv,
                     float *dq, const float *qkv, const float *dout, int B, int T, int C, int NH) {
    if (tiled) {
        mdc_attention_forward_tiled_drop(dev, out, sv, qkv, d, B, T, C, NH);
        take(dev, c);
        mdc_attention_backward_tiled_drop(dev, dq, dout, out, qkv, sv, d, B, T, C, NH);
    } else {
        float *scr = fzeros((size_t)B * NH * T * T);
        mdc_attention_forward_drop(dev, out, sv, qkv, d, B, T, C, NH);
        take(dev, c);
        mdc_attention_backward_drop(dev, dq, scr, dout, qkv, sv, d, B, T, C, NH);
        free(scr);
    }
    take(dev, c ? c + 1 : NULL);
}
/* dst (Bl,T,parts*Hl*hs) = rows b0.., heads h0.. of src (B,T,parts*NH*hs) ([q|k|v] for parts 3) */
static void slice_heads(float *dst, const float *src, int b0, int Bl, int T, int NH, int hs, int h0, int Hl,
                        int parts) {
    for (int b = 0; b < Bl; b++)
        for (int t = 0; t < T; t++)
            for (int x = 0; x < parts; x++)
                memcpy(dst + ((size_t)b * T + t) * parts * Hl * hs + (size_t)x * Hl * hs,
                       src + ((size_t)(b0 + b) * T + t) * parts * NH * hs + (size_t)x * NH * hs + (size_t)h0 * hs,
                       sizeof(float) * Hl * hs);
}

/* double reference: out, and with grad the analytic dqkv (zeroed here) */
typedef struct {
    double *qkv, *dy, *out, *dq;
    const mdc_dropout *d;
    int B, T, C, NH;
} ref_ctx;
static void ref_attn(ref_ctx *k, int grad) {
    int B = k->B, T = k->T, C = k->C, NH = k->NH, hs = C / NH, C3 = 3 * C;
    const mdc_dropout *d = k->d;
    int dr = d && d->p > 0;
    double sc = 1 / sqrt((double)hs), ks = dr ? 1 / (1 - (double)d->p) : 1;
    double *P = malloc(sizeof(double) * T), *Pd = malloc(sizeof(double) * T), *dP = malloc(sizeof(double) * T);
    if (grad) memset(k->dq, 0, sizeof(double) * B * T * C3);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = k->qkv + ((size_t)b * T + t) * C3 + h * hs;
                double mx = -1e300, sum = 0;
                for (int s = 0; s <= t; s++) {
                    const double *kk = k->qkv + ((size_t)b * T + s) * C3 + C + h * hs;
                    double dd = 0;
                    for (int j = 0; j < hs; j++) dd += q[j] * kk[j];
                    mx = fmax(mx, P[s] = dd * sc);
                }
                for (int s = 0; s <= t; s++) sum += P[s] = exp(P[s] - mx);
                for (int s = 0; s <= t; s++) {
                    P[s] /= sum;
                    int keep = !dr || mdc_dropout_keep_attn(d, d->row0 + b, d->head0 + h, d->pos0 + t, d->pos0 + s);
                    Pd[s] = keep ? P[s] * ks : 0;
                    dP[s] = keep ? ks : 0; /* times dO.v below */
                }
                double *o = k->out + ((size_t)b * T + t) * C + h * hs;
                for (int j = 0; j < hs; j++) {
                    double acc = 0;
                    for (int s = 0; s <= t; s++) acc += Pd[s] * k->qkv[((size_t)b * T + s) * C3 + 2 * C + h * hs + j];
                    o[j] = acc;
                }
                if (!grad) continue;
                const double *dO = k->dy + ((size_t)b * T + t) * C + h * hs;
                double dot = 0;
                for (int s = 0; s <= t; s++) {
                    const double *v = k->qkv + ((size_t)b * T + s) * C3 + 2 * C + h * hs;
                    double *dv = k->dq + ((size_t)b * T + s) * C3 + 2 * C + h * hs, g = 0;
                    for (int j = 0; j < hs; j++) g += dO[j] * v[j], dv[j] += Pd[s] * dO[j];
                    dot += P[s] * (dP[s] *= g);
                }
                for (int s = 0; s <= t; s++) {
                    double dS = P[s] * (dP[s] - dot) * sc;
                    const double *kk = k->qkv + ((size_t)b * T + s) * C3 + C + h * hs;
                    double *dqt = k->dq + ((size_t)b * T + t) * C3 + h * hs;
                    double *dk = k->dq + ((size_t)b * T + s) * C3 + C + h * hs;
                    for (int j = 0; j < hs; j++) dqt[j] += dS * kk[j], dk[j] += dS * q[j];
                }
            }
    free(P), free(Pd), free(dP);
}
static double ref_loss(void *p) {
    ref_ctx *k = p;
    ref_attn(k, 0);
    double s = 0;
    for (size_t i = 0; i < (size_t)k->B * k->T * k->C; i++) s += k->out[i] * k->dy[i];
    return s;
}

/* ---- (c), (e): against the double reference ------------------------------------------------------ */
static void test_attn_ref(int B, int T, int C, int NH, int fd) {
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C;
    mdc_dropout d = desc(0.3f, T, C, NH + 2);
    d.row0 = 2, d.head0 = 1; /* a slice of a bigger model */
    float *qkv = fvec(nq, 1.5f), *dy = fvec(ny, 1);
    ref_ctx k = {
        dcopy(qkv, nq), dcopy(dy, ny), malloc(sizeof(double) * ny), malloc(sizeof(double) * nq), &d, B, T, C, NH};
    ref_attn(&k, 1);
    double *want = k.out; /* kept: the finite differences write k.out */
    k.out = malloc(sizeof(double) * ny);
    for (int tiled = 0; tiled < 2; tiled++) {
        float *out = fzeros(ny), *sv = fzeros((size_t)B * NH * T * (tiled ? 1 : T)), *dq = fzeros(nq);
        const char *kind = tiled ? "tiled" : "plain";
        char what[96];
        run_attn(NULL, NULL, tiled, &d, out, sv, dq, qkv, dy, B, T, C, NH);
        snprintf(what, sizeof what, "%s forward p=0.3 B%d T%d C%d NH%d", kind, B, T, C, NH);
        tu_near_vec(what, out, want, ny, 1e-5);
        snprintf(what, sizeof what, "%s backward p=0.3 B%d T%d C%d NH%d", kind, B, T, C, NH);
        tu_near_vec(what, dq, k.dq, nq, 1e-5);
        if (fd) {
            snprintf(what, sizeof what, "attention dqkv p=0.3 (%s)", kind);
            tu_fd_check(what, k.qkv, nq, dq, ref_loss, &k);
        }
        free(out), free(sv), free(dq);
    }
    free(qkv), free(dy), free(k.qkv), free(k.dy), free(k.out), free(k.dq), free(want);
}

/* ---- (b) split invariance ------------------------------------------------------------------------- */
static void test_split_attn(int tiled) {
    int B = 2, T = 70, NH = 4, hs = 4, C = NH * hs, b0 = 1, Bl = 1, h0 = 1, Hl = 2, Cl = Hl * hs;
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, ns = tiled ? (size_t)T : (size_t)T * T;
    mdc_dropout d = desc(0.2f, T, C, NH);
    float *qkv = fvec(nq, 1.5f), *dy = fvec(ny, 1), *out = fzeros(ny), *sv = fzeros(B * NH * ns), *dq = fzeros(nq);
    run_attn(NULL, NULL, tiled, &d, out, sv, dq, qkv, dy, B, T, C, NH);
    size_t lq = (size_t)Bl * T * 3 * Cl, ly = (size_t)Bl * T * Cl;
    float *q1 = fzeros(lq), *dy1 = fzeros(ly), *o1 = fzeros(ly), *sv1 = fzeros(Bl * Hl * ns), *dq1 = fzeros(lq);
    float *wo = fzeros(ly), *wsv = fzeros(Bl * Hl * ns), *wdq = fzeros(lq);
    slice_heads(q1, qkv, b0, Bl, T, NH, hs, h0, Hl, 3);
    slice_heads(dy1, dy, b0, Bl, T, NH, hs, h0, Hl, 1);
    mdc_dropout dl = d;
    dl.row0 = b0, dl.head0 = h0; /* the global row and head of local 0; T, C, H stay global */
    run_attn(NULL, NULL, tiled, &dl, o1, sv1, dq1, q1, dy1, Bl, T, Cl, Hl);
    slice_heads(wo, out, b0, Bl, T, NH, hs, h0, Hl, 1);
    slice_heads(wdq, dq, b0, Bl, T, NH, hs, h0, Hl, 3);
    for (int b = 0; b < Bl; b++)
        memcpy(wsv + (size_t)b * Hl * ns, sv + ((size_t)(b0 + b) * NH + h0) * ns, sizeof(float) * Hl * ns);
    const char *k = tiled ? "tiled" : "plain";
    char w1[80], w2[80], w3[80];
    snprintf(w1, sizeof w1, "split: %s out of row 1, heads 1-2", k);
    snprintf(w2, sizeof w2, "split: %s %s of row 1, heads 1-2", k, tiled ? "lse" : "att");
    snprintf(w3, sizeof w3, "split: %s dqkv of row 1, heads 1-2", k);
    int ok = tu_cmp_f32(w1, o1, wo, ly) & tu_cmp_f32(w2, sv1, wsv, Bl * Hl * ns) & tu_cmp_f32(w3, dq1, wdq, lq);
    printf("%-52s %s\n", w3, ok ? "bit-identical" : "DIFFERENT");
    free(qkv), free(dy), free(out), free(sv), free(dq), free(q1), free(dy1), free(o1), free(sv1), free(dq1);
    free(wo), free(wsv), free(wdq);
}
/* a copy of rows r0.., positions p0.., channels c0.. (Bl,Tl,Cl) of src (B,T,C) */
static float *block(const float *src, int T, int C, int r0, int Bl, int p0, int Tl, int c0, int Cl) {
    float *dst = malloc(sizeof(float) * Bl * Tl * Cl);
    for (int b = 0; b < Bl; b++)
        for (int t = 0; t < Tl; t++)
            memcpy(dst + ((size_t)b * Tl + t) * Cl, src + ((size_t)(r0 + b) * T + p0 + t) * C + c0, sizeof(float) * Cl);
    return dst;
}
static void test_split_residual(void) {
    int B = 3, T = 20, C = 24, r0 = 1, Bl = 2, p0 = 5, Tl = 8, c0 = 8, Cl = 12;
    size_t n = (size_t)B * T * C, nl = (size_t)Bl * Tl * Cl;
    mdc_dropout d = desc(0.4f, T, C, 1), dl = d;
    dl.row0 = r0, dl.pos0 = p0, dl.chan0 = c0; /* the global indices of local 0; T, C stay global */
    float *res = fvec(n, 1), *y = fvec(n, 1), *g = fvec(n, 1), *out = fzeros(n), *dy = fvec(n, 1);
#define BLOCK(x) block(x, T, C, r0, Bl, p0, Tl, c0, Cl)
    float *lres = BLOCK(res), *ly = BLOCK(y), *lg = BLOCK(g), *ldy = BLOCK(dy), *lo = fzeros(nl);
    mdc_dropout_residual_forward(NULL, out, res, y, &d, B, T, C);
    mdc_dropout_residual_backward(NULL, dy, g, &d, B, T, C);
    mdc_dropout_residual_forward(NULL, lo, lres, ly, &dl, Bl, Tl, Cl);
    mdc_dropout_residual_backward(NULL, ldy, lg, &dl, Bl, Tl, Cl);
    float *wo = BLOCK(out), *wdy = BLOCK(dy);
#undef BLOCK
    int ok = tu_cmp_f32("split: residual forward, rows 1-2 pos 5-12 chan 8-19", lo, wo, nl) &
             tu_cmp_f32("split: residual backward, same block", ldy, wdy, nl);
    printf("%-52s %s\n", "split: residual rows 1-2, pos 5-12, chan 8-19", ok ? "bit-identical" : "DIFFERENT");
    free(res), free(y), free(g), free(out), free(dy), free(lres), free(ly), free(lg), free(ldy), free(lo);
    free(wo), free(wdy);
}

/* ---- (d) p = 0; residual charges and (e) its gradient ------------------------------------------ */
typedef struct {
    double *y;
    const float *res, *dy;
    const mdc_dropout *d;
    int T, C;
    size_t n;
} res_ctx;
static double loss_y(void *p) {
    res_ctx *k = p;
    double s = 0, ks = 1 / (1 - (double)k->d->p);
    for (size_t i = 0; i < k->n; i++) {
        int keep = mdc_dropout_keep(k->d, (int)(i / ((size_t)k->T * k->C)), (int)(i / k->C % k->T), (int)(i % k->C));
        s += k->dy[i] * (k->res[i] + (keep ? k->y[i] * ks : 0));
    }
    return s;
}
static void test_p0(mdc_device *dev) {
    int B = 2, T = 70, C = 16, NH = 4;
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * NH * T * T, nl = (size_t)B * NH * T;
    float *qkv = fvec(nq, 1.5f), *dy = fvec(ny, 1), *scr = fzeros(na);
    mdc_dropout z = desc(0.0f, T, C, NH), d3 = desc(0.3f, T, C, NH);
    const mdc_dropout *how[3] = {&z, NULL, &d3};
    double pc = 0.5 * T * (T + 1.0) * B * NH;
    for (int tiled = 0; tiled < 2; tiled++) {
        size_t ns = tiled ? nl : na;
        float *o0 = fzeros(ny), *s0 = fzeros(ns), *d0 = fzeros(nq), *o1 = fzeros(ny), *s1 = fzeros(ns),
              *d1 = fzeros(nq);
        mdc_dev_counters c0[2], c1[2];
        if (tiled) {
            mdc_attention_forward_tiled(dev, o0, s0, qkv, B, T, C, NH), take(dev, c0);
            mdc_attention_backward_tiled(dev, d0, dy, o0, qkv, s0, B, T, C, NH), take(dev, c0 + 1);
        } else {
            mdc_attention_forward(dev, o0, s0, qkv, B, T, C, NH), take(dev, c0);
            mdc_attention_backward(dev, d0, scr, dy, qkv, s0, B, T, C, NH), take(dev, c0 + 1);
        }
        /* p = 0 and NULL: the same bits and charges; p = 0.3 charges the dropout terms of the
         * kernels' header comments more (plain: + Pc, 2 Pc FLOPs and 8 Pc bytes each way;
         * tiled: + Pc, 2 Pc FLOPs, no bytes) */
        double xf[2] = {pc, 2 * pc}, xb = tiled ? 0 : 8 * pc;
        for (int w = 0; w < 3; w++) {
            memset(d1, 0, sizeof(float) * nq);
            run_attn(dev, c1, tiled, how[w], o1, s1, d1, qkv, dy, B, T, C, NH);
            const char *k = tiled ? "tiled" : "plain", *wh = w == 0 ? "p=0" : w == 1 ? "NULL" : "p=0.3";
            for (int i = 0; i < 2; i++) {
                double df = c1[i].flops - c0[i].flops, db = c1[i].hbm_bytes - c0[i].hbm_bytes;
                TU_CHECK(df == (w == 2 ? xf[i] : 0) && db == (w == 2 ? xb : 0),
                         "%s %s %s: charged %.17g FLOPs, %.17g bytes more than without dropout", k, wh,
                         i ? "backward" : "forward", df, db);
            }
            if (w == 2) break;
            char m[80];
            snprintf(m, sizeof m, "%s %s: out", k, wh), tu_cmp_f32(m, o1, o0, ny);
            snprintf(m, sizeof m, "%s %s: att/lse", k, wh), tu_cmp_f32(m, s1, s0, ns);
            snprintf(m, sizeof m, "%s %s: dqkv", k, wh), tu_cmp_f32(m, d1, d0, nq);
        }
        free(o0), free(s0), free(d0), free(o1), free(s1), free(d1);
    }
    printf("%-52s checked\n", "p=0, NULL: attention bits, charges unchanged");
    /* residual: p = 0 is the plain add; p > 0 charges and its gradient */
    size_t n = ny;
    float *res = fvec(n, 1), *y = fvec(n, 1), *a = fzeros(n), *b = fzeros(n), *g = fvec(n, 1);
    float *g0 = malloc(sizeof(float) * n);
    memcpy(g0, g, sizeof(float) * n);
    mdc_residual_forward(NULL, a, res, y, n);
    mdc_dropout_residual_forward(dev, b, res, y, &z, B, T, C);
    expect_charge(dev, "residual dropout p=0", (double)n, 12.0 * n);
    tu_cmp_f32("residual dropout p=0 = mdc_residual_forward", b, a, n);
    mdc_dropout_residual_backward(dev, g, dy, NULL, B, T, C);
    expect_charge(dev, "residual dropout backward NULL", (double)n, 12.0 * n);
    for (size_t i = 0; i < n; i++) TU_CHECK(g[i] == g0[i] + dy[i], "backward p=0 at %zu", i);
    mdc_dropout d = desc(0.3f, T, C, 1);
    mdc_dropout_residual_forward(dev, b, res, y, &d, B, T, C);
    expect_charge(dev, "residual dropout forward", 2.0 * n, 12.0 * n);
    memset(g, 0, sizeof(float) * n);
    mdc_dropout_residual_backward(dev, g, dy, &d, B, T, C);
    expect_charge(dev, "residual dropout backward", 2.0 * n, 12.0 * n);
    /* loss = sum dy * (res + keep*y/(1-p)): d loss / d y by finite differences */
    double *yd = dcopy(y, n);
    res_ctx rc = {yd, res, dy, &d, T, C, n};
    tu_fd_check("residual dropout dy", yd, n, g, loss_y, &rc);
    free(qkv), free(dy), free(scr), free(res), free(y), free(a), free(b), free(g), free(g0), free(yd);
}

/* ---- (f) threads ------------------------------------------------------------------------------------ */
static void test_threads(void) {
    enum { NOUT = 8 };
    static const char *names[NOUT] = {"plain out", "att", "plain dqkv", "residual forward",
                                      "tiled out", "lse", "tiled dqkv", "residual backward"};
    int B = 2, T = 150, C = 32, NH = 4;
    size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    size_t ns[NOUT] = {ny, na, nq, ny, ny, (size_t)B * NH * T, nq, ny};
    float *r[2][NOUT], *qkv = fvec(nq, 1.5f), *dy = fvec(ny, 1), *y = fvec(ny, 1);
    mdc_dropout d = desc(0.2f, T, C, NH), dm = d;
    dm.site = MDC_DROP_MLP_OUT;
    for (int th = 0; th < 2; th++) {
        omp_set_num_threads(th + 1);
        for (int i = 0; i < NOUT; i++) r[th][i] = fzeros(ns[i]);
        run_attn(NULL, NULL, 0, &d, r[th][0], r[th][1], r[th][2], qkv, dy, B, T, C, NH);
        run_attn(NULL, NULL, 1, &d, r[th][4], r[th][5], r[th][6], qkv, dy, B, T, C, NH);
        mdc_dropout_residual_forward(NULL, r[th][3], qkv, y, &dm, B, T, C);
        mdc_dropout_residual_backward(NULL, r[th][7], dy, &dm, B, T, C);
    }
    int same = 1;
    for (int i = 0; i < NOUT; i++) {
        char w[80];
        snprintf(w, sizeof w, "1 vs 2 threads: %s", names[i]);
        same &= tu_cmp_f32(w, r[1][i], r[0][i], ns[i]);
        free(r[0][i]), free(r[1][i]);
    }
    printf("%-52s %s\n", "dropout kernels with 1 and 2 threads", same ? "bit-identical" : "DIFFERENT");
    free(qkv), free(dy), free(y);
}

int main(void) {
    mdc_device *dev = tu_device(1.0);
    test_mask();
    test_split_residual();
    test_split_attn(0);
    test_split_attn(1);
    test_attn_ref(2, 5, 12, 3, 1);
    test_attn_ref(1, 70, 8, 2, 1);   /* two tiles, a partial one */
    test_attn_ref(2, 130, 32, 2, 0); /* three tiles */
    test_p0(dev);
    test_threads();
    mdc_device_free(dev);
    return tu_finish("test_dropout");
}
