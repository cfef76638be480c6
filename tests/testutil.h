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

#define TU_CHECK(cond, ...)                                                        \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
            tu_failures++;                                                         \
        }                                                                          \
    } while (0)

/* Exact equality of doubles computed by the code under test and by the test. */
#define TU_EQ_DBL(a, b) TU_CHECK((a) == (b), "%.17g != %.17g", (double)(a), (double)(b))
#define TU_NEAR(a, b, rel)                                                                 \
    TU_CHECK(fabs((double)(a) - (double)(b)) <= (rel) * fmax(fabs((double)(a)), fabs((double)(b))), \
             "%.17g vs %.17g (rel tol %g)", (double)(a), (double)(b), (double)(rel))
#define TU_STATUS(expr, want)                                                              \
    do {                                                                                   \
        mdc_status tu_st_ = (expr);                                                        \
        TU_CHECK(tu_st_ == (want), "%s gave %s (%s), expected %s", #expr, mdc_strerror(tu_st_), \
                 mdc_detail(), mdc_strerror(want));                                        \
    } while (0)
#define TU_CONTAINS(hay, needle) \
    TU_CHECK(strstr((hay), (needle)) != NULL, "'%s' does not contain '%s'", (hay), (needle))

/* Compares n floats bit for bit; reports the first bad index and the max error. */
static inline int tu_cmp_f32(const char *what, const float *got, const float *want, size_t n) {
    size_t bad = 0, first = (size_t)-1;
    double maxerr = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            if (first == (size_t)-1) first = i;
            bad++;
            double e = fabs((double)got[i] - (double)want[i]);
            if (e > maxerr || isnan(e)) maxerr = e;
        }
    if (bad) {
        fprintf(stderr, "%s: %zu of %zu differ; first at %zu: got %.9g want %.9g; max error %.3g\n",
                what, bad, n, first, got[first], want[first], maxerr);
        tu_failures++;
    }
    return bad == 0;
}

/* Collective tests take `--slice BYTES` (after the device options): the slice of reducing
 * exchange steps (mdc_coll_set_slice), so the sliced path runs on the tests' small counts. */
static inline void tu_coll_options(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--slice")) mdc_coll_set_slice((size_t)strtoull(argv[i + 1], NULL, 10));
}

/* Ends a test: prints the verdict, returns the process exit code. */
static inline int tu_finish(const char *name) {
    if (tu_failures) fprintf(stderr, "%s: %d check(s) failed\n", name, tu_failures);
    return tu_failures ? 1 : 0;
}

#endif
