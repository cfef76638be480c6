/* The communication stream on the virtual clock (include/minidc/device_stream.h). */
#include "minidc/device_stream.h"

void mdc_dev_stream_begin(mdc_device *dev, mdc_dev_stream *s) {
    mdc_dev_counters *c = mdc_dev_i_counters(dev);
    s->saved_now = c->now;
    s->saved_split[0] = c->t_compute, s->saved_split[1] = c->t_memory;
    s->saved_split[2] = c->t_comm, s->saved_split[3] = c->t_idle;
    for (int k = 0; k < MDC_TRAFFIC_COUNT; k++)
        s->saved_by[k] = c->t_comm_by[k], s->saved_by[MDC_TRAFFIC_COUNT + k] = c->t_idle_by[k];
    s->saved_by[2 * MDC_TRAFFIC_COUNT] = c->t_optimizer;
    if (s->free_at > c->now) c->now = s->free_at; /* queued behind the stream's last op */
    s->start = c->now;
    s->active = 1;
}

void mdc_dev_stream_end(mdc_device *dev, mdc_dev_stream *s) {
    mdc_dev_counters *c = mdc_dev_i_counters(dev);
    if (!s->active) return;
    s->busy += c->now - s->start;
    s->total_busy += c->now - s->start;
    s->free_at = c->now;
    c->now = s->saved_now;
    c->t_compute = s->saved_split[0], c->t_memory = s->saved_split[1];
    c->t_comm = s->saved_split[2], c->t_idle = s->saved_split[3];
    for (int k = 0; k < MDC_TRAFFIC_COUNT; k++)
        c->t_comm_by[k] = s->saved_by[k], c->t_idle_by[k] = s->saved_by[MDC_TRAFFIC_COUNT + k];
    c->t_optimizer = s->saved_by[2 * MDC_TRAFFIC_COUNT];
    s->active = 0;
}

void mdc_dev_stream_join(mdc_device *dev, mdc_dev_stream *s) {
    mdc_dev_counters *c = mdc_dev_i_counters(dev);
    double wait = s->free_at > c->now ? s->free_at - c->now : 0;
    c->now += wait;
    c->t_comm += wait;
    c->t_comm_by[MDC_TRAFFIC_DP] += wait; /* the stream carries data parallelism's collectives */
    s->total_exposed += wait;
    if (s->busy > wait) mdc_dev_add_overlap(dev, s->busy - wait);
    s->busy = 0;
}
