/* The fixed-partition sgemm every matrix product goes through, and the thread set-up.
 *
 * OpenBLAS's value for an output element depends on how the product is cut into calls (its
 * micro-kernel edges and K blocking differ), so splitting by thread count would make the bits
 * depend on the thread count. Here the cut depends only on M, N: the larger output dimension
 * is split into nb in {2,4,6,8} blocks of >= MIN_BLOCK rows/columns (a multiple of 16; 2
 * blocks when the dimension is under 2 MIN_BLOCK but >= 128), and OpenMP hands the blocks out.
 * Splitting the larger dimension re-packs the smaller operand once per block, the cheaper of
 * the two. Measured on gpt2's shapes (1024 x 768 x 2304, ...), 12 blocks of ~192 ran 10-15%
 * slower per core than 2-6 blocks of >= 384, hence the large minimum.
 * FLOPs and bytes are charged by the calling kernel, not here. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include "../device/platform.h"
#include "internal.h"

void openblas_set_num_threads(int n); /* declared by some cblas.h, not all */
char *openblas_get_corename(void);

void mdc_kernels_fix_blas_core(char **argv) {
    if (getenv("OPENBLAS_CORETYPE") || getenv("MINIDC_NO_REEXEC")) return;
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "Prescott")) return;
    const char *want = NULL;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    want = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
#endif
    char exe[4096];
    if (!want || mdc_plat_exe_path(exe, sizeof exe)) return; /* (no path to re-execute: run on) */
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv(exe, argv);
    unsetenv("OPENBLAS_CORETYPE"); /* exec failed: run on */
}

enum { MIN_BLOCK = 384 };

int mdc_kernels_init(void) {
    static int done;
    if (!done) {
        openblas_set_num_threads(1);
        done = 1;
    }
    return omp_get_max_threads();
}

static int block_count(int dim) {
    static const int opts[] = {8, 6, 4, 2};
    for (int i = 0; i < 4; i++)
        if (dim / opts[i] >= MIN_BLOCK) return opts[i];
    return dim >= 128 ? 2 : 1;
}

void mdc_k_sgemm1(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                  int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { /* cblas would scale C by beta; match that */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0 ? 0 : beta * C[(size_t)i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                A, lda, B, ldb, beta, C, ldc);
}

/* K much larger than M and N (the LM head's dinp = dlogits @ wte, K = Vp): splitting M or N
 * would re-pack a K-long operand per block, so K is cut into KSPLIT fixed chunks whose
 * partial products are added in chunk order. */
enum { KSPLIT = 4 };
static int ksplit(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                  int ldb, float beta, float *C, int ldc) {
    size_t mn = (size_t)M * N;
    float *part = malloc(sizeof(float) * mn * (KSPLIT - 1));
    if (!part) return 0;
    int ks = ((K + KSPLIT - 1) / KSPLIT + 15) / 16 * 16;
#pragma omp parallel for schedule(dynamic, 1) if (!omp_in_parallel())
    for (int kb = 0; kb < KSPLIT; kb++) {
        int k0 = kb * ks, k = K - k0 < ks ? K - k0 : ks;
        if (k < 0) k = 0;
        const float *a = transA ? A + (size_t)k0 * lda : A + k0;
        const float *b = transB ? B + k0 : B + (size_t)k0 * ldb;
        if (kb == 0) mdc_k_sgemm1(transA, transB, M, N, k, alpha, a, lda, b, ldb, beta, C, ldc);
        else mdc_k_sgemm1(transA, transB, M, N, k, alpha, a, lda, b, ldb, 0.0f, part + (kb - 1) * mn, N);
    }
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
    for (int i = 0; i < M; i++)
        for (int kb = 1; kb < KSPLIT; kb++) {
            const float *p = part + (kb - 1) * mn + (size_t)i * N;
            float *c = C + (size_t)i * ldc;
            for (int j = 0; j < N; j++) c[j] += p[j];
        }
    free(part);
    return 1;
}

void mdc_k_sgemm(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc) {
    mdc_kernels_init();
    if (K >= 8 * (M > N ? M : N) && K >= 4096 && ksplit(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    int split_rows = M >= N;
    int dim = split_rows ? M : N;
    int nb = block_count(dim);
    if (nb == 1) {
        mdc_k_sgemm1(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int bs = ((dim + nb - 1) / nb + 15) / 16 * 16;
    nb = (dim + bs - 1) / bs;
#pragma omp parallel for schedule(dynamic, 1) if (!omp_in_parallel())
    for (int ib = 0; ib < nb; ib++) {
        int i0 = ib * bs, n = dim - i0 < bs ? dim - i0 : bs;
        if (split_rows) {
            const float *a = transA ? A + i0 : A + (size_t)i0 * lda;
            mdc_k_sgemm1(transA, transB, n, N, K, alpha, a, lda, B, ldb, beta, C + (size_t)i0 * ldc, ldc);
        } else {
            const float *b = transB ? B + (size_t)i0 * ldb : B + i0;
            mdc_k_sgemm1(transA, transB, M, n, K, alpha, A, lda, b, ldb, beta, C + i0, ldc);
        }
    }
}
