/* The project's own elementary functions (numerics/mathf.c) against high-precision references:
 * mdc_logf and mdc_expf on every float of a few binades, on random floats over the whole range
 * (subnormals included) and on the IEEE specials; mdc_log, mdc_cospi2 and mdc_powf_int on
 * random arguments. A float result must be the correctly rounded one, except where the
 * reference puts the exact value within 2^-48 (relative) of a midpoint between two floats:
 * those are counted and printed apart. Pinned bit patterns catch any platform or compiler
 * that computes a different result. Also prints ns per call against the platform's libm.
 *
 * The reference is long double logl/expl where long double has 64 bits or more (x86-64: 64,
 * aarch64 Linux: 113), in the test only; every case it puts near a midpoint, and a random
 * sample, are checked again with a double-double log/exp written here (about 2^-100), which
 * is the only reference where long double is double (macOS on arm64). */
#include <float.h>
#include <stdint.h>
#include <time.h>

#include "minidc/numerics.h"
#include "testutil.h"

#define LD_REF (LDBL_MANT_DIG >= 64)

static uint32_t f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static uint64_t d2u(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}
static uint64_t rng_u64(void) {
    uint64_t *s = tu_rng();
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* ---- double-double (Dekker, Knuth; no FMA: the test is built with -ffp-contract=off) ---- */
typedef struct {
    double hi, lo;
} dd;
static dd two_sum(double a, double b) {
    double s = a + b, bb = s - a;
    return (dd){s, (a - (s - bb)) + (b - bb)};
}
static dd quick_sum(double a, double b) {
    double s = a + b;
    return (dd){s, b - (s - a)};
}
static void split(double a, double *h, double *l) {
    double c = 134217729.0 * a; /* 2^27 + 1 */
    *h = c - (c - a), *l = a - *h;
}
static dd two_prod(double a, double b) {
    double p = a * b, ah, al, bh, bl;
    split(a, &ah, &al), split(b, &bh, &bl);
    return (dd){p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}
static dd dd_add(dd x, dd y) {
    dd s = two_sum(x.hi, y.hi);
    return quick_sum(s.hi, s.lo + x.lo + y.lo);
}
static dd dd_mul(dd x, dd y) {
    dd p = two_prod(x.hi, y.hi);
    return quick_sum(p.hi, p.lo + (x.hi * y.lo + x.lo * y.hi));
}
static dd dd_d(double a) { return (dd){a, 0}; }
static dd dd_div(dd x, dd y) {
    double q1 = x.hi / y.hi;
    dd r = dd_add(x, dd_mul(dd_d(-q1), y));
    double q2 = r.hi / y.hi;
    r = dd_add(r, dd_mul(dd_d(-q2), y));
    double q3 = r.hi / y.hi;
    return dd_add(quick_sum(q1, q2), dd_d(q3));
}
static const dd LN2 = {0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56};

/* log x, x > 0 finite: x = 2^k m, log m = 2 atanh((m-1)/(m+1)), 24 terms (z^24/49 < 2^-125) */
static dd dd_log(double x) {
    int k = 0;
    while (x < 1) x *= 2, k--; /* exact scalings: slow but plain */
    while (x >= 2) x *= 0.5, k++;
    if (x > 1.4142135623730951) x *= 0.5, k++;
    dd s = dd_div(dd_d(x - 1), two_sum(x, 1)), z = dd_mul(s, s), p = dd_d(0);
    for (int j = 24; j >= 0; j--) p = dd_add(dd_mul(p, z), dd_div(dd_d(1), dd_d(2 * j + 1)));
    dd lm = dd_mul(dd_mul(dd_d(2), s), p);
    return dd_add(dd_mul(dd_d(k), LN2), lm);
}
/* e^x, |x| <= 105: x = n ln2 + r, e^r = (e^(r/256))^256, Taylor degree 12 (< 2^-130) */
static dd dd_exp(double x) {
    double n = (x * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0;
    dd r = dd_add(dd_d(x), dd_mul(dd_d(-n), LN2));
    r.hi /= 256, r.lo /= 256;
    dd p = dd_d(1), fact = dd_d(1);
    dd c[13];
    for (int k = 0; k <= 12; k++) c[k] = dd_div(dd_d(1), fact), fact = dd_mul(fact, dd_d(k + 1));
    p = c[12];
    for (int k = 11; k >= 0; k--) p = dd_add(dd_mul(p, r), c[k]);
    for (int i = 0; i < 8; i++) p = dd_mul(p, p);
    double sc = ldexp(1.0, (int)n); /* exact, a normal double for |n| <= 185 */
    p.hi *= sc, p.lo *= sc;
    return p;
}

static dd ref_of(int is_log, float x, int force_dd) {
    if (LD_REF && !force_dd) {
        long double r = is_log ? logl((long double)x) : expl((long double)x);
        double hi = (double)r;
        return (dd){hi, (double)(r - (long double)hi)};
    }
    return is_log ? dd_log(x) : dd_exp(x);
}

/* ---- judging a float result against a reference ----------------------------------------- */
typedef struct {
    float cr;    /* the correctly rounded result per the reference */
    double d;    /* relative distance of the exact value to the nearest midpoint */
    double ulps; /* |got - exact| in ulps of the float grid next to the exact value */
} verdict;
static verdict judge(float got, dd ref) {
    verdict v = {0, INFINITY, 0};
    float f0 = (float)ref.hi;
    if (isinf(f0)) { /* beyond FLT_MAX + ulp/2: the exact value is never that bound */
        v.cr = f0, v.ulps = got == f0 ? 0 : INFINITY;
        return v;
    }
    if (ref.hi == 0 && ref.lo == 0) { /* log 1 */
        v.cr = 0.0f, v.ulps = f2u(got) == 0 ? 0 : INFINITY;
        return v;
    }
    float c[3] = {nextafterf(f0, -INFINITY), f0, nextafterf(f0, INFINITY)};
    double e = INFINITY;
    for (int i = 0; i < 3; i++) { /* ref.hi - c is exact: c is within a factor 2 of ref.hi */
        double ei = (ref.hi - (double)c[i]) + ref.lo;
        if (fabs(ei) < fabs(e)) e = ei, v.cr = c[i];
    }
    float nb = nextafterf(v.cr, e > 0 ? INFINITY : -INFINITY);
    double half = isinf(nb) ? 0x1p103 : fabs((double)nb - (double)v.cr) / 2;
    v.d = (half - fabs(e)) / fabs(ref.hi);
    double eg = (ref.hi - (double)got) + ref.lo;
    v.ulps = got != got ? INFINITY : fabs(eg) / (2 * half);
    return v;
}

typedef struct {
    const char *name;
    long n, bad, near, near_wrong, beyond_doc, refs_differ;
    double max_ulps;
} tally;

#define NEAR_BAND 0x1p-48 /* wrong roundings allowed within it */
#define DOC_BOUND 0x1p-51 /* numerics.h's bound: none allowed beyond it */
static void check_one(tally *t, int is_log, float x) {
    float got = is_log ? mdc_logf(x) : mdc_expf(x);
    verdict v = judge(got, ref_of(is_log, x, 0));
    if (LD_REF && v.d < 0x1p-40) { /* close to a midpoint: the double-double reference decides */
        verdict w = judge(got, ref_of(is_log, x, 1));
        if (f2u(w.cr) != f2u(v.cr) || fabs(w.d - v.d) > 0x1p-56) {
            if (t->refs_differ++ < 5)
                fprintf(stderr, "%s(%a): long double and double-double references differ: %a (d %.3g) vs %a (d %.3g)\n",
                        t->name, x, v.cr, v.d, w.cr, w.d);
        }
        v = w;
    }
    t->n++;
    if (v.ulps > t->max_ulps) t->max_ulps = v.ulps;
    int wrong = f2u(got) != f2u(v.cr);
    if (v.d < NEAR_BAND) {
        t->near++, t->near_wrong += wrong;
        printf("  near a midpoint: %s(%a) = %a, correctly rounded %a, exact value %.3g of a midpoint (rel)\n", t->name,
               x, got, v.cr, v.d);
        /* the header promises better: before the rounding to float, within 2^-51 of the exact value */
        if (wrong && v.d >= DOC_BOUND && t->beyond_doc++ < 10)
            fprintf(stderr, "%s(%a) = %a rounded the wrong way, %.3g of a midpoint: beyond the documented 2^-51\n",
                    t->name, x, got, v.d);
    } else if (wrong) {
        if (t->bad++ < 10)
            fprintf(stderr, "%s(%a) = %a (%.9g), correctly rounded %a (%.9g); %.4f ulps\n", t->name, x, got, got, v.cr,
                    v.cr, v.ulps);
    }
}
static void report(const tally *t, const char *what) {
    printf("%-9s %-44s %9ld values, max %.7f ulps, %ld not correctly rounded, %ld near a midpoint (%ld of them "
           "rounded the other way)\n",
           t->name, what, t->n, t->max_ulps, t->bad, t->near, t->near_wrong);
    TU_CHECK(t->bad == 0, "%s, %s: %ld results not correctly rounded away from midpoints", t->name, what, t->bad);
    TU_CHECK(t->max_ulps < 0.5 + 1e-6 || t->bad, "%s: max error %.6f ulps", t->name, t->max_ulps);
    TU_CHECK(t->beyond_doc == 0, "%s, %s: %ld wrong roundings farther than 2^-51 from a midpoint", t->name, what,
             t->beyond_doc);
    TU_CHECK(t->refs_differ == 0, "%s: the two references differ %ld times", t->name, t->refs_differ);
}

/* every float whose bit pattern is in [bits(lo), bits(hi)): [lo, hi), or (hi, lo] if negative */
static void sweep(int is_log, float lo, float hi, const char *what) {
    tally t = {is_log ? "mdc_logf" : "mdc_expf", 0, 0, 0, 0, 0, 0, 0};
    uint32_t a = f2u(lo), b = f2u(hi);
    for (uint32_t u = a; u < b; u++) check_one(&t, is_log, u2f(u));
    report(&t, what);
}

static void random_floats(int is_log, long n) {
    tally t = {is_log ? "mdc_logf" : "mdc_expf", 0, 0, 0, 0, 0, 0, 0};
    for (long i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(rng_u64() >> 32);
        float x;
        if (is_log) {
            x = u2f(u & 0x7fffffffu); /* every positive float, subnormals too */
            if (!(x > 0) || isinf(x)) continue;
        } else if (i & 1) {
            x = u2f(u); /* every float: mostly overflow, underflow and exp(tiny) */
            if (isnan(x)) continue;
        } else {
            x = (float)(-104.0 + 193.0 * (double)(u >> 8) / 16777216.0); /* [-104, 89) */
        }
        check_one(&t, is_log, x);
    }
    report(&t, is_log ? "random positive floats" : "random floats");
}

/* the double-double reference against long double on a sample: it must agree to 2^-60 */
static void check_dd_reference(void) {
    if (!LD_REF) return;
    double worst = 0;
    for (int i = 0; i < 20000; i++) {
        uint32_t u = (uint32_t)(rng_u64() >> 32);
        float xl = u2f(u & 0x7fffffffu), xe = (float)(-104.0 + 193.0 * (double)(u >> 8) / 16777216.0);
        if (!(xl > 0) || isinf(xl)) xl = 1.5f;
        dd a = ref_of(1, xl, 0), b = ref_of(1, xl, 1), c = ref_of(0, xe, 0), e = ref_of(0, xe, 1);
        double el = fabs((a.hi - b.hi) + (a.lo - b.lo)) / fabs(a.hi ? a.hi : 1);
        double ee = fabs((c.hi - e.hi) + (c.lo - e.lo)) / c.hi;
        worst = fmax(worst, fmax(el, ee));
    }
    printf("double-double reference vs long double: max relative difference %.3g (2^%.1f)\n", worst,
           worst > 0 ? log2(worst) : -INFINITY);
    TU_CHECK(worst < 0x1p-60, "double-double and long double references differ by %.3g", worst);
}

/* ---- specials --------------------------------------------------------------------------------- */
#define BITS32(expr, want)                                                                               \
    TU_CHECK(f2u(expr) == (want), "%s = %a (0x%08x), expected 0x%08x", #expr, (double)(expr), f2u(expr), \
             (unsigned)(want))
#define BITS64(expr, want)                                                                          \
    TU_CHECK(d2u(expr) == (want), "%s = %a (0x%016llx), expected 0x%016llx", #expr, (double)(expr), \
             (unsigned long long)d2u(expr), (unsigned long long)(want))
static void test_specials(void) {
    float qnan = u2f(0x7fc00000u), snan = u2f(0x7fa00000u), nnan = u2f(0xffc00001u);
    BITS32(mdc_logf(qnan), 0x7fc00000u);
    BITS32(mdc_logf(snan), 0x7fe00000u); /* quieted, payload kept */
    BITS32(mdc_logf(nnan), 0xffc00001u);
    BITS32(mdc_logf(-1.0f), 0x7fc00000u);
    BITS32(mdc_logf(-INFINITY), 0x7fc00000u);
    BITS32(mdc_logf(-FLT_TRUE_MIN), 0x7fc00000u);
    BITS32(mdc_logf(0.0f), 0xff800000u);
    BITS32(mdc_logf(-0.0f), 0xff800000u);
    BITS32(mdc_logf(INFINITY), 0x7f800000u);
    BITS32(mdc_logf(1.0f), 0x00000000u);
    TU_CHECK(mdc_logf(FLT_TRUE_MIN) == (float)(-149 * 0.69314718055994530942), "log(2^-149) = %a",
             mdc_logf(FLT_TRUE_MIN));
    BITS32(mdc_expf(qnan), 0x7fc00000u);
    BITS32(mdc_expf(snan), 0x7fe00000u);
    BITS32(mdc_expf(INFINITY), 0x7f800000u);
    BITS32(mdc_expf(-INFINITY), 0x00000000u);
    BITS32(mdc_expf(0.0f), 0x3f800000u);
    BITS32(mdc_expf(-0.0f), 0x3f800000u);
    BITS32(mdc_expf(88.72283172607422f), 0x7f7fff84u); /* the largest float with a finite e^x */
    BITS32(mdc_expf(nextafterf(88.72283172607422f, 100)), 0x7f800000u);
    BITS32(mdc_expf(u2f(0xc2cff1b4u)), 0x00000001u); /* just above ln 2^-150: the smallest subnormal */
    BITS32(mdc_expf(u2f(0xc2cff1b5u)), 0x00000000u); /* just below: 0 */
    BITS32(mdc_expf(-200.0f), 0x00000000u);
    BITS32(mdc_expf(200.0f), 0x7f800000u);
    BITS64(mdc_log(0.0), 0xfff0000000000000ull);
    BITS64(mdc_log(-2.0), 0x7ff8000000000000ull);
    BITS64(mdc_log(1.0), 0x0000000000000000ull);
    BITS64(mdc_log(INFINITY), 0x7ff0000000000000ull);
    TU_CHECK(isnan(mdc_log(NAN)), "log(NaN)");
    TU_NEAR(mdc_log(0x1p-1074), -1074 * 0.69314718055994530942, 1e-15);
    BITS64(mdc_cospi2(0.0), 0x3ff0000000000000ull);
    BITS64(mdc_cospi2(0.25), 0x0000000000000000ull); /* +0, not -0 */
    BITS64(mdc_cospi2(0.5), 0xbff0000000000000ull);
    BITS64(mdc_cospi2(0.75), 0x0000000000000000ull);
    BITS64(mdc_cospi2(3.0), 0x3ff0000000000000ull);
    BITS64(mdc_cospi2(-0.0), 0x3ff0000000000000ull);
    TU_CHECK(mdc_cospi2(-0.1) == mdc_cospi2(0.1), "cos is even");
    TU_CHECK(mdc_cospi2(2.25) == mdc_cospi2(0.25), "period 1");
    BITS64(mdc_cospi2(INFINITY), 0x7ff8000000000000ull);
    TU_CHECK(isnan(mdc_cospi2(NAN)), "cospi2(NaN)");
    TU_CHECK(mdc_powf_int(2.0f, 10) == 1024.0f && mdc_powf_int(-3.0f, 3) == -27.0f, "exact powers");
    TU_CHECK(mdc_powf_int(NAN, 0) == 1.0f && mdc_powf_int(0.0f, 0) == 1.0f, "b^0 = 1");
    BITS32(mdc_powf_int(-0.0f, 3), 0x80000000u);
    BITS32(mdc_powf_int(10.0f, 39), 0x7f800000u);
    BITS32(mdc_powf_int(1e-10f, 5), 0x00000000u);
    TU_CHECK(mdc_powf_int(2.0f, -3) == 0.125f, "2^-3 = %a", mdc_powf_int(2.0f, -3));
    TU_CHECK(mdc_powf_int(1.0f, 2147483647) == 1.0f && mdc_powf_int(1.0f, -2147483647 - 1) == 1.0f, "1^t");
}

/* Results that must be the same bits on every machine. Each is the correctly rounded value
 * (checked with exact rational arithmetic when pinned; libm's cos(2 pi 0.7) is 2 ulps off),
 * except two of mdc_log's. */
static void test_pinned(void) {
    BITS32(mdc_logf(3.0f), 0x3f8c9f54u);
    BITS32(mdc_logf(0.1f), 0xc0135d8eu);
    BITS32(mdc_expf(-1.5f), 0x3e647c3cu);
    BITS32(mdc_expf(10.0f), 0x46ac14eeu);
    BITS64(mdc_log(0.3), 0xbff34378fcbda721ull);
    BITS64(mdc_log(1.4), 0x3fd588c2d913348eull);  /* 1 ulp below the correctly rounded value, */
    BITS64(mdc_log(0.71), 0xbfd5eb5c7907e4c9ull); /* as mdc_log may be: |s| is near its largest */
    BITS64(mdc_cospi2(0.1), 0x3fe9e3779b97f4a8ull);
    BITS64(mdc_cospi2(0.7), 0xbfd3c6ef372fe954ull);
    BITS32(mdc_powf_int(0.9f, 10), 0x3eb285f8u);
    BITS32(mdc_powf_int(0.999f, 1000), 0x3ebc4332u);
}

/* ---- mdc_log, mdc_cospi2 and mdc_powf_int against long double ---------------------------- */
static void test_double_functions(void) {
    const long double two_pi = 6.283185307179586476925286766559005768L;
    double worst_log = 0, worst_cos = 0, worst_pow = 0;
    long pow_over = 0, pow_cr = 0;
    for (int i = 0; i < 1000000; i++) {
        uint64_t a = rng_u64();
        /* half as Box-Muller draws them, (0, 1]; half over every positive finite double */
        double x = i & 1 ? ((double)(a >> 11) + 1.0) / 9007199254740993.0 : 0;
        if (!(i & 1)) {
            uint64_t b = a & 0x7fffffffffffffffull;
            memcpy(&x, &b, 8);
            if (!(x > 0) || isinf(x) || isnan(x)) continue;
        }
        double got = mdc_log(x), err;
        if (LD_REF) {
            long double r = logl((long double)x);
            err = r == 0 ? fabs(got) : (double)fabsl(((long double)got - r) / r);
        } else {
            dd r = dd_log(x);
            err = fabs((r.hi - got) + r.lo) / fabs(r.hi ? r.hi : 1);
        }
        worst_log = fmax(worst_log, err);
        double u = (double)(rng_u64() >> 11) / 9007199254740992.0; /* [0, 1) as Box-Muller */
        long double c = cosl(two_pi * (long double)u);
        worst_cos = fmax(worst_cos, (double)fabsl((long double)mdc_cospi2(u) - c));
        if (i < 200000) {
            float b = (float)((double)(rng_u64() >> 11) / 9007199254740992.0);
            int t = 1 + (int)(rng_u64() % 5000);
            float pg = mdc_powf_int(b, t);
            long double pr = powl((long double)b, (long double)t);
            if (pr > 0x1p-126L) { /* normal results: in ulps of the float grid */
                int ex;
                frexpl(pr, &ex);
                double e = (double)(fabsl((long double)pg - pr) / ldexpl(1, ex - 24));
                worst_pow = fmax(worst_pow, e);
                /* the header's bound: (t - 1) 2^-53 relative before the rounding, < 2^-29 t ulps */
                pow_over += e > 0.5 + 0x1p-29 * t;
                pow_cr += e > 0.5;
            }
        }
    }
    /* a long double of 53 bits (macOS arm64) is not more precise than the results */
    double rel_bound = LD_REF ? 4.5e-16 : 7e-16, abs_bound = LD_REF ? 5e-16 : 1e-15;
    printf("mdc_log:      max relative error %.3g (%.2f ulps of 2^-52)\n", worst_log, worst_log / 0x1p-52);
    printf("mdc_cospi2:   max absolute error %.3g\n", worst_cos);
    printf("mdc_powf_int: max error %.7f float ulps (t in [1, 5000]), %ld of 200000 not correctly rounded\n", worst_pow,
           pow_cr);
    TU_CHECK(worst_log < rel_bound, "mdc_log: relative error %.3g", worst_log);
    TU_CHECK(worst_cos < abs_bound, "mdc_cospi2: absolute error %.3g", worst_cos);
    TU_CHECK(pow_over == 0, "mdc_powf_int: %ld results beyond the bound (max %.7f ulps)", pow_over, worst_pow);
}

/* ---- speed ---------------------------------------------------------------------------------- */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static volatile float sink;
static void test_speed(void) {
    enum { N = 1 << 20, REPS = 4 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = 1e-3f + 100.0f * (0.5f + 0.5f * tu_frand());
    for (int i = 0; i < N; i++) y[i] = 80.0f * tu_frand();
    double t[4] = {0};
    float s = 0;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        for (int i = 0; i < N; i++) s += mdc_logf(x[i]);
        double t1 = now();
        for (int i = 0; i < N; i++) s += logf(x[i]);
        double t2 = now();
        for (int i = 0; i < N; i++) s += mdc_expf(y[i]);
        double t3 = now();
        for (int i = 0; i < N; i++) s += expf(y[i]);
        double t4 = now();
        t[0] += t1 - t0, t[1] += t2 - t1, t[2] += t3 - t2, t[3] += t4 - t3;
    }
    sink = s;
    double k = 1e9 / ((double)N * REPS);
    printf("speed: mdc_logf %.1f ns/call, libm logf %.1f; mdc_expf %.1f ns/call, libm expf %.1f\n", t[0] * k, t[1] * k,
           t[2] * k, t[3] * k);
    free(x);
    free(y);
}

int main(void) {
    printf("reference: %s (long double has %d bits)\n",
           LD_REF ? "long double logl/expl, double-double near midpoints" : "double-double", LDBL_MANT_DIG);
    test_specials();
    test_pinned();
    check_dd_reference();
    sweep(1, 1.0f, 2.0f, "every float in [1, 2)");
    sweep(1, 0.5f, 1.0f, "every float in [0.5, 1)");
    sweep(0, 1.0f, 2.0f, "every float in [1, 2)");
    sweep(0, -64.0f, -128.0f, "every float in (-128, -64] (subnormal results)");
    sweep(0, 64.0f, 128.0f, "every float in [64, 128) (overflow)");
    random_floats(1, 3000000);
    random_floats(0, 3000000);
    test_double_functions();
    test_speed();
    return tu_finish("test_numerics");
}
