/* Internal to datasets/: a byte source (a file or a memory buffer) read at offsets with bounds
 * checks, so the same strict parser serves files (no mmap, no whole-file copy) and in-memory
 * fuzz inputs. */
#ifndef MINIDC_DATASETS_SOURCE_H
#define MINIDC_DATASETS_SOURCE_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "minidc/status.h"

typedef struct {
    const char *label;        /* path or caller's label, for errors */
    FILE *f;                  /* file source, or NULL */
    const unsigned char *buf; /* memory source */
    size_t size;
} mdc_source;

/* Opens a file source; on failure nothing is left open. */
mdc_status mdc_source_open(mdc_source *s, const char *path);
/* A memory source over buf (not copied; must outlive the source). */
void mdc_source_mem(mdc_source *s, const void *buf, size_t len, const char *label);
void mdc_source_close(mdc_source *s);
/* Copies [off, off+n) into dst; MDC_ERR_FORMAT if the range is not inside the source. */
mdc_status mdc_source_read(mdc_source *s, size_t off, size_t n, void *dst);

#endif
