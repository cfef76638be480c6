/* minidc devices: the GPU preset table (each preset's HBM bandwidth as a multiple of a100-80's),
 * one preset's detail, a custom device file checked field by field, and the energy tables.
 * Figures marked '*' are assumptions (not published); docs/devices.md gives each one's source
 * or assumption. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "minidc/device.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)

static const char *mark(const mdc_device_spec *s, unsigned bit) { return s->assumed & bit ? "*" : " "; }

static void table_row(const mdc_device_spec *s, double ref_bw) {
    char bus[24], ratio[16];
    snprintf(bus, sizeof bus, "%dx%d", s->hbm_bus_bits_per_stack, s->hbm_stacks);
    double x = s->hbm_bw / ref_bw;
    snprintf(ratio, sizeof ratio, x >= 0.95 ? "%.1fx" : "%.2gx", x);
    printf("%-8s %8.0f%s %-6s %9s%s %7.4g%s %6s %7.4g%s %7.4g%s %6.0f%s %7.0f%s %6.0f%s %6.0f%s %5.0f%s\n", s->name,
           s->hbm_bytes / GiB, mark(s, MDC_SPEC_HBM_BYTES), s->hbm_gen, bus, mark(s, MDC_SPEC_HBM_BUS),
           s->hbm_bw / 1e12, mark(s, MDC_SPEC_HBM_BW), ratio, s->flops_fp32 / 1e12, mark(s, MDC_SPEC_FLOPS_FP32),
           s->flops_bf16 / 1e12, mark(s, MDC_SPEC_FLOPS_BF16), s->sram_bytes / MiB, mark(s, MDC_SPEC_SRAM),
           2 * s->nvlink_bw / 1e9, mark(s, MDC_SPEC_NVLINK), s->net_bw / 1e9, mark(s, MDC_SPEC_NET), s->pcie_bw / 1e9,
           mark(s, MDC_SPEC_PCIE), s->tdp_watts, mark(s, MDC_SPEC_TDP));
}

static int print_table(void) {
    mdc_device_spec ref, host;
    if (mdc_preset_find("a100-80", &ref)) return 1;
    printf("%-8s %9s %-6s %10s %8s %6s %8s %8s %7s %8s %7s %7s %6s\n", "preset", "HBM GiB", "gen", "bus bits",
           "HBM TB/s", "xA100", "FP32 TF", "BF16 TF", "SRAM MB", "NVL GB/s", "net GB/s", "PCIe", "TDP W");
    for (int i = 0; i < mdc_preset_count(); i++) table_row(mdc_preset_at(i), ref.hbm_bw);
    mdc_status st = mdc_host_spec(&host);
    if (st == MDC_OK) table_row(&host, ref.hbm_bw);
    else printf("host     (not measured: %s)\n", mdc_detail());
    printf("bus bits: bits per stack x stacks; xA100: HBM TB/s / a100-80's 2.039 TB/s; NVL: NVLink\n"
           "GB/s bidirectional as NVIDIA quotes it (the model uses half per direction); net and PCIe\n"
           "GB/s per direction; SRAM: L2 (host: last-level cache) in MiB. Dense FLOP/s.\n"
           "host: measured now (memcpy bandwidth, 2-thread sgemm, physical RAM).\n"
           "* an assumption, not a published figure: docs/devices.md says which and why.\n");
    return 0;
}

static void detail_line(const char *what, const char *value, const mdc_device_spec *s, unsigned bit, int measured) {
    printf("  %-24s %-22s %s\n", what, value,
           bit && (s->assumed & bit) ? "assumed (docs/devices.md)"
           : measured                ? "measured"
                                     : "");
}

static void print_detail(const mdc_device_spec *s, const char *origin) {
    mdc_device_spec ref;
    char v[64];
    int host = !strcmp(origin, "measured");
    printf("%s: %s (%s)\n", s->name, s->description, origin);
    snprintf(v, sizeof v, "%.4g GiB (%.0f B)", s->hbm_bytes / GiB, s->hbm_bytes);
    detail_line("HBM capacity", v, s, MDC_SPEC_HBM_BYTES, host);
    snprintf(v, sizeof v, "%.4g TB/s", s->hbm_bw / 1e12);
    detail_line("HBM bandwidth", v, s, MDC_SPEC_HBM_BW, host);
    snprintf(v, sizeof v, "%s, %d bits x %d", s->hbm_gen, s->hbm_bus_bits_per_stack, s->hbm_stacks);
    detail_line("HBM stacks", v, s, MDC_SPEC_HBM_BUS, 0);
    /* 64-bit: the product of two ints may not fit an int (device files are range-checked, a
     * spec built in code need not be). */
    long long bus = (long long)s->hbm_bus_bits_per_stack * s->hbm_stacks;
    snprintf(v, sizeof v, "%lld bits", bus);
    detail_line("  = bus width", v, s, 0, 0);
    snprintf(v, sizeof v, "%.4g Gb/s", s->hbm_bw * 8 / (double)bus / 1e9);
    detail_line("  = per pin", v, s, 0, 0);
    snprintf(v, sizeof v, "%.4g TFLOP/s", s->flops_fp32 / 1e12);
    detail_line("FP32 peak (dense)", v, s, MDC_SPEC_FLOPS_FP32, host);
    snprintf(v, sizeof v, "%.4g TFLOP/s", s->flops_bf16 / 1e12);
    detail_line("BF16/FP16 peak (dense)", v, s, MDC_SPEC_FLOPS_BF16, 0);
    snprintf(v, sizeof v, "%.4g MiB", s->sram_bytes / MiB);
    detail_line("on-chip SRAM (L2)", v, s, MDC_SPEC_SRAM, 0);
    snprintf(v, sizeof v, "%.4g GB/s per dir", s->nvlink_bw / 1e9);
    detail_line("NVLink", v, s, MDC_SPEC_NVLINK, 0);
    snprintf(v, sizeof v, "%.4g us", s->nvlink_latency * 1e6);
    detail_line("NVLink latency", v, s, MDC_SPEC_LATENCY, 0);
    snprintf(v, sizeof v, "%.4g GB/s per dir", s->net_bw / 1e9);
    detail_line("network per GPU", v, s, MDC_SPEC_NET, 0);
    snprintf(v, sizeof v, "%.4g us", s->net_latency * 1e6);
    detail_line("network latency", v, s, MDC_SPEC_NET | MDC_SPEC_LATENCY, 0);
    snprintf(v, sizeof v, "%.4g GB/s per dir", s->pcie_bw / 1e9);
    detail_line("host link (PCIe)", v, s, MDC_SPEC_PCIE, 0);
    snprintf(v, sizeof v, "%.4g us", s->launch_overhead * 1e6);
    detail_line("kernel launch overhead", v, s, MDC_SPEC_LATENCY, 0);
    snprintf(v, sizeof v, "%.4g W", s->tdp_watts);
    detail_line("TDP", v, s, MDC_SPEC_TDP, 0);
    printf("derived:\n");
    if (mdc_preset_find("a100-80", &ref) == MDC_OK)
        printf("  HBM bandwidth / a100-80  %.3gx  = %.4g / %.4g TB/s\n", s->hbm_bw / ref.hbm_bw, s->hbm_bw / 1e12,
               ref.hbm_bw / 1e12);
    printf("  ridge point (bf16)       %.0f FLOP/byte = peak / HBM bandwidth: kernels below it are memory-bound\n",
           s->flops_bf16 / s->hbm_bw);
    printf("  ridge point (fp32)       %.1f FLOP/byte\n", s->flops_fp32 / s->hbm_bw);
    printf("  read all of HBM once     %.4g ms = capacity / bandwidth\n", s->hbm_bytes / s->hbm_bw * 1e3);
}

static int print_energy(void) {
    printf("%-11s %7s %7s %9s %9s %9s %9s %9s %9s\n", "table", "int op", "fp op", "SRAM 64b", "DRAM 64b", "HBM /bit",
           "NVL /bit", "net /bit", "PCIe/bit");
    for (int i = 0; i < mdc_energy_table_count(); i++) {
        const mdc_energy_table *t = mdc_energy_table_at(i);
        printf("%-11s %7.3g %7.3g %9.4g %9.4g %9.4g %9.4g %9.4g %9.4g\n", t->name, t->pj_int_op, t->pj_fp_op,
               t->pj_sram_64b, t->pj_dram_64b, t->pj_hbm_bit, t->pj_nvlink_bit, t->pj_net_bit, t->pj_pcie_bit);
    }
    printf("all figures in pJ. Sources:\n");
    for (int i = 0; i < mdc_energy_table_count(); i++) {
        const mdc_energy_table *t = mdc_energy_table_at(i);
        printf("  %-11s %s\n", t->name, t->source);
    }
    const mdc_energy_table *d = mdc_energy_table_at(0);
    printf("why moving data costs more than computing (%s table):\n"
           "  one 64-bit DRAM read = %.0f pJ = %.0f FP ops; one 64-bit SRAM read = %.3g FP ops;\n"
           "  an fp32 value from HBM = 32 x %.3g pJ = %.4g pJ = %.3g FP ops\n",
           d->name, d->pj_dram_64b, d->pj_dram_64b / d->pj_fp_op, d->pj_sram_64b / d->pj_fp_op, d->pj_hbm_bit,
           32 * d->pj_hbm_bit, 32 * d->pj_hbm_bit / d->pj_fp_op);
    return 0;
}

int mdc_cmd_devices(int argc, char **argv) {
    const char *name = NULL, *file = NULL, *table = NULL;
    int energy = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: minidc devices [--device NAME | --device-file F.json | --energy |\n"
                   "                       --energy-table F.json]\n"
                   "  (no option)           the preset table, host measured now\n"
                   "  --device NAME         one preset in detail, with derived figures\n"
                   "  --device-file F.json  check a custom device field by field and show it\n"
                   "  --energy              the energy tables and their sources\n"
                   "  --energy-table F.json check a custom energy table and show it\n");
            return 0;
        }
        if (!strcmp(argv[i], "--energy")) {
            energy = 1;
            continue;
        }
        const char **dst = !strcmp(argv[i], "--device")         ? &name
                           : !strcmp(argv[i], "--device-file")  ? &file
                           : !strcmp(argv[i], "--energy-table") ? &table
                                                                : NULL;
        if (!dst) {
            fprintf(stderr, "minidc devices: unknown option '%s' (minidc devices --help)\n", argv[i]);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "minidc devices: %s needs a value\n", argv[i]);
            return 2;
        }
        *dst = argv[++i];
    }
    mdc_device_spec s;
    if (name) {
        mdc_status st = mdc_preset_find(name, &s);
        if (st) {
            fprintf(stderr, "minidc devices: %s: %s\n", mdc_strerror(st), mdc_detail());
            return 1;
        }
        print_detail(&s, !strcmp(name, "host") ? "measured" : "preset");
    }
    if (file) {
        mdc_status st = mdc_spec_from_json_file(file, &s);
        if (st) {
            fprintf(stderr, "minidc devices: %s: %s\n", mdc_strerror(st), mdc_detail());
            return 1;
        }
        printf("%s: valid device file\n", file);
        print_detail(&s, file);
    }
    if (table) {
        mdc_energy_table t;
        mdc_status st = mdc_energy_table_from_json_file(table, &t);
        if (st) {
            fprintf(stderr, "minidc devices: %s: %s\n", mdc_strerror(st), mdc_detail());
            return 1;
        }
        printf("%s: valid energy table '%s': int op %g, fp op %g, SRAM 64b %g, DRAM 64b %g pJ; "
               "HBM %g, NVLink %g, network %g, PCIe %g pJ/bit\n",
               table, t.name, t.pj_int_op, t.pj_fp_op, t.pj_sram_64b, t.pj_dram_64b, t.pj_hbm_bit, t.pj_nvlink_bit,
               t.pj_net_bit, t.pj_pcie_bit);
    }
    if (energy) print_energy();
    if (!name && !file && !table && !energy) return print_table();
    return 0;
}
