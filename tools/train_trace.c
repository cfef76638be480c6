/* train --trace FILE (tools/train_state.h): every rank's device trace (device/trace.c) gathered to
 * rank 0 and written as one Chrome trace (Perfetto and chrome://tracing open it): a process per
 * rank, a virtual-time and a wall-time track, an event per kernel, copy, message and collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_state.h"

enum { TAG_LEN = 71, TAG_TEXT = 72 };

mdc_status mdc_train_write_trace(mdc_runtime *rt, const char *path) {
    char *mine = mdc_dev_trace_json(rt->dev);
    long long len = mine ? (long long)strlen(mine) : -1;
    mdc_status st = MDC_OK;
    if (rt->rank != 0) { /* every rank sends, even a failed one (-1), so rank 0 never waits in vain */
        st = mdc_send(&len, sizeof len, 0, TAG_LEN, rt->world);
        if (!st && len > 0) st = mdc_send(mine, (size_t)len, 0, TAG_TEXT, rt->world);
        free(mine);
        return st;
    }
    mdc_atomic a;
    int ok = mine != NULL;
    st = mdc_atomic_open(&a, path);
    int opened = !st;
    if (!st) fprintf(a.f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[%s", mine ? mine : "");
    free(mine);
    for (int r = 1; r < rt->size; r++) { /* receive every rank's part, even after a failure */
        long long n = -1;
        mdc_status rs = mdc_recv(&n, sizeof n, r, TAG_LEN, rt->world);
        char *text = !rs && n > 0 ? malloc((size_t)n + 1) : NULL;
        if (!rs && n > 0 && !text) rs = mdc_fail(MDC_ERR_OOM_HOST, "--trace: rank %d's %lld bytes", r, n);
        if (!rs && text) rs = mdc_recv(text, (size_t)n, r, TAG_TEXT, rt->world);
        if (!rs && text && !st) text[n] = 0, fprintf(a.f, ",%s", text);
        if (!rs && n < 0) rs = mdc_fail(MDC_ERR_OOM_HOST, "--trace: rank %d could not format its events", r);
        free(text);
        if (rs && !st) st = rs;
        ok &= !rs;
    }
    if (!st) fprintf(a.f, "]}\n");
    if (opened) {
        mdc_status cst = mdc_atomic_commit(&a, !st && ok, "--trace");
        if (!st) st = cst;
    }
    return st;
}
