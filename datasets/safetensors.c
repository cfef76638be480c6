/* safetensors read and write (https://github.com/huggingface/safetensors, format section).
 *
 * Layout: u64 little-endian N, then N bytes of UTF-8 JSON (padded with spaces), then the data
 * area. The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the data area) plus an optional "__metadata__" string map.
 *
 * The reader validates everything the reference implementation does (header bounds, known
 * dtypes, shape bytes == end - begin, tensors tiling the data area with no gap or overlap)
 * before it allocates the tensors, so a file can never make it read outside itself or allocate
 * more than its own size; the rules are listed in include/minidc/tensorfile.h. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_strict.h"
#include "minidc/tensorfile.h"
#include "source.h"

typedef struct {
    const char *name; /* points into the cJSON tree */
    mdc_tdtype dtype;
    int ndim;
    int64_t shape[MDC_TENSOR_MAX_DIMS];
    size_t numel, nbytes;
    uint64_t begin, end;
} entry;

/* An exact non-negative integer <= 2^53 from a JSON number. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double v = j->valuedouble;
    if (!(v >= 0) || v > 9007199254740992.0 || floor(v) != v) return 0;
    *out = (uint64_t)v;
    return 1;
}

static int cmp_offset(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const entry *const *)a)->name, (*(const entry *const *)b)->name);
}

/* Validates one tensor entry of the header (everything but its place in the data area). */
static mdc_status parse_entry(const char *label, const cJSON *j, entry *e) {
    const char *name = j->string;
    if (!name || !*name) return mdc_fail(MDC_ERR_FORMAT, "%s: header has a tensor with an empty name", label);
    e->name = name;
    if (!cJSON_IsObject(j))
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': header entry is not an object", label, name);
    const cJSON *dt = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *k = j->child; k; k = k->next) {
        const cJSON **slot = !strcmp(k->string, "dtype")          ? &dt
                             : !strcmp(k->string, "shape")        ? &shape
                             : !strcmp(k->string, "data_offsets") ? &offs
                                                                  : NULL;
        if (!slot) return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': unknown field '%s'", label, name, k->string);
        if (*slot) return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': field '%s' given twice", label, name, k->string);
        *slot = k;
    }
    if (!dt || !shape || !offs)
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': missing field '%s'", label, name,
                        !dt      ? "dtype"
                        : !shape ? "shape"
                                 : "data_offsets");
    if (!cJSON_IsString(dt) || mdc_tdtype_from_name(dt->valuestring, &e->dtype) != MDC_OK)
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': unknown dtype %s%s%s", label, name,
                        cJSON_IsString(dt) ? "'" : "", cJSON_IsString(dt) ? dt->valuestring : "(not a string)",
                        cJSON_IsString(dt) ? "'" : "");
    if (!cJSON_IsArray(shape)) return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': shape is not an array", label, name);
    int nd = cJSON_GetArraySize(shape);
    if (nd > MDC_TENSOR_MAX_DIMS)
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': %d dims, more than %d", label, name, nd, MDC_TENSOR_MAX_DIMS);
    e->ndim = 0;
    for (const cJSON *d = shape->child; d; d = d->next) {
        uint64_t v;
        if (!json_uint(d, &v))
            return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", label, name,
                            e->ndim);
        e->shape[e->ndim++] = (int64_t)v;
    }
    if (mdc_shape_bytes(e->ndim, e->shape, mdc_tdtype_size(e->dtype), &e->numel, &e->nbytes))
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': shape too large (element count overflows)", label, name);
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &e->begin) ||
        !json_uint(offs->child->next, &e->end))
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': data_offsets is not [begin, end] of integers", label, name);
    if (e->end < e->begin)
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': data_offsets end %llu < begin %llu", label, name,
                        (unsigned long long)e->end, (unsigned long long)e->begin);
    if (e->end - e->begin != e->nbytes)
        return mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': data_offsets span %llu bytes but shape x %s is %zu bytes",
                        label, name, (unsigned long long)(e->end - e->begin), mdc_tdtype_name(e->dtype), e->nbytes);
    return MDC_OK;
}

static mdc_status parse_metadata(const char *label, const cJSON *j, mdc_tensorfile *tf) {
    if (!cJSON_IsObject(j)) return mdc_fail(MDC_ERR_FORMAT, "%s: __metadata__ is not an object", label);
    for (const cJSON *k = j->child; k; k = k->next) {
        if (!cJSON_IsString(k))
            return mdc_fail(MDC_ERR_FORMAT, "%s: __metadata__ '%s' is not a string", label, k->string);
        if (mdc_tensorfile_get_meta(tf, k->string))
            return mdc_fail(MDC_ERR_FORMAT, "%s: __metadata__ '%s' given twice", label, k->string);
        mdc_status st = mdc_tensorfile_set_meta(tf, k->string, k->valuestring);
        if (st) return st;
    }
    return MDC_OK;
}

static mdc_status parse_source(mdc_source *s, mdc_tensorfile **out) {
    const char *label = s->label;
    mdc_status st = MDC_OK;
    char *hdr = NULL;
    cJSON *root = NULL;
    entry *es = NULL;
    entry **byname = NULL;
    mdc_tensorfile *tf = NULL;
    int n = 0;
    *out = NULL;

    unsigned char lenb[8];
    if (s->size < 8) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: %zu bytes, too short for the 8-byte header length", label, s->size);
        goto done;
    }
    if ((st = mdc_source_read(s, 0, 8, lenb))) goto done;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | lenb[i];
    if (hlen < 2 || hlen > MDC_SAFETENSORS_MAX_HEADER || hlen > s->size - 8) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: header length %llu is not in [2, min(%u, file size %zu - 8)]", label,
                      (unsigned long long)hlen, MDC_SAFETENSORS_MAX_HEADER, s->size);
        goto done;
    }
    hdr = malloc(hlen + 1);
    if (!hdr) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s: header of %llu bytes", label, (unsigned long long)hlen);
        goto done;
    }
    if ((st = mdc_source_read(s, 8, hlen, hdr))) goto done;
    hdr[hlen] = '\0';
    if (hdr[0] != '{') {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: header does not start with '{'", label);
        goto done;
    }
    /* RFC 8259 (UTF-8, no NUL: cJSON's strings are C strings, "a\u0000b" would read as "a") */
    char hlabel[600];
    snprintf(hlabel, sizeof hlabel, "%s: header", label);
    if ((st = mdc_json_strict(hlabel, hdr, hlen, NULL))) goto done;
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(hdr, hlen, &end, 0);
    if (!root || !cJSON_IsObject(root)) {
        const char *at = cJSON_GetErrorPtr();
        long pos = (at && at >= hdr && at <= hdr + hlen) ? (long)(at - hdr) : -1;
        st = mdc_fail(MDC_ERR_FORMAT, "%s: header is not a JSON object (error near byte %ld of %llu)", label, pos,
                      (unsigned long long)hlen);
        goto done;
    }
    for (const char *p = end; p && p < hdr + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: header has bytes after the JSON object (at byte %ld)", label,
                          (long)(p - hdr));
            goto done;
        }
    if ((st = mdc_tensorfile_new(&tf))) goto done;

    int cap = cJSON_GetArraySize(root);
    es = calloc(cap ? (size_t)cap : 1, sizeof *es);
    byname = calloc(cap ? (size_t)cap : 1, sizeof *byname);
    if (!es || !byname) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s: %d header entries", label, cap);
        goto done;
    }
    int have_meta = 0;
    for (const cJSON *j = root->child; j; j = j->next) {
        if (j->string && !strcmp(j->string, "__metadata__")) {
            if (have_meta++) {
                st = mdc_fail(MDC_ERR_FORMAT, "%s: __metadata__ given twice", label);
                goto done;
            }
            if ((st = parse_metadata(label, j, tf))) goto done;
            continue;
        }
        if ((st = parse_entry(label, j, &es[n]))) goto done;
        byname[n] = &es[n];
        n++;
    }
    qsort(byname, (size_t)n, sizeof *byname, cmp_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(byname[i - 1]->name, byname[i]->name)) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s' appears twice in the header", label, byname[i]->name);
            goto done;
        }
    qsort(es, (size_t)n, sizeof *es, cmp_offset);
    uint64_t data_len = s->size - 8 - hlen, expect = 0;
    for (int i = 0; i < n; i++) {
        if (es[i].begin != expect) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': data_offsets begin %llu, expected %llu (%s)", label,
                          es[i].name, (unsigned long long)es[i].begin, (unsigned long long)expect,
                          es[i].begin < expect ? "overlaps the previous tensor" : "gap before it");
            goto done;
        }
        expect = es[i].end;
        if (expect > data_len) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: tensor '%s': data_offsets end %llu past the data area (%llu bytes)",
                          label, es[i].name, (unsigned long long)expect, (unsigned long long)data_len);
            goto done;
        }
    }
    if (expect != data_len) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: tensors cover %llu bytes but the data area has %llu", label,
                      (unsigned long long)expect, (unsigned long long)data_len);
        goto done;
    }
    /* Everything fits inside the file: now allocate and read. */
    tf->tensors = calloc(n ? (size_t)n : 1, sizeof *tf->tensors);
    if (!tf->tensors) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s: %d tensors", label, n);
        goto done;
    }
    tf->cap = n ? n : 1;
    for (int i = 0; i < n; i++) {
        mdc_tensor *t = &tf->tensors[i];
        t->name = strdup(es[i].name);
        t->dtype = es[i].dtype;
        t->ndim = es[i].ndim;
        memcpy(t->shape, es[i].shape, sizeof t->shape);
        t->numel = es[i].numel;
        t->nbytes = es[i].nbytes;
        t->data = t->nbytes ? malloc(t->nbytes) : NULL;
        tf->count++;
        if (!t->name || (t->nbytes && !t->data)) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "%s: tensor '%s': %zu bytes", label, es[i].name, t->nbytes);
            goto done;
        }
        if ((st = mdc_source_read(s, 8 + hlen + es[i].begin, t->nbytes, t->data))) {
            mdc_fail(st, "%s: tensor '%s': %s", label, es[i].name, mdc_detail());
            goto done;
        }
    }
    *out = tf;
    tf = NULL;
done:
    mdc_tensorfile_free(tf);
    free(byname);
    free(es);
    cJSON_Delete(root);
    free(hdr);
    return st;
}

mdc_status mdc_safetensors_parse(const void *buf, size_t len, const char *label, mdc_tensorfile **out) {
    mdc_source s;
    mdc_source_mem(&s, buf, len, label);
    return parse_source(&s, out);
}

mdc_status mdc_safetensors_read(const char *path, mdc_tensorfile **out) {
    mdc_source s;
    *out = NULL;
    mdc_status st = mdc_source_open(&s, path);
    if (st) return st;
    st = parse_source(&s, out);
    mdc_source_close(&s);
    return st;
}

mdc_status mdc_safetensors_write(const char *path, const mdc_tensorfile *tf) {
    mdc_status st = MDC_OK;
    cJSON *root = cJSON_CreateObject();
    char *json = NULL;
    FILE *f = NULL;
    if (!root) return mdc_fail(MDC_ERR_OOM_HOST, "%s: header", path);
    if (tf->meta_count) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < tf->meta_count; i++)
            if (!cJSON_AddStringToObject(m, tf->meta_keys[i], tf->meta_values[i])) m = NULL;
        if (!m) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "%s: header", path);
            goto done;
        }
    }
    uint64_t off = 0;
    for (int i = 0; i < tf->count; i++) {
        const mdc_tensor *t = &tf->tensors[i];
        if (!strcmp(t->name, "__metadata__")) {
            st = mdc_fail(MDC_ERR_INVALID, "%s: a tensor cannot be called __metadata__", path);
            goto done;
        }
        cJSON *e = cJSON_AddObjectToObject(root, t->name);
        double sh[MDC_TENSOR_MAX_DIMS], offs[2] = {(double)off, (double)(off + t->nbytes)};
        for (int d = 0; d < t->ndim; d++) sh[d] = (double)t->shape[d];
        cJSON *shape = cJSON_CreateArray();
        for (int d = 0; shape && d < t->ndim; d++) {
            cJSON *num = cJSON_CreateNumber(sh[d]);
            if (!num || !cJSON_AddItemToArray(shape, num)) {
                cJSON_Delete(num);
                cJSON_Delete(shape);
                shape = NULL;
            }
        }
        if (!e || !shape || !cJSON_AddStringToObject(e, "dtype", mdc_tdtype_name(t->dtype)) ||
            !cJSON_AddItemToObject(e, "shape", shape) ||
            !cJSON_AddItemToObject(e, "data_offsets", cJSON_CreateDoubleArray(offs, 2))) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "%s: header entry for '%s'", path, t->name);
            goto done;
        }
        off += t->nbytes;
    }
    json = cJSON_PrintUnformatted(root);
    if (!json) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s: header", path);
        goto done;
    }
    size_t jl = strlen(json), hl = (jl + 7) / 8 * 8;
    mdc_atomic a;
    if ((st = mdc_atomic_open(&a, path))) goto done;
    f = a.f;
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    int ok = fwrite(lenb, 1, 8, f) == 8 && fwrite(json, 1, jl, f) == jl;
    for (size_t i = jl; ok && i < hl; i++) ok = fputc(' ', f) != EOF;
    for (int i = 0; ok && i < tf->count; i++)
        ok = !tf->tensors[i].nbytes ||
             fwrite(tf->tensors[i].data, 1, tf->tensors[i].nbytes, f) == tf->tensors[i].nbytes;
    f = NULL; /* the commit closes it */
    st = mdc_atomic_commit(&a, ok, path);
done:
    free(json);
    cJSON_Delete(root);
    return st;
}
