/* Lab 6's reference solution (tests/cli/labs_cli.sh grades it): 1F1B for one stage. */
#include "minidc/pp.h"

mdc_status lab_1f1b(mdc_pp_schedule *s, int stage);

mdc_status lab_1f1b(mdc_pp_schedule *s, int stage) {
    int p = s->p, m = s->m, warm = p - stage - 1 < m ? p - stage - 1 : m, f = 0, b = 0;
    mdc_status st = MDC_OK;
    for (; f < warm && !st; f++) st = mdc_pp_schedule_push(s, stage, MDC_PP_F, f, 0);
    for (; f < m && !st; f++, b++) {
        st = mdc_pp_schedule_push(s, stage, MDC_PP_F, f, 0);
        if (!st) st = mdc_pp_schedule_push(s, stage, MDC_PP_B, b, 0);
    }
    for (; b < m && !st; b++) st = mdc_pp_schedule_push(s, stage, MDC_PP_B, b, 0);
    return st;
}
