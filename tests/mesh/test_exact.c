/* The exact accumulator (minidc/exact.h) and the MDC_EXACT dtype.
 * (a) Random float sets (full range with subnormals, mixed magnitudes 1e-38..1e38, exact
 *     cancellations, ties just at / above / below a half ulp, overflow): the rounded result
 *     equals a reference computed another way (a plain big integer with eager carries, rounded
 *     by bisection over float and double bit patterns and an exact midpoint comparison), and
 *     adding in another order, in random blocks combined in a random tree, and (sets of up to 6)
 *     in every permutation gives the same normalized bytes. Adversarial limbs
 *     test normalization and rounding; 40 doublings of FLT_MAX the headroom.
 * (b) NaN, infinities, signed zero.
 * (c) Every allreduce, reduce_scatter and reduce algorithm, forced in turn, on per-rank partial
 *     sums of irregular shards: every rank gets the bytes of the serial accumulation.
 * Rank 0 also prints the cost of an addition. */
#include <float.h>
#include <mpi.h>
#include <stdint.h>

#include "minidc/splitmix.h"
#include "testutil.h"

static int P, R;

/* ---- the reference: two's complement big integer in units of 2^-149 ---------------------- */
#define RW 12
typedef struct {
    uint32_t w[RW];
} big;

static void big_addb(big *x, const big *y) {
    uint64_t c = 0;
    for (int i = 0; i < RW; i++) c += (uint64_t)x->w[i] + y->w[i], x->w[i] = (uint32_t)c, c >>= 32;
}
static void big_neg(big *x) {
    uint64_t c = 1;
    for (int i = 0; i < RW; i++) c += (uint32_t)~x->w[i], x->w[i] = (uint32_t)c, c >>= 32;
}
static int big_isneg(const big *x) { return x->w[RW - 1] >> 31; }
static int big_cmp(const big *a, const big *b) { /* both non-negative */
    for (int i = RW - 1; i >= 0; i--)
        if (a->w[i] != b->w[i]) return a->w[i] < b->w[i] ? -1 : 1;
    return 0;
}
static void big_add_u(big *x, int neg, uint64_t m, int sh) { /* x += (neg ? -1 : 1) m 2^sh */
    big t = {{0}};
    unsigned __int128 v = (unsigned __int128)m << (sh % 32);
    for (int j = 0; j < 4 && sh / 32 + j < RW; j++) t.w[sh / 32 + j] = (uint32_t)(v >> (32 * j));
    if (neg) big_neg(&t);
    big_addb(x, &t);
}
static void ref_add_float(big *S, float x) { /* through frexp, not through the bits */
    if (x == 0) return;
    int e;
    float fr = frexpf(fabsf(x), &e);
    uint64_t m = (uint64_t)ldexpf(fr, 24);
    int sh = e - 24 + 149;
    if (sh < 0) m >>= -sh, sh = 0; /* a subnormal: the shifted-out bits are zero */
    big_add_u(S, x < 0, m, sh);
}
static big ref_of_double(double d) { /* d >= 0, a multiple of 2^-149 */
    big t = {{0}};
    if (d == 0) return t;
    int e;
    double fr = frexp(d, &e);
    uint64_t m = (uint64_t)ldexp(fr, 53);
    int sh = e - 53 + 149;
    if (sh < 0) m >>= -sh, sh = 0;
    big_add_u(&t, 0, m, sh);
    return t;
}
static big val32(uint64_t u) { /* the float with bits u >= 0; +inf stands for 2^128 */
    if (u == 0x7f800000u) {
        big t = {{0}};
        big_add_u(&t, 0, 1, 128 + 149);
        return t;
    }
    float f;
    uint32_t v = (uint32_t)u;
    memcpy(&f, &v, 4);
    return ref_of_double(f);
}
static big val64(uint64_t u) {
    double d;
    memcpy(&d, &u, 8);
    return ref_of_double(d);
}
/* s > 0 rounded to nearest-even among the patterns [lo, hi] of one format (val(lo) <= s <
 * val(hi)): bisect to the bracketing pair, then compare 2s with val(lo) + val(hi). */
static uint64_t ref_round(big (*val)(uint64_t), uint64_t lo, uint64_t hi, const big *s) {
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        big vm = val(mid);
        if (big_cmp(&vm, s) <= 0) lo = mid;
        else hi = mid;
    }
    big vlo = val(lo), mid = val(hi), two = *s;
    if (!big_cmp(&vlo, s)) return lo;
    big_addb(&mid, &vlo);
    big_addb(&two, s);
    int c = big_cmp(&two, &mid);
    return c > 0 || (c == 0 && (lo & 1)) ? hi : lo;
}
static float ref_f32(big s, int allneg0) {
    int neg = big_isneg(&s);
    if (neg) big_neg(&s);
    big z = {{0}}, vinf = val32(0x7f800000u);
    if (!big_cmp(&s, &z)) return allneg0 ? -0.0f : 0.0f;
    /* at or past 2^128: inf */
    uint32_t u = big_cmp(&vinf, &s) <= 0 ? 0x7f800000u : (uint32_t)ref_round(val32, 0, 0x7f800000u, &s);
    float f;
    memcpy(&f, &u, 4);
    return neg ? -f : f;
}
static double ref_f64(big s, int allneg0) {
    int neg = big_isneg(&s);
    if (neg) big_neg(&s);
    big z = {{0}}, small = ref_of_double(0x1p-96);
    if (!big_cmp(&s, &z)) return allneg0 ? -0.0 : 0.0;
    double d = 0x1p-96, top = 0x1p200;
    if (big_cmp(&s, &small) < 0) { /* k 2^-149 with k < 2^53: exact in double */
        d = ldexp((double)(((uint64_t)s.w[1] << 32) | s.w[0]), -149);
    } else { /* the candidates at and above 2^-96 are multiples of 2^-149 */
        uint64_t lo, hi;
        memcpy(&lo, &d, 8);
        memcpy(&hi, &top, 8);
        lo = ref_round(val64, lo, hi, &s);
        memcpy(&d, &lo, 8);
    }
    return neg ? -d : d;
}

/* ---- random sets ------------------------------------------------------------------------- */
static uint64_t rs;
static uint64_t rnd(void) { return mdc_mix64_finalize(rs += MDC_GOLDEN64); }
static float fbits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float rnd_full(void) { /* any finite float, subnormals included */
    uint32_t ex = (uint32_t)(rnd() % 255);
    return fbits((uint32_t)(rnd() & 0x807fffffu) | ex << 23);
}
static float rnd_mixed(void) {
    double l = log(1e-38) + (double)(rnd() >> 11) * 0x1p-53 * (log(1e38) - log(1e-38));
    return (float)((rnd() & 1) ? -exp(l) : exp(l));
}
static void shuffle(float *x, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1));
        float t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}
/* Set of kind k into x (room for 600); returns its size. */
static int gen_set(int k, float *x) {
    int n = 1 + (int)(rnd() % 64), m = 0;
    if (rnd() % 50 == 0) n = 500;
    switch (k % 6) {
    case 0:
        for (; m < n; m++) x[m] = rnd_full();
        break;
    case 1:
        for (; m < n; m++) x[m] = rnd_mixed();
        break;
    case 2: /* exact cancellation: x and -x, plus a few small ones */
        for (; m < n / 2; m++) x[m] = rnd() & 1 ? rnd_full() : rnd_mixed();
        for (int i = 0; i < n / 2; i++) x[m++] = -x[i];
        for (int i = 0; i < 3; i++) x[m++] = ldexpf((float)(rnd() % 1000) - 500, (int)(rnd() % 40) - 160);
        break;
    case 3:
    case 4: { /* a + half an ulp of a, in three pieces; +- 2^-149; big cancelling pairs */
        uint32_t ex = 30 + (uint32_t)(rnd() % 190);
        float a = fbits((uint32_t)(rnd() & 0x807fffffu) | ex << 23), h = ldexpf(1, (int)ex - 151);
        x[m++] = a;
        x[m++] = copysignf(h / 2, a), x[m++] = copysignf(h / 4, a), x[m++] = copysignf(h / 4, a);
        int v = (int)(rnd() % 3);
        if (v) x[m++] = v == 1 ? 0x1p-149f : -0x1p-149f;
        for (int i = 0; i < (int)(rnd() % 8); i++) {
            float y = rnd_full();
            x[m++] = y;
            x[m++] = -y;
        }
        break;
    }
    default: /* overflow and its edge: FLT_MAX + 2^103 is a tie between FLT_MAX and 2^128 */
        x[m++] = FLT_MAX;
        x[m++] = rnd() & 1 ? 0x1p103f : 0x1p102f;
        if (rnd() & 1) x[m++] = -0x1p-149f;
        for (int i = 0; i < (int)(rnd() % 6); i++)
            x[m++] = (rnd() & 1 ? -1 : 1) * ldexpf(1.0f + (float)(rnd() % 100) / 128, 120 + (int)(rnd() % 7));
        break;
    }
    shuffle(x, m);
    return m;
}
static int all_neg0(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (signbit(x[i]) == 0 || x[i] != 0) return 0;
    return n > 0;
}

static int same(mdc_exact a, mdc_exact b) { /* equal normalized bytes */
    mdc_exact_normalize(&a);
    mdc_exact_normalize(&b);
    return !memcmp(&a, &b, sizeof a);
}
static uint32_t b32(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static uint64_t b64(double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* Every permutation of x[k..n) appended to x[0..k) (n <= 6): the same normalized bytes as want. */
static int perms_agree(float *x, int k, int n, const mdc_exact *want) {
    if (k == n) {
        mdc_exact a;
        mdc_exact_clear(&a);
        for (int i = 0; i < n; i++) mdc_exact_add_f32(&a, x[i]);
        return same(a, *want);
    }
    int ok = 1;
    for (int i = k; i < n; i++) {
        float t = x[k];
        x[k] = x[i];
        x[i] = t;
        ok &= perms_agree(x, k + 1, n, want);
        t = x[k];
        x[k] = x[i];
        x[i] = t;
    }
    return ok;
}

/* One set: add it whole, one at a time in another order, and in random blocks combined in a
 * random order; all three against each other and the reference. Returns 1 when the plain
 * float loop gave other bits (to count the sets where order matters). */
static int check_set(const float *x0, int n, const char *kind) {
    float x[600];
    memcpy(x, x0, sizeof(float) * (size_t)n);
    big S = {{0}};
    float naive = 0;
    for (int i = 0; i < n; i++) ref_add_float(&S, x[i]), naive += x[i];
    mdc_exact a, b, blk[600];
    mdc_exact_clear(&a);
    mdc_exact_add_f32s(&a, x, (size_t)n);
    shuffle(x, n);
    mdc_exact_clear(&b);
    for (int i = 0; i < n; i++) mdc_exact_add_f32(&b, x[i]);
    int nb = 0;
    for (int i = 0; i < n; nb++) { /* blocks of 1..8, then merged pairwise at random */
        int len = 1 + (int)(rnd() % 8);
        if (len > n - i) len = n - i;
        mdc_exact_clear(&blk[nb]);
        mdc_exact_add_f32s(&blk[nb], x + i, (size_t)len);
        i += len;
    }
    while (nb > 1) {
        int i = (int)(rnd() % (uint64_t)nb), j = (int)(rnd() % (uint64_t)(nb - 1));
        if (j >= i) j++;
        mdc_exact_sum(&blk[i], &blk[j], &blk[i]);
        blk[j] = blk[--nb];
    }
    float want = ref_f32(S, all_neg0(x, n));
    double want64 = ref_f64(S, all_neg0(x, n));
    TU_CHECK(same(a, b) && same(a, blk[0]), "%s, %d floats: the orders differ", kind, n);
    TU_CHECK(n > 6 || perms_agree(x, 0, n, &a), "%s, %d floats: a permutation differs", kind, n);
    TU_CHECK(b32(mdc_exact_to_f32(&a)) == b32(want), "%s, %d floats: got %a want %a", kind, n,
             (double)mdc_exact_to_f32(&a), (double)want);
    TU_CHECK(b64(mdc_exact_to_f64(&blk[0])) == b64(want64), "%s, %d floats: f64 got %a want %a", kind, n,
             mdc_exact_to_f64(&blk[0]), want64);
    return b32(naive) != b32(want);
}

/* Limbs anywhere within the pending bound: normalization and rounding against the reference. */
static void check_limbs(int trials) {
    for (int t = 0; t < trials; t++) {
        mdc_exact a;
        mdc_exact_clear(&a);
        a.pending = (uint32_t)(rnd() % MDC_EXACT_PENDING_MAX);
        int64_t bound = (int64_t)(a.pending + 1) * 0xffffffffll;
        int h = (int)(rnd() % MDC_EXACT_LIMBS);
        big S = {{0}};
        for (int k = 0; k <= h; k++) {
            int64_t v = k == MDC_EXACT_LIMBS - 1 ? (int64_t)(rnd() % (1ull << 40)) - (1ll << 39)
                                                 : (int64_t)(rnd() % (2 * (uint64_t)bound + 1) - (uint64_t)bound);
            if (rnd() % 4 == 0) v = 0;
            a.limb[k] = v;
            big_add_u(&S, v < 0, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, 32 * k);
        }
        TU_CHECK(b32(mdc_exact_to_f32(&a)) == b32(ref_f32(S, 0)), "limbs %d: got %a want %a", t,
                 (double)mdc_exact_to_f32(&a), (double)ref_f32(S, 0));
        TU_CHECK(b64(mdc_exact_to_f64(&a)) == b64(ref_f64(S, 0)), "limbs %d: f64 got %a want %a", t,
                 mdc_exact_to_f64(&a), ref_f64(S, 0));
    }
}

static void test_headroom(void) { /* 2^40 FLT_MAX by doubling: past 2^31 pendings, exact */
    mdc_exact a, b, c;
    mdc_exact_clear(&a), mdc_exact_clear(&b), mdc_exact_clear(&c);
    mdc_exact_add_f32(&a, FLT_MAX), mdc_exact_add_f32(&b, -FLT_MAX), mdc_exact_add_f32(&c, 1.5f);
    for (int i = 0; i < 40; i++) mdc_exact_sum(&a, &a, &a), mdc_exact_sum(&b, &b, &b);
    TU_CHECK(mdc_exact_to_f64(&a) == ldexp(FLT_MAX, 40), "2^40 FLT_MAX gave %a", mdc_exact_to_f64(&a));
    TU_CHECK(isinf(mdc_exact_to_f32(&a)), "2^40 FLT_MAX as f32 is not inf");
    mdc_exact_sum(&c, &c, &a);
    mdc_exact_sum(&c, &b, &c);
    TU_CHECK(mdc_exact_to_f32(&c) == 1.5f, "2^40 FLT_MAX + 1.5 - 2^40 FLT_MAX gave %a", (double)mdc_exact_to_f32(&c));
}

static float sum_of(const float *x, int n) {
    mdc_exact a;
    mdc_exact_clear(&a);
    mdc_exact_add_f32s(&a, x, (size_t)n);
    return mdc_exact_to_f32(&a);
}

static void test_specials(void) {
    const float inf = INFINITY, qnan = NAN;
    struct {
        float x[3];
        int n;
        float want;
    } c[] = {
        {{inf, 1}, 2, inf},
        {{-inf, FLT_MAX}, 2, -inf},
        {{inf, -inf}, 2, qnan},
        {{qnan, 1}, 2, qnan},
        {{qnan, inf, -inf}, 3, qnan},
        {{1, -1}, 2, 0.0f},
        {{-0.0f, -0.0f}, 2, -0.0f},
        {{0}, 0, 0.0f},
        {{-0.0f}, 1, -0.0f},
        {{-0.0f, 0.0f}, 2, 0.0f},
        {{FLT_MAX, FLT_MAX}, 2, inf},
        {{-FLT_MAX, -FLT_MAX}, 2, -inf},
        {{FLT_MAX, FLT_MAX, -FLT_MAX}, 3, FLT_MAX},
        {{0x1p24f, 1, 1}, 3, 0x1p24f + 2},
        {{0x1p-149f, -0x1p-149f, 0x1p-149f}, 3, 0x1p-149f},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        float got = sum_of(c[i].x, c[i].n);
        TU_CHECK(isnan(c[i].want) ? isnan(got) : b32(got) == b32(c[i].want), "case %zu: got %a want %a", i, (double)got,
                 (double)c[i].want);
    }
    mdc_exact a, b; /* flags travel through combination */
    mdc_exact_clear(&a), mdc_exact_clear(&b);
    mdc_exact_add_f32(&a, inf), mdc_exact_add_f32(&b, -inf);
    mdc_exact_sum(&a, &a, &b);
    TU_CHECK(isnan(mdc_exact_to_f32(&a)), "inf + -inf through combination is not NaN");
    /* the dtype's table entries */
    TU_CHECK(mdc_dtype_size(MDC_EXACT) == sizeof(mdc_exact) && !strcmp(mdc_dtype_name(MDC_EXACT), "exact") &&
                 mdc_dtype_parse("exact") == MDC_EXACT,
             "dtype tables");
    mdc_exact e[2];
    mdc_dtype_set(e, MDC_EXACT, 0, 0.1);
    mdc_dtype_set(e, MDC_EXACT, 1, -0.0);
    TU_CHECK(mdc_dtype_get(e, MDC_EXACT, 0) == 0.1 && b64(mdc_dtype_get(e, MDC_EXACT, 1)) == b64(-0.0), "get/set");
    mdc_reduce_local(&e[0], &e[1], 1, MDC_EXACT, MDC_SUM);
    TU_CHECK(mdc_dtype_get(e, MDC_EXACT, 0) == 0.1, "reduce_local");
}

/* ---- (c) the collectives ------------------------------------------------------------------ */
/* Element e: a set of floats (rich for e < 24, else a few), cut at random points into P shards. */
static int element(size_t e, float *x, int *cut) {
    rs = 0x5eed0000ull + e;
    int n = e < 24 ? gen_set((int)e, x) : 1 + (int)(rnd() % 5);
    if (e >= 24)
        for (int i = 0; i < n; i++) x[i] = rnd() & 1 ? rnd_mixed() : rnd_full();
    cut[0] = 0, cut[P] = n;
    for (int r = 1; r < P; r++) cut[r] = (int)(rnd() % (uint64_t)(n + 1));
    for (int r = 1; r < P; r++)
        for (int s = r + 1; s < P; s++)
            if (cut[s] < cut[r]) {
                int t = cut[r];
                cut[r] = cut[s];
                cut[s] = t;
            }
    return n;
}
static void make(size_t n, mdc_exact *mine, mdc_exact *serial) {
    float x[600];
    int cut[64];
    for (size_t e = 0; e < n; e++) {
        int m = element(e, x, cut);
        mdc_exact_clear(&serial[e]);
        mdc_exact_add_f32s(&serial[e], x, (size_t)m);
        mdc_exact_clear(&mine[e]);
        for (int i = cut[R]; i < cut[R + 1];) { /* the shard in blocks of 1..4 */
            int len = 1 + (int)(rnd() % 4);
            if (len > cut[R + 1] - i) len = cut[R + 1] - i;
            mdc_exact blk;
            mdc_exact_clear(&blk);
            mdc_exact_add_f32s(&blk, x + i, (size_t)len);
            mdc_exact_sum(&mine[e], &mine[e], &blk);
            i += len;
        }
    }
}
/* got against serial; when `everywhere`, also the same bits as rank 0's result. */
static void cmp_exact(const mdc_exact *got, const mdc_exact *want, size_t n, const char *what, int everywhere) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!same(got[i], want[i]) || b32(mdc_exact_to_f32(&got[i])) != b32(mdc_exact_to_f32(&want[i]))) {
            if (!bad) first = i;
            bad++;
        }
    TU_CHECK(!bad, "rank %d/%d: %s: %zu of %zu differ from serial, first at %zu: got %a want %a", R, P, what, bad, n,
             first, mdc_exact_to_f64(&got[first]), mdc_exact_to_f64(&want[first]));
    uint64_t h = 1469598103934665603ull, h0; /* every rank the same bits: a hash, rank 0's */
    for (size_t i = 0; i < n; i++) {
        float f = mdc_exact_to_f32(&got[i]);
        h = (h ^ b32(f)) * 1099511628211ull;
    }
    h0 = h;
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    TU_CHECK(!everywhere || h == h0, "rank %d/%d: %s: other bits than rank 0", R, P, what);
}

static void test_colls(mdc_group *g, const char *gname) {
    size_t sizes[] = {1, (size_t)P + 1, 4001}; /* 4001 x 80 B: above the slice, sliced */
    char what[160];
    for (int s = 0; s < 3; s++) {
        size_t n = sizes[s], all = n * (size_t)P;
        mdc_exact *mine = malloc(sizeof(mdc_exact) * all), *ser = malloc(sizeof(mdc_exact) * all),
                  *out = malloc(sizeof(mdc_exact) * all);
        make(all, mine, ser);
        mdc_coll colls[] = {MDC_COLL_ALLREDUCE, MDC_COLL_REDUCE_SCATTER, MDC_COLL_REDUCE};
        for (int c = 0; c < 3; c++)
            for (int a = 0; a < mdc_coll_algo_count(colls[c]); a++) {
                const char *name = mdc_coll_algo_at(colls[c], a)->name;
                MDC_CHECK(mdc_coll_set_algo(colls[c], name));
                snprintf(what, sizeof what, "%s %s, %s group, count %zu", mdc_coll_name(colls[c]), name, gname, n);
                memset(out, 0, sizeof(mdc_exact) * all);
                if (colls[c] == MDC_COLL_ALLREDUCE) {
                    MDC_CHECK(mdc_allreduce(mine, out, n, MDC_EXACT, MDC_SUM, g));
                    cmp_exact(out, ser, n, what, 1);
                    memcpy(out, mine, sizeof(mdc_exact) * n); /* in place */
                    MDC_CHECK(mdc_allreduce(MDC_IN_PLACE, out, n, MDC_EXACT, MDC_SUM, g));
                    cmp_exact(out, ser, n, what, 1);
                } else if (colls[c] == MDC_COLL_REDUCE_SCATTER) {
                    MDC_CHECK(mdc_reduce_scatter(mine, out, n, MDC_EXACT, MDC_SUM, g));
                    cmp_exact(out, ser + (size_t)mdc_group_rank(g) * n, n, what, 0);
                } else {
                    MDC_CHECK(mdc_reduce(mine, out, n, MDC_EXACT, MDC_SUM, P - 1, g));
                    if (mdc_group_rank(g) == P - 1) cmp_exact(out, ser, n, what, 1);
                    else cmp_exact(ser, ser, n, what, 1); /* keeps the broadcasts matched */
                }
            }
        for (int c = 0; c < 3; c++) MDC_CHECK(mdc_coll_set_algo(colls[c], "auto"));
        free(mine), free(ser), free(out);
    }
    mdc_exact e[1];
    mdc_exact_clear(e);
    TU_STATUS(mdc_allreduce(e, e, 1, MDC_EXACT, MDC_MAX, g), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "op max is not defined on dtype exact");
}

/* ---- (d) mdc_exact_reduce: arrays of exact sums over ranks, both passes -------------------------- */
/* Rank q's floats for element i: class 0 a few of similar magnitude (a double holds their sum),
 * class 1 also 1e-30 beside 1 (the local sum escalates to an accumulator), class 2 1 + 2^-24 on
 * rank 0 and 2^-60 on rank 1: each exact as a double, their double sum is not (it rounds to the
 * float tie 1 + 2^-24, which goes to even, 1, where the exact sum rounds up to 1 + 2^-23). */
static int xvals(int q, size_t i, int classes, float *f) {
    uint64_t h = mdc_splitmix64(((uint64_t)q << 40) ^ i);
    float u = (float)((h >> 40) * 0x1p-24) - 0.5f;
    int c = (int)(i % (size_t)classes);
    if (c == 0) return f[0] = u, f[1] = u * 0.75f + 0.125f, f[2] = -0.3f, 3;
    if (c == 1) return f[0] = 1.0f, f[1] = 1e-30f, f[2] = u, 3;
    if (q == 0) return f[0] = 1.0f, f[1] = 0x1p-24f, 2;
    return q == 1 ? (f[0] = 0x1p-60f, 1) : 0;
}
static void fetch_x(void *ctx, size_t i, mdc_exact *out) { mdc_xsum_get(ctx, i, 1, out); }

static void test_xreduce(mdc_group *g, const char *gname) {
    size_t n = (size_t)P * 257;
    char what[160];
    for (int classes = 1; classes <= 3; classes += 2) {
        mdc_xsum xs;
        TU_CHECK(mdc_xsum_init(&xs, n) == 0, "xsum");
        float f[4], *want = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
        double *v = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            int k = xvals(mdc_group_rank(g), i, classes, f);
            for (int j = 0; j < k; j++) mdc_xsum_add(&xs, i, &f[j], 1); /* all into element i */
            mdc_exact ref;
            mdc_exact_clear(&ref);
            for (int q = 0; q < P; q++) {
                int kq = xvals(q, i, classes, f);
                mdc_exact_add_f32s(&ref, f, (size_t)kq);
            }
            want[i] = mdc_exact_to_f32(&ref);
        }
        mdc_coll colls[2] = {MDC_COLL_ALLREDUCE, MDC_COLL_REDUCE_SCATTER};
        for (int c = 0; c < 2; c++)
            for (int a = 0; a < mdc_coll_algo_count(colls[c]); a++) {
                const char *name = mdc_coll_algo_at(colls[c], a)->name;
                MDC_CHECK(mdc_coll_set_algo(colls[c], name));
                memcpy(v, xs.v, n * sizeof(double));
                mdc_exact_reduce_stats st;
                int scatter = c == 1;
                MDC_CHECK(mdc_exact_reduce(v, n, scatter, out, fetch_x, &xs, g, &st));
                size_t blk = scatter ? n / (size_t)P : n, base = scatter ? (size_t)mdc_group_rank(g) * blk : 0;
                snprintf(what, sizeof what, "mdc_exact_reduce by %s %s, %s group, %d class(es)",
                         mdc_coll_name(colls[c]), name, gname, classes);
                TU_CHECK(!memcmp(out, want + base, blk * sizeof(float)), "%s: not the exact sum's bits", what);
                /* one class: every double sum exact, no second pass; three: it ran (classes 1 and 2) */
                TU_CHECK(st.map == (classes > 1) && (classes == 1 || st.marked >= n / 3),
                         "%s: second pass %d, %zu marked", what, st.map, st.marked);
                if (!scatter) continue;
                /* unequal blocks, every odd rank's empty: mdc_exact_reduce_scatterv (expert tensor parallelism's) */
                size_t cnt[64], left = n, base2 = 0;
                for (int q = 0; q < P && q < 64; q++)
                    cnt[q] = q == P - 1 ? left : q % 2 ? 0 : n / (size_t)P + 3, left -= q == P - 1 ? 0 : cnt[q];
                for (int q = 0; q < mdc_group_rank(g); q++) base2 += cnt[q];
                memcpy(v, xs.v, n * sizeof(double));
                MDC_CHECK(mdc_exact_reduce_scatterv(v, cnt, out, fetch_x, &xs, g, &st));
                TU_CHECK(!memcmp(out, want + base2, cnt[mdc_group_rank(g)] * sizeof(float)),
                         "mdc_exact_reduce_scatterv by %s, %s group, %d class(es): not the exact sum's bits", name,
                         gname, classes);
            }
        for (int c = 0; c < 2; c++) MDC_CHECK(mdc_coll_set_algo(colls[c], "auto"));
        mdc_xsum_free(&xs);
        free(want), free(out), free(v);
    }
    double d[1] = {0};
    TU_STATUS(mdc_allreduce(d, d, 1, MDC_EXACT_F64, MDC_MAX, g), MDC_ERR_INVALID);
}

static void speed(void) {
    size_t n = 10000000;
    float *x = malloc(sizeof(float) * n);
    rs = 7;
    for (size_t i = 0; i < n; i++) /* magnitudes 1e-8..1e2, random signs: like gradients */
        x[i] = (float)((rnd() & 1 ? -1 : 1) * exp(log(1e-8) + (double)(rnd() >> 11) * 0x1p-53 * log(1e10)));
    mdc_exact a;
    mdc_exact_clear(&a);
    double t0 = MPI_Wtime();
    mdc_exact_add_f32s(&a, x, n);
    double t1 = MPI_Wtime();
    float s = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    double t2 = MPI_Wtime();
    printf("exact: %zu adds in %.1f ms: %.2f ns per add (%.0f M/s); plain float loop %.2f ns per add\n", n,
           (t1 - t0) * 1e3, (t1 - t0) / (double)n * 1e9, (double)n / (t1 - t0) / 1e6, (t2 - t1) / (double)n * 1e9);
    printf("exact: sum %.9g, plain float loop %.9g\n", (double)mdc_exact_to_f32(&a), (double)s);
    free(x);
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    tu_coll_options(argc, argv);
    P = rt.size, R = rt.rank;
    /* (a), (b): the same on every rank, a different seed per rank count */
    rs = 1000 + (uint64_t)P;
    float x[600];
    int sets = 0, differ = 0;
    for (int k = 0; k < 3000; k++, sets++) {
        int n = gen_set(k, x);
        differ += check_set(x, n,
                            k % 6 == 0   ? "full range"
                            : k % 6 == 1 ? "mixed"
                            : k % 6 == 2 ? "cancelling"
                            : k % 6 < 5  ? "tie"
                                         : "overflow");
    }
    check_limbs(3000);
    test_headroom();
    test_specials();
    if (R == 0) {
        printf("exact: %d sets equal the reference in 3 orders, and in all when up to 6 floats (a plain float loop "
               "differs on %d); "
               "3000 limb patterns; 16 NaN/inf/zero cases\n",
               sets, differ);
        speed();
    }
    /* (c) */
    test_colls(rt.world, "world");
    mdc_transport *t2;
    mdc_group *w2, *rev;
    MDC_CHECK(mdc_transport_create(&t2, NULL, rt.dev, 2)); /* hierarchical for real */
    MDC_CHECK(mdc_group_world(&w2, t2));
    test_colls(w2, "2-per-node");
    int *ranks = malloc(sizeof(int) * (size_t)P);
    for (int i = 0; i < P; i++) ranks[i] = P - 1 - i;
    MDC_CHECK(mdc_group_create(&rev, rt.tr, ranks, P, 5));
    test_colls(rev, "reversed");
    if (R == 0) printf("exact: every allreduce, reduce_scatter and reduce algorithm equals serial on %d ranks\n", P);
    test_xreduce(rt.world, "world");
    test_xreduce(rev, "reversed");
    if (R == 0)
        printf("exact: mdc_exact_reduce (doubles, then accumulators where a sum is not exact) equals serial's "
               "bits through every allreduce and reduce_scatter algorithm on %d ranks, and with unequal blocks\n",
               P);
    mdc_group_free(rev), free(ranks), mdc_group_free(w2), mdc_transport_free(t2);
    int rc = tu_finish("test_exact"), any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    mdc_runtime_finalize(&rt);
    return any;
}
