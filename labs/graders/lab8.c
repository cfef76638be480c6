/* Grader of lab 8 (labs/lab8_ring_attention.c): the student's ring attention forward, one head,
 * contiguous layout (rank r holds tokens [r T/p, (r+1) T/p)). It provides lab_attend_block (a
 * block's softmax in floats, recording which blocks each rank attended) and computes serial
 * causal attention in doubles from the same float inputs. Checks, at the world's p ranks:
 *   - T = 24, d = 16: every output row and every row's lse against serial, within float
 *     rounding's bound (below); a dropped block or a wrong merge is off by about |v|;
 *   - rank r attended the KV blocks of ranks 0..r once each, none of a later rank (causal), each
 *     call's kv holding the k and v rows of the block its k0 names;
 *   - the plain ring's cost (traced): p-1 messages and (p-1) 2 (T/p) d floats sent per rank;
 *   - T = p, d = 5 (one token a rank), and scores in the hundreds (exp of them overflows a
 *     float: the merge must subtract the running maximum): out and lse against serial.
 * The bound of row t: with u = 2^-24, A = max_j sum_x |q_tx k_jx| / sqrt(d) (the scores' and their
 * dot products' scale), lse the serial lse, V = max |v_jx| over the keys j <= t,
 *   |lse - serial| <= B,  |out - serial| <= B V,  B = u (4 (d+3) A + 4 T + 12 p (|lse| + A + 2) + 16):
 * about twice the first-order rounding of the scores (d terms and a scale), of each block's
 * exp and sums (Tl terms) and of p merges' exp and log; the output is a convex combination of
 * the rows of v, so its errors scale with V. The reference solution stays under 2% of B; a
 * dropped block or an unscaled merge is off by 10^3 to 10^5 B. At p = 4 it prints the blocks each rank attended,
 * in order, and its (query, key) pairs: the contiguous layout's causal imbalance.
 * Ranks: 1 2 3 4 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"

void lab_attend_block(const float *q, int q0, const float *kv, int k0, int Tl, int d, float *ob, float *lb);
mdc_status lab_ring_attention(const float *q, const float *kv, float *out, float *lse, int Tl, int d, mdc_group *g);

enum { MAXP = 64, MAXT = 64, MAXD = 16 };

/* Inputs of token t: floats with 24 significant bits in [-scale, scale). */
static float input(int which, int t, int x, float scale) {
    uint64_t z = (uint64_t)which * 0x9E3779B97F4A7C15ull + (uint64_t)t * 0xBF58476D1CE4E5B9ull + (uint64_t)x * 131 + 7;
    z ^= z >> 31, z *= 0x94D049BB133111EBull, z ^= z >> 29;
    return ((float)(z & 0xFFFFFF) / (float)0x800000 - 1.0f) * scale;
}

/* What lab_attend_block saw during one call of the student's function. */
static struct {
    int p, Tl;
    int count[MAXP]; /* attends of rank src's block */
    int order[MAXP], n, stray;
    int wrong_call, wrong_src, wrong_holds; /* the first call whose kv is not block k0's (call 0: none) */
    double pairs;                           /* visible (query, key) pairs */
} seen;
static double ring_seen[2 + MAXP]; /* the T = 24 run: pairs (-1: the call failed), blocks, their order */

/* The rank whose k and v rows kv holds, or -1. */
static int kv_owner(const float *kv, int Tl, int d) {
    for (int src = 0; src < seen.p; src++) {
        int same = 1;
        for (int j = 0; same && j < Tl; j++)
            for (int x = 0; same && x < d; x++)
                same = kv[j * d + x] == input(1, src * Tl + j, x, 1) &&
                       kv[(Tl + j) * d + x] == input(2, src * Tl + j, x, 1);
        if (same) return src;
    }
    return -1;
}

void lab_attend_block(const float *q, int q0, const float *kv, int k0, int Tl, int d, float *ob, float *lb) {
    int src = Tl > 0 && k0 % Tl == 0 ? k0 / Tl : -1;
    if (src >= 0 && src < seen.p && Tl == seen.Tl) {
        seen.count[src]++;
        if (seen.n < MAXP) seen.order[seen.n++] = src;
        int holds = kv_owner(kv, Tl, d);
        if (holds != src && !seen.wrong_call) seen.wrong_call = seen.n, seen.wrong_src = src, seen.wrong_holds = holds;
    } else {
        seen.stray++;
    }
    const float *k = kv, *v = kv + (size_t)Tl * d;
    float scale = 1.0f / sqrtf((float)d), s[MAXT];
    for (int i = 0; i < Tl; i++) {
        float m = -INFINITY, l = 0, *o = ob + (size_t)i * d;
        int vis = 0; /* keys k0 .. q0 + i */
        for (int j = 0; j < Tl && j < MAXT && k0 + j <= q0 + i; j++, vis++) {
            float dot = 0;
            for (int x = 0; x < d; x++) dot += q[(size_t)i * d + x] * k[(size_t)j * d + x];
            s[j] = dot * scale, m = fmaxf(m, s[j]);
        }
        seen.pairs += vis;
        for (int x = 0; x < d; x++) o[x] = 0;
        for (int j = 0; j < vis; j++) {
            float e = expf(s[j] - m);
            l += e;
            for (int x = 0; x < d; x++) o[x] += e * v[(size_t)j * d + x];
        }
        for (int x = 0; vis && x < d; x++) o[x] /= l;
        lb[i] = vis ? m + logf(l) : -INFINITY;
    }
}

typedef struct {
    int T, d;
    float qscale;
} shape;

/* Serial causal attention of token t in doubles: o (d), its lse, and its bound B and scale V. */
static void serial_row(shape sh, int p, int t, double *o, double *lse, double *B, double *V) {
    int d = sh.d;
    double s[MAXT], m = -INFINITY, A = 0, l = 0;
    *V = 0;
    for (int j = 0; j <= t; j++) {
        double dot = 0, a = 0;
        for (int x = 0; x < d; x++) {
            double qk = (double)input(0, t, x, sh.qscale) * input(1, j, x, 1);
            dot += qk, a += fabs(qk), *V = fmax(*V, fabs(input(2, j, x, 1)));
        }
        s[j] = dot / sqrt(d), m = fmax(m, s[j]), A = fmax(A, a / sqrt(d));
    }
    for (int x = 0; x < d; x++) o[x] = 0;
    for (int j = 0; j <= t; j++) {
        double e = exp(s[j] - m);
        l += e;
        for (int x = 0; x < d; x++) o[x] += e * input(2, j, x, 1);
    }
    for (int x = 0; x < d; x++) o[x] /= l;
    *lse = m + log(l);
    *B = ldexp(4.0 * (d + 3) * A + 4.0 * sh.T + 12.0 * p * (fabs(*lse) + A + 2) + 16, -24);
}

/* Runs the student's function on this rank's rows of shape sh; out and lse start as NaN. */
static mdc_status run(grade *g, shape sh, float *out, float *lse, grade_traffic *tr) {
    int Tl = sh.T / g->p, d = sh.d, t0 = g->me * Tl;
    float q[MAXT * MAXD], kv[2 * MAXT * MAXD];
    for (int i = 0; i < Tl; i++)
        for (int x = 0; x < d; x++) {
            q[i * d + x] = input(0, t0 + i, x, sh.qscale);
            kv[i * d + x] = input(1, t0 + i, x, 1), kv[(Tl + i) * d + x] = input(2, t0 + i, x, 1);
        }
    for (int i = 0; i < Tl * d; i++) out[i] = NAN;
    for (int i = 0; i < Tl; i++) lse[i] = NAN;
    memset(&seen, 0, sizeof seen);
    seen.p = g->p, seen.Tl = Tl;
    if (tr) grade_traffic_begin(g, tr);
    mdc_status st = lab_ring_attention(q, kv, out, lse, Tl, d, g->rt.world);
    if (tr) grade_traffic_end(g);
    return st;
}

/* ok when this rank's rows match serial (what: 1 out, 2 lse, 3 both); why names the first
 * wrong row by its token. */
static int compare(grade *g, shape sh, const float *out, const float *lse, int what, char *why, size_t cap) {
    int Tl = sh.T / g->p, d = sh.d;
    for (int i = 0; i < Tl; i++) {
        int t = g->me * Tl + i;
        double o[MAXD], l, B, V;
        serial_row(sh, g->p, t, o, &l, &B, &V);
        for (int x = 0; (what & 1) && x < d; x++) {
            double diff = fabs(out[i * d + x] - o[x]);
            if (!(diff <= B * V)) {
                snprintf(why, cap,
                         "token %d (rank %d's row %d): out[%d][%d] = %.9g, serial %.9g (off by %.3g, bound %.3g)", t,
                         g->me, i, t, x, out[i * d + x], o[x], diff, B * V);
                return 0;
            }
        }
        double diff = fabs(lse[i] - l);
        if ((what & 2) && !(diff <= B)) {
            snprintf(why, cap, "token %d (rank %d's row %d): lse = %.9g, serial %.9g (off by %.3g, bound %.3g)", t,
                     g->me, i, lse[i], l, diff, B);
            return 0;
        }
    }
    return 1;
}

/* out and lse of one shape in one check (the small and the large-score cases) */
static void check_shape(grade *g, const char *name, shape sh) {
    float out[MAXT * MAXD], lse[MAXT];
    char why[200] = "";
    mdc_status st = run(g, sh, out, lse, NULL);
    int ok = st ? (grade_status_text(st, why, sizeof why), 0) : compare(g, sh, out, lse, 3, why, sizeof why);
    grade_check(g, name, ok, "%s", why);
}

/* the blocks rank r attended: those of ranks 0..r, once each */
static int blocks_ok(grade *g, int Tl, char *why, size_t cap) {
    if (seen.stray) {
        snprintf(why, cap, "%d call(s) of lab_attend_block name no KV block (k0 = src * Tl, Tl = %d)", seen.stray, Tl);
        return 0;
    }
    if (seen.wrong_call && seen.wrong_holds < 0)
        snprintf(why, cap,
                 "call %d of lab_attend_block: the block passed as rank %d's (k0 = %d) is no rank's k and v rows",
                 seen.wrong_call, seen.wrong_src, seen.wrong_src * Tl);
    else if (seen.wrong_call)
        snprintf(why, cap,
                 "call %d of lab_attend_block: the block passed as rank %d's (k0 = %d) holds rank %d's k and v",
                 seen.wrong_call, seen.wrong_src, seen.wrong_src * Tl, seen.wrong_holds);
    if (seen.wrong_call) return 0;
    for (int src = 0; src < g->p; src++) {
        int want = src <= g->me;
        if (seen.count[src] == want) continue;
        if (want)
            snprintf(why, cap, "attended rank %d's KV block (tokens %d..%d) %d times; its rows need it once", src,
                     src * Tl, src * Tl + Tl - 1, seen.count[src]);
        else
            snprintf(why, cap, "attended rank %d's KV block (tokens %d..%d), all after this rank's rows (causal: skip)",
                     src, src * Tl, src * Tl + Tl - 1);
        return 0;
    }
    return 1;
}

static void check_ring(grade *g) {
    shape sh = {24, 16, 2};
    int p = g->p, Tl = sh.T / p;
    float out[MAXT * MAXD], lse[MAXT];
    grade_traffic tr = {0};
    char why[200] = "", call[200] = "", name[120];
    mdc_status st = run(g, sh, out, lse, &tr);
    if (st) grade_status_text(st, call, sizeof call);
    int ok = !st && compare(g, sh, out, lse, 1, why, sizeof why);
    grade_check(g, "T=24, d=16: every output row = serial causal attention, within float rounding", ok, "%s",
                st ? call : why);
    ok = !st && compare(g, sh, out, lse, 2, why, sizeof why);
    grade_check(g, "T=24, d=16: every row's lse = serial's, within float rounding", ok, "%s", st ? call : why);
    ok = !st && blocks_ok(g, Tl, why, sizeof why);
    grade_check(g, "rank r attends the KV blocks of ranks 0..r once each (causal), each at its k0", ok, "%s",
                st ? call : why);
    grade_check(g, "KV messages sent per rank = p-1 (the plain ring)", !st && tr.sends == (size_t)(p - 1),
                "sent %zu messages, the ring sends p-1 = %d%s%s", tr.sends, p - 1, st ? "; the call " : "", call);
    size_t want = (size_t)(p - 1) * 2 * Tl * sh.d * sizeof(float);
    snprintf(name, sizeof name, "bytes sent per rank = (p-1) x 2 (T/p) d floats = %zu", want);
    grade_check(g, name, !st && tr.bytes == want, "sent %zu bytes, (p-1) KV blocks of 2 x %d x %d floats = %zu%s%s",
                tr.bytes, Tl, sh.d, want, st ? "; the call " : "", call);
    ring_seen[0] = st ? -1 : seen.pairs, ring_seen[1] = seen.n;
    for (int i = 0; i < seen.n; i++) ring_seen[2 + i] = seen.order[i];
}

/* The blocks each rank attended in the T = 24 run, in order, and its (query, key) pairs beside
 * the contiguous layout's formula (informational, at p = 4). */
static void show_imbalance(grade *g) {
    int p = g->p, L = 24 / p;
    double all[4 * (2 + MAXP)];
    if (mdc_gather(ring_seen, all, 2 + MAXP, MDC_F64, 0, g->rt.world) || g->me) return;
    double sum = 0, mx = 0;
    for (int r = 0; r < p; r++) {
        if (all[r * (2 + MAXP)] < 0) {
            printf("      (the blocks each rank attended: the call failed on rank %d)\n", r);
            return;
        }
        sum += all[r * (2 + MAXP)], mx = fmax(mx, all[r * (2 + MAXP)]);
    }
    printf("      the blocks each rank attended at T=24, in order, and its (query, key) pairs (L = T/p = %d):\n", L);
    for (int r = 0; r < p; r++) {
        const double *a = all + r * (2 + MAXP);
        char blocks[64] = "";
        for (int i = 0; i < (int)a[1] && i < 8; i++)
            snprintf(blocks + strlen(blocks), sizeof blocks - strlen(blocks), " %d", (int)a[2 + i]);
        printf("        rank %d: blocks%-12s pairs %4.0f (formula L rL + L(L+1)/2 = %d)\n", r, blocks, a[0],
               L * r * L + L * (L + 1) / 2);
    }
    printf("        max/mean %.3f (the contiguous layout's causal imbalance; (2p-1)/p = %.3f as blocks grow)\n",
           sum > 0 ? mx / (sum / p) : 0, (2.0 * p - 1) / p);
}

int main(int argc, char **argv) {
    grade g;
    mdc_status st = grade_begin(&g, &argc, &argv, 20);
    if (st) {
        fprintf(stderr, "lab 8 grader: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    if (24 % g.p) { /* T = 24 splits evenly */
        fprintf(stderr, "lab 8 grader: the rank count must divide 24 (1, 2, 3, 4, 6, 8, ...)\n");
        return 2;
    }
    check_ring(&g);
    check_shape(&g, "T=p, d=5 (one token a rank): out and lse = serial's", (shape){g.p, 5, 1});
    /* scores in the hundreds: the largest serial lse, to name it */
    shape big = {24, 16, 300};
    double o[MAXD], l, B, V, top = -INFINITY;
    for (int t = 0; t < big.T; t++) serial_row(big, g.p, t, o, &l, &B, &V), top = fmax(top, l);
    char name[120];
    snprintf(name, sizeof name, "scores in the hundreds (lse up to %.0f, exp(88.8) = inf in a float): out and lse",
             top);
    check_shape(&g, name, big);
    if (g.p == 4) show_imbalance(&g);
    return grade_end(&g);
}
