/* Grader of lab 3 (labs/lab3_zero.c): the student's ZeRO-1 step against DDP's, which this grader
 * computes itself: the gradient summed over the ranks serially (every rank can make every rank's
 * gradient), then minidc's AdamW (mdc_adamw_update) on all N elements with full m and v.
 * At the world's p ranks, 3 steps on a small model of 10 tensors, N = 335 (not a multiple of 2, 3
 * or 4; the shards cut tensors of both kinds of weight decay):
 *   - integer gradients, and random ones of 21-bit mantissas sharing an exponent per element
 *     (every partial sum exact: any order gives the same bits): the parameters after each step
 *     bit-identical to DDP's, every rank the same bits, the shard's m and v equal to DDP's there;
 *   - optimizer memory, measured by the emulated GPU's allocator (MDC_MEM_OPTIM): 2 (hi_r - lo_r)
 *     floats per rank after the steps and at the peak of each, beside DDP's 2N;
 *   - random float gradients (sums rounded in the reduction's order): every parameter inside
 *     the interval that DDP's float update reaches from any float sum within (p-1) 2^-23 sum |x|
 *     of the exact sum (p-1 roundings, with room; interval arithmetic, each float operation
 *     widened by 2^-22 relative), every rank the same bits;
 *   - the cost, N padded to 336 (a multiple of p = 2..4 and 8, as ZeRO pads): 2(p-1)/p x 4N
 *     bytes in 2(p-1) messages per rank and step, those of DDP's ring all-reduce (traced).
 * Ranks: 1 2 3 4 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"
#include "minidc/kernels.h"
#include "minidc/model.h"

#include "lab3_zero.h"

enum { STEPS = 3, NT = 11, WHY = 200 };
enum { INTS, EXACT, RANDOM }; /* the gradients' kinds */

/* A GPT-2-like block, V = 11, T = 7, C = 5; "pad" (the cost case) rounds N up to a multiple of p. */
static const struct {
    const char *name;
    size_t count;
    int decay;
} model[NT] = {{"wte", 55, 1},   {"wpe", 35, 1},  {"ln.w", 5, 0},     {"ln.b", 5, 0},
               {"fc.w", 100, 1}, {"fc.b", 20, 0}, {"proj.w", 100, 1}, {"proj.b", 5, 0},
               {"lnf.w", 5, 0},  {"lnf.b", 5, 0}, {"pad", 0, 0}};

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) { return mix(mix(mix(a + 0x9E3779B97F4A7C15ull) + b) + c); }

/* Rank r's gradient of element i at step t. */
static float grad_value(int kind, int r, int t, size_t i) {
    uint64_t z = hash3((uint64_t)r, (uint64_t)t, i);
    if (kind == INTS) return (float)((int)(z % 23) - 11);
    if (kind == EXACT) { /* k 2^(e-21), |k| < 2^21, e in [-30, 0] the same on every rank: 8 terms < 2^24 units */
        int e = (int)(hash3(99, (uint64_t)t, i) % 31) - 30;
        return ldexpf((float)((int64_t)(z & 0x3FFFFF) - 0x200000), e - 21);
    }
    float m = (float)(z & 0xFFFFFF) / (float)0x1000000; /* 24 bits, exponents 2^-5 .. 2^-1 */
    return ldexpf(m - 0.5f, -(int)((z >> 24) % 5));
}
static float init_value(size_t i) { /* the parameters before step 1, the same on every rank */
    float m = (float)(mix(i + 7) & 0xFFFFFF) / (float)0x1000000;
    return 2 * m - 1;
}

/* ---- interval arithmetic: an interval holds every float a float operation on members gives ---- */
typedef struct {
    double lo, hi;
} iv;
static iv widen(double lo, double hi) { /* a float rounding (2^-24) and the double's, with room */
    return (iv){lo - fabs(lo) * 0x1p-22 - 0x1p-148, hi + fabs(hi) * 0x1p-22 + 0x1p-148};
}
static iv pt(double x) { return (iv){x, x}; }
static iv add(iv a, iv b) { return widen(a.lo + b.lo, a.hi + b.hi); }
static iv sub(iv a, iv b) { return widen(a.lo - b.hi, a.hi - b.lo); }
static iv mul(iv a, iv b) {
    double c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
    return widen(fmin(fmin(c[0], c[1]), fmin(c[2], c[3])), fmax(fmax(c[0], c[1]), fmax(c[2], c[3])));
}
static iv divp(iv a, iv b) { /* b > 0 */
    return widen(fmin(a.lo / b.lo, a.lo / b.hi), fmax(a.hi / b.lo, a.hi / b.hi));
}
static iv sqrt_iv(iv a) { return widen(sqrt(fmax(a.lo, 0)), sqrt(fmax(a.hi, 0))); }

/* One case: the layout, the student's state, DDP's (point values or, for RANDOM, intervals). */
typedef struct {
    int kind;
    size_t N, lo, hi;
    lab_tensor t[NT];
    lab_zero1 z;
    float *gm, *dp, *dm, *dv;                  /* DDP's summed gradient, parameters, m, v */
    iv *P, *M, *V;                             /* RANDOM: where DDP's parameters and moments can be */
    int failed_step;                           /* 0: every step ran */
    char call[WHY];                            /* the step's status, when it failed */
    char bits[WHY];                            /* the first wrong parameter, when one was */
    size_t optim_after, optim_peak, optim_ddp; /* bytes: the student's after the steps, at the peak; DDP's */
    grade_traffic tr[STEPS + 1];
} run;

static const char *tensor_of(const run *c, size_t i, size_t *k) {
    for (int j = 0; j < NT; j++)
        if (i < c->t[j].offset + c->t[j].count) return *k = i - c->t[j].offset, model[j].name;
    return *k = i, "?";
}
/* "element 37 = fc.w[12] (rank 1's shard [83, 167))" */
static void where(const run *c, int p, size_t i, char *out, size_t cap) {
    size_t k;
    const char *name = tensor_of(c, i, &k);
    int q = 0;
    while (q + 1 < p && c->N * (size_t)(q + 1) / (size_t)p <= i) q++;
    snprintf(out, cap, "element %zu = %s[%zu] (rank %d's shard [%zu, %zu))", i, name, k, q,
             c->N * (size_t)q / (size_t)p, c->N * (size_t)(q + 1) / (size_t)p);
}

/* DDP's step t on the exact gradients: the sum over the ranks (exact for INTS and EXACT), AdamW
 * on every element with full m and v. For RANDOM the same in intervals: the sum is any float
 * within p-1 roundings of sum |x|. */
static void ddp_step(run *c, int p, int t, const mdc_adamw_config *o) {
    for (size_t i = 0; i < c->N; i++) {
        double s = 0, a = 0;
        for (int r = 0; r < p; r++) s += grad_value(c->kind, r, t, i), a += fabs(grad_value(c->kind, r, t, i));
        c->gm[i] = (float)s;
        if (c->kind != RANDOM) continue;
        double e = (p - 1) * 0x1p-23 * a + 0x1p-148;
        iv g = {s - e, s + e}, b1 = pt(o->beta1), b2 = pt(o->beta2);
        const lab_tensor *tn = c->t;
        while (i >= tn->offset + tn->count) tn++;
        double lw = (double)o->lr * (tn->decay ? o->weight_decay : 0);
        iv lrwd = widen(lw, lw);
        iv bc1 = sub(pt(1), widen(pow(o->beta1, t), pow(o->beta1, t))),
           bc2 = sub(pt(1), widen(pow(o->beta2, t), pow(o->beta2, t)));
        iv step = divp(pt(o->lr), bc1), bc2s = sqrt_iv(bc2), decay = sub(pt(1), lrwd);
        iv m = add(mul(c->M[i], b1), mul(sub(pt(1), b1), g));
        iv v = add(mul(c->V[i], b2), mul(mul(sub(pt(1), b2), g), g));
        iv den = add(divp(sqrt_iv(v), bc2s), pt(o->eps));
        c->M[i] = m, c->V[i] = v;
        c->P[i] = sub(mul(c->P[i], decay), mul(step, divp(m, den)));
    }
    if (c->kind == RANDOM) return;
    for (int j = 0; j < NT; j++)
        if (c->t[j].count)
            mdc_adamw_update(NULL, c->dp + c->t[j].offset, c->dm + c->t[j].offset, c->dv + c->t[j].offset,
                             c->gm + c->t[j].offset, c->t[j].count, o->lr, o->beta1, o->beta2, o->eps,
                             c->t[j].decay ? o->weight_decay : 0.0f, 1.0f, t);
}

/* Compares the student's parameters after step t with DDP's: 1 if they agree. */
static int compare(run *c, grade *g, int t, const float *before) {
    for (size_t i = 0; i < c->N; i++) {
        float x = c->z.params[i];
        int bad = c->kind == RANDOM ? !(x >= c->P[i].lo && x <= c->P[i].hi) : memcmp(&x, &c->dp[i], sizeof x) != 0;
        if (!bad) continue;
        char w[96];
        where(c, g->p, i, w, sizeof w);
        int n = c->kind == RANDOM ? snprintf(c->bits, WHY, "after step %d, %s is %.9g; DDP's lies in [%.9g, %.9g]", t,
                                             w, x, c->P[i].lo, c->P[i].hi)
                                  : snprintf(c->bits, WHY, "after step %d, %s is %.9g, DDP's %.9g", t, w, x, c->dp[i]);
        if (x == before[i] && n < WHY)
            snprintf(c->bits + n, WHY - (size_t)n, " (the step left it as it was: the all-gather missed it?)");
        return 0;
    }
    return 1;
}

static int run_case(run *c, grade *g, int kind, int pad, const mdc_adamw_config *o) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    for (int j = 0; j < NT; j++) {
        size_t n = model[j].count;
        if (j == NT - 1 && pad) n = (c->N + (size_t)g->p - 1) / (size_t)g->p * (size_t)g->p - c->N;
        c->t[j] = (lab_tensor){c->N, n, model[j].decay};
        c->N += n;
    }
    size_t N = c->N, fb = N * sizeof(float);
    c->lo = N * (size_t)g->me / (size_t)g->p, c->hi = N * (size_t)(g->me + 1) / (size_t)g->p;
    mdc_device *dev = g->rt.dev;
    float *before = malloc(fb);
    c->z = (lab_zero1){malloc(fb), malloc(fb), N, c->t, NT, NULL, NULL};
    c->gm = malloc(fb), c->dp = malloc(fb);
    c->P = calloc(N, sizeof(iv)), c->M = calloc(N, sizeof(iv)), c->V = calloc(N, sizeof(iv));
    size_t base = mdc_dev_mem_in_use(dev, MDC_MEM_OPTIM);
    /* DDP's m and v on the device, as the student's: the allocator measures both the same way */
    if (!before || !c->z.params || !c->z.grads || !c->gm || !c->dp || !c->P || !c->M || !c->V ||
        mdc_dev_alloc(dev, (void **)&c->dm, fb, MDC_MEM_OPTIM, "ddp.adam.m") ||
        mdc_dev_alloc(dev, (void **)&c->dv, fb, MDC_MEM_OPTIM, "ddp.adam.v"))
        return fprintf(stderr, "lab 3 grader: out of memory\n"), 0;
    for (size_t i = 0; i < N; i++) c->z.params[i] = c->dp[i] = init_value(i), c->P[i] = pt(init_value(i));
    memset(c->z.grads, 0, fb);
    c->optim_ddp = mdc_dev_mem_in_use(dev, MDC_MEM_OPTIM) - base;
    base += c->optim_ddp;
    grade_traffic_begin(g, &c->tr[STEPS]); /* DDP's all-reduce, for the bytes */
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, c->z.grads, N, MDC_F32, MDC_SUM, g->rt.world);
    grade_traffic_end(g);
    for (int t = 1; t <= STEPS && !st; t++) {
        for (size_t i = 0; i < N; i++) c->z.grads[i] = grad_value(kind, g->me, t, i);
        memcpy(before, c->z.params, fb);
        ddp_step(c, g->p, t, o);
        mdc_dev_mem_reset_peak(dev);
        grade_traffic_begin(g, &c->tr[t - 1]);
        st = lab_zero1_step(&c->z, o, t, dev, g->rt.world);
        grade_traffic_end(g);
        size_t peak = mdc_dev_mem_peak(dev, MDC_MEM_OPTIM) - base;
        if (peak > c->optim_peak) c->optim_peak = peak;
        if (st) c->failed_step = t, grade_status_text(st, c->call, WHY);
        else if (!c->bits[0]) compare(c, g, t, before);
    }
    if (st && !c->call[0]) grade_status_text(st, c->call, WHY); /* DDP's own all-reduce failed */
    c->optim_after = mdc_dev_mem_in_use(dev, MDC_MEM_OPTIM) - base;
    free(before);
    return 1;
}

static void free_case(run *c, grade *g) {
    free(c->z.params), free(c->z.grads), free(c->gm), free(c->dp), free(c->P), free(c->M), free(c->V);
    mdc_dev_free(g->rt.dev, c->dm), mdc_dev_free(g->rt.dev, c->dv);
    /* the student's m and v stay: mdc_device_free frees every device allocation at the end */
}

/* The row for a failed step, or NULL. */
static const char *call_failed(const run *c, char *why) {
    if (!c->call[0]) return NULL;
    snprintf(why, WHY, "step %d %.180s", c->failed_step, c->call);
    return why;
}

static void check_bits(grade *g, run *c, const char *name) {
    char why[WHY];
    const char *f = call_failed(c, why);
    grade_check(g, name, !f && !c->bits[0], "%s", f ? f : c->bits);
}

static void check_same(grade *g, run *c, const char *name) {
    char why[WHY] = "", w[96];
    const char *f = call_failed(c, why);
    float *r0 = malloc(c->N * sizeof(float));
    int ok = !f && r0;
    if (ok) memcpy(r0, c->z.params, c->N * sizeof(float));
    if (ok && mdc_bcast(r0, c->N, MDC_F32, 0, g->rt.world)) ok = 0, snprintf(why, WHY, "the grader's broadcast failed");
    long i = ok ? grade_first_diff_f32(c->z.params, r0, c->N, why, WHY) : -1;
    if (i >= 0) {
        where(c, g->p, (size_t)i, w, sizeof w);
        snprintf(why, WHY, "%s is %.9g on this rank, %.9g on rank 0", w, c->z.params[i], r0[i]);
        ok = 0;
    }
    grade_check(g, name, ok, "%s", f ? f : why);
    free(r0);
}

/* m and v of the shard against DDP's over [lo, hi). */
static void check_moments(grade *g, run *c) {
    char why[WHY] = "", w[96];
    const char *f = call_failed(c, why);
    size_t n = c->hi - c->lo;
    int ok = !f;
    if (ok && (!c->z.m || !c->z.v || c->optim_after < 8 * n)) {
        ok = 0;
        snprintf(why, WHY,
                 "m and v must be %zu floats each on the device (mdc_dev_alloc, MDC_MEM_OPTIM); it holds %zu bytes", n,
                 c->optim_after);
    }
    for (int k = 0; ok && k < 2; k++) {
        const float *got = k ? c->z.v : c->z.m, *want = (k ? c->dv : c->dm) + c->lo;
        long i = grade_first_diff_f32(got, want, n, why, WHY);
        if (i < 0) continue;
        where(c, g->p, c->lo + (size_t)i, w, sizeof w);
        snprintf(why, WHY, "%s[%ld] (%s) is %.9g, DDP's %.9g (m[j] holds element lo + j, lo = %zu)", k ? "v" : "m", i,
                 w, got[i], want[i], c->lo);
        ok = 0;
    }
    grade_check(g, "integer gradients: your m and v over your shard [lo, hi) equal DDP's m and v there, after 3 steps",
                ok, "%s", f ? f : why);
}

static void check_memory(grade *g, run *c) {
    char why[WHY] = "", name[WHY];
    const char *f = call_failed(c, why);
    size_t n = c->hi - c->lo, want = 8 * n, N = c->N;
    int ok = !f && c->optim_after == want && c->optim_peak == want;
    if (!ok && !f)
        snprintf(why, WHY,
                 "%zu bytes of optimizer state after the steps, %zu at the peak; the shard's m and v: 2 x %zu floats = "
                 "%zu%s",
                 c->optim_after, c->optim_peak, n, want,
                 c->optim_after == 0       ? " (allocate them with mdc_dev_alloc, MDC_MEM_OPTIM)"
                 : c->optim_after >= 8 * N ? " (DDP's: m and v of every element)"
                                           : "");
    snprintf(name, sizeof name,
             "optimizer memory per rank (measured): m, v of the shard, 2 (hi - lo) floats = %zu bytes on rank 0 (2N/p "
             "= %.1f floats; DDP's 2N: %zu bytes measured)",
             8 * (N / (size_t)g->p), 2.0 * (double)N / g->p, c->optim_ddp);
    grade_check(g, name, ok, "%s", f ? f : why);
}

static void check_cost(grade *g, run *c) {
    char why[WHY] = "", name[WHY];
    const char *f = call_failed(c, why);
    size_t N = c->N;
    double want = 2.0 * (g->p - 1) / g->p * 4.0 * (double)N;
    int okb = !f, okm = !f, t;
    for (t = 0; t < STEPS && okb; t++) okb = fabs((double)c->tr[t].bytes - want) < 0.5;
    if (!okb && !f)
        snprintf(why, WHY, "step %d sent %zu bytes; DDP's ring all-reduce sends 2(p-1)/p 4N = %.0f (traced: %zu)", t,
                 c->tr[t - 1].bytes, want, c->tr[STEPS].bytes);
    snprintf(name, sizeof name, "bytes sent per rank and step = DDP's all-reduce's 2(p-1)/p x 4N = %.0f (N = %zu)",
             want, N);
    grade_check(g, name, okb, "%s", why);
    for (t = 0; t < STEPS && okm; t++) okm = c->tr[t].sends == 2 * (size_t)(g->p - 1);
    if (!okm && !f)
        snprintf(
            why, WHY,
            "step %d sent %zu messages; a ring reduce-scatter and all-gather send 2(p-1) = %d (DDP's all-reduce: %zu)",
            t, c->tr[t - 1].sends, 2 * (g->p - 1), c->tr[STEPS].sends);
    grade_check(
        g, "messages sent per rank and step = 2(p-1), as DDP's ring all-reduce (one reduce-scatter, one all-gather)",
        okm, "%s", why);
}

int main(int argc, char **argv) {
    grade g;
    mdc_status st = grade_begin(&g, &argc, &argv, 20);
    if (st) {
        fprintf(stderr, "lab 3 grader: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    mdc_coll_prefer_ring(); /* as minidc train --dp: the ring, whose bytes are the formula's */
    mdc_coll_set_ring_chunk(0);
    mdc_adamw_config o;
    mdc_adamw_config_default(&o);
    o.lr = 1e-2f, o.grad_clip = 0; /* a visible step; no clipping in this lab */
    static run c;
    if (!run_case(&c, &g, INTS, 0, &o)) return 2;
    check_bits(&g, &c, "integer gradients, N = 335: parameters after each of 3 steps bit-identical to DDP's");
    check_same(&g, &c, "... every rank holds the same parameters (rank 0's bits)");
    check_moments(&g, &c);
    check_memory(&g, &c);
    free_case(&c, &g);
    if (!run_case(&c, &g, EXACT, 0, &o)) return 2;
    check_bits(&g, &c, "random gradients of 21-bit mantissas (sums exact in any order): bit-identical to DDP's");
    free_case(&c, &g);
    if (!run_case(&c, &g, RANDOM, 0, &o)) return 2;
    check_bits(&g, &c, "random float gradients: every parameter within a float sum's rounding of DDP's update");
    check_same(&g, &c, "... every rank holds the same bits (rank 0's)");
    free_case(&c, &g);
    if (g.p > 1) {
        if (!run_case(&c, &g, INTS, 1, &o)) return 2;
        check_bits(&g, &c, "integer gradients, N padded to a multiple of p: bit-identical to DDP's");
        check_cost(&g, &c);
        free_case(&c, &g);
    }
    return grade_end(&g);
}
