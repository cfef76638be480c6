/* A strict JSON scanner (datasets/json_strict.h): RFC 8259's grammar by recursive descent over
 * the raw bytes, so what cJSON would let through (control bytes as whitespace, "2.", invalid
 * UTF-8) and what Python reads differently (a key given twice) are refused with the byte and the
 * key named. It builds no tree: the caller parses the checked text with cJSON. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_strict_internal.h"

typedef struct {
    char *key;
    size_t klen, kat, vat, vlen;
} entry;

/* A key for a message: printable ASCII as is, other bytes as \xNN, cut at 40 bytes (a message
 * must not carry the bytes it complains about). */
static size_t show_key(char *buf, size_t cap, const char *key) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)key; *p && o + 8 < cap; p++) {
        if (p - (const unsigned char *)key >= 40) {
            o += (size_t)snprintf(buf + o, cap - o, "...");
            break;
        }
        if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') buf[o++] = (char)*p;
        else o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", *p);
    }
    buf[o < cap ? o : cap - 1] = 0;
    return o;
}

/* Levels 1..upto as "a"."b"[2] into buf; returns its length. */
static size_t path(const scanner *sc, int upto, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int d = 1; d <= upto && o + 64 < cap; d++) {
        const level *l = &sc->lv[d];
        if (l->index >= 0) o += (size_t)snprintf(buf + o, cap - o, "[%ld]", l->index);
        else if (l->key) {
            o += (size_t)snprintf(buf + o, cap - o, "%s\"", o ? "." : "");
            o += show_key(buf + o, cap - o - 2, l->key);
            o += (size_t)snprintf(buf + o, cap - o, "\"");
        }
    }
    return o;
}

/* Where the scanner is, for a message: the key whose value holds the byte, else the object. */
static void context(const scanner *sc, char *buf, size_t cap) {
    char p[320], q[320];
    if (sc->depth == 0) {
        snprintf(buf, cap, "%s the object", sc->done ? "after" : "before");
        return;
    }
    const level *l = &sc->lv[sc->depth];
    path(sc, sc->depth - 1, q, sizeof q);
    if (l->index >= 0 || (l->key && !sc->in_key)) {
        path(sc, sc->depth, p, sizeof p);
        snprintf(buf, cap, "%s %s", l->after ? "after" : "in", p);
    } else if (l->key) { /* reading the key after l->key */
        path(sc, sc->depth, p, sizeof p);
        snprintf(buf, cap, "in the key after %s", p);
    } else snprintf(buf, cap, "%s %s", sc->in_key ? "in the first key of" : "at the start of", q[0] ? q : "the object");
}

mdc_status mdc_i_json_fail(scanner *sc, size_t at, const char *fmt, ...) {
    char what[256], ctx[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int line = 1, col = 1;
    for (size_t k = 0; k < at && k < sc->n; k++) sc->s[k] == '\n' ? (line++, col = 1) : col++;
    context(sc, ctx, sizeof ctx);
    return mdc_fail(MDC_ERR_FORMAT, "%s: %s at byte %zu (line %d, column %d), %s", sc->label, what, at, line, col, ctx);
}

/* The byte at s[i] for a message: 'c' if printable, else byte 0xNN; the end of the text. */
const char *mdc_i_json_byte(const scanner *sc, size_t i, char *buf, size_t cap) {
    if (i >= sc->n) snprintf(buf, cap, "the end of the text");
    else if (sc->s[i] >= 0x21 && sc->s[i] < 0x7f) snprintf(buf, cap, "'%c'", sc->s[i]);
    else snprintf(buf, cap, "byte 0x%02x", sc->s[i]);
    return buf;
}

static mdc_status value(scanner *sc);

static int by_key(const void *a, const void *b) {
    const entry *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    if (x->klen != y->klen) return x->klen < y->klen ? -1 : 1;
    return x->kat < y->kat ? -1 : x->kat > y->kat;
}

static int same_key(const entry *x, const entry *y) { return x->klen == y->klen && !memcmp(x->key, y->key, x->klen); }

static int by_at(const void *a, const void *b) {
    const mdc_json_member *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* A key given twice: sorted by key and then position, the first two of a run of equal keys are
 * its first and second occurrence; the one whose second occurrence comes first is named. */
static mdc_status duplicates(scanner *sc, entry *e, int n) {
    if (n < 2) return MDC_OK;
    qsort(e, (size_t)n, sizeof *e, by_key);
    int best = -1;
    for (int k = 1; k < n; k++)
        if (same_key(&e[k], &e[k - 1]) && (k == 1 || !same_key(&e[k - 1], &e[k - 2])) &&
            (best < 0 || e[k].kat < e[best].kat))
            best = k;
    if (best < 0) return MDC_OK;
    char k[200], p[320];
    show_key(k, sizeof k, e[best].key);
    path(sc, sc->depth - 1, p, sizeof p);
    return mdc_fail(MDC_ERR_FORMAT,
                    "%s: the key \"%s\" is given twice%s%s (at bytes %zu and %zu): Python's json, and "
                    "so transformers, takes the last, cJSON the first; give it once",
                    sc->label, k, p[0] ? " in " : "", p, e[best - 1].kat, e[best].kat);
}

static mdc_status object(scanner *sc) {
    if (sc->depth == MAX_DEPTH) return mdc_i_json_fail(sc, sc->i, "nesting deeper than %d levels", MAX_DEPTH);
    level *l = &sc->lv[++sc->depth];
    *l = (level){NULL, -1, 0};
    entry *e = NULL;
    int n = 0, cap = 0;
    char bn[32];
    sc->i++;
    mdc_status st = mdc_i_json_ws(sc);
    if (!st && sc->i < sc->n && sc->s[sc->i] == '}') sc->i++;
    else
        while (!st) {
            if (sc->i >= sc->n || sc->s[sc->i] != '"') {
                st = n && sc->i < sc->n && sc->s[sc->i] == '}'
                         ? mdc_i_json_fail(sc, sc->i, "a ',' before '}'")
                         : mdc_i_json_fail(sc, sc->i, "%s where a key (a string in double quotes) should be",
                                           mdc_i_json_byte(sc, sc->i, bn, sizeof bn));
                break;
            }
            if (n == cap) {
                entry *ne = realloc(e, (size_t)(cap = cap ? cap * 2 : 16) * sizeof *e);
                if (!ne) {
                    st = mdc_fail(MDC_ERR_OOM_HOST, "%s", sc->label);
                    break;
                }
                e = ne;
            }
            entry *m = &e[n];
            m->kat = sc->i;
            sc->in_key = 1;
            if ((st = mdc_i_json_string(sc, &m->key, &m->klen))) break;
            sc->in_key = 0;
            n++;
            l->key = m->key, l->after = 0;
            if ((st = mdc_i_json_ws(sc))) break;
            if (sc->i >= sc->n || sc->s[sc->i] != ':') {
                st = mdc_i_json_fail(sc, sc->i, "%s where ':' should follow the key",
                                     mdc_i_json_byte(sc, sc->i, bn, sizeof bn));
                break;
            }
            sc->i++;
            if ((st = mdc_i_json_ws(sc))) break;
            m->vat = sc->i;
            if ((st = value(sc))) break;
            m->vlen = sc->i - m->vat;
            l->after = 1;
            if ((st = mdc_i_json_ws(sc))) break;
            if (sc->i < sc->n && sc->s[sc->i] == ',') {
                sc->i++;
                st = mdc_i_json_ws(sc);
                continue;
            }
            if (sc->i < sc->n && sc->s[sc->i] == '}') {
                sc->i++;
                break;
            }
            st = mdc_i_json_fail(sc, sc->i, "%s where ',' or '}' should follow a value",
                                 mdc_i_json_byte(sc, sc->i, bn, sizeof bn));
        }
    if (!st) st = duplicates(sc, e, n);
    if (!st && sc->depth == 1 && sc->top) { /* the outermost object's members go to the caller, in text order */
        sc->top->m = malloc((size_t)(n ? n : 1) * sizeof *sc->top->m);
        if (!sc->top->m) st = mdc_fail(MDC_ERR_OOM_HOST, "%s", sc->label);
        for (int k = 0; !st && k < n; k++) sc->top->m[k] = (mdc_json_member){e[k].key, e[k].vat, e[k].vlen};
        if (!st && n > 1) qsort(sc->top->m, (size_t)n, sizeof *sc->top->m, by_at); /* back into text order */
        if (!st) sc->top->count = n, n = 0;
    }
    for (int k = 0; k < n; k++) free(e[k].key);
    free(e);
    if (!st) sc->depth--;
    return st;
}

static mdc_status array(scanner *sc) {
    if (sc->depth == MAX_DEPTH) return mdc_i_json_fail(sc, sc->i, "nesting deeper than %d levels", MAX_DEPTH);
    level *l = &sc->lv[++sc->depth];
    *l = (level){NULL, 0, 0};
    char bn[32];
    sc->i++;
    mdc_status st = mdc_i_json_ws(sc);
    if (st) return st;
    if (sc->i < sc->n && sc->s[sc->i] == ']') {
        sc->i++;
        sc->depth--;
        return MDC_OK;
    }
    for (;; l->index++) {
        if (sc->i < sc->n && sc->s[sc->i] == ']' && l->index > 0) return mdc_i_json_fail(sc, sc->i, "a ',' before ']'");
        if ((st = value(sc)) || (st = mdc_i_json_ws(sc))) return st;
        if (sc->i < sc->n && sc->s[sc->i] == ',') {
            sc->i++;
            if ((st = mdc_i_json_ws(sc))) return st;
            continue;
        }
        if (sc->i < sc->n && sc->s[sc->i] == ']') break;
        return mdc_i_json_fail(sc, sc->i, "%s where ',' or ']' should follow a value",
                               mdc_i_json_byte(sc, sc->i, bn, sizeof bn));
    }
    sc->i++;
    sc->depth--;
    return MDC_OK;
}

static mdc_status value(scanner *sc) {
    char bn[32];
    if (sc->i >= sc->n) return mdc_i_json_fail(sc, sc->i, "the text ends where a value should be");
    unsigned c = sc->s[sc->i];
    if (c == '{') return object(sc);
    if (c == '[') return array(sc);
    if (c == '"') return mdc_i_json_string(sc, NULL, NULL);
    if (c == '-' || (c >= '0' && c <= '9')) return mdc_i_json_number(sc);
    static const char *const lit[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++)
        if (c == (unsigned)lit[k][0]) {
            size_t len = strlen(lit[k]);
            if (sc->n - sc->i < len || memcmp(sc->s + sc->i, lit[k], len)) break;
            sc->i += len;
            return MDC_OK;
        }
    if (c == 'N' || c == 'I')
        return mdc_i_json_fail(sc, sc->i, "NaN or Infinity (not JSON: RFC 8259 has no such numbers)");
    if (c == '+' || c == '.') return mdc_i_json_fail(sc, sc->i, "a number starting with '%c' (not JSON)", c);
    return mdc_i_json_fail(sc, sc->i, "%s where a value should be", mdc_i_json_byte(sc, sc->i, bn, sizeof bn));
}

mdc_status mdc_json_strict(const char *label, const char *text, size_t n, mdc_json_members *top) {
    scanner sc = {.label = label, .s = (const unsigned char *)text, .n = n, .top = top};
    mdc_json_members none;
    if (!top) top = sc.top = &none; /* the caller wants the check only */
    char bn[32];
    top->count = 0, top->m = NULL;
    if (n >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3))
        return mdc_i_json_fail(&sc, 0, "a byte order mark (U+FEFF; Python's json refuses it)");
    mdc_status st = mdc_i_json_ws(&sc);
    if (!st && (sc.i >= n || sc.s[sc.i] != '{'))
        st = mdc_i_json_fail(&sc, sc.i, "not one JSON object: %s where '{' should be",
                             mdc_i_json_byte(&sc, sc.i, bn, sizeof bn));
    if (!st) st = object(&sc);
    sc.done = 1;
    if (!st) st = mdc_i_json_ws(&sc);
    if (!st && sc.i < n)
        st = mdc_i_json_fail(&sc, sc.i, "not one JSON object: %s after its closing '}'",
                             mdc_i_json_byte(&sc, sc.i, bn, sizeof bn));
    if (st || top == &none) mdc_json_members_free(top);
    return st;
}

void mdc_json_members_free(mdc_json_members *top) {
    for (int k = 0; top && k < top->count; k++) free(top->m[k].key);
    if (top) free(top->m), top->m = NULL, top->count = 0;
}

const mdc_json_member *mdc_json_member_find(const mdc_json_members *top, const char *key) {
    for (int k = 0; k < top->count; k++)
        if (!strcmp(top->m[k].key, key)) return &top->m[k];
    return NULL;
}
