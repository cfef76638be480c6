/* Lab 1's reference solution (the grader's check in tests/labs/labs_cli.sh): the ring all-reduce,
 * a reduce-scatter then an all-gather, block i = elements [i count / p, (i + 1) count / p). */
#include <stdlib.h>
#include <string.h>

#include "minidc/collectives.h"

mdc_status lab_allreduce(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g);

static size_t block_lo(size_t count, int p, int i) { return count * (size_t)i / (size_t)p; }

mdc_status lab_allreduce(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, count * esz);
    int next = (me + 1) % p, prev = (me + p - 1) % p;
    char *buf = recvbuf, *tmp = malloc((count / (size_t)p + 1) * esz);
    if (!tmp) return mdc_fail(MDC_ERR_OOM_HOST, "lab 1: scratch");
    mdc_status st = MDC_OK;
    /* reduce-scatter: at step s send block me - s, receive block me - s - 1 and add it in */
    for (int s = 0; s < p - 1 && !st; s++) {
        int sb = (me - s + p) % p, rb = (me - s - 1 + 2 * p) % p;
        size_t slo = block_lo(count, p, sb), sn = block_lo(count, p, sb + 1) - slo;
        size_t rlo = block_lo(count, p, rb), rn = block_lo(count, p, rb + 1) - rlo;
        st = mdc_sendrecv(buf + slo * esz, sn * esz, next, tmp, rn * esz, prev, 0, g);
        if (!st) mdc_reduce_local(buf + rlo * esz, tmp, rn, t, op);
    }
    /* all-gather: rank me now holds block me + 1 summed; pass the summed blocks around */
    for (int s = 0; s < p - 1 && !st; s++) {
        int sb = (me + 1 - s + p) % p, rb = (me - s + p) % p;
        size_t slo = block_lo(count, p, sb), sn = block_lo(count, p, sb + 1) - slo;
        size_t rlo = block_lo(count, p, rb), rn = block_lo(count, p, rb + 1) - rlo;
        st = mdc_sendrecv(buf + slo * esz, sn * esz, next, buf + rlo * esz, rn * esz, prev, 1, g);
    }
    free(tmp);
    if (!st) mdc_reduce_finish(recvbuf, count, t, op, p);
    return st;
}
