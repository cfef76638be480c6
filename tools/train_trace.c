/* train --trace FILE (tools/train_state.h): every rank's device trace (device/trace.c) gathered to
 * rank 0 and written as one Chrome trace (Perfetto and chrome://tracing open it): a process per
 * rank, a virtual-time and a wall-time track, an event per kernel, copy, message and collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_state.h"

mdc_status mdc_train_write_trace(mdc_runtime *rt, const char *path) {
    char *mine = mdc_dev_trace_json(rt->dev);
    void **parts;
    long long *lens;
    mdc_status st = mdc_train_gather_parts(rt, mine, mine ? (long long)strlen(mine) : -1, "--trace", &parts, &lens);
    if (st || rt->rank != 0) return st;
    mdc_atomic a;
    if (!(st = mdc_atomic_open(&a, path))) {
        fprintf(a.f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
        for (int r = 0; r < rt->size; r++)
            if (lens[r] > 0) fprintf(a.f, "%s%.*s", r ? "," : "", (int)lens[r], (const char *)parts[r]);
        fprintf(a.f, "]}\n");
        st = mdc_atomic_commit(&a, 1, "--trace");
    }
    for (int r = 0; r < rt->size; r++) free(parts[r]);
    free(parts), free(lens);
    return st;
}
