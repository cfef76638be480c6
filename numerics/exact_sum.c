/* Arrays of exact sums (minidc/exact.h): a double per element while its sum fits in 53 bits,
 * an accumulator from the first addition that does not. The check is TwoSum's error term
 * (Knuth): for u = s + x rounded, e = (s - (u - z)) + (x - z) with z = u - s is exactly
 * s + x - u, so e == 0 says u is the exact sum. It is NaN when u overflowed or s names a slot,
 * which sends those additions to the slow path too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/exact.h"

#define PAYLOAD (((uint64_t)1 << 51) - 1)

static uint64_t dbits(double d) {
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}
static double box(size_t k) { /* a quiet NaN whose payload is k + 1 */
    uint64_t b = 0x7ff8000000000000ull | ((uint64_t)k + 1);
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}
static size_t unbox(double v) { return (size_t)((dbits(v) & PAYLOAD) - 1); }

int mdc_xsum_init(mdc_xsum *x, size_t n) {
    memset(x, 0, sizeof *x);
    x->v = calloc(n ? n : 1, sizeof(double));
    if (!x->v) return -1;
    x->n = n;
    return 0;
}

void mdc_xsum_free(mdc_xsum *x) {
    if (!x) return;
    free(x->v);
    free(x->slot);
    memset(x, 0, sizeof *x);
}

void mdc_xsum_clear(mdc_xsum *x) {
    memset(x->v, 0, x->n * sizeof(double));
    x->nslot = 0;
    x->oom = 0;
}

void mdc_xsum_zero(mdc_xsum *x, size_t off, size_t n) { memset(x->v + off, 0, n * sizeof(double)); }

int mdc_xsum_ok(const mdc_xsum *x) { return !x->oom; }

void mdc_exact_add_f64_exact(mdc_exact *a, double x) {
    uint64_t b = dbits(x);
    int ex = (int)((b >> 52) & 0x7ff);
    if (x == 0 || ex == 0x7ff) {
        mdc_exact_add_f64(a, x);
        return;
    }
    uint64_t m = (b & (((uint64_t)1 << 52) - 1)) | (ex ? (uint64_t)1 << 52 : 0);
    int pos = (ex ? ex - 1075 : -1074) + 149; /* x = m 2^(pos - 149) */
    if (pos < 0) {                            /* bits below 2^-149 must be zero to stay exact */
        if (pos < -52 || (m & (((uint64_t)1 << -pos) - 1))) {
            mdc_exact_add_f64(a, x);
            return;
        }
        m >>= -pos, pos = 0;
    }
    if (pos >= 224) { /* beyond 2^127: not a sum this storage holds; the float path's answer */
        mdc_exact_add_f64(a, x);
        return;
    }
    if (a->pending + 2 > MDC_EXACT_PENDING_MAX) mdc_exact_normalize(a);
    unsigned __int128 v = (unsigned __int128)m << (pos & 31); /* below 2^84: three pieces */
    int k = pos >> 5;
    int64_t s = -(int64_t)(b >> 63), w0 = (int64_t)(uint32_t)v, w1 = (int64_t)(uint32_t)(v >> 32);
    int64_t w2 = (int64_t)(uint32_t)(v >> 64);
    a->limb[k] += (w0 ^ s) - s;
    a->limb[k + 1] += (w1 ^ s) - s;
    a->limb[k + 2] += (w2 ^ s) - s;
    a->pending++;
    a->flags |= MDC_EXACT_F_ANY | MDC_EXACT_F_NOTNEG0;
}

/* The accumulator of element i, made on its first use from the exact double (under the lock:
 * the slot array may move). NULL when out of memory. */
static mdc_exact *slot_for(mdc_xsum *x, size_t i) {
    double v = x->v[i];
    if (v != v) return &x->slot[unbox(v)];
    if (x->nslot == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 64;
        mdc_exact *p = realloc(x->slot, cap * sizeof *p);
        if (!p) {
            x->oom = 1;
            return NULL;
        }
        x->slot = p, x->cap = cap;
    }
    mdc_exact *a = &x->slot[x->nslot];
    mdc_exact_clear(a);
    mdc_exact_add_f64_exact(a, v);
    x->v[i] = box(x->nslot++);
    return a;
}

static void slow_add(mdc_xsum *x, size_t i, float p) {
#pragma omp critical(mdc_xsum)
    {
        mdc_exact *a = slot_for(x, i);
        if (a) mdc_exact_add_f32(a, p);
    }
}

static inline void add1(mdc_xsum *x, size_t i, float p) {
    double s = x->v[i], q = p, u = s + q, z = u - s, e = (s - (u - z)) + (q - z);
    if (e == 0) x->v[i] = u;
    else slow_add(x, i, p);
}

#ifdef __x86_64__
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif
typedef double v4d __attribute__((vector_size(32)));
typedef long long v4l __attribute__((vector_size(32)));

/* Four elements per step: TwoSum on vectors, one branch for the rare inexact lane. (Cloned as
 * a static function behind the public one: clang emits a public clone's dispatcher only in a
 * file that also calls it.) */
CLONES static void xsum_add(mdc_xsum *x, size_t off, const float *p, size_t n) {
    double *v = x->v + off;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v4d s, q = {p[i], p[i + 1], p[i + 2], p[i + 3]};
        memcpy(&s, v + i, sizeof s);
        v4d u = s + q, z = u - s, e = (s - (u - z)) + (q - z);
        v4l bad = e != 0; /* true for NaN too */
        if (!(bad[0] | bad[1] | bad[2] | bad[3])) memcpy(v + i, &u, sizeof u);
        else
            for (int j = 0; j < 4; j++) add1(x, off + i + j, p[i + j]);
    }
    for (; i < n; i++) add1(x, off + i, p[i]);
}

void mdc_xsum_add(mdc_xsum *x, size_t off, const float *p, size_t n) { xsum_add(x, off, p, n); }

void mdc_xsum_add2d(mdc_xsum *x, size_t off, size_t ldx, const float *p, size_t ldp, int rows, int cols) {
    for (int r = 0; r < rows; r++) mdc_xsum_add(x, off + (size_t)r * ldx, p + (size_t)r * ldp, (size_t)cols);
}

void mdc_xsum_get(const mdc_xsum *x, size_t off, size_t n, mdc_exact *out) {
    for (size_t i = 0; i < n; i++) {
        double v = x->v[off + i];
        if (v != v) {
            out[i] = x->slot[unbox(v)];
        } else {
            mdc_exact_clear(&out[i]);
            mdc_exact_add_f64_exact(&out[i], v);
        }
    }
}

void mdc_xsum_set(mdc_xsum *x, size_t off, const mdc_exact *a, size_t n) {
    for (size_t i = 0; i < n; i++) {
        mdc_exact t = a[i], back;
        mdc_exact_normalize(&t);
        double d = mdc_exact_to_f64(&t);
        mdc_exact_clear(&back);
        mdc_exact_add_f64_exact(&back, d);
        mdc_exact_normalize(&back);
        if (!memcmp(&back, &t, sizeof t)) { /* the value is this double */
            x->v[off + i] = d;
            continue;
        }
        x->v[off + i] = 0;
        mdc_exact *s = slot_for(x, off + i);
        if (s) *s = a[i];
    }
}

void mdc_xsum_round(const mdc_xsum *x, size_t off, size_t n, float *out) {
    const double *v = x->v + off;
    for (size_t i = 0; i < n; i++) /* a double holding the exact sum rounds once, to nearest even */
        out[i] = v[i] == v[i] ? (float)v[i] : mdc_exact_to_f32(&x->slot[unbox(v[i])]);
}

int mdc_xsum_double(const mdc_xsum *x, size_t i, double *out) {
    double v = x->v[i];
    if (v != v) return 0;
    *out = v;
    return 1;
}

void mdc_exact_round_n(const mdc_exact *a, size_t n, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = mdc_exact_to_f32(&a[i]);
}

void mdc_exact_add_squares(mdc_exact *a, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (x[i] == 0) continue; /* +0: changes nothing once anything was added */
        mdc_exact_add_f64_exact(a, (double)x[i] * x[i]);
    }
    if (n) a->flags |= MDC_EXACT_F_ANY | MDC_EXACT_F_NOTNEG0;
}
