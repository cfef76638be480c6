/* Grader of lab 7 (labs/lab7_moe_dispatch.c): the student's expert-parallel dispatch and combine,
 * over the world's p ranks, rank r owning experts [r E/p, (r+1) E/p). Four routings, each a pure
 * function of (rank, token, slot) that every rank evaluates for every rank, so each rank knows
 * serially what it must receive and output:
 *   k = 2 over E = 2p experts; k = 1 over E = 3p with T = 9 + 2r tokens on rank r; k = 2 over
 *   E = 4p skewed (expert E-1 in every token, experts 1 and 2 mod 4 in none: empty blocks and
 *   zero-row messages); k = 1 over E = p where rank 1 has no token and 3 in 4 tokens go to
 *   expert 0 (one rank receives most rows, the others none).
 * Checks per routing: the counts per (source rank, local expert); every received row in the
 * canonical order (source, local expert, token; a wrong one named by its source rank, token and
 * expert, and what it holds instead); the combined output against the serial MoE layer, bit for
 * bit; the bytes the dispatch and the combine send to each rank, traced, against (p-1) El 4
 * (counts) + rows x d x 4.
 * Why bit for bit is honest: a token's elements are integers below 2^10, an expert multiplies
 * by its id + 1 (at most 33), a gate is 2^-1, 2^-2 or 2^-3, and k <= 2: every product is an
 * integer below 2^15 times a power of two, and a sum of two such is a multiple of 2^-3 below 2^16,
 * 19 bits: every float operation is exact in any order, so only a wrong row or gate changes a bit.
 * The combine runs on the experts' outputs of the right rows (computed here), so a wrong dispatch
 * does not hide a right combine. mdc_alltoall is forced to its pairwise algorithm: one message
 * of El counts to each other rank.
 * Ranks: 1 2 3 4 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"

mdc_status lab_moe_dispatch(float *recv, int *recv_counts, int *nrecv, int cap, const float *x, const int *expert,
                            int T, int d, int k, int E, mdc_group *g);
mdc_status lab_moe_combine(float *out, const float *y, const int *recv_counts, const float *gate, const int *expert,
                           int T, int d, int k, int E, mdc_group *g);

enum { MAXP = 8, MAXT = 32, MAXK = 2, D = 5, MAXE = 4 * MAXP, MAXROWS = MAXP * MAXT * MAXK };
enum { SPREAD, K1, SKEWED, EMPTY, NCASES };
#define SENTINEL (-12345.0f) /* what an output holds before the call: a row never written shows it */

static const char *case_name[NCASES] = {"k=2 E=2p", "k=1 E=3p T=9+2r", "k=2 E=4p skewed", "k=1 E=p rank 1 empty"};

typedef struct {
    size_t to[MAXP], all; /* bytes sent to each rank, in all */
} traced;

static void on_message(void *ctx, int is_send, int me, int peer, size_t bytes, int tag) {
    traced *tr = ctx;
    (void)me, (void)tag;
    if (is_send && peer >= 0 && peer < MAXP) tr->to[peer] += bytes, tr->all += bytes;
}

static uint32_t hash(int a, int b, int c) {
    uint32_t z = (uint32_t)a * 0x9E3779B1u + (uint32_t)b * 0x85EBCA77u + (uint32_t)c * 0xC2B2AE3Du + 17;
    z ^= z >> 15, z *= 0x2C1B3C6Du, z ^= z >> 12, z *= 0x297A2D39u, z ^= z >> 15;
    return z;
}

/* The routing of each case: rank r's tokens, experts, k, and slot s of its token t. */
static int n_tokens(int c, int r) { return c == K1 ? 9 + 2 * r : c == EMPTY ? (r == 1 ? 0 : 7) : 12; }
static int n_experts(int c, int p) { return c == SPREAD ? 2 * p : c == K1 ? 3 * p : c == SKEWED ? 4 * p : p; }
static int top_k(int c) { return c == SPREAD || c == SKEWED ? 2 : 1; }

static int route(int c, int p, int r, int t, int s) {
    int E = n_experts(c, p);
    uint32_t h = hash(r, t, 100 + c);
    switch (c) {
    case SPREAD: {
        int e0 = (int)(h % (uint32_t)E);
        return s == 0 ? e0 : (e0 + 1 + (int)((h >> 8) % (uint32_t)(E - 1))) % E;
    }
    case K1: return (int)(h % (uint32_t)E);
    case SKEWED: { /* expert E-1 in every token (slot 0, or slot 1 for t = 7 mod 8), else 4 x (some rank) */
        int other = 4 * (int)(h % (uint32_t)p), late = t % 8 == 7;
        return (s == 0) != late ? E - 1 : other;
    }
    default: return t % 4 == 3 ? p - 1 : 0; /* EMPTY */
    }
}

/* Element i of rank r's token t: element 0 names the token (100 (r+1) + t), the others small integers. */
static float token(int r, int t, int i) {
    return i == 0 ? (float)(100 * (r + 1) + t) : (float)(hash(r, t, i) % 17) - 8;
}
static float gate_of(int r, int t, int s) { return ldexpf(1.0f, -1 - (int)((hash(r, t, 7) + (uint32_t)s) % 3)); }

/* What the rows of a received row hold, in words: a token's row (by its element 0) or not. */
static void describe(const float *row, int c, int p, char *buf, size_t cap) {
    float v = row[0];
    int small = v == floorf(v) && fabsf(v) < 1e6f; /* an integer that can name a token (never NaN or huge) */
    int q = small ? (int)v / 100 - 1 : -1, t = small ? (int)v % 100 : -1;
    int is_token = q >= 0 && q < p && t < n_tokens(c, q);
    for (int i = 0; is_token && i < D; i++) is_token = row[i] == token(q, t, i);
    if (is_token) snprintf(buf, cap, "rank %d's token %d", q, t);
    else if (v == SENTINEL) snprintf(buf, cap, "nothing (never written)");
    else snprintf(buf, cap, "no token's row (element 0 is %g)", v);
}

/* One case on this rank: its tokens and routing, what it must receive (rows with their source,
 * token and expert), the experts' outputs of those rows, the serial layer's output. */
typedef struct {
    int c, p, me, E, El, k, T, nrow;
    float x[MAXT * D], gate[MAXT * MAXK], want_rows[MAXROWS * D], y[MAXROWS * D], want_out[MAXT * D];
    int expert[MAXT * MAXK], want_counts[MAXE], src[MAXROWS], tok[MAXROWS], exp_of[MAXROWS];
    size_t rows_to[MAXP]; /* rows this rank sends to each rank */
} moe_case;

static void build(moe_case *m, int c, int p, int me) {
    memset(m, 0, sizeof *m);
    m->c = c, m->p = p, m->me = me, m->E = n_experts(c, p), m->El = m->E / p, m->k = top_k(c), m->T = n_tokens(c, me);
    for (int t = 0; t < m->T; t++) {
        for (int i = 0; i < D; i++) m->x[t * D + i] = token(me, t, i);
        float *o = m->want_out + t * D;
        for (int s = 0; s < m->k; s++) {
            int e = route(c, p, me, t, s);
            m->expert[t * m->k + s] = e, m->gate[t * m->k + s] = gate_of(me, t, s), m->rows_to[e / m->El]++;
            for (int i = 0; i < D; i++) o[i] += m->gate[t * m->k + s] * ((float)(e + 1) * m->x[t * D + i]);
        }
    }
    for (int q = 0; q < p; q++) /* the canonical receive order: source, local expert, token */
        for (int j = 0; j < m->El; j++)
            for (int t = 0; t < n_tokens(c, q); t++)
                for (int s = 0; s < m->k; s++) {
                    int e = me * m->El + j;
                    if (route(c, p, q, t, s) != e) continue;
                    int n = m->nrow++;
                    m->src[n] = q, m->tok[n] = t, m->exp_of[n] = e, m->want_counts[q * m->El + j]++;
                    for (int i = 0; i < D; i++) {
                        m->want_rows[n * D + i] = token(q, t, i);
                        m->y[n * D + i] = (float)(e + 1) * token(q, t, i); /* the expert: x (id + 1) */
                    }
                }
}

static int first_bad_peer(const traced *tr, const size_t *want, int p) {
    for (int q = 0; q < p; q++)
        if (tr->to[q] != want[q]) return q;
    return -1;
}

/* Rank 0 prints every rank's dispatch bytes beside the formula (informational). */
static void show_bytes(grade *g, const char *what, const traced *tr, const size_t *want) {
    double mine[2] = {(double)tr->all, 0}, all[2 * MAXP];
    for (int q = 0; q < g->p; q++) mine[1] += (double)want[q];
    if (mdc_gather(mine, all, 2, MDC_F64, 0, g->rt.world) || g->me) return;
    printf("      %s, bytes sent per rank (measured / formula):", what);
    for (int q = 0; q < g->p; q++) printf(" r%d %.0f / %.0f", q, all[2 * q], all[2 * q + 1]);
    printf("\n");
}

/* The dispatch: its counts, its rows, its bytes. */
static void check_dispatch(grade *g, const moe_case *m) {
    static float recv[MAXROWS * D];
    int counts[MAXE], nrecv = -1, p = m->p, me = m->me, El = m->El;
    char name[120], why[200] = "", st_why[200] = "", what[80];
    for (int i = 0; i < MAXROWS * D; i++) recv[i] = SENTINEL;
    for (int i = 0; i < MAXE; i++) counts[i] = -1;

    traced tr = {0};
    mdc_transport_set_trace(g->rt.tr, on_message, &tr);
    mdc_status st = lab_moe_dispatch(recv, counts, &nrecv, MAXROWS, m->x, m->expert, m->T, D, m->k, m->E, g->rt.world);
    mdc_transport_set_trace(g->rt.tr, NULL, NULL);
    if (st) grade_status_text(st, st_why, sizeof st_why);

    /* the counts per (source, local expert) */
    int ok = !st;
    for (int i = 0; ok && i < p * El; i++)
        if (counts[i] != m->want_counts[i])
            ok = 0, snprintf(why, sizeof why, "recv_counts[%d] (rank %d's rows for expert %d) is %d, expected %d", i,
                             i / El, me * El + i % El, counts[i], m->want_counts[i]);
    snprintf(name, sizeof name, "[%s] dispatch: the counts per (source rank, expert)", case_name[m->c]);
    grade_check(g, name, ok, "%s", st ? st_why : why);

    /* the rows, in the canonical order */
    ok = !st;
    for (int n = 0; ok && n < m->nrow && n < MAXROWS; n++)
        if (memcmp(recv + n * D, m->want_rows + n * D, sizeof(float) * D)) {
            describe(recv + n * D, m->c, p, what, sizeof what);
            ok = 0, snprintf(why, sizeof why, "row %d should be rank %d's token %d for expert %d; it holds %s", n,
                             m->src[n], m->tok[n], m->exp_of[n], what);
        }
    if (ok && nrecv != m->nrow)
        ok = 0,
        snprintf(why, sizeof why, "*nrecv is %d, expected %d rows (the rows themselves are right)", nrecv, m->nrow);
    int range[2] = {m->nrow, -m->nrow}, lo_hi[2] = {m->nrow, -m->nrow}; /* the rows a rank gets, fewest and most */
    mdc_allreduce(range, lo_hi, 2, MDC_I32, MDC_MIN, g->rt.world);
    char rows[24];
    snprintf(rows, sizeof rows, lo_hi[0] == -lo_hi[1] ? "%d" : "%d to %d", lo_hi[0], -lo_hi[1]);
    snprintf(name, sizeof name, "[%s] dispatch: every row (%s a rank) by source, expert, token", case_name[m->c], rows);
    grade_check(g, name, ok, "%s", st ? st_why : why);

    /* the dispatch's bytes to each rank: El counts + its rows */
    size_t want[MAXP];
    for (int q = 0; q < p; q++) want[q] = q == me ? 0 : (size_t)El * 4 + m->rows_to[q] * D * 4;
    int bad = first_bad_peer(&tr, want, p);
    snprintf(name, sizeof name, "[%s] dispatch bytes to each rank = El x 4 (counts) + its rows x d x 4",
             case_name[m->c]);
    if (bad >= 0)
        snprintf(why, sizeof why,
                 "sent %zu bytes to rank %d, expected %d counts x 4 + %zu rows x %d x 4 = %zu (%zu in all)", tr.to[bad],
                 bad, El, m->rows_to[bad], D, want[bad], tr.all);
    grade_check(g, name, !st && bad < 0, "%s%s%s", bad >= 0 ? why : "", st && bad >= 0 ? "; " : "", st ? st_why : "");
    if (p == 4 && m->c == SKEWED) show_bytes(g, "skewed dispatch", &tr, want);
}

/* The combine, on the experts' outputs of the right rows: its output, its bytes. */
static void check_combine(grade *g, const moe_case *m) {
    static float out[MAXT * D];
    int p = m->p, me = m->me, El = m->El, ok;
    char name[120], why[200] = "", st_why[200] = "";
    size_t want[MAXP];
    traced tr = {0};
    for (int i = 0; i < MAXT * D; i++) out[i] = SENTINEL;
    mdc_transport_set_trace(g->rt.tr, on_message, &tr);
    mdc_status st = lab_moe_combine(out, m->y, m->want_counts, m->gate, m->expert, m->T, D, m->k, m->E, g->rt.world);
    mdc_transport_set_trace(g->rt.tr, NULL, NULL);
    if (st) grade_status_text(st, st_why, sizeof st_why);
    ok = !st;
    for (int t = 0; ok && t < m->T; t++)
        for (int i = 0; ok && i < D; i++)
            if (memcmp(&out[t * D + i], &m->want_out[t * D + i], sizeof(float))) {
                int len = snprintf(why, sizeof why, "token %d element %d is %.9g, expected %.9g = its %g x", t, i,
                                   out[t * D + i], m->want_out[t * D + i], m->x[t * D + i]);
                for (int s = 0; s < m->k && len > 0 && len < (int)sizeof why; s++)
                    len += snprintf(why + len, sizeof why - len, "%s%d x %g (expert %d, slot %d)", s ? " + " : " (",
                                    m->expert[t * m->k + s] + 1, m->gate[t * m->k + s], m->expert[t * m->k + s], s);
                if (len > 0 && len < (int)sizeof why - 1) strcat(why, ")");
                ok = 0;
            }
    snprintf(name, sizeof name, "[%s] combine: the serial MoE output bit for bit", case_name[m->c]);
    grade_check(g, name, ok, "%s", st ? st_why : why);

    for (int q = 0; q < p; q++) {
        want[q] = 0;
        for (int j = 0; q != me && j < El; j++) want[q] += (size_t)m->want_counts[q * El + j] * D * 4;
    }
    int bad = first_bad_peer(&tr, want, p);
    snprintf(name, sizeof name, "[%s] combine bytes to each rank = the rows it sent you x d x 4", case_name[m->c]);
    if (bad >= 0)
        snprintf(why, sizeof why, "sent %zu bytes to rank %d, expected %zu rows x %d x 4 = %zu (%zu in all)",
                 tr.to[bad], bad, want[bad] / (D * 4), D, want[bad], tr.all);
    grade_check(g, name, !st && bad < 0, "%s%s%s", bad >= 0 ? why : "", st && bad >= 0 ? "; " : "", st ? st_why : "");
}

int main(int argc, char **argv) {
    grade g;
    mdc_status st = grade_begin(&g, &argc, &argv, 10);
    if (st) {
        fprintf(stderr, "lab 7 grader: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    if (g.p > MAXP || (st = mdc_coll_set_algo(MDC_COLL_ALLTOALL, "pairwise"))) {
        fprintf(stderr, "lab 7 grader: %s\n", st ? mdc_detail() : "at most 8 ranks");
        return 2;
    }
    static moe_case m;
    for (int c = 0; c < NCASES; c++) {
        build(&m, c, g.p, g.me);
        check_dispatch(&g, &m);
        check_combine(&g, &m);
    }
    return grade_end(&g);
}
