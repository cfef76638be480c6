/* A second "stream" on the emulated device's virtual clock, for communication that overlaps
 * compute (DDP bucket allreduce during backward, ZeRO reduce-scatter).
 *
 *   mdc_dev_stream_begin(dev, s)  the device's clock moves to the comm stream: now becomes
 *                                 max(now, s->free_at) (the stream runs one thing at a time);
 *   ... collectives charge messages as usual ...
 *   mdc_dev_stream_end(dev, s)    s->free_at = now; the compute clock and its split (compute,
 *                                 memory, communication, idle) are restored to their values at
 *                                 begin: the stream's time (messages, waits and the collective's
 *                                 reduction kernels) is kept in s->busy, not in the split;
 *   mdc_dev_stream_join(dev, s)   compute waits for the stream: now = max(now, s->free_at);
 *                                 the wait is counted as communication (exposed), and
 *                                 busy - wait is reported as overlap (mdc_dev_add_overlap).
 * So now = compute + memory + communication + idle still holds, communication counts only the
 * exposed part, and overlap says how much was hidden. Messages still queue on the egress link. */
#ifndef MINIDC_DEVICE_STREAM_H
#define MINIDC_DEVICE_STREAM_H

#include "minidc/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double free_at;                             /* virtual time the stream finishes its last operation */
    double busy;                                /* stream time (comm + idle inside it) since the last join */
    double saved_now, saved_split[4], start;    /* set by begin: the clock and its split */
    double saved_by[2 * MDC_TRAFFIC_COUNT + 1]; /* and the split by traffic class, the optimizer's */
    int active;
    double total_busy, total_exposed; /* over the stream's life */
} mdc_dev_stream;

void mdc_dev_stream_begin(mdc_device *dev, mdc_dev_stream *s);
void mdc_dev_stream_end(mdc_device *dev, mdc_dev_stream *s);
void mdc_dev_stream_join(mdc_device *dev, mdc_dev_stream *s);

/* Internal (device/device.c): the counters of the clock, for device/stream.c only. */
mdc_dev_counters *mdc_dev_i_counters(mdc_device *dev);

#ifdef __cplusplus
}
#endif
#endif
