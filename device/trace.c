/* The device's trace (include/minidc/device.h, "trace"): every kernel, copy, message and
 * collective call this device charged, with its virtual start and end and the wall clock's,
 * kept in host memory and written as Chrome trace events (Perfetto reads them): one process per
 * rank, track 0 in virtual time, track 1 in wall time (the host's time since the previous event:
 * the work the event charged). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

enum { MAX_EVENTS = 1 << 21 };

typedef struct {
    int kind;
    double t0, t1, w0, w1, a, b;
    const char *name; /* a kernel's or a collective call's (static strings: the functions' names) */
} event;

struct mdc_dev_trace {
    event *ev;
    size_t n, cap, dropped;
    double wall0, wall_last;
};

mdc_dev_trace *mdc_i_trace_new(void) {
    mdc_dev_trace *t = calloc(1, sizeof *t);
    if (t) t->wall0 = t->wall_last = mdc_wall_time();
    return t;
}
void mdc_i_trace_free(mdc_dev_trace *t) {
    if (t) free(t->ev), free(t);
}

void mdc_i_trace_add(mdc_dev_trace *t, int kind, const char *name, double t0, double t1, double a, double b) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 4096;
        event *e = cap <= MAX_EVENTS ? realloc(t->ev, cap * sizeof *e) : NULL;
        if (!e) {
            t->dropped++;
            return;
        } /* bounded: counted, said in the file */
        t->ev = e, t->cap = cap;
    }
    double w = mdc_wall_time();
    t->ev[t->n++] = (event){kind, t0, t1, t->wall_last - t->wall0, w - t->wall0, a, b, name};
    t->wall_last = w;
}

size_t mdc_i_trace_spans(const mdc_dev_trace *t, double from, double *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        const event *e = &t->ev[i];
        if (e->t1 < from) continue;
        if (out && k < cap) out[3 * k] = e->kind, out[3 * k + 1] = e->t0, out[3 * k + 2] = e->t1;
        k++;
    }
    return k;
}

static const char *const kind_name[MDC_TRACE_KINDS] = {"kernel", "copy", "send", "recv", "collective"};

char *mdc_i_trace_json(const mdc_dev_trace *t, int rank) {
    size_t cap = 256 + t->n * 360, o = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
#define PUT(...) (o += (size_t)snprintf(s + o, cap - o, __VA_ARGS__))
    PUT("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},", rank, rank);
    PUT("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"virtual time\"}},", rank);
    PUT("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"wall time\"}}", rank);
    for (size_t i = 0; i < t->n && o < cap; i++) {
        const event *e = &t->ev[i];
        const char *nm = e->kind == MDC_TRACE_COLL || (e->kind == MDC_TRACE_KERNEL && e->name) ? e->name
                                                                                               : kind_name[e->kind];
        if (e->kind == MDC_TRACE_KERNEL && !strncmp(nm, "mdc_", 4)) nm += 4;
        const char *an = e->kind == MDC_TRACE_KERNEL ? "flops" : e->kind == MDC_TRACE_COLL ? "count" : "bytes";
        for (int tid = 0; tid < 2; tid++) {
            double ts = tid ? e->w0 : e->t0, te = tid ? e->w1 : e->t1;
            if (e->kind == MDC_TRACE_COLL)
                PUT(",{\"name\":\"%s\",\"cat\":\"collective\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%d,\"tid\":%"
                    "d,"
                    "\"args\":{\"%s\":%.0f}}",
                    nm, (tid ? te : ts) * 1e6, rank, tid, an, e->a);
            else
                PUT(",{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"%s\":%.0f}}",
                    nm, kind_name[e->kind], ts * 1e6, (te - ts) * 1e6, rank, tid, an, e->a);
        }
    }
    if (t->dropped && o < cap)
        PUT(",{\"name\":\"trace full: %zu events not "
            "recorded\",\"ph\":\"i\",\"s\":\"p\",\"ts\":0,\"pid\":%d,\"tid\":0}",
            t->dropped, rank);
#undef PUT
    if (o >= cap) { /* cannot happen with the per-event bound above; never a cut object */
        free(s);
        return NULL;
    }
    return s;
}
