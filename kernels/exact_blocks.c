/* Exact mode's block kernels (docs/exactness.md): every reduction a mesh can split is cut into
 * canonical blocks, each block's partial sum is computed here in float by a loop whose order
 * depends only on the block, and the partials are added into arrays of exact sums (mdc_xsum),
 * so their combination does not depend on which rank or micro-batch computed which block.
 *   tokens (weight, bias, LayerNorm, embedding gradients): blocks of `blk` positions of one
 *     sequence; an embedding row's gradient is added token by token (one float each);
 *   contractions (row-parallel products, column-parallel input gradients, the LM head's input
 *     gradient): blocks of `kblk` indices of the contracted dimension (one head, 4C/H, a vocab
 *     block);
 *   the sum-exp of the loss: blocks of `vblk` vocabulary entries, into one accumulator a token.
 * Why a plain loop and not OpenBLAS: sgemm's result for an element depends on the shape and
 * offset of the call that computes it (its micro-kernels and edge kernels accumulate in
 * different orders), and those differ between meshes. Here an element of a block partial is
 * always sum_k a_k b_k in k order, starting from 0, one rounded multiply and one rounded add
 * each (no FMA contraction: -ffp-contract=off), whatever the tile it lands in; the vector
 * clone and the scalar edges do the same operations. FLOPs are charged as the products'
 * (2 per multiply-add) plus 4 per exact addition; bytes as the default kernels' plus 8 per
 * exact element read and written once. */
/* The build passes -ffp-contract=off everywhere; these keep it so for this file whatever the flags. */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include <stdlib.h>

#include "internal.h"
#include "minidc/exact.h"

#ifdef __x86_64__
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

enum { TR = 4, TC = 16 }; /* register tile: rows x columns */
typedef float v8f __attribute__((vector_size(32)));
#define LD8(v, p) memcpy(&(v), (p), sizeof(v8f))
#define ST8(p, v) memcpy((p), &(v), sizeof(v8f))

/* C[i][j] = sum_k A(k, i) B[k ldb + j] for i < M, j < N, k < K, in k order from 0, where
 * A(k, i) = A[k ska + i sia]. C is M x N, row stride N. Ap: scratch of K * (M + TR) floats
 * (A packed by groups of TR rows, zero rows past M). Column blocks outside, row groups inside,
 * so a K x TC strip of B is reused from L1 by every row group. */
CLONES static void block_gemm(float *C, float *Ap, const float *A, size_t ska, size_t sia, const float *Bm, size_t ldb,
                              int M, int N, int K) {
    int G = (M + TR - 1) / TR;
    for (int g = 0; g < G; g++)
        for (int k = 0; k < K; k++)
            for (int r = 0; r < TR; r++) {
                int i = g * TR + r;
                Ap[((size_t)g * K + k) * TR + r] = i < M ? A[(size_t)k * ska + (size_t)i * sia] : 0.0f;
            }
    int j = 0;
    for (; j + TC <= N; j += TC)
        for (int g = 0; g < G; g++) {
            v8f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
            const float *a = Ap + (size_t)g * K * TR, *b = Bm + j;
            for (int k = 0; k < K; k++, a += TR, b += ldb) {
                v8f b0, b1;
                LD8(b0, b);
                LD8(b1, b + 8);
                c00 = c00 + a[0] * b0, c01 = c01 + a[0] * b1;
                c10 = c10 + a[1] * b0, c11 = c11 + a[1] * b1;
                c20 = c20 + a[2] * b0, c21 = c21 + a[2] * b1;
                c30 = c30 + a[3] * b0, c31 = c31 + a[3] * b1;
            }
            v8f out[TR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
            for (int r = 0; r < TR && g * TR + r < M; r++) {
                ST8(C + (size_t)(g * TR + r) * N + j, out[r][0]);
                ST8(C + (size_t)(g * TR + r) * N + j + 8, out[r][1]);
            }
        }
    for (; j < N; j++) /* the same operations, one column at a time */
        for (int i = 0; i < M; i++) {
            const float *a = Ap + (size_t)(i / TR) * K * TR + i % TR;
            float s = 0;
            for (int k = 0; k < K; k++) s = s + a[(size_t)k * TR] * Bm[(size_t)k * ldb + j];
            C[(size_t)i * N + j] = s;
        }
}

/* Rows per tile: the tile's partial (floats) and its exact sums (doubles) stay in cache. */
static int tile_rows(int N) {
    int r = (int)(16384 / (N > 0 ? N : 1)) / TR * TR;
    return r < TR ? TR : r > 256 ? 256 : r;
}

static void charge(mdc_device *dev, double macs, double adds, double bytes) {
    mdc_k_charge(dev, 2 * macs + 4 * adds, bytes + 16 * adds);
}

/* xs[off + i N + j] += sum over blocks kb of block_gemm's partial of the kblk indices
 * [kb kblk, (kb + 1) kblk) for i < M, j < N, where A(k, i) = A[k ska + i sia]: row tiles in
 * parallel, each tile's exact sums kept in cache across the blocks. 0, or -1 out of memory. */
static int tiled_blocks(mdc_xsum *xs, size_t off, const float *A, size_t ska, size_t sia, const float *Bm, size_t ldb,
                        int M, int N, int K, int kblk) {
    int RT = tile_rows(N), tiles = (M + RT - 1) / RT, nk = K / kblk, ok = 1;
#pragma omp parallel
    {
        float *tmp = malloc(sizeof(float) * ((size_t)RT * (size_t)N + (size_t)kblk * (RT + TR)));
        if (!tmp) {
#pragma omp atomic write
            ok = 0;
        }
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < tiles; t++) {
            if (!tmp) continue;
            int i0 = t * RT, rt = M - i0 < RT ? M - i0 : RT;
            for (int kb = 0; kb < nk; kb++) {
                block_gemm(tmp, tmp + (size_t)RT * N, A + (size_t)kb * kblk * ska + (size_t)i0 * sia, ska, sia,
                           Bm + (size_t)kb * kblk * ldb, ldb, rt, N, kblk);
                mdc_xsum_add2d(xs, off + (size_t)i0 * N, (size_t)N, tmp, (size_t)N, rt, N);
            }
        }
        free(tmp);
    }
    return ok ? 0 : -1;
}

/* W^T (K x N) of W stored (N x K) with row stride ldw, or NULL out of memory. */
static float *pack_transposed(const float *W, int ldw, int K, int N) {
    float *t = malloc(sizeof(float) * (size_t)K * (size_t)N);
    if (!t) return NULL;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++) t[(size_t)k * N + j] = W[(size_t)j * ldw + k];
    return t;
}

void mdc_x_wgrad(mdc_device *dev, mdc_xsum *xs, size_t off, const float *A, int lda, const float *Bm, int ldb, int n,
                 int IN, int OUT, int blk) {
    double N = n, I = IN, O = OUT;
    if (mdc_dev_dry(dev)) goto charge;
    /* the contraction runs over the tokens: A(k, i) = A[k lda + i] */
    if (tiled_blocks(xs, off, A, (size_t)lda, 1, Bm, (size_t)ldb, IN, OUT, n, blk)) xs->oom = 1;
charge:
    charge(dev, N * I * O, (double)(n / blk) * I * O, 4 * (N * O + N * I));
}

/* MINIDC_EXACT_PLANT=1 (a test's planted fault): the first block of every bias gradient sums
 * its rows in reverse, a reordering inside one block that depends on where a rank's rows begin,
 * so a mesh must stop matching serial byte for byte (tests/cli/exact_cli.sh). */
static int planted(void) {
    static int p = -1;
    if (p < 0) {
        const char *e = getenv("MINIDC_EXACT_PLANT");
        p = e && *e == '1';
    }
    return p;
}

void mdc_x_colsum(mdc_device *dev, mdc_xsum *xs, size_t off, const float *D, int ld, int n, int OUT, int blk) {
    enum { CB = 256 };
    int ncb = (OUT + CB - 1) / CB, nb = n / blk, plant = planted();
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < ncb; cb++) {
        int c0 = cb * CB, c1 = c0 + CB < OUT ? c0 + CB : OUT;
        float acc[CB];
        for (int b = 0; b < nb; b++) {
            for (int j = c0; j < c1; j++) acc[j - c0] = 0;
            for (int q = 0; q < blk; q++) {
                int i = b * blk + (plant && b == 0 ? blk - 1 - q : q);
                for (int j = c0; j < c1; j++) acc[j - c0] = acc[j - c0] + D[(size_t)i * ld + j];
            }
            mdc_xsum_add(xs, off + (size_t)c0, acc, (size_t)(c1 - c0));
        }
    }
charge:
    charge(dev, 0, (double)nb * OUT, 4.0 * n * OUT + 0.5 * n * OUT);
}

void mdc_x_contract(mdc_device *dev, mdc_xsum *xs, const float *A, int lda, const float *W, int ldw, int transW, int n,
                    int K, int OUT, int kblk) {
    mdc_x_contract_at(dev, xs, 0, A, lda, W, ldw, transW, n, K, OUT, kblk);
}

void mdc_x_contract_at(mdc_device *dev, mdc_xsum *xs, size_t off, const float *A, int lda, const float *W, int ldw,
                       int transW, int n, int K, int OUT, int kblk) {
    double N = n, k = K, o = OUT;
    if (mdc_dev_dry(dev)) goto charge;
    /* W (K x OUT, row stride ldw) or, transW, its transpose is stored (OUT x K): packed once */
    float *packed = transW ? pack_transposed(W, ldw, K, OUT) : NULL;
    if (transW && !packed) {
        xs->oom = 1;
        return;
    }
    /* the rows are the tokens: A(k, i) = A[i lda + k] */
    if (tiled_blocks(xs, off, A, 1, (size_t)lda, packed ? packed : W, packed ? (size_t)OUT : (size_t)ldw, n, OUT, K,
                     kblk))
        xs->oom = 1;
    free(packed);
charge:
    charge(dev, N * k * o, (double)(K / kblk) * N * o, 4 * (N * k + k * o));
}

void mdc_x_layernorm_wgrad(mdc_device *dev, mdc_xsum *xs, size_t offw, size_t offb, const float *dout, const float *inp,
                           const float *mean, const float *rstd, int n, int C, int blk) {
    int nb = n / blk, ok = 1;
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *tmp = calloc(2 * (size_t)C, sizeof(float));
        if (!tmp) {
#pragma omp atomic write
            ok = 0;
        }
#pragma omp for schedule(static)
        for (int b = 0; b < nb; b++) {
            if (!tmp) continue;
            size_t r0 = (size_t)b * blk;
            memset(tmp, 0, 2 * (size_t)C * sizeof(float));
            mdc_layernorm_backward(NULL, NULL, tmp, tmp + C, dout + r0 * C, inp + r0 * C, NULL, mean + r0, rstd + r0,
                                   blk, C);
#pragma omp critical(mdc_x_layernorm)
            { /* the same elements from every block: one thread at a time (any order: exact) */
                mdc_xsum_add(xs, offw, tmp, (size_t)C);
                mdc_xsum_add(xs, offb, tmp + C, (size_t)C);
            }
        }
        free(tmp);
    }
    if (!ok) xs->oom = 1;
charge:
    charge(dev, 0, 2.0 * nb * C, 0);
    mdc_k_charge(dev, 7.0 * n * C, 4.0 * (2.0 * n * C + 2.0 * n));
}

void mdc_x_rmsnorm_wgrad(mdc_device *dev, mdc_xsum *xs, size_t offw, const float *dout, int ldo, const float *inp,
                         int ldx, const float *rstd, int n, int heads, int d, int blk) {
    int nb = n / blk, ok = 1;
    double u = (double)n * heads;
    /* a float partial per (token block, head): q_norm's heads are split over tp, so a partial
     * over several heads would have another rank's bits */
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *tmp = calloc((size_t)d + (size_t)blk, sizeof(float)), *rs = tmp + d;
        if (!tmp) {
#pragma omp atomic write
            ok = 0;
        }
#pragma omp for schedule(static)
        for (int bh = 0; bh < nb * heads; bh++) {
            if (!tmp) continue;
            size_t r0 = (size_t)(bh / heads) * blk, h = (size_t)(bh % heads);
            memset(tmp, 0, (size_t)d * sizeof(float));
            for (int i = 0; i < blk; i++) rs[i] = rstd[(r0 + i) * heads + h];
            mdc_rmsnorm_heads_backward(NULL, NULL, 0, tmp, dout + r0 * ldo + h * d, ldo, inp + r0 * ldx + h * d, ldx,
                                       NULL, rs, blk, 1, d);
#pragma omp critical(mdc_x_rmsnorm)
            mdc_xsum_add(xs, offw, tmp, (size_t)d); /* every block's into the same sums: exact in any order */
        }
        free(tmp);
    }
    if (!ok) xs->oom = 1;
charge:
    charge(dev, 0, (double)nb * heads * d, 0);
    mdc_k_charge(dev, 3.0 * u * d, 4.0 * (2.0 * u * d + u));
}

void mdc_x_embed(mdc_device *dev, mdc_xsum *xs, size_t off_wte, long off_wpe, const float *dout, const int *inp, int lo,
                 int rows, const int *pos, int B, int T, int C) {
    if (mdc_dev_dry(dev)) goto charge;
    /* one float per token and channel: the order of the tokens cannot matter */
    for (int bt = 0; bt < B * T; bt++) {
        int r = inp[bt] - lo;
        if (r >= 0 && r < rows) mdc_xsum_add(xs, off_wte + (size_t)r * C, dout + (size_t)bt * C, (size_t)C);
    }
    if (off_wpe >= 0)
#pragma omp parallel for schedule(static)
        for (int t = 0; t < T; t++)
            for (int b = 0; b < B; b++)
                mdc_xsum_add(xs, (size_t)off_wpe + (size_t)(pos ? pos[t] : t) * C, dout + ((size_t)b * T + t) * C,
                             (size_t)C);
charge:
    charge(dev, 0, 2.0 * B * T * C, 4.0 * B * T * C);
}

void mdc_x_sumexp(mdc_device *dev, mdc_exact *se, const float *logits, int ld, const float *mx, int n, int valid,
                  int vblk) {
    if (mdc_dev_dry(dev)) goto charge;
#pragma omp parallel
    {
        float *e = malloc(sizeof(float) * (size_t)(vblk > 0 ? vblk : 1));
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++) {
            mdc_exact_clear(&se[i]);
            if (!e) continue;
            const float *z = logits + (size_t)i * ld;
            for (int v0 = 0; v0 < valid; v0 += vblk) {
                int v1 = v0 + vblk < valid ? v0 + vblk : valid;
                for (int v = v0; v < v1; v++) e[v - v0] = mdc_k_exp(z[v] - mx[i]);
                float s = 0;
                for (int v = v0; v < v1; v++) s = s + e[v - v0];
                mdc_exact_add_f32(&se[i], s);
            }
        }
        free(e);
    }
charge:
    mdc_k_charge(dev, 3.0 * n * valid, 4.0 * n * valid);
}

void mdc_x_matmul(mdc_device *dev, float *out, const float *A, int lda, const float *W, int ldw, int transW,
                  const float *bias, int n, int K, int N) {
    double nn = n, kk = K, no = N;
    if (mdc_dev_dry(dev)) goto charge;
    const float *Bm = W;
    float *packed = NULL;
    size_t ldb = (size_t)ldw;
    if (transW) { /* W stored (N, K): its transpose packed once */
        packed = pack_transposed(W, ldw, K, N);
        if (!packed) { /* the same chains straight from W, one column at a time */
            for (int i = 0; i < n; i++)
                for (int j = 0; j < N; j++) {
                    float s = 0;
                    for (int k = 0; k < K; k++) s = s + A[(size_t)i * lda + k] * W[(size_t)j * ldw + k];
                    out[(size_t)i * N + j] = bias ? s + bias[j] : s;
                }
            return;
        }
        Bm = packed, ldb = (size_t)N;
    }
    int RT = tile_rows(N), tiles = (n + RT - 1) / RT;
#pragma omp parallel
    {
        float *ap = malloc(sizeof(float) * (size_t)K * (RT + TR));
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < tiles; t++) {
            int r0 = t * RT, rt = n - r0 < RT ? n - r0 : RT;
            float *o = out + (size_t)r0 * N;
            if (ap) block_gemm(o, ap, A + (size_t)r0 * lda, 1, (size_t)lda, Bm, ldb, rt, N, K);
            else
                for (int i = 0; i < rt; i++)
                    for (int j = 0; j < N; j++) {
                        float s = 0;
                        for (int k = 0; k < K; k++) s = s + A[(size_t)(r0 + i) * lda + k] * Bm[(size_t)k * ldb + j];
                        o[(size_t)i * N + j] = s;
                    }
            if (bias)
                for (int i = 0; i < rt; i++)
                    for (int j = 0; j < N; j++) o[(size_t)i * N + j] = o[(size_t)i * N + j] + bias[j];
        }
        free(ap);
    }
    free(packed);
charge:
    mdc_k_charge(dev, 2 * nn * kk * no + (bias ? nn * no : 0), 4 * (nn * kk + kk * no + nn * no));
}
