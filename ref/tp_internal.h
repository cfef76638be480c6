/* Shared by ref/tp.c (the communication points, counting) and ref/sp.c (sequence parallelism). */
#ifndef MINIDC_REF_TP_INTERNAL_H
#define MINIDC_REF_TP_INTERNAL_H

#include "minidc/tp.h"

struct mdc_tp {
    mdc_group *g;
    int t, r, sp;
    mdc_device *dev;
    mdc_gpt2_comm comm;
    mdc_tp_counts counts;
    float *scratch; /* the [t][B][T/t][C] staging of SP, and the padded loss statistics */
    size_t scratch_n;
};

/* A host buffer of at least n floats (grown as needed; not charged: a layout detail). */
float *mdc_tp_i_scratch(mdc_tp *tp, size_t n);
/* Bytes this rank has sent so far (the device's counter). */
double mdc_tp_i_sent(const mdc_tp *tp);

#endif
