/* Small helpers the algorithms share: a paired send/receive that skips empty sides, and the
 * balanced block partition. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll_internal.h"

/* ---- tuning from the environment -------------------------------------------------------
 * MINIDC_* settings are read strictly: a value that is not a number in range ("abc", "4x",
 * "-1", "nan") is named on stderr and the default is used, never half-read (atof("4x") = 4)
 * or taken silently. Unset or empty: the default, silently. */
double mdc_i_env_num(const char *name, double dflt, double lo, double hi) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "minidc: %s='%s' is not a number in %g..%g; using %g\n", name, v, lo, hi, dflt);
        return dflt;
    }
    return x;
}

size_t mdc_i_env_bytes(const char *name, size_t dflt, size_t hi) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    errno = 0;
    unsigned long long x = *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
    int shift = 0;
    if (*v >= '0' && *v <= '9' && (*end == 'k' || *end == 'K')) shift = 10, end++;
    else if (*v >= '0' && *v <= '9' && (*end == 'm' || *end == 'M')) shift = 20, end++;
    if (*v < '0' || *v > '9' || *end || errno || x > (hi >> shift)) {
        fprintf(stderr, "minidc: %s='%s' is not a byte count in 0..%zu (k, M suffixes); using %zu\n", name, v, hi,
                dflt);
        return dflt;
    }
    return (size_t)(x << shift);
}

/* ---- scratch cache ------------------------------------------------------------------------
 * Blocks of at least CACHE_MIN bytes (glibc serves those with fresh mmap'ed pages, which fault
 * on first touch) are kept after use in one of CACHE_SLOTS slots, up to CACHE_MAX bytes in all,
 * and handed out again for a request that fits. Smaller blocks are plain malloc. Thread-safe. */
#define CACHE_SLOTS 4
#define CACHE_MIN (64u << 10)
#define CACHE_MAX ((size_t)512 << 20)

static struct {
    void *p;
    size_t cap;
    int busy;
} slots[CACHE_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t cached_bytes(void) {
    size_t s = 0;
    for (int i = 0; i < CACHE_SLOTS; i++) s += slots[i].cap;
    return s;
}

mdc_status mdc_i_alloc(void **out, size_t bytes, const char *what) {
    *out = NULL;
    if (bytes >= CACHE_MIN && bytes <= CACHE_MAX) {
        pthread_mutex_lock(&slots_lock);
        int best = -1, empty = -1, big = -1;
        for (int i = 0; i < CACHE_SLOTS; i++) {
            if (slots[i].busy) continue;
            if (!slots[i].p) {
                if (empty < 0) empty = i;
            } else if (slots[i].cap >= bytes) {
                if (best < 0 || slots[i].cap < slots[best].cap) best = i;
            } else if (big < 0 || slots[i].cap > slots[big].cap) {
                big = i;
            }
        }
        if (best < 0) { /* grow the largest free block that is too small, or fill an empty slot */
            int i = big >= 0 ? big : empty;
            if (i >= 0 && cached_bytes() - slots[i].cap + bytes <= CACHE_MAX) {
                free(slots[i].p);
                slots[i].p = malloc(bytes);
                slots[i].cap = slots[i].p ? bytes : 0;
                if (slots[i].p) best = i;
            }
        }
        if (best >= 0) {
            slots[best].busy = 1;
            *out = slots[best].p;
        }
        pthread_mutex_unlock(&slots_lock);
        if (*out) return MDC_OK;
    }
    *out = malloc(bytes ? bytes : 1);
    if (!*out) return mdc_fail(MDC_ERR_OOM_HOST, "%s: scratch of %zu bytes", what, bytes);
    return MDC_OK;
}

void mdc_i_free(void *p) {
    if (!p) return;
    pthread_mutex_lock(&slots_lock);
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (slots[i].p == p && slots[i].busy) {
            slots[i].busy = 0;
            pthread_mutex_unlock(&slots_lock);
            return;
        }
    pthread_mutex_unlock(&slots_lock);
    free(p);
}

void mdc_i_scratch_release(void) {
    pthread_mutex_lock(&slots_lock);
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (!slots[i].busy) {
            free(slots[i].p);
            slots[i].p = NULL;
            slots[i].cap = 0;
        }
    pthread_mutex_unlock(&slots_lock);
}

mdc_status mdc_i_xchg_copy(mdc_group *g, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src,
                           int tag, void *cdst, const void *csrc, size_t cbytes) {
    mdc_request *r[2] = {NULL, NULL};
    mdc_status st = MDC_OK;
    if (rbytes) st = mdc_irecv(rbuf, rbytes, src, tag, g, &r[0]);
    if (!st && sbytes) st = mdc_isend(sbuf, sbytes, dst, tag, g, &r[1]);
    /* If the send could not be posted (an MPI failure, named in the detail), the posted
     * receive stays with MPI: waiting on it could hang, and the transport is unusable anyway. */
    if (st) return st;
    if (cbytes && cdst != csrc && !mdc_host_dry()) memmove(cdst, csrc, cbytes); /* dry: no payload */
    return mdc_waitall(r, 2);
}

mdc_status mdc_i_xchg(mdc_group *g, const void *sbuf, size_t sbytes, int dst, void *rbuf, size_t rbytes, int src,
                      int tag) {
    return mdc_i_xchg_copy(g, sbuf, sbytes, dst, rbuf, rbytes, src, tag, NULL, NULL, 0);
}

/* Elements [from, to) of an exchange-and-reduce step: out = in OP own (or own OP in); `in`
 * holds the incoming elements from `from` on (a piece's slot, or the scratch at that offset). */
static void reduce_range(void *out, const void *in, const void *own, size_t from, size_t to, int incoming_left,
                         mdc_dtype t, mdc_op op) {
    size_t esz = mdc_dtype_size(t);
    const char *b = (const char *)own + from * esz;
    mdc_i_reduce3((char *)out + from * esz, incoming_left ? in : b, incoming_left ? b : in, to - from, t, op);
}

/* At most this many pieces per message: MPI's cost per piece grows with the pieces in flight
 * (a 1 MiB message in 100-byte pieces took 20 s), so a large message gets larger pieces. */
#define MAX_PIECES 64
/* Slots of the window a reducing receive's pieces take turns in (mdc_i_irecv_window): 4 x
 * 256 KiB stays in a core's L2 here (2 ranks, 16 MiB allreduce 3.27-3.78 -> 2.46-2.79 ms;
 * docs/performance.md, item 17). */
#define WINDOW 4

/* The piece size of a reducing message of `bytes` (0: not sliced); both ends compute it from
 * the size alone. */
static size_t piece_bytes(size_t bytes, size_t esz) {
    size_t slice = mdc_coll_slice() / esz * esz;
    if (!slice || bytes <= slice) return 0;
    size_t least = (bytes + MAX_PIECES - 1) / MAX_PIECES;
    least = (least + esz - 1) / esz * esz;
    return least > slice ? least : slice;
}

mdc_status mdc_i_xchg_reduce(mdc_group *g, const void *sbuf, size_t sbytes, int dst, void *tmp, size_t rcount, int src,
                             const void *own, void *out, int incoming_left, mdc_dtype t, mdc_op op, int tag) {
    size_t esz = mdc_dtype_size(t), rbytes = rcount * esz;
    size_t slice = piece_bytes(rbytes, esz), sslice = piece_bytes(sbytes, esz);
    mdc_request *r[2] = {NULL, NULL};
    mdc_status st = MDC_OK;
    int rsliced = slice != 0;
    /* Reducing into what is still being sent would change the message under MPI's feet (the
     * in-place 2-rank ring reduce-scatter writes its result over the block it sends): then
     * the pieces are only received as they land, and reduced once the send is done.
     * Otherwise each piece is reduced as it lands, and the pieces take turns in a window of
     * WINDOW slots at the start of tmp, so each is read while it is still in cache (the rest
     * of tmp is never touched). */
    const char *sb = sbuf, *ob = out, *tb = tmp, *wb = own;
    int early = rsliced && !(sbytes && ob < sb + sbytes && sb < ob + rbytes);
    /* out or own inside tmp (out may be tmp): the pieces must stay where they landed. */
    int window = early && !(ob < tb + rbytes && tb < ob + rbytes) && !(wb < tb + rbytes && tb < wb + rbytes);
    if (rbytes)
        st = window    ? mdc_i_irecv_window(tmp, rbytes, slice, WINDOW, src, tag, g, &r[0])
             : rsliced ? mdc_i_irecv_sliced(tmp, rbytes, slice, src, tag, g, &r[0])
                       : mdc_irecv(tmp, rbytes, src, tag, g, &r[0]);
    if (!st && sbytes)
        st = sslice ? mdc_i_isend_sliced(sbuf, sbytes, sslice, dst, tag, g, &r[1])
                    : mdc_isend(sbuf, sbytes, dst, tag, g, &r[1]);
    if (st) return st; /* as mdc_i_xchg: a posted receive stays with MPI */
    size_t done = 0;   /* elements reduced so far */
    for (int k = 0; early && k < mdc_i_request_pieces(r[0]); k++) {
        if ((st = mdc_i_wait_piece(r[0], k))) {
            mdc_i_abandon(r, 2);
            return st;
        }
        size_t e = ((size_t)(k + 1) * slice < rbytes ? (size_t)(k + 1) * slice : rbytes) / esz;
        reduce_range(out, mdc_i_piece_data(r[0], k), own, done, e, incoming_left, t, op);
        done = e;
    }
    if ((st = mdc_waitall(r, 2))) return st;
    if (done < rcount) reduce_range(out, (char *)tmp + done * esz, own, done, rcount, incoming_left, t, op);
    mdc_device *dev = mdc_transport_device(mdc_group_transport(g));
    if (dev && rcount) mdc_dev_reduce(dev, (double)rcount, (double)esz);
    return MDC_OK;
}

mdc_status mdc_i_equal_counts(const char *what, const mdc_group *g, size_t count, size_t **out) {
    int p = mdc_group_size(g);
    *out = malloc(sizeof(size_t) * (size_t)p);
    if (!*out) return mdc_fail(MDC_ERR_OOM_HOST, "%s: counts", what);
    for (int i = 0; i < p; i++) (*out)[i] = count;
    return MDC_OK;
}

void mdc_i_partition(size_t count, int n, size_t *off, size_t *len) {
    size_t q = count / (size_t)n, r = count % (size_t)n, o = 0;
    for (int c = 0; c < n; c++) {
        len[c] = q + ((size_t)c < r);
        off[c] = o;
        o += len[c];
    }
}

mdc_status mdc_i_binomial_nonroot(int p, int rel, size_t bs, void *own, size_t **off, char **base, const char *what) {
    *base = NULL;
    if (!(*off = malloc(2 * sizeof(size_t) * (size_t)p))) return mdc_fail(MDC_ERR_OOM_HOST, "%s: offsets", what);
    for (int i = 0; i < p; i++) (*off)[i] = (size_t)i * bs, (*off)[p + i] = bs;
    int sub = rel & -rel; /* subtree size (clipped below) */
    if (rel + sub > p) sub = p - rel;
    if (sub == 1) { /* a leaf's block stays where it is */
        *base = own;
        return MDC_OK;
    }
    mdc_status st = mdc_i_alloc((void **)base, (size_t)sub * bs, what);
    if (st) free(*off), *off = NULL;
    return st;
}
