/* Lab 3's types (labs/lab3_zero.c), shared by the student's file and its grader so that both
 * read the same layout. */
#ifndef MINIDC_LAB3_ZERO_H
#define MINIDC_LAB3_ZERO_H

#include "minidc/collectives.h"
#include "minidc/device.h"
#include "minidc/kernels.h"
#include "minidc/model.h"

typedef struct {
    size_t offset, count; /* the tensor is elements [offset, offset + count) of the flat vector */
    int decay;            /* 1: AdamW's weight decay applies (matrices, embeddings); 0: biases, norms */
} lab_tensor;

typedef struct {
    float *params;             /* N floats, the same on every rank: update them in place */
    float *grads;              /* N floats: this rank's gradient (not yet summed); yours to overwrite */
    size_t N;                  /* parameters */
    const lab_tensor *tensors; /* in order, covering [0, N) */
    int ntensors;
    float *m, *v; /* AdamW's moments of this rank's shard only; NULL before the first step */
} lab_zero1;

/* One AdamW step t (1, 2, ...) of ZeRO-1 on z's parameters. */
mdc_status lab_zero1_step(lab_zero1 *z, const mdc_adamw_config *o, int t, mdc_device *dev, mdc_group *g);

#endif
