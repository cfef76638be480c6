/* Exact mode's attention on one rank's whole sequence (serial and tensor parallel; context
 * parallelism runs the same kernels over its key blocks, ref/parallel/cp/cp_exact.c): kernels/
 * exact_attention.c on the pair of every position against every position, so the bits are
 * those of any split of the sequence. */
#include <math.h>

#include "../model_internal.h"

/* Scratch of at least na exact sums, cleared, and nf floats (grown on demand). */
static mdc_status scratch(mdc_gpt2 *m, size_t na, size_t nf) {
    if (na > m->x.xa.n) {
        mdc_xsum_free(&m->x.xa);
        if (mdc_xsum_init(&m->x.xa, na)) return mdc_fail(MDC_ERR_OOM_HOST, "exact attention sums (%zu)", na);
    }
    mdc_xsum_clear(&m->x.xa);
    if (nf > m->x.xf_n) {
        mdc_dev_free(m->dev, m->x.xf);
        m->x.xf = NULL, m->x.xf_n = 0;
        TRY(mdc_dev_alloc(m->dev, (void **)&m->x.xf, nf * sizeof(float), MDC_MEM_ACTS, "exact attention rows"));
        m->x.xf_n = nf;
    }
    return MDC_OK;
}

static mdc_attn_pair whole(const mdc_gpt2 *m, const mdc_gpt2_acts *a, const float *qkv, float *out,
                           const mdc_dropout *drop) {
    mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
    mdc_attn_pair p;
    memset(&p, 0, sizeof p);
    p.B = a->B, p.NH = s.Hl, p.hs = s.d, p.nq = p.nk = a->T, p.group = s.Hl / s.KVl; /* GQA: query heads per kv head */
    p.q = qkv, p.k = qkv + s.Cl, p.v = qkv + s.Cl + s.KVl * s.d, p.q_bs = p.kv_bs = (size_t)a->T * s.QKVl;
    p.q_ld = p.kv_ld = s.QKVl;
    p.o = out, p.o_bs = (size_t)a->T * s.Cl, p.o_ld = s.Cl;
    p.s_bs = (size_t)s.Hl * a->T, p.s_hs = (size_t)a->T;
    p.drop = drop;
    return p;
}

mdc_status mdc_i_x_attention_forward(mdc_gpt2 *m, mdc_gpt2_acts *a, float *out, float *lse, const float *qkv,
                                     const mdc_dropout *drop) {
    mdc_attn_pair p = whole(m, a, qkv, out, drop);
    size_t rows = (size_t)p.B * p.NH * p.nq, n = (size_t)p.B * p.nq * p.o_ld;
    TRY(scratch(m, rows + n, rows));
    for (size_t i = 0; i < rows; i++) m->x.xf[i] = -INFINITY;
    p.m = m->x.xf;
    mdc_x_attn_max(m->dev, &p, m->x.blk);
    mdc_x_attn_sum(m->dev, &p, &m->x.xa, 0, rows, m->x.blk);
    mdc_x_attn_finish(m->dev, &p, &m->x.xa, 0, rows, lse);
    return mdc_xsum_ok(&m->x.xa) ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "exact attention sums");
}

mdc_status mdc_i_x_attention_backward(mdc_gpt2 *m, mdc_gpt2_acts *a, float *dqkv, const float *dout, const float *out,
                                      const float *qkv, const float *lse, const mdc_dropout *drop) {
    mdc_attn_pair p = whole(m, a, qkv, (float *)out, drop);
    size_t rows = (size_t)p.B * p.NH * p.nq, n3 = (size_t)p.B * p.nq * p.q_ld;
    TRY(scratch(m, n3, rows));
    p.dout = dout, p.lse = lse, p.D = m->x.xf;
    mdc_x_attn_rowdot(m->dev, &p, m->x.xf);
    mdc_x_attn_backward(m->dev, &p, &m->x.xa, 0, (size_t)(p.k - qkv), (size_t)(p.v - qkv), m->x.blk);
    float *f = malloc(n3 * sizeof(float));
    if (!f) return mdc_fail(MDC_ERR_OOM_HOST, "exact attention gradients");
    mdc_xsum_round(&m->x.xa, 0, n3, f);
    mdc_status st = MDC_OK;
    if (mdc_i_kv_shared(m)) { /* a kv head on several tp ranks: dk, dv summed over them before the rounding */
        mdc_i_sizes s = mdc_i_sizes_of(m, a->B, a->T);
        st = m->comm->x_kv_sum(m->comm->ctx, f, &m->x.xa, s.n, s.QKVl, s.Cl, 2 * s.KVl * s.d);
    }
    for (size_t i = 0; !st && i < n3; i++) dqkv[i] += f[i];
    free(f);
    if (st) return st;
    mdc_dev_kernel(m->dev, (double)n3, 8.0 * (double)n3, MDC_PREC_FP32);
    return mdc_xsum_ok(&m->x.xa) ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "exact attention sums");
}
