/* Ring attention (Liu et al. 2023; ref/parallel/cp/cp_internal.h): the key blocks travel the
 * ring of the cp group, c steps, each rank attending to the block it holds while the next one
 * arrives; the backward sends the blocks round again, each carrying its dK, dV, which reach
 * their owner last. Per layer a rank sends (c-1) K forward, (c-1) K + c K backward (K a key
 * block, B T/c 2 KVl hs floats). Exact mode: cp_exact.c.
 * buffers: 0, 1 the key blocks; 2, 3 their dK, dV; 4 the arriving dK, dV; 5, 6 the rows' m and
 * l; 7 D. */
#include "cp_internal.h"
#include "minidc/fault.h"

static void ring_sizes(const mdc_cp *cp, size_t f[8]) {
    size_t n2 = (size_t)cp->B * cp->Tc * 2 * mdc_i_cp_kw(cp), ns = (size_t)cp->B * cp->Hl * cp->Tc;
    size_t v[8] = {n2, n2, n2, n2, n2, ns, ns, ns};
    memcpy(f, v, sizeof v);
}

/* Step i's key block moves on: cur (floats) is sent and the next arrives into nxt, posted in rq. In
 * 16 bits the blocks travel packed: h[i % 2] holds cur's, h[(i + 1) % 2] receives (ring_arrived
 * widens it into nxt once it is there). */
static mdc_status ring_pass(mdc_cp *cp, int i, int tag, const float *cur, float *nxt, mdc_request *rq[2]) {
    size_t n2 = cp->buf_floats[0];
    int c = cp->c, next = (cp->r + 1) % c, prev = (cp->r + c - 1) % c;
    if (!mdc_i_cp_half(cp)) {
        mdc_status st = mdc_irecv(nxt, n2 * sizeof(float), prev, tag + i, cp->g, &rq[0]);
        return st ? st : mdc_isend(cur, n2 * sizeof(float), next, tag + i, cp->g, &rq[1]);
    }
    uint16_t *h = mdc_i_cp_staging(cp, 2 * n2);
    if (!h) return mdc_fail(MDC_ERR_OOM_HOST, "context parallelism: 16-bit key blocks");
    uint16_t *hc = h + (size_t)(i % 2) * n2, *hn = h + (size_t)((i + 1) % 2) * n2;
    if (i == 0) mdc_pack_half(hc, cur, n2, cp->act == MDC_BF16);
    mdc_status st = mdc_irecv(hn, n2 * sizeof(uint16_t), prev, tag + i, cp->g, &rq[0]);
    return st ? st : mdc_isend(hc, n2 * sizeof(uint16_t), next, tag + i, cp->g, &rq[1]);
}
static void ring_arrived(mdc_cp *cp, int i, float *nxt) {
    size_t n2 = cp->buf_floats[0];
    if (mdc_i_cp_half(cp)) mdc_unpack_half(nxt, cp->half + (size_t)((i + 1) % 2) * n2, n2, cp->act == MDC_BF16);
}

static mdc_status ring_forward(mdc_cp *cp, float *out, float *lse, float *qkv, const mdc_dropout *drop) {
    double b0 = mdc_dev_bytes_sent(cp->dev);
    int c = cp->c, r = cp->r;
    mdc_status st = MDC_OK;
    mdc_i_cp_begin(cp, qkv, out);
    mdc_i_cp_pack_kv(cp, cp->buf[0], qkv);
    for (int i = 0; !st && i < c; i++) { /* step i: the block of rank r - i; the next one arrives meanwhile */
        mdc_request *rq[2] = {NULL, NULL};
        float *cur = cp->buf[i % 2], *nxt = cp->buf[(i + 1) % 2];
        if (i < c - 1) st = ring_pass(cp, i, CP_TAG_KV, cur, nxt, rq);
        /* a planted fault (minidc/fault.h): the first block received is left out */
        int skip = i == 1 && mdc_plant_here(MDC_PLANT_KV, cp->layer);
        if (!st && !skip) mdc_i_cp_attend(cp, (r - i + c) % c, qkv, cur, out, drop);
        mdc_status w = mdc_waitall(rq, 2);
        st = st ? st : w;
        if (!st && i < c - 1) ring_arrived(cp, i, nxt);
    }
    mdc_i_cp_finish(cp, qkv, out, lse);
    cp->fbytes += mdc_dev_bytes_sent(cp->dev) - b0, cp->calls++;
    return st;
}

static mdc_status ring_backward(mdc_cp *cp, float *dqkv, const float *dout, const float *out, const float *qkv,
                                const float *lse, const mdc_dropout *drop) {
    double b0 = mdc_dev_bytes_sent(cp->dev);
    size_t n2 = cp->buf_floats[0];
    int c = cp->c, r = cp->r, next = (r + 1) % c, prev = (r + c - 1) % c;
    mdc_status st = MDC_OK;
    mdc_i_cp_rowdot(cp, qkv, out, dout);
    mdc_i_cp_pack_kv(cp, cp->buf[0], qkv);
    mdc_request *dsend[2] = {NULL, NULL}; /* a dK, dV send completes when the next rank's next step takes it */
    for (int i = 0; !st && i < c; i++) {
        mdc_request *rq[3] = {NULL, NULL, NULL};
        float *cur = cp->buf[i % 2], *nxt = cp->buf[(i + 1) % 2], *acc = cp->buf[2 + i % 2], *in = cp->buf[4];
        if (i < c - 1) st = ring_pass(cp, i, CP_TAG_KVB, cur, nxt, rq);
        if (!st && i > 0) st = mdc_irecv(in, n2 * sizeof(float), prev, CP_TAG_DKV + i - 1, cp->g, &rq[2]);
        if (!st) st = mdc_waitall(&dsend[i % 2], 1); /* acc's send of two steps ago */
        if (!st) memset(acc, 0, n2 * sizeof(float));
        if (!st) mdc_i_cp_attend_back(cp, (r - i + c) % c, qkv, cur, dqkv, acc, dout, out, lse, drop);
        if (!st && i > 0 && !(st = mdc_waitall(&rq[2], 1))) /* the ranks before added theirs */
            for (size_t x = 0; x < n2; x++) acc[x] += in[x];
        if (!st) st = mdc_isend(acc, n2 * sizeof(float), next, CP_TAG_DKV + i, cp->g, &dsend[i % 2]);
        mdc_status w = mdc_waitall(rq, 3);
        st = st ? st : w;
        if (!st && i < c - 1) ring_arrived(cp, i, nxt);
    }
    /* this rank's own block, with every rank's share */
    if (!st) st = mdc_recv(cp->buf[4], n2 * sizeof(float), prev, CP_TAG_DKV + c - 1, cp->g);
    mdc_status w = mdc_waitall(dsend, 2);
    st = st ? st : w;
    if (!st) mdc_i_cp_add_dkv(cp, dqkv, cp->buf[4]);
    cp->bytes += mdc_dev_bytes_sent(cp->dev) - b0;
    return st;
}

/* blocks, blocks again, dK and dV */
static double ring_bytes(const mdc_cp *cp) {
    double c = cp->c, K = cp->B * cp->Tc * 2 * (double)mdc_i_cp_kw(cp), w = mdc_i_cp_width(cp);
    return (c - 1) * w * K + (c - 1) * w * K + c * 4 * K;
}

const mdc_i_cp_algo mdc_i_cp_ring = {"ring",
                                     0,
                                     0,
                                     NULL,
                                     ring_sizes,
                                     ring_forward,
                                     ring_backward,
                                     mdc_i_cp_exact_forward,
                                     mdc_i_cp_exact_backward,
                                     mdc_i_cp_layout_pairs,
                                     ring_bytes};
