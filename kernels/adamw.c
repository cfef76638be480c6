/* AdamW (Loshchilov & Hutter 2019) exactly as torch.optim.AdamW computes it, with the
 * gradient first multiplied by grad_scale (global-norm clipping), and the global norm.
 *   adamw:     FLOPs 15*n; bytes 28*n (p g m v read; p m v written)
 *   grad norm: FLOPs 2*n;  bytes 4*n
 * On a dry device (mdc_dev_set_dry) both charge the same and touch no tensor; the norm and the
 * sum of squares are then 0.
 * The norm is summed in double per fixed chunk of MDC_NORM_CHUNK elements, the chunk sums
 * added in chunk order: the same bits for any thread count. */
#include <stdlib.h>

#include "internal.h"
#include "minidc/numerics.h"

void mdc_adamw_update(mdc_device *dev, float *params, float *m, float *v, const float *grads, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    if (mdc_dev_dry(dev)) goto charge;
    float bc1 = 1.0f - mdc_powf_int(beta1, t), bc2 = 1.0f - mdc_powf_int(beta2, t);
    float step = lr / bc1, bc2s = sqrtf(bc2), decay = 1.0f - lr * weight_decay;
    long nn = (long)n;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < nn; i++) {
        float g = grads[i] * grad_scale;
        float p = params[i] * decay;
        float mi = m[i] * beta1 + (1.0f - beta1) * g; /* torch: m.lerp_(g, 1 - beta1) */
        float vi = v[i] * beta2 + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        params[i] = p - step * (mi / (sqrtf(vi) / bc2s + eps));
    }
charge:
    mdc_adamw_charge(dev, n);
}

/* named as the update it charges for (a multi-tensor launch is one update in the trace) */
void mdc_adamw_charge(mdc_device *dev, size_t n) {
    if (dev) mdc_dev_kernel_named(dev, "mdc_adamw_update", 15.0 * (double)n, 28.0 * (double)n, MDC_PREC_FP32);
}

double mdc_grad_sumsq(mdc_device *dev, const float *grads, size_t n) {
    double total = 0;
    if (mdc_dev_dry(dev)) goto charge; /* the sum is 0 */
    size_t nc = (n + MDC_NORM_CHUNK - 1) / MDC_NORM_CHUNK;
    double stackbuf[256], *part = nc <= 256 ? stackbuf : malloc(sizeof(double) * nc);
    if (!part) { /* same sums, serially */
        for (size_t c = 0; c < nc; c++) {
            size_t i0 = c * MDC_NORM_CHUNK, i1 = i0 + MDC_NORM_CHUNK < n ? i0 + MDC_NORM_CHUNK : n;
            double s = 0;
            for (size_t i = i0; i < i1; i++) s += (double)grads[i] * grads[i];
            total += s;
        }
    } else {
#pragma omp parallel for schedule(static)
        for (long c = 0; c < (long)nc; c++) {
            size_t i0 = (size_t)c * MDC_NORM_CHUNK, i1 = i0 + MDC_NORM_CHUNK < n ? i0 + MDC_NORM_CHUNK : n;
            double s = 0;
            for (size_t i = i0; i < i1; i++) s += (double)grads[i] * grads[i];
            part[c] = s;
        }
        for (size_t c = 0; c < nc; c++) total += part[c];
        if (part != stackbuf) free(part);
    }
charge:
    mdc_k_charge_fp32(dev, 2.0 * (double)n, 4.0 * (double)n);
    return total;
}

double mdc_grad_norm(mdc_device *dev, const float *grads, size_t n) { return sqrt(mdc_grad_sumsq(dev, grads, n)); }

float mdc_clip_scale(double norm, float max_norm) {
    if (max_norm <= 0) return 1.0f;
    double c = (double)max_norm / (norm + 1e-6);
    return c < 1.0 ? (float)c : 1.0f;
}

double mdc_adamw_reach(double beta1, double beta2, int t) {
    double r = beta1 / sqrt(beta2);
    double sum = fabs(r - 1) < 1e-12 ? t : (1 - pow(r, t)) / (1 - r);
    return (1 - beta1) * sqrt(1 - pow(beta2, t)) / ((1 - pow(beta1, t)) * sqrt(1 - beta2)) * sum;
}
