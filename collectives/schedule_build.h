/* For writing schedule builders (the `schedule` of an algorithm's descriptor, coll_registry.h):
 * message helpers, and the message patterns several algorithms share, each the schedule of the
 * coll_internal.h helper of the same name (mdc_i_ring_rs, mdc_i_binomial_gather, ...): the same
 * partition, the same skipped empty messages, the same per-rank order of posting.
 * tests/mesh/test_explain.c compares every builder with the real code's traced messages, so a change
 * to an algorithm that its builder does not follow fails `make check`. Everything that adds
 * messages returns mdc_schedule_add's failures (MDC_ERR_OOM_HOST, MDC_ERR_INVALID past
 * MDC_SCHEDULE_MAX_MSGS). Not installed. */
#ifndef MINIDC_SCHEDULE_BUILD_H
#define MINIDC_SCHEDULE_BUILD_H

#include <stdio.h>

#include "coll_registry.h"

/* Returns from the calling function when x fails. */
#define MDC_I_TRY(x)                 \
    do {                             \
        mdc_status try_st_ = (x);    \
        if (try_st_) return try_st_; \
    } while (0)

/* mdc_schedule_add with `what` formatted. */
mdc_status mdc_i_sched_add(mdc_schedule *s, int step, int src, int dst, size_t bytes, int reduce, size_t off,
                           size_t len, const char *fmt, ...) __attribute__((format(printf, 9, 10)));
/* Labels step `step` (creating it); out of memory leaves it unlabelled, and the step's
 * mdc_i_sched_add then fails. */
void mdc_i_sched_phase(mdc_schedule *s, int step, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sets the bytes-sent formula (text) and its value for this call (the busiest rank). */
void mdc_i_sched_formula(mdc_schedule *s, double value, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

size_t mdc_i_sched_total(const mdc_schedule *s); /* the sum of s->counts */
/* *off = p + extra entries, malloc'ed (the caller frees them): off[i] = unit x the elements of
 * s->counts before rank i; the extra ones are the caller's. MDC_ERR_OOM_HOST on failure. */
mdc_status mdc_i_sched_offsets(const mdc_schedule *s, size_t unit, int extra, size_t **off);
/* The p balanced blocks (mdc_i_partition) of s->count elements that a rooted algorithm gives
 * to rank root + j: *off = 2p entries (offsets, then the lengths at *off + p, in elements),
 * *mem = the ranks root + j; both malloc'ed (the caller frees them), or MDC_ERR_OOM_HOST. */
mdc_status mdc_i_sched_root_blocks(const mdc_schedule *s, size_t **off, int **mem);
/* Blocks in the largest subtree a binomial tree's root receives from one child. */
int mdc_i_largest_subtree(int p);
/* "block of rank a" or "blocks of ranks a..b" (b may wrap below a) into buf; returns buf. */
const char *mdc_i_sched_blocks_text(char *buf, size_t len, int a, int b);

/* The patterns. `step` is the first step to use and comes back as the next free one; `label`
 * prefixes each step's label; `mem` (NULL: the group in order) lists the members taking part.
 * Blocks are elements of the logical vector, except where `el` says bytes (el = 0). */

/* Ring reduce-scatter: step k: member pos sends block pos-k-1 to pos+1 (incoming OP own). */
mdc_status mdc_i_sched_ring_rs(mdc_schedule *s, int *step, const int *mem, int n, const size_t *off, const size_t *len,
                               const char *label);
/* Ring allgather: step k: member pos sends block pos-k to pos+1; bname names the blocks. */
mdc_status mdc_i_sched_ring_ag(mdc_schedule *s, int *step, const int *mem, int n, const size_t *off, const size_t *len,
                               int el, const char *label, const char *bname);
/* Binomial broadcast of `bytes` from root, largest subtree first; len > 0: the message carries
 * elements [0, len) of the logical vector (the result of a reduction). */
mdc_status mdc_i_sched_binomial_bcast(mdc_schedule *s, int *step, int root, size_t bytes, size_t len,
                                      const char *label);
/* Binomial reduce of `count` elements to root (own OP child). */
mdc_status mdc_i_sched_binomial_reduce(mdc_schedule *s, int *step, int root, size_t count, const char *label);
/* Binomial scatter / gather of blocks off/len in relative rank order (bytes; gather: el = 1 for
 * elements of the logical vector). */
mdc_status mdc_i_sched_binomial_scatter(mdc_schedule *s, int *step, int root, const size_t *off, const size_t *len,
                                        const char *label);
mdc_status mdc_i_sched_binomial_gather(mdc_schedule *s, int *step, int root, const size_t *off, const size_t *len,
                                       int el, const char *label);
/* The binomial scatter (scatter = 1) or gather of p blocks of s->count elements at s->root. */
mdc_status mdc_i_sched_binomial_blocks(mdc_schedule *s, int scatter);
/* Recursive halving / doubling among the p2 new ranks of a fold with rem pairs (bnd: p2 + 1
 * boundaries; halving in elements, doubling in elements (el = 1) or bytes). */
mdc_status mdc_i_sched_halving_rs(mdc_schedule *s, int *step, int rem, int p2, const size_t *bnd, const char *label);
mdc_status mdc_i_sched_doubling_ag(mdc_schedule *s, int *step, int rem, int p2, const size_t *bnd, int el,
                                   const char *label);
/* The fold of rem pairs: even ranks 2i hand their n_el elements to 2i+1 (fold_in, reduced), and
 * get the result back (fold_out). No step when rem is 0. */
mdc_status mdc_i_sched_fold_in(mdc_schedule *s, int *step, int rem, size_t n_el);
mdc_status mdc_i_sched_fold_out(mdc_schedule *s, int *step, int rem, size_t n_el);

#endif
