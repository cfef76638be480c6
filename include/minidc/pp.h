/* Pipeline parallelism: schedules as data (ref/parallel/pp/pp_schedule.c) and the stage executor
 * (ref/parallel/pp/pp.c). A schedule is, per stage, the ordered list of its actions: F (forward of a
 * micro-batch through the stage's blocks), B (its backward: with W too unless the schedule
 * splits them) and W (the weight gradients of a B that ran without them). Validated before it
 * runs by simulating every stage (each action waits for the actions it needs: F(j) on stage s
 * for F(j) on s-1, B(j) for B(j) on s+1 and F(j) here, W(j) for B(j) here). */
#ifndef MINIDC_PP_H
#define MINIDC_PP_H

#include <stdio.h>

#include "minidc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MDC_PP_F = 'F', MDC_PP_B = 'B', MDC_PP_W = 'W' };
typedef struct {
    char kind; /* MDC_PP_F, _B, _W */
    int mb;    /* micro-batch */
    int chunk; /* model chunk of the stage (interleaved; else 0): virtual stage chunk p + stage */
} mdc_pp_action;

typedef struct {
    char name[16];
    char like[16];     /* a registered schedule: the built-in one whose formulas it is held to */
    int p, m, v;       /* stages, micro-batches, model chunks per stage */
    int split;         /* 1: B without W, and W actions (zb-h1) */
    int *n;            /* per stage: actions */
    mdc_pp_action **a; /* per stage: the actions in order */
} mdc_pp_schedule;

/* "gpipe" (every forward, then every backward), "1f1b" (warm-up min(p - s - 1, m) forwards,
 * then one forward and one backward in turn, then the remaining backwards), "interleaved"
 * (Megatron's: v >= 2 chunks per stage, virtual stage c p + s holding the c-th chunk of stage s,
 * micro-batches in groups of p per chunk, warm-up 2(p-s-1) + (v-1)p; m a multiple of p), "zb-h1"
 * (1F1B's order of F and B with the backward split in B and W; a stage runs a pending W where it
 * would otherwise wait, holding at most min(p, m) activation sets, the 1F1B peak: Qi et al.
 * 2024). v is 1 except for interleaved. MDC_ERR_INVALID names the option at fault. */
mdc_status mdc_pp_schedule_build(mdc_pp_schedule *s, const char *name, int p, int m, int v);
void mdc_pp_schedule_free(mdc_pp_schedule *s);
/* Every stage has F and B (and W when split) of every micro-batch and chunk exactly once, W
 * after its B, and the simulation finishes: else MDC_ERR_INVALID naming the stage, the action
 * and what it waits for. */
mdc_status mdc_pp_schedule_validate(const mdc_pp_schedule *s);

/* A schedule of one's own (a course lab's, an experiment): `fill` pushes stage `stage`'s actions
 * in order with mdc_pp_schedule_push (s->p, s->m, s->v are set); mdc_pp_schedule_build(name)
 * then builds it on every stage and validates it like a built-in one, so a pipeline (mdc_pp_create,
 * the trainer's schedule) runs it. `like` names the built-in schedule whose bubble and peak
 * formulas it is compared with ("gpipe", "1f1b"); split: it has W actions. The name must be new
 * (at most 15 characters); at most 8 are registered. MDC_ERR_INVALID otherwise. */
mdc_status mdc_pp_schedule_register(const char *name, const char *like, int split,
                                    mdc_status (*fill)(mdc_pp_schedule *s, int stage));
/* Appends action (kind, mb, chunk) to stage `stage` (MDC_ERR_OOM_HOST, or MDC_ERR_INVALID for a
 * stage outside 0..p-1). */
mdc_status mdc_pp_schedule_push(mdc_pp_schedule *s, int stage, char kind, int mb, int chunk);

/* The simulated timeline in units (a chunk's F 1, B 2 or B 1 + W 1 when split; links free): per
 * stage the cells of each unit ('F3', 'B3', 'W3', with v > 1 'F3a' for chunk 0 etc., or idle),
 * the busy units, the stage's peak of activation sets held (F started, its B, or W, not
 * finished). Returns the makespan, or -1 (invalid schedule). */
typedef struct {
    int units;        /* makespan */
    int *busy, *peak; /* per stage */
    char (*cell)[6];  /* stage-major, units cells each: "F3" etc., "" idle */
} mdc_pp_timeline;
int mdc_pp_simulate(const mdc_pp_schedule *s, mdc_pp_timeline *t);
void mdc_pp_timeline_free(mdc_pp_timeline *t);
/* The grid of the simulated timeline, one row per stage, bubbles as dots, with the bubble
 * fraction per stage beside its formula and the peak held beside the schedule's formula. */
void mdc_pp_schedule_print(const mdc_pp_schedule *s, FILE *out);
/* The bubble fraction for uniform stages and free links: (p-1)/(vm+p-1) (v = 1: GPipe, 1F1B),
 * ZB-H1's (p-1)(F+B-W) / (m(F+B+W) + (p-1)(F+B-W)) from the times of one F, B and W. */
double mdc_pp_bubble_formula(const mdc_pp_schedule *s, double tf, double tb, double tw);
/* Activation sets (chunk sets with v > 1) stage q holds at its peak: m (GPipe), min(p-q, m)
 * (1F1B), min(2(p-q-1) + (v-1)p + 1, vm) (interleaved; vm when m = p), min(p, m) (ZB-H1). */
int mdc_pp_sets_formula(const mdc_pp_schedule *s, int q);
/* The formulas above as text: sets != 0 the sets', else the bubble's. */
const char *mdc_pp_formula_text(const mdc_pp_schedule *s, int sets);

#ifdef __cplusplus
}
#endif
#endif
