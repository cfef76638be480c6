/* Grader of lab 6 (labs/lab6_pipeline.c): the student's 1F1B, registered as pipeline schedule
 * "student" (held to 1F1B's formulas) and built as minidc builds its own. At the world's P ranks
 * (p = max(P, 2) stages for the schedule checks):
 *   - for m = 1, p and 2p + 1 micro-batches: the schedule is valid (every F and B once, nothing
 *     waits forever: minidc's validation by simulation), its simulated step is 3(m + p - 1) units
 *     (F 1, B 2: the bubble (p-1)/(m+p-1)), and stage s holds at most min(p - s, m) micro-batches;
 *   - at P >= 2: a real pipeline of P processes runs the schedule for two steps of a small GPT-2 in
 *     exact mode and ends with the parameters of one process training on the same batches, bit
 *     for bit (exact mode makes the sum of every micro-batch's gradients independent of its order).
 * At P = 4 it prints the schedule's grid (what minidc explain pipeline prints for a built-in one).
 * Ranks: 1 2 3 4 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"
#include "minidc/kernels.h"
#include "minidc/pp.h"
#include "minidc/train.h"

mdc_status lab_1f1b(mdc_pp_schedule *s, int stage);

static mdc_gpt2_config CFG = {.V = 96, .T = 8, .L = 4, .H = 2, .C = 16};
enum { STEPS = 2, MICRO = 5 };

static void check_schedule(grade *g, int p, int m) {
    mdc_pp_schedule s;
    mdc_pp_timeline tl = {0};
    char name[96], why[200] = "";
    mdc_status st = mdc_pp_schedule_build(&s, "student", p, m, 1);
    snprintf(name, sizeof name, "p=%d stages, m=%d: a valid schedule (every F and B once, no deadlock)", p, m);
    grade_check(g, name, !st, "%s", grade_status_text(st, why, sizeof why));
    int units = st ? -1 : mdc_pp_simulate(&s, &tl), want = 3 * (m + p - 1);
    snprintf(name, sizeof name, "p=%d, m=%d: step of 3(m+p-1) = %d units, bubble (p-1)/(m+p-1) = %.3f", p, m, want,
             (double)(p - 1) / (m + p - 1));
    grade_check(g, name, units == want, "%s", st ? "no schedule (above)" : why);
    if (!st && units != want)
        snprintf(why, sizeof why, "the schedule takes %d units: bubble %.3f", units, 1.0 - 3.0 * m / units);
    int bad = -1;
    for (int q = 0; !st && units > 0 && q < p && bad < 0; q++)
        if (tl.peak[q] > mdc_pp_sets_formula(&s, q)) bad = q;
    snprintf(name, sizeof name, "p=%d, m=%d: stage s holds at most min(p-s, m) micro-batches", p, m);
    if (bad >= 0)
        snprintf(why, sizeof why, "stage %d holds %d micro-batches at once, min(p-s, m) = %d", bad, tl.peak[bad],
                 mdc_pp_sets_formula(&s, bad));
    grade_check(g, name, !st && units > 0 && bad < 0, "%s",
                st          ? "no schedule (above)"
                : units < 0 ? "no timeline"
                            : why);
    if (!st && g->p == 4 && p == 4 && m == 2 * p + 1 && g->me == 0) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (f) mdc_pp_schedule_print(&s, f), fclose(f);
        printf("      your schedule, simulated (minidc explain pipeline --schedule 1f1b prints minidc's):\n");
        for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) printf("      %s\n", line);
        free(text);
    }
    mdc_pp_timeline_free(&tl);
    if (!st) mdc_pp_schedule_free(&s);
}

static void batch(int *in, int *tg, int step, int n, int V) {
    for (int i = 0; i < n; i++) {
        uint64_t x = (uint64_t)step * 1000003u + (uint64_t)i * 7919u + 17;
        x ^= x >> 13, x *= 0x9e3779b97f4a7c15ull, x ^= x >> 29;
        in[i] = (int)(x % (uint64_t)V), tg[i] = (int)((x >> 20) % (uint64_t)V);
    }
}

/* The trainer of `pp` stages (1: one process) with MICRO micro-batches of one row, exact mode. */
static mdc_status train(mdc_runtime *rt, mdc_device *dev, int pp, float *params) {
    mdc_trainer_config tc = {0};
    tc.cfg = CFG;
    tc.dims = (mdc_mesh_dims){1, 1, 1, 1, pp};
    tc.micro_batch = 1, tc.accum = MICRO, tc.seq = CFG.T;
    tc.exact_block = 4;
    tc.schedule = pp > 1 ? "student" : NULL;
    mdc_adamw_config opt;
    mdc_adamw_config_default(&opt);
    opt.lr = 1e-2f;
    int n = MICRO * CFG.T, *in = malloc(sizeof(int) * n), *tg = malloc(sizeof(int) * n);
    mdc_trainer *t = NULL;
    mdc_status st = in && tg ? mdc_trainer_create(&t, pp > 1 ? rt->tr : NULL, dev, &tc, 11) : MDC_ERR_OOM_HOST;
    float loss, norm;
    for (int s = 0; s < STEPS && !st; s++) {
        batch(in, tg, s, n, CFG.V);
        st = mdc_trainer_step(t, in, tg, &opt, &loss, &norm);
    }
    if (!st) st = mdc_trainer_gather(t, params, NULL, NULL, 0);
    mdc_trainer_free(t);
    free(in), free(tg);
    return st;
}

/* The first parameter that differs, named by tensor and index. */
static int same_params(const float *got, const float *want, char *why, size_t cap) {
    for (int i = 0; i < mdc_gpt2_tensor_count(&CFG); i++) {
        mdc_param_tensor pt;
        if (mdc_gpt2_tensor_at(&CFG, i, &pt)) continue;
        for (size_t k = 0; k < pt.numel; k++)
            if (memcmp(&got[pt.offset + k], &want[pt.offset + k], sizeof(float))) {
                snprintf(why, cap, "after %d steps %s[%zu] is %.9g, one process has %.9g", STEPS, pt.name, k,
                         got[pt.offset + k], want[pt.offset + k]);
                return 0;
            }
    }
    return 1;
}

static void check_training(grade *g) {
    size_t P = mdc_gpt2_param_floats(&CFG);
    float *got = calloc(P, sizeof(float)), *want = calloc(P, sizeof(float));
    char why[200] = "", name[96];
    mdc_status st = train(&g->rt, g->rt.dev, g->p, got);
    if (st) grade_status_text(st, why, sizeof why);
    int ok = !st;
    if (g->me == 0 && ok) {
        mdc_device *sdev;
        st = mdc_device_create_spec(&sdev, mdc_device_get_spec(g->rt.dev), mdc_device_get_energy_table(g->rt.dev), 1,
                                    MDC_EMULATE_OFF, 1, 0);
        if (!st) st = train(&g->rt, sdev, 1, want), mdc_device_free(sdev);
        ok = !st && same_params(got, want, why, sizeof why);
        if (st) snprintf(why, sizeof why, "the one-process run failed: %s", mdc_detail());
    }
    snprintf(name, sizeof name, "a %d-stage pipeline, m=%d: the serial model's bits after %d steps (exact mode)", g->p,
             MICRO, STEPS);
    grade_check(g, name, ok, "%s", why);
    free(got), free(want);
}

int main(int argc, char **argv) {
    grade g;
    mdc_status st = grade_begin(&g, &argc, &argv, 30);
    if (st) {
        fprintf(stderr, "lab 6 grader: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    mdc_kernels_init();
    mdc_coll_prefer_ring();
    if ((st = mdc_gpt2_config_check(&CFG)) || (st = mdc_pp_schedule_register("student", "1f1b", 0, lab_1f1b))) {
        fprintf(stderr, "lab 6 grader: %s\n", mdc_detail());
        return 2;
    }
    int p = g.p > 1 ? g.p : 2;
    int ms[3] = {1, p, 2 * p + 1};
    for (int k = 0; k < 3; k++) check_schedule(&g, p, ms[k]);
    if (g.p > 1) check_training(&g);
    return grade_end(&g);
}
