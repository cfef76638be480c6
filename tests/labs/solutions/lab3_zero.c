/* Lab 3's reference solution (graded by tests/cli/labs_cli.sh): ZeRO-1's step on balanced
 * blocks, rank r owning [r N / p, (r+1) N / p): reduce-scatter the gradient, AdamW on the shard
 * segment by segment (each tensor's weight decay), all-gather the shards in place. */
#include <stdlib.h>

#include "lab3_zero.h"

mdc_status lab_zero1_step(lab_zero1 *z, const mdc_adamw_config *o, int t, mdc_device *dev, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t lo = z->N * (size_t)me / (size_t)p, hi = z->N * (size_t)(me + 1) / (size_t)p, n = hi - lo;
    mdc_status st;
    if (!z->m) { /* the shard's moments, once: 2 n floats of optimizer state instead of DDP's 2 N */
        if ((st = mdc_dev_alloc(dev, (void **)&z->m, n * sizeof(float), MDC_MEM_OPTIM, "zero1.adam.m")) ||
            (st = mdc_dev_alloc(dev, (void **)&z->v, n * sizeof(float), MDC_MEM_OPTIM, "zero1.adam.v")))
            return st;
    }
    size_t *counts = malloc(sizeof(size_t) * (size_t)p);
    if (!counts) return mdc_fail(MDC_ERR_OOM_HOST, "lab 3: counts");
    for (int q = 0; q < p; q++) counts[q] = z->N * (size_t)(q + 1) / (size_t)p - z->N * (size_t)q / (size_t)p;
    /* 1. this rank's shard of the summed gradient lands in grads[0, n) */
    st = mdc_reduce_scatterv(MDC_IN_PLACE, z->grads, counts, MDC_F32, MDC_SUM, g);
    /* 2. AdamW on [lo, hi), cut at tensor boundaries (each tensor its own weight decay) */
    for (int i = 0; i < z->ntensors && !st; i++) {
        const lab_tensor *tn = &z->tensors[i];
        size_t a = tn->offset > lo ? tn->offset : lo, e = tn->offset + tn->count < hi ? tn->offset + tn->count : hi;
        if (a >= e) continue;
        mdc_adamw_update(dev, z->params + a, z->m + (a - lo), z->v + (a - lo), z->grads + (a - lo), e - a, o->lr,
                         o->beta1, o->beta2, o->eps, tn->decay ? o->weight_decay : 0.0f, 1.0f, t);
    }
    /* 3. everyone's updated shard to every rank */
    if (!st) st = mdc_allgatherv(MDC_IN_PLACE, z->params, counts, NULL, MDC_F32, g);
    free(counts);
    return st;
}
