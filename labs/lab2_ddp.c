/* Lab 2: DDP, a bucketed gradient reducer (docs/course/lab2-ddp.md).
 *
 * Every rank holds the whole model and runs forward and backward on its own rows of the global
 * batch, each backward scaled by 1 / (global tokens), so the SUM of the ranks' gradients is the
 * gradient of the mean loss over the whole batch. Backward completes the tensors last first
 * (ln_f.bias, ..., wpe, wte); the grader calls lab_ddp_grad_ready(d, t) as soon as tensor t's
 * gradient is complete, and lab_ddp_finish(d) after tensor 0. Write the two:
 *   - a bucket is a run of tensors in that order: tensor t joins the open bucket if the bucket's
 *     bytes (4 per element) stay <= d->bucket_bytes, or if the bucket is empty (a tensor larger
 *     than the bucket size is a bucket of its own); otherwise t starts the next bucket;
 *   - all-reduce a bucket (MDC_SUM, no division) as soon as its last tensor is ready: in the call
 *     for that tensor, that is when t == 0 or tensor t-1 will not fit;
 *   - run each all-reduce on the comm stream, so backward goes on meanwhile in virtual time:
 *     mdc_dev_stream_begin(d->dev, &d->stream) before it, mdc_dev_stream_end(d->dev, &d->stream)
 *     after; lab_ddp_finish waits for the stream (mdc_dev_stream_join) and leaves d ready for
 *     the next step.
 * Each rank then sends 2(p-1)/p x the gradient's bytes (the ring), whatever the bucket size. The
 * grade checks the sums bit for bit (integer gradients), the buckets and when each all-reduce is
 * issued, the bytes, the overlap, and training: identical replicas, and in exact mode the
 * parameters of one process trained on the whole batch, bit for bit.
 *
 * What you have (the fields of lab_ddp below; minidc/model.h, collectives.h, device_stream.h):
 *   d->tensors[t].offset, .alloc, .name  tensor t's gradient: alloc elements from element offset;
 *                                        tensors t, t+1, ... lie one after the other
 *   d->first, d->bytes                   the open bucket: its first tensor (the highest index;
 *                                        -1: none open) and its bytes so far
 *   mdc_gpt2_grad_pack(d->m, off, n, buf), mdc_gpt2_grad_unpack(d->m, off, n, buf)
 *       copy n gradient elements from element off out to buf, and back: elements of d->dtype,
 *       d->esz bytes each (floats; in exact mode exact sums, which the all-reduce adds exactly);
 *       d->buf holds the whole gradient: element off at d->buf + off * d->esz
 *   mdc_allreduce(MDC_IN_PLACE, buf, n, d->dtype, MDC_SUM, d->g)
 *   return MDC_OK, or the status a call gave you (mdc_fail(MDC_ERR_INVALID, "...") for your own).
 *
 * Grade it: make lab N=2     (LAB_RANKS="2 3" make lab N=2 for fewer rank counts) */
#include <stdlib.h>

#include "minidc/collectives.h"
#include "minidc/device_stream.h"
#include "minidc/model.h"

typedef struct lab_ddp {
    mdc_gpt2 *m;
    mdc_group *g;
    mdc_device *dev;
    size_t bucket_bytes;
    int ntensors;
    mdc_param_tensor *tensors; /* the model's tensor table */
    mdc_dtype dtype;           /* the gradient sink's elements: MDC_F32, or MDC_EXACT in exact mode */
    size_t esz;                /* bytes of one */
    char *buf;                 /* room for the whole gradient in those elements */
    mdc_dev_stream stream;     /* the comm stream */
    int first;                 /* the open bucket's first tensor, -1: none */
    size_t bytes;              /* its bytes (4 per element) */
} lab_ddp;

mdc_status lab_ddp_create(lab_ddp **out, mdc_gpt2 *m, mdc_group *g, size_t bucket_bytes);
mdc_status lab_ddp_grad_ready(lab_ddp *d, int t);
mdc_status lab_ddp_finish(lab_ddp *d);
void lab_ddp_free(lab_ddp *d);

mdc_status lab_ddp_create(lab_ddp **out, mdc_gpt2 *m, mdc_group *g, size_t bucket_bytes) {
    lab_ddp *d = calloc(1, sizeof *d);
    *out = d;
    if (!d) return mdc_fail(MDC_ERR_OOM_HOST, "lab 2: the reducer");
    d->m = m, d->g = g, d->dev = mdc_gpt2_device(m), d->bucket_bytes = bucket_bytes;
    d->ntensors = mdc_gpt2_local_count(m);
    d->dtype = mdc_gpt2_grad_dtype(m), d->esz = mdc_dtype_size(d->dtype);
    d->tensors = malloc(sizeof *d->tensors * (size_t)d->ntensors);
    d->buf = malloc(mdc_gpt2_local_floats(m) * d->esz);
    if (!d->tensors || !d->buf) return mdc_fail(MDC_ERR_OOM_HOST, "lab 2: the reducer's buffers");
    for (int t = 0; t < d->ntensors; t++) d->tensors[t] = *mdc_gpt2_local_tensor(m, t);
    d->first = -1;
    return MDC_OK;
}

void lab_ddp_free(lab_ddp *d) {
    if (!d) return;
    free(d->tensors), free(d->buf), free(d);
}

mdc_status lab_ddp_grad_ready(lab_ddp *d, int t) {
    (void)d, (void)t;

    /* ---- your code: add tensor t to the open bucket; all-reduce the bucket if t is its last ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 2: lab_ddp_grad_ready is not written yet (labs/lab2_ddp.c)");
}

mdc_status lab_ddp_finish(lab_ddp *d) {
    (void)d;

    /* ---- your code: wait for the comm stream; ready for the next step ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 2: lab_ddp_finish is not written yet (labs/lab2_ddp.c)");
}
