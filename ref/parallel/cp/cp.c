/* Context parallelism (include/minidc/cp.h): the component on a cp group and its registry of
 * attention algorithms (ref/parallel/cp/cp_internal.h: ring, all-gather, Ulysses, one file
 * each), chosen by name when it is created; exact mode's variant is installed by
 * mdc_cp_set_exact. The model calls the installed forward and backward through mdc_gpt2_cp. */
#include "cp_internal.h"

static const mdc_i_cp_algo *const algos[] = {&mdc_i_cp_ring, &mdc_i_cp_allgather, &mdc_i_cp_ulysses};
enum { NALGOS = sizeof algos / sizeof algos[0] };

/* by name (NULL: ring), or NULL */
static const mdc_i_cp_algo *algo_of(const char *a) {
    for (int i = 0; i < NALGOS; i++)
        if (!strcmp(a ? a : "ring", algos[i]->name)) return algos[i];
    return NULL;
}

mdc_status mdc_cp_check(int c, int T, int Hl, int KVl, const char *layout, const char *algo) {
    int zig = !layout || !strcmp(layout, "zigzag");
    if (layout && !zig && strcmp(layout, "contiguous"))
        return mdc_fail(MDC_ERR_INVALID, "--cp-layout %s: unknown (zigzag or contiguous)", layout);
    const mdc_i_cp_algo *a = algo_of(algo);
    if (!a) return mdc_fail(MDC_ERR_INVALID, "--cp-algo %s: unknown (ring, allgather or ulysses)", algo);
    if (c < 1) return mdc_fail(MDC_ERR_INVALID, "--cp %d: must be positive", c);
    if (T % (zig ? 2 * c : c))
        return mdc_fail(MDC_ERR_INVALID,
                        "--seq %d is not divisible by %d, the %s layout's chunks for --cp %d (use a --seq "
                        "that is a multiple of %d)",
                        T, zig ? 2 * c : c, zig ? "zigzag" : "contiguous", c, zig ? 2 * c : c);
    if (KVl < 1 || Hl % KVl)
        return mdc_fail(MDC_ERR_INVALID, "%d query heads on a rank are not a multiple of its %d kv heads", Hl, KVl);
    return a->check ? a->check(c, T, Hl, KVl) : MDC_OK;
}

/* the model's entry points: the installed algorithm */
static mdc_status forward(void *ctx, mdc_device *dev, int layer, float *out, float *lse, float *qkv,
                          const mdc_dropout *drop, int B, int C, int NH) {
    mdc_cp *cp = ctx;
    (void)dev, (void)B, (void)C, (void)NH;
    cp->layer = layer;
    return cp->fwd(cp, out, lse, qkv, drop);
}

static mdc_status backward(void *ctx, mdc_device *dev, float *dqkv, const float *dout, const float *out,
                           const float *qkv, const float *lse, const mdc_dropout *drop, int B, int C, int NH) {
    mdc_cp *cp = ctx;
    (void)dev, (void)B, (void)C, (void)NH;
    return cp->bwd(cp, dqkv, dout, out, qkv, lse, drop);
}

/* ---- the component ------------------------------------------------------------------------------ */

mdc_status mdc_cp_create(mdc_cp **out, mdc_group *g, mdc_device *dev, int T, int B, int Hl, int KVl, int hs,
                         const char *layout, const char *algo) {
    *out = NULL;
    int c = mdc_group_size(g);
    mdc_status st = mdc_cp_check(c, T, Hl, KVl, layout, algo);
    if (st) return st;
    mdc_cp *cp = calloc(1, sizeof *cp);
    if (!cp) return mdc_fail(MDC_ERR_OOM_HOST, "context parallelism");
    cp->g = g, cp->dev = dev, cp->c = c, cp->r = mdc_group_rank(g), cp->T = T, cp->Tc = T / c, cp->B = B;
    cp->Hl = Hl, cp->KVl = KVl, cp->hs = hs, cp->zigzag = !layout || !strcmp(layout, "zigzag"),
    cp->algo = algo_of(algo);
    cp->fwd = cp->algo->forward, cp->bwd = cp->algo->backward;
    cp->L = T / (cp->zigzag ? 2 * c : c);
    cp->pos = malloc(sizeof(int) * (size_t)cp->Tc);
    if (!cp->pos) {
        free(cp);
        return mdc_fail(MDC_ERR_OOM_HOST, "context parallelism");
    }
    int mine[2], n = mdc_i_cp_chunks(cp, cp->r, mine);
    for (int a = 0; a < n; a++)
        for (int i = 0; i < cp->L; i++) cp->pos[a * cp->L + i] = mine[a] * cp->L + i;
    cp->algo->sizes(cp, cp->buf_floats);
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

uint16_t *mdc_i_cp_staging(mdc_cp *cp, size_t n) {
    if (n > cp->half_n) {
        uint16_t *p = realloc(cp->half, n * sizeof *p);
        if (!p) return NULL;
        cp->half = p, cp->half_n = n;
    }
    return cp->half;
}

void mdc_cp_set_dtype(mdc_cp *cp, mdc_dtype act) { cp->act = act; }

void mdc_cp_free(mdc_cp *cp) {
    if (!cp) return;
    free(cp->half);
    mdc_xsum_free(&cp->xs);
    mdc_dev_free(cp->dev, cp->xe);
    for (int i = 0; i < 8; i++) mdc_dev_free(cp->dev, cp->buf[i]);
    free(cp->pos);
    free(cp);
}

const mdc_gpt2_cp *mdc_cp_model(const mdc_cp *cp) { return &cp->model; }

mdc_status mdc_cp_set_exact(mdc_cp *cp, int blk) {
    if (blk > 0 && cp->L % blk)
        return mdc_fail(MDC_ERR_INVALID,
                        "--exact-block %d does not divide the %d positions of a context-parallel chunk "
                        "(--seq %d over %d chunks); use a block that divides %d",
                        blk, cp->L, cp->T, cp->zigzag ? 2 * cp->c : cp->c, cp->L);
    cp->exact = blk > 0 ? blk : 0;
    cp->fwd = cp->exact ? cp->algo->exact_forward : cp->algo->forward; /* installed here, once */
    cp->bwd = cp->exact ? cp->algo->exact_backward : cp->algo->backward;
    return MDC_OK;
}

void mdc_cp_set_kv_sum(mdc_cp *cp, mdc_status (*fn)(void *ctx, mdc_exact *acc, size_t n), void *ctx) {
    cp->kv_sum = fn, cp->kv_ctx = ctx;
}

void mdc_cp_slice(const mdc_cp *cp, int *out, const int *in, int rows) {
    if (!in) return;
    for (int b = 0; b < rows; b++)
        for (int t = 0; t < cp->Tc; t++) out[(size_t)b * cp->Tc + t] = in[(size_t)b * cp->T + cp->pos[t]];
}

void mdc_cp_reset_counts(mdc_cp *cp) { cp->pairs = cp->fbytes = cp->bytes = cp->calls = 0; }
void mdc_cp_set_forwards(mdc_cp *cp, int again) { cp->again = again; }
