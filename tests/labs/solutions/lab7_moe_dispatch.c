/* Lab 7's reference solution (labs/lab7_moe_dispatch.c says what each function must do): the
 * counts' all-to-all and the rows' all-to-allv of the dispatch, the reverse all-to-allv and the
 * gate-weighted sum of the combine. */
#include <stdlib.h>
#include <string.h>

#include "minidc/collectives.h"

mdc_status lab_moe_dispatch(float *recv, int *recv_counts, int *nrecv, int cap, const float *x, const int *expert,
                            int T, int d, int k, int E, mdc_group *g);
mdc_status lab_moe_combine(float *out, const float *y, const int *recv_counts, const float *gate, const int *expert,
                           int T, int d, int k, int E, mdc_group *g);

/* The send layout, sorted by expert then token: the rows of expert j start at row first[j]
 * (first[E] = T k kept slots in all), and slot (t, s) goes to row pos[t k + s]. A token's k
 * experts are distinct, so sorting by expert then token is the same as by rank, local expert, token. */
static void send_layout(const int *expert, int T, int k, int E, int *first, int *pos) {
    for (int j = 0; j <= E; j++) first[j] = 0;
    for (int i = 0; i < T * k; i++) first[expert[i] + 1]++;
    for (int j = 0; j < E; j++) first[j + 1] += first[j];
    int *next = first + E + 1; /* E more ints: the next free row of each expert */
    memcpy(next, first, sizeof(int) * (size_t)E);
    for (int i = 0; i < T * k; i++) pos[i] = next[expert[i]]++;
}

/* Per rank: send counts and displacements (from first) and receive counts and displacements
 * (from recv_counts), in floats. */
static void rank_counts(const int *first, const int *recv_counts, int p, int El, int d, size_t *c) {
    size_t *sc = c, *sd = c + p, *rc = c + 2 * p, *rd = c + 3 * p, ro = 0;
    for (int q = 0; q < p; q++) {
        sc[q] = (size_t)(first[(q + 1) * El] - first[q * El]) * d, sd[q] = (size_t)first[q * El] * d;
        rc[q] = 0;
        for (int j = 0; j < El; j++) rc[q] += (size_t)recv_counts[q * El + j] * d;
        rd[q] = ro, ro += rc[q];
    }
}

typedef struct {
    int *first, *pos;
    size_t *c;
    float *rows;
} scratch;

static mdc_status scratch_get(scratch *s, int T, int k, int E, int p, int d) {
    s->first = malloc(sizeof(int) * (2 * (size_t)E + 1));
    s->pos = malloc(sizeof(int) * ((size_t)T * k + 1));
    s->c = malloc(sizeof(size_t) * 4 * (size_t)p);
    s->rows = malloc(sizeof(float) * ((size_t)T * k * d + 1));
    if (s->first && s->pos && s->c && s->rows) return MDC_OK;
    return mdc_fail(MDC_ERR_OOM_HOST, "lab 7: scratch for %d x %d rows", T * k, d);
}

static void scratch_free(scratch *s) { free(s->first), free(s->pos), free(s->c), free(s->rows); }

mdc_status lab_moe_dispatch(float *recv, int *recv_counts, int *nrecv, int cap, const float *x, const int *expert,
                            int T, int d, int k, int E, mdc_group *g) {
    int p = mdc_group_size(g), El = E / p;
    scratch s;
    mdc_status st = scratch_get(&s, T, k, E, p, d);
    if (!st) {
        send_layout(expert, T, k, E, s.first, s.pos);
        int *send_counts = s.first + E + 1; /* reuse: the next-row cursors are done with */
        for (int j = 0; j < E; j++) send_counts[j] = s.first[j + 1] - s.first[j];
        st = mdc_alltoall(send_counts, recv_counts, (size_t)El, MDC_I32, g);
    }
    if (!st) {
        int total = 0;
        for (int i = 0; i < p * El; i++) total += recv_counts[i];
        if (total > cap) st = mdc_fail(MDC_ERR_INVALID, "lab 7: %d rows arrive, room for %d", total, cap);
        *nrecv = total;
    }
    if (!st) {
        for (int i = 0; i < T * k; i++)
            memcpy(s.rows + (size_t)s.pos[i] * d, x + (size_t)(i / k) * d, sizeof(float) * d);
        rank_counts(s.first, recv_counts, p, El, d, s.c);
        st = mdc_alltoallv(s.rows, s.c, s.c + p, recv, s.c + 2 * p, s.c + 3 * p, MDC_F32, g);
    }
    scratch_free(&s);
    return st;
}

mdc_status lab_moe_combine(float *out, const float *y, const int *recv_counts, const float *gate, const int *expert,
                           int T, int d, int k, int E, mdc_group *g) {
    int p = mdc_group_size(g), El = E / p;
    scratch s;
    mdc_status st = scratch_get(&s, T, k, E, p, d);
    if (!st) {
        send_layout(expert, T, k, E, s.first, s.pos);
        rank_counts(s.first, recv_counts, p, El, d, s.c);
        /* the reverse: what was received goes back, into the send layout */
        st = mdc_alltoallv(y, s.c + 2 * p, s.c + 3 * p, s.rows, s.c, s.c + p, MDC_F32, g);
    }
    for (int t = 0; !st && t < T; t++) {
        float *o = out + (size_t)t * d;
        for (int c = 0; c < d; c++) o[c] = 0;
        for (int sl = 0; sl < k; sl++) {
            const float *r = s.rows + (size_t)s.pos[t * k + sl] * d;
            for (int c = 0; c < d; c++) o[c] += gate[t * k + sl] * r[c];
        }
    }
    scratch_free(&s);
    return st;
}
