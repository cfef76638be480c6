/* The device's trace recorder (device/trace.c), called from device/device.c. Not public. */
#ifndef MINIDC_DEVICE_TRACE_INTERNAL_H
#define MINIDC_DEVICE_TRACE_INTERNAL_H

#include "minidc/device.h"

enum { MDC_TRACE_KERNEL = 0, MDC_TRACE_COPY, MDC_TRACE_SEND, MDC_TRACE_RECV, MDC_TRACE_COLL, MDC_TRACE_KINDS };
typedef struct mdc_dev_trace mdc_dev_trace;
mdc_dev_trace *mdc_i_trace_new(void);
void mdc_i_trace_free(mdc_dev_trace *t);
/* An event from virtual time t0 to t1 (a: FLOPs, bytes or a call's count; name: a kernel's or a collective's, or NULL). */
void mdc_i_trace_add(mdc_dev_trace *t, int kind, const char *name, double t0, double t1, double a, double b);
/* (kind, t0, t1) of the events ending at or after `from`, up to cap of them into out (NULL:
 * count only); returns how many there are. */
size_t mdc_i_trace_spans(const mdc_dev_trace *t, double from, double *out, size_t cap);
/* The events as comma-separated Chrome trace objects, malloc'd; NULL if out of memory. */
char *mdc_i_trace_json(const mdc_dev_trace *t, int rank);

#endif
