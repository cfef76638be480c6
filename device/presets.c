/* GPU presets and energy tables. Every figure's source or assumption is in docs/devices.md.
 * Capacities: NVIDIA's "GB" read as GiB (nvidia-smi reports e.g. 81559 MiB for an 80 GB H100).
 * Bandwidths: bytes/s per direction; NVIDIA quotes NVLink bidirectional, so we halve it. */
#include <string.h>

#include "minidc/device.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)
#define TB 1e12
#define GB 1e9
#define TF 1e12
#define US 1e-6

/* Bits common to every GPU preset: the network per GPU depends on the cluster (we assume one
 * NIC per GPU as in NVIDIA's DGX/NVL reference systems), and latencies and the kernel launch
 * overhead are model choices, not datasheet figures. */
#define ASSUMED_ALL (MDC_SPEC_NET | MDC_SPEC_LATENCY)

/* Achievable fractions (mdc_device_efficiency; docs/devices.md): {gemm, gemm_half FLOPs, mem, mem_half
 * bytes, nvlink, net}. A100: large fp16 GEMMs in cuBLAS reach about 0.8 of 312 TFLOP/s; a
 * kernel of gemm_half = 0.5 GFLOP (about 1024^3) half of that; HBM2e copies 0.9 of 2.039 TB/s,
 * half of it at 1 MB; NCCL's all-reduce bus bandwidth on NVLink3 0.78 of 300 GB/s, on HDR
 * InfiniBand 0.9 of 25 GB/s. H100 and later (assumed alike): GEMMs 0.75 of peak, half at the
 * same time to fill (gemm_half 1.6 GFLOP), HBM3 0.9, NVLink4 0.8, NDR 0.9. */
#define A100_EFF \
    { 0.8, 0.5e9, 0.9, 1e6, 0.78, 0.9 }
#define H100_EFF \
    { 0.75, 1.6e9, 0.9, 1e6, 0.8, 0.9 }

static const mdc_device_spec presets[] = {
    {"a100-40", "NVIDIA A100 SXM4 40GB", 40 * GiB, 1.555 * TB, 1024, 5, "HBM2", 19.5 * TF, 312 * TF, 40 * MiB, 300 * GB,
     2 * US, 25 * GB, 5 * US, 32 * GB, 4 * US, 400, ASSUMED_ALL, A100_EFF},
    {"a100-80", "NVIDIA A100 SXM4 80GB", 80 * GiB, 2.039 * TB, 1024, 5, "HBM2e", 19.5 * TF, 312 * TF, 40 * MiB,
     300 * GB, 2 * US, 25 * GB, 5 * US, 32 * GB, 4 * US, 400, ASSUMED_ALL, A100_EFF},
    {"h100", "NVIDIA H100 SXM5 80GB", 80 * GiB, 3.35 * TB, 1024, 5, "HBM3", 67 * TF, 989 * TF, 50 * MiB, 450 * GB,
     2 * US, 50 * GB, 5 * US, 64 * GB, 4 * US, 700, ASSUMED_ALL, H100_EFF},
    {"h200", "NVIDIA H200 SXM 141GB", 141 * GiB, 4.8 * TB, 1024, 6, "HBM3e", 67 * TF, 989 * TF, 50 * MiB, 450 * GB,
     2 * US, 50 * GB, 5 * US, 64 * GB, 4 * US, 700, ASSUMED_ALL, H100_EFF},
    {"b200", "NVIDIA B200 (HGX) 192GB", 192 * GiB, 8 * TB, 1024, 8, "HBM3e", 80 * TF, 2250 * TF, 126 * MiB, 900 * GB,
     2 * US, 50 * GB, 5 * US, 64 * GB, 4 * US, 1000, ASSUMED_ALL | MDC_SPEC_SRAM | MDC_SPEC_PCIE, H100_EFF},
    {"gb300", "NVIDIA Blackwell Ultra (GB300) 288GB", 288 * GiB, 8 * TB, 1024, 8, "HBM3e", 75 * TF, 2250 * TF,
     126 * MiB, 900 * GB, 2 * US, 100 * GB, 5 * US, 128 * GB, 4 * US, 1400, ASSUMED_ALL | MDC_SPEC_SRAM | MDC_SPEC_PCIE,
     H100_EFF},
    {"vr200", "NVIDIA Vera Rubin (announced) 288GB", 288 * GiB, 13 * TB, 2048, 8, "HBM4", 150 * TF, 4500 * TF,
     126 * MiB, 1800 * GB, 2 * US, 200 * GB, 5 * US, 128 * GB, 4 * US, 1800,
     ASSUMED_ALL | MDC_SPEC_HBM_BW | MDC_SPEC_HBM_BUS | MDC_SPEC_SRAM | MDC_SPEC_PCIE | MDC_SPEC_FLOPS_FP32 |
         MDC_SPEC_FLOPS_BF16 | MDC_SPEC_TDP,
     H100_EFF},
    {"vr300", "NVIDIA Rubin Ultra (announced) ~1TB", 1024 * GiB, 32 * TB, 2048, 16, "HBM4e", 300 * TF, 9000 * TF,
     252 * MiB, 1800 * GB, 2 * US, 200 * GB, 5 * US, 128 * GB, 4 * US, 3600,
     ASSUMED_ALL | MDC_SPEC_HBM_BYTES | MDC_SPEC_HBM_BW | MDC_SPEC_HBM_BUS | MDC_SPEC_SRAM | MDC_SPEC_PCIE |
         MDC_SPEC_FLOPS_FP32 | MDC_SPEC_FLOPS_BF16 | MDC_SPEC_TDP | MDC_SPEC_NVLINK,
     H100_EFF},
};

int mdc_preset_count(void) { return (int)(sizeof presets / sizeof presets[0]); }
const mdc_device_spec *mdc_preset_at(int i) { return i >= 0 && i < mdc_preset_count() ? &presets[i] : NULL; }

/* pJ figures; see docs/devices.md for each source. */
static const mdc_energy_table tables[] = {
    {"default",
     "source document: INT op 1, FP op 20, 64b SRAM 26, 64b LPDRAM 1200 pJ; "
     "HBM2 3.97 pJ/bit (O'Connor MICRO'17); NVLink-C2C 1.3 pJ/bit (NVIDIA); "
     "network 10, PCIe 5 pJ/bit assumed",
     1.0, 20.0, 26.0, 1200.0, 3.97, 1.3, 10.0, 5.0},
    {"horowitz45",
     "Horowitz ISSCC 2014, 45 nm: fp32 op (add 0.9 + mult 3.7)/2, int add 0.1, "
     "64b read 32KB SRAM 20, DRAM 1300 pJ; HBM and links as default",
     0.1, 2.3, 20.0, 1300.0, 3.97, 1.3, 10.0, 5.0},
};

int mdc_energy_table_count(void) { return (int)(sizeof tables / sizeof tables[0]); }
const mdc_energy_table *mdc_energy_table_at(int i) {
    return i >= 0 && i < mdc_energy_table_count() ? &tables[i] : NULL;
}

mdc_status mdc_energy_table_find(const char *name, mdc_energy_table *out) {
    for (int i = 0; i < mdc_energy_table_count(); i++)
        if (!strcmp(tables[i].name, name)) {
            *out = tables[i];
            return MDC_OK;
        }
    return mdc_fail(MDC_ERR_INVALID, "--energy-table: unknown table '%s' (known: default, horowitz45, or a .json file)",
                    name);
}

mdc_status mdc_preset_find(const char *name, mdc_device_spec *out) {
    if (!strcmp(name, "host")) return mdc_host_spec(out);
    for (int i = 0; i < mdc_preset_count(); i++)
        if (!strcmp(presets[i].name, name)) {
            *out = presets[i];
            return MDC_OK;
        }
    return mdc_fail(MDC_ERR_INVALID,
                    "--device: unknown preset '%s' (known: a100-40 a100-80 h100 h200 b200 gb300 vr200 vr300 host)",
                    name);
}
