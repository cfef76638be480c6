/* The exact long accumulator (minidc/exact.h): adding a float, combining accumulators,
 * normalizing, and the one rounding at the end.
 *
 * A finite float with biased exponent ex and fraction f is m * 2^(pos - 149) with m = f | 2^23,
 * pos = ex - 1 (normal) or m = f, pos = 0 (subnormal): pos 0..253. m << (pos % 32) is below
 * 2^55, so it lands as a low piece (< 2^32) in limb pos / 32 and a high piece (< 2^23) in the
 * next one, negated for a negative float. No carries, no branch but the one for NaN/inf.
 *
 * Cost per element of the MDC_EXACT reduction: 9 int64 additions and a flag OR on 80 bytes, so
 * gamma is that of an int64 sum per byte; on the wire an element is 80 bytes against 4 for f32
 * (beta 20x per summed value, which is why exact mode reduces block partial sums, not every
 * float). */
#include <math.h>
#include <string.h>

#include "minidc/exact.h"

_Static_assert(sizeof(mdc_exact) == 8 * MDC_EXACT_LIMBS + 8, "mdc_exact has no padding");

void mdc_exact_clear(mdc_exact *a) { memset(a, 0, sizeof *a); }

static uint32_t bits_of(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* The flag of a non-finite float's bits (exponent field all ones). */
static uint32_t special_flag(uint32_t b) {
    return (b & 0x7fffffu) ? MDC_EXACT_F_NAN : (b >> 31) ? MDC_EXACT_F_NINF : MDC_EXACT_F_PINF;
}

/* limb += the finite float with bits b (the two pieces). */
static inline void add_finite(int64_t *limb, uint32_t b) {
    uint32_t ex = (b >> 23) & 0xffu, f = b & 0x7fffffu;
    uint64_t m = ex ? (f | 0x800000u) : f;
    uint32_t pos = ex ? ex - 1 : 0;
    uint64_t v = m << (pos & 31);
    int64_t s = -(int64_t)(b >> 31); /* 0 or -1: (x ^ s) - s negates when s = -1 */
    int64_t lo = (int64_t)(v & 0xffffffffu), hi = (int64_t)(v >> 32);
    limb[pos >> 5] += (lo ^ s) - s;
    limb[(pos >> 5) + 1] += (hi ^ s) - s;
}

void mdc_exact_normalize(mdc_exact *a) {
    for (int k = 0; k + 1 < MDC_EXACT_LIMBS; k++) {
        int64_t lo = (int64_t)((uint64_t)a->limb[k] & 0xffffffffu);
        int64_t c = (a->limb[k] - lo) / ((int64_t)1 << 32); /* exact: floor(limb / 2^32) */
        a->limb[k] = lo;
        a->limb[k + 1] += c;
    }
    a->pending = 0;
}

void mdc_exact_add_f32(mdc_exact *a, float x) { mdc_exact_add_f32s(a, &x, 1); }

/* Adds n floats, n + pending + 1 <= MDC_EXACT_PENDING_MAX. Four sets of limbs take turns, so
 * consecutive floats of similar magnitude (the same limb) do not wait on each other's store
 * (here 2.4 ns per float with four sets, 2.5 to 3.8 with two). */
static void add_block(mdc_exact *a, const float *x, size_t n) {
    int64_t l[4][MDC_EXACT_LIMBS] = {{0}};
    uint32_t flags = 0, nz = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) {
            uint32_t b = bits_of(x[i + j]);
            nz |= b ^ 0x80000000u;
            if (__builtin_expect(((b >> 23) & 0xffu) == 0xffu, 0)) flags |= special_flag(b);
            else add_finite(l[j], b);
        }
    for (; i < n; i++) {
        uint32_t b = bits_of(x[i]);
        nz |= b ^ 0x80000000u;
        if (((b >> 23) & 0xffu) == 0xffu) flags |= special_flag(b);
        else add_finite(l[0], b);
    }
    for (int k = 0; k < MDC_EXACT_LIMBS; k++) a->limb[k] += (l[0][k] + l[1][k]) + (l[2][k] + l[3][k]);
    a->pending += (uint32_t)n;
    if (n) a->flags |= flags | MDC_EXACT_F_ANY | (nz ? MDC_EXACT_F_NOTNEG0 : 0);
}

void mdc_exact_add_f32s(mdc_exact *a, const float *x, size_t n) {
    while (n) {
        size_t room = MDC_EXACT_PENDING_MAX - 1 - a->pending;
        if (!room) {
            mdc_exact_normalize(a);
            continue;
        }
        size_t m = n < room ? n : room;
        add_block(a, x, m);
        x += m;
        n -= m;
    }
}

void mdc_exact_add_f64(mdc_exact *a, double v) {
    float f1 = (float)v;
    if (isnan(v) || isinf(f1)) { /* beyond the float range: the infinity float addition gives */
        mdc_exact_add_f32(a, isnan(v) ? NAN : f1);
        return;
    }
    /* v - f1 and the next residue are exact in double (the rounding error of a conversion to a
     * narrower format is representable in the wider one), so three floats hold 72 >= 53 bits. */
    double r = v - (double)f1;
    float f2 = (float)r, f3 = (float)(r - (double)f2);
    mdc_exact_add_f32(a, f1); /* first and alone for zero: -0.0 must stay -0 */
    if (f2 != 0) mdc_exact_add_f32(a, f2);
    if (f3 != 0) mdc_exact_add_f32(a, f3);
}

void mdc_exact_sum(mdc_exact *out, const mdc_exact *a, const mdc_exact *b) {
    if ((uint64_t)a->pending + b->pending + 2 <= MDC_EXACT_PENDING_MAX) {
        for (int k = 0; k < MDC_EXACT_LIMBS; k++) out->limb[k] = a->limb[k] + b->limb[k];
        out->pending = a->pending + b->pending + 1;
        out->flags = a->flags | b->flags;
        return;
    }
    /* Rare (over 2^31 additions behind the operands): normalize copies first. */
    mdc_exact x = *a, y = *b;
    mdc_exact_normalize(&x);
    if ((uint64_t)y.pending + 2 > MDC_EXACT_PENDING_MAX) mdc_exact_normalize(&y);
    mdc_exact_sum(out, &x, &y);
}

void mdc_exact_sum_n(mdc_exact *out, const mdc_exact *a, const mdc_exact *b, size_t n) {
    for (size_t i = 0; i < n; i++) mdc_exact_sum(&out[i], &a[i], &b[i]);
}

/* ---- rounding --------------------------------------------------------------------------- */

#define WORDS (MDC_EXACT_LIMBS + 1) /* the normalized value as 32-bit words, two's complement */

/* n <= 60 bits of w from bit lo on. */
static uint64_t extract(const uint32_t *w, int lo, int n) {
    int q = lo >> 5;
    unsigned __int128 acc = 0;
    for (int j = 2; j >= 0; j--) acc = (acc << 32) | (q + j < WORDS ? w[q + j] : 0);
    return (uint64_t)(acc >> (lo & 31)) & ((((uint64_t)1) << n) - 1);
}

static int any_below(const uint32_t *w, int pos) { /* a set bit below bit pos */
    for (int q = 0; q < (pos >> 5); q++)
        if (w[q]) return 1;
    return (pos & 31) && (w[pos >> 5] & ((1u << (pos & 31)) - 1));
}

/* |exact sum| rounded to `prec` significant bits, nearest-even: M * 2^(e - 149). Returns 0 for
 * an exact zero; *neg is the sign. Every value is a multiple of 2^-149, so no precision asked
 * here (24 or 53) ever needs bits below bit 0. */
static int round_to(const mdc_exact *a, int prec, int *neg, uint64_t *M, int *e) {
    mdc_exact t = *a;
    mdc_exact_normalize(&t);
    uint32_t w[WORDS];
    for (int k = 0; k + 1 < MDC_EXACT_LIMBS; k++) w[k] = (uint32_t)t.limb[k];
    uint64_t top = (uint64_t)t.limb[MDC_EXACT_LIMBS - 1];
    w[WORDS - 2] = (uint32_t)top;
    w[WORDS - 1] = (uint32_t)(top >> 32);
    *neg = t.limb[MDC_EXACT_LIMBS - 1] < 0;
    if (*neg) { /* two's complement negation; the magnitude is below 2^319, so it fits */
        uint64_t c = 1;
        for (int q = 0; q < WORDS; q++) {
            c += (uint32_t)~w[q];
            w[q] = (uint32_t)c;
            c >>= 32;
        }
    }
    int P = -1;
    for (int q = WORDS - 1; q >= 0 && P < 0; q--)
        if (w[q]) P = q * 32 + 31 - __builtin_clz(w[q]);
    if (P < 0) return 0;
    int lsb = P - prec + 1 > 0 ? P - prec + 1 : 0;
    uint64_t m = extract(w, lsb, P - lsb + 1);
    if (lsb > 0 && ((w[(lsb - 1) >> 5] >> ((lsb - 1) & 31)) & 1) && (any_below(w, lsb - 1) || (m & 1))) m++;
    *M = m; /* may be 2^prec after rounding up: still exact as a double */
    *e = lsb;
    return 1;
}

/* The result for an accumulator with flags, or 0 (finite). */
static int special(const mdc_exact *a, double *out) {
    uint32_t f = a->flags;
    if ((f & MDC_EXACT_F_NAN) || ((f & MDC_EXACT_F_PINF) && (f & MDC_EXACT_F_NINF))) *out = NAN;
    else if (f & MDC_EXACT_F_PINF) *out = INFINITY;
    else if (f & MDC_EXACT_F_NINF) *out = -INFINITY;
    else return 0;
    return 1;
}

/* A zero sum: -0 only when every addend was -0 (IEEE's round-to-nearest sum in any order). */
static double zero_of(const mdc_exact *a) {
    return (a->flags & MDC_EXACT_F_ANY) && !(a->flags & MDC_EXACT_F_NOTNEG0) ? -0.0 : 0.0;
}

double mdc_exact_to_f64(const mdc_exact *a) {
    double s;
    if (special(a, &s)) return s;
    int neg, e;
    uint64_t M;
    if (!round_to(a, 53, &neg, &M, &e)) return zero_of(a);
    double v = ldexp((double)M, e + MDC_EXACT_LSB); /* exact: below 2^320, above 2^-150 */
    return neg ? -v : v;
}

/* The common case without the general rounding: normalized limbs, the magnitude's top limb k
 * (2 <= k < 8) and the next as a 64-bit integer M with the lower limbs' sticky bit in bit 0
 * (M has at least 33 significant bits, so that bit is below float's rounding position and the
 * one conversion of M to float rounds as the exact value would). Returns 0 where the result
 * could be subnormal or overflow, or is zero: the general path decides those. */
static int fast_f32(const mdc_exact *a, float *out) {
    int64_t l[MDC_EXACT_LIMBS];
    int64_t c = 0;
    for (int k = 0; k + 1 < MDC_EXACT_LIMBS; k++) {
        int64_t v = a->limb[k] + c;
        l[k] = (int64_t)((uint64_t)v & 0xffffffffu);
        c = (v - l[k]) / ((int64_t)1 << 32);
    }
    l[MDC_EXACT_LIMBS - 1] = a->limb[MDC_EXACT_LIMBS - 1] + c;
    int neg = l[MDC_EXACT_LIMBS - 1] < 0;
    if (neg) { /* two's complement: the magnitude in the same 32-bit limbs */
        int64_t b = 0;
        for (int k = 0; k + 1 < MDC_EXACT_LIMBS; k++) {
            int64_t v = -l[k] - b;
            b = v < 0;
            l[k] = v + (b << 32);
        }
        l[MDC_EXACT_LIMBS - 1] = -l[MDC_EXACT_LIMBS - 1] - b;
    }
    if (l[MDC_EXACT_LIMBS - 1]) return 0;
    int k = MDC_EXACT_LIMBS - 2;
    while (k >= 0 && !l[k]) k--;
    if (k < 2) return 0; /* below 2^-85: let the general path handle subnormals */
    uint64_t M = ((uint64_t)l[k] << 32) | (uint64_t)l[k - 1];
    for (int j = 0; j < k - 1; j++)
        if (l[j]) {
            M |= 1;
            break;
        }
    int e = 32 * (k - 1) + MDC_EXACT_LSB;    /* value = M 2^e */
    int top = 63 - __builtin_clzll(M) + e;   /* floor(log2 value) */
    if (top > 126) return 0;                 /* may round to 2^128 or beyond */
    uint32_t pb = (uint32_t)(e + 127) << 23; /* 2^e, a normal float: e >= -117 */
    float p2;
    memcpy(&p2, &pb, sizeof p2);
    float f = (float)M * p2; /* M rounded once; the scaling is exact (normal) */
    *out = neg ? -f : f;
    return 1;
}

float mdc_exact_to_f32(const mdc_exact *a) {
    double s;
    if (special(a, &s)) return (float)s;
    float quick;
    if (fast_f32(a, &quick)) return quick;
    int neg, e;
    uint64_t M;
    if (!round_to(a, 24, &neg, &M, &e)) return (float)zero_of(a);
    /* M * 2^(e-149) has at most 24 significant bits and is a multiple of 2^-149: the double
     * is exact, and so is its conversion to float unless it reached 2^128 (overflow). */
    double v = ldexp((double)M, e + MDC_EXACT_LSB);
    float f = v >= 0x1p128 ? INFINITY : (float)v;
    return neg ? -f : f;
}
