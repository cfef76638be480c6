/* Shared by ref/parallel/cp/cp.c (layouts, ring, all-gather, the report) and ref/parallel/cp/cp_ulysses.c. */
#ifndef MINIDC_REF_CP_INTERNAL_H
#define MINIDC_REF_CP_INTERNAL_H

#include <stdlib.h>
#include <string.h>

#include "minidc/cp.h"

enum { CP_RING, CP_ALLGATHER, CP_ULYSSES };

struct mdc_cp {
    mdc_gpt2_cp model;
    mdc_group *g;
    mdc_device *dev;
    int c, r, T, Tc, L, zigzag, algo, B, Hl, hs;
    int *pos;                 /* Tc global positions of the local ones */
    float *buf[8];            /* device scratch, by algorithm (cp.c, cp_ulysses.c) */
    size_t buf_floats[8];
    double pairs, bytes, calls; /* counters since the reset */
    int exact;                /* exact mode's token block (0: off; ref/parallel/cp/cp_exact.c) */
    mdc_xsum xs;              /* its exact sums */
    mdc_exact *xe;            /* dK, dV as accumulators, to send (MDC_MEM_ACTS) */
    size_t xe_n;
};

enum { CP_TAG_KV = 1, CP_TAG_KVB = 1 + 256, CP_TAG_DKV = 1 + 512, CP_TAG_KV2 = 1 + 768 };

/* The chunks rank q holds (1 or 2, ascending), their chunk indices in out. */
int mdc_i_cp_chunks(const mdc_cp *cp, int q, int out[2]);
/* The pair of this rank's a-th query chunk and the b-th chunk of the key block of rank src
 * (kv NULL: the rows alone), and the key blocks' packing (ref/parallel/cp/cp.c). */
mdc_attn_pair mdc_i_cp_pair(const mdc_cp *cp, int a, int src, int b, const float *qkv, const float *kv, float *out,
                            float *m, float *l, const mdc_dropout *drop);
void mdc_i_cp_pack_kv(mdc_cp *cp, float *kv, const float *qkv);
void mdc_i_cp_add_dkv(mdc_cp *cp, float *dqkv, const float *dkv);
/* Exact mode (ref/parallel/cp/cp_exact.c): ring and all-gather attention with the canonical blocks. */
mdc_status mdc_i_cp_exact_forward(mdc_cp *cp, float *out, float *lse, const float *qkv, const mdc_dropout *drop);
mdc_status mdc_i_cp_exact_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                   const float *lse, const mdc_dropout *drop);
/* At least n exact sums in cp->xs, cleared, and ne accumulators in cp->xe. */
mdc_status mdc_i_cp_xbuf(mdc_cp *cp, size_t n, size_t ne);
/* Ulysses (ref/parallel/cp/cp_ulysses.c): the scratch it needs (floats per buffer), and the two passes. */
void mdc_i_ulysses_sizes(const mdc_cp *cp, size_t floats[8]);
mdc_status mdc_i_ulysses_forward(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop);
mdc_status mdc_i_ulysses_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                  const float *lse, const mdc_dropout *drop);

#endif
