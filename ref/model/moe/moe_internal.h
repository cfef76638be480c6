/* Shared by ref/model/moe/moe_route.c (the router, its decisions and their gradient) and ref/model/moe/moe.c
 * (dispatch, the experts, combine, the backward). Not a public header. */
#ifndef MINIDC_REF_MOE_INTERNAL_H
#define MINIDC_REF_MOE_INTERNAL_H

#include "../model_internal.h"

typedef struct mdc_i_moe_state {
    int n, S, Tg;       /* local tokens, segments, tokens per routing group */
    float *probs, *lse; /* n x E router probabilities softmax(z); n logsumexp(z) */
    float *score;       /* DeepSeek-V3's router: n x E sigmoid(z) (NULL for softmax routing) */
    int *choice, *row;  /* n x k: chosen experts (slot order); row in the send buffer, -1 dropped */
    float *gate;        /* n x k gate weights */
    int *scnt, *rcnt;   /* E x S rows sent per (expert, segment); e x El x S received per (source,
                             local expert, segment) */
    int A, R;           /* rows sent, rows received */
    float *xs, *ys;     /* A x C dispatched inputs; the expert outputs back (source side) */
    float *xr, *h, *u;  /* R x C received inputs; R x 4C before and after GELU (expert side) */
    float *fbuf, *vbuf; /* the device allocations behind them: per token, per row */
    float *f_aux;       /* E: each expert's share f_i per group (n/T groups x E) */
    /* the shared expert (Qwen2-MoE): its gate|up product (n x 2Fs), SwiGLU (n x Fs) and output
     * (n x C), each token's sigmoid scale (n); one allocation, sbuf */
    float *sh, *su, *sy, *ss, *sbuf;
} moe_state;

/* The router's decisions for MoE block l of the set's tokens x (local rows): probabilities,
 * choices, gates, kept assignments and their rows in the send layout, the aux terms, and the
 * counts exchanged with the expert-parallel group (q->rcnt, q->R). Leaves q in a->moe. */
mdc_status mdc_i_moe_route(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, moe_state **out);
/* The shared expert of block l (ref/model/moe/moe_shared.c; nothing without one): its output
 * added into out, its state kept in q; backward, its input gradient added into dx. */
mdc_status mdc_i_moe_shared_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, moe_state *q, float *out);
mdc_status mdc_i_moe_shared_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const moe_state *q, const float *x,
                                     const float *dout, float *dx);
/* transformers' aux loss (ref/model/moe/moe_aux.c): in the counting forward, the block's top-k of
 * p added to the counts; in the backward, the block's term of the objective (exact where the
 * loss is), its gradient w_i per p_i in m->moe.lb_w. */
void mdc_i_moe_lb_count(mdc_gpt2 *m, const moe_state *q);
mdc_status mdc_i_moe_lb_grad(mdc_gpt2 *m, const moe_state *q);
/* dz (n x E) from the gates' gradient, with the aux losses' and the z-loss's. */
mdc_status mdc_i_moe_router_grad(mdc_gpt2 *m, const moe_state *q, const float *dgate, float *dz);

#endif
