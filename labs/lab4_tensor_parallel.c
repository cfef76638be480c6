/* Lab 4: a row-parallel linear layer, forward and backward (docs/course/lab4-tensor-parallel.md).
 *
 * The layer is Y = X W + b: X is (N, in) with N = B T tokens, W is (in, out), b is (out). Tensor
 * parallelism splits the contraction over the p ranks of group g: rank r holds rows
 * [lo_r, hi_r) of W (w_r, in_r x out) and the same columns of X (x_r, N x in_r), as the
 * column-parallel layer before it left them (lo_r = r in / p rounded down, in_r = hi_r - lo_r;
 * you need only in_r). All matrices are row-major. Since X W = X_1 W_1 + ... + X_p W_p:
 *   forward:  y = x_r w_r is this rank's partial sum; ONE all-reduce (sum) of its N x out floats
 *             gives every rank the whole product; then add the bias, once (added before the
 *             all-reduce, the sum would hold it p times). Megatron calls this all-reduce g;
 *   backward: dy (N x out) is whole on every rank (g's backward is the identity), so, with no
 *             message at all: dx_r = dy w_r^T (N x in_r), dw_r = x_r^T dy (in_r x out) and
 *             db = the column sums of dy (out; the same on every rank).
 * Write y, dx_r, dw_r and db (=, not +=). The grade checks them bit for bit against the serial
 * layer (integer-valued inputs: every sum is exact in any order) at 1 to 4 ranks, with in
 * divisible by p and not; random floats within a float sum's rounding; every rank the same Y;
 * and the cost: 2(p-1) messages and 2(p-1)/p N out 4 bytes sent per rank in forward (one ring
 * all-reduce), none in backward.
 *
 * What you have (minidc/collectives.h, minidc/kernels.h), or write the loops (sizes are tiny):
 *   mdc_allreduce(MDC_IN_PLACE, y, count, MDC_F32, MDC_SUM, g)       -- sum y over the group
 *   mdc_matmul_forward(dev, out, inp, w, NULL, N, C, OC)              -- out (N,OC) = inp (N,C) w (C,OC)
 *   mdc_matmul_backward(dev, dinp, dw, NULL, dout, inp, w, N, C, OC)  -- dinp += dout w^T, dw += inp^T dout
 *       (it ADDS into dinp and dw: zero them first; either may be NULL)
 *   return MDC_OK, or the status a call gave you.
 *
 * Grade it: make lab N=4 */
#include <string.h>

#include "minidc/collectives.h"
#include "minidc/kernels.h"

mdc_status lab_row_linear_forward(float *y, const float *x_r, const float *w_r, const float *bias, int N, int in_r,
                                  int out, mdc_group *g, mdc_device *dev);
mdc_status lab_row_linear_backward(float *dx_r, float *dw_r, float *db, const float *dy, const float *x_r,
                                   const float *w_r, int N, int in_r, int out, mdc_group *g, mdc_device *dev);

/* y (N, out) = sum over the group of x_r (N, in_r) w_r (in_r, out), + bias (out) */
mdc_status lab_row_linear_forward(float *y, const float *x_r, const float *w_r, const float *bias, int N, int in_r,
                                  int out, mdc_group *g, mdc_device *dev) {
    (void)y, (void)x_r, (void)w_r, (void)bias, (void)N, (void)in_r, (void)out, (void)g, (void)dev;

    /* ---- your code: the partial product, one all-reduce, the bias ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 4: lab_row_linear_forward is not written yet (labs/lab4_tensor_parallel.c)");
}

/* dx_r (N, in_r) = dy w_r^T; dw_r (in_r, out) = x_r^T dy; db (out) = column sums of dy (N, out) */
mdc_status lab_row_linear_backward(float *dx_r, float *dw_r, float *db, const float *dy, const float *x_r,
                                   const float *w_r, int N, int in_r, int out, mdc_group *g, mdc_device *dev) {
    (void)dx_r, (void)dw_r, (void)db, (void)dy, (void)x_r, (void)w_r, (void)N, (void)in_r, (void)out, (void)g;
    (void)dev;

    /* ---- your code: the three gradients, with no message ---- */

    return mdc_fail(MDC_ERR_INVALID, "lab 4: lab_row_linear_backward is not written yet (labs/lab4_tensor_parallel.c)");
}
