/* The emulated GPU: presets, HBM allocator, virtual clock, throttle, energy ledger.
 *
 * Each MPI rank owns one mdc_device. Kernels charge FLOPs and bytes (roofline time), copies
 * charge bytes over a link, and messages carry virtual departure/arrival times, so every rank
 * has a virtual clock that never depends on how busy the host is. Energy is counted by event
 * (ops, bytes per memory level and per link class) and converted with an energy table. */
#ifndef MINIDC_DEVICE_H
#define MINIDC_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "minidc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- presets ---------------------------------------------------------------------------- */

/* What a GPU achieves of its peak figures (--efficiency achievable; docs/devices.md gives each
 * preset's source). A kernel of F FLOPs and B bytes takes max((F + gemm_half) / (gemm x peak),
 * (B + mem_half) / (mem x hbm_bw)): the fraction gemm of the peak on large products, half of
 * it at gemm_half FLOPs (small products fill neither the tiles nor a wave of the SMs), and the
 * same for bandwidth; a message's bytes move at nvlink or net x the link's bandwidth (what
 * NCCL's bus bandwidth reaches). The peak model (the default but for predict) is 1, 0, 1, 0, 1, 1. */
typedef struct {
    double gemm, gemm_half; /* fraction of peak FLOP/s for large kernels; FLOPs at half of it */
    double mem, mem_half;   /* fraction of HBM bandwidth for large kernels; bytes at half of it */
    double nvlink, net;     /* fraction of the link bandwidth messages reach */
} mdc_device_efficiency;

/* One GPU's published (or assumed) figures. Bandwidths in bytes/s per direction, latencies in
 * seconds, FLOP/s dense. `assumed` is a bit mask of MDC_SPEC_* fields that are not published
 * and carry a documented assumption (docs/devices.md). */
typedef struct {
    char name[32];
    char description[96];
    double hbm_bytes; /* HBM capacity */
    double hbm_bw;    /* HBM bandwidth, bytes/s */
    int hbm_bus_bits_per_stack;
    int hbm_stacks;
    char hbm_gen[16];       /* "HBM2e", "HBM3e", "HBM4", "DDR" for host */
    double flops_fp32;      /* peak dense fp32 FLOP/s */
    double flops_bf16;      /* peak dense bf16/fp16 FLOP/s */
    double sram_bytes;      /* on-chip SRAM (L2 cache) */
    double nvlink_bw;       /* intra-node link, bytes/s per direction (half of NVIDIA's bidirectional figure) */
    double nvlink_latency;  /* s */
    double net_bw;          /* inter-node network per GPU, bytes/s per direction */
    double net_latency;     /* s */
    double pcie_bw;         /* host link, bytes/s per direction */
    double launch_overhead; /* s added to every kernel */
    double tdp_watts;
    unsigned assumed;          /* MDC_SPEC_* bits of fields that are assumptions */
    mdc_device_efficiency eff; /* achievable fractions (JSON: optional, default the peak model) */
} mdc_device_spec;

enum {
    MDC_SPEC_HBM_BYTES = 1u << 0,
    MDC_SPEC_HBM_BW = 1u << 1,
    MDC_SPEC_HBM_BUS = 1u << 2,
    MDC_SPEC_FLOPS_FP32 = 1u << 3,
    MDC_SPEC_FLOPS_BF16 = 1u << 4,
    MDC_SPEC_SRAM = 1u << 5,
    MDC_SPEC_NVLINK = 1u << 6,
    MDC_SPEC_NET = 1u << 7,
    MDC_SPEC_PCIE = 1u << 8,
    MDC_SPEC_TDP = 1u << 9,
    MDC_SPEC_LATENCY = 1u << 10, /* nvlink_latency, net_latency, launch_overhead: model choices */
};

/* Number of built-in presets (not counting "host") and the i-th one. */
int mdc_preset_count(void);
const mdc_device_spec *mdc_preset_at(int i);

/* Looks up a preset by name ("h100", ..., or "host", which is measured on this machine:
 * memcpy bandwidth and 2-thread sgemm peak). Fails with MDC_ERR_INVALID naming the preset
 * and listing the valid names. */
mdc_status mdc_preset_find(const char *name, mdc_device_spec *out);

/* The `host` preset: this machine, measured once per process (memcpy bandwidth, 2-thread
 * sgemm peak, physical RAM as capacity; about 0.1 s; device/host.c). Thread-safe. Fails with
 * MDC_ERR_UNSUPPORTED if the machine cannot be measured. */
mdc_status mdc_host_spec(mdc_device_spec *out);
/* Installs `s` as this process's `host` preset instead of measuring (rank 0's measurement is
 * sent to every rank so that a run's devices agree). */
void mdc_host_spec_set(const mdc_device_spec *s);

/* Reads a custom device from a JSON file. Every field of mdc_device_spec (JSON names as in the
 * struct, minus `assumed`) must be present; unknown keys, missing fields, non-positive
 * bandwidths and numbers outside a physically sensible range (device/device_json.c: e.g.
 * 1e6..1e21 FLOP/s, 1..1024 stacks) give MDC_ERR_FORMAT naming the file and the field. */
mdc_status mdc_spec_from_json_file(const char *path, mdc_device_spec *out);

/* ---- energy tables ---------------------------------------------------------------------- */

typedef struct {
    char name[32];
    char source[256];
    double pj_int_op;     /* per integer op */
    double pj_fp_op;      /* per floating-point op (a FMA is 2 ops) */
    double pj_sram_64b;   /* per 64-bit on-chip SRAM read */
    double pj_dram_64b;   /* per 64-bit host DRAM read */
    double pj_hbm_bit;    /* per bit moved to/from HBM */
    double pj_nvlink_bit; /* per bit over the intra-node link */
    double pj_net_bit;    /* per bit over the network */
    double pj_pcie_bit;   /* per bit over the host link */
} mdc_energy_table;

int mdc_energy_table_count(void);
const mdc_energy_table *mdc_energy_table_at(int i);
/* "default" (the source document's), "horowitz45", ...; MDC_ERR_INVALID if unknown. */
mdc_status mdc_energy_table_find(const char *name, mdc_energy_table *out);
/* JSON with every field of mdc_energy_table except name/source optional; each pJ figure must
 * be in 0..1e6. */
mdc_status mdc_energy_table_from_json_file(const char *path, mdc_energy_table *out);

/* ---- options shared by every program ------------------------------------------------------ */

typedef enum { MDC_EMULATE_OFF = 0, MDC_EMULATE_ACCOUNT, MDC_EMULATE_THROTTLE } mdc_emulate_mode;

typedef struct {
    char device[64];          /* preset name, default "h100" */
    char device_file[256];    /* --device-file (overrides device) */
    double hbm_scale;         /* --hbm-scale, multiplies HBM capacity (default 1) */
    mdc_emulate_mode emulate; /* --emulate off|account|throttle (default account) */
    double time_scale;        /* --time-scale, wall seconds per virtual second (default 1) */
    char energy_table[256];   /* --energy-table NAME or a .json path (default "default") */
    char report_path[256];    /* --report out.json ("" = none) */
    int gpus_per_node;        /* --gpus-per-node G (default 8) */
    int achievable;           /* --efficiency peak (0, default) | achievable (1): the spec's eff */
} mdc_device_options;

void mdc_device_options_default(mdc_device_options *o);

/* If argv[*i] is one of the device options above, consumes it (and its value), advances *i
 * and returns 1; returns 0 if it is not a device option; on a bad value returns -1 with the
 * detail naming the option. */
int mdc_device_options_parse(mdc_device_options *o, int argc, char **argv, int *i);

/* Help text for the device options (for --help). */
const char *mdc_device_options_help(void);

/* ---- the device --------------------------------------------------------------------------- */

typedef struct mdc_device mdc_device;

/* Memory categories tracked by the allocator. */
typedef enum {
    MDC_MEM_PARAMS = 0,
    MDC_MEM_GRADS,
    MDC_MEM_OPTIM,
    MDC_MEM_ACTS,
    MDC_MEM_COMM,
    MDC_MEM_OTHER,
    MDC_MEM_COUNT
} mdc_mem_category;
const char *mdc_mem_category_name(mdc_mem_category c);

/* Link classes for copies and messages. */
typedef enum { MDC_LINK_NVLINK = 0, MDC_LINK_NET, MDC_LINK_PCIE, MDC_LINK_COUNT } mdc_link;
const char *mdc_link_name(mdc_link l);

/* Creates a device for `rank` from options. Owns nothing of the caller's; free with
 * mdc_device_free. Fails on an unknown preset, a bad device file or energy table. */
mdc_status mdc_device_create(mdc_device **out, const mdc_device_options *o, int rank);
/* Creates a device from a spec directly (tests). hbm_scale multiplies capacity. */
mdc_status mdc_device_create_spec(mdc_device **out, const mdc_device_spec *spec, const mdc_energy_table *table,
                                  double hbm_scale, mdc_emulate_mode mode, double time_scale, int rank);
void mdc_device_free(mdc_device *dev); /* NULL is a no-op; frees every live allocation */

const mdc_device_spec *mdc_device_get_spec(const mdc_device *dev);
const mdc_energy_table *mdc_device_get_energy_table(const mdc_device *dev);
int mdc_device_rank(const mdc_device *dev);
/* The rank the device stands for from now on (a folded prediction's process: its mesh rank). */
void mdc_dev_set_rank(mdc_device *dev, int rank);
double mdc_device_capacity(const mdc_device *dev); /* bytes, after --hbm-scale */
mdc_emulate_mode mdc_device_mode(const mdc_device *dev);
/* 1: kernels and messages at the spec's achievable fractions (mdc_device_efficiency); 0: at peak. */
void mdc_dev_set_achievable(mdc_device *dev, int on);
int mdc_dev_achievable(const mdc_device *dev);

/* Allocates `bytes` of emulated HBM (host memory, 64-byte aligned, zeroed) under a category and
 * a tensor name. Over capacity: MDC_ERR_OOM_DEVICE with a CUDA-like message naming the rank,
 * device, tensor, requested size, in use, capacity and peak; *out is NULL. */
mdc_status mdc_dev_alloc(mdc_device *dev, void **out, size_t bytes, mdc_mem_category cat, const char *name);
/* The same for a tensor held in `held` bytes of host memory and charged `bytes` (a 16-bit tensor
 * the emulation keeps as floats: held 4 bytes an element, charged 2). */
mdc_status mdc_dev_alloc_held(mdc_device *dev, void **out, size_t held, size_t bytes, mdc_mem_category cat,
                              const char *name);
/* Frees memory from mdc_dev_alloc; NULL is a no-op. */
void mdc_dev_free(mdc_device *dev, void *ptr);

size_t mdc_dev_mem_in_use(const mdc_device *dev, mdc_mem_category cat); /* MDC_MEM_COUNT = total */
size_t mdc_dev_mem_peak(const mdc_device *dev, mdc_mem_category cat);   /* MDC_MEM_COUNT = total */
/* From now on the peaks start at what is in use (minidc predict: the predicted step's own peak,
 * not the setup's transient full-precision copies). */
void mdc_dev_mem_reset_peak(mdc_device *dev);

/* ---- charging: the virtual clock and the energy ledger ---------------------------------- */

/* Precision of a kernel's FLOPs (which peak applies) and of its bytes: FP32 and BF16 as given;
 * RUN the run's dtype (mdc_dev_set_dtype): fp32 arithmetic, the bytes at the dtype's width;
 * GEMM a matrix product in the run's dtype: the tensor-core peak in bf16 or fp16, the bytes at
 * the dtype's width. A 4-byte run charges RUN and GEMM as FP32. */
typedef enum { MDC_PREC_FP32 = 0, MDC_PREC_BF16, MDC_PREC_RUN, MDC_PREC_GEMM } mdc_precision;
/* The width of the run's activations and compute weights: 4 (fp32, the default) or 2 (bf16, fp16). */
void mdc_dev_set_dtype(mdc_device *dev, int bytes);
int mdc_dev_dtype(const mdc_device *dev);
/* The 16-bit format a kernel rounds its internal product inputs to (the attention's probabilities
 * before P V, as FlashAttention's): 0 none, 1 bf16, 2 fp16 (mdc_round_half's kind). */
void mdc_dev_set_half(mdc_device *dev, int kind);
int mdc_dev_half(const mdc_device *dev);

/* Predict's accounting-only ("dry") mode (minidc predict): every kernel charges its FLOPs and
 * bytes and skips its arithmetic, messages carry their size and stamps and no payload, and an
 * allocation of MDC_DRY_BACKED_MAX bytes or more is charged in full but backed by a small window
 * of host memory mapped again and again (its contents are meaningless; nothing reads them); a dry
 * device never refuses an allocation (its peak is compared with the capacity afterwards). Set
 * before the first allocation that should be dry. NULL: not dry. */
#define MDC_DRY_BACKED_MAX (64u << 10)
void mdc_dev_set_dry(mdc_device *dev, int on);
int mdc_dev_dry(const mdc_device *dev);
/* The host side of a dry process (minidc predict's): while set, mdc_pack_half, mdc_unpack_half
 * and mdc_round_half return at once, and the layers' and schemes' host-side copies of tensors
 * are skipped (they test mdc_host_dry()); nothing this process holds is then meaningful. */
void mdc_host_set_dry(int on);
int mdc_host_dry(void);
/* Host memory for a model-sized array (a stage's parameters, gradients or their 16-bit copy held
 * outside the device's accounting): zeroed calloc memory, or in a dry process address space
 * backed by the dry window (device/dry.c), so a 70 GB array costs the host nothing. Free with
 * mdc_host_array_free and the same size, while mdc_host_dry() is what it was. */
void *mdc_host_array(size_t bytes);
void mdc_host_array_free(void *p, size_t bytes);

/* A kernel: advances the clock by max(flops/peak, hbm_bytes/hbm_bw) + launch overhead (the
 * achievable model, mdc_dev_set_achievable: the fractions of mdc_device_efficiency, the GEMM
 * ones for MDC_PREC_GEMM and MDC_PREC_BF16 kernels only);
 * counts flops as FP ops, hbm_bytes as HBM traffic. Time goes to "compute" if flop-bound,
 * else to "memory". In throttle mode also waits that long (times time_scale) in wall time. */
void mdc_dev_kernel(mdc_device *dev, double flops, double hbm_bytes, mdc_precision prec);
/* The same with a name for the trace's event (static storage: a function's __func__; NULL:
 * "kernel"). mdc_dev_kernel as called in C names the kernel by the calling function. */
void mdc_dev_kernel_named(mdc_device *dev, const char *name, double flops, double hbm_bytes, mdc_precision prec);
#define mdc_dev_kernel(dev, flops, hbm_bytes, prec) mdc_dev_kernel_named((dev), __func__, (flops), (hbm_bytes), (prec))
/* A kernel made of passes over HBM that a GPU runs one after another (attention that keeps its
 * T x T probabilities: the scores' GEMM, the softmax, the output's GEMM). The peak model charges
 * it as mdc_dev_kernel_named(flops, hbm_bytes), one roofline over the totals; the achievable
 * model (mdc_dev_set_achievable) times each pass on its own roofline with its own launch, so a
 * memory-bound pass no longer hides under the GEMMs' FLOPs. The passes add up to the totals. */
typedef struct {
    double flops, hbm_bytes;
    int gemm; /* a matrix product (the GEMM fraction applies); 0: elementwise (the vector peak) */
} mdc_kernel_pass;
void mdc_dev_kernel_passes(mdc_device *dev, const char *name, double flops, double hbm_bytes, int npass,
                           const mdc_kernel_pass *pass, mdc_precision prec);
/* Integer ops and SRAM bytes for the energy ledger only (no clock). */
void mdc_dev_count(mdc_device *dev, double int_ops, double sram_bytes);
/* A copy of `bytes` over a link (host<->device: PCIE; device<->device: NVLINK/NET). Advances
 * the clock by latency + bytes/bw, as communication. */
void mdc_dev_copy(mdc_device *dev, double bytes, mdc_link link);
/* The trace (device/trace.c; minidc train --trace): from start on, every kernel, copy, message
 * and collective call (mark: an instant event named after the call) is recorded with its virtual
 * start and end and the wall clock's; json: the events as comma-separated Chrome trace objects
 * (pid = the device's rank, tid 0 virtual time, tid 1 wall time), malloc'd; NULL when not started
 * or out of memory. */
mdc_status mdc_dev_trace_start(mdc_device *dev);
void mdc_dev_trace_mark(mdc_device *dev, const char *name, double count);
char *mdc_dev_trace_json(const mdc_device *dev);
/* (kind, start, end) of the traced events ending at or after virtual time `from`, up to cap of
 * them into out (NULL: count only): kind 0 kernel, 1 copy, 2 send, 3 receive, 4 collective call. */
size_t mdc_dev_trace_spans(const mdc_device *dev, double from, double *out, size_t cap);
/* Host DRAM traffic (data loading, host-side work), energy only. */
void mdc_dev_host_bytes(mdc_device *dev, double bytes);

/* Messages. The sender calls mdc_dev_msg_depart when it posts a send: the message leaves at
 * max(now, egress link free), occupies the egress link for bytes/bw, and arrives at
 * departure + latency + bytes/bw. Returns both stamps, which travel with the message.
 * The sender's clock is not advanced (the send is asynchronous); mdc_dev_msg_sent(dev, t)
 * is called when the send is waited on and advances the clock to the end of the transfer
 * (departure + bytes/bw). The receiver calls mdc_dev_msg_arrive: waiting until departure
 * counts as idle, from departure to arrival as communication; clock = max(own, arrival). */
typedef struct {
    double depart; /* virtual time the first byte leaves */
    double done;   /* virtual time the last byte leaves (egress link free again) */
    double arrive; /* virtual time the last byte arrives */
} mdc_msg_stamp;
mdc_msg_stamp mdc_dev_msg_depart(mdc_device *dev, double bytes, mdc_link link);
void mdc_dev_msg_sent(mdc_device *dev, double done);
void mdc_dev_msg_arrive(mdc_device *dev, mdc_msg_stamp st, double bytes, mdc_link link);

/* Local reduction work inside a collective (gamma term): `elems` element-wise ops reading
 * 2 and writing 1 element of `elem_bytes`. */
void mdc_dev_reduce(mdc_device *dev, double elems, double elem_bytes);

/* Waits idle until virtual time t (no-op if already past). */
void mdc_dev_idle_until(mdc_device *dev, double t);
/* For timing a collective without running it (predict's replay of an algorithm over a folded
 * group, collectives/replay.c): a link's bytes/s and latency as messages pay them, and the time
 * of a reduction of `elems` elements as mdc_dev_reduce charges it, nothing charged; then the
 * replay's outcome for this rank: the clock moves to `until` as communication, with the bytes
 * and messages it sent. */
double mdc_dev_link_bw(const mdc_device *dev, mdc_link link);
double mdc_dev_link_latency(const mdc_device *dev, mdc_link link);
double mdc_dev_reduce_seconds(const mdc_device *dev, double elems, double elem_bytes);
void mdc_dev_comm_until(mdc_device *dev, double until, double bytes_sent, double messages, mdc_link link);

/* ---- reading the ledger ------------------------------------------------------------------ */

/* What a message belongs to, for the split of communication and waiting time (predict's
 * breakdown): the mesh tags each group's messages (mdc_transport_set_traffic). */
typedef enum {
    MDC_TRAFFIC_OTHER = 0,
    MDC_TRAFFIC_TP, /* tensor and sequence parallelism (and expert tensor parallelism) */
    MDC_TRAFFIC_CP,
    MDC_TRAFFIC_EP,
    MDC_TRAFFIC_DP, /* data parallelism and ZeRO, dense and expert */
    MDC_TRAFFIC_PP,
    MDC_TRAFFIC_COUNT
} mdc_traffic;
const char *mdc_traffic_name(mdc_traffic k);
/* The class of the messages charged next (mdc_dev_msg_sent, mdc_dev_msg_arrive). */
void mdc_dev_set_traffic(mdc_device *dev, mdc_traffic k);
/* 1 while the optimizer runs (its kernels' time is also counted in t_optimizer), else 0. */
void mdc_dev_set_optimizer(mdc_device *dev, int on);

typedef struct {
    double now;                                            /* virtual seconds */
    double t_compute, t_memory, t_comm, t_idle, t_overlap; /* split of `now` (overlap: comm
                                       hidden under compute, reported by schemes) */
    double flops, int_ops, sram_bytes, hbm_bytes, host_bytes;
    double link_bytes[MDC_LINK_COUNT];
    double kernels, messages_sent, messages_recv, bytes_sent, bytes_recv;
    double t_comm_by[MDC_TRAFFIC_COUNT], t_idle_by[MDC_TRAFFIC_COUNT]; /* t_comm and t_idle of messages by class */
    double t_optimizer;                                                /* kernels' time while the optimizer ran */
} mdc_dev_counters;
void mdc_dev_get_counters(const mdc_device *dev, mdc_dev_counters *out);
/* Bytes this rank has sent so far (0 without a device): a component adds up the difference
 * around its own collectives, so other schemes' messages in the same step are not counted as its. */
double mdc_dev_bytes_sent(const mdc_device *dev);
double mdc_dev_now(const mdc_device *dev);
/* Schemes report communication hidden under compute (seconds). */
void mdc_dev_add_overlap(mdc_device *dev, double seconds);

/* Energy in joules by category. */
typedef struct {
    double fp, int_ops, sram, hbm, host_dram, link[MDC_LINK_COUNT], total;
} mdc_energy;
void mdc_dev_energy(const mdc_device *dev, mdc_energy *out);

/* Human-readable report of one device: virtual time split into compute, memory,
 * communication and idle (and overlap, if a scheme reported any), work counts, peak HBM per
 * category, energy by category with each figure's formula, average power; tokens > 0 (tokens
 * processed by the whole run) adds energy per token. Writes to f; cannot fail. */
void mdc_device_report(const mdc_device *dev, FILE *f, double tokens);
/* Writes the JSON report of `nranks` devices (rank order) to `path`: counters[r], energies[r],
 * and peak_bytes[r * (MDC_MEM_COUNT + 1) + k] (k = category, MDC_MEM_COUNT = total); the device
 * spec, energy table and mode come from dev0. `schemes` (may be NULL) is a JSON object's text,
 * the parallel schemes' figures, stored under "schemes". Fails with MDC_ERR_IO naming the path. */
mdc_status mdc_device_report_json(const char *path, const mdc_dev_counters *counters, const mdc_energy *energies,
                                  const size_t *peak_bytes, int nranks, const mdc_device *dev0, double tokens,
                                  const char *schemes);
/* The same for one device (train without --dp, forward); nothing when `path` is NULL or empty. */
mdc_status mdc_device_report_json_one(const char *path, const mdc_device *dev, double tokens);

/* Resets the clock and counters (not allocations). */
void mdc_dev_reset_counters(mdc_device *dev);

/* f32 <-> bf16 / f16, round to nearest even, NaN and infinity kept (device/half.c). */
uint16_t mdc_f32_to_bf16(float f);
float mdc_bf16_to_f32(uint16_t h);
uint16_t mdc_f32_to_f16(float f);
float mdc_f16_to_f32(uint16_t h);
/* n floats as bf16 (bf16 1) or f16 (0) at dst, and back; dst may be src (in place: packing
 * writes each element's 2 bytes before any float it has not read, unpacking runs back to front). */
void mdc_pack_half(void *dst, const float *src, size_t n, int bf16);
void mdc_unpack_half(float *dst, const void *src, size_t n, int bf16);
/* x[0..n) rounded in place to bf16 (kind 1) or fp16 (2), kept as floats; kind 0: unchanged (the
 * kinds are MDC_PRECISION_BF16, _FP16, _FP32 of include/minidc/model.h). */
void mdc_round_half(float *x, size_t n, int kind);

/* Wall clock, seconds (monotonic). */
double mdc_wall_time(void);
/* Waits `seconds` of wall time: sleep for the bulk, spin for the last ~100 us. Returns at once
 * for a wait <= 0, NaN or infinite; waits at most MDC_WAIT_WALL_MAX_S (one hour) per call. */
#define MDC_WAIT_WALL_MAX_S 3600.0
void mdc_wait_wall(double seconds);

/* ---- atomic writing (device/atomic.c): every file minidc writes ---------------------------------------------------
 * A new file beside the destination (<path>.tmp.<pid>.<n>, created exclusively), fsync'd and
 * renamed over it, the directory fsync'd: readers see the old file or the new one, never a mix
 * or a truncation. A symbolic link is written through; a destination that is not a regular file
 * is refused (MDC_ERR_IO); temporary files of writers that are gone are removed. Write to
 * `f` between open and commit; commit(ok = 0) or abort removes the temporary file. */
typedef struct {
    FILE *f;
    char *tmp, *dest;
} mdc_atomic;
mdc_status mdc_atomic_open(mdc_atomic *a, const char *path);
mdc_status mdc_atomic_commit(mdc_atomic *a, int ok, const char *label);
void mdc_atomic_abort(mdc_atomic *a);

#ifdef __cplusplus
}
#endif
#endif
