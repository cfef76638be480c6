/* Exact summation of float32 values: a long fixed-point accumulator whose sum does not depend
 * on the order of the additions or on how they are grouped, so a reduction cut into blocks
 * spread over any number of ranks, combined by any collective algorithm, gives the same bits as
 * the serial loop. The summation exact mode builds on (docs/exactness.md).
 *
 * Value of an accumulator: sum over k of limb[k] * 2^(32k - 149). Every finite float is an
 * integer multiple of 2^-149 (the smallest subnormal) below 2^128, so it is a sum of two limb
 * contributions; limbs are int64 holding 32-bit pieces (carry-save), so an addition touches two
 * limbs and carries nothing. The top limb, weight 2^107, is signed with 63 bits: sums up to
 * 2^170 (2^42 additions of FLT_MAX) are exact. Integer addition is associative and
 * commutative, so limbwise combination is too; only the final rounding touches floating point.
 * NaN and infinities are flags (IEEE's result of the sum in any order), as is the sign of an
 * exact zero (-0 only when every addend was -0). Deterministic, no threads, no allocation. */
#ifndef MINIDC_EXACT_H
#define MINIDC_EXACT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MDC_EXACT_LIMBS 9
#define MDC_EXACT_LSB (-149) /* weight of bit 0 of limb 0: 2^-149 */

/* The element of dtype MDC_EXACT (80 bytes on the wire). `pending` bounds the limbs: each is a
 * sum of at most pending + 1 pieces of magnitude < 2^32, so carries are propagated
 * (normalization) before pending + 1 would pass MDC_EXACT_PENDING_MAX, which keeps every limb
 * below 2^63. Combining two accumulators gives pending a + pending b + 1: a tree over n
 * accumulators ends with their sum plus n - 1, whatever its shape. */
typedef struct {
    int64_t limb[MDC_EXACT_LIMBS];
    uint32_t pending; /* additions since the limbs were last normalized */
    uint32_t flags;   /* MDC_EXACT_F_* */
} mdc_exact;

#define MDC_EXACT_PENDING_MAX (((uint32_t)1 << 31) - 1)
enum {
    MDC_EXACT_F_NAN = 1,     /* a NaN was added */
    MDC_EXACT_F_PINF = 2,    /* +inf was added */
    MDC_EXACT_F_NINF = 4,    /* -inf was added */
    MDC_EXACT_F_ANY = 8,     /* something was added (the empty sum is +0) */
    MDC_EXACT_F_NOTNEG0 = 16 /* something other than -0 was added (an exact 0 is then +0) */
};

/* The empty sum (all zero bytes: a zero-filled buffer is an array of empty accumulators). */
void mdc_exact_clear(mdc_exact *a);
/* a += x exactly, for any float (NaN/inf set flags). */
void mdc_exact_add_f32(mdc_exact *a, float x);
/* a += x[0] + ... + x[n-1] exactly; branch-light, normalizes only when pending requires. */
void mdc_exact_add_f32s(mdc_exact *a, const float *x, size_t n);
/* a += v: exact when v is a multiple of 2^-149 below FLT_MAX in magnitude (v is split into
 * three floats); otherwise the bits below 2^-149 are rounded away as float conversion does, and
 * |v| beyond the float range adds an infinity. For mdc_dtype_set and tests. */
void mdc_exact_add_f64(mdc_exact *a, double v);
/* out = a + b exactly (limbwise; out may be a or b). */
void mdc_exact_sum(mdc_exact *out, const mdc_exact *a, const mdc_exact *b);
/* out[i] = a[i] + b[i] for n accumulators (the MDC_EXACT, MDC_SUM reduction). */
void mdc_exact_sum_n(mdc_exact *out, const mdc_exact *a, const mdc_exact *b, size_t n);
/* Propagates carries: limbs 0..7 in [0, 2^32), the top limb signed, pending 0. The value is
 * unchanged, and equal values (and flags) give identical bytes after it. */
void mdc_exact_normalize(mdc_exact *a);
/* The exact sum rounded to nearest, ties to even (subnormals and overflow to inf included);
 * NaN if a NaN or both infinities were added, else the infinity added. */
float mdc_exact_to_f32(const mdc_exact *a);
double mdc_exact_to_f64(const mdc_exact *a);

/* ---- arrays of exact sums (exact mode's working storage) --------------------------------------
 * An element is a double holding its exact sum so far: a sum of floats is a multiple of 2^-149,
 * and while it needs at most 53 bits a double holds it exactly. Each addition is checked with
 * TwoSum (the rounding error of s + x is computed exactly); the first inexact addition moves the
 * element into an accumulator ("escalation") and the double becomes a NaN naming it. Either way
 * the element is its exact sum, so every rounding of it gives the bits of the exact sum rounded
 * once, however the additions were ordered or split. Escalation is rare (two block partials of
 * one element 2^22 apart), so the common case is one double add and a check. Not threadsafe for
 * the same element; different elements may be added from different threads. */
typedef struct {
    double *v; /* n elements: the exact sum, or a NaN whose payload is a slot index */
    size_t n;
    mdc_exact *slot; /* the escalated elements' accumulators */
    size_t nslot, cap;
    int oom; /* a slot could not be allocated (sticky; mdc_xsum_ok reports it) */
} mdc_xsum;

/* Allocates n zero elements (host memory); 0 on success, -1 when out of memory. */
int mdc_xsum_init(mdc_xsum *x, size_t n);
void mdc_xsum_free(mdc_xsum *x);
/* Every element back to the empty sum (+0), the slots dropped. */
void mdc_xsum_clear(mdc_xsum *x);
/* x[off + i] = 0 for i < n (slots of those elements are left unused until the next clear). */
void mdc_xsum_zero(mdc_xsum *x, size_t off, size_t n);
/* 1 unless a slot allocation failed since the last clear. */
int mdc_xsum_ok(const mdc_xsum *x);
/* x[off + i] += p[i], exactly. */
void mdc_xsum_add(mdc_xsum *x, size_t off, const float *p, size_t n);
/* x[off + r ldx + c] += p[r ldp + c] for rows r < rows, columns c < cols, exactly. */
void mdc_xsum_add2d(mdc_xsum *x, size_t off, size_t ldx, const float *p, size_t ldp, int rows, int cols);
/* x[off + i] = a[i] (a double where the value is one, else a slot): a reduction's result back. */
void mdc_xsum_set(mdc_xsum *x, size_t off, const mdc_exact *a, size_t n);
/* out[i] = the exact value of x[off + i] as an accumulator (for a reduction over ranks). */
void mdc_xsum_get(const mdc_xsum *x, size_t off, size_t n, mdc_exact *out);
/* out[i] = x[off + i] rounded to float once (nearest, ties to even). */
void mdc_xsum_round(const mdc_xsum *x, size_t off, size_t n, float *out);
/* The exact value of element i as a double when it is one (returns 1), else 0. */
int mdc_xsum_double(const mdc_xsum *x, size_t i, double *out);
/* out[i] = a[i] rounded to float, for n accumulators. */
void mdc_exact_round_n(const mdc_exact *a, size_t n, float *out);
/* a += x exactly for a double that is a multiple of 2^-149 with |x| < 2^127 (any sum of floats
 * that fits in a double); other doubles as mdc_exact_add_f64. */
void mdc_exact_add_f64_exact(mdc_exact *a, double x);
/* a += x[i]^2 for i < n, each square exact in double (48 bits) and then added exactly; a
 * square below 2^-149's resolution is rounded first (deterministically, per element). */
void mdc_exact_add_squares(mdc_exact *a, const float *x, size_t n);

#ifdef __cplusplus
}
#endif
#endif
