/* The token-shard format (layout in include/minidc/datasets.h), its vocabulary file, and the
 * character tokenizer. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "minidc/datasets.h"
#include "minidc/tensorfile.h"
#include "source.h"

#define VOCAB_MAX_BYTES (64u << 20)

void mdc_shard_clear(mdc_shard *s) {
    if (!s) return;
    if (s->vocab)
        for (uint32_t i = 0; i < s->vocab_size; i++) free(s->vocab[i]);
    free(s->vocab);
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static mdc_status read_header(mdc_source *src, mdc_shard *out) {
    const char *path = src->label;
    unsigned char h[MDC_SHARD_HEADER_BYTES];
    if (src->size < MDC_SHARD_HEADER_BYTES)
        return mdc_fail(MDC_ERR_FORMAT, "%s: %zu bytes, shorter than the %d-byte token-shard header", path, src->size,
                        MDC_SHARD_HEADER_BYTES);
    mdc_status st = mdc_source_read(src, 0, sizeof h, h);
    if (st) return st;
    if (memcmp(h, MDC_SHARD_MAGIC, 8))
        return mdc_fail(MDC_ERR_FORMAT, "%s: no MDCTOKS magic: not a minidc token shard", path);
    uint32_t version = le32(h + 8), width = le32(h + 12), vocab = le32(h + 16), reserved = le32(h + 20);
    uint64_t count = le64(h + 24);
    if (version != MDC_SHARD_VERSION)
        return mdc_fail(MDC_ERR_FORMAT, "%s: token-shard version %u (this build reads %d)", path, version,
                        MDC_SHARD_VERSION);
    if (width != 2 && width != 4)
        return mdc_fail(MDC_ERR_FORMAT, "%s: field 'token width' is %u (2 or 4)", path, width);
    if (vocab == 0 || (width == 2 && vocab > 65536))
        return mdc_fail(MDC_ERR_FORMAT, "%s: field 'vocab size' is %u (1..%u for %u-byte tokens)", path, vocab,
                        width == 2 ? 65536u : 0xffffffffu, width);
    if (reserved != 0) return mdc_fail(MDC_ERR_FORMAT, "%s: reserved header field is %u, not 0", path, reserved);
    if (count > (SIZE_MAX - MDC_SHARD_HEADER_BYTES) / width || MDC_SHARD_HEADER_BYTES + count * width != src->size)
        return mdc_fail(MDC_ERR_FORMAT, "%s: header says %llu tokens x %u bytes but the file has %zu data bytes", path,
                        (unsigned long long)count, width, src->size - MDC_SHARD_HEADER_BYTES);
    memset(out, 0, sizeof *out);
    out->count = (size_t)count;
    out->vocab_size = vocab;
    out->width = (int)width;
    memcpy(out->source, h + 32, 31);
    out->source[31] = '\0';
    return MDC_OK;
}

mdc_status mdc_shard_read_header(const char *path, mdc_shard *out) {
    mdc_source src;
    memset(out, 0, sizeof *out);
    mdc_status st = mdc_source_open(&src, path);
    if (st) return st;
    st = read_header(&src, out);
    mdc_source_close(&src);
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

mdc_status mdc_vocab_read(const char *path, char ***vocab, uint32_t *n) {
    unsigned char *buf = NULL;
    size_t len;
    cJSON *root = NULL;
    char **v = NULL;
    uint32_t cnt = 0;
    *vocab = NULL;
    *n = 0;
    mdc_status st = mdc_read_file(path, VOCAB_MAX_BYTES, &buf, &len);
    if (st) return st;
    const char *end = NULL;
    if (memchr(buf, 0, len)) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: a NUL byte at byte %zu: not a JSON text", path,
                      (size_t)((const unsigned char *)memchr(buf, 0, len) - buf));
        goto done;
    }
    root = cJSON_ParseWithLengthOpts((const char *)buf, len, &end, 0);
    for (const char *p = end; root && p && p < (const char *)buf + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: text after the JSON object (at byte %ld)", path,
                          (long)(p - (const char *)buf));
            goto done;
        }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "type");
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    if (!cJSON_IsObject(root) || !cJSON_IsString(type) || strcmp(type->valuestring, "char") || !cJSON_IsArray(toks)) {
        st = mdc_fail(MDC_ERR_FORMAT, "%s: not a vocabulary: expected {\"type\": \"char\", \"tokens\": [...]}", path);
        goto done;
    }
    int m = cJSON_GetArraySize(toks);
    v = calloc(m ? (size_t)m : 1, sizeof *v);
    if (!v) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
        goto done;
    }
    for (const cJSON *t = toks->child; t; t = t->next, cnt++) {
        if (!cJSON_IsString(t)) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: field 'tokens[%u]' is not a string", path, cnt);
            goto done;
        }
        if (!(v[cnt] = strdup(t->valuestring))) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
            goto done;
        }
    }
    /* two ids for one string would decode ambiguously: refuse duplicates (sorted copy) */
    char **sorted = malloc((cnt ? cnt : 1) * sizeof *sorted);
    if (!sorted) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
        goto done;
    }
    memcpy(sorted, v, cnt * sizeof *sorted);
    qsort(sorted, cnt, sizeof *sorted, cmp_str);
    for (uint32_t i = 1; i < cnt && !st; i++)
        if (!strcmp(sorted[i - 1], sorted[i]))
            st = mdc_fail(MDC_ERR_FORMAT, "%s: the token \"%s\" appears twice in 'tokens'", path, sorted[i]);
    free(sorted);
    if (st) goto done;
    *vocab = v;
    *n = cnt;
    v = NULL;
done:
    if (v)
        for (uint32_t i = 0; i < cnt; i++) free(v[i]);
    free(v);
    cJSON_Delete(root);
    free(buf);
    return st;
}

mdc_status mdc_shard_read(const char *path, mdc_shard *out) {
    mdc_source src;
    mdc_shard s = {0};
    unsigned char *raw = NULL;
    char *vpath = NULL;
    memset(out, 0, sizeof *out);
    mdc_status st = mdc_source_open(&src, path);
    if (st) return st;
    if ((st = read_header(&src, &s))) goto done;
    size_t nb = s.count * (size_t)s.width;
    raw = malloc(nb ? nb : 1);
    s.tokens = malloc(s.count ? s.count * sizeof *s.tokens : 1);
    if (!raw || !s.tokens) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s: %zu tokens", path, s.count);
        goto done;
    }
    if ((st = mdc_source_read(&src, MDC_SHARD_HEADER_BYTES, nb, raw))) goto done;
    for (size_t i = 0; i < s.count; i++) {
        uint32_t t = s.width == 2 ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8) : le32(raw + 4 * i);
        if (t >= s.vocab_size) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: token %zu is %u, not below the vocab size %u", path, i, t, s.vocab_size);
            goto done;
        }
        s.tokens[i] = t;
    }
    vpath = malloc(strlen(path) + 12);
    if (!vpath) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
        goto done;
    }
    sprintf(vpath, "%s.vocab.json", path);
    if (access(vpath, F_OK) == 0) {
        uint32_t n;
        char **v;
        if ((st = mdc_vocab_read(vpath, &v, &n))) goto done;
        s.vocab = v; /* owned by s from here, freed with vocab_size entries */
        uint32_t vs = s.vocab_size;
        s.vocab_size = n;
        if (n != vs) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: %u tokens in the vocabulary but the shard says vocab size %u", vpath, n,
                          vs);
            goto done;
        }
    }
    *out = s;
    memset(&s, 0, sizeof s);
done:
    mdc_source_close(&src);
    mdc_shard_clear(&s);
    free(raw);
    free(vpath);
    return st;
}

static mdc_status write_vocab(const char *path, const mdc_shard *s) {
    mdc_status st = MDC_OK;
    char *json = NULL;
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    if (!root || !cJSON_AddStringToObject(root, "type", "char") || !(arr = cJSON_AddArrayToObject(root, "tokens"))) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
        goto done;
    }
    for (uint32_t i = 0; i < s->vocab_size; i++) {
        cJSON *str = cJSON_CreateString(s->vocab[i] ? s->vocab[i] : "");
        if (!str || !cJSON_AddItemToArray(arr, str)) {
            cJSON_Delete(str);
            st = mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
            goto done;
        }
    }
    json = cJSON_Print(root);
    mdc_atomic a;
    if (!json) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
        goto done;
    }
    if ((st = mdc_atomic_open(&a, path))) goto done;
    st = mdc_atomic_commit(&a, fputs(json, a.f) >= 0 && fputc('\n', a.f) != EOF, path);
done:
    free(json);
    cJSON_Delete(root);
    return st;
}

mdc_status mdc_shard_write(const char *path, const mdc_shard *s) {
    int width = s->width ? s->width : (s->vocab_size <= 65536 ? 2 : 4);
    if ((width != 2 && width != 4) || s->vocab_size == 0 || (width == 2 && s->vocab_size > 65536))
        return mdc_fail(MDC_ERR_INVALID, "%s: token width %d cannot hold vocab size %u", path, width, s->vocab_size);
    for (size_t i = 0; i < s->count; i++)
        if (s->tokens[i] >= s->vocab_size)
            return mdc_fail(MDC_ERR_INVALID, "%s: token %zu is %u, not below the vocab size %u", path, i, s->tokens[i],
                            s->vocab_size);
    unsigned char h[MDC_SHARD_HEADER_BYTES] = {0};
    memcpy(h, MDC_SHARD_MAGIC, 8);
    put32(h + 8, MDC_SHARD_VERSION);
    put32(h + 12, (uint32_t)width);
    put32(h + 16, s->vocab_size);
    put32(h + 24, (uint32_t)s->count);
    put32(h + 28, (uint32_t)((uint64_t)s->count >> 32));
    memcpy(h + 32, s->source, strnlen(s->source, 31));
    mdc_atomic a;
    mdc_status st = mdc_atomic_open(&a, path);
    if (st) return st;
    FILE *f = a.f;
    int ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    unsigned char buf[4096];
    size_t per = sizeof buf / (size_t)width, i = 0;
    while (ok && i < s->count) {
        size_t n = s->count - i < per ? s->count - i : per;
        for (size_t k = 0; k < n; k++) {
            uint32_t t = s->tokens[i + k];
            for (int b = 0; b < width; b++) buf[k * (size_t)width + (size_t)b] = (unsigned char)(t >> (8 * b));
        }
        ok = fwrite(buf, (size_t)width, n, f) == n;
        i += n;
    }
    if ((st = mdc_atomic_commit(&a, ok, path))) return st;
    if (!s->vocab) return MDC_OK;
    char *vpath = malloc(strlen(path) + 12);
    if (!vpath) return mdc_fail(MDC_ERR_OOM_HOST, "%s", path);
    sprintf(vpath, "%s.vocab.json", path);
    st = write_vocab(vpath, s);
    free(vpath);
    return st;
}

/* Decodes one UTF-8 code point at text[*i]; returns -1 if invalid (overlong, surrogate, > U+10FFFF,
 * truncated). */
static int32_t utf8_next(const unsigned char *t, size_t len, size_t *i) {
    unsigned c = t[*i];
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0 || (size_t)n >= len - *i) return -1; /* needs text[*i .. *i+n] */
    uint32_t cp = n == 0 ? c : c & (0x3F >> n);
    for (int k = 1; k <= n; k++) {
        if ((t[*i + (size_t)k] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (t[*i + (size_t)k] & 0x3F);
    }
    static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    *i += (size_t)n + 1;
    return (int32_t)cp;
}

static void utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        out[3] = 0;
    } else {
        out[0] = (char)(0xF0 | cp >> 18);
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        out[4] = 0;
    }
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

mdc_status mdc_tokenize_chars(const unsigned char *text, size_t len, const char *label, mdc_shard *out) {
    mdc_shard s = {0};
    uint32_t *sorted = NULL;
    mdc_status st = MDC_OK;
    memset(out, 0, sizeof *out);
    s.tokens = malloc(len ? len * sizeof *s.tokens : 1);
    if (!s.tokens) return mdc_fail(MDC_ERR_OOM_HOST, "%s: %zu bytes of text", label, len);
    for (size_t i = 0; i < len;) {
        size_t at = i;
        int32_t cp = utf8_next(text, len, &i);
        if (cp < 0) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: invalid UTF-8 at byte %zu (0x%02x)", label, at, text[at]);
            goto done;
        }
        if (cp == 0) {
            st = mdc_fail(MDC_ERR_FORMAT, "%s: NUL character at byte %zu (a binary file?)", label, at);
            goto done;
        }
        s.tokens[s.count++] = (uint32_t)cp;
    }
    sorted = malloc(s.count ? s.count * sizeof *sorted : 1);
    if (!sorted) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s", label);
        goto done;
    }
    memcpy(sorted, s.tokens, s.count * sizeof *sorted);
    qsort(sorted, s.count, sizeof *sorted, cmp_u32);
    uint32_t nv = 0;
    for (size_t i = 0; i < s.count; i++)
        if (i == 0 || sorted[i] != sorted[i - 1]) sorted[nv++] = sorted[i];
    if (nv == 0) {
        st = mdc_fail(MDC_ERR_INVALID, "%s: the text is empty", label);
        goto done;
    }
    for (size_t i = 0; i < s.count; i++) { /* code point -> its rank in the sorted vocabulary */
        uint32_t lo = 0, hi = nv;
        while (hi - lo > 1) {
            uint32_t mid = (lo + hi) / 2;
            if (sorted[mid] <= s.tokens[i]) lo = mid;
            else hi = mid;
        }
        s.tokens[i] = lo;
    }
    s.vocab = calloc(nv, sizeof *s.vocab);
    if (!s.vocab) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "%s", label);
        goto done;
    }
    s.vocab_size = nv;
    for (uint32_t v = 0; v < nv; v++) {
        char u[5];
        utf8_put(sorted[v], u);
        if (!(s.vocab[v] = strdup(u))) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "%s", label);
            goto done;
        }
    }
    snprintf(s.source, sizeof s.source, "text");
    *out = s;
    memset(&s, 0, sizeof s);
done:
    free(sorted);
    mdc_shard_clear(&s);
    return st;
}
