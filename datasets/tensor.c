/* Named host tensors and lists of them: dtypes, shape arithmetic with overflow checks,
 * conversions, and the mdc_tensorfile container shared by the safetensors and .npy code. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "minidc/device.h"
#include "minidc/tensorfile.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[MDC_TD_COUNT] = {
    [MDC_TD_F32] = {"F32", 4},   [MDC_TD_F16] = {"F16", 2}, [MDC_TD_BF16] = {"BF16", 2}, [MDC_TD_F64] = {"F64", 8},
    [MDC_TD_I64] = {"I64", 8},   [MDC_TD_I32] = {"I32", 4}, [MDC_TD_I16] = {"I16", 2},   [MDC_TD_I8] = {"I8", 1},
    [MDC_TD_U64] = {"U64", 8},   [MDC_TD_U32] = {"U32", 4}, [MDC_TD_U16] = {"U16", 2},   [MDC_TD_U8] = {"U8", 1},
    [MDC_TD_BOOL] = {"BOOL", 1},
};

const char *mdc_tdtype_name(mdc_tdtype dt) { return ((int)dt >= 0 && dt < MDC_TD_COUNT) ? dtypes[dt].name : "?"; }

size_t mdc_tdtype_size(mdc_tdtype dt) { return ((int)dt >= 0 && dt < MDC_TD_COUNT) ? dtypes[dt].size : 0; }

mdc_status mdc_tdtype_from_name(const char *name, mdc_tdtype *out) {
    for (int i = 0; i < MDC_TD_COUNT; i++)
        if (name && !strcmp(name, dtypes[i].name)) {
            *out = (mdc_tdtype)i;
            return MDC_OK;
        }
    return MDC_ERR_FORMAT;
}

mdc_status mdc_shape_bytes(int ndim, const int64_t *shape, size_t elem_size, size_t *numel, size_t *nbytes) {
    const uint64_t limit = (uint64_t)1 << 53; /* exact in a JSON double, far above any host */
    if (ndim < 0 || ndim > MDC_TENSOR_MAX_DIMS || elem_size == 0) return MDC_ERR_FORMAT;
    uint64_t n = 1;
    int zero = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return MDC_ERR_FORMAT;
        if (shape[i] == 0) zero = 1;
    }
    /* A zero dim makes the product 0 whatever the others are, but huge others are still
     * rejected: every dim must itself be plausible. */
    for (int i = 0; i < ndim; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d > limit) return MDC_ERR_FORMAT;
        if (!zero && __builtin_mul_overflow(n, d, &n)) return MDC_ERR_FORMAT;
        if (!zero && n > limit) return MDC_ERR_FORMAT;
    }
    if (zero) n = 0;
    uint64_t b;
    if (__builtin_mul_overflow(n, (uint64_t)elem_size, &b) || b > limit || b > SIZE_MAX) return MDC_ERR_FORMAT;
    *numel = (size_t)n;
    *nbytes = (size_t)b;
    return MDC_OK;
}

void mdc_tensor_clear(mdc_tensor *t) {
    if (!t) return;
    free(t->name);
    free(t->data);
    memset(t, 0, sizeof *t);
}

mdc_status mdc_tensor_to_f32(const mdc_tensor *t, float *dst, size_t n) {
    if (t->numel != n) return mdc_fail(MDC_ERR_FORMAT, "tensor '%s': %zu elements, expected %zu", t->name, t->numel, n);
    switch (t->dtype) {
    case MDC_TD_F32: memcpy(dst, t->data, n * 4); return MDC_OK;
    case MDC_TD_F16:
        for (size_t i = 0; i < n; i++) dst[i] = mdc_f16_to_f32(((const uint16_t *)t->data)[i]);
        return MDC_OK;
    case MDC_TD_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = mdc_bf16_to_f32(((const uint16_t *)t->data)[i]);
        return MDC_OK;
    case MDC_TD_F64:
        for (size_t i = 0; i < n; i++) dst[i] = (float)((const double *)t->data)[i];
        return MDC_OK;
    default:
        return mdc_fail(MDC_ERR_FORMAT, "tensor '%s': dtype %s is not a floating-point type", t->name,
                        mdc_tdtype_name(t->dtype));
    }
}

mdc_status mdc_tensor_to_i32(const mdc_tensor *t, int32_t *dst, size_t n) {
    if (t->numel != n) return mdc_fail(MDC_ERR_FORMAT, "tensor '%s': %zu elements, expected %zu", t->name, t->numel, n);
    const unsigned char *p = t->data;
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        switch (t->dtype) {
        case MDC_TD_I64: {
            int64_t x;
            memcpy(&x, p + 8 * i, 8);
            v = x;
            break;
        }
        case MDC_TD_I32: {
            int32_t x;
            memcpy(&x, p + 4 * i, 4);
            v = x;
            break;
        }
        case MDC_TD_I16: {
            int16_t x;
            memcpy(&x, p + 2 * i, 2);
            v = x;
            break;
        }
        case MDC_TD_I8: v = (int8_t)p[i]; break;
        case MDC_TD_U64: {
            uint64_t x;
            memcpy(&x, p + 8 * i, 8);
            v = x > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)x;
            break;
        }
        case MDC_TD_U32: {
            uint32_t x;
            memcpy(&x, p + 4 * i, 4);
            v = x;
            break;
        }
        case MDC_TD_U16: {
            uint16_t x;
            memcpy(&x, p + 2 * i, 2);
            v = x;
            break;
        }
        case MDC_TD_U8: v = p[i]; break;
        default:
            return mdc_fail(MDC_ERR_FORMAT, "tensor '%s': dtype %s is not an integer type", t->name,
                            mdc_tdtype_name(t->dtype));
        }
        if (v < INT32_MIN || v > INT32_MAX)
            return mdc_fail(MDC_ERR_FORMAT, "tensor '%s': element %zu = %lld does not fit in int32", t->name, i,
                            (long long)v);
        dst[i] = (int32_t)v;
    }
    return MDC_OK;
}

mdc_status mdc_tensorfile_new(mdc_tensorfile **out) {
    *out = calloc(1, sizeof **out);
    return *out ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "tensor list");
}

void mdc_tensorfile_free(mdc_tensorfile *tf) {
    if (!tf) return;
    for (int i = 0; i < tf->count; i++) mdc_tensor_clear(&tf->tensors[i]);
    for (int i = 0; i < tf->meta_count; i++) {
        free(tf->meta_keys[i]);
        free(tf->meta_values[i]);
    }
    free(tf->tensors);
    free(tf->meta_keys);
    free(tf->meta_values);
    free(tf);
}

const mdc_tensor *mdc_tensorfile_find(const mdc_tensorfile *tf, const char *name) {
    for (int i = 0; i < tf->count; i++)
        if (!strcmp(tf->tensors[i].name, name)) return &tf->tensors[i];
    return NULL;
}

/* Appends a tensor with the given header and an allocated, zeroed buffer; returns it. */
static mdc_status add_empty(mdc_tensorfile *tf, const char *name, mdc_tdtype dt, int ndim, const int64_t *shape,
                            mdc_tensor **out) {
    mdc_tensor t = {0};
    if (!name || !*name) return mdc_fail(MDC_ERR_INVALID, "tensor name is empty");
    if (mdc_tensorfile_find(tf, name)) return mdc_fail(MDC_ERR_INVALID, "tensor '%s' added twice", name);
    if (!mdc_tdtype_size(dt)) return mdc_fail(MDC_ERR_INVALID, "tensor '%s': bad dtype %d", name, (int)dt);
    if (mdc_shape_bytes(ndim, shape, mdc_tdtype_size(dt), &t.numel, &t.nbytes))
        return mdc_fail(MDC_ERR_INVALID, "tensor '%s': bad shape (ndim %d)", name, ndim);
    if (tf->count == tf->cap) {
        int cap = tf->cap ? 2 * tf->cap : 16;
        mdc_tensor *nt = realloc(tf->tensors, (size_t)cap * sizeof *nt);
        if (!nt) return mdc_fail(MDC_ERR_OOM_HOST, "tensor list");
        tf->tensors = nt;
        tf->cap = cap;
    }
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    t.name = strdup(name);
    t.data = t.nbytes ? calloc(1, t.nbytes) : NULL;
    if (!t.name || (t.nbytes && !t.data)) {
        mdc_tensor_clear(&t);
        return mdc_fail(MDC_ERR_OOM_HOST, "tensor '%s': %zu bytes", name, t.nbytes);
    }
    tf->tensors[tf->count] = t;
    *out = &tf->tensors[tf->count++];
    return MDC_OK;
}

mdc_status mdc_tensorfile_add(mdc_tensorfile *tf, const char *name, mdc_tdtype dt, int ndim, const int64_t *shape,
                              const void *data) {
    mdc_tensor *t = NULL;
    mdc_status st = add_empty(tf, name, dt, ndim, shape, &t);
    if (st == MDC_OK && data && t->nbytes) memcpy(t->data, data, t->nbytes);
    return st;
}

mdc_status mdc_tensorfile_add_f32(mdc_tensorfile *tf, const char *name, mdc_tdtype dt, int ndim, const int64_t *shape,
                                  const float *data) {
    if (dt != MDC_TD_F32 && dt != MDC_TD_F16 && dt != MDC_TD_BF16 && dt != MDC_TD_I32)
        return mdc_fail(MDC_ERR_INVALID, "tensor '%s': cannot store floats as %s", name, mdc_tdtype_name(dt));
    mdc_tensor *t = NULL;
    mdc_status st = add_empty(tf, name, dt, ndim, shape, &t);
    if (st != MDC_OK || !data) return st;
    uint16_t *h = t->data;
    for (size_t i = 0; i < t->numel; i++) {
        if (dt == MDC_TD_F32) ((float *)t->data)[i] = data[i];
        else if (dt == MDC_TD_I32) ((int32_t *)t->data)[i] = (int32_t)data[i]; /* integer values */
        else if (dt == MDC_TD_F16) h[i] = mdc_f32_to_f16(data[i]);
        else h[i] = mdc_f32_to_bf16(data[i]);
    }
    return MDC_OK;
}

mdc_status mdc_tensorfile_set_meta(mdc_tensorfile *tf, const char *key, const char *value) {
    for (int i = 0; i < tf->meta_count; i++)
        if (!strcmp(tf->meta_keys[i], key)) {
            char *v = strdup(value);
            if (!v) return mdc_fail(MDC_ERR_OOM_HOST, "metadata '%s'", key);
            free(tf->meta_values[i]);
            tf->meta_values[i] = v;
            return MDC_OK;
        }
    if (tf->meta_count == tf->meta_cap) {
        int cap = tf->meta_cap ? 2 * tf->meta_cap : 8;
        char **k = realloc(tf->meta_keys, (size_t)cap * sizeof *k);
        if (!k) return mdc_fail(MDC_ERR_OOM_HOST, "metadata");
        tf->meta_keys = k;
        char **v = realloc(tf->meta_values, (size_t)cap * sizeof *v);
        if (!v) return mdc_fail(MDC_ERR_OOM_HOST, "metadata");
        tf->meta_values = v;
        tf->meta_cap = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return mdc_fail(MDC_ERR_OOM_HOST, "metadata '%s'", key);
    }
    tf->meta_keys[tf->meta_count] = k;
    tf->meta_values[tf->meta_count++] = v;
    return MDC_OK;
}

const char *mdc_tensorfile_get_meta(const mdc_tensorfile *tf, const char *key) {
    for (int i = 0; i < tf->meta_count; i++)
        if (!strcmp(tf->meta_keys[i], key)) return tf->meta_values[i];
    return NULL;
}

mdc_status mdc_read_file(const char *path, size_t max_bytes, unsigned char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    mdc_status st = MDC_OK;
    unsigned char *buf = NULL;
    struct stat pre; /* before opening: a FIFO would block the open until someone writes to it */
    if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode))
        return mdc_fail(MDC_ERR_IO, "%s: not a regular file (a directory, device or FIFO)", path);
    FILE *f = fopen(path, "rb");
    if (!f) return mdc_fail(MDC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = mdc_fail(MDC_ERR_IO, "%s: not a regular file", path);
        goto done;
    }
    if ((uint64_t)sb.st_size > max_bytes) {
        st = mdc_fail(MDC_ERR_IO, "%s: %lld bytes, more than the limit of %zu", path, (long long)sb.st_size, max_bytes);
        goto done;
    }
    size_t n = (size_t)sb.st_size;
    buf = malloc(n ? n : 1);
    if (!buf) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s: %zu bytes", path, n);
        goto done;
    }
    if (fread(buf, 1, n, f) != n) {
        st = mdc_fail(MDC_ERR_IO, "%s: short read", path);
        goto done;
    }
    *out = buf;
    *len = n;
    buf = NULL;
done:
    free(buf);
    fclose(f);
    return st;
}
