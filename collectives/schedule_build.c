/* The schedule builders' shared parts (schedule_build.h) and mdc_schedule_build, which checks the
 * call and runs the builder of the algorithm's registry entry (coll_registry.h). The builders of
 * the algorithms are in the algorithms' own files. Nothing here calls MPI. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule_build.h"

/* ---- message helpers ----------------------------------------------------------------------- */

mdc_status mdc_i_sched_add(mdc_schedule *s, int step, int src, int dst, size_t bytes, int reduce, size_t off,
                           size_t len, const char *fmt, ...) {
    char what[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mdc_schedule_add(s, step, src, dst, bytes, reduce, off, len, what);
}

void mdc_i_sched_phase(mdc_schedule *s, int step, const char *fmt, ...) {
    if (mdc_schedule_step(s, step)) return; /* out of memory: the step's mdc_schedule_add fails too */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->phase[step], sizeof s->phase[step], fmt, ap);
    va_end(ap);
}

void mdc_i_sched_formula(mdc_schedule *s, double value, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->bytes_formula, sizeof s->bytes_formula, fmt, ap);
    va_end(ap);
    s->bytes_formula_value = value;
}

size_t mdc_i_sched_total(const mdc_schedule *s) {
    size_t t = 0;
    for (int i = 0; i < s->p; i++) t += s->counts[i];
    return t;
}

mdc_status mdc_i_sched_offsets(const mdc_schedule *s, size_t unit, int extra, size_t **off) {
    *off = malloc(sizeof(size_t) * (size_t)(s->p + extra));
    if (!*off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t o = 0;
    for (int i = 0; i < s->p; i++) (*off)[i] = o * unit, o += s->counts[i];
    return MDC_OK;
}

mdc_status mdc_i_sched_root_blocks(const mdc_schedule *s, size_t **off, int **mem) {
    int p = s->p;
    *off = malloc(2 * sizeof(size_t) * (size_t)p);
    *mem = malloc(sizeof(int) * (size_t)p);
    if (!*off || !*mem) {
        free(*off);
        free(*mem);
        return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    }
    mdc_i_partition(s->count, p, *off, *off + p);
    for (int j = 0; j < p; j++) (*mem)[j] = (s->root + j) % p;
    return MDC_OK;
}

/* Blocks in the largest subtree a binomial tree's root receives from one child: the child at
 * distance d brings min(d, p - d) blocks. */
int mdc_i_largest_subtree(int p) {
    int m = 0;
    for (int d = 1; d < p; d *= 2) {
        int t = p - d < d ? p - d : d;
        if (t > m) m = t;
    }
    return m;
}

/* "block of rank a" or "blocks of ranks a..b" (b may wrap below a). */
const char *mdc_i_sched_blocks_text(char *buf, size_t len, int a, int b) {
    if (a == b) snprintf(buf, len, "block of rank %d", a);
    else snprintf(buf, len, "blocks of ranks %d..%d", a, b);
    return buf;
}

/* ---- shared patterns (as in coll_internal.h) ------------------------------------------------ */

/* Ring reduce-scatter over members mem[0..n) (NULL = the group), blocks off/len in elements:
 * step k: member pos sends block (pos - k - 1) to pos + 1, which reduces incoming OP own.
 * Empty blocks are not sent. Returns the next free step in *step. */
mdc_status mdc_i_sched_ring_rs(mdc_schedule *s, int *step, const int *mem, int n, const size_t *off, const size_t *len,
                               const char *label) {
    size_t esz = mdc_dtype_size(s->t);
    for (int k = 0; k < n - 1; k++) {
        mdc_i_sched_phase(s, *step + k, "%sreduce-scatter %d/%d", label, k + 1, n - 1);
        for (int pos = 0; pos < n; pos++) {
            int b = mdc_i_mod(pos - k - 1, n);
            if (!len[b]) continue;
            int src = mem ? mem[pos] : pos, dst = mem ? mem[(pos + 1) % n] : (pos + 1) % n;
            MDC_I_TRY(mdc_i_sched_add(s, *step + k, src, dst, len[b] * esz, MDC_SCHED_IN_OP_OWN, off[b], len[b],
                                      "%s %d [%zu,%zu)", s->coll == MDC_COLL_ALLREDUCE ? "chunk" : "block", b, off[b],
                                      off[b] + len[b]));
        }
    }
    *step += n > 1 ? n - 1 : 0;
    return MDC_OK;
}

/* Ring allgather: step k: member pos sends block (pos - k) to pos + 1. Blocks in elements
 * (el = 1: off/len are elements of the logical vector, carried along) or bytes (el = 0). */
mdc_status mdc_i_sched_ring_ag(mdc_schedule *s, int *step, const int *mem, int n, const size_t *off, const size_t *len,
                               int el, const char *label, const char *bname) {
    size_t esz = el ? mdc_dtype_size(s->t) : 1;
    for (int k = 0; k < n - 1; k++) {
        mdc_i_sched_phase(s, *step + k, "%sallgather %d/%d", label, k + 1, n - 1);
        for (int pos = 0; pos < n; pos++) {
            int b = mdc_i_mod(pos - k, n);
            if (!len[b]) continue;
            int src = mem ? mem[pos] : pos, dst = mem ? mem[(pos + 1) % n] : (pos + 1) % n;
            if (el)
                MDC_I_TRY(mdc_i_sched_add(s, *step + k, src, dst, len[b] * esz, MDC_SCHED_STORE, off[b], len[b],
                                          "%s %d [%zu,%zu)", bname, b, off[b], off[b] + len[b]));
            else
                MDC_I_TRY(mdc_i_sched_add(s, *step + k, src, dst, len[b], MDC_SCHED_STORE, 0, 0, "%s %d", bname,
                                          mem ? mem[b] : b));
        }
    }
    *step += n > 1 ? n - 1 : 0;
    return MDC_OK;
}

/* Binomial broadcast of `bytes` from root (rel = rank - root): round k uses distance
 * top/2^(k+1); the root sends largest subtree first. el: the message carries elements
 * [0, len) of the logical vector (allreduce reduce_bcast). */
mdc_status mdc_i_sched_binomial_bcast(mdc_schedule *s, int *step, int root, size_t bytes, size_t len,
                                      const char *label) {
    int p = s->p, top = mdc_i_pow2_floor(p);
    if (top < p) top *= 2;
    int rounds = mdc_i_lg_ceil(p);
    for (int k = 0; k < rounds; k++) {
        int d = top >> (k + 1);
        mdc_i_sched_phase(s, *step + k, "%sbroadcast, distance %d", label, d);
        for (int rel = 0; rel < p; rel++) {
            int mask = rel ? (rel & -rel) : top;
            if (d >= mask || rel + d >= p) continue;
            MDC_I_TRY(mdc_i_sched_add(s, *step + k, mdc_i_mod(rel + root, p), mdc_i_mod(rel + d + root, p), bytes,
                                      MDC_SCHED_STORE, 0, len, "%s", len ? "the result" : "the whole buffer"));
        }
    }
    *step += rounds;
    return MDC_OK;
}

/* Binomial reduce to root of `count` elements: at distance d = 2^k, rel with bit d sends its
 * partial to rel - d, which computes own OP child. */
mdc_status mdc_i_sched_binomial_reduce(mdc_schedule *s, int *step, int root, size_t count, const char *label) {
    int p = s->p, rounds = mdc_i_lg_ceil(p);
    size_t esz = mdc_dtype_size(s->t);
    for (int k = 0; k < rounds; k++) {
        int d = 1 << k;
        mdc_i_sched_phase(s, *step + k, "%sreduce, distance %d", label, d);
        for (int rel = 0; rel < p; rel++) {
            if ((rel & (d - 1)) || !(rel & d)) continue; /* sends at the round of its low bit */
            int last = mdc_i_mod((rel + d < p ? rel + d : p) - 1 + root, p);
            int from = mdc_i_mod(rel + root, p), to = mdc_i_mod(rel - d + root, p);
            if (last == from)
                MDC_I_TRY(
                    mdc_i_sched_add(s, *step + k, from, to, count * esz, MDC_SCHED_OWN_OP_IN, 0, count, "x%d", last));
            else
                MDC_I_TRY(mdc_i_sched_add(s, *step + k, from, to, count * esz, MDC_SCHED_OWN_OP_IN, 0, count,
                                          "partial of ranks %d..%d", from, last));
        }
    }
    *step += rounds;
    return MDC_OK;
}

/* Binomial scatter / gather of blocks off/len (bytes, in relative order) on the tree rooted
 * at root; subtree of rel = [rel, rel + lowbit(rel)) clipped to p. Empty messages skipped. */
static size_t span(const size_t *off, const size_t *len, int a, int b) { return off[b - 1] + len[b - 1] - off[a]; }

mdc_status mdc_i_sched_binomial_scatter(mdc_schedule *s, int *step, int root, const size_t *off, const size_t *len,
                                        const char *label) {
    char txt[48];
    int p = s->p, top = mdc_i_pow2_floor(p);
    if (top < p) top *= 2;
    int rounds = mdc_i_lg_ceil(p);
    for (int k = 0; k < rounds; k++) {
        int d = top >> (k + 1);
        mdc_i_sched_phase(s, *step + k, "%sscatter, distance %d", label, d);
        for (int rel = 0; rel < p; rel++) {
            int mask = rel ? (rel & -rel) : top, child = rel + d;
            if (d >= mask || child >= p) continue;
            int end = child + d < p ? child + d : p;
            size_t b = span(off, len, child, end);
            if (!b) continue;
            int to = mdc_i_mod(child + root, p);
            MDC_I_TRY(mdc_i_sched_add(s, *step + k, mdc_i_mod(rel + root, p), to, b, MDC_SCHED_STORE, 0, 0, "%s",
                                      mdc_i_sched_blocks_text(txt, sizeof txt, to, mdc_i_mod(end - 1 + root, p))));
        }
    }
    *step += rounds;
    return MDC_OK;
}

/* el: off/len are elements of the logical vector (carried along; bytes = elements x size). */
mdc_status mdc_i_sched_binomial_gather(mdc_schedule *s, int *step, int root, const size_t *off, const size_t *len,
                                       int el, const char *label) {
    char txt[48];
    int p = s->p, rounds = mdc_i_lg_ceil(p);
    size_t esz = el ? mdc_dtype_size(s->t) : 1;
    for (int k = 0; k < rounds; k++) {
        int d = 1 << k;
        mdc_i_sched_phase(s, *step + k, "%sgather, distance %d", label, d);
        for (int rel = 0; rel < p; rel++) {
            if ((rel & (d - 1)) || !(rel & d)) continue;
            int end = rel + d < p ? rel + d : p;
            size_t b = span(off, len, rel, end);
            if (!b) continue;
            int from = mdc_i_mod(rel + root, p);
            MDC_I_TRY(mdc_i_sched_add(s, *step + k, from, mdc_i_mod(rel - d + root, p), b * esz, MDC_SCHED_STORE,
                                      el ? off[rel] : 0, el ? b : 0, "%s",
                                      mdc_i_sched_blocks_text(txt, sizeof txt, from, mdc_i_mod(end - 1 + root, p))));
        }
    }
    *step += rounds;
    return MDC_OK;
}

/* p blocks of s->count elements, block j at relative rank j (gather_binomial.c, scatter_binomial.c). */
mdc_status mdc_i_sched_binomial_blocks(mdc_schedule *s, int scatter) {
    int p = s->p, step = 0;
    size_t bs = s->count * mdc_dtype_size(s->t);
    if (!bs) return MDC_OK;
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t *len = off + p;
    for (int i = 0; i < p; i++) off[i] = (size_t)i * bs, len[i] = bs;
    mdc_status st = scatter ? mdc_i_sched_binomial_scatter(s, &step, s->root, off, len, "")
                            : mdc_i_sched_binomial_gather(s, &step, s->root, off, len, 0, "");
    free(off);
    return st;
}

/* Recursive halving among p2 new ranks (elements; bnd has p2 + 1 entries): distance p2/2 ... 1;
 * each keeps the half holding its own range, sends the other half, reduces lower OP higher. */
mdc_status mdc_i_sched_halving_rs(mdc_schedule *s, int *step, int rem, int p2, const size_t *bnd, const char *label) {
    size_t esz = mdc_dtype_size(s->t);
    int k = 0;
    for (int mask = p2 / 2; mask >= 1; mask >>= 1, k++) {
        mdc_i_sched_phase(s, *step + k, "%sreduce-scatter (halving), distance %d", label, mask);
        for (int nr = 0; nr < p2; nr++) {
            int lo = nr & ~(2 * mask - 1), pnr = nr ^ mask;
            int give = nr < lo + mask ? lo + mask : lo;
            size_t g0 = bnd[give], gn = bnd[give + mask] - g0;
            if (!gn) continue;
            MDC_I_TRY(mdc_i_sched_add(s, *step + k, mdc_i_oldrank(nr, rem), mdc_i_oldrank(pnr, rem), gn * esz,
                                      pnr < nr ? MDC_SCHED_OWN_OP_IN : MDC_SCHED_IN_OP_OWN, g0, gn, "[%zu,%zu)", g0,
                                      g0 + gn));
        }
    }
    *step += k;
    return MDC_OK;
}

/* Recursive doubling allgather among p2 new ranks: distance 1 ... p2/2; exchange the range
 * held. bnd: bytes (el = 0) or elements of the logical vector (el = 1). */
mdc_status mdc_i_sched_doubling_ag(mdc_schedule *s, int *step, int rem, int p2, const size_t *bnd, int el,
                                   const char *label) {
    size_t esz = el ? mdc_dtype_size(s->t) : 1;
    int k = 0;
    for (int mask = 1; mask < p2; mask <<= 1, k++) {
        mdc_i_sched_phase(s, *step + k, "%sallgather (doubling), distance %d", label, mask);
        for (int nr = 0; nr < p2; nr++) {
            int mylo = nr & ~(mask - 1);
            size_t b0 = bnd[mylo], bn = bnd[mylo + mask] - b0;
            if (!bn) continue;
            int from = mdc_i_oldrank(nr, rem), to = mdc_i_oldrank(nr ^ mask, rem);
            if (el)
                MDC_I_TRY(mdc_i_sched_add(s, *step + k, from, to, bn * esz, MDC_SCHED_STORE, b0, bn, "[%zu,%zu)", b0,
                                          b0 + bn));
            else
                MDC_I_TRY(mdc_i_sched_add(s, *step + k, from, to, bn, MDC_SCHED_STORE, 0, 0, "blocks of ranks %d..%d",
                                          mdc_i_first_old(mylo, rem), mdc_i_first_old(mylo + mask, rem) - 1));
        }
    }
    *step += k;
    return MDC_OK;
}

/* The fold of a non-power of two (coll_internal.h): in, even ranks 2i < 2 rem hand their vector
 * to 2i+1 (incoming OP own); out, the odd ones return the result. */
mdc_status mdc_i_sched_fold_in(mdc_schedule *s, int *step, int rem, size_t n_el) {
    size_t esz = mdc_dtype_size(s->t);
    if (!rem) return MDC_OK;
    mdc_i_sched_phase(s, *step, "fold: even ranks below 2 x %d hand their vector to the odd one", rem);
    for (int i = 0; i < rem; i++)
        MDC_I_TRY(
            mdc_i_sched_add(s, *step, 2 * i, 2 * i + 1, n_el * esz, MDC_SCHED_IN_OP_OWN, 0, n_el, "the whole vector"));
    (*step)++;
    return MDC_OK;
}

mdc_status mdc_i_sched_fold_out(mdc_schedule *s, int *step, int rem, size_t n_el) {
    size_t esz = mdc_dtype_size(s->t);
    if (!rem) return MDC_OK;
    mdc_i_sched_phase(s, *step, "unfold: odd ranks return the result");
    for (int i = 0; i < rem; i++)
        MDC_I_TRY(mdc_i_sched_add(s, *step, 2 * i + 1, 2 * i, n_el * esz, MDC_SCHED_STORE, 0, n_el, "the result"));
    (*step)++;
    return MDC_OK;
}

/* ---- entry point ---------------------------------------------------------------------------- */

mdc_status mdc_schedule_build(mdc_schedule *s, mdc_coll c, const char *algo, int p, size_t count, const size_t *counts,
                              mdc_dtype t, mdc_op op, int root, size_t chunk_bytes, int ranks_per_node) {
    memset(s, 0, sizeof *s);
    if ((unsigned)c >= MDC_COLL_COUNT) return mdc_fail(MDC_ERR_INVALID, "collective %d unknown", (int)c);
    if (p < 1) return mdc_fail(MDC_ERR_INVALID, "schedule: %d ranks (need at least 1)", p);
    if ((unsigned)t >= MDC_DTYPE_END || (unsigned)op >= MDC_OP_COUNT)
        return mdc_fail(MDC_ERR_INVALID, "schedule: bad dtype or op");
    if (t >= MDC_EXACT && op != MDC_SUM && mdc_coll_is_reduction(c))
        return mdc_fail(MDC_ERR_INVALID, "schedule: op %s is not defined on dtype %s (only sum)", mdc_op_name(op),
                        mdc_dtype_name(t));
    if (root < 0 || root >= p) return mdc_fail(MDC_ERR_INVALID, "root %d outside 0..%d", root, p - 1);
    const mdc_i_algo *b = mdc_i_algo_named(c, algo);
    if (!b)
        return mdc_fail(MDC_ERR_INVALID, "%s has no algorithm '%s' (minidc explain %s --list)", mdc_coll_name(c),
                        algo ? algo : "(null)", mdc_coll_name(c));
    if (!b->schedule)
        return mdc_fail(MDC_ERR_INVALID, "%s %s was added at run time and has no schedule builder (trace a run of it)",
                        mdc_coll_name(c), algo);
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
    s->vec = c == MDC_COLL_REDUCE_SCATTER                      ? mdc_i_sched_total(s)
             : c == MDC_COLL_ALLREDUCE || c == MDC_COLL_REDUCE ? count
                                                               : 0;
    mdc_status st = b->schedule(s);
    if (st) {
        mdc_schedule_free(s);
        return st;
    }
    size_t total = c == MDC_COLL_ALLTOALL || c == MDC_COLL_BCAST || c == MDC_COLL_GATHER || c == MDC_COLL_SCATTER ||
                           c == MDC_COLL_ALLREDUCE || c == MDC_COLL_REDUCE
                       ? count
                       : mdc_i_sched_total(s);
    if (total == 0 && c != MDC_COLL_BARRIER) { /* every dispatcher returns at once */
        s->nmsgs = 0;
        s->nsteps = 0;
        snprintf(s->note, sizeof s->note, "nothing to move: the call returns at once");
    }
    return MDC_OK;
}
