/* The project's own log, exp, cos(2 pi u) and integer power (include/minidc/numerics.h), so
 * that results do not depend on the platform's libm. Only + - * / on doubles, comparisons and
 * exact bit manipulation: IEEE 754 rounds each of these the same way on every machine, and
 * -ffp-contract=off (Makefile) keeps the compiler from fusing a multiply and an add. The
 * coefficients are decimal literals that convert to one double each (1/k and 1/k! rounded
 * once), so the compiler's constant folding cannot differ either.
 * Error analyses are in the header; tests/unit/test_numerics.c checks them against long double. */
#include <stdint.h>
#include <string.h>

#include "minidc/numerics.h"

static uint64_t bits64(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static double from_bits64(uint64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}
/* A fixed quiet NaN: the hardware's default NaN is negative on x86 and positive on aarch64. */
static float nan32(void) {
    uint32_t u = 0x7fc00000u;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static double nan64(void) { return from_bits64(0x7ff8000000000000ull); }

/* ln 2 = LN2_HI + LN2_LO: LN2_HI has 32 significant bits, so k LN2_HI is exact for |k| < 2^21
 * (fdlibm's split). */
#define LN2_HI 6.93147180369123816490e-01 /* 0x3fe62e42fee00000 */
#define LN2_LO 1.90821492927058770002e-10 /* 0x3dea39ef35793c76 */
#define SQRT2 1.4142135623730951          /* 0x3ff6a09e667f3bcd, just above sqrt 2 */

/* log x for a positive finite x. x = 2^k m, m in [sqrt(1/2), sqrt(2)]; with f = m - 1 (exact:
 * Sterbenz) and s = f / (m + 1), |s| <= 0.1716, log m = 2 atanh s = 2s + 2s (s^2/3 + ... + s^18/19),
 * the first omitted term 2 s^21/21 below 2^-55 relative. For a float x, m + 1 is exact (24 bits)
 * and s has one rounding; k LN2_HI is exact and LN2_LO carries the rest of k ln 2. */
static double log_pos(double x) {
    uint64_t u = bits64(x);
    int k = 0;
    if (u < 0x0010000000000000ull) { /* subnormal: scale by 2^54 (exact) */
        u = bits64(x * 18014398509481984.0);
        k = -54;
    }
    k += (int)(u >> 52) - 1023;
    double m = from_bits64((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
    if (m >= SQRT2) m *= 0.5, k++;
    double f = m - 1.0, s = f / (m + 1.0), z = s * s;
    double w = 0.05263157894736842;   /* 1/19 */
    w = w * z + 0.058823529411764705; /* 1/17 */
    w = w * z + 0.06666666666666667;  /* 1/15 */
    w = w * z + 0.07692307692307693;  /* 1/13 */
    w = w * z + 0.09090909090909091;  /* 1/11 */
    w = w * z + 0.1111111111111111;   /* 1/9 */
    w = w * z + 0.14285714285714285;  /* 1/7 */
    w = w * z + 0.2;                  /* 1/5 */
    w = w * z + 0.3333333333333333;   /* 1/3 */
    w = w * z;
    double s2 = s + s, dk = (double)k;
    /* the small parts first, the exact k LN2_HI last: one rounding of the dominant sum */
    return dk * LN2_HI + (s2 + (s2 * w + dk * LN2_LO));
}

float mdc_logf(float x) {
    if (x != x) return x + x;
    if (x <= 0.0f) return x == 0.0f ? -__builtin_inff() : nan32();
    if (x == __builtin_inff()) return x;
    return (float)log_pos((double)x);
}

double mdc_log(double x) {
    if (x != x) return x + x;
    if (x <= 0.0) return x == 0.0 ? -__builtin_inf() : nan64();
    if (x == __builtin_inf()) return x;
    return log_pos(x);
}

float mdc_expf(float x) {
    if (x != x) return x + x;
    if (x > 89.0f) return __builtin_inff(); /* e^89 > FLT_MAX; e^88.72284 already rounds to inf */
    if (x < -104.0f) return 0.0f;           /* e^-104 < 2^-150: below half the smallest subnormal */
    double d = x;
    /* n = round(x / ln 2) by the 1.5 * 2^52 trick; |n| <= 150 */
    double n = (d * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0;
    /* exact: n LN2_HI is a multiple of 2^-32 with 40 bits, and so is x when n != 0 (|x| >= 0.34),
     * and their difference is below 0.35 */
    double r = (d - n * LN2_HI) - n * LN2_LO;
    double p = 1.6059043836821613e-10;  /* 1/13! */
    p = p * r + 2.08767569878681e-09;   /* 1/12! */
    p = p * r + 2.505210838544172e-08;  /* 1/11! */
    p = p * r + 2.755731922398589e-07;  /* 1/10! */
    p = p * r + 2.7557319223985893e-06; /* 1/9! */
    p = p * r + 2.48015873015873e-05;   /* 1/8! */
    p = p * r + 0.0001984126984126984;  /* 1/7! */
    p = p * r + 0.001388888888888889;   /* 1/6! */
    p = p * r + 0.008333333333333333;   /* 1/5! */
    p = p * r + 0.041666666666666664;   /* 1/4! */
    p = p * r + 0.16666666666666666;    /* 1/3! */
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* 2^n is a normal double for n in [-150, 128], so the product is exact: one rounding, to float */
    return (float)(p * from_bits64((uint64_t)((int64_t)n + 1023) << 52));
}

/* sin y and cos y for y in [0, pi/4]: Taylor polynomials in z = y^2, the first omitted terms
 * y^19/19! and y^18/18! below 1e-19 and 3e-18 (relative below 2^-57). */
static double sin_q(double y) {
    double z = y * y;
    double p = 2.8114572543455206e-15;  /* 1/17! */
    p = 7.647163731819816e-13 - p * z;  /* 1/15! */
    p = 1.6059043836821613e-10 - p * z; /* 1/13! */
    p = 2.505210838544172e-08 - p * z;  /* 1/11! */
    p = 2.7557319223985893e-06 - p * z; /* 1/9! */
    p = 0.0001984126984126984 - p * z;  /* 1/7! */
    p = 0.008333333333333333 - p * z;   /* 1/5! */
    p = 0.16666666666666666 - p * z;    /* 1/3! */
    return y - y * (p * z);
}
static double cos_q(double y) {
    double z = y * y;
    double p = 4.779477332387385e-14;   /* 1/16! */
    p = 1.1470745597729725e-11 - p * z; /* 1/14! */
    p = 2.08767569878681e-09 - p * z;   /* 1/12! */
    p = 2.755731922398589e-07 - p * z;  /* 1/10! */
    p = 2.48015873015873e-05 - p * z;   /* 1/8! */
    p = 0.001388888888888889 - p * z;   /* 1/6! */
    p = 0.041666666666666664 - p * z;   /* 1/4! */
    p = 0.5 - p * z;                    /* 1/2! */
    return 1.0 - p * z;
}

double mdc_cospi2(double u) {
    if (u - u != 0.0) return u != u ? u + u : nan64();         /* inf - inf and NaN - NaN are NaN */
    double a = from_bits64(bits64(u) & 0x7fffffffffffffffull); /* cos is even */
    if (a >= 4503599627370496.0) return 1.0;                   /* >= 2^52: an integer */
    a -= (double)(int64_t)a;                                   /* the fraction, exactly: [0, 1) */
    double v = a * 8.0;                                        /* exact: octants */
    int o = (int)v;
    /* f exact; g exact where used (odd octants: v >= 1, so f is a multiple of 2^-52) */
    double f = v - (double)o, g = 1.0 - f;
    const double q = 0.7853981633974483; /* pi/4 */
    /* cos(pi/4 (o + f)) by octant; 0.0 - t instead of -t so that cos(pi/2) is +0, not -0 */
    switch (o) {
    case 0: return cos_q(f * q);
    case 1: return sin_q(g * q);
    case 2: return 0.0 - sin_q(f * q);
    case 3: return 0.0 - cos_q(g * q);
    case 4: return 0.0 - cos_q(f * q);
    case 5: return 0.0 - sin_q(g * q);
    case 6: return sin_q(f * q);
    default: return cos_q(g * q);
    }
}

/* Binary exponentiation: the bits of |t| from the lowest, one squaring per bit; the order of
 * the products is fixed by t alone. */
float mdc_powf_int(float b, int t) {
    unsigned n = t < 0 ? 0u - (unsigned)t : (unsigned)t;
    double r = 1.0, p = b;
    while (n) {
        if (n & 1u) r *= p;
        n >>= 1;
        if (n) p *= p;
    }
    return (float)(t < 0 ? 1.0 / r : r);
}
