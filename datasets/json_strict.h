/* Internal to datasets/: a strict JSON scanner for the files Python's json writes and reads
 * (config.json). cJSON is lenient where Python is not, and Python takes the last of two equal
 * keys where cJSON takes the first; this scanner refuses everything outside RFC 8259. */
#ifndef MINIDC_DATASETS_JSON_STRICT_H
#define MINIDC_DATASETS_JSON_STRICT_H

#include <stddef.h>

#include "minidc/status.h"

/* One member of the outermost object: its key as decoded (no NUL: those are refused) and the
 * raw text of its value, text[at, at + len). */
typedef struct {
    char *key;
    size_t at, len;
} mdc_json_member;

typedef struct {
    int count;
    mdc_json_member *m;
} mdc_json_members;

/* Checks that text[0, n) is one JSON object and nothing else but whitespace, by RFC 8259's
 * grammar: UTF-8 (RFC 3629) in strings, escapes \" \\ \/ \b \f \n \r \t \uXXXX with surrogates
 * paired, no unescaped control byte in a string, whitespace only space, tab, LF and CR, numbers
 * -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, no NaN or Infinity, no byte order mark, no key
 * twice in one object (compared decoded), no NUL character (raw or \u0000), nesting at most 64
 * deep. On success *top holds the outermost object's members (free with
 * mdc_json_members_free). MDC_ERR_FORMAT names `label` (the file), the byte (offset, line,
 * column) and the key it belongs to. */
mdc_status mdc_json_strict(const char *label, const char *text, size_t n, mdc_json_members *top);
/* (top may be NULL: the check only.) */
void mdc_json_members_free(mdc_json_members *top);
/* The member `key` of top, or NULL. */
const mdc_json_member *mdc_json_member_find(const mdc_json_members *top, const char *key);

#endif
