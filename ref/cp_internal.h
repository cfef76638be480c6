/* Shared by ref/cp.c (layouts, ring, all-gather, the report) and ref/cp_ulysses.c. */
#ifndef MINIDC_REF_CP_INTERNAL_H
#define MINIDC_REF_CP_INTERNAL_H

#include <stdlib.h>
#include <string.h>

#include "minidc/cp.h"

enum { CP_RING, CP_ALLGATHER, CP_ULYSSES };

struct mdc_cp {
    mdc_gpt2_cp model;
    mdc_group *g;
    mdc_device *dev;
    int c, r, T, Tc, L, zigzag, algo, B, Hl, hs;
    int *pos;                 /* Tc global positions of the local ones */
    float *buf[8];            /* device scratch, by algorithm (cp.c, cp_ulysses.c) */
    size_t buf_floats[8];
    double pairs, bytes, calls; /* counters since the reset */
};

/* The chunks rank q holds (1 or 2, ascending), their chunk indices in out. */
int mdc_i_cp_chunks(const mdc_cp *cp, int q, int out[2]);
/* Bytes this rank's device has sent so far. */
double mdc_i_cp_sent(const mdc_cp *cp);
/* Ulysses (ref/cp_ulysses.c): the scratch it needs (floats per buffer), and the two passes. */
void mdc_i_ulysses_sizes(const mdc_cp *cp, size_t floats[8]);
mdc_status mdc_i_ulysses_forward(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop);
mdc_status mdc_i_ulysses_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                  const float *lse, const mdc_dropout *drop);

#endif
