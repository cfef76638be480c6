/* Grader of lab 1 (labs/lab1_allreduce.c): the student's ring all-reduce, registered as allreduce
 * algorithm "student" and run through mdc_allreduce. Checks, at the world's p ranks: the sum
 * for counts 1, p-1, p+1, 1000+p and 4096p (integer values: exact in any order, so bit for
 * bit), in place, MAX and AVG, the exact type (bit-identical to the serial sum), random floats
 * (every rank the same bits, within the rounding bound of a p-term sum), and the ring's cost: 2(p-1)
 * messages and 2(p-1)/p n bytes sent per rank (traced). At p = 4 it prints the messages rank 0
 * posted beside minidc's ring's (minidc explain allreduce --algo ring).
 * Ranks: 1 2 3 4 5 8 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"
#include "minidc/schedule.h"

mdc_status lab_allreduce(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g);

typedef struct {
    size_t sends, bytes;
    char log[512]; /* the first messages, as text */
} traced;

static void on_message(void *ctx, int is_send, int me, int peer, size_t bytes, int tag) {
    traced *tr = ctx;
    (void)me, (void)tag;
    if (is_send) tr->sends++, tr->bytes += bytes;
    size_t n = strlen(tr->log);
    if (n + 40 < sizeof tr->log)
        snprintf(tr->log + n, sizeof tr->log - n, "%s%s r%d %zu B", n ? ", " : "", is_send ? "send" : "recv", peer,
                 bytes);
}

/* The value rank r contributes at element i: small integers, so every order of summation is exact. */
static float int_value(int r, size_t i) { return (float)((int)((i * 7 + (size_t)r * 13) % 23) - 11); }

/* Runs the student's allreduce of `count` floats of int_value on this rank; ok when every
 * element equals the exact reduction. */
static void check_ints(grade *g, const char *name, size_t count, mdc_op op, int in_place) {
    float *x = malloc(sizeof(float) * (count + 1)), *y = malloc(sizeof(float) * (count + 1)),
          *want = malloc(sizeof(float) * (count + 1));
    char why[200] = "";
    int ok = x && y && want;
    for (size_t i = 0; ok && i < count; i++) {
        x[i] = int_value(g->me, i);
        double acc = op == MDC_MAX ? -1e30 : 0;
        for (int r = 0; r < g->p; r++) acc = op == MDC_MAX ? fmax(acc, int_value(r, i)) : acc + int_value(r, i);
        want[i] = op == MDC_AVG ? (float)acc / (float)g->p : (float)acc;
        y[i] = -999.0f;
    }
    if (ok) {
        if (in_place) memcpy(y, x, sizeof(float) * count);
        mdc_status st = mdc_allreduce(in_place ? MDC_IN_PLACE : x, y, count, MDC_F32, op, g->rt.world);
        if (st) ok = 0, grade_status_text(st, why, sizeof why);
        else ok = grade_first_diff_f32(y, want, count, why, sizeof why) < 0;
    } else {
        snprintf(why, sizeof why, "out of memory");
    }
    grade_check(g, name, ok, "%s", why);
    free(x), free(y), free(want);
}

/* Floats with 24 significant bits and exponents within 2^-8..2^8: a sum of up to 8 is exact in a double. */
static float rnd_float(int r, size_t i) {
    uint64_t z = (uint64_t)r * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
    z ^= z >> 31, z *= 0x94D049BB133111EBull, z ^= z >> 29;
    float m = (float)(z & 0xFFFFFF) / (float)0x1000000; /* [0, 1), 24 bits */
    return ldexpf(m - 0.5f, (int)((z >> 24) % 17) - 8);
}

static void check_exact(grade *g, size_t count) {
    double *x = malloc(sizeof(double) * count), *y = malloc(sizeof(double) * count),
           *want = malloc(sizeof(double) * count);
    char why[200] = "";
    int ok = x && y && want;
    for (size_t i = 0; ok && i < count; i++) {
        x[i] = rnd_float(g->me, i);
        want[i] = 0;
        for (int r = 0; r < g->p; r++) want[i] += rnd_float(r, i); /* exact: see rnd_float */
    }
    if (ok) {
        mdc_status st = mdc_allreduce(x, y, count, MDC_EXACT_F64, MDC_SUM, g->rt.world);
        if (st) ok = 0, grade_status_text(st, why, sizeof why);
        else ok = grade_first_diff_f64(y, want, count, why, sizeof why) < 0;
    }
    grade_check(g, "exact sum of 333 random values (MDC_EXACT_F64): bit-identical to the serial sum", ok, "%s", why);
    free(x), free(y), free(want);
}

/* Random floats: a float sum's bits depend on its order, so check that every rank holds rank
 * 0's bits and that each element is within a p-term float sum's rounding bound of the exact sum:
 * |got - sum| <= (p-1) 2^-24 sum |x_r| (plus the last rounding). */
static void check_random(grade *g, size_t count) {
    float *x = malloc(sizeof(float) * count), *y = malloc(sizeof(float) * count), *y0 = malloc(sizeof(float) * count);
    char why[200] = "";
    int ok = x && y && y0;
    for (size_t i = 0; ok && i < count; i++) x[i] = rnd_float(g->me, i);
    mdc_status st = ok ? mdc_allreduce(x, y, count, MDC_F32, MDC_SUM, g->rt.world) : MDC_ERR_OOM_HOST;
    if (st) {
        ok = 0, grade_status_text(st, why, sizeof why);
    } else {
        for (size_t i = 0; ok && i < count; i++) {
            double s = 0, a = 0;
            for (int r = 0; r < g->p; r++) s += rnd_float(r, i), a += fabs(rnd_float(r, i));
            if (fabs(y[i] - s) > (g->p) * ldexp(a, -24)) {
                ok = 0;
                snprintf(why, sizeof why, "element %zu is %.9g; the sum is %.9g (off by more than %d float roundings)",
                         i, y[i], s, g->p);
            }
        }
    }
    grade_check(g, "sum of 1001 random floats: within the rounding of a float sum", ok, "%s", why);
    int called = !st;
    memcpy(y0, y, sizeof(float) * count);
    st = mdc_bcast(y0, count, MDC_F32, 0, g->rt.world);
    ok = called && !st && grade_first_diff_f32(y, y0, count, why, sizeof why) < 0;
    grade_check(g, "... every rank holds the same bits (rank 0's)", ok, "%s",
                called ? strcat(why, " (compared with rank 0's)") : "the sum above failed");
    free(x), free(y), free(y0);
}

/* The ring's cost: 2(p-1) messages and 2(p-1)/p n bytes sent per rank (n = 4096 p floats). */
static void check_cost(grade *g) {
    size_t count = 4096 * (size_t)g->p, n = count * sizeof(float);
    float *x = calloc(count, sizeof(float)), *y = calloc(count, sizeof(float));
    traced tr = {0};
    mdc_transport_set_trace(g->rt.tr, on_message, &tr);
    mdc_status st = x && y ? mdc_allreduce(x, y, count, MDC_F32, MDC_SUM, g->rt.world) : MDC_ERR_OOM_HOST;
    mdc_transport_set_trace(g->rt.tr, NULL, NULL);
    char why[200] = "";
    if (st) grade_status_text(st, why, sizeof why);
    double want = 2.0 * (g->p - 1) / g->p * (double)n;
    grade_check(g, "bytes sent per rank = 2(p-1)/p n (n = 4096p floats)", !st && fabs((double)tr.bytes - want) < 1,
                "sent %zu bytes, the ring sends 2(p-1)/p n = %.0f%s%s", tr.bytes, want, st ? "; the call " : "", why);
    grade_check(g, "messages sent per rank = 2(p-1)", !st && tr.sends == 2 * (size_t)(g->p - 1),
                "sent %zu messages, the ring sends 2(p-1) = %d%s%s", tr.sends, 2 * (g->p - 1), st ? "; the call " : "",
                why);
    free(x), free(y);
}

/* What rank 0 posted for 8 floats beside minidc's ring (informational). */
static void show_messages(grade *g) {
    float x[8] = {0}, y[8];
    traced tr = {0};
    mdc_transport_set_trace(g->rt.tr, on_message, &tr);
    mdc_status st = mdc_allreduce(x, y, 8, MDC_F32, MDC_SUM, g->rt.world);
    mdc_transport_set_trace(g->rt.tr, NULL, NULL);
    if (g->me) return;
    mdc_schedule s;
    char ring[512] = "";
    if (!mdc_schedule_build(&s, MDC_COLL_ALLREDUCE, "ring", g->p, 8, NULL, MDC_F32, MDC_SUM, 0, 0, 0)) {
        for (size_t k = 0; k < (size_t)s.nsteps * s.nmsgs; k++) { /* step by step, as posted */
            const mdc_sched_msg *m = &s.msgs[k % s.nmsgs];
            if ((m->src && m->dst) || m->step != (int)(k / s.nmsgs)) continue;
            size_t n = strlen(ring);
            if (n + 40 < sizeof ring)
                snprintf(ring + n, sizeof ring - n, "%s%s r%d %zu B", n ? ", " : "", m->src == 0 ? "send" : "recv",
                         m->src == 0 ? m->dst : m->src, m->bytes);
        }
        mdc_schedule_free(&s);
    }
    printf("      rank 0's messages for 8 floats at p=4 (%s):\n        yours: %s\n        ring:  %s\n",
           st ? "the call failed" : "in the order posted", tr.log[0] ? tr.log : "(none)", ring);
}

int main(int argc, char **argv) {
    grade g;
    mdc_status st = grade_begin(&g, &argc, &argv, 20);
    if (st) {
        fprintf(stderr, "lab 1 grader: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    if ((st = mdc_coll_register_allreduce("student", "lab 1: labs/lab1_allreduce.c", lab_allreduce)) ||
        (st = mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "student"))) {
        fprintf(stderr, "lab 1 grader: %s\n", mdc_detail());
        return 2;
    }
    int p = g.p;
    char name[96];
    size_t counts[] = {1, (size_t)(p > 1 ? p - 1 : 2), (size_t)p + 1, 1000 + (size_t)p, 4096 * (size_t)p};
    for (int k = 0; k < 5; k++) {
        if (k && counts[k] == counts[k - 1]) continue;
        snprintf(name, sizeof name, "sum of %zu floats", counts[k]);
        check_ints(&g, name, counts[k], MDC_SUM, 0);
    }
    snprintf(name, sizeof name, "sum of %d floats in place (MDC_IN_PLACE)", p + 1);
    check_ints(&g, name, (size_t)p + 1, MDC_SUM, 1);
    check_ints(&g, "max of 100 floats (op MDC_MAX)", 100, MDC_MAX, 0);
    check_ints(&g, "mean of 100 floats (op MDC_AVG)", 100, MDC_AVG, 0);
    check_exact(&g, 333);
    check_random(&g, 1001);
    if (p > 1) check_cost(&g);
    if (p == 4) show_messages(&g);
    return grade_end(&g);
}
