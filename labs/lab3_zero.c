/* Lab 3: ZeRO-1, the sharded optimizer step (docs/course/lab3-zero.md).
 *
 * Data parallelism on p ranks: every rank holds all N parameters (the same bits everywhere) and
 * the gradient of its own rows of the batch; the step's gradient is the sum over the ranks. DDP
 * all-reduces the gradient and runs AdamW on all N elements, so every rank keeps AdamW's m and v
 * for all of them: 2N floats each. ZeRO-1 keeps them for a shard only, 2N/p floats:
 *   1. reduce-scatter the gradient: rank r receives the sum over ranks of ITS shard only;
 *   2. AdamW on the shard: the shard's parameters, with the shard's m and v (AdamW is elementwise:
 *      this is exactly what DDP computes for those elements);
 *   3. all-gather the updated shards, so that every rank holds all the parameters again.
 * The shards are balanced blocks of the flat vector: rank r owns elements [lo_r, hi_r) with
 * lo_r = r N / p and hi_r = (r+1) N / p rounded down (N = 335 over 4 ranks: 83, 84, 84, 84).
 * A shard cuts tensors: each tensor keeps its own weight decay (decay 0: AdamW with weight decay
 * 0 on its elements). No clipping here (gradient scale 1).
 *
 * Write lab_zero1_step. On the first call z->m and z->v are NULL: allocate them there, once,
 * for the shard only, on the emulated GPU as optimizer state, so that the grade can measure them:
 *   mdc_dev_alloc(dev, (void **)&z->m, bytes, MDC_MEM_OPTIM, "zero1.adam.m")   (zeroed)
 * Later calls find them as you left them. The grade checks at 1 to 4 ranks: the parameters after
 * 3 steps bit-identical to the DDP steps it computes itself (integer gradients: sums exact in any
 * order), every rank the same bits, your m and v equal DDP's over your shard, optimizer memory
 * 8 (hi_r - lo_r) bytes per rank (DDP: 8N), the bytes sent per rank those of DDP's all-reduce,
 * 2(p-1)/p x 4N, in 2(p-1) messages (N padded to a multiple of p); with random gradients, every
 * parameter within what DDP's update reaches from a float sum in any order.
 *
 * What you have (minidc/collectives.h, minidc/kernels.h, minidc/device.h):
 *   mdc_group_rank(g), mdc_group_size(g)
 *   mdc_reduce_scatterv(MDC_IN_PLACE, grads, counts, MDC_F32, MDC_SUM, g)
 *       -- counts[q] = the size of rank q's shard; the sum of this rank's shard lands in
 *          grads[0 .. counts[me]) (you may overwrite z->grads)
 *   mdc_allgatherv(MDC_IN_PLACE, params, counts, NULL, MDC_F32, g)
 *       -- rank q's counts[q] elements, packed in rank order, from each rank to every rank
 *   mdc_adamw_update(dev, p, m, v, grad, n, o->lr, o->beta1, o->beta2, o->eps, wd, 1.0f, t)
 *       -- minidc's AdamW on n elements (the same arithmetic as DDP's): wd = o->weight_decay
 *          where the tensor has decay, else 0
 *   mdc_dev_alloc as above; malloc / free for the counts; return MDC_OK, or a call's status.
 *
 * Grade it: make lab N=3 */
#include <stdlib.h>

#include "lab3_zero.h" /* lab_tensor and lab_zero1: what the step gets (read them there) */

mdc_status lab_zero1_step(lab_zero1 *z, const mdc_adamw_config *o, int t, mdc_device *dev, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t lo = z->N * (size_t)me / (size_t)p, hi = z->N * (size_t)(me + 1) / (size_t)p;
    (void)lo, (void)hi, (void)o, (void)t, (void)dev;

    /* ---- your code: the shard's m and v, the reduce-scatter, AdamW on the shard, the all-gather ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 3: lab_zero1_step is not written yet (labs/lab3_zero.c)");
}
