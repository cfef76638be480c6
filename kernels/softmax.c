/* Softmax and cross-entropy over the (padded) vocabulary; columns V..Vp-1 are padding.
 *   softmax:       p = exp(x - max) / sum       FLOPs 5*N*V; bytes 4*(N*V + N*Vp)
 *   CE forward:    lse = max + log(sum exp(x - max)); loss = lse - x[target]
 *                  FLOPs 4*N*V + N;  bytes 4*(N*V + 3*N)  (logits read once; targets, lse, loss)
 *   CE backward:   dx = dloss * (exp(x - lse) - onehot), 0 on padding
 *                  FLOPs 3*N*V + N;  bytes 4*(N*V + N*Vp + 2*N)
 * The forward leaves the logits intact (so they can be dumped); the backward may overwrite
 * them with their gradient (in place: one read, one write). Rows are independent. Row sums
 * in float over the row in order, vectorized (fixed order; no dependence on threads).
 * Vocab-parallel (Megatron): each tp rank holds Vl columns starting at global column lo, of
 * which the first `valid` are real (the rest padding); the statistics are reduced over tp
 * between the calls (max, then sum-exp and the target logit), so logits are never gathered.
 *   shard max:     FLOPs N*valid;   bytes 4*(N*valid + N)
 *   shard sum-exp: FLOPs 3*N*valid; bytes 4*(N*valid + 2*N)
 *   shard target:  FLOPs 0;         bytes 4*(3*N)
 *   shard backward: as the CE backward on the shard's columns */
#include "internal.h"
#include "minidc/numerics.h"

static float row_max(const float *x, int V) {
    float mx = x[0];
    for (int j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    return mx;
}

static float row_sumexp(const float *x, float mx, int V) {
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < V; j++) sum += mdc_k_exp(x[j] - mx);
    return sum;
}

void mdc_softmax_forward(mdc_device *dev, float *probs, const float *logits, int N, int V, int Vp) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = logits + (size_t)i * Vp;
        float *p = probs + (size_t)i * Vp;
        float mx = row_max(x, V), sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < V; j++) {
            p[j] = mdc_k_exp(x[j] - mx);
            sum += p[j];
        }
        float inv = 1.0f / sum;
        for (int j = 0; j < V; j++) p[j] *= inv;
        for (int j = V; j < Vp; j++) p[j] = 0;
    }
charge:
    mdc_k_charge(dev, 5.0 * N * V, 4.0 * ((double)N * V + (double)N * Vp));
}

void mdc_crossentropy_forward(mdc_device *dev, float *losses, float *lse, const float *logits, const int *targets,
                              int N, int V, int Vp) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = logits + (size_t)i * Vp;
        float mx = row_max(x, V);
        float l = mx + mdc_logf(row_sumexp(x, mx, V));
        lse[i] = l;
        losses[i] = l - x[targets[i]];
    }
charge:
    mdc_k_charge(dev, 4.0 * N * V + N, 4.0 * ((double)N * V + 3.0 * N));
}

void mdc_crossentropy_backward(mdc_device *dev, float *dlogits, const float *logits, const float *lse,
                               const int *targets, float dloss, int N, int V, int Vp) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = logits + (size_t)i * Vp;
        float *d = dlogits + (size_t)i * Vp, l = lse[i];
        float xt = x[targets[i]];
#pragma omp simd
        for (int j = 0; j < V; j++) d[j] = dloss * mdc_k_exp(x[j] - l);
        d[targets[i]] = dloss * (mdc_k_exp(xt - l) - 1.0f);
        for (int j = V; j < Vp; j++) d[j] = 0;
    }
charge:
    mdc_k_charge(dev, 3.0 * N * V + N, 4.0 * ((double)N * V + (double)N * Vp + 2.0 * N));
}

void mdc_vocab_shard_max(mdc_device *dev, float *mx, const float *logits, int N, int Vl, int valid) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) mx[i] = valid > 0 ? row_max(logits + (size_t)i * Vl, valid) : -INFINITY;
charge:
    mdc_k_charge(dev, (double)N * valid, 4.0 * ((double)N * valid + N));
}

void mdc_vocab_shard_sumexp(mdc_device *dev, float *se, const float *logits, const float *mx, int N, int Vl,
                            int valid) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) se[i] = valid > 0 ? row_sumexp(logits + (size_t)i * Vl, mx[i], valid) : 0.0f;
charge:
    mdc_k_charge(dev, 3.0 * N * valid, 4.0 * ((double)N * valid + 2.0 * N));
}

void mdc_vocab_shard_target(mdc_device *dev, float *tlogit, const float *logits, const int *targets, int lo, int N,
                            int Vl, int valid) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        int j = targets[i] - lo;
        tlogit[i] = j >= 0 && j < valid ? logits[(size_t)i * Vl + j] : 0.0f;
    }
charge:
    mdc_k_charge(dev, 0, 12.0 * N);
}

void mdc_crossentropy_backward_shard(mdc_device *dev, float *dlogits, const float *logits, const float *lse,
                                     const int *targets, int lo, float dloss, int N, int Vl, int valid) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = logits + (size_t)i * Vl;
        float *d = dlogits + (size_t)i * Vl, l = lse[i];
        int jt = targets[i] - lo;
        float xt = jt >= 0 && jt < valid ? x[jt] : 0.0f;
#pragma omp simd
        for (int j = 0; j < valid; j++) d[j] = dloss * mdc_k_exp(x[j] - l);
        if (jt >= 0 && jt < valid) d[jt] = dloss * (mdc_k_exp(xt - l) - 1.0f);
        for (int j = valid < 0 ? 0 : valid; j < Vl; j++) d[j] = 0;
    }
charge:
    mdc_k_charge(dev, 3.0 * N * valid + N, 4.0 * ((double)N * valid + (double)N * Vl + 2.0 * N));
}
