/* The tokens of the strict JSON scanner (datasets/json_strict.h): whitespace, numbers and
 * strings by RFC 8259's grammar, strings checked as UTF-8 (RFC 3629) and decoded for keys. */
#include <stdlib.h>
#include <string.h>

#include "json_strict_internal.h"

/* The length of the UTF-8 sequence at s (n bytes left), 0 if there is none (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t k = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!k || k > n) return 0;
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return k;
}

mdc_status mdc_i_json_ws(scanner *sc) {
    for (; sc->i < sc->n; sc->i++) {
        unsigned c = sc->s[sc->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
        if (c < 0x20)
            return mdc_i_json_fail(sc, sc->i,
                                   "a control byte 0x%02x used as whitespace (JSON's whitespace is "
                                   "space, tab, LF and CR)",
                                   c);
        break;
    }
    return MDC_OK;
}

static int is_digit(const scanner *sc, size_t i) { return i < sc->n && sc->s[i] >= '0' && sc->s[i] <= '9'; }

mdc_status mdc_i_json_number(scanner *sc) {
    size_t at = sc->i, i = sc->i;
    if (sc->s[i] == '-') i++;
    if (i < sc->n && sc->s[i] == '0') {
        if (is_digit(sc, ++i)) return mdc_i_json_fail(sc, at, "a number with a leading zero");
    } else if (is_digit(sc, i)) {
        while (is_digit(sc, i)) i++;
    } else return mdc_i_json_fail(sc, at, "a '-' without digits");
    if (i < sc->n && sc->s[i] == '.') {
        if (!is_digit(sc, ++i))
            return mdc_i_json_fail(sc, at,
                                   "a number without digits after its '.' (\"%.*s\" is not JSON; write %.*s or %.*s0)",
                                   (int)(i - at), (const char *)sc->s + at, (int)(i - at - 1), (const char *)sc->s + at,
                                   (int)(i - at), (const char *)sc->s + at);
        while (is_digit(sc, i)) i++;
    }
    if (i < sc->n && (sc->s[i] == 'e' || sc->s[i] == 'E')) {
        i++;
        if (i < sc->n && (sc->s[i] == '+' || sc->s[i] == '-')) i++;
        if (!is_digit(sc, i)) return mdc_i_json_fail(sc, at, "a number without digits in its exponent");
        while (is_digit(sc, i)) i++;
    }
    sc->i = i;
    return MDC_OK;
}

static int hex4(const scanner *sc, size_t i, unsigned *out) {
    unsigned v = 0;
    for (size_t k = i; k < i + 4; k++) {
        if (k >= sc->n) return 0;
        unsigned c = sc->s[k], d = c >= '0' && c <= '9'   ? c - '0'
                                   : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                          : 16;
        if (d > 15) return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

/* Appends n bytes to the growing buffer *b (NULL: nothing is kept). */
static int append(char **b, size_t *len, size_t *cap, const void *p, size_t n) {
    if (!cap) return 1;
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap * 2 : 32;
        while (c < *len + n + 1) c *= 2;
        char *nb = realloc(*b, c);
        if (!nb) return 0;
        *b = nb, *cap = c;
    }
    memcpy(*b + *len, p, n);
    *len += n;
    (*b)[*len] = 0;
    return 1;
}

/* Code point cp as UTF-8 into u; returns the byte count. */
static size_t encode(unsigned cp, unsigned char *u) {
    if (cp < 0x80) return u[0] = (unsigned char)cp, 1;
    size_t n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    for (size_t k = n - 1; k > 0; k--) u[k] = (unsigned char)(0x80 | (cp & 63)), cp >>= 6;
    u[0] = (unsigned char)((0xF00 >> n) | cp); /* 0xC0, 0xE0 or 0xF0 and the top bits */
    return n;
}

/* The escape at s[sc->i] (its backslash) decoded into u (*k bytes); sc->i moves past it. A
 * surrogate must be a high one followed by a low one: a lone one is no character. */
static mdc_status escape(scanner *sc, unsigned char *u, size_t *k) {
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    size_t i = sc->i;
    char bn[32];
    const char *e = i + 1 < sc->n && sc->s[i + 1] ? strchr(from, sc->s[i + 1]) : NULL;
    unsigned cp, lo;
    if (e) {
        u[0] = (unsigned char)to[e - from], *k = 1, sc->i += 2;
        return MDC_OK;
    }
    if (i + 1 >= sc->n || sc->s[i + 1] != 'u')
        return mdc_i_json_fail(sc, i, "an unknown escape: '\\' then %s", mdc_i_json_byte(sc, i + 1, bn, sizeof bn));
    if (!hex4(sc, i + 2, &cp)) return mdc_i_json_fail(sc, i, "a \\u escape without 4 hex digits");
    sc->i += 6;
    if (cp >= 0xD800 && cp <= 0xDBFF && sc->i + 1 < sc->n && sc->s[sc->i] == '\\' && sc->s[sc->i + 1] == 'u' &&
        hex4(sc, sc->i + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00), sc->i += 6;
    else if (cp >= 0xD800 && cp <= 0xDFFF)
        return mdc_i_json_fail(sc, i, "an unpaired surrogate \\u%04X (not a Unicode character)", cp);
    if (cp == 0) return mdc_i_json_fail(sc, i, "a NUL character (\\u0000) in a string (minidc's strings end at it)");
    *k = encode(cp, u);
    return MDC_OK;
}

mdc_status mdc_i_json_string(scanner *sc, char **out, size_t *outlen) {
    size_t at = sc->i++, len = 0, cap = 0, *capp = out ? &cap : NULL;
    char *b = NULL;
    mdc_status st = MDC_OK;
    for (;;) {
        size_t i = sc->i, k = 0;
        unsigned c = i < sc->n ? sc->s[i] : 0;
        unsigned char u[4];
        const unsigned char *bytes = sc->s + i;
        if (i >= sc->n) st = mdc_i_json_fail(sc, at, "a string without its closing quote");
        else if (c == '"') {
            sc->i++;
            break;
        } else if (c < 0x20)
            st = mdc_i_json_fail(sc, i,
                                 "a control byte 0x%02x inside a string (JSON writes it escaped: \\n, \\t, "
                                 "\\u00XX)",
                                 c);
        else if (c == '\\') st = escape(sc, u, &k), bytes = u;
        else if (!(k = utf8_len(sc->s + i, sc->n - i)))
            st = mdc_i_json_fail(sc, i, "invalid UTF-8 (byte 0x%02x; JSON text is UTF-8)", c);
        else sc->i += k;
        if (!st && !append(&b, &len, capp, bytes, k)) st = mdc_fail(MDC_ERR_OOM_HOST, "%s", sc->label);
        if (st) break;
    }
    if (st || !out) free(b);
    else if (!b && !(b = calloc(1, 1))) st = mdc_fail(MDC_ERR_OOM_HOST, "%s", sc->label);
    if (!st && out) *out = b, *outlen = len;
    return st;
}
