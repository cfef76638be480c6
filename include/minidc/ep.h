/* Expert parallelism (ref/parallel/ep/ep.c; docs/expert-parallel.md). Megatron's convention: the ep ranks
 * are data-parallel ranks (e divides --dp); each holds E/e experts of every MoE block and the
 * whole dense part. A MoE block's tokens go to their experts' ranks and back by all-to-all:
 * first the counts (per destination: rows per local expert and segment), then the rows
 * (all-to-allv) grouped by expert; the backward moves the gradients the same two ways.
 * Gradients: the dense ones are summed over the dense group (dp x cp, ep included), the
 * experts' over the expert-data-parallel group (the ranks holding the same experts). */
#ifndef MINIDC_EP_H
#define MINIDC_EP_H

#include <stdio.h>

#include "minidc/collectives.h"
#include "minidc/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mdc_ep mdc_ep;

/* The component over the expert-parallel group g (borrowed) for model m's partition; attaches
 * the all-to-all to the model (mdc_gpt2_set_ep). dense and expert: the reduction groups (either
 * may be NULL: one rank). */
/* What the dispatch and combine rows move: MDC_F32, or a mixed-precision run's MDC_BF16 / MDC_F16,
 * whose rows hold values of that dtype (packed to 2 bytes an element: the same values). */
void mdc_ep_set_dtype(mdc_ep *ep, mdc_dtype act);
mdc_status mdc_ep_create(mdc_ep **out, mdc_group *g, mdc_group *dense, mdc_group *expert, mdc_gpt2 *m);
void mdc_ep_free(mdc_ep *ep); /* NULL is a no-op */
/* The step's gradient sums (DDP): dense tensors over the dense group, experts over the expert
 * group; exact mode sums the exact sums and rounds them once. */
mdc_status mdc_ep_reduce(void *ep);
/* Per local tensor, 1 where this rank leaves it out of the squared norm (another rank of its
 * reduction group counts it). */
void mdc_ep_norm_skip(const mdc_ep *ep, char *skip);
/* Starts the step's all-to-all figures (bytes, calls, rows, wall time) from 0. */
void mdc_ep_reset_counts(mdc_ep *ep);

/* ---- expert tensor parallelism (ref/parallel/ep/etp.c; docs/expert-parallel.md) --------------
 * --etp N: each routed expert split over the N consecutive tp ranks of group g (its gate/up
 * column-parallel, its down row-parallel); gather: the members hold different tokens (SP).
 * Attaches the group's collectives to the model (mdc_gpt2_set_etp). */
typedef struct mdc_etp mdc_etp;
mdc_status mdc_etp_create(mdc_etp **out, mdc_group *g, int gather, mdc_gpt2 *m);
void mdc_etp_free(mdc_etp *etp); /* NULL is a no-op */
void mdc_etp_reset_counts(mdc_etp *etp);
int mdc_etp_size(const mdc_etp *etp); /* N (1 for NULL) */
/* Per kind: the rows' AllGather(v), the partial sums' ReduceScatter(v) or AllReduce, the counts'
 * AllGather. bytes: sent by this rank; want: the ring's formula for the same calls. */
enum { MDC_ETP_GATHER = 0, MDC_ETP_SUM, MDC_ETP_COUNTS, MDC_ETP_KINDS };
typedef struct {
    double bytes[MDC_ETP_KINDS], want[MDC_ETP_KINDS];
    double calls; /* row collectives (gathers and sums) */
    double rows;  /* the group's rows those calls moved, summed over the calls */
    double wall;  /* seconds inside them */
    int exact;    /* the sums carried exact partial sums (doubles, 8 bytes an element) */
    int gather;   /* the members hold different tokens (SP): AllGather + ReduceScatter, else AllReduce */
} mdc_etp_figures;
void mdc_etp_get_figures(const mdc_etp *etp, mdc_etp_figures *f);

/* One line of the step's MoE figures over the whole mesh (collective over `world`; the line on
 * world rank 0, empty elsewhere): assignments per expert before dropping and their max/mean,
 * dropped, the aux and z losses (per the objective: divided by tokens), and the all-to-all bytes
 * of ep rank 0 next to the formula, and with etp the etp group's gathers and sums (bytes per
 * rank, their mean over the etp ranks) next to theirs. count: this rank's figures count (tp rank
 * 0, or every tp rank with SP). ep and etp may be NULL. */
/* totals (NULL, or E + MDC_MOE_FIGURES doubles): on world rank 0 the line's sums over the mesh,
 * the E assignments per expert, then dropped, the aux and z sums, ..., the routing digest at E + 8
 * and the aux loss's sum at E + 15 (ref/parallel/ep/report.c). */
enum { MDC_MOE_FIGURES = 16 };
mdc_status mdc_moe_step_line(mdc_gpt2 *m, const mdc_ep *ep, const mdc_etp *etp, mdc_group *world, int count,
                             double tokens, char *line, size_t cap, double *totals);

/* The MoE figures of the last step into the cJSON object `obj` (the --report file's "schemes":
 * "moe"): assignments per expert, dropped, the aux, z and aux-loss sums, the routing digest (from
 * `totals`, the last line's sums over the mesh; NULL: this rank's own), and this rank's
 * all-to-all bytes and calls (ep may be NULL). */
void mdc_moe_report_json(const mdc_gpt2 *m, const mdc_ep *ep, const mdc_etp *etp, const double *totals, void *obj);

#ifdef __cplusplus
}
#endif
#endif
