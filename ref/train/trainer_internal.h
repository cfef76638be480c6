/* Shared by the trainer's files (ref/train/trainer.c: building a mesh's trainer, the step, the state
 * in the global layout; ref/train/trainer_check.c: the replica check and the reports). Not a public
 * header. */
#ifndef MINIDC_REF_TRAINER_INTERNAL_H
#define MINIDC_REF_TRAINER_INTERNAL_H

#include "minidc/ep.h"
#include "minidc/train.h"

struct mdc_trainer {
    mdc_trainer_config tc;
    mdc_mesh *mesh; /* NULL: serial */
    mdc_tp *tp;     /* NULL: tp = 1 */
    mdc_gpt2 *m;
    mdc_dp *dp;       /* NULL: one replica and no ZeRO */
    mdc_pp *pp;       /* NULL: one stage */
    mdc_cp *cp;       /* NULL: the whole sequence here */
    mdc_ep *ep;       /* NULL: every expert here */
    mdc_etp *etp;     /* NULL: every expert whole on each tp rank */
    mdc_mesh_dims md; /* the mesh's axes: dp the replicas of one expert placement (dp / ep) */
    int *cp_tok;      /* context parallel: this rank's positions of the step's inputs and targets */
    double *moe_sum;  /* the last MoE line's figures summed over the mesh (world rank 0; E + MDC_MOE_FIGURES) */
    mdc_step_plan plan;
    char *skip, *sp_partial;
    int dp_rank, dp_size, tp_rank, pp_rank, steps;
    int clean_steps, skipped_steps, fault_inf_step, fault_inf_on; /* fp16's loss scaling (plan.loss_scale) */
};

static inline int mdc_i_coord(const mdc_trainer *t, mdc_axis a) { return t->mesh ? mdc_mesh_coord(t->mesh, a) : 0; }

#endif
