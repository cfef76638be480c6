/* The schedule builders: one per collective algorithm, each mirroring the message pattern of
 * collectives/<coll>_<algo>.c exactly (the same partition, the same skipped empty messages,
 * the same per-rank order of posting). tests/test_explain.c compares every builder with the
 * real code's traced messages, so a change there that is not made here fails `make check`. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "minidc/schedule.h"

/* ---- small helpers ------------------------------------------------------------------------- */

static int imod(long a, int n) { return (int)(((a % n) + n) % n); }
static int pow2_floor(int p) {
    int q = 1;
    while (q * 2 <= p) q *= 2;
    return q;
}
static int lg_ceil(int p) {
    int l = 0;
    while ((1 << l) < p) l++;
    return l;
}
/* Blocks in the largest subtree a binomial tree's root receives from one child: the child at
 * distance d brings min(d, p - d) blocks. */
static int largest_subtree(int p) {
    int m = 0;
    for (int d = 1; d < p; d *= 2) {
        int t = p - d < d ? p - d : d;
        if (t > m) m = t;
    }
    return m;
}
/* Rabenseifner's fold (collectives/coll_internal.h): pairs (2i, 2i+1) for i < rem. */
static int oldrank(int nr, int rem) { return nr < rem ? 2 * nr + 1 : nr + rem; }
static int first_old(int nr, int rem) { return nr < rem ? 2 * nr : nr + rem; }

/* Balanced partition: block c has count/n elements, one more for c < count % n. */
static void partition(size_t count, int n, size_t *off, size_t *len) {
    size_t q = count / (size_t)n, r = count % (size_t)n, o = 0;
    for (int c = 0; c < n; c++) {
        len[c] = q + ((size_t)c < r);
        off[c] = o;
        o += len[c];
    }
}

static mdc_status add(mdc_schedule *s, int step, int src, int dst, size_t bytes, int reduce,
                      size_t off, size_t len, const char *fmt, ...) __attribute__((format(printf, 9, 10)));
static mdc_status add(mdc_schedule *s, int step, int src, int dst, size_t bytes, int reduce,
                      size_t off, size_t len, const char *fmt, ...) {
    char what[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mdc_schedule_add(s, step, src, dst, bytes, reduce, off, len, what);
}

static void phase(mdc_schedule *s, int step, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void phase(mdc_schedule *s, int step, const char *fmt, ...) {
    if (mdc_schedule_step(s, step)) return; /* out of memory: the step's mdc_schedule_add fails too */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->phase[step], sizeof s->phase[step], fmt, ap);
    va_end(ap);
}

#define TRY(x)                        \
    do {                              \
        mdc_status try_st_ = (x);     \
        if (try_st_) return try_st_;  \
    } while (0)

static void formula(mdc_schedule *s, double value, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void formula(mdc_schedule *s, double value, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->bytes_formula, sizeof s->bytes_formula, fmt, ap);
    va_end(ap);
    s->bytes_formula_value = value;
}

/* ---- shared patterns (as in coll_internal.h) ------------------------------------------------ */

/* Ring reduce-scatter over members mem[0..n) (NULL = the group), blocks off/len in elements:
 * step k: member pos sends block (pos - k - 1) to pos + 1, which reduces incoming OP own.
 * Empty blocks are not sent. Returns the next free step in *step. */
static mdc_status ring_rs(mdc_schedule *s, int *step, const int *mem, int n, const size_t *off,
                          const size_t *len, const char *label) {
    size_t esz = mdc_dtype_size(s->t);
    for (int k = 0; k < n - 1; k++) {
        phase(s, *step + k, "%sreduce-scatter %d/%d", label, k + 1, n - 1);
        for (int pos = 0; pos < n; pos++) {
            int b = imod(pos - k - 1, n);
            if (!len[b]) continue;
            int src = mem ? mem[pos] : pos, dst = mem ? mem[(pos + 1) % n] : (pos + 1) % n;
            TRY(add(s, *step + k, src, dst, len[b] * esz, MDC_SCHED_IN_OP_OWN, off[b], len[b],
                    "%s %d [%zu,%zu)", s->coll == MDC_COLL_ALLREDUCE ? "chunk" : "block", b, off[b],
                    off[b] + len[b]));
        }
    }
    *step += n > 1 ? n - 1 : 0;
    return MDC_OK;
}

/* Ring allgather: step k: member pos sends block (pos - k) to pos + 1. Blocks in elements
 * (el = 1: off/len are elements of the logical vector, carried along) or bytes (el = 0). */
static mdc_status ring_ag(mdc_schedule *s, int *step, const int *mem, int n, const size_t *off,
                          const size_t *len, int el, const char *label, const char *bname) {
    size_t esz = el ? mdc_dtype_size(s->t) : 1;
    for (int k = 0; k < n - 1; k++) {
        phase(s, *step + k, "%sallgather %d/%d", label, k + 1, n - 1);
        for (int pos = 0; pos < n; pos++) {
            int b = imod(pos - k, n);
            if (!len[b]) continue;
            int src = mem ? mem[pos] : pos, dst = mem ? mem[(pos + 1) % n] : (pos + 1) % n;
            if (el)
                TRY(add(s, *step + k, src, dst, len[b] * esz, MDC_SCHED_STORE, off[b], len[b],
                        "%s %d [%zu,%zu)", bname, b, off[b], off[b] + len[b]));
            else
                TRY(add(s, *step + k, src, dst, len[b], MDC_SCHED_STORE, 0, 0, "%s %d", bname,
                        mem ? mem[b] : b));
        }
    }
    *step += n > 1 ? n - 1 : 0;
    return MDC_OK;
}

/* Binomial broadcast of `bytes` from root (rel = rank - root): round k uses distance
 * top/2^(k+1); the root sends largest subtree first. el: the message carries elements
 * [0, len) of the logical vector (allreduce reduce_bcast). */
static mdc_status bcast_binomial(mdc_schedule *s, int *step, int root, size_t bytes, size_t len,
                                 const char *label) {
    int p = s->p, top = pow2_floor(p);
    if (top < p) top *= 2;
    int rounds = lg_ceil(p);
    for (int k = 0; k < rounds; k++) {
        int d = top >> (k + 1);
        phase(s, *step + k, "%sbroadcast, distance %d", label, d);
        for (int rel = 0; rel < p; rel++) {
            int mask = rel ? (rel & -rel) : top;
            if (d >= mask || rel + d >= p) continue;
            TRY(add(s, *step + k, imod(rel + root, p), imod(rel + d + root, p), bytes,
                    MDC_SCHED_STORE, 0, len, "%s", len ? "the result" : "the whole buffer"));
        }
    }
    *step += rounds;
    return MDC_OK;
}

/* Binomial reduce to root of `count` elements: at distance d = 2^k, rel with bit d sends its
 * partial to rel - d, which computes own OP child. */
static mdc_status binomial_reduce(mdc_schedule *s, int *step, int root, size_t count, const char *label) {
    int p = s->p, rounds = lg_ceil(p);
    size_t esz = mdc_dtype_size(s->t);
    for (int k = 0; k < rounds; k++) {
        int d = 1 << k;
        phase(s, *step + k, "%sreduce, distance %d", label, d);
        for (int rel = 0; rel < p; rel++) {
            if ((rel & (d - 1)) || !(rel & d)) continue; /* sends at the round of its low bit */
            int last = imod((rel + d < p ? rel + d : p) - 1 + root, p);
            if (last == imod(rel + root, p))
                TRY(add(s, *step + k, imod(rel + root, p), imod(rel - d + root, p), count * esz,
                        MDC_SCHED_OWN_OP_IN, 0, count, "x%d", last));
            else
                TRY(add(s, *step + k, imod(rel + root, p), imod(rel - d + root, p), count * esz,
                        MDC_SCHED_OWN_OP_IN, 0, count, "partial of ranks %d..%d", imod(rel + root, p), last));
        }
    }
    *step += rounds;
    return MDC_OK;
}

/* "block of rank a" or "blocks of ranks a..b" (b may wrap below a). */
static const char *blocks_text(char *buf, size_t len, int a, int b) {
    if (a == b) snprintf(buf, len, "block of rank %d", a);
    else snprintf(buf, len, "blocks of ranks %d..%d", a, b);
    return buf;
}

/* Binomial scatter / gather of blocks off/len (bytes, in relative order) on the tree rooted
 * at root; subtree of rel = [rel, rel + lowbit(rel)) clipped to p. Empty messages skipped. */
static size_t span(const size_t *off, const size_t *len, int a, int b) {
    return off[b - 1] + len[b - 1] - off[a];
}

static mdc_status binomial_scatter(mdc_schedule *s, int *step, int root, const size_t *off,
                                   const size_t *len, const char *label) {
    char txt[48];
    int p = s->p, top = pow2_floor(p);
    if (top < p) top *= 2;
    int rounds = lg_ceil(p);
    for (int k = 0; k < rounds; k++) {
        int d = top >> (k + 1);
        phase(s, *step + k, "%sscatter, distance %d", label, d);
        for (int rel = 0; rel < p; rel++) {
            int mask = rel ? (rel & -rel) : top, child = rel + d;
            if (d >= mask || child >= p) continue;
            int end = child + d < p ? child + d : p;
            size_t b = span(off, len, child, end);
            if (!b) continue;
            TRY(add(s, *step + k, imod(rel + root, p), imod(child + root, p), b, MDC_SCHED_STORE, 0,
                    0, "%s", blocks_text(txt, sizeof txt, imod(child + root, p), imod(end - 1 + root, p))));
        }
    }
    *step += rounds;
    return MDC_OK;
}

/* el: off/len are elements of the logical vector (carried along; bytes = elements x size). */
static mdc_status binomial_gather(mdc_schedule *s, int *step, int root, const size_t *off,
                                  const size_t *len, int el, const char *label) {
    char txt[48];
    int p = s->p, rounds = lg_ceil(p);
    size_t esz = el ? mdc_dtype_size(s->t) : 1;
    for (int k = 0; k < rounds; k++) {
        int d = 1 << k;
        phase(s, *step + k, "%sgather, distance %d", label, d);
        for (int rel = 0; rel < p; rel++) {
            if ((rel & (d - 1)) || !(rel & d)) continue;
            int end = rel + d < p ? rel + d : p;
            size_t b = span(off, len, rel, end);
            if (!b) continue;
            TRY(add(s, *step + k, imod(rel + root, p), imod(rel - d + root, p), b * esz, MDC_SCHED_STORE,
                    el ? off[rel] : 0, el ? b : 0, "%s", blocks_text(txt, sizeof txt, imod(rel + root, p),
                                                                     imod(end - 1 + root, p))));
        }
    }
    *step += rounds;
    return MDC_OK;
}

/* Recursive halving among p2 new ranks (elements; bnd has p2 + 1 entries): distance p2/2 ... 1;
 * each keeps the half holding its own range, sends the other half, reduces lower OP higher. */
static mdc_status halving_rs(mdc_schedule *s, int *step, int rem, int p2, const size_t *bnd, const char *label) {
    size_t esz = mdc_dtype_size(s->t);
    int k = 0;
    for (int mask = p2 / 2; mask >= 1; mask >>= 1, k++) {
        phase(s, *step + k, "%sreduce-scatter (halving), distance %d", label, mask);
        for (int nr = 0; nr < p2; nr++) {
            int lo = nr & ~(2 * mask - 1), pnr = nr ^ mask;
            int give = nr < lo + mask ? lo + mask : lo;
            size_t g0 = bnd[give], gn = bnd[give + mask] - g0;
            if (!gn) continue;
            TRY(add(s, *step + k, oldrank(nr, rem), oldrank(pnr, rem), gn * esz,
                    pnr < nr ? MDC_SCHED_OWN_OP_IN : MDC_SCHED_IN_OP_OWN, g0, gn, "[%zu,%zu)", g0, g0 + gn));
        }
    }
    *step += k;
    return MDC_OK;
}

/* Recursive doubling allgather among p2 new ranks: distance 1 ... p2/2; exchange the range
 * held. bnd: bytes (el = 0) or elements of the logical vector (el = 1). */
static mdc_status doubling_ag(mdc_schedule *s, int *step, int rem, int p2, const size_t *bnd, int el,
                              const char *label) {
    size_t esz = el ? mdc_dtype_size(s->t) : 1;
    int k = 0;
    for (int mask = 1; mask < p2; mask <<= 1, k++) {
        phase(s, *step + k, "%sallgather (doubling), distance %d", label, mask);
        for (int nr = 0; nr < p2; nr++) {
            int mylo = nr & ~(mask - 1);
            size_t b0 = bnd[mylo], bn = bnd[mylo + mask] - b0;
            if (!bn) continue;
            int pnr = nr ^ mask;
            if (el)
                TRY(add(s, *step + k, oldrank(nr, rem), oldrank(pnr, rem), bn * esz, MDC_SCHED_STORE,
                        b0, bn, "[%zu,%zu)", b0, b0 + bn));
            else
                TRY(add(s, *step + k, oldrank(nr, rem), oldrank(pnr, rem), bn, MDC_SCHED_STORE, 0, 0,
                        "blocks of ranks %d..%d", first_old(mylo, rem),
                        first_old(mylo + mask, rem) - 1));
        }
    }
    *step += k;
    return MDC_OK;
}

/* ---- allreduce ------------------------------------------------------------------------------ */

static mdc_status b_allreduce_ring(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    formula(s, 2.0 * (p - 1) / p * (double)n, "2(p-1)/p n");
    if (p == 1 || s->count == 0) return MDC_OK;
    size_t chunk = s->chunk_bytes ? (s->chunk_bytes / esz ? s->chunk_bytes / esz : 1) : 0;
    size_t loops = mdc_allreduce_ring_loops(s->count, p, chunk);
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t *len = off + p;
    int step = 0;
    mdc_status st = MDC_OK;
    for (size_t l = 0; l < loops && !st; l++) {
        for (int c = 0; c < p; c++) mdc_allreduce_ring_chunk(s->count, p, chunk, l, c, &off[c], &len[c]);
        char label[32] = "";
        if (loops > 1) snprintf(label, sizeof label, "loop %zu: ", l);
        st = ring_rs(s, &step, NULL, p, off, len, label);
        if (!st) st = ring_ag(s, &step, NULL, p, off, len, 1, label, "chunk");
    }
    free(off);
    if (loops > 1)
        snprintf(s->note, sizeof s->note, "ring chunk %zu elements: %zu loops of up to p x chunk "
                 "elements, each a reduce-scatter and an allgather", chunk, loops);
    else
        snprintf(s->note, sizeof s->note, "chunks: p balanced pieces of ceil(count/p) elements "
                 "(the last ones shorter or empty)");
    return st;
}

static mdc_status fold_in(mdc_schedule *s, int *step, int rem, size_t n_el) {
    size_t esz = mdc_dtype_size(s->t);
    if (!rem) return MDC_OK;
    phase(s, *step, "fold: even ranks below 2 x %d hand their vector to the odd one", rem);
    for (int i = 0; i < rem; i++)
        TRY(add(s, *step, 2 * i, 2 * i + 1, n_el * esz, MDC_SCHED_IN_OP_OWN, 0, n_el, "the whole vector"));
    (*step)++;
    return MDC_OK;
}

static mdc_status fold_out(mdc_schedule *s, int *step, int rem, size_t n_el) {
    size_t esz = mdc_dtype_size(s->t);
    if (!rem) return MDC_OK;
    phase(s, *step, "unfold: odd ranks return the result");
    for (int i = 0; i < rem; i++)
        TRY(add(s, *step, 2 * i + 1, 2 * i, n_el * esz, MDC_SCHED_STORE, 0, n_el, "the result"));
    (*step)++;
    return MDC_OK;
}

static mdc_status b_allreduce_rd(mdc_schedule *s) {
    int p = s->p, p2 = pow2_floor(p), rem = p - p2, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    formula(s, (double)n * (lg_ceil(p2) + (rem ? 1 : 0)), "lg p2 n%s  (p2 = %d)", rem ? " + n (unfold)" : "", p2);
    if (p == 1 || s->count == 0) return MDC_OK;
    TRY(fold_in(s, &step, rem, s->count));
    int k = 0;
    for (int mask = 1; mask < p2; mask <<= 1, k++) {
        phase(s, step + k, "exchange at distance %d (new ranks)", mask);
        for (int nr = 0; nr < p2; nr++) {
            int pnr = nr ^ mask;
            TRY(add(s, step + k, oldrank(nr, rem), oldrank(pnr, rem), n,
                    pnr < nr ? MDC_SCHED_IN_OP_OWN : MDC_SCHED_OWN_OP_IN, 0, s->count, "the whole vector"));
        }
    }
    step += k;
    TRY(fold_out(s, &step, rem, s->count));
    if (rem) snprintf(s->note, sizeof s->note, "%d ranks fold onto %d: pairs (2i, 2i+1), i < %d", p, p2, rem);
    return MDC_OK;
}

static mdc_status b_allreduce_rabenseifner(mdc_schedule *s) {
    int p = s->p, p2 = pow2_floor(p), rem = p - p2, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    formula(s, 2.0 * (p2 - 1) / p2 * (double)n + (rem ? (double)n : 0), "2(p2-1)/p2 n%s  (p2 = %d)",
            rem ? " + n (unfold)" : "", p2);
    if (p == 1 || s->count == 0) return MDC_OK;
    size_t *off = malloc(sizeof(size_t) * (size_t)(3 * p2 + 1));
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t *len = off + p2, *bnd = len + p2;
    partition(s->count, p2, off, len);
    for (int i = 0; i < p2; i++) bnd[i] = off[i];
    bnd[p2] = s->count;
    mdc_status st = fold_in(s, &step, rem, s->count);
    if (!st) st = halving_rs(s, &step, rem, p2, bnd, "");
    if (!st) st = doubling_ag(s, &step, rem, p2, bnd, 1, "");
    if (!st) st = fold_out(s, &step, rem, s->count);
    snprintf(s->note, sizeof s->note, "the vector is cut into %d balanced blocks%s", p2,
             rem ? "; ranks fold onto a power of two first: pairs (2i, 2i+1)" : "");
    free(off);
    return st;
}

static mdc_status b_allreduce_reduce_bcast(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    formula(s, (double)n * lg_ceil(p), "ceil(lg p) n  (rank 0 broadcasting)");
    if (s->count == 0) return MDC_OK;
    TRY(binomial_reduce(s, &step, 0, s->count, ""));
    if (p > 1) TRY(bcast_binomial(s, &step, 0, n, s->count, ""));
    return MDC_OK;
}

/* Hierarchical: ring reduce-scatter inside each node, allreduce of the node's block across
 * nodes (members with the same local index), ring allgather inside the node. */
static mdc_status b_allreduce_hierarchical(mdc_schedule *s) {
    int p = s->p, G = s->ranks_per_node < p ? s->ranks_per_node : p, N = (p + G - 1) / G, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    if (N <= 1 || G <= 1 || p % G || !s->count) {
        mdc_status st = b_allreduce_ring(s);
        snprintf(s->note, sizeof s->note, "%s: runs the ring (needs several nodes of equal size, "
                 "more than one rank each)", N <= 1 ? "one node" : G <= 1 ? "one rank per node" : "unequal nodes");
        return st;
    }
    formula(s, 2.0 * (G - 1) / G * (double)n + 2.0 * (N - 1) / ((double)N * G) * (double)n,
            "2(G-1)/G n NVLink + 2(N-1)/(N G) n network  (G = %d per node, N = %d nodes)", G, N);
    size_t *off = malloc(sizeof(size_t) * (size_t)(2 * G + 2 * N));
    int *mem = malloc(sizeof(int) * (size_t)(G > N ? G : N));
    if (!off || !mem) {
        free(off);
        free(mem);
        return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    }
    size_t *len = off + G, *o2 = len + G, *l2 = o2 + N;
    partition(s->count, G, off, len);
    mdc_status st = MDC_OK;
    /* 1. ring reduce-scatter inside every node (all nodes at once) */
    int s0 = step;
    for (int k = 0; k < N && !st; k++) {
        step = s0;
        for (int i = 0; i < G; i++) mem[i] = k * G + i;
        char lab[32];
        snprintf(lab, sizeof lab, "inside nodes: ");
        st = ring_rs(s, &step, mem, G, off, len, lab);
    }
    /* 2. ring allreduce of block li across the nodes, one ring per local index */
    int s1 = step;
    for (int li = 0; li < G && !st; li++) {
        step = s1;
        if (!len[li]) continue;
        partition(len[li], N, o2, l2);
        for (int k = 0; k < N; k++) o2[k] += off[li], mem[k] = k * G + li;
        st = ring_rs(s, &step, mem, N, o2, l2, "across nodes: ");
        if (!st) st = ring_ag(s, &step, mem, N, o2, l2, 1, "across nodes: ", "piece");
    }
    step = s1 + 2 * (N - 1);
    /* 3. ring allgather inside every node */
    int s2 = step;
    for (int k = 0; k < N && !st; k++) {
        step = s2;
        for (int i = 0; i < G; i++) mem[i] = k * G + i;
        st = ring_ag(s, &step, mem, G, off, len, 1, "inside nodes: ", "block");
    }
    snprintf(s->note, sizeof s->note, "%d nodes of %d ranks (ranks r / %d share a node); block i of "
             "the %d balanced blocks is reduced across nodes by the ranks with local index i", N, G, G, G);
    free(off);
    free(mem);
    return st;
}

/* ---- reduce_scatter ---------------------------------------------------------------------- */

static size_t total_of(const mdc_schedule *s) {
    size_t t = 0;
    for (int i = 0; i < s->p; i++) t += s->counts[i];
    return t;
}

static mdc_status b_rs_ring(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), total = total_of(s);
    formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total) return MDC_OK;
    size_t *off = malloc(sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t o = 0;
    for (int i = 0; i < p; i++) off[i] = o, o += s->counts[i];
    mdc_status st = ring_rs(s, &step, NULL, p, off, s->counts, "");
    free(off);
    return st;
}

static mdc_status b_rs_halving(mdc_schedule *s) {
    int p = s->p, p2 = pow2_floor(p), rem = p - p2, step = 0;
    size_t esz = mdc_dtype_size(s->t), total = total_of(s);
    if (rem) /* no rank both folds and halves: the folding ones send the most */
        formula(s, (double)(total * esz), "n  (the even ranks below 2(p-p2) fold all of it; the rest "
                "(p-1)/p n)");
    else
        formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total || p == 1) return MDC_OK;
    size_t *off = malloc(sizeof(size_t) * (size_t)(p + p2 + 1));
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t *bnd = off + p, o = 0;
    for (int i = 0; i < p; i++) off[i] = o, o += s->counts[i];
    for (int i = 0; i < p2; i++) bnd[i] = off[first_old(i, rem)];
    bnd[p2] = total;
    mdc_status st = fold_in(s, &step, rem, total);
    if (!st) st = halving_rs(s, &step, rem, p2, bnd, "");
    if (!st && rem) {
        phase(s, step, "unfold: odd ranks hand the even rank its block");
        for (int i = 0; i < rem && !st; i++)
            st = add(s, step, 2 * i + 1, 2 * i, s->counts[2 * i] * esz, MDC_SCHED_STORE, off[2 * i],
                     s->counts[2 * i], "block %d", 2 * i);
        step++;
    }
    free(off);
    return st;
}

/* Pairwise: step k = 1 .. p-1: send block r+k to rank r+k, receive own block from r-k and
 * reduce own OP incoming. */
static mdc_status b_rs_pairwise(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), total = total_of(s);
    formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total) return MDC_OK;
    size_t *off = malloc(sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t o = 0;
    for (int i = 0; i < p; i++) off[i] = o, o += s->counts[i];
    mdc_status st = MDC_OK;
    for (int k = 1; k < p && !st; k++) {
        phase(s, k - 1, "exchange at distance %d", k);
        for (int r = 0; r < p && !st; r++) {
            int dst = (r + k) % p;
            if (!s->counts[dst]) continue;
            st = add(s, k - 1, r, dst, s->counts[dst] * esz, MDC_SCHED_OWN_OP_IN, off[dst],
                     s->counts[dst], "block %d", dst);
        }
    }
    free(off);
    return st;
}

/* ---- allgather ----------------------------------------------------------------------------- */

static mdc_status b_ag_ring(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), total = total_of(s);
    formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t *len = off + p, o = 0;
    for (int i = 0; i < p; i++) off[i] = o * esz, len[i] = s->counts[i] * esz, o += s->counts[i];
    mdc_status st = ring_ag(s, &step, NULL, p, off, len, 0, "", "block of rank");
    free(off);
    return st;
}

static mdc_status b_ag_rd(mdc_schedule *s) {
    int p = s->p, p2 = pow2_floor(p), rem = p - p2, step = 0;
    size_t esz = mdc_dtype_size(s->t), total = total_of(s);
    /* Survivor 0 sends the most: it starts with two blocks (its own and the folded one), and at
     * distance d its group holds d + min(d, rem) blocks; then it unfolds n to its even rank. */
    int f = 0;
    for (int d = 1; d < p2; d *= 2) f += d < rem ? d : rem;
    if (rem)
        formula(s, (double)(p2 - 1 + f) / p * (double)(total * esz) + (double)(total * esz),
                "(p2-1+f)/p n + n  (p2 = %d, f = %d folded blocks, unfold; equal blocks)", p2, f);
    else
        formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    size_t *off = malloc(sizeof(size_t) * (size_t)(p + p2 + 1));
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t *bnd = off + p, o = 0;
    for (int i = 0; i < p; i++) off[i] = o * esz, o += s->counts[i];
    for (int i = 0; i < p2; i++) bnd[i] = off[first_old(i, rem)];
    bnd[p2] = total * esz;
    mdc_status st = MDC_OK;
    if (rem) { /* mdc_send/mdc_recv: empty blocks travel as empty messages */
        phase(s, step, "fold: even ranks below 2 x %d give their block to the odd one", rem);
        for (int i = 0; i < rem && !st; i++)
            st = add(s, step, 2 * i, 2 * i + 1, s->counts[2 * i] * esz, MDC_SCHED_STORE, 0, 0,
                     "block of rank %d", 2 * i);
        step++;
    }
    if (!st) st = doubling_ag(s, &step, rem, p2, bnd, 0, "");
    if (!st && rem) {
        phase(s, step, "unfold: odd ranks send everything to the even one");
        for (int i = 0; i < rem && !st; i++)
            st = add(s, step, 2 * i + 1, 2 * i, total * esz, MDC_SCHED_STORE, 0, 0, "every block");
        step++;
    }
    free(off);
    return st;
}

static mdc_status b_ag_direct(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), total = total_of(s);
    formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total || p == 1) return MDC_OK;
    phase(s, 0, "every rank sends its block to every other rank, all at once");
    /* Distance k outer: rank r's sends go to r+1, r+2, ... and its receives come from r-1,
     * r-2, ..., the order the code posts them. */
    for (int k = 1; k < p; k++)
        for (int r = 0; r < p; r++) {
            if (!s->counts[r]) continue;
            TRY(add(s, 0, r, (r + k) % p, s->counts[r] * esz, MDC_SCHED_STORE, 0, 0, "block of rank %d", r));
        }
    return MDC_OK;
}

static mdc_status b_ag_bruck(mdc_schedule *s) {
    char txt[48];
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), total = total_of(s);
    formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total || p == 1) return MDC_OK;
    int k = 0;
    for (int d = 1; d < p; d <<= 1, k++) {
        int cnt = d < p - d ? d : p - d;
        phase(s, k, "distance %d: send the first %d blocks held", d, cnt);
        for (int r = 0; r < p; r++) {
            size_t b = 0;
            for (int j = 0; j < cnt; j++) b += s->counts[(r + j) % p] * esz;
            if (!b) continue;
            TRY(add(s, k, r, imod(r - d, p), b, MDC_SCHED_STORE, 0, 0, "%s",
                    blocks_text(txt, sizeof txt, r, (r + cnt - 1) % p)));
        }
    }
    snprintf(s->note, sizeof s->note, "rank r holds blocks in rotated order r, r+1, ... and "
             "un-rotates them at the end");
    return MDC_OK;
}

/* ---- rooted ------------------------------------------------------------------------------- */

static mdc_status b_bcast_binomial(mdc_schedule *s) {
    int step = 0;
    size_t n = s->count * mdc_dtype_size(s->t);
    formula(s, (double)n * lg_ceil(s->p), "ceil(lg p) n  (the root)");
    if (s->p == 1 || !n) return MDC_OK;
    return bcast_binomial(s, &step, s->root, n, 0, "");
}

static mdc_status b_bcast_scatter_ag(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    formula(s, (double)(p - 1) / p * (double)n * 2, "~2(p-1)/p n  (the root: scatter (p-1)/p n, ring n/p per step)");
    if (p == 1 || !s->count) return MDC_OK;
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    int *mem = malloc(sizeof(int) * (size_t)p);
    if (!off || !mem) {
        free(off);
        free(mem);
        return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    }
    size_t *len = off + p;
    partition(s->count, p, off, len);
    for (int j = 0; j < p; j++) off[j] *= esz, len[j] *= esz, mem[j] = (s->root + j) % p;
    mdc_status st = binomial_scatter(s, &step, s->root, off, len, "");
    if (!st) st = ring_ag(s, &step, mem, p, off, len, 0, "", "block of rank");
    snprintf(s->note, sizeof s->note, "block j (balanced, %zu or %zu elements) belongs to rank root + j",
             s->count / (size_t)p + (s->count % (size_t)p != 0), s->count / (size_t)p);
    free(off);
    free(mem);
    return st;
}

/* Chain from the root in chunks (collectives/bcast_pipeline.c): chunk k leaves position i-1
 * (rank root+i-1) for position i at step k + i - 1, so up to p-1 chunks move at once. The chunk
 * is the ring chunk (explain --chunk), else 1 MiB, in whole elements. */
static mdc_status b_bcast_pipeline(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    size_t chunk = mdc_i_pipeline_chunk(s->chunk_bytes, esz), m = (n + chunk - 1) / chunk;
    formula(s, p > 1 ? (double)n : 0, "n  (the root sends each chunk once; every other rank receives n and "
            "forwards it, but the last)");
    if (p == 1 || !n) return MDC_OK;
    for (size_t k = 0; k < m; k++) {
        size_t len = k + 1 < m ? chunk : n - k * chunk;
        for (int i = 1; i < p; i++) {
            int step = (int)k + i - 1;
            phase(s, step, "chunks along the chain");
            TRY(add(s, step, imod(s->root + i - 1, p), imod(s->root + i, p), len, MDC_SCHED_STORE, 0, 0,
                    "chunk %zu", k));
        }
    }
    snprintf(s->note, sizeof s->note, "%zu chunk(s) of up to %zu bytes; the chain runs root, root+1, ..., "
             "root+p-1", m, chunk);
    return MDC_OK;
}

static mdc_status b_reduce_binomial(mdc_schedule *s) {
    int step = 0;
    formula(s, s->p > 1 ? (double)(s->count * mdc_dtype_size(s->t)) : 0, "n  (one message per non-root)");
    if (!s->count) return MDC_OK;
    return binomial_reduce(s, &step, s->root, s->count, "");
}

/* Ring reduce-scatter over the ranks in relative order (block j to rank root + j), then a
 * binomial gather of the reduced blocks to the root. */
static mdc_status b_reduce_rs_gather(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    int m = largest_subtree(p);
    formula(s, (double)(p - 1 + m) / p * (double)n, "(p-1+m)/p n  (ring (p-1)/p n, then the gather's "
            "largest subtree, m = %d blocks)", m);
    if (!s->count) return MDC_OK;
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    int *mem = malloc(sizeof(int) * (size_t)p);
    if (!off || !mem) {
        free(off);
        free(mem);
        return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    }
    size_t *len = off + p;
    partition(s->count, p, off, len);
    for (int j = 0; j < p; j++) mem[j] = (s->root + j) % p;
    mdc_status st = ring_rs(s, &step, mem, p, off, len, "");
    if (!st) st = binomial_gather(s, &step, s->root, off, len, 1, "");
    snprintf(s->note, sizeof s->note, "block j (balanced) belongs to rank root + j = (%d + j) mod %d; "
             "the ring runs in that order", s->root, p);
    free(off);
    free(mem);
    return st;
}

static mdc_status rooted_blocks(mdc_schedule *s, int scatter) {
    int p = s->p, step = 0;
    size_t bs = s->count * mdc_dtype_size(s->t);
    int m = largest_subtree(p);
    if (scatter) formula(s, (double)(p - 1) * (double)bs, "(p-1)/p n  (the root sends)");
    else formula(s, (double)m * (double)bs, "m/p n  (m = %d: the root's largest subtree; the root "
                 "receives (p-1)/p n)", m);
    if (!bs) return MDC_OK;
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t *len = off + p;
    for (int i = 0; i < p; i++) off[i] = (size_t)i * bs, len[i] = bs;
    mdc_status st = scatter ? binomial_scatter(s, &step, s->root, off, len, "")
                            : binomial_gather(s, &step, s->root, off, len, 0, "");
    free(off);
    return st;
}
static mdc_status b_gather_binomial(mdc_schedule *s) { return rooted_blocks(s, 0); }
static mdc_status b_scatter_binomial(mdc_schedule *s) { return rooted_blocks(s, 1); }

/* ---- all-to-all and barrier ------------------------------------------------------------------ */

static mdc_status b_alltoall_pairwise(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t);
    size_t all = 0;
    for (int i = 0; i < p; i++) all += s->counts[i];
    formula(s, (double)(p - 1) / p * (double)(all * esz), "(p-1)/p n");
    for (int k = 1; k < p; k++) {
        phase(s, k - 1, "exchange at distance %d", k);
        for (int r = 0; r < p; r++) {
            int dst = (r + k) % p;
            if (!s->counts[dst]) continue;
            TRY(add(s, k - 1, r, dst, s->counts[dst] * esz, MDC_SCHED_STORE, 0, 0, "block for rank %d", dst));
        }
    }
    return MDC_OK;
}

static mdc_status b_alltoall_bruck(mdc_schedule *s) {
    int p = s->p;
    size_t bs = s->count * mdc_dtype_size(s->t), sent = 0;
    for (int d = 1; d < p; d <<= 1)
        for (int j = 1; j < p; j++) sent += (j & d) ? bs : 0;
    formula(s, (double)sent, "n/p x (blocks with bit k set, summed over steps) ~ n/2 lg p");
    if (!bs || p == 1) return MDC_OK;
    int k = 0;
    for (int d = 1; d < p; d <<= 1, k++) {
        int nb = 0;
        for (int j = 1; j < p; j++) nb += (j & d) != 0;
        phase(s, k, "distance %d: blocks at rotated positions j with bit %d set", d, k);
        for (int r = 0; r < p; r++) {
            char txt[64];
            size_t o = 0;
            o += (size_t)snprintf(txt, sizeof txt, "%d block%s, j =", nb, nb > 1 ? "s" : "");
            for (int j = 1; j < p && o < sizeof txt - 8; j++)
                if (j & d) o += (size_t)snprintf(txt + o, sizeof txt - o, " %d", j);
            TRY(add(s, k, r, (r + d) % p, (size_t)nb * bs, MDC_SCHED_STORE, 0, 0, "%s", txt));
        }
    }
    snprintf(s->note, sizeof s->note, "rank r rotates its send blocks: position j holds the block "
             "for rank r + j; after the last step position j holds what rank r - j sent");
    return MDC_OK;
}

static mdc_status b_barrier(mdc_schedule *s) {
    int p = s->p, k = 0;
    formula(s, 0, "0 (empty messages)");
    for (int d = 1; d < p; d <<= 1, k++) {
        phase(s, k, "distance %d", d);
        for (int r = 0; r < p; r++) TRY(add(s, k, r, (r + d) % p, 0, MDC_SCHED_STORE, 0, 0, "empty"));
    }
    return MDC_OK;
}

/* ---- table and entry point ------------------------------------------------------------------ */

typedef struct {
    mdc_coll coll;
    const char *algo;
    mdc_status (*build)(mdc_schedule *);
} builder;

static const builder builders[] = {
    {MDC_COLL_ALLREDUCE, "ring", b_allreduce_ring},
    {MDC_COLL_ALLREDUCE, "recursive_doubling", b_allreduce_rd},
    {MDC_COLL_ALLREDUCE, "rabenseifner", b_allreduce_rabenseifner},
    {MDC_COLL_ALLREDUCE, "reduce_bcast", b_allreduce_reduce_bcast},
    {MDC_COLL_ALLREDUCE, "hierarchical", b_allreduce_hierarchical},
    {MDC_COLL_REDUCE_SCATTER, "ring", b_rs_ring},
    {MDC_COLL_REDUCE_SCATTER, "recursive_halving", b_rs_halving},
    {MDC_COLL_REDUCE_SCATTER, "pairwise", b_rs_pairwise},
    {MDC_COLL_ALLGATHER, "ring", b_ag_ring},
    {MDC_COLL_ALLGATHER, "recursive_doubling", b_ag_rd},
    {MDC_COLL_ALLGATHER, "bruck", b_ag_bruck},
    {MDC_COLL_ALLGATHER, "direct", b_ag_direct},
    {MDC_COLL_BCAST, "binomial", b_bcast_binomial},
    {MDC_COLL_BCAST, "scatter_allgather", b_bcast_scatter_ag},
    {MDC_COLL_BCAST, "pipeline", b_bcast_pipeline},
    {MDC_COLL_REDUCE, "binomial", b_reduce_binomial},
    {MDC_COLL_REDUCE, "rs_gather", b_reduce_rs_gather},
    {MDC_COLL_GATHER, "binomial", b_gather_binomial},
    {MDC_COLL_SCATTER, "binomial", b_scatter_binomial},
    {MDC_COLL_ALLTOALL, "pairwise", b_alltoall_pairwise},
    {MDC_COLL_ALLTOALL, "bruck", b_alltoall_bruck},
    {MDC_COLL_ALLTOALLV, "pairwise", b_alltoall_pairwise},
    {MDC_COLL_BARRIER, "dissemination", b_barrier},
};

mdc_status mdc_schedule_build(mdc_schedule *s, mdc_coll c, const char *algo, int p, size_t count,
                              const size_t *counts, mdc_dtype t, mdc_op op, int root,
                              size_t chunk_bytes, int ranks_per_node) {
    memset(s, 0, sizeof *s);
    if ((unsigned)c >= MDC_COLL_COUNT) return mdc_fail(MDC_ERR_INVALID, "collective %d unknown", (int)c);
    if (p < 1) return mdc_fail(MDC_ERR_INVALID, "schedule: %d ranks (need at least 1)", p);
    if ((unsigned)t >= MDC_DTYPE_END || (unsigned)op >= MDC_OP_COUNT)
        return mdc_fail(MDC_ERR_INVALID, "schedule: bad dtype or op");
    if (t >= MDC_EXACT && op != MDC_SUM && mdc_coll_is_reduction(c))
        return mdc_fail(MDC_ERR_INVALID, "schedule: op %s is not defined on dtype %s (only sum)",
                        mdc_op_name(op), mdc_dtype_name(t));
    if (root < 0 || root >= p) return mdc_fail(MDC_ERR_INVALID, "root %d outside 0..%d", root, p - 1);
    const builder *b = NULL;
    for (size_t i = 0; i < sizeof builders / sizeof builders[0]; i++)
        if (builders[i].coll == c && algo && !strcmp(builders[i].algo, algo)) b = &builders[i];
    if (!b) return mdc_fail(MDC_ERR_INVALID, "%s has no algorithm '%s' (minidc explain %s --list)",
                            mdc_coll_name(c), algo ? algo : "(null)", mdc_coll_name(c));
    s->coll = c;
    snprintf(s->algo, sizeof s->algo, "%s", algo);
    s->p = p;
    s->root = root;
    s->count = count;
    s->t = t;
    s->op = op;
    s->chunk_bytes = chunk_bytes;
    s->ranks_per_node = ranks_per_node > 0 ? ranks_per_node : p;
    s->counts = malloc(sizeof(size_t) * (size_t)p);
    if (!s->counts) return mdc_fail(MDC_ERR_OOM_HOST, "schedule counts");
    for (int i = 0; i < p; i++) s->counts[i] = counts ? counts[i] : count;
    s->vec = c == MDC_COLL_REDUCE_SCATTER ? total_of(s) : c == MDC_COLL_ALLREDUCE || c == MDC_COLL_REDUCE ? count : 0;
    mdc_status st = b->build(s);
    if (st) {
        mdc_schedule_free(s);
        return st;
    }
    size_t total = c == MDC_COLL_ALLTOALL || c == MDC_COLL_BCAST || c == MDC_COLL_GATHER ||
                   c == MDC_COLL_SCATTER || c == MDC_COLL_ALLREDUCE || c == MDC_COLL_REDUCE ? count
                                                                                            : total_of(s);
    if (total == 0 && c != MDC_COLL_BARRIER) { /* every dispatcher returns at once */
        s->nmsgs = 0;
        s->nsteps = 0;
        snprintf(s->note, sizeof s->note, "nothing to move: the call returns at once");
    }
    return MDC_OK;
}
