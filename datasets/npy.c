/* .npy read and write (numpy/lib/format.py, NEP 1).
 *
 * Layout: "\x93NUMPY", major, minor, header length (u16 LE in 1.0; u32 LE in 2.0 and 3.0,
 * where 3.0 only allows a UTF-8 header), the header (a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and a final
 * newline), then the raw elements. The header is parsed by a small strict parser of exactly that
 * literal: no eval, three keys each exactly once, no other keys. */
#include <stdlib.h>
#include <string.h>

#include "minidc/tensorfile.h"
#include "source.h"

#define NPY_MAX_HEADER (1u << 20)

typedef struct {
    const char *p, *end, *label;
} lexer;

static void skip_ws(lexer *lx) {
    while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\n' || *lx->p == '\r')) lx->p++;
}

static int eat(lexer *lx, char c) {
    skip_ws(lx);
    if (lx->p < lx->end && *lx->p == c) {
        lx->p++;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes, copied into buf (NUL-terminated, at most cap-1 chars). */
static int read_str(lexer *lx, char *buf, size_t cap) {
    skip_ws(lx);
    if (lx->p >= lx->end || (*lx->p != '\'' && *lx->p != '"')) return 0;
    char q = *lx->p++;
    size_t n = 0;
    while (lx->p < lx->end && *lx->p != q) {
        if (*lx->p == '\\' || n + 1 >= cap) return 0;
        buf[n++] = *lx->p++;
    }
    if (lx->p >= lx->end) return 0;
    lx->p++;
    buf[n] = '\0';
    return 1;
}

static int read_word(lexer *lx, const char *w) {
    skip_ws(lx);
    size_t n = strlen(w);
    if ((size_t)(lx->end - lx->p) < n || memcmp(lx->p, w, n)) return 0;
    lx->p += n;
    return 1;
}

/* A non-negative decimal integer <= 2^53 (optional Python 2 'L' suffix). */
static int read_uint(lexer *lx, int64_t *out) {
    skip_ws(lx);
    uint64_t v = 0;
    int digits = 0;
    while (lx->p < lx->end && *lx->p >= '0' && *lx->p <= '9') {
        v = v * 10 + (uint64_t)(*lx->p++ - '0');
        if (v > ((uint64_t)1 << 53)) return 0;
        digits++;
    }
    if (!digits) return 0;
    if (lx->p < lx->end && *lx->p == 'L') lx->p++;
    *out = (int64_t)v;
    return 1;
}

static mdc_status descr_dtype(const char *label, const char *d, mdc_tdtype *out) {
    static const struct {
        const char *code;
        mdc_tdtype dt;
    } map[] = {{"f8", MDC_TD_F64}, {"f4", MDC_TD_F32}, {"f2", MDC_TD_F16}, {"i8", MDC_TD_I64},
               {"i4", MDC_TD_I32}, {"i2", MDC_TD_I16}, {"i1", MDC_TD_I8},  {"u8", MDC_TD_U64},
               {"u4", MDC_TD_U32}, {"u2", MDC_TD_U16}, {"u1", MDC_TD_U8},  {"b1", MDC_TD_BOOL}};
    char order = d[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return mdc_fail(MDC_ERR_FORMAT, "%s: descr '%s' has no byte-order character", label, d);
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(d + 1, map[i].code)) {
            if (order == '>' && mdc_tdtype_size(map[i].dt) > 1)
                return mdc_fail(MDC_ERR_UNSUPPORTED, "%s: big-endian descr '%s'; save it little-endian", label, d);
            *out = map[i].dt;
            return MDC_OK;
        }
    return mdc_fail(MDC_ERR_UNSUPPORTED, "%s: descr '%s' is not one of f8 f4 f2 i8 i4 i2 i1 u8 u4 u2 u1 b1", label, d);
}

/* Parses the header dict into dtype and shape. */
static mdc_status parse_header(lexer *lx, mdc_tensor *t) {
    const char *label = lx->label;
    int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
    char descr[32];
    if (!eat(lx, '{')) return mdc_fail(MDC_ERR_FORMAT, "%s: header is not a dict literal", label);
    while (!eat(lx, '}')) {
        char key[32];
        if (!read_str(lx, key, sizeof key) || !eat(lx, ':'))
            return mdc_fail(MDC_ERR_FORMAT, "%s: header: expected a quoted key and ':'", label);
        if (!strcmp(key, "descr")) {
            if (have_descr++) return mdc_fail(MDC_ERR_FORMAT, "%s: header: 'descr' given twice", label);
            if (!read_str(lx, descr, sizeof descr))
                return mdc_fail(MDC_ERR_UNSUPPORTED,
                                "%s: header: 'descr' is not a simple type string (structured dtype?)", label);
        } else if (!strcmp(key, "fortran_order")) {
            if (have_fortran++) return mdc_fail(MDC_ERR_FORMAT, "%s: header: 'fortran_order' given twice", label);
            if (read_word(lx, "True")) fortran = 1;
            else if (!read_word(lx, "False"))
                return mdc_fail(MDC_ERR_FORMAT, "%s: header: 'fortran_order' is not True or False", label);
        } else if (!strcmp(key, "shape")) {
            if (have_shape++) return mdc_fail(MDC_ERR_FORMAT, "%s: header: 'shape' given twice", label);
            if (!eat(lx, '(')) return mdc_fail(MDC_ERR_FORMAT, "%s: header: 'shape' is not a tuple", label);
            t->ndim = 0;
            while (!eat(lx, ')')) {
                if (t->ndim == MDC_TENSOR_MAX_DIMS)
                    return mdc_fail(MDC_ERR_FORMAT, "%s: header: shape has more than %d dims", label,
                                    MDC_TENSOR_MAX_DIMS);
                if (!read_uint(lx, &t->shape[t->ndim]))
                    return mdc_fail(MDC_ERR_FORMAT, "%s: header: shape[%d] is not a non-negative integer", label,
                                    t->ndim);
                t->ndim++;
                if (!eat(lx, ',')) {
                    if (!eat(lx, ')')) return mdc_fail(MDC_ERR_FORMAT, "%s: header: shape tuple not closed", label);
                    break;
                }
            }
        } else {
            return mdc_fail(MDC_ERR_FORMAT, "%s: header: unknown key '%s'", label, key);
        }
        if (!eat(lx, ',')) {
            if (!eat(lx, '}')) return mdc_fail(MDC_ERR_FORMAT, "%s: header: expected ',' or '}'", label);
            break;
        }
    }
    skip_ws(lx);
    if (lx->p != lx->end) return mdc_fail(MDC_ERR_FORMAT, "%s: header: bytes after the dict", label);
    if (!have_descr || !have_fortran || !have_shape)
        return mdc_fail(MDC_ERR_FORMAT, "%s: header: missing '%s'", label,
                        !have_descr     ? "descr"
                        : !have_fortran ? "fortran_order"
                                        : "shape");
    mdc_status st = descr_dtype(label, descr, &t->dtype);
    if (st) return st;
    if (fortran && t->ndim > 1) {
        int nontrivial = 0;
        for (int i = 0; i < t->ndim; i++) nontrivial += t->shape[i] > 1;
        if (nontrivial > 1)
            return mdc_fail(MDC_ERR_UNSUPPORTED, "%s: Fortran-order array; save it with np.ascontiguousarray", label);
    }
    if (mdc_shape_bytes(t->ndim, t->shape, mdc_tdtype_size(t->dtype), &t->numel, &t->nbytes))
        return mdc_fail(MDC_ERR_FORMAT, "%s: shape too large (element count overflows)", label);
    return MDC_OK;
}

static mdc_status parse_source(mdc_source *s, mdc_tensor *out) {
    const char *label = s->label;
    mdc_tensor t = {0};
    char *hdr = NULL;
    mdc_status st = MDC_OK;
    unsigned char pre[12];
    memset(out, 0, sizeof *out);
    if (s->size < 10) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: %zu bytes, too short for a .npy header", label, s->size);
        goto done;
    }
    if ((st = mdc_source_read(s, 0, 10, pre))) goto done;
    if (memcmp(pre, "\x93NUMPY", 6)) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: no \\x93NUMPY magic: not a .npy file", label);
        goto done;
    }
    int major = pre[6];
    size_t hstart, hlen;
    if (major == 1) {
        hstart = 10;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (major == 2 || major == 3) {
        if ((st = mdc_source_read(s, 0, 12, pre))) goto done;
        hstart = 12;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else {
        st = mdc_fail(MDC_ERR_UNSUPPORTED, "%s: .npy format version %d.%d (1.0, 2.0, 3.0 supported)", label, major,
                      pre[7]);
        goto done;
    }
    if (hlen > NPY_MAX_HEADER || hlen > s->size - hstart) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: header length %zu exceeds the file (%zu bytes) or %u", label, hlen, s->size,
                      NPY_MAX_HEADER);
        goto done;
    }
    hdr = malloc(hlen + 1);
    if (!hdr) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s: header", label);
        goto done;
    }
    if ((st = mdc_source_read(s, hstart, hlen, hdr))) goto done;
    hdr[hlen] = '\0';
    lexer lx = {hdr, hdr + hlen, label};
    if ((st = parse_header(&lx, &t))) goto done;
    size_t data_len = s->size - hstart - hlen;
    if (data_len != t.nbytes) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: shape x %s is %zu bytes but the file has %zu data bytes", label,
                      mdc_tdtype_name(t.dtype), t.nbytes, data_len);
        goto done;
    }
    t.name = strdup(label);
    t.data = t.nbytes ? malloc(t.nbytes) : NULL;
    if (!t.name || (t.nbytes && !t.data)) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s: %zu bytes", label, t.nbytes);
        goto done;
    }
    if ((st = mdc_source_read(s, hstart + hlen, t.nbytes, t.data))) goto done;
    *out = t;
    memset(&t, 0, sizeof t);
done:
    mdc_tensor_clear(&t);
    free(hdr);
    return st;
}

mdc_status mdc_npy_parse(const void *buf, size_t len, const char *label, mdc_tensor *out) {
    mdc_source s;
    mdc_source_mem(&s, buf, len, label);
    return parse_source(&s, out);
}

mdc_status mdc_npy_read(const char *path, mdc_tensor *out) {
    mdc_source s;
    memset(out, 0, sizeof *out);
    mdc_status st = mdc_source_open(&s, path);
    if (st) return st;
    st = parse_source(&s, out);
    mdc_source_close(&s);
    return st;
}

mdc_status mdc_npy_write(const char *path, const mdc_tensor *t) {
    static const char *const descr[MDC_TD_COUNT] = {
        [MDC_TD_F32] = "<f4", [MDC_TD_F16] = "<f2", [MDC_TD_F64] = "<f8", [MDC_TD_I64] = "<i8",
        [MDC_TD_I32] = "<i4", [MDC_TD_I16] = "<i2", [MDC_TD_I8] = "|i1",  [MDC_TD_U64] = "<u8",
        [MDC_TD_U32] = "<u4", [MDC_TD_U16] = "<u2", [MDC_TD_U8] = "|u1",  [MDC_TD_BOOL] = "|b1",
    };
    if ((int)t->dtype < 0 || t->dtype >= MDC_TD_COUNT || !descr[t->dtype])
        return mdc_fail(MDC_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s has no .npy equivalent", path,
                        t->name ? t->name : "", mdc_tdtype_name(t->dtype));
    char dict[512];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr[t->dtype]);
    for (int i = 0; i < t->ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld,%s", (long long)t->shape[i],
                      (i + 1 < t->ndim) ? " " : "");
    if (t->ndim > 1) n--; /* numpy writes (3,) for one dim and (2, 3) for more */
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    size_t pre = 10, total = (pre + (size_t)n + 1 + 63) / 64 * 64; /* +1 for the newline */
    if (total - pre > 65535) {
        pre = 12;
        total = (pre + (size_t)n + 1 + 63) / 64 * 64;
    }
    size_t hlen = total - pre;
    unsigned char head[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', pre == 10 ? 1 : 2, 0};
    for (size_t i = 0; i < pre - 8; i++) head[8 + i] = (unsigned char)(hlen >> (8 * i));
    mdc_atomic a;
    mdc_status st = mdc_atomic_open(&a, path);
    if (st) return st;
    FILE *f = a.f;
    int ok = fwrite(head, 1, pre, f) == pre && fwrite(dict, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = (size_t)n; ok && i + 1 < hlen; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    if (ok && t->nbytes) ok = fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
    return mdc_atomic_commit(&a, ok, path);
}
