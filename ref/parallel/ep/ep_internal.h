/* Shared by ref/parallel/ep/ep.c (the all-to-alls, the gradient sums), etp.c (expert tensor
 * parallelism's collectives) and report.c. */
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
    mdc_dtype act;       /* what the rows move: MDC_F32, or a mixed-precision run's 16-bit dtype */
    uint16_t *half;      /* its staging: the rows sent, then received, packed (host) */
    size_t half_n;
};
/* bytes of a row element the all-to-all moves: 2 in 16 bits, else 4 */
static inline double mdc_ep_i_width(const mdc_ep *ep) { return ep->act == MDC_F32 ? 4 : 2; }

struct mdc_etp {
    mdc_group *g;
    mdc_gpt2 *m;
    mdc_gpt2_etp hook;
    int n, gather;
    size_t *cnt; /* n: elements per member of the call in flight */
    double *d;   /* exact mode: the partial sums' doubles, reduced in place */
    size_t dn;
    mdc_etp_figures f; /* since the last reset */
};

#endif
