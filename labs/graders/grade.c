/* The check table of a lab's grader (grade.h). */
#include "grade.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define WHY 200

mdc_status grade_begin(grade *g, int *argc, char ***argv, double timeout_s) {
    memset(g, 0, sizeof *g);
    mdc_status st = mdc_runtime_init(&g->rt, argc, argv);
    if (st) return st;
    g->p = g->rt.size, g->me = g->rt.rank;
    snprintf(g->prefix, sizeof g->prefix, "np=%d", g->p);
    mdc_transport_set_timeout(g->rt.tr, timeout_s);
    return MDC_OK;
}

int grade_check(grade *g, const char *name, int ok, const char *why, ...) {
    char mine[WHY + 1] = {0};
    mine[0] = (char)(ok != 0);
    if (!ok && why) {
        va_list ap;
        va_start(ap, why);
        vsnprintf(mine + 1, WHY, why, ap);
        va_end(ap);
    }
    static char all[64 * (WHY + 1)];
    int everyone = 1, bad = -1;
    if (g->p <= 64 && !mdc_gather(mine, all, WHY + 1, MDC_U8, 0, g->rt.world)) {
        for (int r = 0; g->me == 0 && r < g->p; r++)
            if (!all[(size_t)r * (WHY + 1)] && bad < 0) bad = r, everyone = 0;
    } else {
        everyone = 0; /* the grade's own gather failed: nothing can be trusted */
        if (g->me == 0) snprintf(all + 1, WHY, "the grader could not collect the ranks' results"), bad = 0;
    }
    g->rows++;
    if (g->me == 0) {
        if (everyone) {
            printf("PASS  %-5s  %s\n", g->prefix, name);
            g->passed++;
        } else {
            printf("FAIL  %-5s  %s: rank %d: %s\n", g->prefix, name, bad, all + (size_t)bad * (WHY + 1) + 1);
        }
        fflush(stdout);
    }
    return everyone; /* meaningful on rank 0 only */
}

int grade_end(grade *g) {
    int failed = g->rows - g->passed;
    if (g->me == 0) printf("%s: %d of %d checks passed\n", g->prefix, g->passed, g->rows);
    mdc_runtime_finalize(&g->rt);
    return g->me == 0 && failed ? 1 : 0;
}

static void count_send(void *ctx, int is_send, int me, int peer, size_t bytes, int tag) {
    grade_traffic *t = ctx;
    (void)me, (void)peer, (void)tag;
    if (is_send) t->sends++, t->bytes += bytes;
}

void grade_traffic_begin(grade *g, grade_traffic *t) {
    *t = (grade_traffic){0, 0};
    mdc_transport_set_trace(g->rt.tr, count_send, t);
}

void grade_traffic_end(grade *g) { mdc_transport_set_trace(g->rt.tr, NULL, NULL); }

/* The first of n elements of esz bytes that differ bit for bit, described with `digits`. */
static long first_diff(const void *got, const void *want, size_t n, size_t esz, int digits, char *why, size_t cap) {
    const char *a = got, *b = want;
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i * esz, b + i * esz, esz)) {
            double x = esz == 4 ? ((const float *)got)[i] : ((const double *)got)[i];
            double y = esz == 4 ? ((const float *)want)[i] : ((const double *)want)[i];
            snprintf(why, cap, "element %zu of %zu is %.*g, expected %.*g", i, n, digits, x, digits, y);
            return (long)i;
        }
    return -1;
}

long grade_first_diff_f32(const float *got, const float *want, size_t n, char *why, size_t cap) {
    return first_diff(got, want, n, sizeof(float), 9, why, cap);
}

long grade_first_diff_f64(const double *got, const double *want, size_t n, char *why, size_t cap) {
    return first_diff(got, want, n, sizeof(double), 17, why, cap);
}

const char *grade_status_text(mdc_status st, char *buf, size_t cap) {
    snprintf(buf, cap, "returned %s: %s", mdc_strerror(st), mdc_detail());
    return buf;
}
