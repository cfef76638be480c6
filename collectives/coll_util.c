/* Small helpers the algorithms share: a paired send/receive that skips empty sides, and the
 * balanced block partition. */
#include "coll_internal.h"

mdc_status mdc_i_xchg(mdc_group *g, const void *sbuf, size_t sbytes, int dst, void *rbuf,
                      size_t rbytes, int src, int tag) {
    mdc_request *r[2] = {NULL, NULL};
    mdc_status st = MDC_OK;
    if (rbytes) st = mdc_irecv(rbuf, rbytes, src, tag, g, &r[0]);
    if (!st && sbytes) st = mdc_isend(sbuf, sbytes, dst, tag, g, &r[1]);
    /* If the send could not be posted (an MPI failure, named in the detail), the posted
     * receive stays with MPI: waiting on it could hang, and the transport is unusable anyway. */
    if (st) return st;
    return mdc_waitall(r, 2);
}

void mdc_i_partition(size_t count, int n, size_t *off, size_t *len) {
    size_t q = count / (size_t)n, r = count % (size_t)n, o = 0;
    for (int c = 0; c < n; c++) {
        len[c] = q + ((size_t)c < r);
        off[c] = o;
        o += len[c];
    }
}
