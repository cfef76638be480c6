/* Tensor parallelism (TP) and Megatron sequence parallelism (SP), composed with data
 * parallelism and ZeRO 0-3, against the serial model, through the trainer (train.h).
 * Every mesh tp x dp = N runs (N=4: tp4, tp2 x dp2, dp4; N=3: tp3, dp3; N=2: tp2, dp2;
 * N=1: a one-rank mesh; N=6 and 8: tp3 x dp2 and tp4 x dp2), with SP off and on where tp > 1, and every ZeRO stage 0-3
 * (all 30 cases at N=4, dropout included, stay well under a minute on 2 cores);
 * gradient accumulation 2 where zero + sp is odd. Each case checks against serial:
 *  (a) one forward of every micro-batch through the block API: the loss (rel 1e-6) and every
 *      real logit, gathered from the vocabulary shards over tp and the rows over dp (within
 *      1e-5 of max |logit|); padding columns >= V are ignored. For every stage: ZeRO-3 leaves
 *      the embedding and head gathered after a forward, which the next step's forward reuses;
 *  (b) ZeRO-0: the first step's gradients in the global layout, per tensor
 *      max |a - b| <= 1e-5 max |b|;
 *  (c) 10 AdamW steps (lr 1e-3, clip 1) on varying batches: each step's loss (rel 1e-5) and
 *      gradient norm (rel 1e-5), then every parameter within AdamW's reach of serial's
 *      (check_reach; a relative limit per tensor would measure how AdamW turns the rounding
 *      noise of near-zero gradients, such as attn.c_attn.bias's key part, whose exact
 *      gradient is 0, into steps of lr: docs/oracle.md).
 * Replicated tensors are compared bit for bit across tp ranks after every step
 * (check_replicas), and ZeRO-3 poisons non-resident parameters with NaN. The serial
 * reference (one micro-batch of the whole global batch) runs once, on rank 0, for each dropout
 * setting: off, and 0.1 on the attention probabilities and both residual branches (with ZeRO 0
 * and 2), where every mesh must drop exactly the elements serial drops.
 * Sizes: V=300 pads to Vp=384; Vp, H=12, 4C=192 and T=12 are divisible by 1, 2, 3 and 4, so
 * the last vocabulary shard holds padding and SP splits the sequence on every tp; the global
 * batch (8, 12 at N=3) divides by dp x accum on every mesh. */
#include "testutil.h"

#include "minidc/kernels.h"
#include "minidc/train.h"

enum { STEPS = 10 };
static const mdc_gpt2_config CFG = {.V = 300, .T = 12, .L = 2, .H = 12, .C = 48};

static void batch(int *in, int *tg, int step, int n, int V) {
    for (int i = 0; i < n; i++) {
        uint64_t x = (uint64_t)step * 1000003u + (uint64_t)i * 7919u + 17;
        x ^= x >> 13, x *= 0x9e3779b97f4a7c15ull, x ^= x >> 29;
        in[i] = (int)(x % (uint64_t)V);
        tg[i] = (int)((x >> 20) % (uint64_t)V);
    }
}

/* One forward of micro-batch rows [row0, row0 + mb) through the block API; the loss sum. */
static double forward(mdc_gpt2 *m, const int *in, const int *tg, int row0, int mb, int T) {
    mdc_gpt2_acts *a = mdc_gpt2_default_acts(m);
    int lo, hi;
    mdc_gpt2_acts_layers(a, &lo, &hi);
    double sum = 0;
    MDC_CHECK(mdc_gpt2_set_batch(a, in + (size_t)row0 * T, tg + (size_t)row0 * T, mb, T));
    mdc_gpt2_acts_set_row0(a, row0); /* the dropout masks' key */
    MDC_CHECK(mdc_gpt2_embed_forward(m, a));
    for (int l = lo; l < hi; l++) MDC_CHECK(mdc_gpt2_block_forward(m, a, l));
    MDC_CHECK(mdc_gpt2_head_forward(m, a, &sum));
    return sum;
}

typedef struct {
    double max_diff, max_ref; /* max |a - b|, max |b| */
    size_t first_bad;         /* first index over the limit (SIZE_MAX: none) */
    float got, want;          /* at first_bad */
} cmp;
/* max |a - b| over n elements against `rel` x max |b| (NaN counts as infinite). */
static cmp compare(const float *a, const float *b, size_t n, double rel) {
    cmp c = {0, 0, SIZE_MAX, 0, 0};
    for (size_t j = 0; j < n; j++) c.max_ref = fmax(c.max_ref, fabs((double)b[j]));
    for (size_t j = 0; j < n; j++) {
        double e = fabs((double)a[j] - b[j]);
        if (isnan(e)) e = INFINITY;
        c.max_diff = fmax(c.max_diff, e);
        if (e > rel * c.max_ref && c.first_bad == SIZE_MAX) c.first_bad = j, c.got = a[j], c.want = b[j];
    }
    return c;
}
static double ratio(cmp c) { return c.max_ref > 0 ? c.max_diff / c.max_ref : c.max_diff; }

/* The serial reference: the forward of batch 0, the first step's gradients, every step's loss
 * and norm, the parameters after STEPS steps. */
typedef struct {
    float *logits, *grads, *params;
    double fwd_loss;
    float loss[STEPS], norm[STEPS];
} reference;

static void serial_run(reference *R, mdc_runtime *rt, const mdc_gpt2_config *cfg, int B, int *in, int *tg,
                       const mdc_adamw_config *opt, float dropout) {
    int T = cfg->T;
    size_t P = mdc_gpt2_param_floats(cfg), nl = (size_t)B * T * cfg->Vp;
    mdc_device *sdev;
    mdc_trainer *ser;
    MDC_CHECK(mdc_device_create_spec(&sdev, mdc_device_get_spec(rt->dev), mdc_device_get_energy_table(rt->dev), 1,
                                     MDC_EMULATE_OFF, 1, 0));
    mdc_trainer_config sc = {*cfg, {1, 1, 1, 1, 1},       0, 0, 0, 0, B, 1, T, 0, 0, dropout, 0, NULL, NULL, 1, NULL,
                             NULL, {0, 0, 0, 0, 0, 0, 0}, 0, 0, 0, 0};
    MDC_CHECK(mdc_trainer_create(&ser, NULL, sdev, &sc, 7));
    R->logits = malloc(nl * sizeof(float)), R->grads = calloc(P, sizeof(float)), R->params = calloc(P, sizeof(float));
    batch(in, tg, 0, B * T, cfg->V);
    R->fwd_loss = forward(mdc_trainer_model(ser), in, tg, 0, B, T) / ((double)B * T);
    memcpy(R->logits, mdc_gpt2_logits(mdc_trainer_model(ser)), nl * sizeof(float));
    MDC_CHECK(mdc_trainer_grads(ser, in, tg));
    MDC_CHECK(mdc_trainer_gather_grads(ser, R->grads, 0));
    MDC_CHECK(mdc_trainer_finish_step(ser, opt, &R->loss[0], &R->norm[0]));
    for (int s = 1; s < STEPS; s++) {
        batch(in, tg, s, B * T, cfg->V);
        MDC_CHECK(mdc_trainer_step(ser, in, tg, opt, &R->loss[s], &R->norm[s]));
    }
    MDC_CHECK(mdc_trainer_gather(ser, R->params, NULL, NULL, 0));
    mdc_trainer_free(ser);
    mdc_device_free(sdev);
}

/* (a): the forward of every micro-batch of this rank's rows; logits gathered over tp then dp
 * to world rank 0 and compared with the serial logits. Returns the worst ratio and fills
 * *lrel with the loss's relative difference (rank 0). */
static double check_forward(const char *name, mdc_trainer *t, const reference *R, const mdc_gpt2_config *cfg, int B,
                            int accum, const int *in, const int *tg, double *lrel) {
    const mdc_mesh *mesh = mdc_trainer_mesh(t);
    mdc_group *gt = mdc_mesh_group(mesh, MDC_MESH_TP), *gd = mdc_mesh_group(mesh, MDC_MESH_DP);
    int tp = mdc_group_size(gt), dp = mdc_group_size(gd), tr = mdc_group_rank(gt), dr = mdc_group_rank(gd);
    int T = cfg->T, V = cfg->V, Vp = cfg->Vp, Vl = Vp / tp, mb = B / dp / accum, root = tr == 0 && dr == 0;
    size_t n = (size_t)mb * T * Vl;
    float *tpbuf = tr == 0 ? malloc(n * tp * sizeof(float)) : NULL;
    float *all = root ? malloc(n * tp * dp * sizeof(float)) : NULL;
    double lsum = 0, worst = 0, dmax = 0, lmax = 0;
    size_t first = SIZE_MAX;
    float got = 0, want = 0;
    if (root)
        for (size_t i = 0; i < (size_t)B * T; i++)
            for (int j = 0; j < V; j++) lmax = fmax(lmax, fabs((double)R->logits[i * Vp + j]));
    for (int k = 0; k < accum; k++) {
        lsum += forward(mdc_trainer_model(t), in, tg, (dr * accum + k) * mb, mb, T);
        MDC_CHECK(
            mdc_gather(mdc_gpt2_acts_logits(mdc_gpt2_default_acts(mdc_trainer_model(t))), tpbuf, n, MDC_F32, 0, gt));
        if (tr == 0) MDC_CHECK(mdc_gather(tpbuf, all, n * tp, MDC_F32, 0, gd));
        if (!root) continue;
        for (int d = 0; d < dp; d++)
            for (int q = 0; q < tp; q++)
                for (size_t i = 0; i < (size_t)mb * T; i++)
                    for (int j = 0; j < Vl && q * Vl + j < V; j++) {
                        size_t row = (size_t)((d * accum + k) * mb) * T + i, col = (size_t)q * Vl + j;
                        float a = all[((size_t)(d * tp + q) * mb * T + i) * Vl + j], b = R->logits[row * Vp + col];
                        double e = fabs((double)a - b);
                        if (isnan(e)) e = INFINITY;
                        dmax = fmax(dmax, e);
                        if (e > 1e-5 * lmax && first == SIZE_MAX) first = row * Vp + col, got = a, want = b;
                    }
    }
    if (root) {
        worst = dmax / lmax;
        TU_CHECK(first == SIZE_MAX,
                 "%s: logits differ from serial by %.3g of max |logit| %.3g (limit 1e-5); first "
                 "bad at (row %zu, column %zu): %.9g vs serial %.9g",
                 name, worst, lmax, first / Vp, first % Vp, got, want);
    }
    /* the loss: the tp copies are the same, so tp rank 0's sums add over dp */
    double *sums = root ? calloc((size_t)dp, sizeof(double)) : NULL;
    if (tr == 0) MDC_CHECK(mdc_gather(&lsum, sums, 1, MDC_F64, 0, gd));
    if (root) {
        double tot = 0;
        for (int d = 0; d < dp; d++) tot += sums[d];
        tot /= (double)B * T;
        *lrel = fabs(tot - R->fwd_loss) / fabs(R->fwd_loss);
        TU_CHECK(*lrel <= 1e-6, "%s: forward loss %.9g vs serial %.9g (relative %.3g)", name, tot, R->fwd_loss, *lrel);
    }
    free(sums), free(tpbuf), free(all);
    return worst;
}

/* Per tensor of the global layout: the worst max |a - b| / max |b|; reports a tensor over
 * `rel` with its first bad index. *l2 (if not NULL): ||a - b|| / ||b|| over every tensor. */
static double check_tensors(const char *name, const char *what, const mdc_gpt2_config *cfg, const float *a,
                            const float *b, double rel, char *worst_name, double *l2) {
    double worst = 0, d2 = 0, b2 = 0;
    for (int i = 0; i < mdc_gpt2_tensor_count(cfg); i++) {
        mdc_param_tensor p;
        MDC_CHECK(mdc_gpt2_tensor_at(cfg, i, &p));
        cmp c = compare(a + p.offset, b + p.offset, p.numel, rel);
        for (size_t j = 0; j < p.numel; j++) {
            double e = (double)a[p.offset + j] - b[p.offset + j];
            d2 += e * e, b2 += (double)b[p.offset + j] * b[p.offset + j];
        }
        if (!(ratio(c) <= worst)) worst = ratio(c), snprintf(worst_name, 64, "%s", p.name);
        TU_CHECK(c.first_bad == SIZE_MAX,
                 "%s: %s of %s: max |mesh - serial| %.3g is %.3g of max |serial| %.3g "
                 "(limit %g); first bad index %zu: %.9g vs serial %.9g",
                 name, what, p.name, c.max_diff, ratio(c), c.max_ref, rel, c.first_bad, c.got, c.want);
    }
    if (l2) *l2 = b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
    return worst;
}

/* After `steps` AdamW steps from the same parameters, mesh and serial can be apart by at most
 * reach = sum_t 2 lr mdc_adamw_reach(t) per parameter, whatever their gradients (a sign flip of
 * a near-zero gradient moves a parameter by up to 2 lr: a per-tensor relative limit measures
 * those, not correctness). Every parameter within it; returns the worst |a - b| / reach and
 * ||a - b|| / ||b|| (shown only) in *l2. */
static double check_reach(const char *name, const mdc_gpt2_config *cfg, const float *a, const float *b,
                          const mdc_adamw_config *opt, int steps, char *worst_name, double *l2) {
    double reach = 0, worst = 0, d2 = 0, b2 = 0;
    for (int t = 1; t <= steps; t++) reach += 2.0 * opt->lr * mdc_adamw_reach(opt->beta1, opt->beta2, t) * (1 + 1e-3);
    for (int i = 0; i < mdc_gpt2_tensor_count(cfg); i++) {
        mdc_param_tensor p;
        MDC_CHECK(mdc_gpt2_tensor_at(cfg, i, &p));
        size_t bad = SIZE_MAX;
        double tmax = 0;
        for (size_t j = p.offset; j < p.offset + p.numel; j++) {
            double e = fabs((double)a[j] - b[j]);
            if (!(e <= reach) && bad == SIZE_MAX) bad = j - p.offset;
            tmax = fmax(tmax, e), d2 += e * e, b2 += (double)b[j] * b[j];
        }
        if (tmax / reach > worst) worst = tmax / reach, snprintf(worst_name, 64, "%s", p.name);
        TU_CHECK(bad == SIZE_MAX,
                 "%s: parameter %s[%zu] after %d steps: %.9g vs serial %.9g, beyond AdamW's reach "
                 "%.3g",
                 name, p.name, bad, steps, a[p.offset + bad], b[p.offset + bad], reach);
    }
    *l2 = b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
    return worst;
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    mdc_kernels_init();
    mdc_coll_prefer_ring(); /* as minidc train runs */
    int N = rt.size, r = rt.rank;
    mdc_gpt2_config cfg = CFG;
    MDC_CHECK(mdc_gpt2_config_check(&cfg));
    int T = cfg.T, B = N == 3 ? 12 : N <= 4 ? 8 : 2 * N; /* divisible by dp x accum on every mesh */
    size_t P = mdc_gpt2_param_floats(&cfg);
    int *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
    float *got = calloc(P, sizeof(float));
    mdc_adamw_config opt;
    mdc_adamw_config_default(&opt);
    opt.lr = 1e-3f, opt.grad_clip = 1.0f;
    static const float drops[2] = {0, 0.1f};
    reference refs[2] = {{0}, {0}};
    double t0 = mdc_wall_time();
    for (int di = 0; di < 2 && r == 0; di++) serial_run(&refs[di], &rt, &cfg, B, in, tg, &opt, drops[di]);
    /* else a dropout that does nothing would pass every dropout case. At initialization the
     * logits are near uniform and the loss near ln V whatever is dropped: p = 0.1 moves it by
     * about 1e-4, while the same forward without dropout repeats its loss to the bit, so a
     * difference of 1e-6 (10 ulp) can only come from the masks. */
    if (r == 0)
        TU_CHECK(fabs(refs[1].fwd_loss - refs[0].fwd_loss) > 1e-6, "dropout 0.1 left the loss at %.9g (without: %.9g)",
                 refs[1].fwd_loss, refs[0].fwd_loss);
    int cases = 0;
    for (int tp = N; tp >= 1; tp--) {
        if (N % tp) continue;
        /* 6 and 8 ranks: tp 3 and tp 4 composed with dp 2 (the smaller meshes run at 1-4 ranks) */
        if (N > 4 && N / tp != 2) continue;
        int dp = N / tp;
        for (int di = 0; di < 2; di++)
            for (int sp = 0; sp <= (tp > 1); sp++)
                for (int z = 0; z <= 3; z++) {
                    if (di && (z == 1 || z == 3)) continue; /* dropout: stages 0 and 2 bound the runtime */
                    int accum = 1 + ((z + sp) & 1), mb = B / dp / accum;
                    const reference *Rp = &refs[di];
#define R (*Rp)
                    char name[80];
                    snprintf(name, sizeof name, "tp %d dp %d sp %d zero %d accum %d%s", tp, dp, sp, z, accum,
                             di ? " drop 0.1" : "");
                    mdc_trainer_config tc = {
                        cfg,  {tp, 1, 1, dp, 1},     sp, z, 0, 0, mb, accum, T, 1, 1, drops[di], 0, NULL, NULL, 1, NULL,
                        NULL, {0, 0, 0, 0, 0, 0, 0}, 0,  0, 0, 0};
                    mdc_trainer *t;
                    MDC_CHECK(mdc_trainer_create(&t, rt.tr, rt.dev, &tc, 7));
                    double lrel = 0, lmax = 0, nmax = 0, gw = 0, pw, l2;
                    char gname[64] = "-", pname[64] = "";
                    float loss, norm;
                    batch(in, tg, 0, B * T, cfg.V);
                    double fw = check_forward(name, t, &R, &cfg, B, accum, in, tg, &lrel);
                    if (z == 0) { /* (b) the first step's gradients, in the global layout */
                        MDC_CHECK(mdc_trainer_grads(t, in, tg));
                        MDC_CHECK(mdc_trainer_gather_grads(t, got, 0));
                        if (r == 0) gw = check_tensors(name, "gradient", &cfg, got, R.grads, 1e-5, gname, NULL);
                        MDC_CHECK(mdc_trainer_finish_step(t, &opt, &loss, &norm));
                    } else {
                        MDC_CHECK(mdc_trainer_step(t, in, tg, &opt, &loss, &norm));
                    }
                    for (int s = 0; s < STEPS; s++) { /* (c) */
                        if (s > 0) {
                            batch(in, tg, s, B * T, cfg.V);
                            MDC_CHECK(mdc_trainer_step(t, in, tg, &opt, &loss, &norm));
                        }
                        if (r != 0) continue;
                        double dl = fabs((double)loss - R.loss[s]) / fabs(R.loss[s]);
                        double dn = fabs((double)norm - R.norm[s]) / fabs(R.norm[s]);
                        lmax = fmax(lmax, dl), nmax = fmax(nmax, dn);
                        TU_CHECK(dl <= 1e-5, "%s: step %d loss %.9g vs serial %.9g (relative %.3g)", name, s + 1, loss,
                                 R.loss[s], dl);
                        TU_CHECK(dn <= 1e-5, "%s: step %d gradient norm %.9g vs serial %.9g (relative %.3g)", name,
                                 s + 1, norm, R.norm[s], dn);
                    }
                    MDC_CHECK(mdc_trainer_gather(t, got, NULL, NULL, 0));
                    if (r == 0) {
                        pw = check_reach(name, &cfg, got, R.params, &opt, STEPS, pname, &l2);
                        printf("%-34s fwd loss %.1e logits %.1e | grads %.1e (%s) | %d steps: loss %.1e norm %.1e "
                               "params %.1e, worst %.1e of the reach (%s)\n",
                               name, lrel, fw, gw, gname, STEPS, lmax, nmax, l2, pw, pname);
                        fflush(stdout);
                    }
                    mdc_trainer_free(t);
                    cases++;
#undef R
                }
    }
    if (r == 0) printf("test_tp N %d: %d cases in %.2f s\n", N, cases, mdc_wall_time() - t0);
    for (int di = 0; di < 2; di++) free(refs[di].logits), free(refs[di].grads), free(refs[di].params);
    free(in), free(tg), free(got);
    int rc = tu_finish("test_tp");
    mdc_runtime_finalize(&rt);
    return rc;
}
