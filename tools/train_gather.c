/* Every rank's part of an output to rank 0 (tools/train_state.h), for the writers that rank 0
 * alone writes (--trace, --timeline). */
#include <stdlib.h>

#include "train_state.h"

enum { TAG_LEN = 71, TAG_BYTES = 72 };

mdc_status mdc_train_gather_parts(mdc_runtime *rt, void *mine, long long len, const char *what, void ***parts,
                                  long long **lens) {
    *parts = NULL, *lens = NULL;
    mdc_status st = MDC_OK;
    if (rt->rank != 0) { /* every rank sends, even one that could not make its part (-1) */
        st = mdc_send(&len, sizeof len, 0, TAG_LEN, rt->world);
        if (!st && len > 0) st = mdc_send(mine, (size_t)len, 0, TAG_BYTES, rt->world);
        free(mine);
        return st;
    }
    void **p = calloc((size_t)rt->size, sizeof *p);
    long long *n = calloc((size_t)rt->size, sizeof *n);
    if (!p || !n) st = mdc_fail(MDC_ERR_OOM_HOST, "%s: gathering the ranks' parts", what);
    if (!st) p[0] = mine, n[0] = len, mine = NULL;
    if (!st && len < 0) st = mdc_fail(MDC_ERR_OOM_HOST, "%s: rank 0 could not make its part", what);
    for (int r = 1; r < rt->size; r++) { /* receive every rank's part, even after a failure */
        long long k = -1;
        mdc_status rs = mdc_recv(&k, sizeof k, r, TAG_LEN, rt->world);
        void *b = !rs && k > 0 ? malloc((size_t)k + 1) : NULL;
        if (!rs && k > 0 && !b) rs = mdc_fail(MDC_ERR_OOM_HOST, "%s: rank %d's %lld bytes", what, r, k);
        if (!rs && b) rs = mdc_recv(b, (size_t)k, r, TAG_BYTES, rt->world);
        if (!rs && k < 0) rs = mdc_fail(MDC_ERR_OOM_HOST, "%s: rank %d could not make its part", what, r);
        if (!rs && p) p[r] = b, n[r] = k > 0 ? k : 0;
        else free(b);
        if (rs && !st) st = rs;
    }
    free(mine);
    if (st) {
        for (int r = 0; p && r < rt->size; r++) free(p[r]);
        free(p), free(n);
        return st;
    }
    *parts = p, *lens = n;
    return MDC_OK;
}
