/* A lab's grader (labs/graders/labN.c): an MPI program built with the student's file (make lab
 * N=...). Every rank runs the same checks; each check is one row of the grade, passed only where
 * it passed on every rank, failed with the first failing rank's own words otherwise (the first
 * wrong element, the step, the formula and the figure). labs/grade.sh runs a grader at several
 * rank counts and adds the rows up. */
#ifndef MINIDC_LAB_GRADE_H
#define MINIDC_LAB_GRADE_H

#include <stddef.h>

#include "minidc/runtime.h"

typedef struct {
    mdc_runtime rt;
    int p, me;
    int rows, passed;
    char prefix[32]; /* "np=3": the ranks of this run */
} grade;

/* MPI, this rank's emulated device (the device options of argv), the world group; every wait on
 * a peer gives up after `timeout_s` (a student's missing send fails a check, never hangs). */
mdc_status grade_begin(grade *g, int *argc, char ***argv, double timeout_s);
/* One row: every rank calls it with its own verdict and, when it failed, why (printf format).
 * Rank 0 prints "PASS  np=3  name" or "FAIL  np=3  name: rank r: why". Returns 1 when every
 * rank passed. */
int grade_check(grade *g, const char *name, int ok, const char *why, ...) __attribute__((format(printf, 4, 5)));
/* Rank 0 prints "np=3: X of Y checks passed"; returns the exit code (0: all passed). */
int grade_end(grade *g);

/* The messages this rank sends between grade_traffic_begin and grade_traffic_end (the transport's
 * trace: payload bytes, as the formulas count them). */
typedef struct {
    size_t sends, bytes;
} grade_traffic;
void grade_traffic_begin(grade *g, grade_traffic *t); /* zeroes *t */
void grade_traffic_end(grade *g);

/* The first i < n with got[i] != want[i] bit for bit, or -1; *why describes it ("element 7 is
 * 3.5, expected 4"). */
long grade_first_diff_f32(const float *got, const float *want, size_t n, char *why, size_t cap);
long grade_first_diff_f64(const double *got, const double *want, size_t n, char *why, size_t cap);
/* A status as a student reads it: "returned <status>: <detail>". */
const char *grade_status_text(mdc_status st, char *buf, size_t cap);

#endif
