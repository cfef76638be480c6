/* --check-serial's criterion (tools/train_check.h; why it is this one: docs/oracle.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_check.h"

enum { NAME = 64 };
#define LOSS_RTOL 1e-5   /* first step: the same parameters and tokens, summed in other orders */
#define GRAD_RTOL 1e-5   /* first step's gradients, normwise over every tensor */
#define TENSOR_RTOL 1e-4 /* ... and per tensor, against max(||g_t||, ||g|| sqrt(n_t / n)) */
/* In 16 bits a mesh rounds other partial sums to the dtype (a row-parallel product's, per rank):
 * the limits in the dtype's unit roundoff u (bf16 2^-8, fp16 2^-11), where a correct mesh stays
 * below u itself (docs/precision.md) */
#define LOSS_U 0.05
#define GRAD_U 5.0
#define TENSOR_U 10.0

struct mdc_serial_check {
    const mdc_gpt2_config *cfg;
    mdc_adamw_config opt;
    mdc_trainer *ser; /* rank 0 only */
    int exact, steps;
    double loss_rtol, grad_rtol, tensor_rtol;
    size_t P;
    float *m0, *a, *b; /* serial's first moment before the first step; the mesh's and serial's arrays */
    double *td2, *tg2; /* per tensor: squared difference and squared serial gradient */
    double loss1, grad_rel, tensor_worst, dist, worst_loss, loss_excess;
    char tensor_name[NAME];
    int loss_bad_step;
};

mdc_status mdc_serial_check_create(mdc_serial_check **out, const mdc_gpt2_config *cfg, const mdc_adamw_config *opt,
                                   mdc_trainer *ser, int exact, int precision) {
    mdc_serial_check *c = calloc(1, sizeof *c);
    *out = c;
    if (!c) return mdc_fail(MDC_ERR_OOM_HOST, "--check-serial");
    c->cfg = cfg, c->opt = *opt, c->ser = ser, c->exact = exact, c->P = mdc_gpt2_param_floats(cfg);
    double u = precision == MDC_PRECISION_BF16 ? 0x1p-8 : 0x1p-11;
    c->loss_rtol = precision ? LOSS_U * u : LOSS_RTOL, c->grad_rtol = precision ? GRAD_U * u : GRAD_RTOL;
    c->tensor_rtol = precision ? TENSOR_U * u : TENSOR_RTOL;
    size_t nt = (size_t)mdc_gpt2_tensor_count(cfg);
    if (ser && (!(c->a = calloc(c->P, sizeof(float))) || !(c->b = calloc(c->P, sizeof(float))) ||
                !(c->m0 = calloc(c->P, sizeof(float))) || !(c->td2 = calloc(nt, sizeof(double))) ||
                !(c->tg2 = calloc(nt, sizeof(double)))))
        return mdc_fail(MDC_ERR_OOM_HOST, "--check-serial: 3 x %zu floats on rank 0", c->P);
    /* the first moment the run's first step starts from: 0, or a resumed checkpoint's */
    if (!ser || exact || mdc_trainer_adam_step(ser) == 0) return MDC_OK;
    return mdc_trainer_gather(ser, NULL, c->m0, NULL, 0); /* the serial trainer alone: local */
}

void mdc_serial_check_free(mdc_serial_check *c) {
    if (!c) return;
    free(c->m0), free(c->a), free(c->b), free(c->td2), free(c->tg2);
    free(c);
}

static void compare_gradients(mdc_serial_check *c) {
    double b1 = c->opt.beta1, d2 = 0, g2 = 0;
    int nt = mdc_gpt2_tensor_count(c->cfg);
    double *td2 = c->td2, *tg2 = c->tg2;
    for (int i = 0; i < nt; i++) {
        mdc_param_tensor t;
        mdc_gpt2_tensor_at(c->cfg, i, &t);
        for (size_t j = t.offset; j < t.offset + t.numel; j++) {
            /* m = b1 m0 + (1 - b1) g: the difference of two runs is (1 - b1) times their
             * gradients' difference, and m - b1 m0 is (1 - b1) times serial's gradient */
            double d = (double)c->a[j] - c->b[j], g = (double)c->b[j] - b1 * c->m0[j];
            if (isnan(d)) d = INFINITY;
            d2 += d * d, g2 += g * g;
            td2[i] += d * d, tg2[i] += g * g;
        }
    }
    c->grad_rel = g2 > 0 ? sqrt(d2 / g2) : sqrt(d2);
    c->tensor_worst = 0;
    for (int i = 0; i < nt; i++) {
        mdc_param_tensor t;
        mdc_gpt2_tensor_at(c->cfg, i, &t);
        double typical = sqrt(g2 * (double)t.numel / (double)c->P), own = sqrt(tg2[i]);
        double den = own > typical ? own : typical, r = den > 0 ? sqrt(td2[i]) / den : sqrt(td2[i]);
        if (!(r <= c->tensor_worst)) c->tensor_worst = r, snprintf(c->tensor_name, NAME, "%s", t.name);
    }
}

mdc_status mdc_serial_check_step(mdc_serial_check *c, mdc_trainer *mesh, float loss, float sloss, float norm) {
    double dl = fabs((double)loss - sloss);
    if (!(dl <= c->worst_loss)) c->worst_loss = dl;
    if (c->exact) return MDC_OK;
    if (c->ser) {
        /* before this step the parameters were at most c->dist apart, each: to first order the
         * loss moves by at most ||g|| ||d theta|| */
        double allow = c->loss_rtol * fabs((double)sloss) + (double)norm * c->dist * sqrt((double)c->P);
        if (c->steps == 0) c->loss1 = fabs((double)sloss) > 0 ? dl / fabs((double)sloss) : dl;
        else if (!(dl <= allow) && !c->loss_bad_step) c->loss_bad_step = c->steps + 1, c->loss_excess = dl / allow;
        c->dist += 2.0 * c->opt.lr * mdc_adamw_reach(c->opt.beta1, c->opt.beta2, mdc_trainer_adam_step(c->ser)) *
                   (1 + 1e-3);
    }
    if (c->steps++ > 0) return MDC_OK;
    mdc_status st = mdc_trainer_gather(mesh, NULL, c->a, NULL, 0); /* every rank: the mesh's m */
    if (!st && c->ser) st = mdc_trainer_gather(c->ser, NULL, c->b, NULL, 0);
    if (!st && c->ser) compare_gradients(c);
    return st;
}

static int exact_verdict(mdc_serial_check *c) {
    size_t ndiff = 0;
    char first[NAME] = "";
    for (int i = 0; i < mdc_gpt2_tensor_count(c->cfg); i++) {
        mdc_param_tensor t;
        mdc_gpt2_tensor_at(c->cfg, i, &t);
        for (size_t j = t.offset; j < t.offset + t.numel; j++)
            if (memcmp(&c->a[j], &c->b[j], sizeof(float)) && !ndiff++) snprintf(first, NAME, "%s", t.name);
    }
    int ok = !ndiff && c->worst_loss == 0;
    if (ok) printf("check-serial (exact): every loss and every parameter identical to serial bit for bit: ok\n");
    else
        printf("check-serial (exact): %zu parameter(s) differ from serial (first in %s), largest loss difference "
               "%.3g: FAILED\n",
               ndiff, ndiff ? first : "none", c->worst_loss);
    return ok;
}

mdc_status mdc_serial_check_end(mdc_serial_check *c, mdc_trainer *mesh, int *ok) {
    *ok = 1;
    mdc_status st = mdc_trainer_gather(mesh, c->a, NULL, NULL, 0);
    if (st || !c->ser) return st;
    if ((st = mdc_trainer_gather(c->ser, c->b, NULL, NULL, 0))) return st;
    if (c->exact) {
        *ok = exact_verdict(c);
        return MDC_OK;
    }
    double d2 = 0, b2 = 0, far = 0;
    for (size_t j = 0; j < c->P; j++) {
        double d = fabs((double)c->a[j] - c->b[j]);
        if (isnan(d)) d = INFINITY;
        d2 += d * d, b2 += (double)c->b[j] * c->b[j];
        if (d > far) far = d;
    }
    int gok = c->steps == 0 ||
              (c->loss1 <= c->loss_rtol && c->grad_rel <= c->grad_rtol && c->tensor_worst <= c->tensor_rtol);
    int pok = far <= c->dist, lok = !c->loss_bad_step;
    *ok = gok && pok && lok;
    if (c->steps)
        printf("check-serial: first step: loss %.3g (limit %.0e, relative); gradients %.3g (||mesh - serial|| / "
               "||serial||, limit %.0e), worst tensor %s %.3g (limit %.0e of max(||g_t||, ||g|| sqrt(n_t/n))): %s the "
               "limits\n",
               c->loss1, c->loss_rtol, c->grad_rel, c->grad_rtol, c->tensor_name[0] ? c->tensor_name : "-",
               c->tensor_worst, c->tensor_rtol, gok ? "within" : "BEYOND");
    if (c->loss_bad_step)
        printf("check-serial: step %d: the loss differs from serial's by %.3g times what the parameters' distance "
               "allows\n",
               c->loss_bad_step, c->loss_excess);
    printf("check-serial: %d step(s): largest loss difference %.3g; largest |mesh - serial| of a parameter %.3g "
           "(AdamW's bound 2 lr sum U_t = %.3g); relative parameter difference %.3g (||mesh - serial|| / ||serial||, "
           "shown, not asserted): %s\n",
           c->steps, c->worst_loss, far, c->dist, b2 > 0 ? sqrt(d2 / b2) : sqrt(d2), *ok ? "ok" : "FAILED");
    return MDC_OK;
}
