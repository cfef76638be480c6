/* minidc devices: the preset table, each preset's HBM bandwidth as a multiple of a100-80's. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "minidc/device.h"

int mdc_cmd_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            printf("usage: minidc devices\n");
            return 0;
        }
        fprintf(stderr, "minidc devices: unknown option '%s'\n", argv[i]);
        return 2;
    }
    mdc_device_spec ref;
    if (mdc_preset_find("a100-80", &ref)) return 1;
    printf("%-8s %9s %-6s %9s %6s %10s %10s %9s %9s %6s\n", "preset", "HBM GiB", "gen", "HBM TB/s",
           "x A100", "FP32 TF/s", "BF16 TF/s", "NVL GB/s", "bus bits", "TDP W");
    for (int i = 0; i < mdc_preset_count(); i++) {
        const mdc_device_spec *s = mdc_preset_at(i);
        printf("%-8s %9.0f %-6s %9.3f %5.1fx %10.1f %10.0f %9.0f %9d %6.0f%s\n", s->name,
               s->hbm_bytes / (1024.0 * 1024 * 1024), s->hbm_gen, s->hbm_bw / 1e12, s->hbm_bw / ref.hbm_bw,
               s->flops_fp32 / 1e12, s->flops_bf16 / 1e12, 2 * s->nvlink_bw / 1e9,
               s->hbm_bus_bits_per_stack * s->hbm_stacks, s->tdp_watts, s->assumed ? "  *" : "");
    }
    printf("* some figures are not published: see docs/devices.md for the assumption used\n");
    return 0;
}
