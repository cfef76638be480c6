/* f32 <-> f16 / bf16: every one of the 65536 16-bit values round-trips exactly (NaNs stay NaN
 * with sign and payload, quieted); f32 -> 16-bit rounds to nearest, ties to even, checked at
 * every midpoint between neighbours (and one f32 ulp either side), against double-precision
 * oracles built from the formats' definitions (no compiler _Float16: clang lacks it on some
 * targets), including subnormals, overflow to infinity and NaN. */
#include <stdint.h>

#include "testutil.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float fl(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The value of a finite f16 encoding by its definition: subnormals m x 2^-24, normals
 * (1024 + m) x 2^(e-25). */
static double f16_value(uint32_t h) {
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e ? ldexp(1024.0 + m, (int)e - 25) : ldexp((double)m, -24);
    return (h & 0x8000) ? -v : v;
}

/* f16 by definition: the largest positive code not above |f| found by bisection over the
 * ordered encodings, then the nearer of it and the next (ties to even); the code past 65504 is
 * infinity, reached from 65520 = 65504 + half an ulp. */
static uint16_t ref_f16(float f) {
    double x = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isinf(f)) return (uint16_t)(sign | 0x7c00);
    uint32_t lo = 0, hi = 0x7c00; /* f16_value(lo) <= x; hi stands for 65536 */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (f16_value(mid) <= x) lo = mid;
        else hi = mid;
    }
    double a = f16_value(lo), b = lo + 1 == 0x7c00 ? 65536.0 : f16_value(lo + 1);
    uint32_t r = x - a < b - x ? lo : x - a > b - x ? lo + 1 : (lo & 1) ? lo + 1 : lo;
    return (uint16_t)(sign | r);
}

/* bf16 by definition: the nearest of the two bf16 neighbours of f (ties to even mantissa),
 * computed with doubles; overflow past the largest finite bf16 + half an ulp gives inf. */
static uint16_t ref_bf16(float f) {
    uint32_t u = bits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if ((u & 0xffff) == 0) return lo;
    double x = fabs((double)f), a = fabs((double)fl((uint32_t)lo << 16));
    double b = (hi & 0x7fff) == 0x7f80 ? ldexp(1.0, 128) : fabs((double)fl((uint32_t)hi << 16));
    if (x - a < b - x) return lo;
    if (x - a > b - x) return hi;
    return (lo & 1) ? hi : lo;
}

int main(void) {
    long bad = 0;
    /* 1. round trips over all 65536 encodings */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = mdc_f16_to_f32((uint16_t)h);
        uint16_t back = mdc_f32_to_f16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        uint16_t want = is_nan ? (uint16_t)(h | 0x200) : (uint16_t)h; /* NaN comes back quiet */
        if (back != want || (is_nan != (f != f))) {
            if (bad++ < 5) fprintf(stderr, "f16 %04x -> %a -> %04x (want %04x)\n", h, (double)f, back, want);
        }
        int is_inf = (h & 0x7fff) == 0x7c00;
        double want_v = is_inf ? ((h & 0x8000) ? -INFINITY : INFINITY) : f16_value(h);
        if (!is_nan && bits(f) != bits((float)want_v)) {
            if (bad++ < 5) fprintf(stderr, "f16 %04x widens to %a, its definition says %a\n", h, (double)f, want_v);
        }
        float g = mdc_bf16_to_f32((uint16_t)h);
        uint16_t gb = mdc_f32_to_bf16(g);
        int bnan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        uint16_t gwant = bnan ? (uint16_t)(h | 0x40) : (uint16_t)h;
        if (gb != gwant || bits(g) != (h << 16)) {
            if (bad++ < 5) fprintf(stderr, "bf16 %04x -> %a -> %04x\n", h, (double)g, gb);
        }
    }
    TU_CHECK(bad == 0, "%ld round-trip failures", bad);

    /* 2. rounding at every midpoint between neighbouring 16-bit values, +-1 f32 ulp */
    bad = 0;
    long checked = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) { /* positive finite f16 and the next value up */
        double a = (double)mdc_f16_to_f32((uint16_t)h);
        double b = h + 1 == 0x7c00 ? 65536.0 : (double)mdc_f16_to_f32((uint16_t)(h + 1));
        float mid = (float)((a + b) / 2); /* exact: midpoints of f16 values fit in f32 */
        for (int sgn = 0; sgn < 2; sgn++)
            for (int k = -1; k <= 1; k++) {
                float x = fl(bits(mid) + (uint32_t)k);
                if (sgn) x = -x;
                uint16_t got = mdc_f32_to_f16(x), want = ref_f16(x);
                checked++;
                if (got != want && bad++ < 5) fprintf(stderr, "f16(%a): got %04x want %04x\n", (double)x, got, want);
            }
    }
    for (uint32_t h = 0; h < 0x7f80; h++) { /* positive finite bf16 */
        uint32_t mid = (h << 16) | 0x8000;  /* the midpoint to the next bf16 */
        for (int sgn = 0; sgn < 2; sgn++)
            for (int k = -1; k <= 1; k++) {
                float x = fl((mid + (uint32_t)k) | (sgn ? 0x80000000u : 0));
                uint16_t got = mdc_f32_to_bf16(x), want = ref_bf16(x);
                checked++;
                if (got != want && bad++ < 5) fprintf(stderr, "bf16(%a): got %04x want %04x\n", (double)x, got, want);
            }
    }
    /* 3. random f32 bit patterns (all exponents: f16 overflow, underflow, subnormals) */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 2000000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float x = fl((uint32_t)(s >> 32));
        if (x != x) continue;
        checked += 2;
        if (mdc_f32_to_f16(x) != ref_f16(x) && bad++ < 5) fprintf(stderr, "f16(%a) random\n", (double)x);
        if (mdc_f32_to_bf16(x) != ref_bf16(x) && bad++ < 5) fprintf(stderr, "bf16(%a) random\n", (double)x);
    }
    TU_CHECK(bad == 0, "%ld of %ld rounding checks failed", bad, checked);

    /* 4. named cases */
    TU_CHECK(mdc_f32_to_f16(65504.0f) == 0x7bff, "max f16");
    TU_CHECK(mdc_f32_to_f16(65519.99f) == 0x7bff, "below the overflow tie");
    TU_CHECK(mdc_f32_to_f16(65520.0f) == 0x7c00, "tie at 65520 rounds to even = inf");
    TU_CHECK(mdc_f32_to_f16(-INFINITY) == 0xfc00, "-inf");
    TU_CHECK(mdc_f32_to_f16(0x1p-24f) == 0x0001, "smallest subnormal");
    TU_CHECK(mdc_f32_to_f16(0x1p-25f) == 0x0000, "half the smallest subnormal ties to 0");
    TU_CHECK(mdc_f32_to_f16(0x1.8p-24f) == 0x0002, "1.5 x 2^-24 ties to even 2");
    TU_CHECK(mdc_f32_to_f16(-0.0f) == 0x8000, "-0");
    TU_CHECK(mdc_f32_to_f16(0x1.ff8p-15f) == 0x03ff, "largest subnormal 1023 x 2^-24");
    TU_CHECK(mdc_f32_to_f16(0x1.ffcp-15f) == 0x0400, "1023.5 x 2^-24 ties to even: smallest normal");
    uint16_t qn = mdc_f32_to_f16(NAN), bq = mdc_f32_to_bf16(-NAN);
    TU_CHECK((qn & 0x7c00) == 0x7c00 && (qn & 0x3ff), "NaN -> f16 NaN %04x", qn);
    TU_CHECK((bq & 0xff80) == 0xff80 && (bq & 0x7f), "-NaN -> bf16 -NaN %04x", bq);
    TU_CHECK(mdc_f32_to_bf16(fl(0x7f7fffffu)) == 0x7f80, "max f32 rounds to bf16 inf");
    TU_CHECK(mdc_f32_to_bf16(fl(0x00000001u)) == 0x0000, "f32 denormal 2^-149 -> bf16 0");
    TU_CHECK(mdc_f32_to_bf16(fl(0x00018000u)) == 0x0002, "bf16 subnormal tie to even");
    TU_CHECK(mdc_f32_to_bf16(1.00390625f) == 0x3f80, "1 + 2^-8 ties to even 1");
    TU_CHECK(mdc_f32_to_bf16(1.01171875f) == 0x3f82, "1 + 3 x 2^-8 ties to even up");

    /* 5. mixed precision's in-place rounding of a tensor (mdc_round_half, its fast paths) equals the
     * conversion there and back, on 2^24 patterns spread over every exponent (and fp32 unchanged) */
    size_t n = (size_t)1 << 24;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *z = malloc(n * sizeof(float));
    TU_CHECK(x && y && z, "host memory");
    for (size_t i = 0; x && y && z && i < n; i++) {
        uint32_t u = (uint32_t)(i * 2654435761u + 0x9e37u); /* odd multiplier: 2^24 distinct patterns */
        x[i] = y[i] = z[i] = fl(u);
    }
    long rbad = 0;
    if (x && y && z) {
        mdc_round_half(x, n, MDC_PRECISION_BF16);
        mdc_round_half(y, n, MDC_PRECISION_FP16);
        mdc_round_half(z, n, MDC_PRECISION_FP32);
        for (size_t i = 0; i < n; i++) {
            float v = fl((uint32_t)(i * 2654435761u + 0x9e37u));
            float b = mdc_bf16_to_f32(mdc_f32_to_bf16(v)), h = mdc_f16_to_f32(mdc_f32_to_f16(v));
            if ((bits(x[i]) != bits(b) || bits(y[i]) != bits(h) || bits(z[i]) != bits(v)) && rbad++ < 5)
                fprintf(stderr, "round_to(%a): bf16 %a want %a, fp16 %a want %a\n", (double)v, (double)x[i], (double)b,
                        (double)y[i], (double)h);
        }
    }
    TU_CHECK(rbad == 0, "mdc_round_half: %ld of %zu patterns differ from the conversions", rbad, n);
    free(x), free(y), free(z);
    return tu_finish("test_half");
}
