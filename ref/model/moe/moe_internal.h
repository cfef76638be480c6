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
    /* expert tensor parallelism (ref/model/moe/moe_etp.c): the rows this rank's expert shards run
     * on are the etp group's (with SP every member's received rows, gathered in member order) */
    int G, Rg, own0;  /* members whose rows are here (1 without gathering), their rows, this member's first */
    int *grc, *grows; /* G x e x El x S received counts member by member (G 1: rcnt); rows per member */
    int *gbuf, rows1; /* behind grc and grows when gathered; grows[0] (R) when not */
    float *xg;        /* Rg x C: the experts' inputs (xr, or the members' xr gathered) */
} moe_state;

/* The rows the experts run on (q->Rg, the members' then the sources' order), grouped by (member,
 * source, local expert, segment): body runs for each non-empty group with src, jl, sg, r0 (its
 * first row) and nr (its rows). */
#define FOR_SEGMENTS(q, e, El, ...)                                                                          \
    do {                                                                                                     \
        int row_ = 0;                                                                                        \
        for (int mb_ = 0; mb_ < (q)->G; mb_++)                                                               \
            for (int src = 0; src < (e); src++)                                                              \
                for (int jl = 0; jl < (El); jl++)                                                            \
                    for (int sg = 0; sg < (q)->S; sg++) {                                                    \
                        int r0 = row_, nr = (q)->grc[(((size_t)mb_ * (e) + src) * (El) + jl) * (q)->S + sg]; \
                        row_ += nr;                                                                          \
                        if (nr) {                                                                            \
                            __VA_ARGS__                                                                      \
                        }                                                                                    \
                    }                                                                                        \
    } while (0)
/* The same rows by (member, source, local expert): one expert's rows from one source, contiguous. */
#define FOR_BLOCKS(q, e, El, ...)                                                                \
    do {                                                                                         \
        int row_ = 0;                                                                            \
        for (int mb_ = 0; mb_ < (q)->G; mb_++)                                                   \
            for (int src = 0; src < (e); src++)                                                  \
                for (int jl = 0; jl < (El); jl++) {                                              \
                    int r0 = row_, nr = 0;                                                       \
                    const int *c_ = (q)->grc + (((size_t)mb_ * (e) + src) * (El) + jl) * (q)->S; \
                    for (int sg = 0; sg < (q)->S; sg++) nr += c_[sg];                            \
                    row_ += nr;                                                                  \
                    if (nr) {                                                                    \
                        __VA_ARGS__                                                              \
                    }                                                                            \
                }                                                                                \
    } while (0)

/* The etp group's size (1: every expert whole here). */
static inline int mdc_i_moe_etp(const mdc_gpt2 *m) { return m->part.etp > 1 ? m->part.etp : 1; }
/* Expert j of block l as this rank holds it: its widths F1, F this rank's shard's (F / etp). */
static inline mdc_i_expert mdc_i_moe_expert(const mdc_gpt2 *m, int l, int j) {
    mdc_i_expert x = mdc_i_expert_of(&m->cfg, l, j);
    x.F1 /= mdc_i_moe_etp(m), x.F /= mdc_i_moe_etp(m);
    return x;
}
/* ref/model/moe/moe_etp.c. After routing: the members' counts (gathered with SP), q->G, Rg, grc,
 * grows, own0. */
mdc_status mdc_i_moe_etp_counts(mdc_gpt2 *m, moe_state *q);
/* With SP: every member's rows (R x width, this member's) gathered into all (Rg x width). */
mdc_status mdc_i_moe_etp_rows(mdc_gpt2 *m, const moe_state *q, const float *mine, float *all, int width);
/* yr (this member's R rows x C) = the experts' second product of q->u (Rg x F), summed over etp
 * (exact mode: in contraction blocks, summed exactly), GPT-2's c_proj bias after the sum. */
mdc_status mdc_i_moe_down(mdc_gpt2 *m, int l, const moe_state *q, float *yr);
/* dxr (R x C, zero before) = the experts' input gradient from dh (Rg x F1) summed over etp. */
mdc_status mdc_i_moe_dinput(mdc_gpt2 *m, int l, const moe_state *q, const float *dh, float *dxr);

/* The router's decisions for MoE block l of the set's tokens x (local rows): probabilities,
 * choices, gates, kept assignments and their rows in the send layout, the aux terms, and the
 * counts exchanged with the expert-parallel group (q->rcnt, q->R). Leaves q in a->moe. */
mdc_status mdc_i_moe_route(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, moe_state **out);
/* The shared expert of block l (ref/model/moe/moe_shared.c; nothing without one): its output
 * added into out, its state kept in q; backward, its input gradient added into dx. */
mdc_status mdc_i_moe_shared_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const float *x, moe_state *q, float *out);
mdc_status mdc_i_moe_shared_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, int l, const moe_state *q, const float *x,
                                     const float *dout, float *dx);
/* The top k of v (E), ties to the lower index, into ch (ref/model/moe/moe_route.c). */
void mdc_i_moe_top_k(const float *v, int E, int k, int *ch);
/* transformers' aux loss (ref/model/moe/moe_aux.c): in the counting forward, the block's top-k of
 * p added to the counts; in the backward, the block's term of the objective (exact where the
 * loss is), its gradient w_i per p_i in m->moe.lb_w. */
void mdc_i_moe_lb_count(mdc_gpt2 *m, const moe_state *q);
mdc_status mdc_i_moe_lb_grad(mdc_gpt2 *m, const moe_state *q);
/* dz (n x E) from the gates' gradient, with the aux losses' and the z-loss's. */
mdc_status mdc_i_moe_router_grad(mdc_gpt2 *m, const moe_state *q, const float *dgate, float *dz);

#endif
