/* Lab 8's reference solution (the grader's check in tests/cli/labs_cli.sh): ring attention's
 * forward on the contiguous layout. The next KV block is posted before this one is attended, so
 * the transfer runs under the computation; blocks of later ranks go round unattended. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/collectives.h"

void lab_attend_block(const float *q, int q0, const float *kv, int k0, int Tl, int d, float *ob, float *lb);
mdc_status lab_ring_attention(const float *q, const float *kv, float *out, float *lse, int Tl, int d, mdc_group *g);

/* out, lse of one row merged with a block's (ob, lb) by the log-sum-exp rule */
static void merge_row(float *out, float *lse, const float *ob, float lb, int d) {
    float m = fmaxf(*lse, lb);
    if (m == -INFINITY) return; /* neither has seen a key */
    float a = expf(*lse - m), b = expf(lb - m), s = a + b;
    for (int x = 0; x < d; x++) out[x] = out[x] * (a / s) + ob[x] * (b / s);
    *lse = m + logf(s);
}

mdc_status lab_ring_attention(const float *q, const float *kv, float *out, float *lse, int Tl, int d, mdc_group *g) {
    int p = mdc_group_size(g), r = mdc_group_rank(g), next = (r + 1) % p, prev = (r - 1 + p) % p;
    size_t nkv = 2 * (size_t)Tl * d, nq = (size_t)Tl * d;
    for (size_t i = 0; i < nq; i++) out[i] = 0;
    for (int i = 0; i < Tl; i++) lse[i] = -INFINITY;
    float *buf = malloc(sizeof(float) * (2 * nkv + nq + (size_t)Tl));
    if (!buf) return mdc_fail(MDC_ERR_OOM_HOST, "lab 8: KV buffers");
    float *cur = buf, *nxt = buf + nkv, *ob = buf + 2 * nkv, *lb = ob + nq;
    memcpy(cur, kv, sizeof(float) * nkv);
    mdc_status st = MDC_OK;
    for (int s = 0; s < p && !st; s++) {
        int src = (r - s + p) % p;
        mdc_request *rq[2] = {NULL, NULL};
        if (s < p - 1) {
            st = mdc_irecv(nxt, sizeof(float) * nkv, prev, s, g, &rq[0]);
            if (!st) st = mdc_isend(cur, sizeof(float) * nkv, next, s, g, &rq[1]);
        }
        if (!st && src <= r) { /* causal: a later rank's keys all come after these rows */
            lab_attend_block(q, r * Tl, cur, src * Tl, Tl, d, ob, lb);
            for (int i = 0; i < Tl; i++) merge_row(out + (size_t)i * d, &lse[i], ob + (size_t)i * d, lb[i], d);
        }
        mdc_status w = mdc_waitall(rq, 2);
        st = st ? st : w;
        float *t = cur;
        cur = nxt, nxt = t;
    }
    free(buf);
    return st;
}
