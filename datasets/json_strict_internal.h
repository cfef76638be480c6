/* Internal to datasets/json_strict.c and json_strict_token.c: the scanner's state. */
#ifndef MINIDC_DATASETS_JSON_STRICT_INTERNAL_H
#define MINIDC_DATASETS_JSON_STRICT_INTERNAL_H

#include "json_strict.h"

enum { MAX_DEPTH = 64 };

typedef struct {
    const char *key; /* the member being read at this level (NULL before the first) */
    long index;      /* arrays: the element being read; objects: -1 */
    int after;       /* objects: key's value is read, the next key not yet begun */
} level;

typedef struct {
    const char *label;
    const unsigned char *s;
    size_t n, i;
    int depth, in_key, done;
    level lv[MAX_DEPTH + 1];
    mdc_json_members *top;
} scanner;

/* MDC_ERR_FORMAT "<label>: <what> at byte <at> (line, column), <where>" (json_strict.c). */
mdc_status mdc_i_json_fail(scanner *sc, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* s[i] for a message: 'c' if printable, else "byte 0xNN", or "the end of the text". */
const char *mdc_i_json_byte(const scanner *sc, size_t i, char *buf, size_t cap);
/* The tokens (json_strict_token.c), each at sc->i and leaving sc->i past it: whitespace, a
 * number, a string (with out: its decoded bytes, NUL-terminated and owned by the caller). */
mdc_status mdc_i_json_ws(scanner *sc);
mdc_status mdc_i_json_number(scanner *sc);
mdc_status mdc_i_json_string(scanner *sc, char **out, size_t *outlen);

#endif
