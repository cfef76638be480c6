/* Matrix products with bias, weights in Conv1D layout [in, out] (GPT-2: no transposes in the
 * forward) or in nn.Linear's [out, in] (Llama, Qwen: the linear entries), and the LM head.
 * The linear entries charge exactly what the matmul ones do (the same operands). Every product is mdc_k_sgemm (fixed-partition cblas_sgemm).
 *   matmul forward:   out = inp @ w + b
 *       FLOPs 2*N*C*OC + N*OC;  bytes 4*(N*C + C*OC + OC + N*OC)
 *   matmul residual:  out = res + inp @ w + b
 *       FLOPs 2*N*C*OC + 2*N*OC; bytes 4*(N*C + C*OC + OC + 2*N*OC)
 *   matmul backward:  dinp += dout @ w^T; dw += inp^T @ dout; db += colsum(dout)
 *       FLOPs [2*N*C*OC (dw)] + [2*N*C*OC (dinp)] + [N*OC (db)]
 *       bytes [4*(N*OC + N*C + 2*C*OC)] + [4*(N*OC + C*OC + 2*N*C)] + [4*(N*OC + 2*OC)]
 *   LM head forward:  logits = inp @ wte^T
 *       FLOPs 2*N*C*Vp;  bytes 4*(N*C + Vp*C + N*Vp)
 *   LM head backward: dinp += dlogits @ wte; dwte += dlogits^T @ inp
 *       FLOPs 4*N*C*Vp;  bytes 4*(2*N*Vp + 3*Vp*C + 3*N*C)
 * (bytes: each operand read once, each accumulated output read and written once: the ideal
 * tiling of a GPU GEMM; [..] terms only when that output is requested: the input-gradient
 * part B and the weight-gradient part W of a backward may run as separate calls.)
 * The bias is written into out first and the product accumulated onto it (beta = 1): one
 * pass instead of a product then an add. db sums rows per fixed column block, in row order. */
#include "internal.h"

static void fill_bias(float *out, const float *res, const float *bias, int N, int OC) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *o = out + (size_t)i * OC;
        const float *r = res ? res + (size_t)i * OC : NULL;
        if (r && bias)
            for (int j = 0; j < OC; j++) o[j] = r[j] + bias[j];
        else if (r) {
            if (o != r) memcpy(o, r, sizeof(float) * OC);
        } else if (bias) memcpy(o, bias, sizeof(float) * OC);
        else memset(o, 0, sizeof(float) * OC);
    }
}

void mdc_matmul_forward(mdc_device *dev, float *out, const float *inp, const float *weight, const float *bias, int N,
                        int C, int OC) {
    double n = N, c = C, oc = OC;
    if (mdc_dev_dry(dev)) goto charge;
    if (bias) {
        fill_bias(out, NULL, bias, N, OC);
        mdc_k_sgemm(0, 0, N, OC, C, 1.0f, inp, C, weight, OC, 1.0f, out, OC);
    } else {
        mdc_k_sgemm(0, 0, N, OC, C, 1.0f, inp, C, weight, OC, 0.0f, out, OC);
    }
charge:
    mdc_k_charge_gemm(dev, 2 * n * c * oc + n * oc, 4 * (n * c + c * oc + oc + n * oc));
}

void mdc_matmul_residual_forward(mdc_device *dev, float *out, const float *residual, const float *inp,
                                 const float *weight, const float *bias, int N, int C, int OC) {
    double n = N, c = C, oc = OC;
    if (mdc_dev_dry(dev)) goto charge;
    fill_bias(out, residual, bias, N, OC);
    mdc_k_sgemm(0, 0, N, OC, C, 1.0f, inp, C, weight, OC, 1.0f, out, OC);
charge:
    mdc_k_charge_gemm(dev, 2 * n * c * oc + 2 * n * oc, 4 * (n * c + c * oc + oc + 2 * n * oc));
}

/* db += column sums of dout (N,OC), fixed column blocks, rows in order. */
static void bias_backward(float *dbias, const float *dout, int N, int OC) {
    enum { CB = 64 };
    int ncb = (OC + CB - 1) / CB;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < ncb; cb++) {
        int c0 = cb * CB, c1 = c0 + CB < OC ? c0 + CB : OC;
        float acc[CB];
        for (int j = c0; j < c1; j++) acc[j - c0] = 0;
        for (int i = 0; i < N; i++) {
            const float *d = dout + (size_t)i * OC;
            for (int j = c0; j < c1; j++) acc[j - c0] += d[j];
        }
        for (int j = c0; j < c1; j++) dbias[j] += acc[j - c0];
    }
}

/* The backward of either layout (wt: weight (OC, C)); each part only when its output is asked for.
 * The charge is the sum of the parts' (weight, input, bias gradients, in that order). */
static void backward_parts(mdc_device *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, int N, int C, int OC, int wt) {
    double n = N, c = C, oc = OC;
    double flops = dweight ? 2 * n * c * oc : 0, bytes = dweight ? 4 * (n * oc + n * c + 2 * c * oc) : 0;
    if (dinp) {
        flops += 2 * n * c * oc;
        bytes += 4 * (n * oc + c * oc + 2 * n * c);
    }
    if (dbias) {
        flops += n * oc;
        bytes += 4 * (n * oc + 2 * oc);
    }
    if (mdc_dev_dry(dev)) goto charge;
    if (dinp) {
        if (wt) mdc_k_sgemm(0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
        else mdc_k_sgemm(0, 1, N, C, OC, 1.0f, dout, OC, weight, OC, 1.0f, dinp, C);
    }
    if (dweight && wt) mdc_k_sgemm(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    else if (dweight) mdc_k_sgemm(1, 0, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f, dweight, OC);
    if (dbias) bias_backward(dbias, dout, N, OC);
charge:
    mdc_k_charge_gemm(dev, flops, bytes);
}

void mdc_matmul_backward(mdc_device *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC) {
    backward_parts(dev, dinp, dweight, dbias, dout, inp, weight, N, C, OC, 0);
}

void mdc_lmhead_forward(mdc_device *dev, float *logits, const float *inp, const float *wte, int N, int C, int Vp) {
    double n = N, c = C, v = Vp;
    if (mdc_dev_dry(dev)) goto charge;
    mdc_k_sgemm(0, 1, N, Vp, C, 1.0f, inp, C, wte, C, 0.0f, logits, Vp);
charge:
    mdc_k_charge_gemm(dev, 2 * n * c * v, 4 * (n * c + v * c + n * v));
}

void mdc_lmhead_backward(mdc_device *dev, float *dinp, float *dwte, const float *dlogits, const float *inp,
                         const float *wte, int N, int C, int Vp) {
    double n = N, c = C, v = Vp;
    if (mdc_dev_dry(dev)) goto charge;
    mdc_k_sgemm(0, 0, N, C, Vp, 1.0f, dlogits, Vp, wte, C, 1.0f, dinp, C);
    mdc_k_sgemm(1, 0, Vp, C, N, 1.0f, dlogits, Vp, inp, C, 1.0f, dwte, C);
charge:
    mdc_k_charge_gemm(dev, 4 * n * c * v, 4 * (2 * n * v + 3 * v * c + 3 * n * c));
}

void mdc_linear_forward(mdc_device *dev, float *out, const float *residual, const float *inp, const float *weight,
                        const float *bias, int N, int C, int OC) {
    double n = N, c = C, oc = OC;
    if (mdc_dev_dry(dev)) goto charge;
    int acc = bias || residual;
    if (acc) fill_bias(out, residual, bias, N, OC);
    mdc_k_sgemm(0, 1, N, OC, C, 1.0f, inp, C, weight, C, acc ? 1.0f : 0.0f, out, OC);
charge:
    mdc_k_charge_gemm(dev, 2 * n * c * oc + (residual ? 2 : 1) * n * oc,
                      4 * (n * c + c * oc + oc + (residual ? 2 : 1) * n * oc));
}

void mdc_linear_backward(mdc_device *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC) {
    backward_parts(dev, dinp, dweight, dbias, dout, inp, weight, N, C, OC, 1);
}
