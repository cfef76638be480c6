/* The `host` preset: this machine measured as if it were a GPU.
 *
 * Measured once per process (about 0.1 s): memory bandwidth by memcpy of a 32 MiB buffer
 * (bytes read + bytes written over the best time of 3), and peak sgemm FLOP/s with OpenBLAS on
 * 2 threads (2 n^3 over the best time of 3, n = 512). Capacity is the physical RAM, on-chip
 * SRAM the last-level cache. Everything else (links, TDP, bus) is a stated assumption, marked
 * in `assumed` and explained in docs/devices.md. mdc_runtime_init has rank 0 measure and send
 * its figures to every rank (mdc_host_spec_set), so all ranks of a run agree. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "minidc/device.h"

#define COPY_BYTES (32u << 20)
#define GEMM_N 512

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static mdc_device_spec host;
static int host_set; /* host holds a measured or installed spec */
static mdc_status host_st = MDC_OK;
static char host_err[256]; /* why measuring failed */

/* memcpy through a volatile pointer: buffers freed unread let a compiler (clang does) drop a
 * plain memcpy, and the measurement would time nothing. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

/* Best-of-3 memcpy: returns bytes moved (read + write) per second, or 0 on failure. */
static double measure_copy(void) {
    char *a = malloc(COPY_BYTES), *b = malloc(COPY_BYTES);
    double best = 0;
    if (a && b) {
        memset(a, 1, COPY_BYTES);
        memset(b, 2, COPY_BYTES); /* touch every page before timing */
        for (int rep = 0; rep < 3; rep++) {
            double t0 = mdc_wall_time();
            copy_fn(rep & 1 ? a : b, rep & 1 ? b : a, COPY_BYTES);
            double t = mdc_wall_time() - t0;
            double bw = 2.0 * COPY_BYTES / t;
            if (t > 0 && bw > best) best = bw;
        }
    }
    free(a);
    free(b);
    return best;
}

/* Best-of-3 sgemm on 2 OpenBLAS threads: FLOP/s, or 0 on failure. Restores the thread count. */
static double measure_sgemm(void) {
    size_t n = GEMM_N;
    float *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = malloc(n * n * sizeof *c);
    double best = 0;
    if (a && b && c) {
        for (size_t i = 0; i < n * n; i++) {
            a[i] = (float)(i % 7) * 0.25f;
            b[i] = (float)(i % 5) * 0.5f;
        }
        int threads = openblas_get_num_threads();
        openblas_set_num_threads(2);
        for (int rep = 0; rep < 4; rep++) { /* the first run warms up threads and caches */
            double t0 = mdc_wall_time();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n,
                        0.0f, c, (int)n);
            double t = mdc_wall_time() - t0;
            double f = 2.0 * (double)n * (double)n * (double)n / t;
            if (rep > 0 && t > 0 && f > best) best = f;
        }
        openblas_set_num_threads(threads);
    }
    free(a);
    free(b);
    free(c);
    return best;
}

static void measure(void) {
    mdc_device_spec s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "host");
    snprintf(s.description, sizeof s.description, "this machine, measured (memcpy, 2-thread sgemm)");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    double bw = measure_copy(), fl = measure_sgemm();
    if (pages <= 0 || page <= 0 || !(bw > 0) || !(fl > 0)) {
        host_st = MDC_ERR_UNSUPPORTED;
        snprintf(host_err, sizeof host_err,
                 "--device host: could not measure this machine "
                 "(pages %ld, copy %.3g B/s, sgemm %.3g FLOP/s)",
                 pages, bw, fl);
        return;
    }
    s.hbm_bytes = (double)pages * (double)page;
    s.hbm_bw = bw;
    snprintf(s.hbm_gen, sizeof s.hbm_gen, "DDR");
    s.hbm_bus_bits_per_stack = 64; /* one DIMM channel */
    s.hbm_stacks = 2;              /* assumed: two channels */
    s.flops_fp32 = fl;
    s.flops_bf16 = fl; /* assumed: no faster 16-bit path used */
    s.sram_bytes = llc > 0 ? (double)llc : 32.0 * 1024 * 1024;
    s.nvlink_bw = bw / 2; /* ranks on one host talk through shared memory: one copy */
    s.nvlink_latency = 1e-6;
    s.net_bw = 1.25e9; /* assumed: 10 Gb/s Ethernet */
    s.net_latency = 20e-6;
    s.pcie_bw = bw / 2; /* host "device" copies are memcpy */
    s.launch_overhead = 1e-6;
    s.tdp_watts = 65;
    s.assumed = MDC_SPEC_HBM_BUS | MDC_SPEC_FLOPS_BF16 | MDC_SPEC_NVLINK | MDC_SPEC_NET | MDC_SPEC_PCIE | MDC_SPEC_TDP |
                MDC_SPEC_LATENCY | (llc > 0 ? 0 : MDC_SPEC_SRAM);
    host = s;
    host_set = 1;
}

static void measure_once(void) {
    pthread_mutex_lock(&lock);
    if (!host_set) measure();
    pthread_mutex_unlock(&lock);
}

mdc_status mdc_host_spec(mdc_device_spec *out) {
    pthread_once(&once, measure_once);
    pthread_mutex_lock(&lock);
    mdc_status st = host_set ? MDC_OK : host_st;
    if (host_set) *out = host;
    pthread_mutex_unlock(&lock);
    if (st) mdc_fail(st, "%s", host_err);
    return st;
}

void mdc_host_spec_set(const mdc_device_spec *s) {
    pthread_mutex_lock(&lock);
    host = *s;
    host_set = 1;
    pthread_mutex_unlock(&lock);
}
