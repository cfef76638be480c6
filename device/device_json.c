/* Custom devices and energy tables from JSON files, validated field by field. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "minidc/device.h"

typedef struct {
    const char *key;
    size_t offset;
    char kind;        /* 'd' double > 0, 'z' double >= 0, 'i' int > 0, 's' string, 'e' optional double >= 0 */
    size_t size;      /* strings: buffer size */
    double lo, hi;    /* numbers: the physically sensible range, inclusive */
    const char *unit; /* numbers: for the range message */
} field;

/* Ranges: every preset (and the measured host) lies well inside them; outside them a rate or
 * capacity is no real device and only breaks the model (1e-300 FLOP/s sends the virtual clock
 * to 1e300 s or infinity, and throttle mode would wait forever; 1e9 stacks overflow the bus
 * width). Lower bounds of rates are 1 MB/s and 1 MFLOP/s; upper bounds are orders of magnitude
 * past any announced part (vr300: 1 TiB, 32 TB/s, 9 PFLOP/s, 16 stacks of 2048 bits, 3600 W). */
#define D(k, lo, hi, u) \
    { #k, offsetof(mdc_device_spec, k), 'd', 0, lo, hi, u }
#define Z(k, lo, hi, u) \
    { #k, offsetof(mdc_device_spec, k), 'z', 0, lo, hi, u }
#define I(k, lo, hi, u) \
    { #k, offsetof(mdc_device_spec, k), 'i', 0, lo, hi, u }
#define S(k) \
    { #k, offsetof(mdc_device_spec, k), 's', sizeof(((mdc_device_spec *)0)->k), 0, 0, NULL }
static const field spec_fields[] = {
    S(name),
    S(description),
    D(hbm_bytes, 1e6, 1e16, "bytes"),
    D(hbm_bw, 1e6, 1e16, "bytes/s"),
    I(hbm_bus_bits_per_stack, 1, 65536, "bits"),
    I(hbm_stacks, 1, 1024, "stacks"),
    S(hbm_gen),
    D(flops_fp32, 1e6, 1e21, "FLOP/s"),
    D(flops_bf16, 1e6, 1e21, "FLOP/s"),
    D(sram_bytes, 1e3, 1e13, "bytes"),
    D(nvlink_bw, 1e6, 1e16, "bytes/s"),
    Z(nvlink_latency, 0, 1, "s"),
    D(net_bw, 1e6, 1e16, "bytes/s"),
    Z(net_latency, 0, 1, "s"),
    D(pcie_bw, 1e6, 1e16, "bytes/s"),
    Z(launch_overhead, 0, 1, "s"),
    D(tdp_watts, 0.1, 1e6, "W"),
    /* the achievable fractions (mdc_device_efficiency): all six or none (the peak model) */
    {"gemm_eff", offsetof(mdc_device_spec, eff.gemm), 'e', 0, 0.01, 1, "of peak"},
    {"gemm_half_flops", offsetof(mdc_device_spec, eff.gemm_half), 'e', 0, 0, 1e15, "FLOP"},
    {"mem_eff", offsetof(mdc_device_spec, eff.mem), 'e', 0, 0.01, 1, "of bandwidth"},
    {"mem_half_bytes", offsetof(mdc_device_spec, eff.mem_half), 'e', 0, 0, 1e12, "bytes"},
    {"nvlink_eff", offsetof(mdc_device_spec, eff.nvlink), 'e', 0, 0.01, 1, "of bandwidth"},
    {"net_eff", offsetof(mdc_device_spec, eff.net), 'e', 0, 0.01, 1, "of bandwidth"},
};
#undef D
#undef Z
#undef I
#undef S
/* Energies: the largest published figure is ~2600 pJ per 64-bit DRAM read; 1 uJ is far past. */
#define D(k) \
    { #k, offsetof(mdc_energy_table, k), 'z', 0, 0, 1e6, "pJ" }
static const field table_fields[] = {
    D(pj_int_op),
    D(pj_fp_op),
    D(pj_sram_64b),
    D(pj_dram_64b),
    D(pj_hbm_bit),
    D(pj_nvlink_bit),
    D(pj_net_bit),
    D(pj_pcie_bit),
    {"name", offsetof(mdc_energy_table, name), 's', sizeof(((mdc_energy_table *)0)->name), 0, 0, NULL},
    {"source", offsetof(mdc_energy_table, source), 's', sizeof(((mdc_energy_table *)0)->source), 0, 0, NULL},
};
#undef D

/* Reads a whole file into a NUL-terminated buffer the caller frees. */
static mdc_status read_text(const char *path, char **out) {
    *out = NULL;
    struct stat pre; /* a FIFO would block the open until someone writes to it */
    if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode))
        return mdc_fail(MDC_ERR_IO, "%s: not a regular file (a directory, device or FIFO)", path);
    FILE *f = fopen(path, "rb");
    if (!f) return mdc_fail(MDC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 8192;
            if (cap > (16u << 20)) {
                free(buf);
                fclose(f);
                return mdc_fail(MDC_ERR_FORMAT, "%s: larger than 16 MiB, not a device file", path);
            }
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r < 4096) break;
    }
    fclose(f);
    buf[n] = '\0';
    if (strlen(buf) != n) { /* JSON has no NUL: a parser would stop there and ignore the rest */
        size_t at = strlen(buf);
        free(buf);
        return mdc_fail(MDC_ERR_FORMAT, "%s: a NUL byte at byte %zu: not a JSON text", path, at);
    }
    *out = buf;
    return MDC_OK;
}

/* Fills `dst` from the JSON object. All fields required unless `optional_strings`. */
static mdc_status load_fields(const char *path, const char *text, void *dst, const field *fs, int nf,
                              int optional_strings) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 0);
    if (!root)
        return mdc_fail(MDC_ERR_FORMAT, "%s: not valid JSON (near byte %ld)", path,
                        (long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - text : 0));
    mdc_status st = MDC_OK;
    for (const char *p = end; p && *p; p++) /* only white space may follow the object */
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: text after the JSON object (at byte %ld)", path, (long)(p - text));
            goto done;
        }
    if (!cJSON_IsObject(root)) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: expected a JSON object", path);
        goto done;
    }
    for (cJSON *it = root->child; it; it = it->next) {
        int known = 0;
        for (int i = 0; i < nf; i++) known |= !strcmp(it->string, fs[i].key);
        if (!known) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: unknown field '%s'", path, it->string);
            goto done;
        }
        for (cJSON *prev = root->child; prev != it; prev = prev->next)
            if (!strcmp(prev->string, it->string)) {
                st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' given twice", path, it->string);
                goto done;
            }
    }
    for (int i = 0; i < nf; i++) {
        const field *f = &fs[i];
        cJSON *v = cJSON_GetObjectItemCaseSensitive(root, f->key);
        char *p = (char *)dst + f->offset;
        if (!v) {
            if ((f->kind == 's' && optional_strings) || f->kind == 'e') continue;
            st = mdc_fail(MDC_ERR_FORMAT, "%s: missing field '%s'", path, f->key);
            goto done;
        }
        if (f->kind == 's') {
            if (!cJSON_IsString(v)) {
                st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' must be a string", path, f->key);
                goto done;
            }
            if (strlen(v->valuestring) >= f->size) {
                st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' longer than %zu characters", path, f->key, f->size - 1);
                goto done;
            }
            snprintf(p, f->size, "%s", v->valuestring);
            continue;
        }
        if (!cJSON_IsNumber(v)) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' must be a number", path, f->key);
            goto done;
        }
        double x = v->valuedouble;
        if (!isfinite(x)) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' must be finite", path, f->key);
            goto done;
        }
        if ((f->kind == 'd' || f->kind == 'i') && !(x > 0)) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' must be > 0 (got %g)", path, f->key, x);
            goto done;
        }
        if (f->kind == 'z' && !(x >= 0)) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' must be >= 0 (got %g)", path, f->key, x);
            goto done;
        }
        if (f->kind == 'i' && x != floor(x)) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' must be an integer (got %g)", path, f->key, x);
            goto done;
        }
        if (x < f->lo || x > f->hi) {
            st = mdc_fail(MDC_ERR_FORMAT,
                          "%s: field '%s' = %g %s is out of range (a real device "
                          "has %g..%g %s)",
                          path, f->key, x, f->unit, f->lo, f->hi, f->unit);
            goto done;
        }
        if (f->kind == 'i') {
            *(int *)p = (int)x; /* in range, so it fits */
        } else {
            *(double *)p = x;
        }
    }
done:
    cJSON_Delete(root);
    return st;
}

mdc_status mdc_spec_from_json_file(const char *path, mdc_device_spec *out) {
    char *text;
    mdc_status st = read_text(path, &text);
    if (st) return st;
    mdc_device_spec s;
    memset(&s, 0, sizeof s);
    st = load_fields(path, text, &s, spec_fields, (int)(sizeof spec_fields / sizeof spec_fields[0]), 0);
    free(text);
    int given = (s.eff.gemm > 0) + (s.eff.mem > 0) + (s.eff.nvlink > 0) + (s.eff.net > 0);
    if (st == MDC_OK && given && given < 4)
        st = mdc_fail(MDC_ERR_FORMAT,
                      "%s: the efficiencies gemm_eff, mem_eff, nvlink_eff and net_eff come together (with "
                      "gemm_half_flops and mem_half_bytes, 0 if left out), or none of them (the peak model)",
                      path);
    if (st == MDC_OK) *out = s;
    return st;
}

mdc_status mdc_energy_table_from_json_file(const char *path, mdc_energy_table *out) {
    char *text;
    mdc_status st = read_text(path, &text);
    if (st) return st;
    mdc_energy_table t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "file");
    snprintf(t.source, sizeof t.source, "%s", path);
    st = load_fields(path, text, &t, table_fields, (int)(sizeof table_fields / sizeof table_fields[0]), 1);
    free(text);
    if (st == MDC_OK) *out = t;
    return st;
}
