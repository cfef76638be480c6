/* The transport's fault injection for tests (collectives/transport_internal.h): a random delay
 * before every send (MINIDC_FAULT_DELAY=N microseconds at most), which must change no result, only
 * the order messages arrive in; and one corrupted message (MINIDC_FAULT_CORRUPT=RANK:N: the N-th
 * send of 4 bytes or more of world rank RANK travels with a float's exponent bit flipped, the
 * sender's buffer staying right), which a check must catch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport_internal.h"

void mdc_i_fault_init(mdc_transport *t) {
    t->fault_s = mdc_i_env_num("MINIDC_FAULT_DELAY", 0, 0, 1e6) * 1e-6;
    t->fault_rng = 0x9e3779b97f4a7c15ull * (uint64_t)(t->rank + 1);
    const char *c = getenv("MINIDC_FAULT_CORRUPT");
    long cr = -1, cn = 0;
    int used = 0;
    if (!c || !*c) return;
    /* a fault that never fires would pass its test for nothing: a value that cannot fire is said */
    if (sscanf(c, "%ld:%ld%n", &cr, &cn, &used) != 2 || c[used] || cr < 0 || cn < 1) {
        if (t->rank == 0)
            fprintf(stderr,
                    "minidc: MINIDC_FAULT_CORRUPT='%s' is not RANK:N (a rank and the send to corrupt, "
                    "N >= 1): no message is corrupted\n",
                    c);
        return;
    }
    if (cr >= t->size && t->rank == 0)
        fprintf(stderr,
                "minidc: MINIDC_FAULT_CORRUPT='%s': rank %ld is not in the job (ranks 0..%d): no message is "
                "corrupted\n",
                c, cr, t->size - 1);
    if (cr == t->rank) t->corrupt_at = cn;
}

void mdc_transport_fault_corrupt_next(mdc_transport *t) {
    if (t) t->corrupt_at = t->sends + 1;
}

void mdc_i_fault_delay(mdc_transport *t) {
    if (!(t->fault_s > 0)) return;
    uint64_t x = t->fault_rng; /* xorshift: a different delay per send, the same sequence per run */
    x ^= x << 13, x ^= x >> 7, x ^= x << 17, t->fault_rng = x;
    struct timespec ts = {0, (long)((double)(x >> 11) / 9007199254740992.0 * t->fault_s * 1e9)};
    nanosleep(&ts, NULL);
}

const void *mdc_i_fault_payload(mdc_transport *t, mdc_request *r, const void *buf, size_t bytes) {
    if (!t->corrupt_at || bytes < 4 || ++t->sends != t->corrupt_at || !(r->fault_copy = malloc(bytes))) return buf;
    memcpy(r->fault_copy, buf, bytes);
    ((unsigned char *)r->fault_copy)[((bytes / 2) & ~(size_t)3) | 3] ^= 0x10; /* a float's exponent bit */
    return r->fault_copy;
}
