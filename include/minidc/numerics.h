/* minidc numerics: the project's own elementary functions, so that no result depends on the
 * platform's libm (glibc, macOS and musl differ in the last bits of logf, expf, powf, log, cos).
 *
 * Every function here is built from IEEE 754 basic operations only (+ - * /, correctly
 * rounded everywhere) and exact bit manipulation, in double, with no fused
 * multiply-add (the Makefile compiles with -ffp-contract=off), no long double and no libm call:
 * the same bits on every ISA, compiler and optimization level. They assume the default
 * floating-point environment (round to nearest even; no flush-to-zero) and promise no
 * floating-point exception flags or errno. A NaN argument gives that NaN (quieted: x + x);
 * a NaN made here is the positive quiet NaN 0x7fc00000 (0x7ff8000000000000 in double), not
 * the hardware's default NaN, whose sign differs between x86 and aarch64. */
#ifndef MINIDC_NUMERICS_H
#define MINIDC_NUMERICS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Natural logarithm. x = 2^k m with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s),
 * s = (m - 1)/(m + 1) (both exact for a float m), 10 terms of the series; plus k ln 2 with
 * ln 2 split in two. Before its one rounding to float the double result is within about
 * 3 * 2^-53 (< 2^-51) relative of log x, so the result is correctly rounded except where log x
 * lies that close to a midpoint between two floats (the test finds none rounded wrongly).
 * log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, log(1) = +0; subnormals exact in. */
float mdc_logf(float x);

/* e^x. x = n ln 2 + r, |r| <= ln2/2 (Cody-Waite: r exact up to one rounding), degree-13 Taylor
 * polynomial of e^r (truncation < 2^-57), times 2^n exactly, all in double: within about
 * 2^-52 relative before the one rounding to float, so correctly rounded except within about
 * that of a midpoint. Overflow (x > 88.72283172607422, the largest float with a finite e^x)
 * gives +inf, a result below 2^-150 gives +0, subnormal results are rounded once from the
 * exact double product; e^-inf = +0, e^+inf = +inf. */
float mdc_expf(float x);

/* Natural logarithm in double, the same algorithm as mdc_logf (s = (m-1)/(m+1) now rounded
 * twice): below 4.5e-16 relative (2 ulps; the test measures 2.8e-16). Specials as mdc_logf,
 * NaN 0x7ff8000000000000 for x < 0. */
double mdc_log(double x);

/* cos(2 pi u), meant for u in [0, 1) (Box-Muller): u reduced exactly to [0, 1) turns (cos is
 * even, so |u| minus its integer part), u*8 split exactly into an octant and a fraction f,
 * then a Taylor polynomial of sin or cos at (pi/4) f or (pi/4)(1 - f), in [0, pi/4]. Absolute
 * error below 5e-16 (the test measures 1.7e-16); cos(2 pi u) = +0 exactly at u = 1/4, 3/4
 * and +-1 at 0, 1/2. Infinities give NaN 0x7ff8000000000000, NaN gives that NaN. */
double mdc_cospi2(double u);

/* b^t for integer t by binary exponentiation in double, each product rounded to double, and
 * one rounding to float at the end; t < 0 gives 1 / b^-t (one more rounding). Relative error
 * before the final rounding at most about (|t| - 1) * 2^-53 (each squaring doubles the error of
 * its operand), e.g. 2^-43 for t = 1000: the float is correctly rounded unless b^t lies that
 * close to a midpoint. b^0 = 1 for every b, NaN included (C99's pow). */
float mdc_powf_int(float b, int t);

#ifdef __cplusplus
}
#endif

#endif
