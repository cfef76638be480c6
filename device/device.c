/* The emulated device: HBM allocator, virtual clock and energy ledger.
 *
 * Clock rules (docs/devices.md):
 *   kernel:  t = max(flops / peak, hbm_bytes / hbm_bw) + launch_overhead
 *   copy:    t = latency + bytes / bw of the link
 *   message: depart = max(now, egress_free); done = depart + bytes / bw;
 *            arrive = done + latency; the receiver's clock = max(own, arrive).
 * Accounting is a handful of adds per call; throttle mode also waits the modeled time. */
#include "minidc/device.h"
#include "trace_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dry_internal.h"
#include "platform.h"

#define ALIGN 64

/* Each allocation is preceded by this header (padded to ALIGN bytes). */
typedef struct alloc_hdr {
    struct alloc_hdr *prev, *next;
    size_t bytes, held; /* charged; held in host memory (more for a 16-bit tensor kept as floats) */
    int cat, dry;       /* dry: mapped by mdc_i_dry_map */
    char name[24];
} alloc_hdr;

struct mdc_device {
    mdc_device_spec spec;
    mdc_energy_table energy;
    double capacity;
    mdc_emulate_mode mode;
    double time_scale;
    int dtype_bytes; /* the run's activations and compute weights: 4 or 2 (mdc_dev_set_dtype) */
    int half;        /* the kernels' 16-bit rounding: 0, 1 bf16, 2 fp16 (mdc_dev_set_half) */
    int rank;
    int dry;                   /* predict's accounting-only mode (mdc_dev_set_dry) */
    int traffic;               /* the class of the messages charged next (mdc_dev_set_traffic) */
    int optimizer;             /* the optimizer runs (mdc_dev_set_optimizer) */
    mdc_device_efficiency eff; /* the spec's under --efficiency achievable, else the peak model */
    int achievable;            /* the achievable model: a kernel's passes timed one by one */
    size_t in_use[MDC_MEM_COUNT + 1], peak[MDC_MEM_COUNT + 1];
    alloc_hdr *allocs;
    double egress_free[MDC_LINK_COUNT];
    mdc_dev_counters c;
    mdc_dev_trace *trace; /* NULL: not recording (device/trace.c) */
    alloc_hdr *cache[16]; /* freed large blocks kept for reuse (cache_take, cache_put) */
};

/* Large blocks freed are kept for the next allocation of the same size, as a GPU framework's
 * caching allocator keeps them: a MoE step allocates and frees its routed rows every step, and the
 * host would otherwise map, fault in and unmap them each time. Host memory only: the emulated HBM
 * counts a block from its mdc_dev_alloc to its mdc_dev_free either way. Off under AddressSanitizer,
 * whose use-after-free checks need the memory returned. */
#if defined(__SANITIZE_ADDRESS__)
#define CACHE_ON 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CACHE_ON 0
#endif
#endif
#ifndef CACHE_ON
#define CACHE_ON 1
#endif
enum { CACHE_MIN = 1 << 20, CACHE_SLOTS = 16 };
static size_t padded_of(size_t bytes) { return bytes ? (bytes + ALIGN - 1) / ALIGN * ALIGN : ALIGN; }
static alloc_hdr *cache_take(mdc_device *dev, size_t padded) {
    for (int i = 0; CACHE_ON && padded >= CACHE_MIN && i < CACHE_SLOTS; i++)
        if (dev->cache[i] && padded_of(dev->cache[i]->held) == padded) {
            alloc_hdr *h = dev->cache[i];
            dev->cache[i] = NULL;
            return h;
        }
    return NULL;
}
static int cache_put(mdc_device *dev, alloc_hdr *h) { /* at most 1 GiB kept */
    size_t kept = padded_of(h->held), p = kept;
    for (int i = 0; i < CACHE_SLOTS; i++) kept += dev->cache[i] ? padded_of(dev->cache[i]->held) : 0;
    for (int i = 0; CACHE_ON && p >= CACHE_MIN && kept <= ((size_t)1 << 30) && i < CACHE_SLOTS; i++)
        if (!dev->cache[i]) return dev->cache[i] = h, 1;
    return 0;
}

_Static_assert(sizeof(alloc_hdr) <= ALIGN, "allocation header must fit in the alignment");

static const char *const cat_names[MDC_MEM_COUNT] = {
    [MDC_MEM_PARAMS] = "parameters", [MDC_MEM_GRADS] = "gradients",   [MDC_MEM_OPTIM] = "optimizer",
    [MDC_MEM_ACTS] = "activations",  [MDC_MEM_COMM] = "comm buffers", [MDC_MEM_OTHER] = "other",
};
static const char *const link_names[MDC_LINK_COUNT] = {
    [MDC_LINK_NVLINK] = "nvlink",
    [MDC_LINK_NET] = "network",
    [MDC_LINK_PCIE] = "pcie",
};

const char *mdc_mem_category_name(mdc_mem_category c) { return (unsigned)c < MDC_MEM_COUNT ? cat_names[c] : "total"; }
const char *mdc_link_name(mdc_link l) { return (unsigned)l < MDC_LINK_COUNT ? link_names[l] : "?"; }

double mdc_wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void mdc_wait_wall(double seconds) {
    /* An infinite or NaN wait (a virtual clock that overflowed) cannot be honoured: waiting
     * forever would only hang the run, so it returns at once and the report shows the clock.
     * A finite wait is capped at MDC_WAIT_WALL_MAX_S: no single modeled interval of a sane
     * device and --time-scale comes near an hour, and past it the run would look hung. */
    if (!(seconds > 0) || !isfinite(seconds)) return;
    if (seconds > MDC_WAIT_WALL_MAX_S) seconds = MDC_WAIT_WALL_MAX_S;
    double end = mdc_wall_time() + seconds;
    /* Sleep for all but the last 100 us, then spin: sleeps overshoot by tens of us. */
    for (;;) {
        double left = end - mdc_wall_time();
        if (left <= 0) return;
        if (left > 150e-6) {
            double s = left - 100e-6; /* <= the cap, so the casts below are defined */
            struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
}

mdc_status mdc_device_create_spec(mdc_device **out, const mdc_device_spec *spec, const mdc_energy_table *table,
                                  double hbm_scale, mdc_emulate_mode mode, double time_scale, int rank) {
    *out = NULL;
    if (!spec || !table) return mdc_fail(MDC_ERR_INVALID, "mdc_device_create_spec: NULL spec or table");
    if (!(hbm_scale > 0)) return mdc_fail(MDC_ERR_INVALID, "--hbm-scale must be > 0 (got %g)", hbm_scale);
    /* bounded: at 1e6 a virtual millisecond already waits 17 minutes of wall time */
    if (!(time_scale > 0) || !(time_scale <= 1e6))
        return mdc_fail(MDC_ERR_INVALID, "--time-scale %g: must be in (0, 1e6] wall seconds per virtual second",
                        time_scale);
    if (!isfinite(hbm_scale)) return mdc_fail(MDC_ERR_INVALID, "--hbm-scale must be finite (got %g)", hbm_scale);
    /* Every divisor of the clock must be a positive finite number. */
    const struct {
        const char *name;
        double v;
    } must[] = {
        {"hbm_bytes", spec->hbm_bytes},   {"hbm_bw", spec->hbm_bw},       {"flops_fp32", spec->flops_fp32},
        {"flops_bf16", spec->flops_bf16}, {"nvlink_bw", spec->nvlink_bw}, {"net_bw", spec->net_bw},
        {"pcie_bw", spec->pcie_bw},
    };
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        if (!(must[i].v > 0) || !isfinite(must[i].v))
            return mdc_fail(MDC_ERR_INVALID, "device '%s': %s must be > 0 and finite (got %g)", spec->name,
                            must[i].name, must[i].v);
    const double lat[] = {spec->nvlink_latency, spec->net_latency, spec->launch_overhead};
    for (int i = 0; i < 3; i++)
        if (!(lat[i] >= 0) || !isfinite(lat[i]))
            return mdc_fail(MDC_ERR_INVALID, "device '%s': latencies must be >= 0 and finite", spec->name);
    mdc_device *d = calloc(1, sizeof *d);
    if (!d) return mdc_fail(MDC_ERR_OOM_HOST, "device");
    d->spec = *spec;
    d->energy = *table;
    d->capacity = spec->hbm_bytes * hbm_scale;
    d->mode = mode;
    d->dtype_bytes = 4;
    mdc_dev_set_achievable(d, 0);
    d->time_scale = time_scale;
    d->rank = rank;
    /* Throttled sleeps must end on time: the default 50 us timer slack would add to each. */
    if (mode == MDC_EMULATE_THROTTLE) mdc_plat_short_sleeps();
    *out = d;
    return MDC_OK;
}

void mdc_device_free(mdc_device *dev) {
    if (!dev) return;
    while (dev->allocs) mdc_dev_free(dev, (char *)dev->allocs + ALIGN);
    for (int i = 0; i < CACHE_SLOTS; i++) free(dev->cache[i]);
    mdc_i_trace_free(dev->trace);
    free(dev);
}

const mdc_device_spec *mdc_device_get_spec(const mdc_device *dev) { return &dev->spec; }
const mdc_energy_table *mdc_device_get_energy_table(const mdc_device *dev) { return &dev->energy; }
int mdc_device_rank(const mdc_device *dev) { return dev->rank; }
void mdc_dev_set_rank(mdc_device *dev, int rank) { dev->rank = rank; }
double mdc_device_capacity(const mdc_device *dev) { return dev->capacity; }
mdc_emulate_mode mdc_device_mode(const mdc_device *dev) { return dev->mode; }

static void fmt_bytes(char *buf, size_t n, double b) {
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, n, "%.2f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0) snprintf(buf, n, "%.2f KiB", b / 1024.0);
    else snprintf(buf, n, "%.0f B", b);
}

mdc_status mdc_dev_alloc(mdc_device *dev, void **out, size_t bytes, mdc_mem_category cat, const char *name) {
    return mdc_dev_alloc_held(dev, out, bytes, bytes, cat, name);
}

mdc_status mdc_dev_alloc_held(mdc_device *dev, void **out, size_t held, size_t bytes, mdc_mem_category cat,
                              const char *name) {
    *out = NULL;
    if ((unsigned)cat >= MDC_MEM_COUNT)
        return mdc_fail(MDC_ERR_INVALID, "mdc_dev_alloc: bad category %d for '%s'", (int)cat, name ? name : "?");
    size_t total = dev->in_use[MDC_MEM_COUNT];
    /* a dry device never refuses: predict compares the peak with the capacity afterwards */
    if ((!dev->dry && (double)total + (double)bytes > dev->capacity) || held > SIZE_MAX - 2 * ALIGN) {
        char req[32], used[32], cap[32], pk[32], fr[32];
        fmt_bytes(fr, sizeof fr, dev->capacity - (double)total);
        fmt_bytes(req, sizeof req, (double)bytes);
        fmt_bytes(used, sizeof used, (double)total);
        fmt_bytes(cap, sizeof cap, dev->capacity);
        fmt_bytes(pk, sizeof pk, (double)dev->peak[MDC_MEM_COUNT]);
        return mdc_fail(MDC_ERR_OOM_DEVICE,
                        "rank %d: out of memory on emulated device %s: tried to allocate %s "
                        "(%zu bytes) for tensor '%s' (%s); %s in use (%zu bytes), %s capacity "
                        "(%.0f bytes), %s free, peak %s",
                        dev->rank, dev->spec.name, req, bytes, name ? name : "?", cat_names[cat], used, total, cap,
                        dev->capacity, fr, pk);
    }
    size_t padded = padded_of(held);
    int dry = dev->dry && held >= MDC_DRY_BACKED_MAX;
    alloc_hdr *h = dry ? mdc_i_dry_map(padded, ALIGN) : cache_take(dev, padded);
    if (!h && !dry) h = aligned_alloc(ALIGN, ALIGN + padded);
    if (!h)
        return mdc_fail(MDC_ERR_OOM_HOST, "rank %d: host %s of %zu bytes for '%s' failed", dev->rank,
                        dry ? "mapping" : "malloc", held, name ? name : "?");
    memset(h, 0, dry ? ALIGN : ALIGN + padded);
    h->dry = dry;
    h->bytes = bytes, h->held = held;
    h->cat = cat;
    snprintf(h->name, sizeof h->name, "%s", name ? name : "");
    h->next = dev->allocs;
    if (dev->allocs) dev->allocs->prev = h;
    dev->allocs = h;
    dev->in_use[cat] += bytes;
    dev->in_use[MDC_MEM_COUNT] += bytes;
    if (dev->in_use[cat] > dev->peak[cat]) dev->peak[cat] = dev->in_use[cat];
    if (dev->in_use[MDC_MEM_COUNT] > dev->peak[MDC_MEM_COUNT]) dev->peak[MDC_MEM_COUNT] = dev->in_use[MDC_MEM_COUNT];
    *out = (char *)h + ALIGN;
    return MDC_OK;
}

void mdc_dev_free(mdc_device *dev, void *ptr) {
    if (!ptr) return;
    alloc_hdr *h = (alloc_hdr *)((char *)ptr - ALIGN);
    if (h->prev) h->prev->next = h->next;
    else dev->allocs = h->next;
    if (h->next) h->next->prev = h->prev;
    dev->in_use[h->cat] -= h->bytes;
    dev->in_use[MDC_MEM_COUNT] -= h->bytes;
    if (h->dry) mdc_i_dry_unmap(h, padded_of(h->held), ALIGN);
    else if (!cache_put(dev, h)) free(h);
}

size_t mdc_dev_mem_in_use(const mdc_device *dev, mdc_mem_category cat) {
    return (unsigned)cat <= MDC_MEM_COUNT ? dev->in_use[cat] : 0;
}
void mdc_dev_mem_reset_peak(mdc_device *dev) {
    for (int k = 0; k <= MDC_MEM_COUNT; k++) dev->peak[k] = dev->in_use[k];
}

size_t mdc_dev_mem_peak(const mdc_device *dev, mdc_mem_category cat) {
    return (unsigned)cat <= MDC_MEM_COUNT ? dev->peak[cat] : 0;
}

/* ---- charging ---------------------------------------------------------------------------- */

static void throttle(mdc_device *dev, double t) {
    if (dev->mode == MDC_EMULATE_THROTTLE) mdc_wait_wall(t * dev->time_scale);
}

static double link_bw(const mdc_device *dev, mdc_link l) {
    return l == MDC_LINK_NVLINK ? dev->spec.nvlink_bw * dev->eff.nvlink
           : l == MDC_LINK_NET  ? dev->spec.net_bw * dev->eff.net
                                : dev->spec.pcie_bw;
}

void mdc_dev_set_achievable(mdc_device *dev, int on) {
    static const mdc_device_efficiency peak = {1, 0, 1, 0, 1, 1};
    const mdc_device_efficiency *e = &dev->spec.eff;
    int valid = e->gemm > 0 && e->gemm <= 1 && e->mem > 0 && e->mem <= 1 && e->nvlink > 0 && e->nvlink <= 1 &&
                e->net > 0 && e->net <= 1 && e->gemm_half >= 0 && e->mem_half >= 0;
    dev->eff = on && valid ? *e : peak;
    dev->achievable = on && valid;
}
int mdc_dev_achievable(const mdc_device *dev) { return dev->achievable; }
static double link_latency(const mdc_device *dev, mdc_link l) {
    /* PCIe latency is not in the spec: assume the NVLink figure (docs/devices.md). */
    return l == MDC_LINK_NET ? dev->spec.net_latency : dev->spec.nvlink_latency;
}

void mdc_dev_set_dtype(mdc_device *dev, int bytes) { dev->dtype_bytes = bytes == 2 ? 2 : 4; }
void mdc_dev_set_half(mdc_device *dev, int kind) { dev->half = kind; }
int mdc_dev_half(const mdc_device *dev) { return dev ? dev->half : 0; }
int mdc_dev_dtype(const mdc_device *dev) { return dev->dtype_bytes; }
static const char *const traffic_names[MDC_TRAFFIC_COUNT] = {
    [MDC_TRAFFIC_OTHER] = "other", [MDC_TRAFFIC_TP] = "tp", [MDC_TRAFFIC_CP] = "cp",
    [MDC_TRAFFIC_EP] = "ep",       [MDC_TRAFFIC_DP] = "dp", [MDC_TRAFFIC_PP] = "pp",
};
const char *mdc_traffic_name(mdc_traffic k) { return (unsigned)k < MDC_TRAFFIC_COUNT ? traffic_names[k] : "?"; }
void mdc_dev_set_traffic(mdc_device *dev, mdc_traffic k) {
    dev->traffic = (unsigned)k < MDC_TRAFFIC_COUNT ? (int)k : 0;
}
void mdc_dev_set_optimizer(mdc_device *dev, int on) { dev->optimizer = on != 0; }
void mdc_dev_set_dry(mdc_device *dev, int on) { dev->dry = on != 0; }
int mdc_dev_dry(const mdc_device *dev) { return dev && dev->dry; }

#undef mdc_dev_kernel
void mdc_dev_kernel(mdc_device *dev, double flops, double hbm_bytes, mdc_precision prec) {
    mdc_dev_kernel_named(dev, NULL, flops, hbm_bytes, prec);
}

/* One roofline's compute and memory times. The achievable model's matrix-product fraction and
 * half-efficiency size apply to GEMMs (tensor cores, or an fp32 run's sgemm); an elementwise
 * kernel's few FLOPs run at the vector units' peak. */
static void roofline_times(const mdc_device *dev, double flops, double hbm_bytes, double peak, int gemm, double *tc,
                           double *tm) {
    const mdc_device_efficiency *e = &dev->eff; /* the peak model: tc = flops / peak, tm = bytes / bw */
    *tc = flops <= 0 ? 0 : gemm ? (flops + e->gemm_half) / (peak * e->gemm) : flops / peak;
    *tm = hbm_bytes > 0 ? (hbm_bytes + e->mem_half) / (dev->spec.hbm_bw * e->mem) : 0;
}

/* One roofline: adds its time to the compute or memory class and returns it. */
static double roofline(mdc_device *dev, double flops, double hbm_bytes, double peak, int gemm) {
    double tc, tm;
    roofline_times(dev, flops, hbm_bytes, peak, gemm, &tc, &tm);
    double t = (tc >= tm ? tc : tm) + dev->spec.launch_overhead;
    if (tc >= tm) dev->c.t_compute += t;
    else dev->c.t_memory += t;
    return t;
}

double mdc_dev_link_bw(const mdc_device *dev, mdc_link link) { return link_bw(dev, link); }
double mdc_dev_link_latency(const mdc_device *dev, mdc_link link) { return link_latency(dev, link); }

double mdc_dev_reduce_seconds(const mdc_device *dev, double elems, double elem_bytes) {
    double tc, tm; /* as mdc_dev_reduce: an fp32 elementwise kernel of elems ops moving 3 elems elem_bytes */
    roofline_times(dev, elems, 3.0 * elems * elem_bytes, dev->spec.flops_fp32, 0, &tc, &tm);
    return (tc >= tm ? tc : tm) + dev->spec.launch_overhead;
}

void mdc_dev_comm_until(mdc_device *dev, double until, double bytes_sent, double messages, mdc_link link) {
    if (dev->mode == MDC_EMULATE_OFF) return;
    dev->c.link_bytes[link] += bytes_sent;
    dev->c.messages_sent += messages;
    dev->c.bytes_sent += bytes_sent;
    if (until <= dev->c.now) return;
    double t = until - dev->c.now;
    if (dev->trace) mdc_i_trace_add(dev->trace, MDC_TRACE_SEND, NULL, dev->c.now, until, bytes_sent, link);
    dev->c.t_comm += t;
    dev->c.t_comm_by[dev->traffic] += t;
    dev->c.now = until;
    throttle(dev, t);
}

void mdc_dev_kernel_passes(mdc_device *dev, const char *name, double flops, double hbm_bytes, int npass,
                           const mdc_kernel_pass *pass, mdc_precision prec) {
    if (dev->mode == MDC_EMULATE_OFF) return;
    double scale = 1;
    int gemm = prec == MDC_PREC_GEMM || prec == MDC_PREC_BF16;
    if (prec == MDC_PREC_RUN || prec == MDC_PREC_GEMM) {
        scale = dev->dtype_bytes / 4.0;
        prec = prec == MDC_PREC_GEMM && dev->dtype_bytes == 2 ? MDC_PREC_BF16 : MDC_PREC_FP32;
    }
    hbm_bytes *= scale;
    double peak = prec == MDC_PREC_BF16 ? dev->spec.flops_bf16 : dev->spec.flops_fp32, t = 0;
    if (dev->achievable && npass > 0)
        for (int i = 0; i < npass; i++)
            t += roofline(dev, pass[i].flops, pass[i].hbm_bytes * scale, pass[i].gemm ? peak : dev->spec.flops_fp32,
                          gemm && pass[i].gemm);
    else t = roofline(dev, flops, hbm_bytes, peak, gemm);
    if (dev->optimizer) dev->c.t_optimizer += t;
    if (dev->trace) mdc_i_trace_add(dev->trace, MDC_TRACE_KERNEL, name, dev->c.now, dev->c.now + t, flops, hbm_bytes);
    dev->c.now += t;
    dev->c.flops += flops;
    dev->c.hbm_bytes += hbm_bytes;
    dev->c.kernels += 1;
    throttle(dev, t);
}

void mdc_dev_kernel_named(mdc_device *dev, const char *name, double flops, double hbm_bytes, mdc_precision prec) {
    mdc_dev_kernel_passes(dev, name, flops, hbm_bytes, 0, NULL, prec);
}

void mdc_dev_count(mdc_device *dev, double int_ops, double sram_bytes) {
    if (dev->mode == MDC_EMULATE_OFF) return;
    dev->c.int_ops += int_ops;
    dev->c.sram_bytes += sram_bytes;
}

void mdc_dev_copy(mdc_device *dev, double bytes, mdc_link link) {
    if (dev->mode == MDC_EMULATE_OFF) return;
    double t = link_latency(dev, link) + bytes / link_bw(dev, link);
    if (dev->trace) mdc_i_trace_add(dev->trace, MDC_TRACE_COPY, NULL, dev->c.now, dev->c.now + t, bytes, link);
    dev->c.now += t;
    dev->c.t_comm += t;
    dev->c.link_bytes[link] += bytes;
    throttle(dev, t);
}

void mdc_dev_host_bytes(mdc_device *dev, double bytes) {
    if (dev->mode == MDC_EMULATE_OFF) return;
    dev->c.host_bytes += bytes;
}

mdc_msg_stamp mdc_dev_msg_depart(mdc_device *dev, double bytes, mdc_link link) {
    mdc_msg_stamp s = {0, 0, 0};
    if (dev->mode == MDC_EMULATE_OFF) return s;
    s.depart = dev->c.now > dev->egress_free[link] ? dev->c.now : dev->egress_free[link];
    s.done = s.depart + bytes / link_bw(dev, link);
    s.arrive = s.done + link_latency(dev, link);
    dev->egress_free[link] = s.done;
    if (dev->trace) mdc_i_trace_add(dev->trace, MDC_TRACE_SEND, NULL, s.depart, s.done, bytes, link);
    dev->c.link_bytes[link] += bytes;
    dev->c.messages_sent += 1;
    dev->c.bytes_sent += bytes;
    return s;
}

void mdc_dev_msg_sent(mdc_device *dev, double done) {
    if (dev->mode == MDC_EMULATE_OFF || done <= dev->c.now) return;
    double t = done - dev->c.now;
    dev->c.t_comm += t;
    dev->c.t_comm_by[dev->traffic] += t;
    dev->c.now = done;
    throttle(dev, t);
}

void mdc_dev_msg_arrive(mdc_device *dev, mdc_msg_stamp st, double bytes, mdc_link link) {
    if (dev->mode == MDC_EMULATE_OFF) return;
    dev->c.messages_recv += 1;
    dev->c.bytes_recv += bytes;
    double start = dev->c.now;
    if (st.depart > dev->c.now) { /* the sender had not sent yet: we were idle */
        dev->c.t_idle += st.depart - dev->c.now;
        dev->c.t_idle_by[dev->traffic] += st.depart - dev->c.now;
        dev->c.now = st.depart;
    }
    if (st.arrive > dev->c.now) {
        dev->c.t_comm += st.arrive - dev->c.now;
        dev->c.t_comm_by[dev->traffic] += st.arrive - dev->c.now;
        dev->c.now = st.arrive;
    }
    if (dev->trace) mdc_i_trace_add(dev->trace, MDC_TRACE_RECV, NULL, start, dev->c.now, bytes, link);
    throttle(dev, dev->c.now - start);
}

mdc_status mdc_dev_trace_start(mdc_device *dev) {
    mdc_i_trace_free(dev->trace);
    dev->trace = mdc_i_trace_new();
    return dev->trace ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "rank %d: the trace", dev->rank);
}
void mdc_dev_trace_mark(mdc_device *dev, const char *name, double count) {
    if (dev && dev->trace) mdc_i_trace_add(dev->trace, MDC_TRACE_COLL, name, dev->c.now, dev->c.now, count, 0);
}
size_t mdc_dev_trace_spans(const mdc_device *dev, double from, double *out, size_t cap) {
    return dev->trace ? mdc_i_trace_spans(dev->trace, from, out, cap) : 0;
}
char *mdc_dev_trace_json(const mdc_device *dev) { return dev->trace ? mdc_i_trace_json(dev->trace, dev->rank) : NULL; }

void mdc_dev_reduce(mdc_device *dev, double elems, double elem_bytes) {
    mdc_dev_kernel_named(dev, "reduce", elems, 3.0 * elems * elem_bytes, MDC_PREC_FP32);
}

void mdc_dev_idle_until(mdc_device *dev, double t) {
    if (dev->mode == MDC_EMULATE_OFF || t <= dev->c.now) return;
    double d = t - dev->c.now;
    dev->c.t_idle += d;
    dev->c.now = t;
    throttle(dev, d);
}

void mdc_dev_get_counters(const mdc_device *dev, mdc_dev_counters *out) { *out = dev->c; }
double mdc_dev_bytes_sent(const mdc_device *dev) { return dev ? dev->c.bytes_sent : 0; }
double mdc_dev_now(const mdc_device *dev) { return dev->c.now; }
void mdc_dev_add_overlap(mdc_device *dev, double seconds) { dev->c.t_overlap += seconds; }

void mdc_dev_reset_counters(mdc_device *dev) {
    memset(&dev->c, 0, sizeof dev->c);
    memset(dev->egress_free, 0, sizeof dev->egress_free);
}

void mdc_dev_energy(const mdc_device *dev, mdc_energy *e) {
    const mdc_energy_table *t = &dev->energy;
    const mdc_dev_counters *c = &dev->c;
    memset(e, 0, sizeof *e);
    e->fp = c->flops * t->pj_fp_op * 1e-12;
    e->int_ops = c->int_ops * t->pj_int_op * 1e-12;
    e->sram = c->sram_bytes / 8.0 * t->pj_sram_64b * 1e-12;
    e->hbm = c->hbm_bytes * 8.0 * t->pj_hbm_bit * 1e-12;
    e->host_dram = c->host_bytes / 8.0 * t->pj_dram_64b * 1e-12;
    e->link[MDC_LINK_NVLINK] = c->link_bytes[MDC_LINK_NVLINK] * 8.0 * t->pj_nvlink_bit * 1e-12;
    e->link[MDC_LINK_NET] = c->link_bytes[MDC_LINK_NET] * 8.0 * t->pj_net_bit * 1e-12;
    e->link[MDC_LINK_PCIE] = c->link_bytes[MDC_LINK_PCIE] * 8.0 * t->pj_pcie_bit * 1e-12;
    e->total = e->fp + e->int_ops + e->sram + e->hbm + e->host_dram;
    for (int l = 0; l < MDC_LINK_COUNT; l++) e->total += e->link[l];
}

/* The communication stream (device/stream.c, include/minidc/device_stream.h)
 * moves the clock between streams through this accessor. */
#include "minidc/device_stream.h"
mdc_dev_counters *mdc_dev_i_counters(mdc_device *dev) { return &dev->c; }
