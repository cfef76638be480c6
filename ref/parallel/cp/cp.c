/* Context parallelism (include/minidc/cp.h): the layouts, ring attention, all-gather attention
 * and the report. Attention is built from kernels/attention_pair.c: a run of local query rows
 * against a run of keys, at their global positions, merged into the rows' online-softmax state
 * (log-sum-exp rule), so the key blocks may arrive in any order. A key block is (B, T/c, 2 Cl):
 * the k and v columns of a rank's local positions, its chunks in order. */
#include <math.h>

#include "cp_internal.h"

int mdc_i_cp_chunks(const mdc_cp *cp, int q, int out[2]) {
    out[0] = q;
    if (!cp->zigzag) return 1;
    out[1] = 2 * cp->c - 1 - q;
    return 2;
}

static int algo_of(const char *a) {
    return !a || !strcmp(a, "ring") ? CP_RING : !strcmp(a, "allgather") ? CP_ALLGATHER : !strcmp(a, "ulysses") ? CP_ULYSSES : -1;
}

mdc_status mdc_cp_check(int c, int T, int Hl, const char *layout, const char *algo) {
    int zig = !layout || !strcmp(layout, "zigzag");
    if (layout && !zig && strcmp(layout, "contiguous"))
        return mdc_fail(MDC_ERR_INVALID, "--cp-layout %s: unknown (zigzag or contiguous)", layout);
    if (algo_of(algo) < 0) return mdc_fail(MDC_ERR_INVALID, "--cp-algo %s: unknown (ring, allgather or ulysses)", algo);
    if (c < 1) return mdc_fail(MDC_ERR_INVALID, "--cp %d: must be positive", c);
    if (T % (zig ? 2 * c : c))
        return mdc_fail(MDC_ERR_INVALID, "--seq %d is not divisible by %d, the %s layout's chunks for --cp %d (use a --seq "
                        "that is a multiple of %d)", T, zig ? 2 * c : c, zig ? "zigzag" : "contiguous", c, zig ? 2 * c : c);
    if (algo_of(algo) == CP_ULYSSES && Hl % c)
        return mdc_fail(MDC_ERR_INVALID, "--cp-algo ulysses: the %d heads on each tensor-parallel rank are not divisible "
                        "by --cp %d (ulysses gives every cp rank whole heads)", Hl, c);
    return MDC_OK;
}

/* ---- the key blocks and the pairs ------------------------------------------------------------ */

void mdc_i_cp_pack_kv(mdc_cp *cp, float *kv, const float *qkv) {
    size_t Cl = (size_t)cp->Hl * cp->hs, n = (size_t)cp->B * cp->Tc;
    for (size_t i = 0; i < n; i++) memcpy(kv + i * 2 * Cl, qkv + i * 3 * Cl + Cl, 2 * Cl * sizeof(float));
    mdc_dev_kernel(cp->dev, 0, 16.0 * (double)n * Cl, MDC_PREC_FP32);
}

void mdc_i_cp_add_dkv(mdc_cp *cp, float *dqkv, const float *dkv) {
    size_t Cl = (size_t)cp->Hl * cp->hs, n = (size_t)cp->B * cp->Tc;
    for (size_t i = 0; i < n; i++) {
        float *d = dqkv + i * 3 * Cl + Cl;
        const float *s = dkv + i * 2 * Cl;
        for (size_t x = 0; x < 2 * Cl; x++) d[x] += s[x];
    }
    mdc_dev_kernel(cp->dev, 2.0 * (double)n * Cl, 24.0 * (double)n * Cl, MDC_PREC_FP32);
}

mdc_attn_pair mdc_i_cp_pair(const mdc_cp *cp, int a, int src, int b, const float *qkv, const float *kv, float *out,
                            float *m, float *l, const mdc_dropout *drop) {
    int mine[2], theirs[2];
    mdc_i_cp_chunks(cp, cp->r, mine), mdc_i_cp_chunks(cp, src, theirs);
    size_t Cl = (size_t)cp->Hl * cp->hs, L = (size_t)cp->L;
    mdc_attn_pair p;
    memset(&p, 0, sizeof p);
    p.B = cp->B, p.NH = cp->Hl, p.hs = cp->hs, p.nq = p.nk = cp->L;
    p.qpos0 = mine[a] * cp->L, p.kpos0 = kv ? theirs[b] * cp->L : 0;
    p.q = qkv + a * L * 3 * Cl, p.q_bs = (size_t)cp->Tc * 3 * Cl, p.q_ld = (int)(3 * Cl);
    if (kv) p.k = kv + b * L * 2 * Cl, p.v = p.k + Cl;
    p.kv_bs = (size_t)cp->Tc * 2 * Cl, p.kv_ld = (int)(2 * Cl);
    p.o = out + a * L * Cl, p.o_bs = (size_t)cp->Tc * Cl, p.o_ld = (int)Cl;
    p.m = m + a * L, p.l = l + a * L, p.s_bs = (size_t)cp->Hl * cp->Tc, p.s_hs = (size_t)cp->Tc;
    p.drop = drop;
    return p;
}

/* One kernel's charge for the pieces a step runs together (as one launch on a GPU). */
static void charge(mdc_cp *cp, const mdc_attn_pair *p, int n, int kind) {
    double flops = 0, bytes = 0, f, b;
    for (int i = 0; i < n; i++) mdc_attn_pair_cost(&p[i], kind, &f, &b), flops += f, bytes += b;
    if (flops > 0 || bytes > 0) mdc_dev_kernel(cp->dev, flops, bytes, MDC_PREC_FP32);
}

/* Every local query chunk against the key block of rank src (forward): one kernel. */
static void attend(mdc_cp *cp, int src, const float *qkv, const float *kv, float *out, const mdc_dropout *drop) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0}), n = 0;
    mdc_attn_pair p[4];
    for (int a = 0; a < na; a++)
        for (int b = 0; b < na; b++) {
            p[n] = mdc_i_cp_pair(cp, a, src, b, qkv, kv, out, cp->buf[5], cp->buf[6], drop);
            cp->pairs += mdc_attn_pair_visible(&p[n]);
            mdc_attn_pair_forward(NULL, &p[n++]);
        }
    charge(cp, p, n, MDC_ATTN_FORWARD);
}

/* ... and its backward: dq of the local rows, dk and dv of the block into dkv. */
static void attend_back(mdc_cp *cp, int src, const float *qkv, const float *kv, float *dqkv, float *dkv,
                        const float *dout, const float *out, const float *lse, const mdc_dropout *drop) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0}), n = 0;
    size_t Cl = (size_t)cp->Hl * cp->hs, L = (size_t)cp->L;
    mdc_attn_pair p[4];
    for (int a = 0; a < na; a++)
        for (int b = 0; b < na; b++, n++) {
            p[n] = mdc_i_cp_pair(cp, a, src, b, qkv, kv, (float *)out, NULL, NULL, drop);
            p[n].dq = dqkv + a * L * 3 * Cl, p[n].dk = dkv + b * L * 2 * Cl, p[n].dv = p[n].dk + Cl;
            p[n].dout = dout + a * L * Cl, p[n].lse = lse + a * L, p[n].D = cp->buf[7] + a * L;
            mdc_attn_pair_backward(NULL, &p[n]);
        }
    charge(cp, p, n, MDC_ATTN_BACKWARD);
}

static void begin(mdc_cp *cp, const float *qkv, float *out) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    for (int a = 0; a < na; a++) {
        mdc_attn_pair p = mdc_i_cp_pair(cp, a, cp->r, 0, qkv, NULL, out, cp->buf[5], cp->buf[6], NULL);
        mdc_attn_pair_begin(&p);
    }
}

static void finish(mdc_cp *cp, const float *qkv, float *out, float *lse) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    mdc_attn_pair p[2];
    for (int a = 0; a < na; a++) {
        p[a] = mdc_i_cp_pair(cp, a, cp->r, 0, qkv, NULL, out, cp->buf[5], cp->buf[6], NULL);
        mdc_attn_pair_finish(NULL, &p[a], lse + a * cp->L);
    }
    charge(cp, p, na, MDC_ATTN_FINISH);
}

static void rowdot(mdc_cp *cp, const float *qkv, const float *out, const float *dout) {
    int na = mdc_i_cp_chunks(cp, cp->r, (int[2]){0});
    mdc_attn_pair p[2];
    for (int a = 0; a < na; a++) {
        p[a] = mdc_i_cp_pair(cp, a, cp->r, 0, qkv, NULL, (float *)out, NULL, NULL, NULL);
        p[a].dout = dout + (size_t)a * cp->L * cp->Hl * cp->hs;
        mdc_attn_rowdot(NULL, &p[a], cp->buf[7] + a * cp->L);
    }
    charge(cp, p, na, MDC_ATTN_ROWDOT);
}

/* ---- ring and all-gather ------------------------------------------------------------------------
 * buffers: 0, 1 key blocks (ring) or the packed own block (all-gather); 2, 3 their dK, dV (ring)
 * or the own block's (all-gather); 4 the arriving dK, dV (ring) or every rank's blocks and then
 * their dK, dV (all-gather, c blocks); 5, 6 the rows' m and l; 7 D. */

static mdc_status forward(void *ctx, mdc_device *dev, float *out, float *lse, float *qkv, const mdc_dropout *drop,
                          int B, int C, int NH) {
    mdc_cp *cp = ctx;
    (void)dev, (void)B, (void)C, (void)NH;
    if (cp->algo == CP_ULYSSES) return mdc_i_ulysses_forward(cp, out, lse, qkv, drop);
    if (cp->exact) return mdc_i_cp_exact_forward(cp, out, lse, qkv, drop);
    double b0 = mdc_dev_bytes_sent(cp->dev);
    size_t n2 = cp->buf_floats[0];
    int c = cp->c, r = cp->r, next = (r + 1) % c, prev = (r + c - 1) % c;
    mdc_status st = MDC_OK;
    begin(cp, qkv, out);
    mdc_i_cp_pack_kv(cp, cp->buf[0], qkv);
    if (cp->algo == CP_ALLGATHER) {
        st = mdc_allgather(cp->buf[0], cp->buf[4], n2, MDC_F32, cp->g);
        for (int s = 0; !st && s < c; s++) attend(cp, s, qkv, cp->buf[4] + (size_t)s * n2, out, drop);
    } else {
        for (int i = 0; !st && i < c; i++) { /* step i: the block of rank r - i; the next one arrives meanwhile */
            mdc_request *rq[2] = {NULL, NULL};
            float *cur = cp->buf[i % 2], *nxt = cp->buf[(i + 1) % 2];
            if (i < c - 1) {
                st = mdc_irecv(nxt, n2 * sizeof(float), prev, CP_TAG_KV + i, cp->g, &rq[0]);
                if (!st) st = mdc_isend(cur, n2 * sizeof(float), next, CP_TAG_KV + i, cp->g, &rq[1]);
            }
            if (!st) attend(cp, (r - i + c) % c, qkv, cur, out, drop);
            mdc_status w = mdc_waitall(rq, 2);
            st = st ? st : w;
        }
    }
    finish(cp, qkv, out, lse);
    cp->bytes += mdc_dev_bytes_sent(cp->dev) - b0, cp->calls++;
    return st;
}

static mdc_status backward(void *ctx, mdc_device *dev, float *dqkv, const float *dout, const float *out,
                           const float *qkv, const float *lse, const mdc_dropout *drop, int B, int C, int NH) {
    mdc_cp *cp = ctx;
    (void)dev, (void)B, (void)C, (void)NH;
    if (cp->algo == CP_ULYSSES) return mdc_i_ulysses_backward(cp, dqkv, dout, out, qkv, lse, drop);
    if (cp->exact) return mdc_i_cp_exact_backward(cp, dqkv, dout, out, qkv, lse, drop);
    double b0 = mdc_dev_bytes_sent(cp->dev);
    size_t n2 = cp->buf_floats[0];
    int c = cp->c, r = cp->r, next = (r + 1) % c, prev = (r + c - 1) % c;
    mdc_status st = MDC_OK;
    rowdot(cp, qkv, out, dout);
    mdc_i_cp_pack_kv(cp, cp->buf[0], qkv);
    if (cp->algo == CP_ALLGATHER) { /* gather again (nothing kept from the forward), reduce-scatter dK, dV */
        float *all = cp->buf[4], *dall = all + (size_t)c * n2;
        st = mdc_allgather(cp->buf[0], all, n2, MDC_F32, cp->g);
        memset(dall, 0, (size_t)c * n2 * sizeof(float));
        for (int s = 0; !st && s < c; s++)
            attend_back(cp, s, qkv, all + (size_t)s * n2, dqkv, dall + (size_t)s * n2, dout, out, lse, drop);
        if (!st) st = mdc_reduce_scatter(dall, cp->buf[2], n2, MDC_F32, MDC_SUM, cp->g);
        if (!st) mdc_i_cp_add_dkv(cp, dqkv, cp->buf[2]);
    } else { /* the blocks go round again; each carries its dK, dV, which arrive at the owner last */
        mdc_request *dsend[2] = {NULL, NULL}; /* a dK, dV send completes when the next rank's next step takes it */
        for (int i = 0; !st && i < c; i++) {
            mdc_request *rq[3] = {NULL, NULL, NULL};
            float *cur = cp->buf[i % 2], *nxt = cp->buf[(i + 1) % 2], *acc = cp->buf[2 + i % 2], *in = cp->buf[4];
            if (i < c - 1) {
                st = mdc_irecv(nxt, n2 * sizeof(float), prev, CP_TAG_KVB + i, cp->g, &rq[0]);
                if (!st) st = mdc_isend(cur, n2 * sizeof(float), next, CP_TAG_KVB + i, cp->g, &rq[1]);
            }
            if (!st && i > 0) st = mdc_irecv(in, n2 * sizeof(float), prev, CP_TAG_DKV + i - 1, cp->g, &rq[2]);
            if (!st) st = mdc_waitall(&dsend[i % 2], 1); /* acc's send of two steps ago */
            if (!st) memset(acc, 0, n2 * sizeof(float));
            if (!st) attend_back(cp, (r - i + c) % c, qkv, cur, dqkv, acc, dout, out, lse, drop);
            if (!st && i > 0 && !(st = mdc_waitall(&rq[2], 1))) /* the ranks before added theirs */
                for (size_t x = 0; x < n2; x++) acc[x] += in[x];
            if (!st) st = mdc_isend(acc, n2 * sizeof(float), next, CP_TAG_DKV + i, cp->g, &dsend[i % 2]);
            mdc_status w = mdc_waitall(rq, 3);
            st = st ? st : w;
        }
        /* this rank's own block, with every rank's share */
        if (!st) st = mdc_recv(cp->buf[4], n2 * sizeof(float), prev, CP_TAG_DKV + c - 1, cp->g);
        mdc_status w = mdc_waitall(dsend, 2);
        st = st ? st : w;
        if (!st) mdc_i_cp_add_dkv(cp, dqkv, cp->buf[4]);
    }
    cp->bytes += mdc_dev_bytes_sent(cp->dev) - b0;
    return st;
}

/* ---- the component ------------------------------------------------------------------------------ */

mdc_status mdc_cp_create(mdc_cp **out, mdc_group *g, mdc_device *dev, int T, int B, int Hl, int hs, const char *layout,
                         const char *algo) {
    *out = NULL;
    int c = mdc_group_size(g);
    mdc_status st = mdc_cp_check(c, T, Hl, layout, algo);
    if (st) return st;
    mdc_cp *cp = calloc(1, sizeof *cp);
    if (!cp) return mdc_fail(MDC_ERR_OOM_HOST, "context parallelism");
    cp->g = g, cp->dev = dev, cp->c = c, cp->r = mdc_group_rank(g), cp->T = T, cp->Tc = T / c, cp->B = B;
    cp->Hl = Hl, cp->hs = hs, cp->zigzag = !layout || !strcmp(layout, "zigzag"), cp->algo = algo_of(algo);
    cp->L = T / (cp->zigzag ? 2 * c : c);
    cp->pos = malloc(sizeof(int) * (size_t)cp->Tc);
    if (!cp->pos) {
        free(cp);
        return mdc_fail(MDC_ERR_OOM_HOST, "context parallelism");
    }
    int mine[2], n = mdc_i_cp_chunks(cp, cp->r, mine);
    for (int a = 0; a < n; a++)
        for (int i = 0; i < cp->L; i++) cp->pos[a * cp->L + i] = mine[a] * cp->L + i;
    size_t n2 = (size_t)B * cp->Tc * 2 * Hl * hs, ns = (size_t)B * Hl * cp->Tc;
    if (cp->algo == CP_ULYSSES) {
        mdc_i_ulysses_sizes(cp, cp->buf_floats);
    } else {
        int ag = cp->algo == CP_ALLGATHER;
        size_t f[8] = {n2, ag ? 0 : n2, n2, ag ? 0 : n2, ag ? 2 * (size_t)c * n2 : n2, ns, ns, ns};
        memcpy(cp->buf_floats, f, sizeof f);
    }
    for (int i = 0; !st && i < 8; i++)
        if (cp->buf_floats[i])
            st = mdc_dev_alloc(dev, (void **)&cp->buf[i], cp->buf_floats[i] * sizeof(float), MDC_MEM_ACTS,
                               "context-parallel attention buffers");
    cp->model = (mdc_gpt2_cp){cp, c, T, cp->pos, forward, backward};
    if (st) {
        mdc_cp_free(cp);
        return st;
    }
    *out = cp;
    return MDC_OK;
}

void mdc_cp_free(mdc_cp *cp) {
    if (!cp) return;
    mdc_xsum_free(&cp->xs);
    mdc_dev_free(cp->dev, cp->xe);
    for (int i = 0; i < 8; i++) mdc_dev_free(cp->dev, cp->buf[i]);
    free(cp->pos);
    free(cp);
}

const mdc_gpt2_cp *mdc_cp_model(const mdc_cp *cp) { return &cp->model; }

mdc_status mdc_cp_set_exact(mdc_cp *cp, int blk) {
    if (blk > 0 && cp->L % blk)
        return mdc_fail(MDC_ERR_INVALID, "--exact-block %d does not divide the %d positions of a context-parallel chunk "
                        "(--seq %d over %d chunks); use a block that divides %d", blk, cp->L, cp->T,
                        cp->zigzag ? 2 * cp->c : cp->c, cp->L);
    cp->exact = blk > 0 ? blk : 0;
    return MDC_OK;
}

void mdc_cp_slice(const mdc_cp *cp, int *out, const int *in, int rows) {
    if (!in) return;
    for (int b = 0; b < rows; b++)
        for (int t = 0; t < cp->Tc; t++) out[(size_t)b * cp->Tc + t] = in[(size_t)b * cp->T + cp->pos[t]];
}

void mdc_cp_reset_counts(mdc_cp *cp) { cp->pairs = cp->bytes = cp->calls = 0; }

/* Visible (query, key) pairs of rank q's chunks per micro-batch and layer: chunk a of length
 * L sees the a L keys before it whole and its own causal triangle. Ulysses: every rank all
 * positions of Hl / c heads. */
static double pairs_formula(const mdc_cp *cp, int q) {
    double L = cp->L, n = 0;
    if (cp->algo == CP_ULYSSES) return (double)cp->B * cp->Hl / cp->c * 0.5 * cp->T * (cp->T + 1.0);
    int ch[2], k = mdc_i_cp_chunks(cp, q, ch);
    for (int a = 0; a < k; a++) n += L * ch[a] * L + 0.5 * L * (L + 1);
    return n * cp->B * cp->Hl;
}

/* Bytes one layer's forward and backward send from each rank: K = a key block (B, T/c, 2 Cl). */
static double bytes_formula(const mdc_cp *cp) {
    double c = cp->c, n = (double)cp->B * cp->Tc, Cl = (double)cp->Hl * cp->hs, K = 4.0 * n * 2 * Cl;
    if (cp->algo == CP_RING) return (c - 1) * K + (c - 1) * K + c * K;      /* blocks, blocks again, dK dV */
    if (cp->algo == CP_ALLGATHER) return 3 * (c - 1) * K;                 /* gather twice, reduce-scatter */
    return 4.0 * (c - 1) / c * (n * 3 * Cl + n * Cl + n * Cl + n * 3 * Cl + (double)cp->B * cp->Hl * cp->Tc);
}

void mdc_cp_figures(const mdc_cp *cp, double f[4]) {
    double calls = cp->calls > 0 ? cp->calls : 1;
    f[0] = cp->pairs / calls, f[1] = pairs_formula(cp, cp->r), f[2] = cp->bytes / calls, f[3] = bytes_formula(cp);
}

size_t mdc_cp_scratch_bytes(const mdc_cp *cp) {
    size_t n = 0;
    for (int i = 0; i < 8; i++) n += cp->buf_floats[i] * sizeof(float);
    return n;
}

mdc_status mdc_cp_report(const mdc_cp *cp, size_t act_bytes, size_t serial_act_bytes, FILE *out) {
    double mine[3] = {cp->pairs, cp->bytes, cp->calls}, *all = NULL;
    if (cp->r == 0 && !(all = malloc(sizeof(double) * 3 * (size_t)cp->c)))
        return mdc_fail(MDC_ERR_OOM_HOST, "context-parallel report");
    mdc_status st = mdc_gather(mine, all, 3, MDC_F64, 0, cp->g);
    if (!st && cp->r == 0) {
        static const char *names[] = {"ring", "allgather", "ulysses"};
        double calls = all[2] > 0 ? all[2] : 1, sum = 0, mx = 0, hs = cp->hs;
        fprintf(out, "\ncontext parallel: c = %d ranks, %s layout (%d chunks of %d positions), %s; per rank per layer "
                     "and micro-batch:\n", cp->c, cp->zigzag ? "zigzag" : "contiguous", cp->zigzag ? 2 * cp->c : cp->c,
                cp->L, names[cp->algo]);
        fprintf(out, "  %-5s %14s %14s %16s %16s\n", "rank", "attn GFLOP", "formula", "bytes sent", "formula");
        for (int q = 0; q < cp->c; q++) {
            double pr = all[3 * q] / calls, f = pairs_formula(cp, q), b = all[3 * q + 1] / calls, bf = bytes_formula(cp);
            sum += pr, mx = pr > mx ? pr : mx;
            fprintf(out, "  %-5d %14.6f %14.6f %16.0f %16.0f %s\n", q, pr * (4 * hs + 5) * 1e-9, f * (4 * hs + 5) * 1e-9, b,
                    bf, fabs(pr - f) <= 1e-9 * f && fabs(b - bf) <= 0.01 * bf ? "ok" : "DIFFERS");
        }
        double want = cp->algo == CP_ULYSSES || cp->zigzag ? 1.0 : (2.0 * cp->c - 1) / cp->c;
        fprintf(out, "  forward attention FLOPs (4 hs + 5 per visible pair): max/mean %.3f (%s: %.3f as chunks grow)\n",
                mx / (sum / cp->c), cp->algo == CP_ULYSSES ? "ulysses, whole heads" : cp->zigzag ? "zigzag" : "contiguous (2c-1)/c",
                want);
        fprintf(out, "  activations of a micro-batch %.2f MiB on this rank (with the attention's buffers) against %.2f MiB "
                     "for the whole sequence (%.3f; 1/c = %.3f)\n", act_bytes / 1048576.0, serial_act_bytes / 1048576.0,
                (double)act_bytes / (double)serial_act_bytes, 1.0 / cp->c);
    }
    free(all);
    return st;
}
