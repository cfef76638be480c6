/* minidc explain pipeline: a schedule as a grid (ref/parallel/pp/pp_schedule.c's simulation in units), the
 * bubble and the micro-batches each stage holds beside their formulas; --sweep-m the bubble for
 * m = 1, 2, 4, 8, 16. */
#include <stdio.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/pp.h"

int mdc_explain_pipeline(int argc, char **argv) {
    const char *name = "1f1b";
    int p = 4, m = 8, vv = 0, sweep = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: minidc explain pipeline [--schedule gpipe|1f1b|interleaved|zb-h1] [-p P] [-m M] [-v V] "
                   "[--sweep-m]\n  -v V: model chunks per stage (interleaved; default 2 there, else 1)\n");
            return 0;
        }
        if (!strcmp(a, "--sweep-m")) {
            sweep = 1;
            continue;
        }
        if (!strcmp(a, "--schedule") && v) name = v;
        else if (!strcmp(a, "-p")) ok = mdc_arg_int("explain pipeline", a, v, 1, 64, &p);
        else if (!strcmp(a, "-m")) ok = mdc_arg_int("explain pipeline", a, v, 1, 256, &m);
        else if (!strcmp(a, "-v") || !strcmp(a, "--virtual-stages"))
            ok = mdc_arg_int("explain pipeline", a, v, 1, 16, &vv);
        else {
            fprintf(stderr, "minidc explain pipeline: unknown option or missing value: %s\n", a);
            return 2;
        }
        if (!ok) return 2;
        i++;
    }
    if (!vv) vv = strcmp(name, "interleaved") ? 1 : 2;
    mdc_pp_schedule s;
    if (!sweep) {
        if (mdc_pp_schedule_build(&s, name, p, m, vv)) {
            fprintf(stderr, "minidc explain pipeline: %s\n", mdc_detail());
            return 2;
        }
        mdc_pp_schedule_print(&s, stdout);
        mdc_pp_schedule_free(&s);
        return 0;
    }
    printf(
        "schedule %s, p = %d, v = %d: the bubble (idle / makespan of stage 0, simulated; units F 1, B 2 or B 1 + W 1) "
        "as m grows\n",
        name, p, vv);
    printf("  %4s %10s %10s %10s\n", "m", "bubble", "formula", "makespan");
    const char *text = NULL;
    for (int mm = 1; mm <= 16; mm *= 2) {
        mdc_pp_timeline t;
        if (mdc_pp_schedule_build(&s, name, p, mm, vv)) { /* interleaved: m a multiple of p */
            printf("  %4d %10s (%s)\n", mm, "-", mdc_detail());
            continue;
        }
        if (mdc_pp_simulate(&s, &t) < 0) {
            fprintf(stderr, "minidc explain pipeline: %s\n", mdc_detail());
            return 2;
        }
        text = mdc_pp_formula_text(&s, 0);
        printf("  %4d %10.3f %10.3f %10d\n", mm, 1.0 - (double)t.busy[0] / t.units, mdc_pp_bubble_formula(&s, 1, 1, 1),
               t.units);
        mdc_pp_timeline_free(&t);
        mdc_pp_schedule_free(&s);
    }
    if (text) printf("  formula: %s%s\n", text, s.split ? " with F = B = W = 1" : "");
    return 0;
}
