/* Device options: every option parses; bad values fail naming the option; unknown presets
 * and energy tables fail at device creation listing the valid names; the host preset is
 * measured quickly and sanely. */
#include "testutil.h"

/* Parses argv (NULL-terminated after argv[0]); returns the parse result of the last option. */
static int parse(mdc_device_options *o, char **argv) {
    int argc = 0;
    while (argv[argc]) argc++;
    int r = 1;
    for (int i = 1; i < argc && r == 1;) r = mdc_device_options_parse(o, argc, argv, &i);
    return r;
}

static void bad(char *opt, char *val, const char *want) {
    mdc_device_options o;
    mdc_device_options_default(&o);
    char *argv[] = {"p", opt, val, NULL};
    mdc_clear_detail();
    TU_CHECK(parse(&o, argv) == -1, "%s %s accepted", opt, val ? val : "(none)");
    TU_CONTAINS(mdc_detail(), want);
}

int main(void) {
    mdc_device_options o;
    mdc_device_options_default(&o);
    TU_CHECK(!strcmp(o.device, "h100") && o.hbm_scale == 1 && o.emulate == MDC_EMULATE_ACCOUNT && o.time_scale == 1 &&
                 !strcmp(o.energy_table, "default") && o.gpus_per_node == 8 && !o.report_path[0] && !o.device_file[0],
             "defaults");
    char *all[] = {"p",        "--device",        "b200", "--hbm-scale",    "0.5",        "--emulate",
                   "throttle", "--time-scale",    "1e-3", "--energy-table", "horowitz45", "--report",
                   "r.json",   "--gpus-per-node", "4",    "--device-file",  "d.json",     NULL};
    TU_CHECK(parse(&o, all) == 1, "all options: %s", mdc_detail());
    TU_CHECK(!strcmp(o.device, "b200") && o.hbm_scale == 0.5 && o.emulate == MDC_EMULATE_THROTTLE &&
                 o.time_scale == 1e-3 && !strcmp(o.energy_table, "horowitz45") && !strcmp(o.report_path, "r.json") &&
                 o.gpus_per_node == 4 && !strcmp(o.device_file, "d.json"),
             "values");
    char *modes[] = {"p", "--emulate", "off", NULL};
    TU_CHECK(parse(&o, modes) == 1 && o.emulate == MDC_EMULATE_OFF, "off");
    /* not a device option: 0, index unchanged */
    char *other[] = {"p", "--steps", "3", NULL};
    int i = 1;
    TU_CHECK(mdc_device_options_parse(&o, 3, other, &i) == 0 && i == 1, "--steps consumed");

    bad("--hbm-scale", "0", "--hbm-scale: expected a positive number, got '0'");
    bad("--hbm-scale", "-1", "--hbm-scale");
    bad("--hbm-scale", "abc", "got 'abc'");
    bad("--hbm-scale", "1e-3x", "got '1e-3x'");
    bad("--hbm-scale", "nan", "--hbm-scale");
    bad("--hbm-scale", "inf", "--hbm-scale");
    bad("--time-scale", "0", "--time-scale");
    bad("--time-scale", "1e7", "--time-scale 1e7: at most 1e6 wall seconds per virtual second");
    bad("--emulate", "fast", "--emulate: expected off, account or throttle, got 'fast'");
    bad("--gpus-per-node", "0", "--gpus-per-node");
    bad("--gpus-per-node", "2.5", "--gpus-per-node");
    bad("--device", NULL, "--device needs a value");
    bad("--device", "", "--device: value is empty");
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    bad("--device-file", longname, "--device-file: value too long");
    bad("--report", longname, "--report: value too long");
    TU_CONTAINS(mdc_device_options_help(), "--hbm-scale");
    TU_CONTAINS(mdc_device_options_help(), "--energy-table");

    /* creation failures name what is wrong and list the choices */
    mdc_device *d = NULL;
    mdc_device_options_default(&o);
    snprintf(o.device, sizeof o.device, "h1000");
    TU_STATUS(mdc_device_create(&d, &o, 0), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "'h1000'");
    TU_CONTAINS(mdc_detail(), "vr300");
    mdc_device_options_default(&o);
    snprintf(o.energy_table, sizeof o.energy_table, "horowitz");
    TU_STATUS(mdc_device_create(&d, &o, 0), MDC_ERR_INVALID);
    TU_CONTAINS(mdc_detail(), "horowitz45");
    mdc_device_options_default(&o);
    snprintf(o.device_file, sizeof o.device_file, "/nonexistent/dev.json");
    TU_STATUS(mdc_device_create(&d, &o, 0), MDC_ERR_IO);
    TU_CONTAINS(mdc_detail(), "/nonexistent/dev.json");
    TU_CHECK(d == NULL, "device on failure");

    /* every preset loads and is a valid device */
    for (int k = 0; k < mdc_preset_count(); k++) {
        mdc_device_options_default(&o);
        snprintf(o.device, sizeof o.device, "%s", mdc_preset_at(k)->name);
        TU_STATUS(mdc_device_create(&d, &o, 0), MDC_OK);
        mdc_device_free(d);
    }
    TU_CHECK(mdc_preset_count() == 8 && mdc_preset_at(8) == NULL && mdc_preset_at(-1) == NULL, "count");

    /* host: measured once, fast, sane */
    double t0 = mdc_wall_time();
    mdc_device_spec h, h2;
    MDC_CHECK(mdc_preset_find("host", &h));
    double dt = mdc_wall_time() - t0;
    fprintf(stderr, "host: %.3g GB/s, %.3g GFLOP/s, %.3g GiB, measured in %.3f s\n", h.hbm_bw / 1e9, h.flops_fp32 / 1e9,
            h.hbm_bytes / (1024.0 * 1024 * 1024), dt);
    TU_CHECK(dt < 1.0, "measuring took %.3f s (target 0.3 s; bound generous for a busy machine)", dt);
    TU_CHECK(h.hbm_bw > 1e8 && h.hbm_bw < 1e13, "host bw %g", h.hbm_bw);
    TU_CHECK(h.flops_fp32 > 1e8 && h.flops_fp32 < 1e14, "host flops %g", h.flops_fp32);
    TU_CHECK(h.hbm_bytes > 1e8, "host ram %g", h.hbm_bytes);
    TU_CHECK(!strcmp(h.name, "host") && (h.assumed & MDC_SPEC_TDP) && !(h.assumed & MDC_SPEC_HBM_BW), "host bits");
    t0 = mdc_wall_time();
    MDC_CHECK(mdc_preset_find("host", &h2));
    TU_CHECK(mdc_wall_time() - t0 < 0.01 && h2.hbm_bw == h.hbm_bw, "second lookup re-measured");
    h2.hbm_bw = 1234e9;
    mdc_host_spec_set(&h2);
    MDC_CHECK(mdc_preset_find("host", &h));
    TU_EQ_DBL(h.hbm_bw, 1234e9);
    return tu_finish("test_device_options");
}
