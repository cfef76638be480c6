/* Shared by the files of context parallelism (ref/parallel/cp/): the component and its registry
 * (cp.c), the layouts and attention pairs every algorithm uses (cp_pairs.c), the algorithms
 * (cp_ring.c, cp_allgather.c, cp_ulysses.c; exact mode's ring and all-gather: cp_exact.c) and
 * the report (report.c). */
#ifndef MINIDC_REF_CP_INTERNAL_H
#define MINIDC_REF_CP_INTERNAL_H

#include <stdlib.h>
#include <string.h>

#include "minidc/cp.h"

typedef struct mdc_i_cp_algo mdc_i_cp_algo;

struct mdc_cp {
    mdc_gpt2_cp model;
    mdc_group *g;
    mdc_device *dev;
    int c, r, T, Tc, L, zigzag, B, Hl, KVl, hs; /* KVl: kv heads (grouped-query attention; Hl for GPT-2) */
    const mdc_i_cp_algo *algo;                  /* the attention algorithm (the registry's entry) */
    /* its forward and backward as installed: the float or exact mode's (mdc_cp_set_exact) */
    mdc_status (*fwd)(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop);
    mdc_status (*bwd)(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv, const float *lse,
                      const mdc_dropout *drop);
    int *pos;      /* Tc global positions of the local ones */
    float *buf[8]; /* device scratch, by algorithm (cp.c, cp_ulysses.c) */
    size_t buf_floats[8];
    double pairs, fbytes, bytes, calls; /* counters since the reset: bytes forward, backward */
    int again;                          /* forwards per layer beyond one (recomputation, the aux loss's count) */
    int layer;                          /* the block whose attention runs now (a planted fault's site) */
    int exact;                          /* exact mode's token block (0: off; ref/parallel/cp/cp_exact.c) */
    mdc_xsum xs;                        /* its exact sums */
    mdc_exact *xe;                      /* dK, dV as accumulators, to send (MDC_MEM_ACTS) */
    size_t xe_n;
    /* exact mode with tp > KV: the own block's dK, dV accumulators summed over the kv head's replicas */
    mdc_status (*kv_sum)(void *ctx, mdc_exact *acc, size_t n);
    void *kv_ctx;
    mdc_dtype act;  /* what the key blocks move: MDC_F32, or a mixed-precision run's 16-bit dtype */
    uint16_t *half; /* its staging (host): the packed blocks */
    size_t half_n;
};

/* A mixed-precision run's key blocks hold 16-bit values: ring and all-gather move them at 2 bytes an
 * element (the same values); their dK, dV sums stay fp32. */
static inline int mdc_i_cp_half(const mdc_cp *cp) { return cp->act != MDC_F32; }
static inline double mdc_i_cp_width(const mdc_cp *cp) { return mdc_i_cp_half(cp) ? 2 : 4; }
/* the staging's first n halves (grown as needed), or NULL */
uint16_t *mdc_i_cp_staging(mdc_cp *cp, size_t n);

/* A row of qkv: Hl query heads, then KVl key and KVl value heads, hs channels each; a key block's
 * row: the k and v heads. */
static inline size_t mdc_i_cp_qw(const mdc_cp *cp) { return (size_t)cp->Hl * cp->hs; }
static inline size_t mdc_i_cp_kw(const mdc_cp *cp) { return (size_t)cp->KVl * cp->hs; }
static inline size_t mdc_i_cp_row(const mdc_cp *cp) { return mdc_i_cp_qw(cp) + 2 * mdc_i_cp_kw(cp); }

enum { CP_TAG_KV = 1, CP_TAG_KVB = 1 + 256, CP_TAG_DKV = 1 + 512, CP_TAG_KV2 = 1 + 768 };

/* An attention algorithm over the cp group, one registry entry per file (as collectives/' are):
 * its name (--cp-algo), its restriction, its device buffers, its forward and backward (and exact
 * mode's), and the formulas its report prints. Every call adds its visible pairs, bytes and
 * calls to the component's counters. */
struct mdc_i_cp_algo {
    const char *name;
    int gathers;     /* every rank's key blocks at once (all-gather), else they travel the ring */
    int whole_heads; /* each rank attends whole sequences of some heads: balanced on any layout */
    mdc_status (*check)(int c, int T, int Hl, int KVl); /* NULL: no restriction beyond the layout's */
    void (*sizes)(const mdc_cp *cp, size_t floats[8]);
    mdc_status (*forward)(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop);
    mdc_status (*backward)(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                           const float *lse, const mdc_dropout *drop);
    mdc_status (*exact_forward)(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop);
    mdc_status (*exact_backward)(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                 const float *lse, const mdc_dropout *drop);
    double (*pairs)(const mdc_cp *cp, int q); /* visible (query, key) pairs of rank q per layer, micro-batch */
    double (*bytes)(const mdc_cp *cp);        /* bytes a rank sends per layer, forward and backward */
};
extern const mdc_i_cp_algo mdc_i_cp_ring, mdc_i_cp_allgather, mdc_i_cp_ulysses;

/* The chunks rank q holds (1 or 2, ascending), their chunk indices in out. */
int mdc_i_cp_chunks(const mdc_cp *cp, int q, int out[2]);
/* The pair of this rank's a-th query chunk and the b-th chunk of the key block of rank src
 * (kv NULL: the rows alone), and the key blocks' packing (ref/parallel/cp/cp_pairs.c). */
mdc_attn_pair mdc_i_cp_pair(const mdc_cp *cp, int a, int src, int b, const float *qkv, const float *kv, float *out,
                            float *m, float *l, const mdc_dropout *drop);
void mdc_i_cp_pack_kv(mdc_cp *cp, float *kv, const float *qkv);
void mdc_i_cp_add_dkv(mdc_cp *cp, float *dqkv, const float *dkv);
/* The float passes of ring and all-gather attention (cp_pairs.c): the rows' online-softmax
 * state begun and finished, D = rowsum(dO O), every local query chunk against rank src's key
 * block forward (one kernel), and backward (dq into dqkv, the block's dK, dV into dkv). */
void mdc_i_cp_begin(mdc_cp *cp, const float *qkv, float *out);
void mdc_i_cp_finish(mdc_cp *cp, const float *qkv, float *out, float *lse);
void mdc_i_cp_rowdot(mdc_cp *cp, const float *qkv, const float *out, const float *dout);
void mdc_i_cp_attend(mdc_cp *cp, int src, const float *qkv, const float *kv, float *out, const mdc_dropout *drop);
void mdc_i_cp_attend_back(mdc_cp *cp, int src, const float *qkv, const float *kv, float *dqkv, float *dkv,
                          const float *dout, const float *out, const float *lse, const mdc_dropout *drop);
/* The visible pairs of rank q's chunks of the layout (ring and all-gather). */
double mdc_i_cp_layout_pairs(const mdc_cp *cp, int q);
/* Exact mode (ref/parallel/cp/cp_exact.c): ring and all-gather attention with the canonical blocks. */
mdc_status mdc_i_cp_exact_forward(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop);
mdc_status mdc_i_cp_exact_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                   const float *lse, const mdc_dropout *drop);
/* At least n exact sums in cp->xs, cleared, and ne accumulators in cp->xe. */
mdc_status mdc_i_cp_xbuf(mdc_cp *cp, size_t n, size_t ne);

#endif
