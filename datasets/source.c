/* Bounds-checked byte sources for the tensor-file and shard readers (see source.h). */
#include <sys/stat.h>

#include "source.h"

/* Opens a file source; on failure nothing is left open. */
mdc_status mdc_source_open(mdc_source *s, const char *path) {
    memset(s, 0, sizeof *s);
    s->label = path;
    struct stat pre; /* before opening: a FIFO would block the open until someone writes to it */
    if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode))
        return mdc_fail(MDC_ERR_IO, "%s: not a regular file (a directory, device or FIFO)", path);
    s->f = fopen(path, "rb");
    if (!s->f) return mdc_fail(MDC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(s->f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(s->f);
        s->f = NULL;
        return mdc_fail(MDC_ERR_IO, "%s: not a regular file", path);
    }
    s->size = (size_t)sb.st_size;
    return MDC_OK;
}

void mdc_source_mem(mdc_source *s, const void *buf, size_t len, const char *label) {
    memset(s, 0, sizeof *s);
    s->label = label ? label : "(memory)";
    s->buf = buf;
    s->size = len;
}

void mdc_source_close(mdc_source *s) {
    if (s->f) fclose(s->f);
    s->f = NULL;
}

/* Copies [off, off+n) into dst; MDC_ERR_FORMAT if the range is not inside the source. */
mdc_status mdc_source_read(mdc_source *s, size_t off, size_t n, void *dst) {
    if (off > s->size || n > s->size - off)
        return mdc_fail(MDC_ERR_FORMAT, "%s: read of %zu bytes at offset %zu past the end (%zu bytes)", s->label, n,
                        off, s->size);
    if (n == 0) return MDC_OK;
    if (!s->f) {
        memcpy(dst, s->buf + off, n);
        return MDC_OK;
    }
    if (fseeko(s->f, (off_t)off, SEEK_SET) != 0 || fread(dst, 1, n, s->f) != n)
        return mdc_fail(MDC_ERR_IO, "%s: read of %zu bytes at offset %zu failed", s->label, n, off);
    return MDC_OK;
}
