/* Grader of lab 5 (labs/lab5_sequence_parallel.c): the student's sequence-parallel all-gather and
 * reduce-scatter along T, rank r holding positions [r T/p, (r+1) T/p) of every batch row. The
 * whole tensors are generated on every rank, so the expected results are read off them here:
 *   - integers, B = 1 and B = 3: every value names its position (X at flat index i is i + 1;
 *     rank q's partial sum there is i + 1 + 2^17 q, so the sum is exact in any order and tells
 *     which position it came from): full on every rank and each rank's local bit for bit, the
 *     first wrong (b, t, c) named with whose position it is and what it holds instead;
 *   - random floats, B = 2: the all-gather bit for bit (it only moves data), the reduce-scatter
 *     within p roundings of the exact sum, p 2^-24 x the sum of |terms|;
 *   - the bytes each function sends per rank (traced): (p-1)/p x B T C x 4, the two together
 *     2(p-1)/p x B T C x 4, one ring all-reduce's;
 *   - scratch (glibc builds without ASan): the peak of the heap each function allocated and had
 *     not freed during its call is at most one full (B, T, C) buffer, B T C x 4 bytes, plus what
 *     minidc's own collective of that size allocates (measured here first, with its scratch cache
 *     warm). malloc, calloc, realloc and the aligned allocations called from the program's code
 *     (the student's file and minidc) are counted; the MPI library's (its buffering of early
 *     messages, which depends on timing) and the stack are not.
 * Ranks: 1 2 3 4 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"

mdc_status lab_sp_allgather(float *full, const float *local, int B, int T, int C, mdc_group *g);
mdc_status lab_sp_reduce_scatter(float *local, const float *partial_full, int B, int T, int C, mdc_group *g);

#define SENTINEL (-12345.0f) /* what an output holds before the call: an element never written shows it */
#define M 131072.0           /* 2^17 > any B T C here: rank q's partial at i is i + 1 + M q */

/* ---- the heap a call allocates: malloc and friends forwarded to glibc's, counted in a window ---- */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(ASAN)
#define HEAP_COUNTED 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
enum { LIVE = 512 };
static struct {
    pthread_mutex_t lock;
    int on;
    size_t now, peak, n;
    void *p[LIVE];
    size_t bytes[LIVE];
} heap = {.lock = PTHREAD_MUTEX_INITIALIZER};

extern const char __executable_start[], etext[]; /* the program's code: the student's and minidc's */
static void *counted(void *p, size_t bytes, const void *caller) {
    const char *c = caller;
    if (!p || !__atomic_load_n(&heap.on, __ATOMIC_ACQUIRE) || c < __executable_start || c >= etext) return p;
    pthread_mutex_lock(&heap.lock);
    heap.now += bytes;
    if (heap.now > heap.peak) heap.peak = heap.now;
    if (heap.n < LIVE) heap.p[heap.n] = p, heap.bytes[heap.n++] = bytes; /* else never given back: counts high */
    pthread_mutex_unlock(&heap.lock);
    return p;
}
static void uncounted(void *p) {
    if (!p || !__atomic_load_n(&heap.on, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&heap.lock);
    for (size_t i = 0; i < heap.n; i++)
        if (heap.p[i] == p) {
            heap.now -= heap.bytes[i];
            heap.p[i] = heap.p[--heap.n], heap.bytes[i] = heap.bytes[heap.n];
            break;
        }
    pthread_mutex_unlock(&heap.lock);
}
#define CALLER __builtin_return_address(0)
void *malloc(size_t n) { return counted(__libc_malloc(n), n, CALLER); }
void *calloc(size_t k, size_t n) { return counted(__libc_calloc(k, n), k * n, CALLER); }
void *aligned_alloc(size_t a, size_t n) { return counted(__libc_memalign(a, n), n, CALLER); }
void *memalign(size_t a, size_t n) { return counted(__libc_memalign(a, n), n, CALLER); }
int posix_memalign(void **out, size_t a, size_t n) {
    *out = counted(__libc_memalign(a, n), n, CALLER);
    return *out || !n ? 0 : 12; /* ENOMEM */
}
void *realloc(void *p, size_t n) {
    uncounted(p);
    return counted(__libc_realloc(p, n), n, CALLER);
}
void free(void *p) {
    uncounted(p);
    __libc_free(p);
}
static void heap_window(int on) {
    pthread_mutex_lock(&heap.lock);
    if (on) heap.now = heap.peak = heap.n = 0;
    __atomic_store_n(&heap.on, on, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&heap.lock);
}
#else
#define HEAP_COUNTED 0
#endif

/* One case: X (B, T, C) and every rank's partial sums P_q, whole on every rank; the sum S in
 * doubles with the sum of |terms|; this rank's local X and the student's outputs. */
typedef struct {
    int B, T, C, Tl, n, rnd;
    float *X, *P, *x, *full, *loc, *mine; /* P: p tensors; mine: a copy of this rank's P, to see it untouched */
    double *S, *A;
    char why_ag[200], why_rs[200];
    grade_traffic ag, rs;
} sp_case;

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* a float of 24 bits within 2^-4..2^4, either sign: p of them sum exactly in a double */
static float rnd_value(int which, size_t i) {
    uint64_t z = mix((uint64_t)which * 0x9E3779B97F4A7C15ull + i + 1);
    return ldexpf((float)(z & 0xFFFFFF) / (float)0x1000000 - 0.5f, (int)((z >> 24) % 9) - 4);
}

static int setup(sp_case *K, grade *g, int B, int Tper, int C, int rnd) {
    memset(K, 0, sizeof *K);
    K->B = B, K->T = Tper * g->p, K->C = C, K->Tl = Tper, K->n = B * K->T * C, K->rnd = rnd;
    size_t n = (size_t)K->n, nl = n / (size_t)g->p;
    K->X = malloc(n * sizeof(float)), K->P = malloc(n * (size_t)g->p * sizeof(float));
    K->x = malloc(nl * sizeof(float)), K->full = malloc(n * sizeof(float)), K->loc = malloc(nl * sizeof(float));
    K->mine = malloc(n * sizeof(float)), K->S = malloc(n * sizeof(double)), K->A = malloc(n * sizeof(double));
    if (!K->X || !K->P || !K->x || !K->full || !K->loc || !K->mine || !K->S || !K->A) return 0;
    for (size_t i = 0; i < n; i++) {
        K->X[i] = rnd ? rnd_value(1, i) : (float)(i + 1);
        K->S[i] = K->A[i] = 0;
        for (int q = 0; q < g->p; q++) {
            float v = rnd ? rnd_value(2 + q, i) : (float)((double)(i + 1) + M * q);
            K->P[(size_t)q * n + i] = v, K->S[i] += v, K->A[i] += fabs(v);
        }
    }
    for (int b = 0; b < B; b++) /* this rank's positions of every batch row */
        memcpy(K->x + (size_t)b * Tper * C, K->X + ((size_t)b * K->T + (size_t)g->me * Tper) * C,
               sizeof(float) * (size_t)Tper * C);
    memcpy(K->mine, K->P + (size_t)g->me * n, n * sizeof(float));
    return 1;
}

static void release(sp_case *K) {
    free(K->X), free(K->P), free(K->x), free(K->full), free(K->loc), free(K->mine), free(K->S), free(K->A);
}

/* Runs the student's two functions, traced, on outputs that hold SENTINEL. */
static void run(sp_case *K, grade *g) {
    size_t n = (size_t)K->n, nl = n / (size_t)g->p;
    for (size_t i = 0; i < n; i++) K->full[i] = SENTINEL;
    for (size_t i = 0; i < nl; i++) K->loc[i] = SENTINEL;
    grade_traffic_begin(g, &K->ag);
    mdc_status st = lab_sp_allgather(K->full, K->x, K->B, K->T, K->C, g->rt.world);
    grade_traffic_end(g);
    if (st) grade_status_text(st, K->why_ag, sizeof K->why_ag);
    grade_traffic_begin(g, &K->rs);
    st = lab_sp_reduce_scatter(K->loc, K->P + (size_t)g->me * n, K->B, K->T, K->C, g->rt.world);
    grade_traffic_end(g);
    if (st) grade_status_text(st, K->why_rs, sizeof K->why_rs);
}

/* "(b=1, t=5, c=2), rank 2's" for flat index i of (B, T, C) */
static const char *pos(const sp_case *K, long i, char *buf, size_t cap) {
    int t = (int)(i / K->C % K->T);
    snprintf(buf, cap, "(b=%ld, t=%d, c=%ld), rank %d's", i / ((long)K->T * K->C), t, i % K->C, t / K->Tl);
    return buf;
}

static void check_allgather(sp_case *K, grade *g) {
    char name[160], why[400] = "", at[96], at2[96];
    snprintf(name, sizeof name, "%s B=%d T=%d C=%d: all-gather: every rank's full (B, T, C) is X, bit for bit",
             K->rnd ? "random floats," : "integers,", K->B, K->T, K->C);
    long bad = -1;
    for (long i = 0; !K->why_ag[0] && i < K->n && bad < 0; i++)
        if (memcmp(&K->full[i], &K->X[i], sizeof(float))) bad = i;
    if (bad >= 0) {
        float v = K->full[bad];
        char from[200] = "";
        if (v == SENTINEL) snprintf(from, sizeof from, " (never written)");
        else if (!K->rnd && v >= 1 && v <= K->n && v == floorf(v))
            snprintf(from, sizeof from, ": X at %s%s", pos(K, (long)v - 1, at2, sizeof at2),
                     K->B > 1 ? " (the collective's blocks are rank-major [p][B][T/p][C]: unpack them)" : "");
        snprintf(why, sizeof why, "full at %s is %.9g, expected %.9g%s", pos(K, bad, at, sizeof at), v, K->X[bad],
                 from);
    }
    grade_check(g, name, !K->why_ag[0] && bad < 0, "%s", K->why_ag[0] ? K->why_ag : why);
}

static void check_reduce_scatter(sp_case *K, grade *g) {
    char name[200], why[400] = "", at[96], from[200] = "";
    int p = g->p, Tl = K->Tl, C = K->C;
    snprintf(name, sizeof name,
             "%s B=%d T=%d C=%d: reduce-scatter: rank r's (B, T/p, C) is the sum over ranks of its "
             "positions, %s",
             K->rnd ? "random floats," : "integers,", K->B, K->T, C,
             K->rnd ? "within p roundings of the exact sum" : "bit for bit");
    long bad = -1, flat = 0;
    for (long k = 0; !K->why_rs[0] && k < K->n / p && bad < 0; k++) {
        long b = k / ((long)Tl * C), tl = k / C % Tl, c = k % C;
        flat = (b * K->T + (long)g->me * Tl + tl) * C + c;
        double got = K->loc[k], want = K->S[flat];
        if (K->rnd ? !(fabs(got - want) <= p * ldexp(K->A[flat], -24)) : got != want) bad = k;
    }
    if (bad >= 0) {
        double v = K->loc[bad], j = (v - M * p * (p - 1) / 2) / p - 1, own = v - 1 - M * g->me;
        if (v == SENTINEL) snprintf(from, sizeof from, " (never written)");
        else if (!K->rnd && j >= 0 && j < K->n && j == floor(j))
            snprintf(from, sizeof from, ": the sum at %s%s", pos(K, (long)j, at, sizeof at),
                     K->B > 1 ? " (pack the B slabs rank-major first)" : "");
        else if (!K->rnd && p > 1 && own >= 0 && own < K->n && own == floor(own))
            snprintf(from, sizeof from, ": this rank's own partial at %s (no sum?)", pos(K, (long)own, at, sizeof at));
        snprintf(why, sizeof why, "local[b=%ld, t=%ld, c=%ld] = position %s is %.9g, expected %.9g%s",
                 bad / ((long)Tl * C), bad / C % Tl, bad % C, pos(K, flat, at, sizeof at), v, K->S[flat], from);
    } else if (!K->why_rs[0] && memcmp(K->mine, K->P + (size_t)g->me * K->n, sizeof(float) * (size_t)K->n)) {
        snprintf(why, sizeof why, "partial_full was changed: it is const (a scratch buffer holds the packed copy)");
        bad = 0;
    }
    grade_check(g, name, !K->why_rs[0] && bad < 0, "%s", K->why_rs[0] ? K->why_rs : why);
}

/* (p-1)/p B T C x 4 bytes sent per rank by each function, traced */
static void check_bytes(sp_case *K, grade *g, int rs) {
    const grade_traffic *t = rs ? &K->rs : &K->ag;
    const char *fail = rs ? K->why_rs : K->why_ag;
    size_t want = (size_t)(g->p - 1) * (size_t)(K->n / g->p) * 4;
    char name[240];
    snprintf(name, sizeof name, "B=%d T=%d C=%d: %s sends (p-1)/p x B T C x 4 = %zu bytes per rank%s", K->B, K->T, K->C,
             rs ? "reduce-scatter" : "all-gather", want,
             rs ? " (with the all-gather's, 2(p-1)/p B T C x 4: one all-reduce's)" : "");
    const char *hint = g->p > 1 && t->bytes == 2 * want                        ? " (an all-reduce's bytes)"
                       : g->p > 1 && t->bytes == (size_t)(g->p - 1) * K->n * 4 ? " (the whole buffer to every rank)"
                       : g->p > 1 && !t->bytes ? " (no message: who gets the others' data?)"
                                               : "";
    if (fail[0]) grade_check(g, name, 0, "%s", fail);
    else grade_check(g, name, t->bytes == want, "it sent %zu messages, %zu bytes%s", t->sends, t->bytes, hint);
}

#if HEAP_COUNTED
/* The peak heap of one call of the student's function (rs: the reduce-scatter), against one full
 * buffer plus what minidc's collective of the same size allocates itself, its cache warmed. */
static void check_scratch(sp_case *K, grade *g, int rs) {
    size_t n = (size_t)K->n, nl = n / (size_t)g->p, lib = 0, got;
    char name[200], why[200] = "";
    mdc_status st = MDC_OK;
    for (int pass = 0; pass < 2 && !st; pass++) {
        heap_window(1);
        st = rs ? mdc_reduce_scatter(K->mine, K->loc, nl, MDC_F32, MDC_SUM, g->rt.world)
                : mdc_allgather(K->x, K->full, nl, MDC_F32, g->rt.world);
        heap_window(0);
        lib = heap.peak;
    }
    heap_window(1);
    if (!st)
        st = rs ? lab_sp_reduce_scatter(K->loc, K->mine, K->B, K->T, K->C, g->rt.world)
                : lab_sp_allgather(K->full, K->x, K->B, K->T, K->C, g->rt.world);
    heap_window(0);
    got = heap.peak;
    size_t limit = n * 4 + lib + 256; /* 256: a few more requests or offsets than the collective's */
    snprintf(name, sizeof name, "B=%d T=%d C=%d: %s allocates at most one full (B, T, C) buffer of scratch, %zu bytes",
             K->B, K->T, K->C, rs ? "reduce-scatter" : "all-gather", n * 4);
    if (st) grade_status_text(st, why, sizeof why);
    else
        snprintf(why, sizeof why,
                 "its heap peaked at %zu bytes, %.2f full buffers (limit %zu = one + %zu, minidc's own %s)", got,
                 (double)got / (double)(n * 4), limit, lib, rs ? "mdc_reduce_scatter" : "mdc_allgather");
    grade_check(g, name, !st && got <= limit, "%s", why);
}
#endif

int main(int argc, char **argv) {
    grade g;
    mdc_status st = grade_begin(&g, &argc, &argv, 20);
    if (st) {
        fprintf(stderr, "lab 5 grader: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    mdc_coll_prefer_ring(); /* as minidc train --sp: the ring, whose bytes are the formula's */
    if (g.p > 8) {
        grade_check(&g, "the grade runs at 1 to 8 ranks", 0, "this run has %d", g.p);
        return grade_end(&g);
    }
    static const int cases[3][5] = {{1, 3, 6, 0, 1}, {3, 2, 5, 0, 1}, {2, 3, 7, 1, 0}}; /* B, T/p, C, rnd, bytes */
    sp_case K;
    for (int c = 0; c < 3; c++) {
        if (!setup(&K, &g, cases[c][0], cases[c][1], cases[c][2], cases[c][3])) {
            grade_check(&g, "the grader's buffers", 0, "out of memory");
            return grade_end(&g);
        }
        run(&K, &g);
        check_allgather(&K, &g);
        if (cases[c][4]) check_bytes(&K, &g, 0);
        check_reduce_scatter(&K, &g);
        if (cases[c][4]) check_bytes(&K, &g, 1);
        release(&K);
    }
#if HEAP_COUNTED
    /* 3 B (T/p) C x 4 >= 64 KiB: minidc's ring reduce-scatter keeps its scratch in its cache */
    if (setup(&K, &g, 4, 48, 32, 0)) check_scratch(&K, &g, 0), check_scratch(&K, &g, 1);
    else grade_check(&g, "the grader's buffers", 0, "out of memory");
    release(&K);
#endif
    return grade_end(&g);
}
