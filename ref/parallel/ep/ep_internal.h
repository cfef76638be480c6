/* Shared by ref/parallel/ep/ep.c (the all-to-alls, the gradient sums) and report.c. */
#ifndef MINIDC_REF_EP_INTERNAL_H
#define MINIDC_REF_EP_INTERNAL_H

#include "minidc/ep.h"
#include "minidc/model.h"

struct mdc_ep {
    mdc_group *g, *dense, *expert;
    mdc_gpt2 *m;
    mdc_gpt2_ep hook;
    size_t *cnt;         /* 4 e: send counts, displacements, receive counts, displacements */
    double bytes, calls; /* the all-to-alls of the last step */
    double wall;         /* seconds inside them (waiting for the slowest rank included) */
    double rows_out;     /* rows this rank sent to other ranks (the formula's exact count) */
};

#endif
