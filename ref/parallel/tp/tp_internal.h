/* Shared by ref/parallel/tp/tp.c (the communication points, counting) and ref/parallel/tp/sp.c (sequence parallelism). */
#ifndef MINIDC_REF_TP_INTERNAL_H
#define MINIDC_REF_TP_INTERNAL_H

#include "minidc/tp.h"

struct mdc_tp {
    mdc_group *g;
    mdc_group *kv; /* tp > KV: the ranks sharing this rank's kv head, or NULL */
    int t, r, sp;
    mdc_device *dev;
    mdc_gpt2_comm comm;
    mdc_tp_counts counts;
    float *scratch; /* the [t][B][T/t][C] staging of SP, and the padded loss statistics */
    size_t scratch_n;
    int exact; /* exact mode: the model's reductions carry accumulators (ref/parallel/tp/tp_exact.c) */
    mdc_exact *xscratch;
    size_t xscratch_n;
    double *dscratch;
    size_t dscratch_n;
    size_t exact_marked;        /* exact mode since the counts' reset: elements whose sum needed accumulators */
    double exact_bytes_want;    /* and the bytes of those reductions by mdc_exact_reduce_bytes */
    double exact_kv_bytes_want; /* the same for the shared kv heads' dk, dv */
    mdc_dtype act;              /* what f and g move: MDC_F32, or the 16-bit dtype of a mixed-precision run */
};
/* The activations f and g move are 16-bit (mixed precision, default mode): 2 bytes an element. */
static inline int mdc_tp_i_half(const mdc_tp *tp) { return tp->act == MDC_BF16 || tp->act == MDC_F16; }

/* A host buffer of at least n doubles (grown as needed). */
double *mdc_tp_i_dscratch(mdc_tp *tp, size_t n);

/* A host buffer of at least n accumulators (grown as needed). */
mdc_exact *mdc_tp_i_xscratch(mdc_tp *tp, size_t n);
/* (B,T,C) <-> [t][B][T/t][C] for elements of esz bytes (ref/parallel/tp/sp.c). */
void mdc_sp_i_permute(void *dst, const void *src, size_t esz, int t, int B, int T, int C, int to_blocks);
/* exact mode's communication points (ref/parallel/tp/tp_exact.c) */
mdc_status mdc_tp_i_x_reduce(void *ctx, float *local, const mdc_xsum *part, int B, int T, int C);
mdc_status mdc_tp_i_x_vocab(void *ctx, mdc_exact *acc, int n);
mdc_status mdc_tp_i_x_kv_sum(void *ctx, float *out, const mdc_xsum *part, int rows, int ld, int col0, int width);

/* A host buffer of at least n floats (grown as needed; not charged: a layout detail). */
float *mdc_tp_i_scratch(mdc_tp *tp, size_t n);

#endif
