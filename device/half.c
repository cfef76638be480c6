/* f32 <-> bf16 and f16 with round-to-nearest-even; NaN stays NaN (quiet), infinities stay. */
#include <string.h>

#include "minidc/device.h"

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t mdc_f32_to_bf16(float f) {
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                             /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float mdc_bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

uint16_t mdc_f32_to_f16(float f) {
    uint32_t u = bits_of(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                       /* rounds to >= 65520: infinity */
    if (a < 0x38800000u) {                          /* result is subnormal or zero in f16 */
        if (a < 0x33000000u) return (uint16_t)sign; /* below half the smallest subnormal */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        /* a = m * 2^(e-150) with the implicit bit in m; in units of 2^-24 that is
         * m * 2^(e-126), so drop 126-e bits (14..24 here) and round what they held. */
        int shift = (int)(126 - e);
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

static int host_dry; /* mdc_host_set_dry: a predicting process converts nothing */
void mdc_host_set_dry(int on) { host_dry = on != 0; }
int mdc_host_dry(void) { return host_dry; }

void mdc_pack_half(void *dst, const float *src, size_t n, int bf16) {
    if (host_dry) return;
    uint16_t *h = dst;
    for (size_t i = 0; i < n; i++) h[i] = bf16 ? mdc_f32_to_bf16(src[i]) : mdc_f32_to_f16(src[i]);
}

void mdc_unpack_half(float *dst, const void *src, size_t n, int bf16) {
    const uint16_t *h = src;
    if (host_dry) return;
    for (size_t i = n; i-- > 0;) dst[i] = bf16 ? mdc_bf16_to_f32(h[i]) : mdc_f16_to_f32(h[i]);
}

float mdc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return float_of(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0) return float_of(sign);
        /* subnormal: m * 2^-24 is exact in f32 */
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return float_of(sign | ((e + 112) << 23) | (m << 13));
}

/* in place, for mixed precision (the model's tensors, the attention kernels' probabilities): one
 * element's rounding, then the loops (a large tensor's spread over the threads; a short row, as the
 * attention kernels round from inside their own parallel regions, without an OpenMP construct) */
static inline float bf16_of(float f) {
    uint32_t u = bits_of(f);
    uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    u = nan ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u); /* NaN stays (quiet); ties to even */
    return float_of(u & 0xffff0000u);
}

/* fp16's normal range by the bits (10 mantissa bits kept, ties to even); subnormals, overflow to
 * infinity and NaN by the conversion's general path */
static inline float f16_of(float f) {
    uint32_t u = bits_of(f), a = u & 0x7fffffffu;
    if (a >= 0x38800000u && a < 0x477fe000u) /* [2^-14, 65504]: stays finite and normal */
        return float_of((u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u);
    return mdc_f16_to_f32(mdc_f32_to_f16(f)); /* above 65504: infinity */
}

void mdc_round_half(float *x, size_t n, int kind) {
    if ((kind != 1 && kind != 2) || host_dry) return;
    if (n > 65536) {
        if (kind == 1) {
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < n; i++) x[i] = bf16_of(x[i]);
        } else {
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < n; i++) x[i] = f16_of(x[i]);
        }
    } else if (kind == 1) {
        for (size_t i = 0; i < n; i++) x[i] = bf16_of(x[i]);
    } else {
        for (size_t i = 0; i < n; i++) x[i] = f16_of(x[i]);
    }
}
