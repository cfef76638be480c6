/* Test helpers shared by every C test: assertions that print what differs, and the MPI
 * test start-up. Header-only so each test is one file. */
#ifndef MINIDC_TESTUTIL_H
#define MINIDC_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/minidc.h"

static int tu_failures;

#define TU_CHECK(cond, ...)                                                          \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fprintf(stderr, "\n");                                                   \
            tu_failures++;                                                           \
        }                                                                            \
    } while (0)

/* Exact equality of doubles computed by the code under test and by the test. */
#define TU_EQ_DBL(a, b) TU_CHECK((a) == (b), "%.17g != %.17g", (double)(a), (double)(b))
#define TU_NEAR(a, b, rel)                                                                        \
    TU_CHECK(fabs((double)(a) - (double)(b)) <= (rel)*fmax(fabs((double)(a)), fabs((double)(b))), \
             "%.17g vs %.17g (rel tol %g)", (double)(a), (double)(b), (double)(rel))
#define TU_STATUS(expr, want)                                                                                 \
    do {                                                                                                      \
        mdc_status tu_st_ = (expr);                                                                           \
        TU_CHECK(tu_st_ == (want), "%s gave %s (%s), expected %s", #expr, mdc_strerror(tu_st_), mdc_detail(), \
                 mdc_strerror(want));                                                                         \
    } while (0)
#define TU_CONTAINS(hay, needle) \
    TU_CHECK(strstr((hay), (needle)) != NULL, "'%s' does not contain '%s'", (hay), (needle))

static long tu_printed; /* mismatch reports printed; the first 20 are, then they are counted */

/* Compares n elements of type t bit for bit; on a difference counts a failure and reports the
 * case, how many differ, the first bad index with both values, and the max error. */
static inline int tu_cmp_bits(mdc_dtype t, const void *got, const void *want, size_t n, const char *what) {
    size_t es = mdc_dtype_size(t), bad = 0, first = 0;
    double maxerr = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es)) {
            if (!bad) first = i;
            bad++;
            double e = fabs(mdc_dtype_get(got, t, i) - mdc_dtype_get(want, t, i));
            if (e > maxerr || isnan(e)) maxerr = e;
        }
    if (bad) {
        tu_failures++;
        if (tu_printed++ < 20)
            fprintf(stderr, "%s: %zu of %zu differ; first at %zu: got %.9g want %.9g; max error %.3g\n", what, bad, n,
                    first, mdc_dtype_get(got, t, first), mdc_dtype_get(want, t, first), maxerr);
    }
    return !bad;
}

static inline int tu_cmp_f32(const char *what, const float *got, const float *want, size_t n) {
    return tu_cmp_bits(MDC_F32, got, want, n, what);
}

/* Collective tests take `--slice BYTES` (after the device options): the slice of reducing
 * exchange steps (mdc_coll_set_slice), so the sliced path runs on the tests' small counts. */
static inline void tu_coll_options(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--slice")) mdc_coll_set_slice((size_t)strtoull(argv[i + 1], NULL, 10));
}

/* An h100 on the default energy table, accounting only (rank 0), HBM times hbm_scale. */
static inline mdc_device *tu_device(double hbm_scale) {
    mdc_device_spec spec;
    mdc_energy_table tab;
    MDC_CHECK(mdc_preset_find("h100", &spec));
    MDC_CHECK(mdc_energy_table_find("default", &tab));
    mdc_device *d;
    MDC_CHECK(mdc_device_create_spec(&d, &spec, &tab, hbm_scale, MDC_EMULATE_ACCOUNT, 1.0, 0));
    return d;
}

/* |got - want| <= tol * max(max|want|, 1e-6) over n elements: prints the max error, and a
 * failure names the worst element. */
static inline void tu_near_vec(const char *what, const float *got, const double *want, size_t n, double tol) {
    double maxw = 1e-6, maxe = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) maxw = fmax(maxw, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= maxe)) maxe = e, worst = i;
    }
    int ok = maxe <= tol * maxw;
    printf("%-52s max err %.3g (rel %.3g)%s\n", what, maxe, maxe / maxw, ok ? "" : "  FAIL");
    TU_CHECK(ok, "%s: element %zu: got %.9g want %.9g", what, worst, got[worst], want[worst]);
}

/* Central differences of a double loss in each element of x, against the analytic gradient. */
typedef double (*tu_loss_fn)(void *ctx);
static inline void tu_fd_check(const char *what, double *x, size_t n, const float *analytic, tu_loss_fn f, void *ctx) {
    /* every element of small tensors; ~150 spread over larger ones (a prime stride) */
    size_t step = n <= 300 ? 1 : n / 150 + 1, m = 0;
    while (step > 1 && n % step == 0) step++;
    double *num = malloc(sizeof(double) * n);
    float *got = malloc(sizeof(float) * n);
    for (size_t j = 0, i = 0; j < n; j += step, i = j) {
        double s = x[i], h = 1e-5 * fmax(1.0, fabs(s));
        x[i] = s + h;
        double lp = f(ctx);
        x[i] = s - h;
        double lm = f(ctx);
        x[i] = s;
        num[m] = (lp - lm) / (2 * h);
        got[m++] = analytic[i];
    }
    char name[96];
    snprintf(name, sizeof name, "grad %s vs finite diff", what);
    tu_near_vec(name, got, num, m, 2e-5);
    free(num);
    free(got);
}

/* Ends a test: prints the verdict, returns the process exit code. */
/* Uniform in [-1, 1), xorshift64 from a fixed seed: the same inputs every run (per program);
 * tu_seed restarts the sequence. */
static inline uint64_t *tu_rng(void) {
    static uint64_t s = 88172645463325252ull;
    return &s;
}
static inline void tu_seed(uint64_t v) { *tu_rng() = v; }
static inline float tu_frand(void) {
    uint64_t *s = tu_rng();
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline int tu_finish(const char *name) {
    if (tu_failures) fprintf(stderr, "%s: %d check(s) failed\n", name, tu_failures);
    return tu_failures ? 1 : 0;
}

#endif
