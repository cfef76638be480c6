/* Shared by ref/parallel/dp/dp.c (the scheme object, buckets, DDP) and ref/parallel/dp/zero.c (shards, ZeRO stages). */
#ifndef MINIDC_REF_DP_INTERNAL_H
#define MINIDC_REF_DP_INTERNAL_H

#include "minidc/device_stream.h"
#include "minidc/dp.h"
#include "minidc/kernels.h"

typedef struct {
    int lo, hi;   /* units lo..hi (ascending) */
    size_t block; /* floats per rank: sum of s_u over the units */
} dp_bucket;

/* How the model's gradient sink reaches the group, chosen by its element type when the
 * component is attached: floats bucket by bucket as the backward completes them (dp.c, zero.c),
 * a sink of sums once at the step's end (dp_exact.c). */
typedef struct {
    int in_backward; /* buckets reduce during the backward (ZeRO-2/3 into live full gradients) */
    mdc_status (*finish)(mdc_dp *dp);
    /* this rank's share of the squared norm added into *slot (mdc_gpt2_scalar_dtype) */
    void (*sumsq)(mdc_dp *dp, const char *skip, void *slot);
} dp_reducer;
extern const dp_reducer mdc_dp_i_floats, mdc_dp_i_sums;

struct mdc_dp {
    mdc_dp_config dc;
    mdc_group *g;
    int N, r;
    mdc_device *dev;
    mdc_gpt2 *m;
    mdc_gpt2_config cfg;
    int nunits, ntensors;
    size_t psi, S;
    size_t *uoff, *ucount, *us, *shoff; /* unit offset and size; piece s_u; piece's shard offset */
    mdc_param_tensor *tensors;
    int nbuckets, *unit_bucket;
    dp_bucket *b;
    float *bucket_buf[2]; /* double-buffered bucket (MDC_MEM_COMM), N x max block floats */
    int next_buf;
    float *shard_p, *shard_g, *shard_m, *shard_v; /* ZeRO shards (which exist depends on stage) */
    float **gathered; /* ZeRO-3: per unit, the gathered buffer while resident (MDC_MEM_PARAMS) */
    char *prefetched; /* ZeRO-3 with prefetch: per unit, gathered on the comm stream, not joined */
    void **live;      /* ZeRO-2/3: per unit, the full gradient's residency while live (GRADS) */
    int micro, t;
    int owns_model; /* mdc_dp_create's model (freed with the component) */
    mdc_dev_stream stream;
    mdc_dev_stream gather_stream; /* ZeRO-3 prefetch: its own stream (as FSDP's all-gather
                                   * stream), so using a unit never waits for a reduction */
    double step_bytes;            /* sent in the last step */
    const dp_reducer *red;        /* by the gradient sink's element type */
    int defer;                    /* a pipeline stage: micro-batches interleave, so every bucket reduces at finish */
    size_t maxblock;              /* the largest bucket's block */
    double *xbuf;                 /* exact mode's bucket: N x maxblock exact sums as doubles (MDC_MEM_COMM) */
    size_t exact_marked;          /* exact mode, last step: elements that needed accumulators */
    double exact_bytes_want;      /* and the bytes its reductions send by mdc_exact_reduce_bytes */
    size_t mem_after[3];
    mdc_dtype grad_dtype; /* the gradients' reductions: MDC_F32, or MDC_BF16 (the model's bf16 gradients) */
    /* mixed precision: half, the model's 16-bit dtype (MDC_BF16, MDC_F16; else MDC_F32); ZeRO-1/2 keep
     * the fp32 master in shard_p (master 1) and gather the 16-bit parameters; ZeRO-3 its 16-bit
     * shard in shard16 (charged 2 bytes), which its gathers move */
    mdc_dtype half;
    int master;
    float *shard16;
};

/* 2 for the bf16 gradients, else 4 */
static inline size_t mdc_dp_i_gwidth(const mdc_dp *dp) { return dp->grad_dtype == MDC_BF16 ? 2 : 4; }

/* ---- ref/parallel/dp/zero.c ---- */
/* Rank q's piece of unit u: unit-local [q s_u, min((q+1) s_u, n_u)); returns its length. */
size_t mdc_dp_i_piece(const mdc_dp *dp, int u, int q, size_t *lo);
/* Packs this rank's rows of bucket b from the full-layout vector `full` into block q of buf
 * (only_q >= 0: that block only), zero padding. */
void mdc_dp_i_pack(const mdc_dp *dp, const dp_bucket *b, float *buf, const float *full, int only_q);
/* Unpacks blocks of buf (all, or only_q) into the full layout (padding dropped). */
void mdc_dp_i_unpack(const mdc_dp *dp, const dp_bucket *b, const float *buf, float *full, int only_q);
/* ZeRO gradient reduction of one bucket (in the comm stream); ZeRO-3 gather/release. */
mdc_status mdc_zero_i_reduce_bucket(mdc_dp *dp, const dp_bucket *b, float *buf);
mdc_status mdc_zero_i_gather(mdc_dp *dp, int u);
void mdc_zero_i_release(mdc_dp *dp, int u);
mdc_status mdc_zero_i_live(mdc_dp *dp, int u);
/* Sum of squares of this rank's gradient shard (double; tensors with skip[i] set left out,
 * skip may be NULL), and the sharded AdamW + allgather. */
void mdc_zero_i_sumsq(mdc_dp *dp, const char *skip, double *s);
mdc_status mdc_zero_i_update(mdc_dp *dp, const mdc_adamw_config *o, double norm);
mdc_status mdc_zero_i_alloc(mdc_dp *dp);
void mdc_zero_i_free(mdc_dp *dp);
/* shard <-> full layout for one rank q's shard (all S floats). */
void mdc_zero_i_shard_to_full(const mdc_dp *dp, int q, const float *shard, float *full);
void mdc_zero_i_full_to_shard(const mdc_dp *dp, int q, const float *full, float *shard);
/* ZeRO-3 in 16 bits: the 16-bit shard from the fp32 master shard (after an update or a load). */
void mdc_zero_i_round_shard(mdc_dp *dp);

#endif
