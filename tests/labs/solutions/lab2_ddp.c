/* Lab 2's reference solution (the grader's check in tests/cli/labs_cli.sh): the bucketed DDP
 * reducer. A bucket is closed when the next tensor in backward order would overflow it, so it is
 * all-reduced in the grad_ready of its own last tensor, in place over its contiguous range of the
 * gradient sink, on the comm stream; finish joins the stream. */
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
    const mdc_param_tensor *x = d->tensors;
    if (d->first < 0) d->first = t, d->bytes = 0;
    d->bytes += x[t].alloc * sizeof(float);
    if (t > 0 && d->bytes + x[t - 1].alloc * sizeof(float) <= d->bucket_bytes) return MDC_OK; /* t-1 joins */
    /* tensors t .. first are the bucket: one contiguous range of the gradient */
    size_t off = x[t].offset, n = x[d->first].offset + x[d->first].alloc - off;
    char *buf = d->buf + off * d->esz;
    d->first = -1;
    mdc_gpt2_grad_pack(d->m, off, n, buf);
    mdc_dev_stream_begin(d->dev, &d->stream);
    mdc_status st = mdc_allreduce(MDC_IN_PLACE, buf, n, d->dtype, MDC_SUM, d->g);
    mdc_dev_stream_end(d->dev, &d->stream);
    if (!st) mdc_gpt2_grad_unpack(d->m, off, n, buf);
    return st;
}

mdc_status lab_ddp_finish(lab_ddp *d) {
    mdc_dev_stream_join(d->dev, &d->stream);
    if (d->first >= 0) return mdc_fail(MDC_ERR_INVALID, "lab 2: a bucket from tensor %d is still open", d->first);
    return MDC_OK;
}
