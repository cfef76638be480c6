/* Lab 6: a pipeline schedule as data (docs/course/lab6-pipeline.md).
 *
 * A pipeline of p stages runs m micro-batches. A schedule is, per stage, the ordered list of its
 * actions: F j (the forward of micro-batch j through the stage's layers) and B j (its backward).
 * F j on stage s needs F j from stage s-1; B j needs B j from stage s+1 and F j on the stage
 * itself. Between its F j and its B j a stage holds micro-batch j's activations.
 *
 * Write lab_1f1b: push stage `stage`'s actions of the 1F1B schedule (one forward, one backward):
 *   1. warm-up: the forwards of the first min(p - stage - 1, m) micro-batches;
 *   2. steady state: one forward, then one backward, in turn, while forwards remain;
 *   3. cool-down: the remaining backwards.
 * Micro-batches go in order 0, 1, ..., m-1 in the forwards and in the backwards. The bubble is
 * that of GPipe (every forward, then every backward), (p-1)/(m+p-1) of the step, but stage s holds
 * at most min(p - s, m) micro-batches' activations instead of m: the grade checks both against
 * these formulas, the schedule's validity, and that a real pipeline of p processes running your
 * schedule trains a GPT-2 to the same bits as one process.
 *
 * What you have (minidc/pp.h):
 *   s->p, s->m                                      -- stages, micro-batches
 *   mdc_pp_schedule_push(s, stage, MDC_PP_F, j, 0)  -- append F j to the stage (MDC_PP_B: B j);
 *                                                     it returns a status: return it if not MDC_OK
 *
 * Grade it: make lab N=6     (the grader registers lab_1f1b as pipeline schedule "student", held to
 * 1F1B's formulas, and runs it as minidc train --schedule runs its own). */
#include "minidc/pp.h"

mdc_status lab_1f1b(mdc_pp_schedule *s, int stage);

mdc_status lab_1f1b(mdc_pp_schedule *s, int stage) {
    int p = s->p, m = s->m;
    (void)p, (void)m, (void)stage;

    /* ---- your code: warm-up forwards, then one forward and one backward in turn, then backwards ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 6: lab_1f1b is not written yet (labs/lab6_pipeline.c)");
}
