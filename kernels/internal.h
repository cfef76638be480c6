/* Helpers shared by the kernels (not public): charging, the fixed-partition sgemm, and a
 * vectorizable exp. */
#ifndef MINIDC_KERNELS_INTERNAL_H
#define MINIDC_KERNELS_INTERNAL_H

/* Vectorization without changing a single rounding (this is not fast-math: no
 * reassociation, no contraction, no finite-math or signed-zero assumptions). The Makefile
 * compiles kernels/ with:
 * - -fno-trapping-math: lets the compiler if-convert float selects (x < c ? c : x) into vector
 *   blends; nothing here reads FP exception flags;
 * - -fno-math-errno: sqrtf becomes sqrtps, correctly rounded like sqrtf;
 * - (gcc) -fvect-cost-model=dynamic: -O3's cost model, so loops may get runtime alias checks
 *   and epilogues (the -O2 "very cheap" model refuses them);
 * - -ffp-contract=off, as everything: no fused multiply-add the source did not write.
 * Sums stay in source order unless a loop says `omp simd reduction`, which fixes its own
 * order at compile time (independent of the thread count, not of the vector width: exact
 * mode never takes such a loop). */

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "minidc/kernels.h"

/* Charges a kernel if there is a device (a macro: the trace names it by the calling kernel):
 * its bytes given as fp32's, charged at the run's dtype (mdc_dev_set_dtype); a matrix product
 * (charge_gemm) at the dtype's tensor-core peak too; AdamW's fp32 master state (charge_fp32) as
 * given.
 * Dry devices (mdc_dev_set_dry, predict): a kernel charges exactly what it charges on a normal
 * device (the same calls, names, order, FLOPs, bytes and precision) and neither computes nor reads
 * or writes its tensors (a dry tensor is an alias of garbage and may be huge): it tests
 * mdc_dev_dry(dev) after its argument checks and jumps to a `charge:` label in front of its
 * charges, whose figures come from the sizes alone (a kernel made of other kernels passes the
 * device on); a value it returns from data is 0. tests/unit/test_dry_kernels.c checks each. */
#define mdc_k_charge_as(dev, flops, bytes, prec)                    \
    do {                                                            \
        mdc_device *k_dev_ = (dev);                                 \
        if (k_dev_) mdc_dev_kernel(k_dev_, (flops), (bytes), prec); \
    } while (0)
#define mdc_k_charge(dev, flops, bytes) mdc_k_charge_as(dev, flops, bytes, MDC_PREC_RUN)
#define mdc_k_charge_gemm(dev, flops, bytes) mdc_k_charge_as(dev, flops, bytes, MDC_PREC_GEMM)
#define mdc_k_charge_fp32(dev, flops, bytes) mdc_k_charge_as(dev, flops, bytes, MDC_PREC_FP32)

/* C(M,N) = alpha op(A) op(B) + beta C, row-major, split into blocks along the larger of M
 * and N whose number and bounds depend only on the sizes (so the bits do not depend on the
 * thread count: OpenBLAS's result for an element depends on the block it is computed in);
 * the blocks run in parallel under OpenMP, each a single-threaded cblas_sgemm. Called from
 * inside a parallel region it runs the same blocks serially. */
void mdc_k_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc);

/* Same, one cblas_sgemm call (for callers that already parallelize, e.g. per head). */
void mdc_k_sgemm1(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                  int ldb, float beta, float *C, int ldc);

/* exp(x) to about 1 ulp for x in [-87, 88.3] (0 below -87.3, exp(88.3) above up to
 * MDC_K_EXP_MAX, where expf overflows: inf beyond it), written so the compiler vectorizes it:
 * Cody-Waite reduction by ln 2, degree-7 Taylor polynomial on |r| <= ln2/2 (truncation error
 * < 5e-9 relative), scale by 2^n through the exponent bits. NaN gives NaN, -inf 0, +inf inf.
 * IEEE operations only, so the result is the same on every run and thread count. */
#define MDC_K_EXP_MAX 88.72283172607422f /* the largest float whose exp is finite */
static inline float mdc_k_exp(float x) {
    /* quiet comparisons (no FE_INVALID on NaN): GCC if-converts and vectorizes them under
     * the default -ftrapping-math, where it leaves x < c as a branch. NaN is replaced by 0
     * before the int conversion below (converting NaN to int32 is undefined behaviour) and
     * put back at the end; every other x is clamped, so n + 127 is in [1, 254]. */
    float xc = __builtin_isless(x, -87.0f)     ? -87.0f
               : __builtin_isgreater(x, 88.3f) ? 88.3f
               : __builtin_isunordered(x, x)   ? 0.0f
                                               : x;
    const float big = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float n = (xc * 1.44269504088896341f + big) - big;
    float r = xc - n * 0.693145751953125f; /* ln2 high part (exact product) */
    r = r - n * 1.42860682030941723e-6f;   /* ln2 low part */
    float p = 1.9841269841e-4f;            /* 1/7! */
    p = p * r + 1.3888888889e-3f;
    p = p * r + 8.3333333333e-3f;
    p = p * r + 4.1666666667e-2f;
    p = p * r + 1.6666666667e-1f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t e = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &e, sizeof s);
    float y = p * s;
    y = __builtin_isless(x, -87.3f) ? 0.0f : y;
    y = __builtin_isgreater(x, MDC_K_EXP_MAX) ? INFINITY : y;
    return __builtin_isunordered(x, x) ? x : y;
}

#endif
