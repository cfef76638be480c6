/* Custom devices and energy tables from JSON files, validated field by field. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/device.h"

typedef struct {
    const char *key;
    size_t offset;
    char kind;        /* 'd' double > 0, 'z' double >= 0, 'i' int > 0, 's' string */
    size_t size;      /* strings: buffer size */
} field;

#define D(k) {#k, offsetof(mdc_device_spec, k), 'd', 0}
#define Z(k) {#k, offsetof(mdc_device_spec, k), 'z', 0}
#define I(k) {#k, offsetof(mdc_device_spec, k), 'i', 0}
#define S(k) {#k, offsetof(mdc_device_spec, k), 's', sizeof(((mdc_device_spec *)0)->k)}
static const field spec_fields[] = {
    S(name), S(description), D(hbm_bytes), D(hbm_bw), I(hbm_bus_bits_per_stack), I(hbm_stacks),
    S(hbm_gen), D(flops_fp32), D(flops_bf16), D(sram_bytes), D(nvlink_bw), Z(nvlink_latency),
    D(net_bw), Z(net_latency), D(pcie_bw), Z(launch_overhead), D(tdp_watts),
};
#undef D
#undef Z
#undef I
#undef S
#define D(k) {#k, offsetof(mdc_energy_table, k), 'z', 0}
static const field table_fields[] = {
    D(pj_int_op), D(pj_fp_op), D(pj_sram_64b), D(pj_dram_64b), D(pj_hbm_bit), D(pj_nvlink_bit),
    D(pj_net_bit), D(pj_pcie_bit),
    {"name", offsetof(mdc_energy_table, name), 's', sizeof(((mdc_energy_table *)0)->name)},
    {"source", offsetof(mdc_energy_table, source), 's', sizeof(((mdc_energy_table *)0)->source)},
};
#undef D

/* Reads a whole file into a NUL-terminated buffer the caller frees. */
static mdc_status read_text(const char *path, char **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return mdc_fail(MDC_ERR_IO, "%s: cannot open", path);
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
    *out = buf;
    return MDC_OK;
}

/* Fills `dst` from the JSON object. All fields required unless `optional_strings`. */
static mdc_status load_fields(const char *path, const char *text, void *dst, const field *fs,
                              int nf, int optional_strings) {
    cJSON *root = cJSON_Parse(text);
    if (!root) return mdc_fail(MDC_ERR_FORMAT, "%s: not valid JSON (near byte %ld)", path,
                               (long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - text : 0));
    mdc_status st = MDC_OK;
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
            if (f->kind == 's' && optional_strings) continue;
            st = mdc_fail(MDC_ERR_FORMAT, "%s: missing field '%s'", path, f->key);
            goto done;
        }
        if (f->kind == 's') {
            if (!cJSON_IsString(v)) {
                st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' must be a string", path, f->key);
                goto done;
            }
            if (strlen(v->valuestring) >= f->size) {
                st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' longer than %zu characters", path,
                              f->key, f->size - 1);
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
        if (f->kind == 'i') {
            if (x > 1e9 || x != floor(x)) {
                st = mdc_fail(MDC_ERR_FORMAT, "%s: field '%s' must be an integer (got %g)", path, f->key, x);
                goto done;
            }
            *(int *)p = (int)x;
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
