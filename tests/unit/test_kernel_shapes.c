/* The shapes of a product: exact mode's kernels give each element the same bits whatever the
 * call's shape (the rows a data rank holds, the columns a tp shard holds, the tile edges), and
 * OpenBLAS's own sgemm does not (the figure docs/exactness.md quotes is printed). Exits 1 on a
 * mismatch of the exact kernels. */
#include <cblas.h>

#include "testutil.h"

/* Exact mode's kernels give each element the same bits whatever the call's shape: the rows a
 * data rank holds, the columns (or column offset) a tp shard holds, the tile edges. Checked
 * for sub-blocks of a product, a weight gradient and a contraction against the whole call. */
static void test_exact_shapes(void) { /* no device: the cost checks count their own kernels */
    enum { N = 70, K = 96, M = 83 };
    float *A = malloc(sizeof(float) * N * K), *W = malloc(sizeof(float) * K * M), *full = malloc(sizeof(float) * N * M),
          *part = malloc(sizeof(float) * N * M), *bias = malloc(sizeof(float) * M);
    for (int i = 0; i < N * K; i++) A[i] = tu_frand();
    for (int i = 0; i < K * M; i++) W[i] = tu_frand() * 0.1f;
    for (int i = 0; i < M; i++) bias[i] = tu_frand();
    mdc_x_matmul(NULL, full, A, K, W, M, 0, bias, N, K, M);
    int bad = 0;
    const int r0[3] = {0, 3, 17}, nr[3] = {N, 5, 33}, c0[3] = {0, 16, 41}, nc[3] = {M, 16, 42};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) { /* rows r0.. (dp), columns c0.. (tp): W's columns as a strided slice */
            mdc_x_matmul(NULL, part, A + (size_t)r0[a] * K, K, W + c0[b], M, 0, bias + c0[b], nr[a], K, nc[b]);
            for (int i = 0; i < nr[a]; i++)
                for (int j = 0; j < nc[b]; j++)
                    bad += memcmp(&part[(size_t)i * nc[b] + j], &full[(size_t)(r0[a] + i) * M + c0[b] + j], 4) != 0;
        }
    TU_CHECK(bad == 0, "mdc_x_matmul: %d elements depend on the call's shape", bad);
    /* weight gradient over token blocks: a column slice of dout gives the same columns */
    mdc_xsum xf, xp;
    TU_CHECK(!mdc_xsum_init(&xf, (size_t)K * M) && !mdc_xsum_init(&xp, (size_t)K * M), "xsum");
    float *D = malloc(sizeof(float) * N * M);
    for (int i = 0; i < N * M; i++) D[i] = tu_frand();
    mdc_x_wgrad(NULL, &xf, 0, A, K, D, M, 70, K, M, 10);
    mdc_x_wgrad(NULL, &xp, 0, A, K, D + 41, M, 70, K, 42, 10);
    float *gf = malloc(sizeof(float) * K * M), *gp = malloc(sizeof(float) * K * M);
    mdc_xsum_round(&xf, 0, (size_t)K * M, gf);
    mdc_xsum_round(&xp, 0, (size_t)K * 42, gp);
    bad = 0;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < 42; j++) bad += memcmp(&gp[(size_t)i * 42 + j], &gf[(size_t)i * M + 41 + j], 4) != 0;
    TU_CHECK(bad == 0, "mdc_x_wgrad: %d elements depend on the shard's columns", bad);
    /* blocks split over two calls (two ranks, two micro-batches) add to the same exact sums */
    mdc_xsum_clear(&xp);
    mdc_x_wgrad(NULL, &xp, 0, A, K, D, M, 30, K, M, 10);
    mdc_x_wgrad(NULL, &xp, 0, A + 30 * K, K, D + 30 * M, M, 40, K, M, 10);
    mdc_xsum_round(&xp, 0, (size_t)K * M, gp);
    TU_CHECK(!memcmp(gp, gf, sizeof(float) * K * M), "mdc_x_wgrad: blocks split over calls give other bits");
    mdc_xsum_free(&xf), mdc_xsum_free(&xp);
    free(A), free(W), free(full), free(part), free(bias), free(D), free(gf), free(gp);
}

/* Why exact mode has its own kernel (docs/exactness.md): OpenBLAS's bits for an element of
 * C = A^T B depend on the call that computes it. Measured, not asserted (it is OpenBLAS's
 * business): sub-blocks at the row counts, widths and offsets that tp shards and row tiles make,
 * compared with the whole call. */
static void openblas_shapes(void) {
    enum { IN = 256, OUT = 1024 };
    const int Ks[2] = {16, 128}, ris[6] = {1, 3, 16, 32, 48, 100}, outs[7] = {1024, 512, 341, 256, 128, 96, 17};
    float *A = malloc(sizeof(float) * 128 * IN), *B = malloc(sizeof(float) * 128 * OUT),
          *C = malloc(sizeof(float) * IN * OUT), *D = malloc(sizeof(float) * IN * OUT);
    for (int q = 0; q < 2; q++) {
        int K = Ks[q];
        long diff = 0, cmp = 0;
        for (int i = 0; i < K * IN; i++) A[i] = tu_frand();
        for (int i = 0; i < K * OUT; i++) B[i] = tu_frand() * 1e-3f;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, IN, OUT, K, 1, A, IN, B, OUT, 0, C, OUT);
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 7; b++)
                for (int o = 0; o < 3; o++) {
                    int ri = ris[a], oc = outs[b], i0 = o * 5, j0 = o * 7;
                    if (i0 + ri > IN || j0 + oc > OUT) continue;
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ri, oc, K, 1, A + i0, IN, B + j0, OUT, 0, D,
                                oc);
                    for (int i = 0; i < ri; i++)
                        for (int j = 0; j < oc; j++, cmp++)
                            diff += memcmp(&D[i * oc + j], &C[(i0 + i) * OUT + j0 + j], 4) != 0;
                }
        printf("test_kernel_shapes: OpenBLAS, C = A^T B with K = %d: %ld of %ld elements of sub-block calls differ "
               "from the "
               "whole call's bits\n",
               K, diff, cmp);
    }
    free(A), free(B), free(C), free(D);
}

int main(void) {
    test_exact_shapes();
    openblas_shapes();
    return tu_finish("test_kernel_shapes");
}
