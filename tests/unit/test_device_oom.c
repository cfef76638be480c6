/* The HBM allocator: capacity enforced with a CUDA-like out-of-memory message (rank, device,
 * tensor, requested, in use, capacity, peak), per-category current and peak bytes, and
 * --hbm-scale shrinking capacity so small models meet real walls. */
#include "testutil.h"

#define GiB (1024.0 * 1024 * 1024)

int main(void) {
    mdc_device_options o;
    mdc_device_options_default(&o);
    char *args[] = {"prog", "--device", "a100-40", "--hbm-scale", "1e-3"};
    for (int i = 1; i < 5;) TU_CHECK(mdc_device_options_parse(&o, 5, args, &i) == 1, "parse %s", args[i]);
    TU_EQ_DBL(o.hbm_scale, 1e-3);
    mdc_device *d;
    MDC_CHECK(mdc_device_create(&d, &o, 3));
    double cap = 40 * GiB * 1e-3; /* 42949672.96 bytes */
    TU_EQ_DBL(mdc_device_capacity(d), cap);

    void *p = NULL, *g = NULL, *a = NULL, *q = NULL;
    MDC_CHECK(mdc_dev_alloc(d, &p, 20000000, MDC_MEM_PARAMS, "wte"));
    TU_CHECK(((uintptr_t)p & 63) == 0, "not 64-byte aligned: %p", p);
    TU_CHECK(((unsigned char *)p)[19999999] == 0, "not zeroed");
    MDC_CHECK(mdc_dev_alloc(d, &g, 20000000, MDC_MEM_GRADS, "wte.grad"));
    TU_CHECK(mdc_dev_mem_in_use(d, MDC_MEM_COUNT) == 40000000, "in use %zu", mdc_dev_mem_in_use(d, MDC_MEM_COUNT));
    /* 40000000 + 2949673 > 42949672.96: one byte too many */
    TU_STATUS(mdc_dev_alloc(d, &a, 2949673, MDC_MEM_ACTS, "blocks.0.attn.qkv"), MDC_ERR_OOM_DEVICE);
    TU_CHECK(a == NULL, "pointer set on failure");
    const char *m = mdc_detail();
    fprintf(stderr, "OOM message: %s\n", m);
    TU_CONTAINS(m, "rank 3");
    TU_CONTAINS(m, "a100-40");
    TU_CONTAINS(m, "blocks.0.attn.qkv");
    TU_CONTAINS(m, "2.81 MiB (2949673 bytes)"); /* requested */
    TU_CONTAINS(m, "38.15 MiB in use (40000000 bytes)");
    TU_CONTAINS(m, "40.96 MiB capacity (42949673 bytes)");
    TU_CONTAINS(m, "peak 38.15 MiB");
    TU_CONTAINS(m, "activations");
    TU_CONTAINS(mdc_hint(MDC_ERR_OOM_DEVICE), "--hbm-scale");
    /* exactly up to capacity fits (capacity is not an integer: 2949672 bytes fit) */
    MDC_CHECK(mdc_dev_alloc(d, &a, 2949672, MDC_MEM_ACTS, "blocks.0.attn.qkv"));
    mdc_dev_free(d, a);
    mdc_dev_free(d, g);
    MDC_CHECK(mdc_dev_alloc(d, &q, 1000, MDC_MEM_COMM, "ring.buf"));
    TU_CHECK(mdc_dev_mem_in_use(d, MDC_MEM_GRADS) == 0, "grads in use %zu", mdc_dev_mem_in_use(d, MDC_MEM_GRADS));
    TU_CHECK(mdc_dev_mem_peak(d, MDC_MEM_GRADS) == 20000000, "grads peak");
    TU_CHECK(mdc_dev_mem_peak(d, MDC_MEM_ACTS) == 2949672, "acts peak");
    TU_CHECK(mdc_dev_mem_peak(d, MDC_MEM_COUNT) == 42949672, "total peak %zu", mdc_dev_mem_peak(d, MDC_MEM_COUNT));
    TU_CHECK(mdc_dev_mem_in_use(d, MDC_MEM_COUNT) == 20001000, "in use");
    /* the peak in a later message is the high-water mark */
    TU_STATUS(mdc_dev_alloc(d, &a, (size_t)1 << 40, MDC_MEM_OPTIM, "adam.m"), MDC_ERR_OOM_DEVICE);
    TU_CONTAINS(mdc_detail(), "peak 40.96 MiB");
    TU_CONTAINS(mdc_detail(), "1024.00 GiB");
    TU_STATUS(mdc_dev_alloc(d, &a, 16, MDC_MEM_COUNT, "x"), MDC_ERR_INVALID);
    TU_STATUS(mdc_dev_alloc(d, &a, SIZE_MAX, MDC_MEM_OPTIM, "huge"), MDC_ERR_OOM_DEVICE);
    /* zero bytes is a valid, distinct allocation */
    void *z1, *z2;
    MDC_CHECK(mdc_dev_alloc(d, &z1, 0, MDC_MEM_OTHER, "empty"));
    MDC_CHECK(mdc_dev_alloc(d, &z2, 0, MDC_MEM_OTHER, "empty"));
    TU_CHECK(z1 && z2 && z1 != z2, "zero-size allocations");
    mdc_dev_free(d, NULL);
    /* p, q, z1, z2 are still live: mdc_device_free frees them (ASan checks) */
    mdc_device_free(d);

    /* an unscaled h100 does not run out for the same tensor */
    mdc_device_options_default(&o);
    MDC_CHECK(mdc_device_create(&d, &o, 0));
    TU_EQ_DBL(mdc_device_capacity(d), 80 * GiB);
    MDC_CHECK(mdc_dev_alloc(d, &a, 2949673, MDC_MEM_ACTS, "blocks.0.attn.qkv"));
    mdc_device_free(d);
    return tu_finish("test_device_oom");
}
