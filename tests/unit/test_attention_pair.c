/* The context-parallel attention pieces (kernels/attention_pair.c) against the tiled kernel of
 * the whole sequence (kernels/attention_tiled.c): the sequence cut into 2c chunks, each rank's
 * queries (zig-zag: chunks r and 2c-1-r; or contiguous) merge every key chunk in a shuffled
 * order, with and without dropout; the output, the lse and dq, dk, dv summed over the ranks
 * equal the whole sequence's to float rounding, and a pair whose keys all lie after its
 * queries changes nothing. */
#include "testutil.h"

enum { B = 2, NH = 3, HS = 8, C = NH * HS, C3 = 3 * C };

static float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 24) - 0.5);
}

/* the pair of query rows [qa, qa + n) of a local (B, n, .) copy against keys [ka, ka + nk) of the whole sequence */
static mdc_attn_pair pair_of(const float *qkv, int T, int qa, int n, int ka, int nk, float *o, float *m, float *l) {
    mdc_attn_pair p;
    memset(&p, 0, sizeof p);
    p.B = B, p.NH = NH, p.hs = HS, p.nq = n, p.nk = nk, p.qpos0 = qa, p.kpos0 = ka;
    p.q = qkv + (size_t)qa * C3, p.q_bs = (size_t)T * C3, p.q_ld = C3;
    p.k = qkv + (size_t)ka * C3 + C, p.v = p.k + C, p.kv_bs = (size_t)T * C3, p.kv_ld = C3;
    p.o = o + (size_t)qa * C, p.o_bs = (size_t)T * C, p.o_ld = C;
    p.m = m + qa, p.l = l + qa, p.s_bs = (size_t)NH * T, p.s_hs = (size_t)T;
    return p;
}

static void run(int T, int c, int zigzag, float drop_p) {
    mdc_device *d = tu_device(1.0);
    size_t N = (size_t)B * T;
    float *qkv = malloc(sizeof(float) * N * C3), *ref = malloc(sizeof(float) * N * C),
          *rlse = malloc(sizeof(float) * N * NH);
    float *dout = malloc(sizeof(float) * N * C), *rdqkv = calloc(N * C3, sizeof(float)),
          *dqkv = calloc(N * C3, sizeof(float));
    float *o = malloc(sizeof(float) * N * C), *m = malloc(sizeof(float) * N * NH), *l = malloc(sizeof(float) * N * NH);
    float *lse = malloc(sizeof(float) * N * NH), *D = malloc(sizeof(float) * N * NH);
    uint64_t s = 7 + (uint64_t)T;
    for (size_t i = 0; i < N * C3; i++) qkv[i] = 2 * rnd(&s);
    for (size_t i = 0; i < N * C; i++) dout[i] = rnd(&s);
    mdc_dropout dr = {drop_p, 11, 3, 1, MDC_DROP_ATTN, 0, 0, NULL, T, 0, C, 0, NH};
    const mdc_dropout *drop = drop_p > 0 ? &dr : NULL;
    mdc_attention_forward_tiled_drop(d, ref, rlse, qkv, drop, B, T, C, NH);
    mdc_attention_backward_tiled_drop(d, rdqkv, dout, ref, qkv, rlse, drop, B, T, C, NH);
    int nch = zigzag ? 2 * c : c, L = T / nch;
    for (int r = 0; r < c; r++) { /* rank r: its query chunks, every key chunk in a shuffled order */
        int mine[2] = {zigzag ? r : r, zigzag ? 2 * c - 1 - r : -1};
        for (int qi = 0; qi < 2 && mine[qi] >= 0; qi++) {
            int qa = mine[qi] * L, order[16];
            mdc_attn_pair p0 = pair_of(qkv, T, qa, L, 0, 0, o, m, l);
            mdc_attn_pair_begin(&p0);
            for (int k = 0; k < nch; k++) order[k] = (k * 5 + r + 3) % nch;
            for (int k = 0; k < nch; k++) {
                mdc_attn_pair p = pair_of(qkv, T, qa, L, order[k] * L, L, o, m, l);
                p.drop = drop;
                mdc_attn_pair_forward(d, &p);
            }
            mdc_attn_pair_finish(d, &p0, lse + qa);
            p0.dout = dout + (size_t)qa * C;
            mdc_attn_rowdot(d, &p0, D + qa);
            for (int k = 0; k < nch; k++) {
                mdc_attn_pair p = pair_of(qkv, T, qa, L, order[k] * L, L, o, m, l);
                p.drop = drop, p.dout = dout + (size_t)qa * C, p.lse = lse + qa, p.D = D + qa;
                p.dq = dqkv + (size_t)qa * C3, p.dk = dqkv + (size_t)order[k] * L * C3 + C, p.dv = p.dk + C;
                mdc_attn_pair_backward(d, &p);
            }
        }
    }
    double *want = malloc(sizeof(double) * N * C3);
    char name[96];
    for (size_t i = 0; i < N * C; i++) want[i] = ref[i];
    snprintf(name, sizeof name, "pair T=%d c=%d %s drop %.1f: out", T, c, zigzag ? "zigzag" : "contiguous", drop_p);
    tu_near_vec(name, o, want, N * C, 1e-5);
    for (size_t i = 0; i < N * NH; i++) want[i] = rlse[i];
    snprintf(name, sizeof name, "pair T=%d c=%d %s drop %.1f: lse", T, c, zigzag ? "zigzag" : "contiguous", drop_p);
    tu_near_vec(name, lse, want, N * NH, 1e-5);
    for (size_t i = 0; i < N * C3; i++) want[i] = rdqkv[i];
    snprintf(name, sizeof name, "pair T=%d c=%d %s drop %.1f: dqkv", T, c, zigzag ? "zigzag" : "contiguous", drop_p);
    tu_near_vec(name, dqkv, want, N * C3, 1e-5);
    /* keys after every query: nothing visible, nothing changes, nothing charged */
    mdc_attn_pair p = pair_of(qkv, T, 0, L, T - L, L, o, m, l);
    float before = o[3], mb = m[1];
    mdc_dev_counters c0, c1;
    mdc_dev_get_counters(d, &c0);
    if (T > L) mdc_attn_pair_forward(d, &p);
    mdc_dev_get_counters(d, &c1);
    TU_CHECK(o[3] == before && m[1] == mb, "a pair of future keys changed the rows");
    TU_CHECK(c1.t_compute == c0.t_compute, "a pair of future keys was charged");
    TU_CHECK(mdc_attn_pair_visible(&p) == 0, "future keys counted visible");
    free(qkv), free(ref), free(rlse), free(dout), free(rdqkv), free(dqkv), free(o), free(m), free(l), free(lse),
        free(D);
    free(want);
    mdc_device_free(d);
}

int main(void) {
    run(16, 1, 1, 0);
    run(16, 2, 1, 0);
    run(24, 3, 1, 0);
    run(24, 3, 0, 0);
    run(160, 2, 1, 0);   /* chunks of 40: partial tiles */
    run(256, 2, 0, 0);   /* chunks of 128: two tiles each */
    run(64, 4, 1, 0.1f); /* dropout at global positions */
    return tu_finish("test_attention_pair");
}
