/* The device mesh (ref/parallel/mesh.c): the ranks laid out over the axes tp, cp, ep, dp, pp in that
 * order, tp fastest (Megatron's order: a tensor-parallel group shares a node), each rank's
 * coordinates, a group per axis and per combination a reduction needs, and the pipeline
 * neighbours. Everything is computed locally from the sizes (no messages); each kind of group
 * has its own tag space, so collectives on different groups never mix.
 *   rank = tp + t (cp + c (ep + e (dp + d pp)))
 * Which reduction runs over which group:
 *   dense gradients        dp x cp x ep (every rank holding the same dense weights)
 *   expert gradients       dp x cp (the expert-data-parallel group); with expert tensor
 *                          parallelism (--etp N, mdc_mesh_set_etp) an expert is cut into N shards
 *                          over N consecutive tp ranks (etp), and a shard's gradient is summed
 *                          over every rank that holds that shard: dp x cp, and with SP also the
 *                          tp / N tp ranks of the same etp rank (etp_shard: their tokens differ;
 *                          without SP they computed the same sum, which is counted once)
 *   an expert's partial outputs and input gradients: etp (AllGather of the rows and
 *                          ReduceScatter of the sums with SP, else AllReduce)
 *   SP LayerNorm and row-parallel bias gradients, the vocab-parallel loss: tp
 *   the attention's dk, dv of a kv head held by tp / KV ranks: those ranks (kv)
 *   MoE aux-loss counts    tp x cp
 *   tied embedding         the first and the last pipeline stage
 *   loss, gradient norm    every rank */
#ifndef MINIDC_MESH_H
#define MINIDC_MESH_H

#include <stdio.h>

#include "minidc/collectives.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MDC_AXIS_TP = 0, MDC_AXIS_CP, MDC_AXIS_EP, MDC_AXIS_DP, MDC_AXIS_PP, MDC_AXES } mdc_axis;
typedef struct {
    int tp, cp, ep, dp, pp;
} mdc_mesh_dims;

typedef enum {
    MDC_MESH_TP = 0,
    MDC_MESH_CP,
    MDC_MESH_EP,
    MDC_MESH_DP,
    MDC_MESH_PP,     /* one axis each */
    MDC_MESH_DENSE,  /* dp x cp x ep */
    MDC_MESH_EXPERT, /* dp x cp */
    MDC_MESH_TP_CP,  /* tp x cp */
    MDC_MESH_EMBED,  /* first + last pipeline stage (NULL on the stages between) */
    MDC_MESH_WORLD,
    MDC_MESH_KV,        /* the consecutive tp ranks that hold this rank's kv head (mdc_mesh_set_kv_replicas) */
    MDC_MESH_ETP,       /* expert tensor parallelism: the etp consecutive tp ranks that split this rank's experts */
    MDC_MESH_ETP_SHARD, /* the tp ranks of this rank's etp rank: tp / etp, each holding the same shards */
    MDC_MESH_GROUPS
} mdc_mesh_group_kind;

typedef struct mdc_mesh mdc_mesh;

const char *mdc_axis_name(mdc_axis a);
/* Every size >= 1 and their product = the transport's size, else MDC_ERR_INVALID naming the
 * options (--tp --cp --ep --dp --pp) and the rank count. */
mdc_status mdc_mesh_create(mdc_mesh **out, mdc_transport *tr, const mdc_mesh_dims *d);
void mdc_mesh_free(mdc_mesh *m); /* NULL is a no-op */
mdc_mesh_dims mdc_mesh_get_dims(const mdc_mesh *m);
/* Grouped-query attention with tp > KV: each kv head held by `replicas` consecutive tp ranks
 * (tp / KV); makes the MDC_MESH_KV group (without it, this rank alone). No messages. */
mdc_status mdc_mesh_set_kv_replicas(mdc_mesh *m, int replicas);
/* Expert tensor parallelism over etp consecutive tp ranks (etp divides tp): makes the
 * MDC_MESH_ETP group (tp ranks [q etp, (q+1) etp) around this rank) and MDC_MESH_ETP_SHARD (the
 * tp ranks r with r % etp equal to this rank's); without it the first is this rank alone and
 * the second its whole tp group. MDC_ERR_INVALID names --etp and --tp. No messages. */
mdc_status mdc_mesh_set_etp(mdc_mesh *m, int etp);
int mdc_mesh_etp(const mdc_mesh *m); /* 1 unless set */
int mdc_mesh_size(const mdc_mesh *m, mdc_axis a);
int mdc_mesh_coord(const mdc_mesh *m, mdc_axis a); /* this rank's */
int mdc_mesh_coord_of(const mdc_mesh *m, int rank, mdc_axis a);
/* The group of this rank of a kind (NULL: MDC_MESH_EMBED on a middle stage). */
mdc_group *mdc_mesh_group(const mdc_mesh *m, mdc_mesh_group_kind k);
/* World ranks of the previous and next pipeline stage (-1 at the ends). */
int mdc_mesh_pp_prev(const mdc_mesh *m);
int mdc_mesh_pp_next(const mdc_mesh *m);
/* Prints every rank's coordinates and which group each reduction uses (rank 0 prints). */
void mdc_mesh_print(const mdc_mesh *m, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
