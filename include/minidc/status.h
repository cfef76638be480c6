/* minidc status codes, error detail and the CHECK macro.
 * Library code returns mdc_status and never exits; the specifics of a failure (rank, tensor,
 * file, field) go to a thread-local detail string that mdc_detail() returns. */
#ifndef MINIDC_STATUS_H
#define MINIDC_STATUS_H

#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MDC_OK = 0,
    MDC_ERR_INVALID,     /* bad argument: negative count, root out of range, NULL buffer */
    MDC_ERR_OOM_HOST,    /* malloc failed on the host */
    MDC_ERR_OOM_DEVICE,  /* emulated HBM capacity exceeded */
    MDC_ERR_IO,          /* file could not be opened, read or written */
    MDC_ERR_FORMAT,      /* malformed file: JSON, safetensors, npy, token shard */
    MDC_ERR_UNSUPPORTED, /* valid but not implemented for this type/op/size */
    MDC_ERR_MPI,         /* an MPI call failed */
    MDC_ERR_MISMATCH,    /* ranks disagree (count, root, shape) or a check failed */
    MDC_ERR_TIMEOUT,     /* a peer did not answer in bounded time */
    MDC_ERR_PEER,        /* a peer rank reported a failure */
    MDC_STATUS_COUNT
} mdc_status;

/* Static text for a status code; never NULL. */
const char *mdc_strerror(mdc_status s);

/* Thread-local detail of the last failure ("" when none). */
const char *mdc_detail(void);

/* Sets the detail string (printf format) and returns st, so callers can write
 * `return mdc_fail(MDC_ERR_INVALID, "rank %d: count %ld < 0", r, n);` */
mdc_status mdc_fail(mdc_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears the detail string. */
void mdc_clear_detail(void);

/* Hint printed by CHECK for a status (what to try next). */
const char *mdc_hint(mdc_status s);

/* Programs and tests: stop on failure with file:line, the status, the detail and a hint. */
#define MDC_CHECK(expr)                                                                          \
    do {                                                                                         \
        mdc_status check_st_ = (expr);                                                           \
        if (check_st_ != MDC_OK) {                                                               \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n  hint: %s\n", __FILE__, __LINE__, #expr, \
                    mdc_strerror(check_st_), mdc_detail(), mdc_hint(check_st_));                 \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
