/* Custom devices from JSON (--device-file): a good file loads every field; a missing field,
 * a zero or negative bandwidth, an unknown key, a wrong type, a duplicate, bad JSON or a
 * missing file each fail naming the file and the field. The files are written to a temp dir. */
#include "testutil.h"

static char dir[] = "/tmp/minidc-json-XXXXXX";

/* Writes the good device with field `drop` left out and `extra` appended (both may be ""). */
static const char *write_dev(const char *name, const char *drop, const char *replace_key, const char *replace_val,
                             const char *extra) {
    static char path[300];
    static const char *const keys[] = {"name",
                                       "description",
                                       "hbm_bytes",
                                       "hbm_bw",
                                       "hbm_bus_bits_per_stack",
                                       "hbm_stacks",
                                       "hbm_gen",
                                       "flops_fp32",
                                       "flops_bf16",
                                       "sram_bytes",
                                       "nvlink_bw",
                                       "nvlink_latency",
                                       "net_bw",
                                       "net_latency",
                                       "pcie_bw",
                                       "launch_overhead",
                                       "tdp_watts"};
    static const char *const vals[] = {"\"mygpu\"", "\"a test GPU\"", "1e9",    "2e12", "1024", "4",
                                       "\"HBM3\"",  "5e13",           "1e15",   "5e7",  "4e11", "2e-6",
                                       "5e10",      "5e-6",           "6.4e10", "3e-6", "500"};
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\n");
    int first = 1;
    for (int i = 0; i < 17; i++) {
        if (!strcmp(keys[i], drop)) continue;
        const char *v = !strcmp(keys[i], replace_key) ? replace_val : vals[i];
        fprintf(f, "%s  \"%s\": %s", first ? "" : ",\n", keys[i], v);
        first = 0;
    }
    fprintf(f, "%s\n}\n", extra);
    fclose(f);
    return path;
}

static void expect_error(const char *path, const char *field, mdc_status want) {
    mdc_device_spec s;
    TU_STATUS(mdc_spec_from_json_file(path, &s), want);
    TU_CONTAINS(mdc_detail(), path);
    if (field) TU_CONTAINS(mdc_detail(), field);
    fprintf(stderr, "  %s\n", mdc_detail());
}

int main(void) {
    TU_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    mdc_device_spec s;
    const char *good = write_dev("good", "", "", "", "");
    MDC_CHECK(mdc_spec_from_json_file(good, &s));
    TU_CHECK(!strcmp(s.name, "mygpu") && !strcmp(s.hbm_gen, "HBM3"), "strings");
    TU_EQ_DBL(s.hbm_bw, 2e12);
    TU_EQ_DBL(s.pcie_bw, 6.4e10);
    TU_EQ_DBL(s.launch_overhead, 3e-6);
    TU_CHECK(s.hbm_bus_bits_per_stack == 1024 && s.hbm_stacks == 4, "ints");
    TU_CHECK(s.assumed == 0, "assumed %u", s.assumed);
    /* it works as a device through the options */
    mdc_device_options o;
    mdc_device_options_default(&o);
    snprintf(o.device_file, sizeof o.device_file, "%s", good);
    mdc_device *d;
    MDC_CHECK(mdc_device_create(&d, &o, 0));
    mdc_dev_kernel(d, 5e13, 0, MDC_PREC_FP32);
    TU_EQ_DBL(mdc_dev_now(d), 1 + 3e-6);
    mdc_device_free(d);

    expect_error(write_dev("missing", "net_bw", "", "", ""), "missing field 'net_bw'", MDC_ERR_FORMAT);
    expect_error(write_dev("zero", "", "hbm_bw", "0", ""), "'hbm_bw' must be > 0", MDC_ERR_FORMAT);
    expect_error(write_dev("negative", "", "nvlink_bw", "-3e11", ""), "'nvlink_bw' must be > 0", MDC_ERR_FORMAT);
    expect_error(write_dev("neglat", "", "net_latency", "-1", ""), "'net_latency' must be >= 0", MDC_ERR_FORMAT);
    expect_error(write_dev("unknown", "", "", "", ",\n  \"hbm_bandwidth\": 3"), "unknown field 'hbm_bandwidth'",
                 MDC_ERR_FORMAT);
    expect_error(write_dev("type", "", "pcie_bw", "\"fast\"", ""), "'pcie_bw' must be a number", MDC_ERR_FORMAT);
    expect_error(write_dev("strtype", "", "name", "7", ""), "'name' must be a string", MDC_ERR_FORMAT);
    expect_error(write_dev("int", "", "hbm_stacks", "2.5", ""), "'hbm_stacks' must be an integer", MDC_ERR_FORMAT);
    expect_error(write_dev("dup", "", "", "", ",\n  \"hbm_bw\": 1e12"), "'hbm_bw' given twice", MDC_ERR_FORMAT);
    expect_error(write_dev("inf", "", "hbm_bytes", "1e999", ""), "'hbm_bytes' must be finite", MDC_ERR_FORMAT);
    expect_error(write_dev("long", "", "name", "\"a-name-much-longer-than-thirty-one-chars\"", ""), "'name' longer",
                 MDC_ERR_FORMAT);
    expect_error(write_dev("badjson", "", "tdp_watts", "500,,", ""), "not valid JSON", MDC_ERR_FORMAT);
    char nofile[320];
    snprintf(nofile, sizeof nofile, "%s/nosuch.json", dir);
    expect_error(nofile, "cannot open", MDC_ERR_IO);
    char arr[320];
    snprintf(arr, sizeof arr, "%s/array.json", dir);
    FILE *f = fopen(arr, "w");
    fprintf(f, "[1, 2]\n");
    fclose(f);
    expect_error(arr, "expected a JSON object", MDC_ERR_FORMAT);
    /* mdc_device_create passes the error on */
    snprintf(o.device_file, sizeof o.device_file, "%s/zero.json", dir);
    TU_STATUS(mdc_device_create(&d, &o, 0), MDC_ERR_FORMAT);
    TU_CONTAINS(mdc_detail(), "hbm_bw");
    const char *names[] = {"good",    "missing", "zero", "negative", "neglat", "unknown", "type",
                           "strtype", "int",     "dup",  "inf",      "long",   "badjson", "array"};
    for (int i = 0; i < 14; i++) {
        char p[320];
        snprintf(p, sizeof p, "%s/%s.json", dir, names[i]);
        remove(p);
    }
    TU_CHECK(remove(dir) == 0, "temp dir not empty: %s", dir);
    return tu_finish("test_device_json");
}
