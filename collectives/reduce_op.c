/* Data types and reduction ops: names, sizes, and the element-wise reduction every reducing
 * collective uses.
 *
 * out[i] = a[i] OP b[i]: `a` is the left operand (the partial result that arrived first in the
 * algorithm's documented order), so the association of every sum is fixed by the algorithm.
 * Integers wrap (two's complement, as MPI implementations do); f16/bf16 are widened to f32,
 * reduced in f32 and rounded to nearest-even after every step, as a GPU ring does; min/max
 * return the left operand unless the right one is strictly smaller/larger. AVG reduces as SUM
 * and mdc_reduce_finish divides once at the end. No threads: the result never depends on the
 * thread count. The loops are vectorised (-O3 here), which is exact for element-wise IEEE ops.
 * MDC_EXACT elements are accumulators (numerics/exact.c), summed limbwise: exactly associative. */
#include <math.h>
#include <string.h>

#include "coll_internal.h"

static const size_t dtype_size[MDC_DTYPE_END] = {
    [MDC_F32] = 4,       [MDC_F64] = 8, [MDC_F16] = 2, [MDC_BF16] = 2,
    [MDC_I32] = 4,       [MDC_I64] = 8, [MDC_U8] = 1,  [MDC_EXACT] = sizeof(mdc_exact),
    [MDC_EXACT_F64] = 8,
};
static const char *const dtype_names[MDC_DTYPE_END] = {
    [MDC_F32] = "f32", [MDC_F64] = "f64", [MDC_F16] = "f16",     [MDC_BF16] = "bf16",         [MDC_I32] = "i32",
    [MDC_I64] = "i64", [MDC_U8] = "u8",   [MDC_EXACT] = "exact", [MDC_EXACT_F64] = "exact64",
};
static const char *const op_names[MDC_OP_COUNT] = {
    [MDC_SUM] = "sum", [MDC_PROD] = "prod", [MDC_MIN] = "min", [MDC_MAX] = "max", [MDC_AVG] = "avg",
};

size_t mdc_dtype_size(mdc_dtype t) { return (unsigned)t < MDC_DTYPE_END ? dtype_size[t] : 0; }

double mdc_dtype_get(const void *buf, mdc_dtype t, size_t i) {
    switch (t) {
    case MDC_F32: return ((const float *)buf)[i];
    case MDC_F64: return ((const double *)buf)[i];
    case MDC_F16: return mdc_f16_to_f32(((const uint16_t *)buf)[i]);
    case MDC_BF16: return mdc_bf16_to_f32(((const uint16_t *)buf)[i]);
    case MDC_I32: return ((const int32_t *)buf)[i];
    case MDC_I64: return (double)((const int64_t *)buf)[i];
    case MDC_U8: return ((const uint8_t *)buf)[i];
    case MDC_EXACT: return mdc_exact_to_f64((const mdc_exact *)buf + i);
    case MDC_EXACT_F64: return ((const double *)buf)[i];
    default: return 0;
    }
}

void mdc_dtype_set(void *buf, mdc_dtype t, size_t i, double v) {
    switch (t) {
    case MDC_F32: ((float *)buf)[i] = (float)v; break;
    case MDC_F64: ((double *)buf)[i] = v; break;
    case MDC_F16: ((uint16_t *)buf)[i] = mdc_f32_to_f16((float)v); break;
    case MDC_BF16: ((uint16_t *)buf)[i] = mdc_f32_to_bf16((float)v); break;
    case MDC_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case MDC_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case MDC_U8: ((uint8_t *)buf)[i] = (uint8_t)(int)v; break;
    case MDC_EXACT: mdc_exact_clear((mdc_exact *)buf + i), mdc_exact_add_f64((mdc_exact *)buf + i, v); break;
    case MDC_EXACT_F64: ((double *)buf)[i] = v; break;
    default: break;
    }
}
const char *mdc_dtype_name(mdc_dtype t) { return (unsigned)t < MDC_DTYPE_END ? dtype_names[t] : "?"; }
const char *mdc_op_name(mdc_op op) { return (unsigned)op < MDC_OP_COUNT ? op_names[op] : "?"; }

int mdc_dtype_parse(const char *s) {
    if (!s) return -1;
    for (int i = 0; i < MDC_DTYPE_END; i++)
        if (!strcmp(s, dtype_names[i])) return i;
    if (!strcmp(s, "float")) return MDC_F32;
    if (!strcmp(s, "double")) return MDC_F64;
    return -1;
}

int mdc_op_parse(const char *s) {
    if (!s) return -1;
    for (int i = 0; i < MDC_OP_COUNT; i++)
        if (!strcmp(s, op_names[i])) return i;
    return -1;
}

/* The element operations. L is the left operand. */
#define OP_SUM(L, R) ((L) + (R))
#define OP_PROD(L, R) ((L) * (R))
#define OP_MIN(L, R) ((R) < (L) ? (R) : (L))
#define OP_MAX(L, R) ((R) > (L) ? (R) : (L))
/* Integers wrap through the unsigned type (signed overflow is undefined in C). */
#define OP_USUM(U, L, R) ((U)(L) + (U)(R))
#define OP_UPROD(U, L, R) ((U)(L) * (U)(R))

/* Three loops per (type, op) so the compiler can vectorise without alias checks: out == a,
 * out == b, and three separate arrays (callers never pass partially overlapping arrays). */
#define LOOPS(T, EXPR)                                \
    do {                                              \
        if (out == a) {                               \
            T *o = out;                               \
            const T *restrict y = b;                  \
            for (size_t i = 0; i < n; i++) {          \
                T l = o[i], r = y[i];                 \
                o[i] = (T)(EXPR);                     \
            }                                         \
        } else if (out == b) {                        \
            T *o = out;                               \
            const T *restrict x = a;                  \
            for (size_t i = 0; i < n; i++) {          \
                T l = x[i], r = o[i];                 \
                o[i] = (T)(EXPR);                     \
            }                                         \
        } else {                                      \
            T *restrict o = out;                      \
            const T *restrict x = a, *restrict y = b; \
            for (size_t i = 0; i < n; i++) {          \
                T l = x[i], r = y[i];                 \
                o[i] = (T)(EXPR);                     \
            }                                         \
        }                                             \
    } while (0)

#define FLOAT_OPS(T)                               \
    switch (op) {                                  \
    case MDC_SUM:                                  \
    case MDC_AVG: LOOPS(T, OP_SUM(l, r)); break;   \
    case MDC_PROD: LOOPS(T, OP_PROD(l, r)); break; \
    case MDC_MIN: LOOPS(T, OP_MIN(l, r)); break;   \
    case MDC_MAX: LOOPS(T, OP_MAX(l, r)); break;   \
    default: break;                                \
    }
#define INT_OPS(T, U)                                  \
    switch (op) {                                      \
    case MDC_SUM:                                      \
    case MDC_AVG: LOOPS(T, OP_USUM(U, l, r)); break;   \
    case MDC_PROD: LOOPS(T, OP_UPROD(U, l, r)); break; \
    case MDC_MIN: LOOPS(T, OP_MIN(l, r)); break;       \
    case MDC_MAX: LOOPS(T, OP_MAX(l, r)); break;       \
    default: break;                                    \
    }

/* f16/bf16: widen, reduce in f32, round to nearest-even. */
#define HALF_LOOP(TO32, FROM32, EXPR)             \
    do {                                          \
        uint16_t *o = out;                        \
        const uint16_t *x = a, *y = b;            \
        for (size_t i = 0; i < n; i++) {          \
            float l = TO32(x[i]), r = TO32(y[i]); \
            o[i] = FROM32(EXPR);                  \
        }                                         \
    } while (0)
#define HALF_OPS(TO32, FROM32)                                    \
    switch (op) {                                                 \
    case MDC_SUM:                                                 \
    case MDC_AVG: HALF_LOOP(TO32, FROM32, OP_SUM(l, r)); break;   \
    case MDC_PROD: HALF_LOOP(TO32, FROM32, OP_PROD(l, r)); break; \
    case MDC_MIN: HALF_LOOP(TO32, FROM32, OP_MIN(l, r)); break;   \
    case MDC_MAX: HALF_LOOP(TO32, FROM32, OP_MAX(l, r)); break;   \
    default: break;                                               \
    }

void mdc_i_reduce3(void *out, const void *a, const void *b, size_t n, mdc_dtype t, mdc_op op) {
    if (n == 0 || mdc_host_dry()) return; /* a predicting process reduces nothing (the caller charges) */
    switch (t) {
    case MDC_F32: FLOAT_OPS(float); break;
    case MDC_F64: FLOAT_OPS(double); break;
    case MDC_F16: HALF_OPS(mdc_f16_to_f32, mdc_f32_to_f16); break;
    case MDC_BF16: HALF_OPS(mdc_bf16_to_f32, mdc_f32_to_bf16); break;
    case MDC_I32: INT_OPS(int32_t, uint32_t); break;
    case MDC_I64: INT_OPS(int64_t, uint64_t); break;
    case MDC_U8: INT_OPS(uint8_t, uint8_t); break;
    case MDC_EXACT: /* exact, hence the same for any association; other ops are refused earlier */
        if (op == MDC_SUM) mdc_exact_sum_n(out, a, b, n);
        break;
    case MDC_EXACT_F64: /* the exact sum, or NaN (sticky: NaN operands give NaN) */
        if (op == MDC_SUM) {
            const double *x = a, *y = b;
            double *o = out;
            for (size_t i = 0; i < n; i++) {
                double s = x[i], q = y[i], u = s + q, z = u - s, e = (s - (u - z)) + (q - z);
                o[i] = e == 0 ? u : (double)NAN;
            }
        }
        break;
    default: break;
    }
}

void mdc_reduce_local(void *inout, const void *in, size_t count, mdc_dtype t, mdc_op op) {
    mdc_i_reduce3(inout, inout, in, count, t, op);
}

void mdc_reduce_finish(void *buf, size_t count, mdc_dtype t, mdc_op op, int n) {
    if (op != MDC_AVG || n <= 1 || count == 0 || mdc_host_dry()) return;
    size_t i;
    switch (t) {
    case MDC_F32: {
        float *x = buf;
        float d = (float)n;
        for (i = 0; i < count; i++) x[i] /= d;
    } break;
    case MDC_F64: {
        double *x = buf;
        double d = n;
        for (i = 0; i < count; i++) x[i] /= d;
    } break;
    case MDC_F16: {
        uint16_t *x = buf;
        for (i = 0; i < count; i++) x[i] = mdc_f32_to_f16(mdc_f16_to_f32(x[i]) / (float)n);
    } break;
    case MDC_BF16: {
        uint16_t *x = buf;
        for (i = 0; i < count; i++) x[i] = mdc_f32_to_bf16(mdc_bf16_to_f32(x[i]) / (float)n);
    } break;
    case MDC_I32: {
        int32_t *x = buf;
        for (i = 0; i < count; i++) x[i] /= n;
    } break;
    case MDC_I64: {
        int64_t *x = buf;
        for (i = 0; i < count; i++) x[i] /= n;
    } break;
    case MDC_U8: {
        uint8_t *x = buf;
        for (i = 0; i < count; i++) x[i] = (uint8_t)(x[i] / n);
    } break;
    default: break;
    }
}

void mdc_i_reduce(mdc_group *g, void *out, const void *a, const void *b, size_t n, mdc_dtype t, mdc_op op) {
    if (n == 0) return;
    mdc_i_reduce3(out, a, b, n, t, op);
    mdc_device *dev = mdc_transport_device(mdc_group_transport(g));
    if (dev) mdc_dev_reduce(dev, (double)n, (double)mdc_dtype_size(t));
}
