/* Grader of lab 4 (labs/lab4_tensor_parallel.c): the student's row-parallel linear layer, forward
 * and backward, against the serial layer computed here in doubles from the whole X, W, b and dY.
 * At the world's p ranks, rank r holding rows [r in/p, (r+1) in/p) of W and those columns of X:
 *   - integer values (every sum exact in any order), in = 12 and in = 7 (2p + 1 from p = 7 on):
 *     Y on every rank, dX_r, dW_r and db bit-identical to the serial layer's; forward sends
 *     2(p-1) messages and 2(p-1)/p x B T out x 4 bytes per rank (one ring all-reduce of B T out
 *     floats, traced), backward none;
 *   - random floats: every element within a float sum's rounding of the exact value, (n+2) 2^-23
 *     x the sum of |terms| for n terms in any order, and every rank holds rank 0's Y bit for bit.
 * A wrong element is named by its place (token, column, W's row), with a hint for the usual faults.
 * Ranks: 1 2 3 4 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"

mdc_status lab_row_linear_forward(float *y, const float *x_r, const float *w_r, const float *bias, int N, int in_r,
                                  int out, mdc_group *g, mdc_device *dev);
mdc_status lab_row_linear_backward(float *dx_r, float *dw_r, float *db, const float *dy, const float *x_r,
                                   const float *w_r, int N, int in_r, int out, mdc_group *g, mdc_device *dev);

enum { MAXN = 16, MAXIN = 40, MAXOUT = 168 };
#define SENTINEL (-12345.0f) /* what an output holds before the call: an element never written shows it */

/* One case: the whole tensors (the same on every rank), this rank's shards, the serial layer's
 * results (exact, in doubles) with the sums of |terms| that bound a float computation's rounding,
 * and the student's outputs. */
typedef struct {
    int B, T, N, in, out, lo, hi, rnd;
    float X[MAXN * MAXIN], W[MAXIN * MAXOUT], b[MAXOUT], dY[MAXN * MAXOUT];
    float x[MAXN * MAXIN];
    double Y[MAXN * MAXOUT], dX[MAXN * MAXIN], dW[MAXIN * MAXOUT], db[MAXOUT];
    double aY[MAXN * MAXOUT], adX[MAXN * MAXIN], adW[MAXIN * MAXOUT], adb[MAXOUT];
    float y[MAXN * MAXOUT], dx[MAXN * MAXIN], dw[MAXIN * MAXOUT], dbg[MAXOUT];
    char why_fwd[200], why_bwd[200]; /* the calls' statuses, when they failed */
    grade_traffic fwd, bwd;
} layer;

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Element i of tensor `which`: a non-zero integer in [-3, 3] (no term is ever -0, so neither is
 * any sum, in any order), or a float of 24 bits within 2^-4..2^4. */
static float value(int rnd, int which, size_t i) {
    uint64_t z = mix((uint64_t)which * 0x9E3779B97F4A7C15ull + i + 1);
    if (!rnd) return (float)((int)(z % 6) - 3 + (z % 6 >= 3));
    float m = (float)(z & 0xFFFFFF) / (float)0x1000000;
    return ldexpf(m - 0.5f, (int)((z >> 24) % 9) - 4);
}

static void setup(layer *L, grade *g, int B, int T, int in, int out, int rnd) {
    L->B = B, L->T = T, L->N = B * T, L->in = in, L->out = out, L->rnd = rnd;
    L->lo = g->me * in / g->p, L->hi = (g->me + 1) * in / g->p;
    int N = L->N, inr = L->hi - L->lo;
    for (int i = 0; i < N * in; i++) L->X[i] = value(rnd, 1, (size_t)i);
    for (int i = 0; i < in * out; i++) L->W[i] = value(rnd, 2, (size_t)i);
    for (int j = 0; j < out; j++) L->b[j] = value(rnd, 3, (size_t)j);
    for (int i = 0; i < N * out; i++) L->dY[i] = value(rnd, 4, (size_t)i);
    for (int i = 0; i < N; i++) /* this rank's columns of X, packed (N, in_r) */
        for (int k = 0; k < inr; k++) L->x[i * inr + k] = L->X[i * in + L->lo + k];
    /* the serial layer: products of two floats are exact in a double, and so are these short sums
     * up to 2^-53 relative, far below the float bound */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < out; j++) {
            double s = L->b[j], a = fabs(L->b[j]);
            for (int k = 0; k < in; k++) {
                double t = (double)L->X[i * in + k] * L->W[k * out + j];
                s += t, a += fabs(t);
            }
            L->Y[i * out + j] = s, L->aY[i * out + j] = a;
        }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < in; k++) {
            double s = 0, a = 0;
            for (int j = 0; j < out; j++) {
                double t = (double)L->dY[i * out + j] * L->W[k * out + j];
                s += t, a += fabs(t);
            }
            L->dX[i * in + k] = s, L->adX[i * in + k] = a;
        }
    for (int k = 0; k < in; k++)
        for (int j = 0; j < out; j++) {
            double s = 0, a = 0;
            for (int i = 0; i < N; i++) {
                double t = (double)L->X[i * in + k] * L->dY[i * out + j];
                s += t, a += fabs(t);
            }
            L->dW[k * out + j] = s, L->adW[k * out + j] = a;
        }
    for (int j = 0; j < out; j++) {
        double s = 0, a = 0;
        for (int i = 0; i < N; i++) s += L->dY[i * out + j], a += fabs(L->dY[i * out + j]);
        L->db[j] = s, L->adb[j] = a;
    }
}

/* Runs the student's forward and backward, each traced, on outputs that hold SENTINEL. */
static void run(layer *L, grade *g) {
    int N = L->N, inr = L->hi - L->lo, out = L->out;
    for (int i = 0; i < N * out; i++) L->y[i] = SENTINEL;
    for (int i = 0; i < N * inr; i++) L->dx[i] = SENTINEL;
    for (int i = 0; i < inr * out; i++) L->dw[i] = SENTINEL;
    for (int j = 0; j < out; j++) L->dbg[j] = SENTINEL;
    L->why_fwd[0] = L->why_bwd[0] = 0;
    memset(&L->fwd, 0, sizeof L->fwd), memset(&L->bwd, 0, sizeof L->bwd);
    grade_traffic_begin(g, &L->fwd);
    mdc_status st = lab_row_linear_forward(L->y, L->x, L->W + (size_t)L->lo * out, L->b, N, inr, out, g->rt.world,
                                           g->rt.dev);
    grade_traffic_end(g);
    if (st) grade_status_text(st, L->why_fwd, sizeof L->why_fwd);
    grade_traffic_begin(g, &L->bwd);
    st = lab_row_linear_backward(L->dx, L->dw, L->dbg, L->dY, L->x, L->W + (size_t)L->lo * out, N, inr, out,
                                 g->rt.world, g->rt.dev);
    grade_traffic_end(g);
    if (st) grade_status_text(st, L->why_bwd, sizeof L->why_bwd);
}

/* The first i < n whose got is not want: bit for bit (integer values: the exact value is a
 * float), or beyond the rounding bound of a float sum of `terms` terms in any order. */
static long first_bad(const layer *L, const float *got, const double *want, const double *abs, int n, int terms) {
    for (int i = 0; i < n; i++) {
        float w = (float)want[i];
        if (!L->rnd ? memcmp(&got[i], &w, sizeof w) != 0
                    : !(fabs(got[i] - want[i]) <= (terms + 2) * ldexp(abs[i], -23)))
            return i;
    }
    return -1;
}

static const char *kind(const layer *L) { return L->rnd ? "within a float sum's rounding of" : "bit-identical to"; }

static void check_y(layer *L, grade *g) {
    char name[160], why[200] = "";
    int out = L->out;
    snprintf(name, sizeof name, "%s B=%d T=%d in=%d out=%d: Y = X W + b on every rank %s the serial layer's",
             L->rnd ? "random floats," : "integers,", L->B, L->T, L->in, out, kind(L));
    long i = L->why_fwd[0] ? -1 : first_bad(L, L->y, L->Y, L->aY, L->N * out, L->in + 1);
    if (i >= 0) {
        int tok = (int)(i / out), j = (int)(i % out);
        double part = 0; /* this rank's own partial sum X_r W_r */
        for (int k = L->lo; k < L->hi; k++) part += (double)L->X[tok * L->in + k] * L->W[k * out + j];
        const char *hint = "";
        if (L->y[i] == SENTINEL) hint = " (never written)";
        else if (!L->rnd && g->p > 1 && L->y[i] == (float)(L->Y[i] + (g->p - 1) * L->b[j]))
            hint = " (the bias counted p times: add it once, after the all-reduce)";
        else if (!L->rnd && g->p > 1 && (L->y[i] == (float)(part + L->b[j]) || L->y[i] == (float)part))
            hint = " (this rank's own partial sum X_r W_r: no all-reduce?)";
        else if (!L->rnd && L->y[i] == (float)(L->Y[i] - L->b[j])) hint = " (the bias is missing)";
        snprintf(why, sizeof why, "Y[token %d (b=%d, t=%d), column %d] is %.9g, expected %.9g%s", tok, tok / L->T,
                 tok % L->T, j, L->y[i], L->Y[i], hint);
    }
    grade_check(g, name, !L->why_fwd[0] && i < 0, "%s", L->why_fwd[0] ? L->why_fwd : why);
}

/* dX_r, dW_r, db: the slices of the serial gradients this rank holds */
static void check_grads(layer *L, grade *g) {
    int N = L->N, in = L->in, out = L->out, inr = L->hi - L->lo;
    double want_dx[MAXN * MAXIN], a_dx[MAXN * MAXIN];
    for (int i = 0; i < N; i++)
        for (int k = 0; k < inr; k++)
            want_dx[i * inr + k] = L->dX[i * in + L->lo + k], a_dx[i * inr + k] = L->adX[i * in + L->lo + k];
    const double *want_dw = L->dW + (size_t)L->lo * out, *a_dw = L->adW + (size_t)L->lo * out;
    const char *names[3] = {"dX_r = dY W_r^T", "dW_r = X_r^T dY", "db = column sums of dY"};
    for (int c = 0; c < 3; c++) {
        const float *got = c == 0 ? L->dx : c == 1 ? L->dw : L->dbg;
        const double *want = c == 0 ? want_dx : c == 1 ? want_dw : L->db, *a = c == 0 ? a_dx : c == 1 ? a_dw : L->adb;
        int n = c == 0 ? N * inr : c == 1 ? inr * out : out, terms = c == 0 ? out : N, cols = c == 0 ? inr : out;
        char name[160], why[300] = "", place[80];
        snprintf(name, sizeof name, "%s in=%d: %s %s the serial layer's%s", L->rnd ? "random floats," : "integers,", in,
                 names[c], kind(L), c == 2 ? " (every rank)" : "");
        long i = L->why_bwd[0] ? -1 : first_bad(L, got, want, a, n, terms);
        if (i >= 0) {
            int r = (int)(i / cols), j = (int)(i % cols);
            if (c == 0) snprintf(place, sizeof place, "dX_r[token %d, column %d] (X's column %d)", r, j, L->lo + j);
            else if (c == 1) snprintf(place, sizeof place, "dW_r[row %d, column %d] (W's row %d)", r, j, L->lo + r);
            else snprintf(place, sizeof place, "db[%d]", j);
            const char *hint = "";
            if (got[i] == SENTINEL) hint = " (never written)";
            else if (!L->rnd && got[i] == (float)(SENTINEL + want[i]))
                hint = " (plus what it held before the call: mdc_matmul_backward adds, zero the outputs first)";
            else if (!L->rnd && g->p > 1 && want[i] != 0 && got[i] == (float)(g->p * want[i]))
                hint = " (p times the gradient: an all-reduce in backward sums what is already whole)";
            char rows[48] = "";
            if (c < 2) snprintf(rows, sizeof rows, "; this rank holds W's rows [%d, %d)", L->lo, L->hi);
            snprintf(why, sizeof why, "%s is %.9g, expected %.9g%s%s", place, got[i], want[i], rows, hint);
        }
        grade_check(g, name, !L->why_bwd[0] && i < 0, "%s", L->why_bwd[0] ? L->why_bwd : why);
    }
}

/* One ring all-reduce of N out floats in forward, nothing in backward (traced, this rank's sends). */
static void check_cost(layer *L, grade *g) {
    char name[200];
    size_t n = (size_t)L->N * L->out, msgs = 2 * (size_t)(g->p - 1);
    double bytes = 2.0 * (g->p - 1) / g->p * (double)n * 4;
    snprintf(name, sizeof name,
             "in=%d forward: one all-reduce of B T out = %zu floats: 2(p-1) = %zu messages, 2(p-1)/p x %zu x 4 = %.0f "
             "bytes sent per rank",
             L->in, n, msgs, n, bytes);
    int ok = !L->why_fwd[0] && L->fwd.sends == msgs && fabs((double)L->fwd.bytes - bytes) < 0.5;
    const char *hint = L->fwd.bytes == 0 ? " (no all-reduce)"
                       : L->fwd.sends == 2 * msgs && fabs((double)L->fwd.bytes - 2 * bytes) < 0.5
                           ? " (two all-reduces?)"
                           : "";
    if (L->why_fwd[0]) grade_check(g, name, 0, "%s", L->why_fwd);
    else grade_check(g, name, ok, "it sent %zu messages, %zu bytes%s", L->fwd.sends, L->fwd.bytes, hint);
    snprintf(name, sizeof name, "in=%d backward: no message (dY is whole on every rank)", L->in);
    if (L->why_bwd[0]) grade_check(g, name, 0, "%s", L->why_bwd);
    else
        grade_check(g, name, L->bwd.sends == 0, "it sent %zu messages, %zu bytes: dX_r, dW_r and db need no other rank",
                    L->bwd.sends, L->bwd.bytes);
}

/* Random floats: a float sum's bits depend on its order, so every rank must hold rank 0's. */
static void check_same(layer *L, grade *g) {
    float y0[MAXN * MAXOUT];
    char why[200] = "";
    int n = L->N * L->out;
    memcpy(y0, L->y, sizeof(float) * (size_t)n);
    mdc_status st = mdc_bcast(y0, (size_t)n, MDC_F32, 0, g->rt.world);
    long i = -1;
    for (int k = 0; !st && !L->why_fwd[0] && k < n && i < 0; k++)
        if (memcmp(&L->y[k], &y0[k], sizeof(float))) i = k;
    if (i >= 0)
        snprintf(why, sizeof why, "Y[token %ld, column %ld] is %.9g, rank 0's is %.9g", i / L->out, i % L->out, L->y[i],
                 y0[i]);
    if (st) grade_status_text(st, why, sizeof why);
    grade_check(g, "random floats: every rank holds the same Y, bit for bit", !st && !L->why_fwd[0] && i < 0, "%s",
                L->why_fwd[0] ? L->why_fwd : why);
}

static layer the_layer; /* about 100 KB: static, not on the stack */

int main(int argc, char **argv) {
    grade g;
    mdc_status st = grade_begin(&g, &argc, &argv, 20);
    if (st) {
        fprintf(stderr, "lab 4 grader: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    mdc_coll_prefer_ring();                    /* as minidc train --tp: the ring, whose bytes are the formula's */
    int out = (2 * 3 * 8) % g.p ? 8 * g.p : 8; /* p divides B T out: the ring's bytes are exactly 2(p-1)/p of it */
    if (g.p > 8) {                             /* the sizes below hold up to 8 ranks */
        grade_check(&g, "the grade runs at 1 to 8 ranks", 0, "this run has %d", g.p);
        return grade_end(&g);
    }
    layer *L = &the_layer;
    int ins[2] = {12, g.p < 7 ? 7 : 2 * g.p + 1}; /* 12: divisible by 1 to 4; 7: by none of 2 to 6 */
    for (int c = 0; c < 2; c++) {
        setup(L, &g, 2, 3, ins[c], out, 0);
        run(L, &g);
        check_y(L, &g);
        check_cost(L, &g);
        check_grads(L, &g);
    }
    setup(L, &g, 2, 4, 37, 3 * out, 1);
    run(L, &g);
    check_y(L, &g);
    check_same(L, &g);
    check_grads(L, &g);
    return grade_end(&g);
}
