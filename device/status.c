/* Status codes to text, and the thread-local failure detail. */
#include "minidc/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const status_text[MDC_STATUS_COUNT] = {
    [MDC_OK] = "ok",
    [MDC_ERR_INVALID] = "invalid argument",
    [MDC_ERR_OOM_HOST] = "out of host memory",
    [MDC_ERR_OOM_DEVICE] = "out of device memory",
    [MDC_ERR_IO] = "I/O error",
    [MDC_ERR_FORMAT] = "malformed file",
    [MDC_ERR_UNSUPPORTED] = "unsupported",
    [MDC_ERR_MPI] = "MPI error",
    [MDC_ERR_MISMATCH] = "mismatch",
    [MDC_ERR_TIMEOUT] = "timeout",
    [MDC_ERR_PEER] = "peer rank failed",
};

static const char *const status_hint[MDC_STATUS_COUNT] = {
    [MDC_OK] = "",
    [MDC_ERR_INVALID] = "check the option or argument named above",
    [MDC_ERR_OOM_HOST] = "use a smaller config or batch",
    [MDC_ERR_OOM_DEVICE] = "use a smaller model or batch, ZeRO, a larger --hbm-scale, or a bigger --device",
    [MDC_ERR_IO] = "check the path exists and is readable/writable",
    [MDC_ERR_FORMAT] = "the file is not what minidc expects; see docs/ for the format",
    [MDC_ERR_UNSUPPORTED] = "see docs/ for what is supported",
    [MDC_ERR_MPI] = "check the MPI launch (mpiexec.mpich -n N ...)",
    [MDC_ERR_MISMATCH] = "every rank must pass the same sizes and options",
    [MDC_ERR_TIMEOUT] = "a peer rank may have died; see its error above",
    [MDC_ERR_PEER] = "see the failing rank's error above",
};

static _Thread_local char detail[1024];

const char *mdc_strerror(mdc_status s) {
    if ((int)s < 0 || s >= MDC_STATUS_COUNT || !status_text[s]) return "unknown status";
    return status_text[s];
}

const char *mdc_hint(mdc_status s) {
    if ((int)s < 0 || s >= MDC_STATUS_COUNT || !status_hint[s]) return "";
    return status_hint[s];
}

const char *mdc_detail(void) { return detail; }

void mdc_clear_detail(void) { detail[0] = '\0'; }

/* Formats into a copy first: callers add context to the detail they got from below, as
 * mdc_fail(st, "%s: %s", path, mdc_detail()), and vsnprintf into the buffer it reads from is
 * undefined (it garbled such messages). */
mdc_status mdc_fail(mdc_status st, const char *fmt, ...) {
    char out[sizeof detail];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, sizeof out, fmt, ap);
    va_end(ap);
    memcpy(detail, out, sizeof detail);
    return st;
}
