/* Dry (accounting-only) kernels (mdc_dev_set_dry, kernels/internal.h): every kernel that takes a
 * device runs once on a normal h100 with real inputs and once on a dry one with every buffer it
 * is given (outputs and inputs, ids and positions, exact sums) filled with a sentinel, a
 * signaling NaN with a payload of its own per buffer (a write is seen even when it stores a NaN
 * computed from the sentinels, and an id or position read is out of range). The two must charge
 * the same: the counters (now, flops, hbm_bytes, kernels, t_compute, t_memory) equal, and the
 * trace's kernel events in virtual time (names, order, start, duration, FLOPs) equal; the dry run
 * must leave every buffer byte for byte as it was. Each case runs in fp32 without dropout and in
 * bf16 (16-bit probabilities) with dropout p = 0.1. Then every case runs once more on a dry
 * device at a predict-sized shape (T 2048, C 12288, 96 heads, vocabulary 50304, 4C = 49152) with
 * every tensor pointer on an inaccessible page (any touch crashes), and must charge as many
 * kernels as at the small shape. Prints each failing case's first mismatch (case, configuration,
 * counter or buffer), or the case a crash is in; exits 1 on any. */
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"

enum { NF = 12, CAP = 1 << 16, NEX = 4096 }; /* float buffers, floats (and xsum elements) each, exact sums */

/* The sizes and buffers a case reads; the small shape's buffers hold CAP elements each. */
typedef struct {
    int B, T, NH, KV, d, C, V, Vp, OC, F, blk; /* C = NH d; KV kv heads (GQA) */
    int nq, nk, qpos0, kpos0;                  /* the attention pair's runs */
    float *f[NF];
    int *ids, *pos; /* ids in [0, 5) (tokens, targets); pos[i] = i */
    mdc_xsum *xs;
    mdc_exact *ex;
    const mdc_dropout *drop; /* NULL: no dropout */
} sh;

typedef void (*case_fn)(mdc_device *d, const sh *s);

#define F(i) (s->f[i])
#define N_ (s->B * s->T)

/* The attention pair of s: q, o, dq, dout (B, nq, NH hs); k, v, dk, dv (B, nk, KV hs); m, l, lse,
 * D (B, NH, nq); query head h reads kv head h / (NH / KV). */
static mdc_attn_pair pair_of(const sh *s, int kpos0) {
    mdc_attn_pair p = {0};
    p.B = s->B, p.NH = s->NH, p.hs = s->d, p.group = s->NH / s->KV;
    p.nq = s->nq, p.nk = s->nk, p.qpos0 = s->qpos0, p.kpos0 = kpos0;
    p.q_ld = s->NH * s->d, p.o_ld = p.q_ld, p.kv_ld = s->KV * s->d;
    p.q_bs = (size_t)s->nq * p.q_ld, p.o_bs = p.q_bs, p.kv_bs = (size_t)s->nk * p.kv_ld;
    p.s_hs = (size_t)s->nq, p.s_bs = (size_t)s->NH * s->nq;
    p.q = F(0), p.k = F(1), p.v = F(2), p.o = F(3), p.m = F(4), p.l = F(5);
    p.dq = F(6), p.dk = F(7), p.dv = F(8), p.dout = F(9), p.lse = F(10), p.D = F(11);
    p.drop = s->drop;
    return p;
}

/* ---- the cases: every kernel in kernels/ that takes a device ------------------------------- */
static void k_encoder_forward(mdc_device *d, const sh *s) {
    mdc_encoder_forward(d, F(0), s->ids, F(1), F(2), s->B, s->T, s->C);
}
static void k_encoder_backward(mdc_device *d, const sh *s) {
    mdc_encoder_backward(d, F(0), F(1), F(2), s->ids, s->B, s->T, s->C);
}
static void k_embed_shard_forward(mdc_device *d, const sh *s) {
    mdc_embed_shard_forward(d, F(0), s->ids, F(1), 1, 3, N_, s->C);
}
static void k_embed_positions(mdc_device *d, const sh *s) {
    mdc_embed_positions(d, F(0), F(1), F(2), s->B, s->T, s->pos, 0, s->C);
    mdc_embed_positions(d, F(0), F(0), F(2), s->B, s->T, NULL, 0, s->C);
}
static void k_embed_shard_backward(mdc_device *d, const sh *s) {
    mdc_embed_shard_backward(d, F(0), F(1), F(2), s->ids, 1, 3, s->pos, s->B, s->T, s->C);
    mdc_embed_shard_backward(d, F(0), NULL, F(2), s->ids, 0, 5, NULL, s->B, s->T, s->C);
}
static void k_layernorm_forward(mdc_device *d, const sh *s) {
    mdc_layernorm_forward(d, F(0), F(1), F(2), F(3), F(4), F(5), N_, s->C);
}
static void k_layernorm_backward(mdc_device *d, const sh *s) {
    mdc_layernorm_backward(d, F(0), F(1), F(2), F(3), F(4), F(5), F(6), F(7), N_, s->C);
    mdc_layernorm_backward(d, F(0), NULL, NULL, F(3), F(4), F(5), F(6), F(7), N_, s->C);
    mdc_layernorm_backward(d, NULL, F(1), F(2), F(3), F(4), F(5), F(6), F(7), N_, s->C);
}
static void k_matmul_forward(mdc_device *d, const sh *s) {
    mdc_matmul_forward(d, F(0), F(1), F(2), F(3), N_, s->C, s->OC);
    mdc_matmul_forward(d, F(0), F(1), F(2), NULL, N_, s->C, s->OC);
}
static void k_matmul_residual_forward(mdc_device *d, const sh *s) {
    mdc_matmul_residual_forward(d, F(0), F(4), F(1), F(2), F(3), N_, s->C, s->OC);
    mdc_matmul_residual_forward(d, F(0), F(0), F(1), F(2), NULL, N_, s->C, s->OC);
}
static void k_matmul_backward(mdc_device *d, const sh *s) {
    mdc_matmul_backward(d, F(0), F(1), F(2), F(3), F(4), F(5), N_, s->C, s->OC);
    mdc_matmul_backward(d, F(0), NULL, NULL, F(3), F(4), F(5), N_, s->C, s->OC);
    mdc_matmul_backward(d, NULL, F(1), F(2), F(3), F(4), F(5), N_, s->C, s->OC);
}
static void k_lmhead_forward(mdc_device *d, const sh *s) { mdc_lmhead_forward(d, F(0), F(1), F(2), N_, s->C, s->Vp); }
static void k_lmhead_backward(mdc_device *d, const sh *s) {
    mdc_lmhead_backward(d, F(0), F(1), F(2), F(3), F(4), N_, s->C, s->Vp);
}
static void k_linear_forward(mdc_device *d, const sh *s) {
    mdc_linear_forward(d, F(0), F(4), F(1), F(2), F(3), N_, s->C, s->OC);
    mdc_linear_forward(d, F(0), NULL, F(1), F(2), NULL, N_, s->C, s->OC);
    mdc_linear_forward(d, F(0), NULL, F(1), F(2), F(3), N_, s->C, s->OC);
}
static void k_linear_backward(mdc_device *d, const sh *s) {
    mdc_linear_backward(d, F(0), F(1), F(2), F(3), F(4), F(5), N_, s->C, s->OC);
    mdc_linear_backward(d, NULL, F(1), NULL, F(3), F(4), F(5), N_, s->C, s->OC);
}
static void k_softmax_forward(mdc_device *d, const sh *s) { mdc_softmax_forward(d, F(0), F(1), N_, s->V, s->Vp); }
static void k_crossentropy_forward(mdc_device *d, const sh *s) {
    mdc_crossentropy_forward(d, F(0), F(1), F(2), s->ids, N_, s->V, s->Vp);
}
static void k_crossentropy_backward(mdc_device *d, const sh *s) {
    mdc_crossentropy_backward(d, F(0), F(1), F(2), s->ids, 1.0f / N_, N_, s->V, s->Vp);
}
static void k_vocab_shard_max(mdc_device *d, const sh *s) { mdc_vocab_shard_max(d, F(0), F(1), N_, s->Vp, s->V); }
static void k_vocab_shard_sumexp(mdc_device *d, const sh *s) {
    mdc_vocab_shard_sumexp(d, F(0), F(1), F(2), N_, s->Vp, s->V);
}
static void k_vocab_shard_target(mdc_device *d, const sh *s) {
    mdc_vocab_shard_target(d, F(0), F(1), s->ids, 1, N_, s->Vp, s->V);
}
static void k_crossentropy_backward_shard(mdc_device *d, const sh *s) {
    mdc_crossentropy_backward_shard(d, F(0), F(1), F(2), s->ids, 1, 0.5f, N_, s->Vp, s->V);
}
static void k_adamw_update(mdc_device *d, const sh *s) {
    mdc_adamw_update(d, F(0), F(1), F(2), F(3), (size_t)N_ * s->C, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
}
static void k_grad_norm(mdc_device *d, const sh *s) {
    double sq = mdc_grad_sumsq(d, F(0), (size_t)N_ * s->C), nr = mdc_grad_norm(d, F(0), (size_t)N_ * s->C);
    if (mdc_dev_dry(d)) TU_CHECK(sq == 0 && nr == 0, "dry mdc_grad_sumsq %g, mdc_grad_norm %g: expected 0", sq, nr);
}
static void k_dropout_residual_forward(mdc_device *d, const sh *s) {
    mdc_dropout_residual_forward(d, F(0), F(1), F(2), s->drop, s->B, s->T, s->C);
}
static void k_dropout_residual_backward(mdc_device *d, const sh *s) {
    mdc_dropout_residual_backward(d, F(0), F(1), s->drop, s->B, s->T, s->C);
}
static void k_attention_forward(mdc_device *d, const sh *s) {
    mdc_attention_forward(d, F(0), F(1), F(2), s->B, s->T, s->C, s->NH);
}
static void k_attention_forward_drop(mdc_device *d, const sh *s) {
    mdc_attention_forward_drop(d, F(0), F(1), F(2), s->drop, s->B, s->T, s->C, s->NH);
}
static void k_attention_gqa_forward(mdc_device *d, const sh *s) {
    mdc_attention_gqa_forward(d, F(0), F(1), F(2), s->drop, s->B, s->T, s->NH, s->KV, s->d);
}
static void k_attention_backward(mdc_device *d, const sh *s) {
    mdc_attention_backward(d, F(0), F(1), F(2), F(3), F(4), s->B, s->T, s->C, s->NH);
}
static void k_attention_backward_drop(mdc_device *d, const sh *s) {
    mdc_attention_backward_drop(d, F(0), F(1), F(2), F(3), F(4), s->drop, s->B, s->T, s->C, s->NH);
}
static void k_attention_gqa_backward(mdc_device *d, const sh *s) {
    mdc_attention_gqa_backward(d, F(0), F(1), F(2), F(3), F(4), s->drop, s->B, s->T, s->NH, s->KV, s->d);
}
static void k_attention_forward_tiled(mdc_device *d, const sh *s) {
    mdc_attention_forward_tiled(d, F(0), F(1), F(2), s->B, s->T, s->C, s->NH);
}
static void k_attention_forward_tiled_drop(mdc_device *d, const sh *s) {
    mdc_attention_forward_tiled_drop(d, F(0), F(1), F(2), s->drop, s->B, s->T, s->C, s->NH);
}
static void k_attention_gqa_forward_tiled(mdc_device *d, const sh *s) {
    mdc_attention_gqa_forward_tiled(d, F(0), F(1), F(2), s->drop, s->B, s->T, s->NH, s->KV, s->d);
}
static void k_attention_backward_tiled(mdc_device *d, const sh *s) {
    mdc_attention_backward_tiled(d, F(0), F(1), F(2), F(3), F(4), s->B, s->T, s->C, s->NH);
}
static void k_attention_backward_tiled_drop(mdc_device *d, const sh *s) {
    mdc_attention_backward_tiled_drop(d, F(0), F(1), F(2), F(3), F(4), s->drop, s->B, s->T, s->C, s->NH);
}
static void k_attention_gqa_backward_tiled(mdc_device *d, const sh *s) {
    mdc_attention_gqa_backward_tiled(d, F(0), F(1), F(2), F(3), F(4), s->drop, s->B, s->T, s->NH, s->KV, s->d);
}
static void k_attn_pair_forward(mdc_device *d, const sh *s) {
    mdc_attn_pair p = pair_of(s, s->kpos0);
    mdc_attn_pair_forward(d, &p);
}
static void k_attn_pair_finish(mdc_device *d, const sh *s) {
    mdc_attn_pair p = pair_of(s, s->kpos0);
    mdc_attn_pair_finish(d, &p, F(10));
}
static void k_attn_rowdot(mdc_device *d, const sh *s) {
    mdc_attn_pair p = pair_of(s, s->kpos0);
    mdc_attn_rowdot(d, &p, F(11));
}
static void k_attn_pair_backward(mdc_device *d, const sh *s) {
    mdc_attn_pair p = pair_of(s, s->kpos0);
    mdc_attn_pair_backward(d, &p);
}
static void k_attn_pair_invisible(mdc_device *d, const sh *s) { /* keys after every query: no kernel but finish */
    mdc_attn_pair p = pair_of(s, s->qpos0 + s->nq);
    mdc_attn_pair_forward(d, &p);
    mdc_attn_pair_finish(d, &p, F(10));
    mdc_attn_pair_backward(d, &p);
}
static void k_x_attn_max(mdc_device *d, const sh *s) {
    mdc_attn_pair p = pair_of(s, s->kpos0);
    mdc_x_attn_max(d, &p, s->blk);
}
static void k_x_attn_sum(mdc_device *d, const sh *s) {
    mdc_attn_pair p = pair_of(s, s->kpos0);
    mdc_x_attn_sum(d, &p, s->xs, 0, 1024, s->blk);
}
static void k_x_attn_finish(mdc_device *d, const sh *s) {
    mdc_attn_pair p = pair_of(s, s->kpos0);
    mdc_x_attn_finish(d, &p, s->xs, 0, 1024, F(10));
}
static void k_x_attn_rowdot(mdc_device *d, const sh *s) {
    mdc_attn_pair p = pair_of(s, s->kpos0);
    mdc_x_attn_rowdot(d, &p, F(11));
}
static void k_x_attn_backward(mdc_device *d, const sh *s) {
    mdc_attn_pair p = pair_of(s, s->kpos0);
    mdc_x_attn_backward(d, &p, s->xs, 0, 4096, 8192, s->blk);
}
static void k_x_wgrad(mdc_device *d, const sh *s) {
    mdc_x_wgrad(d, s->xs, 0, F(0), s->C, F(1), s->OC, N_, s->C, s->OC, s->blk);
}
static void k_x_colsum(mdc_device *d, const sh *s) { mdc_x_colsum(d, s->xs, 0, F(0), s->OC, N_, s->OC, s->blk); }
static void k_x_contract(mdc_device *d, const sh *s) {
    mdc_x_contract(d, s->xs, F(0), s->C, F(1), s->OC, 0, N_, s->C, s->OC, s->d);
    mdc_x_contract(d, s->xs, F(0), s->C, F(1), s->C, 1, N_, s->C, s->OC, s->d);
}
static void k_x_contract_at(mdc_device *d, const sh *s) {
    mdc_x_contract_at(d, s->xs, 100, F(0), s->C, F(1), s->OC, 0, N_, s->C, s->OC, s->d);
    mdc_x_contract_at(d, s->xs, 100, F(0), s->C, F(1), s->C, 1, N_, s->C, s->OC, s->d);
}
static void k_x_matmul(mdc_device *d, const sh *s) {
    mdc_x_matmul(d, F(0), F(1), s->C, F(2), s->OC, 0, F(3), N_, s->C, s->OC);
    mdc_x_matmul(d, F(0), F(1), s->C, F(2), s->C, 1, NULL, N_, s->C, s->OC);
}
static void k_x_layernorm_wgrad(mdc_device *d, const sh *s) {
    mdc_x_layernorm_wgrad(d, s->xs, 0, (size_t)s->C, F(0), F(1), F(2), F(3), N_, s->C, s->blk);
}
static void k_x_rmsnorm_wgrad(mdc_device *d, const sh *s) {
    mdc_x_rmsnorm_wgrad(d, s->xs, 0, F(0), s->C, F(1), s->C, F(2), N_, s->NH, s->d, s->blk);
}
static void k_x_embed(mdc_device *d, const sh *s) {
    mdc_x_embed(d, s->xs, 0, 2000, F(0), s->ids, 1, 3, s->pos, s->B, s->T, s->C);
    mdc_x_embed(d, s->xs, 0, -1, F(0), s->ids, 0, 5, NULL, s->B, s->T, s->C);
}
static void k_x_sumexp(mdc_device *d, const sh *s) { mdc_x_sumexp(d, s->ex, F(0), s->Vp, F(1), N_, s->V, 8); }
static void k_gelu_forward(mdc_device *d, const sh *s) { mdc_gelu_forward(d, F(0), F(1), (size_t)N_ * s->OC); }
static void k_gelu_backward(mdc_device *d, const sh *s) { mdc_gelu_backward(d, F(0), F(1), F(2), (size_t)N_ * s->OC); }
static void k_rmsnorm_forward(mdc_device *d, const sh *s) {
    mdc_rmsnorm_forward(d, F(0), F(1), F(2), F(3), N_, s->C, 1e-6f);
}
static void k_rmsnorm_backward(mdc_device *d, const sh *s) {
    mdc_rmsnorm_backward(d, F(0), F(1), F(2), F(3), F(4), F(5), N_, s->C);
    mdc_rmsnorm_backward(d, F(0), NULL, F(2), F(3), F(4), F(5), N_, s->C);
    mdc_rmsnorm_backward(d, NULL, F(1), F(2), F(3), F(4), F(5), N_, s->C);
}
static void k_rmsnorm_heads_forward(mdc_device *d, const sh *s) { /* q's heads of qkv rows */
    mdc_rmsnorm_heads_forward(d, F(0), 3 * s->C, F(1), F(2), 3 * s->C, F(3), N_, s->NH, s->d, 1e-6f);
}
static void k_rmsnorm_heads_backward(mdc_device *d, const sh *s) {
    mdc_rmsnorm_heads_backward(d, F(0), 3 * s->C, F(1), F(2), 3 * s->C, F(3), 3 * s->C, F(4), F(5), N_, s->NH, s->d);
}
static void k_rope_forward(mdc_device *d, const sh *s) {
    mdc_rope_forward(d, F(0), 3 * s->C, s->NH, s->d, F(1), F(2), s->B, s->T);
}
static void k_rope_backward(mdc_device *d, const sh *s) {
    mdc_rope_backward(d, F(0), 3 * s->C, s->NH, s->d, F(1), F(2), s->B, s->T);
}
static void k_swiglu_forward(mdc_device *d, const sh *s) { mdc_swiglu_forward(d, F(0), F(1), N_, s->F); }
static void k_swiglu_backward(mdc_device *d, const sh *s) { mdc_swiglu_backward(d, F(0), F(1), F(2), N_, s->F); }
static void k_residual_forward(mdc_device *d, const sh *s) {
    mdc_residual_forward(d, F(0), F(1), F(2), (size_t)N_ * s->C);
}
static void k_residual_backward(mdc_device *d, const sh *s) {
    mdc_residual_backward(d, F(0), F(1), F(2), (size_t)N_ * s->C);
}
static void k_residual_bias_forward(mdc_device *d, const sh *s) {
    mdc_residual_bias_forward(d, F(0), F(1), F(2), F(3), N_, s->C);
}
static void k_bias_forward(mdc_device *d, const sh *s) { mdc_bias_forward(d, F(0), F(1), N_, s->C); }

#define CASE(fn) \
    { &#fn[2], fn } /* the name without k_ */
static const struct {
    const char *name;
    case_fn fn;
} cases[] = {
    CASE(k_encoder_forward),
    CASE(k_encoder_backward),
    CASE(k_embed_shard_forward),
    CASE(k_embed_positions),
    CASE(k_embed_shard_backward),
    CASE(k_layernorm_forward),
    CASE(k_layernorm_backward),
    CASE(k_matmul_forward),
    CASE(k_matmul_residual_forward),
    CASE(k_matmul_backward),
    CASE(k_lmhead_forward),
    CASE(k_lmhead_backward),
    CASE(k_linear_forward),
    CASE(k_linear_backward),
    CASE(k_softmax_forward),
    CASE(k_crossentropy_forward),
    CASE(k_crossentropy_backward),
    CASE(k_vocab_shard_max),
    CASE(k_vocab_shard_sumexp),
    CASE(k_vocab_shard_target),
    CASE(k_crossentropy_backward_shard),
    CASE(k_adamw_update),
    CASE(k_grad_norm),
    CASE(k_dropout_residual_forward),
    CASE(k_dropout_residual_backward),
    CASE(k_attention_forward),
    CASE(k_attention_forward_drop),
    CASE(k_attention_gqa_forward),
    CASE(k_attention_backward),
    CASE(k_attention_backward_drop),
    CASE(k_attention_gqa_backward),
    CASE(k_attention_forward_tiled),
    CASE(k_attention_forward_tiled_drop),
    CASE(k_attention_gqa_forward_tiled),
    CASE(k_attention_backward_tiled),
    CASE(k_attention_backward_tiled_drop),
    CASE(k_attention_gqa_backward_tiled),
    CASE(k_attn_pair_forward),
    CASE(k_attn_pair_finish),
    CASE(k_attn_rowdot),
    CASE(k_attn_pair_backward),
    CASE(k_attn_pair_invisible),
    CASE(k_x_attn_max),
    CASE(k_x_attn_sum),
    CASE(k_x_attn_finish),
    CASE(k_x_attn_rowdot),
    CASE(k_x_attn_backward),
    CASE(k_x_wgrad),
    CASE(k_x_colsum),
    CASE(k_x_contract),
    CASE(k_x_contract_at),
    CASE(k_x_matmul),
    CASE(k_x_layernorm_wgrad),
    CASE(k_x_rmsnorm_wgrad),
    CASE(k_x_embed),
    CASE(k_x_sumexp),
    CASE(k_gelu_forward),
    CASE(k_gelu_backward),
    CASE(k_rmsnorm_forward),
    CASE(k_rmsnorm_backward),
    CASE(k_rmsnorm_heads_forward),
    CASE(k_rmsnorm_heads_backward),
    CASE(k_rope_forward),
    CASE(k_rope_backward),
    CASE(k_swiglu_forward),
    CASE(k_swiglu_backward),
    CASE(k_residual_forward),
    CASE(k_residual_backward),
    CASE(k_residual_bias_forward),
    CASE(k_bias_forward),
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* ---- the harness --------------------------------------------------------------------------------- */
static const char *volatile running = "?"; /* the case a crash is in */

/* A dry kernel read a tensor (an id or position that is a sentinel, or an inaccessible page):
 * name the case, exit 1. */
static void on_fault(int sig) {
    static const char msg[] = "test_dry_kernels: a dry kernel touched a tensor and crashed: case ";
    const char *r = running;
    (void)sig;
    if (write(2, msg, sizeof msg - 1) > 0 && write(2, r, strlen(r)) > 0) (void)!write(2, "\n", 1);
    _exit(1);
}

/* Buffer i's sentinel: the signaling NaN 0x7f80de00 + i, a different one per buffer, so a dry
 * kernel that writes is seen even when it writes a NaN it computed from its sentinel inputs
 * (arithmetic returns a quiet NaN, 0x7fc0...) or copies another buffer's. */
static uint32_t sentinel_of(int i) { return 0x7f80de00u + (uint32_t)i; }

static unsigned char *sentinels; /* NBUF blocks of the largest buffer's bytes, block i of buffer i's */
enum { NBUF = NF + 4, BIG = sizeof(double) * CAP };

static void sentinels_init(void) {
    sentinels = malloc((size_t)NBUF * BIG);
    for (int i = 0; i < NBUF; i++) {
        uint32_t v = sentinel_of(i);
        for (size_t o = 0; o < BIG; o += 4) memcpy(sentinels + (size_t)i * BIG + o, &v, 4);
    }
}

/* The first byte of buffer i at p that is not its sentinel's, or -1. */
static long sentinel_differs(int i, const void *p, size_t bytes) {
    const unsigned char *want = sentinels + (size_t)i * BIG;
    if (!memcmp(p, want, bytes)) return -1;
    size_t o = 0;
    while (((const unsigned char *)p)[o] == want[o]) o++;
    return (long)o;
}

static mdc_device *device(int dry, int dtype) {
    mdc_device *d = tu_device(1.0);
    mdc_dev_set_dry(d, dry);
    mdc_dev_set_dtype(d, dtype);
    mdc_dev_set_half(d, dtype == 2 ? 1 : 0);
    MDC_CHECK(mdc_dev_trace_start(d));
    return d;
}

/* The trace's kernel events in virtual time (tid 0), concatenated: names, start, duration, FLOPs. */
static char *kernel_events(const mdc_device *d) {
    char *js = mdc_dev_trace_json(d), *out = calloc(1, js ? strlen(js) + 1 : 1);
    if (!js) return out;
    const char *key = "{\"name\":";
    for (char *e = strstr(js, key); e;) {
        char *next = strstr(e + 1, ",{\"name\":");
        size_t len = next ? (size_t)(next - e) : strlen(e);
        char save = e[len];
        e[len] = 0;
        if (strstr(e, "\"cat\":\"kernel\"") && strstr(e, "\"tid\":0,")) strcat(strcat(out, e), "\n");
        e[len] = save;
        e = next ? next + 1 : NULL;
    }
    free(js);
    return out;
}

/* The first line where a and b differ, from each (a static buffer). */
static const char *first_diff(const char *a, const char *b) {
    static char msg[1024];
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    while (i > 0 && a[i - 1] != '\n') i--;
    int la = (int)strcspn(a + i, "\n"), lb = (int)strcspn(b + i, "\n");
    snprintf(msg, sizeof msg, "normal: %.*s\n    dry:    %.*s", la < 400 ? la : 400, a + i, lb < 400 ? lb : 400, b + i);
    return msg;
}

typedef struct {
    double v[6];
} figures;
static const char *const fig_name[6] = {"now", "flops", "hbm_bytes", "kernels", "t_compute", "t_memory"};

static figures figures_of(const mdc_device *d) {
    mdc_dev_counters c;
    mdc_dev_get_counters(d, &c);
    return (figures){{c.now, c.flops, c.hbm_bytes, c.kernels, c.t_compute, c.t_memory}};
}

/* The small shape's buffers: NF float buffers, ids, positions, exact sums, and an xsum's elements. */
typedef struct {
    mdc_xsum xs;
    mdc_exact *ex;
    float *f[NF];
    int *ids, *pos;
    struct {
        void *p;
        size_t bytes;
        char name[16];
    } buf[NBUF];
} arena;

static void arena_init(arena *a) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < NF; i++) a->f[i] = malloc(sizeof(float) * CAP);
    a->ids = malloc(sizeof(int) * CAP), a->pos = malloc(sizeof(int) * CAP);
    a->ex = malloc(sizeof(mdc_exact) * NEX);
    if (mdc_xsum_init(&a->xs, CAP)) {
        fprintf(stderr, "test_dry_kernels: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < NF; i++) {
        a->buf[i].p = a->f[i], a->buf[i].bytes = sizeof(float) * CAP;
        snprintf(a->buf[i].name, sizeof a->buf[i].name, "f[%d]", i);
    }
    void *p[4] = {a->ids, a->pos, a->ex, a->xs.v};
    size_t bytes[4] = {sizeof(int) * CAP, sizeof(int) * CAP, sizeof(mdc_exact) * NEX, sizeof(double) * CAP};
    const char *name[4] = {"ids", "pos", "exact sums", "xsum elements"};
    for (int i = 0; i < 4; i++) {
        a->buf[NF + i].p = p[i], a->buf[NF + i].bytes = bytes[i];
        snprintf(a->buf[NF + i].name, sizeof a->buf[NF + i].name, "%s", name[i]);
    }
}

static void arena_free(arena *a) {
    for (int i = 0; i < NF; i++) free(a->f[i]);
    free(a->ids), free(a->pos), free(a->ex);
    mdc_xsum_free(&a->xs);
}

/* Real inputs: floats in [-1, 1), ids i % 5, positions i, exact sums cleared. */
static void arena_real(arena *a) {
    tu_seed(12345);
    for (int i = 0; i < NF; i++)
        for (size_t j = 0; j < CAP; j++) a->f[i][j] = tu_frand();
    for (int j = 0; j < CAP; j++) a->ids[j] = j % 5, a->pos[j] = j;
    for (size_t j = 0; j < NEX; j++) mdc_exact_clear(&a->ex[j]);
    mdc_xsum_clear(&a->xs);
}

static void arena_sentinel(arena *a) {
    for (int i = 0; i < NBUF; i++) memcpy(a->buf[i].p, sentinels + (size_t)i * BIG, a->buf[i].bytes);
}

/* The first buffer of a (after a dry run) that is not all its sentinel, or NULL; *at: its byte. */
static const char *arena_changed(const arena *a, const mdc_xsum *xs0, size_t *at) {
    for (int i = 0; i < NBUF; i++) {
        long o = sentinel_differs(i, a->buf[i].p, a->buf[i].bytes);
        if (o >= 0) {
            *at = (size_t)o;
            return a->buf[i].name;
        }
    }
    *at = 0;
    const mdc_xsum *x = &a->xs;
    int same = x->v == xs0->v && x->n == xs0->n && x->slot == xs0->slot && x->nslot == xs0->nslot &&
               x->cap == xs0->cap && x->oom == xs0->oom;
    return same ? NULL : "xsum struct";
}

/* Runs case k at the small shape s (on a's buffers) on a normal and on a dry device; the kernels it charged. */
static double run_small(arena *a, const sh *s, int k, int dtype, const char *cfg) {
    const char *name = cases[k].name;
    mdc_device *dn = device(0, dtype), *dd = device(1, dtype);
    arena_real(a);
    cases[k].fn(dn, s);
    arena_sentinel(a);
    mdc_xsum xs0 = a->xs;
    running = name;
    cases[k].fn(dd, s);
    running = "?";

    figures fn = figures_of(dn), fd = figures_of(dd);
    for (int i = 0; i < 6; i++)
        if (memcmp(&fn.v[i], &fd.v[i], sizeof(double))) {
            TU_CHECK(0, "%s (%s): counter %s: normal %.17g, dry %.17g", name, cfg, fig_name[i], fn.v[i], fd.v[i]);
            break;
        }
    char *en = kernel_events(dn), *ed = kernel_events(dd);
    TU_CHECK(!strcmp(en, ed), "%s (%s): trace events differ:\n    %s", name, cfg, first_diff(en, ed));
    size_t at;
    const char *changed = arena_changed(a, &xs0, &at);
    TU_CHECK(!changed, "%s (%s): the dry run changed buffer %s (byte %zu)", name, cfg, changed, at);
    TU_CHECK(fn.v[3] >= 1, "%s (%s): no kernel charged", name, cfg);
    free(en), free(ed);
    mdc_device_free(dn), mdc_device_free(dd);
    return fn.v[3];
}

/* Runs case k on a dry device at a predict-sized shape, every tensor on an inaccessible page;
 * the kernels it charged. */
static double run_huge(int k, const sh *s) {
    mdc_device *dd = device(1, 2);
    running = cases[k].name;
    cases[k].fn(dd, s);
    running = "?";
    figures f = figures_of(dd);
    for (int i = 0; i < 6; i++)
        TU_CHECK(isfinite(f.v[i]) && f.v[i] >= 0, "%s (huge): counter %s = %g", cases[k].name, fig_name[i], f.v[i]);
    mdc_device_free(dd);
    return f.v[3];
}

int main(void) {
    signal(SIGSEGV, on_fault);
    signal(SIGBUS, on_fault);
    arena a;
    sentinels_init();
    arena_init(&a);
    sh small = {0}; /* two tiles of attention, the second partial; a pair that sees part of its keys */
    small.B = 2, small.T = 70, small.NH = 4, small.KV = 2, small.d = 6, small.C = 24, small.V = 37, small.Vp = 40;
    small.OC = 96, small.F = 32, small.blk = 10, small.nq = 50, small.nk = 60, small.qpos0 = 40, small.kpos0 = 20;
    for (int i = 0; i < NF; i++) small.f[i] = a.f[i];
    small.ids = a.ids, small.pos = a.pos, small.xs = &a.xs, small.ex = a.ex;
    mdc_dropout drop = {0};
    drop.p = 0.1f, drop.seed = 7, drop.step = 3, drop.layer = 2, drop.site = MDC_DROP_MLP_OUT, drop.pos = a.pos;
    drop.T = 128, drop.C = small.C, drop.H = small.NH;

    /* The predict-sized shape: every pointer on a page that may not be read or written. */
    size_t page = 1 << 16;
    void *none = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (none == MAP_FAILED) {
        fprintf(stderr, "test_dry_kernels: mmap failed\n");
        return 1;
    }
    mdc_xsum xs_none = {.v = none, .n = (size_t)1 << 40, .slot = none};
    mdc_dropout drop_none = drop;
    drop_none.pos = none, drop_none.T = 2048, drop_none.C = 12288, drop_none.H = 96;
    sh huge = {0}; /* GPT-3 175B's widths, 8 kv heads, one sequence of 2048 (products of 12288 x 49152) */
    huge.B = 1, huge.T = 2048, huge.NH = 96, huge.KV = 8, huge.d = 128, huge.C = 12288, huge.V = 50257;
    huge.Vp = 50304, huge.OC = 49152, huge.F = 49152, huge.blk = 128, huge.nq = 2048, huge.nk = 2048;
    for (int i = 0; i < NF; i++) huge.f[i] = none;
    huge.ids = none, huge.pos = none, huge.xs = &xs_none, huge.ex = none, huge.drop = &drop_none;

    double kernels = 0, t0 = mdc_wall_time();
    for (int k = 0; k < NCASES; k++) {
        small.drop = NULL;
        kernels += run_small(&a, &small, k, 4, "fp32");
        small.drop = &drop;
        double n16 = run_small(&a, &small, k, 2, "bf16, dropout 0.1");
        kernels += n16;
        double nh = run_huge(k, &huge);
        TU_CHECK(nh == n16, "%s (huge): %g kernels charged, %g at the small shape", cases[k].name, nh, n16);
    }
    double wall = mdc_wall_time() - t0;
    printf("test_dry_kernels: %d cases x 2 configurations (fp32; bf16 with dropout): %.0f kernels charged the same "
           "normal and dry, no buffer touched; the predict-sized shape dry with inaccessible tensors; %.2f s\n",
           NCASES, kernels, wall);
    munmap(none, page);
    arena_free(&a);
    free(sentinels);
    return tu_finish("test_dry_kernels");
}
