/* The pipeline schedule builder (ref/parallel/pp/pp_schedule.c) without any rank: for GPipe,
 * 1F1B, interleaved 1F1B and ZB-H1 at several stage and micro-batch counts, every schedule
 * validates, its simulated makespan is the bubble formula's (units of a chunk's F 1, B 2, or
 * B 1 + W 1 when split; ZB-H1's from m >= p), every stage is busy for all its work, and each stage's peak of
 * activation sets is the schedule's formula; a schedule with an action dropped, an action
 * repeated or a B before its F is refused naming the stage; bad sizes and names are refused. */
#include "testutil.h"

#include "minidc/pp.h"

static void check_kind(const char *name, int p, int m, int v) {
    mdc_pp_schedule s;
    memset(&s, 0, sizeof s);
    mdc_status st = mdc_pp_schedule_build(&s, name, p, m, v);
    TU_CHECK(st == MDC_OK, "%s p %d m %d v %d: %s", name, p, m, v, mdc_detail());
    if (st) return;
    TU_STATUS(mdc_pp_schedule_validate(&s), MDC_OK);
    mdc_pp_timeline t;
    int units = mdc_pp_simulate(&s, &t);
    /* work per stage: v m chunks' F (1) and backward (2: B, or B + W) */
    int work = 3 * v * m;
    /* GPipe, 1F1B, interleaved: (p-1)/(vm+p-1) of 3(vm+p-1); ZB-H1 with F = B = W = 1:
     * (p-1)/(3m+p-1) of 3m+p-1 once m >= p (Qi et al.'s condition); with fewer micro-batches
     * than stages there are p-m W's too few to fill the cool-down, one unit each */
    int want = s.split ? 3 * m + p - 1 + (m < p ? p - m : 0) : 3 * (v * m + p - 1);
    TU_CHECK(units == want, "%s p %d m %d v %d: makespan %d, want %d", name, p, m, v, units, want);
    double bubble = (double)(units - work) / units,
           formula = mdc_pp_bubble_formula(&s, 1, s.split ? 1 : 2, s.split ? 1 : 0);
    if (!s.split || m >= p) TU_NEAR(bubble, formula, 1e-12);
    for (int q = 0; q < p && units > 0; q++) {
        TU_CHECK(t.busy[q] == work, "%s p %d m %d: stage %d busy %d of %d", name, p, m, q, t.busy[q], work);
        TU_CHECK(t.peak[q] == mdc_pp_sets_formula(&s, q), "%s p %d m %d v %d: stage %d holds %d sets, formula %d", name,
                 p, m, v, q, t.peak[q], mdc_pp_sets_formula(&s, q));
    }
    if (units > 0) mdc_pp_timeline_free(&t);
    mdc_pp_schedule_free(&s);
}

/* A built schedule broken three ways on its last stage: each must be refused. */
static void check_broken(const char *name, int p, int m) {
    mdc_pp_schedule s;
    memset(&s, 0, sizeof s);
    if (mdc_pp_schedule_build(&s, name, p, m, 1)) {
        TU_CHECK(0, "%s p %d m %d: %s", name, p, m, mdc_detail());
        return;
    }
    int q = p - 1, n = s.n[q];
    mdc_pp_action keep = s.a[q][n - 1];
    s.n[q] = n - 1; /* the last backward dropped */
    TU_STATUS(mdc_pp_schedule_validate(&s), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "stage");
    s.n[q] = n;
    s.a[q][n - 1] = s.a[q][0]; /* the first forward twice */
    TU_STATUS(mdc_pp_schedule_validate(&s), MDC_ERR_INVALID);
    s.a[q][n - 1] = keep;
    mdc_pp_action f = s.a[q][0]; /* the first B before its F: swap them */
    int k = 0;
    while (k < n && !(s.a[q][k].kind != MDC_PP_F && s.a[q][k].mb == f.mb)) k++;
    if (k < n) {
        s.a[q][0] = s.a[q][k], s.a[q][k] = f;
        TU_STATUS(mdc_pp_schedule_validate(&s), MDC_ERR_INVALID);
        s.a[q][k] = s.a[q][0], s.a[q][0] = f;
    }
    TU_STATUS(mdc_pp_schedule_validate(&s), MDC_OK); /* restored */
    mdc_pp_schedule_free(&s);
}

int main(void) {
    static const char *plain[] = {"gpipe", "1f1b", "zb-h1"};
    const int ps[] = {1, 2, 3, 4, 5}, ms[] = {1, 2, 3, 4, 8};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++) check_kind(plain[k], ps[i], ms[j], 1);
    for (int p = 2; p <= 4; p++)
        for (int v = 2; v <= 3; v++)
            for (int g = 1; g <= 3; g++) check_kind("interleaved", p, g * p, v);
    for (int k = 0; k < 3; k++) check_broken(plain[k], 3, 4);
    mdc_pp_schedule s;
    memset(&s, 0, sizeof s);
    TU_STATUS(mdc_pp_schedule_build(&s, "1f1b", 0, 4, 1), MDC_ERR_INVALID);
    TU_STATUS(mdc_pp_schedule_build(&s, "1f1b", 2, 0, 1), MDC_ERR_INVALID);
    TU_STATUS(mdc_pp_schedule_build(&s, "zigzag", 2, 4, 1), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "zigzag");
    TU_STATUS(mdc_pp_schedule_build(&s, "interleaved", 2, 3, 2), MDC_ERR_INVALID); /* m not a multiple of p */
    return tu_finish("test_pp_schedule");
}
