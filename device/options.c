/* Device options shared by every minidc program, and device creation from them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/device.h"

void mdc_device_options_default(mdc_device_options *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->device, sizeof o->device, "h100");
    o->hbm_scale = 1.0;
    o->emulate = MDC_EMULATE_ACCOUNT;
    o->time_scale = 1.0;
    snprintf(o->energy_table, sizeof o->energy_table, "default");
    o->gpus_per_node = 8;
}

static int parse_double(const char *opt, const char *v, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x > 0) || !isfinite(x)) {
        mdc_fail(MDC_ERR_INVALID, "%s: expected a positive number, got '%s'", opt, v);
        return -1;
    }
    *out = x;
    return 1;
}

int mdc_device_options_parse(mdc_device_options *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    static const char *const names[] = {"--device",  "--device-file",   "--hbm-scale",
                                        "--emulate", "--time-scale",    "--energy-table",
                                        "--report",  "--gpus-per-node", "--efficiency"};
    int k = -1;
    for (int j = 0; j < 9; j++)
        if (!strcmp(a, names[j])) k = j;
    if (k < 0) return 0;
    if (*i + 1 >= argc) {
        mdc_fail(MDC_ERR_INVALID, "%s needs a value", a);
        return -1;
    }
    const char *v = argv[++*i];
    ++*i;
    /* String options must fit their buffers: a silently cut path would name another file. */
    size_t room = k == 0   ? sizeof o->device
                  : k == 1 ? sizeof o->device_file
                  : k == 5 ? sizeof o->energy_table
                  : k == 6 ? sizeof o->report_path
                           : 0;
    if (room && (strlen(v) >= room || !v[0])) {
        mdc_fail(MDC_ERR_INVALID, "%s: value %s (at most %zu characters)", a, v[0] ? "too long" : "is empty", room - 1);
        return -1;
    }
    switch (k) {
    case 0: snprintf(o->device, sizeof o->device, "%s", v); return 1;
    case 1: snprintf(o->device_file, sizeof o->device_file, "%s", v); return 1;
    case 2: return parse_double(a, v, &o->hbm_scale);
    case 3:
        if (!strcmp(v, "off")) o->emulate = MDC_EMULATE_OFF;
        else if (!strcmp(v, "account")) o->emulate = MDC_EMULATE_ACCOUNT;
        else if (!strcmp(v, "throttle")) o->emulate = MDC_EMULATE_THROTTLE;
        else {
            mdc_fail(MDC_ERR_INVALID, "--emulate: expected off, account or throttle, got '%s'", v);
            return -1;
        }
        return 1;
    case 4: {
        int r = parse_double(a, v, &o->time_scale);
        if (r == 1 && !(o->time_scale <= 1e6)) { /* a virtual millisecond would wait 17 minutes and more */
            mdc_fail(MDC_ERR_INVALID, "--time-scale %s: at most 1e6 wall seconds per virtual second", v);
            return -1;
        }
        return r;
    }
    case 5: snprintf(o->energy_table, sizeof o->energy_table, "%s", v); return 1;
    case 6: snprintf(o->report_path, sizeof o->report_path, "%s", v); return 1;
    case 8:
        if (strcmp(v, "peak") && strcmp(v, "achievable")) {
            mdc_fail(MDC_ERR_INVALID, "--efficiency: expected peak or achievable, got '%s'", v);
            return -1;
        }
        o->achievable = !strcmp(v, "achievable");
        return 1;
    default: {
        char *end;
        long g = strtol(v, &end, 10);
        if (end == v || *end || g < 1 || g > 1 << 20) {
            mdc_fail(MDC_ERR_INVALID, "--gpus-per-node: expected a positive integer, got '%s'", v);
            return -1;
        }
        o->gpus_per_node = (int)g;
        return 1;
    }
    }
}

const char *mdc_device_options_help(void) {
    return "device options:\n"
           "  --device NAME         preset: a100-40 a100-80 h100 h200 b200 gb300 vr200 vr300 host (default h100)\n"
           "  --device-file F.json  a custom device (every field of a preset; see docs/devices.md)\n"
           "  --hbm-scale X         multiply HBM capacity by X (e.g. 1e-3 to meet OOM with tiny models)\n"
           "  --emulate MODE        off | account (default) | throttle (also wait the modeled time)\n"
           "  --time-scale X        throttle: wall seconds per virtual second (default 1)\n"
           "  --energy-table T      default | horowitz45 | a .json file\n"
           "  --report F.json       write the machine-readable device report\n"
           "  --gpus-per-node G     ranks r/G share a virtual node (NVLink inside, network across; default 8)\n"
           "  --efficiency E        peak (default; predict: achievable) | achievable: kernels and links at the\n"
           "                        preset's measured fractions of peak (docs/devices.md)\n";
}

mdc_status mdc_device_create(mdc_device **out, const mdc_device_options *o, int rank) {
    *out = NULL;
    mdc_device_spec spec;
    mdc_energy_table table;
    mdc_status st = o->device_file[0] ? mdc_spec_from_json_file(o->device_file, &spec)
                                      : mdc_preset_find(o->device, &spec);
    if (st) return st;
    size_t n = strlen(o->energy_table);
    if (n > 5 && !strcmp(o->energy_table + n - 5, ".json"))
        st = mdc_energy_table_from_json_file(o->energy_table, &table);
    else st = mdc_energy_table_find(o->energy_table, &table);
    if (st) return st;
    st = mdc_device_create_spec(out, &spec, &table, o->hbm_scale, o->emulate, o->time_scale, rank);
    if (!st) mdc_dev_set_achievable(*out, o->achievable);
    return st;
}
