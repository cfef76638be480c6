/* Grader of lab 2 (labs/lab2_ddp.c): the student's bucketed DDP reducer on a small GPT-2 (V=128
 * T=16 L=3 H=2 C=32: 40 tensors, Psi = 42784 floats), one replica per rank. The grader calls
 * lab_ddp_grad_ready for every tensor in backward order, then lab_ddp_finish, and sees each
 * all-reduce the reducer issues (an allreduce algorithm of its own, the ring inside, forced for
 * the run) and each byte it sends (the transport's trace). At the world's p ranks:
 *   - integer gradients (sums exact in any order), buckets of 4096 B, 16896 B and 1 MiB: every
 *     element the sum over the ranks, bit for bit; the buckets of the rule (greedy in backward
 *     order, each <= the size unless one tensor is larger: 26, 12 and 1 of them), each
 *     all-reduced in the grad_ready of its last tensor; bytes sent per rank 2(p-1)/p x 4 Psi
 *     (within the ring's uneven blocks; the ranks' total exactly 2(p-1) x 4 Psi);
 *   - training on 12 rows of 16 tokens split over the ranks, each backward scaled by 1 / (global
 *     tokens), grad_ready called from the model's POST_BACKWARD hooks: step 1's gradients within a
 *     float sum's rounding of the sum of the ranks' own, the buckets, the bytes, communication
 *     hidden under backward (the comm stream) and all of it waited for by finish; after 3 AdamW
 *     steps every replica holds rank 0's bits;
 *   - exact mode (docs/exactness.md): step 1's gradients and the parameters after 3 steps are
 *     those of one process trained on the whole batch, bit for bit.
 * At p = 4 it prints the training run's buckets and when each all-reduce was issued.
 * Ranks: 1 2 3 4 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"
#include "minidc/algorithms.h"
#include "minidc/kernels.h"
#include "minidc/model.h"

typedef struct lab_ddp lab_ddp;
mdc_status lab_ddp_create(lab_ddp **out, mdc_gpt2 *m, mdc_group *g, size_t bucket_bytes);
mdc_status lab_ddp_grad_ready(lab_ddp *d, int t);
mdc_status lab_ddp_finish(lab_ddp *d);
void lab_ddp_free(lab_ddp *d);

enum { SEQ = 16, ROWS = 12, STEPS = 3, XBLOCK = 8, MAXT = 64, FINISH = -1, OUTSIDE = -2 };
static mdc_gpt2_config CFG = {.V = 128, .T = SEQ, .L = 3, .H = 2, .C = 32};
#define TRAIN_CAP ((size_t)20000)
#define EXACT_CAP ((size_t)6000)
static int NT; /* tensors */
static mdc_param_tensor TEN[MAXT];
static size_t PSI; /* gradient elements */

/* The buckets of the rule, in backward order: bucket k is tensors hi[k] down to lo[k]. */
typedef struct {
    int n, hi[MAXT], lo[MAXT];
    size_t elems[MAXT];
} plan;

static void plan_buckets(size_t cap, plan *pl) {
    memset(pl, 0, sizeof *pl);
    size_t bytes = 0;
    for (int t = NT - 1; t >= 0; t--) {
        size_t b = TEN[t].alloc * sizeof(float);
        if (bytes && bytes + b > cap) pl->n++, bytes = 0;
        if (!bytes) pl->hi[pl->n] = t;
        pl->lo[pl->n] = t, pl->elems[pl->n] += TEN[t].alloc, bytes += b;
    }
    pl->n++;
}

/* What the student's calls did while `on`: each all-reduce (the call it came from, its size, type
 * and op), the bytes sent and the virtual time inside the all-reduces. */
typedef struct {
    int event;
    size_t count;
    mdc_dtype t;
    mdc_op op;
} call;
static struct {
    int on, event, n; /* n: all-reduces, the first MAXT in c */
    call c[MAXT];
    double bytes, dt;
} seen;

static mdc_status graded_ring(const void *s, void *r, size_t count, mdc_dtype t, mdc_op op, mdc_group *g) {
    mdc_device *dev = mdc_transport_device(mdc_group_transport(g));
    double t0 = mdc_dev_now(dev);
    mdc_status st = mdc_allreduce_ring(s, r, count, t, op, g);
    if (!seen.on) return st;
    if (seen.n < MAXT) seen.c[seen.n] = (call){seen.event, count, t, op};
    seen.n++;
    seen.dt += mdc_dev_now(dev) - t0;
    return st;
}

static void on_message(void *ctx, int is_send, int me, int peer, size_t bytes, int tag) {
    (void)ctx, (void)me, (void)peer, (void)tag;
    if (is_send && seen.on) seen.bytes += (double)bytes;
}

static void seen_start(void) {
    memset(&seen, 0, sizeof seen);
    seen.event = OUTSIDE, seen.on = 1;
}

static const char *event_name(int e, char *buf, size_t cap) {
    if (e >= 0) snprintf(buf, cap, "grad_ready(d, %d)", e);
    else snprintf(buf, cap, "%s", e == FINISH ? "lab_ddp_finish" : "outside your calls");
    return buf;
}

/* One reducer at work: the student's first failure, as text. */
typedef struct {
    mdc_gpt2 *m;
    lab_ddp *d;
    float *snap; /* float mode: each tensor's own gradient, copied just before its grad_ready */
    int watch;   /* 1: record the calls, and the clock before backward (c0) and after finish (c1) */
    mdc_dev_counters c0, c1;
    mdc_status st;
    char fail[160];
} run;

static mdc_status failed(run *r, mdc_status st, const char *what) {
    char s[160];
    if (st && !r->st) r->st = st, snprintf(r->fail, sizeof r->fail, "%s %s", what, grade_status_text(st, s, sizeof s));
    return st;
}

static mdc_status ready(run *r, int t) {
    if (r->snap) memcpy(r->snap + TEN[t].offset, mdc_gpt2_grads(r->m) + TEN[t].offset, TEN[t].alloc * sizeof(float));
    char what[48];
    seen.event = t;
    mdc_status st = failed(r, lab_ddp_grad_ready(r->d, t), event_name(t, what, sizeof what));
    seen.event = OUTSIDE;
    return st;
}

static mdc_status finish(run *r) {
    seen.event = FINISH;
    mdc_status st = failed(r, lab_ddp_finish(r->d), "lab_ddp_finish");
    seen.event = OUTSIDE;
    return st;
}

/* POST_BACKWARD(u): unit u's tensors are complete, the last first. */
static mdc_status hook(void *ctx, mdc_gpt2_hook_event ev, int u) {
    run *r = ctx;
    size_t off, n;
    if (ev != MDC_HOOK_POST_BACKWARD) return MDC_OK;
    mdc_gpt2_local_unit(r->m, u, &off, &n);
    for (int t = NT - 1; t >= 0; t--)
        if (TEN[t].offset >= off && TEN[t].offset < off + n && ready(r, t)) return r->st;
    return MDC_OK;
}

/* ---- the checks --------------------------------------------------------------------------- */

/* The calls against the buckets: their sizes, types and ops (part 0), or when each was issued (1). */
static int bucket_verdict(const plan *pl, int part, char *why, size_t cap) {
    char e[96];
    for (int k = 0; k < seen.n && k < pl->n; k++) {
        const call *c = &seen.c[k];
        int hi = pl->hi[k], lo = pl->lo[k];
        if (part == 0 && c->count != pl->elems[k]) {
            snprintf(why, cap, "all-reduce %d summed %zu elements; bucket %d is tensors %d (%s) down to %d (%s), %zu",
                     k + 1, c->count, k + 1, hi, TEN[hi].name, lo, TEN[lo].name, pl->elems[k]);
            return 0;
        }
        if (part == 0 && (c->t != MDC_F32 || c->op != MDC_SUM)) {
            snprintf(why, cap, "all-reduce %d: %s with op %s; DDP sums (MDC_SUM) the sink's elements (f32)", k + 1,
                     mdc_dtype_name(c->t), mdc_op_name(c->op));
            return 0;
        }
        if (part == 1 && c->event != lo) {
            snprintf(why, cap, "bucket %d (tensors %d..%d) was all-reduced in %s; it was full at grad_ready(d, %d)",
                     k + 1, hi, lo, event_name(c->event, e, sizeof e), lo);
            return 0;
        }
    }
    if (seen.n != pl->n) {
        snprintf(why, cap, "%d all-reduces; the rule makes %d buckets (the first: tensors %d..%d, %zu elements)",
                 seen.n, pl->n, pl->hi[0], pl->lo[0], pl->elems[0]);
        return 0;
    }
    return 1;
}

/* Bytes sent per rank = 2(p-1)/p x 4 Psi, each bucket's ring blocks within p-1 elements of n/p;
 * the ranks' total exactly 2(p-1) x 4 Psi. */
static void check_bytes(grade *g, const char *name, const run *r, int nb) {
    double all[64] = {0}, total = 0, G = 4.0 * (double)PSI;
    double want = 2.0 * (g->p - 1) / g->p * G, slack = 2.0 * (g->p - 1) * 4.0 * nb;
    mdc_status st = mdc_allgather(&seen.bytes, all, 1, MDC_F64, g->rt.world);
    for (int q = 0; q < g->p; q++) total += all[q];
    char why[200];
    snprintf(why, sizeof why, "the step failed: %s", r->fail);
    if (!r->st && fabs(seen.bytes - want) > slack)
        snprintf(why, sizeof why, "sent %.0f bytes; 2(p-1)/p x %.0f = %.0f (the ring's %d buckets: within %.0f)",
                 seen.bytes, G, want, nb, slack);
    else if (!r->st)
        snprintf(why, sizeof why, "the ranks sent %.0f bytes in all; 2(p-1) x %.0f = %.0f", total, G,
                 2.0 * (g->p - 1) * G);
    grade_check(g, name, !st && !r->st && fabs(seen.bytes - want) <= slack && total == 2.0 * (g->p - 1) * G, "%s", why);
}

/* The value rank r's gradient holds at element i: small integers, so sums are exact in any order. */
static float int_value(int r, size_t i) { return (float)((int)((i * 7 + (size_t)r * 13) % 23) - 11); }

static void check_integers(grade *g, mdc_gpt2 *m, size_t cap) {
    plan pl;
    plan_buckets(cap, &pl);
    float *G = mdc_gpt2_grads(m);
    for (size_t i = 0; i < PSI; i++) G[i] = int_value(g->me, i);
    run r = {.m = m};
    seen_start();
    failed(&r, lab_ddp_create(&r.d, m, g->rt.world, cap), "lab_ddp_create");
    for (int t = NT - 1; !r.st && t >= 0; t--) ready(&r, t);
    if (!r.st) finish(&r);
    seen.on = 0;
    lab_ddp_free(r.d);
    char name[128], why[200];
    snprintf(why, sizeof why, "the step failed: %s", r.fail);
    int ok = !r.st;
    for (int k = 0; ok && k < pl.n; k++)
        for (int t = pl.hi[k]; ok && t >= pl.lo[k]; t--)
            for (size_t i = 0; ok && i < TEN[t].alloc; i++) {
                size_t at = TEN[t].offset + i;
                double want = 0;
                for (int q = 0; q < g->p; q++) want += int_value(q, at);
                if (G[at] != (float)want)
                    ok = 0,
                    snprintf(why, sizeof why, "%s[%zu] is %.9g, expected %.0f, the sum over %d ranks (bucket %d)",
                             TEN[t].name, i, G[at], want, g->p, k + 1);
            }
    snprintf(name, sizeof name, "buckets of %zu B: every gradient the sum over the ranks (integers, every bit)", cap);
    grade_check(g, name, ok, "%s", why);
    snprintf(name, sizeof name, "buckets of %zu B: the %d buckets of the rule (<= %zu B or one tensor)", cap, pl.n,
             cap);
    ok = !r.st && bucket_verdict(&pl, 0, why, sizeof why);
    grade_check(g, name, ok, "%s", why);
    snprintf(name, sizeof name, "buckets of %zu B: each all-reduced as soon as its last tensor is ready", cap);
    snprintf(why, sizeof why, "the step failed: %s", r.fail);
    ok = !r.st && bucket_verdict(&pl, 1, why, sizeof why);
    grade_check(g, name, ok, "%s", why);
    snprintf(name, sizeof name, "buckets of %zu B: bytes sent per rank = 2(p-1)/p x 4 Psi", cap);
    check_bytes(g, name, &r, pl.n);
}

static void batch(int *in, int *tg, int step, int n) {
    for (int i = 0; i < n; i++) {
        uint64_t x = (uint64_t)step * 1000003u + (uint64_t)i * 7919u + 17;
        x ^= x >> 13, x *= 0x9e3779b97f4a7c15ull, x ^= x >> 29;
        in[i] = (int)(x % (uint64_t)CFG.V), tg[i] = (int)((x >> 20) % (uint64_t)CFG.V);
    }
}

/* The first element where got and want differ bit for bit, named by tensor. */
static int same_bits(const float *got, const float *want, const char *what, char *why, size_t cap) {
    for (int t = 0; t < NT; t++)
        for (size_t i = 0; i < TEN[t].alloc; i++) {
            size_t at = TEN[t].offset + i;
            if (memcmp(&got[at], &want[at], sizeof(float))) {
                snprintf(why, cap, "%s %s[%zu] is %.9g, %.9g expected", what, TEN[t].name, i, got[at], want[at]);
                return 0;
            }
        }
    return 1;
}

/* A replica of `rows` rows on dev with the reducer's hooks (r non-NULL), in exact mode or not. */
static mdc_status replica(mdc_gpt2 **m, mdc_device *dev, int rows, int exact, run *r) {
    mdc_status st = mdc_gpt2_create(m, dev, &CFG, rows, CFG.T);
    if (!st && exact) st = mdc_gpt2_set_exact(*m, XBLOCK);
    if (st) return st;
    mdc_gpt2_init(*m, 11);
    mdc_gpt2_hooks h = {hook, r};
    if (r) r->m = *m, mdc_gpt2_set_hooks(*m, &h);
    return mdc_gpt2_zero_grad(*m);
}

/* One step on this replica's rows [row0, row0 + rows) of the global batch. */
static mdc_status step(mdc_gpt2 *m, run *r, int s, int row0, int rows) {
    int n = ROWS * SEQ, in[ROWS * SEQ], tg[ROWS * SEQ];
    batch(in, tg, s, n);
    mdc_status st = mdc_gpt2_zero_grad(m);
    if (!st) st = mdc_gpt2_forward(m, in + row0 * SEQ, tg + row0 * SEQ, rows, SEQ, NULL);
    if (r && r->watch) seen_start(), mdc_dev_get_counters(mdc_gpt2_device(m), &r->c0);
    if (!st) st = mdc_gpt2_backward_scaled(m, 1.0f / (float)n); /* the sum over ranks: the mean's gradient */
    if (st && r) failed(r, st, "the model");                    /* (a hook's failure came first) */
    if (!st && r) st = finish(r);
    if (r && r->watch) seen.on = 0, mdc_dev_get_counters(mdc_gpt2_device(m), &r->c1);
    return st;
}

static void show_buckets(const plan *pl) {
    printf("      buckets of %zu B in backward order, and the call that all-reduced each (yours):\n", TRAIN_CAP);
    for (int k = 0; k < pl->n; k++) {
        char e[48] = "none";
        printf("        %2d: tensors %2d..%2d  %-22s .. %-22s %5zu floats   %s\n", k + 1, pl->hi[k], pl->lo[k],
               TEN[pl->hi[k]].name, TEN[pl->lo[k]].name, pl->elems[k],
               k < seen.n ? event_name(seen.c[k].event, e, sizeof e) : e);
    }
}

static void check_training(grade *g, const mdc_adamw_config *opt) {
    int rows = ROWS / g->p, row0 = g->me * rows;
    plan pl;
    plan_buckets(TRAIN_CAP, &pl);
    float *snaps = calloc(PSI * (size_t)g->p, sizeof(float)), *got = calloc(PSI, sizeof(float));
    run r = {.snap = calloc(PSI, sizeof(float))};
    float *snap = r.snap;
    mdc_gpt2 *m = NULL;
    if (!snaps || !got || !r.snap) failed(&r, MDC_ERR_OOM_HOST, "the grader");
    if (!r.st) failed(&r, replica(&m, g->rt.dev, rows, 0, &r), "creating the model");
    if (!r.st) failed(&r, lab_ddp_create(&r.d, m, g->rt.world, TRAIN_CAP), "lab_ddp_create");
    for (int s = 0; s < STEPS && !r.st; s++) {
        r.watch = s == 0;
        mdc_status st = step(m, &r, s, row0, rows);
        if (s == 0) memcpy(got, mdc_gpt2_grads(m), PSI * sizeof(float)), r.snap = NULL, r.watch = 0; /* step 1's */
        if (!st) failed(&r, mdc_gpt2_update(m, opt, NULL), "the update");
    }
    seen.on = 0;
    char why[200], name[128];
    /* step 1: each element within p float roundings of the sum of the ranks' own gradients */
    snprintf(why, sizeof why, "the step failed: %s", r.fail);
    int ok = !mdc_allgather(snap, snaps, PSI, MDC_F32, g->rt.world) && !r.st;
    for (int t = 0; ok && t < NT; t++)
        for (size_t i = 0; ok && i < TEN[t].alloc; i++) {
            size_t at = TEN[t].offset + i;
            double s = 0, a = 0;
            for (int q = 0; q < g->p; q++) s += snaps[(size_t)q * PSI + at], a += fabs(snaps[(size_t)q * PSI + at]);
            if (fabs(got[at] - s) > g->p * ldexp(a, -24))
                ok = 0, snprintf(why, sizeof why, "%s[%zu] is %.9g; the sum of the ranks' gradients is %.9g",
                                 TEN[t].name, i, got[at], s);
        }
    grade_check(g, "training, step 1: gradients = the sum of the ranks' own (within a float sum's rounding)", ok, "%s",
                why);
    int ok0 = !r.st && bucket_verdict(&pl, 0, why, sizeof why);
    ok = ok0 && bucket_verdict(&pl, 1, why, sizeof why);
    snprintf(name, sizeof name,
             "training, step 1 (buckets of %zu B): the %d buckets, each issued in its last tensor's hook", TRAIN_CAP,
             pl.n);
    grade_check(g, name, ok, "%s", why);
    check_bytes(g, "training, step 1: bytes sent per rank = 2(p-1)/p x 4 Psi", &r, pl.n);
    if (g->p > 1) {
        /* with the stream: the all-reduces' time D is off the compute clock, but for finish's wait */
        double exposed = r.c1.t_comm + r.c1.t_idle - r.c0.t_comm - r.c0.t_idle,
               hidden = r.c1.t_overlap - r.c0.t_overlap, D = seen.dt;
        ok = !r.st && hidden > 0 && fabs(exposed + hidden - D) <= 1e-9 * D;
        const char *hint = hidden > 0    ? ""
                           : exposed > 0 ? ": nothing hidden (mdc_dev_stream_begin/end around each)"
                                         : ": lab_ddp_finish must wait for them (mdc_dev_stream_join)";
        snprintf(why, sizeof why, "exposed %.3f + hidden %.3f us of the all-reduces' %.3f us%s", exposed * 1e6,
                 hidden * 1e6, D * 1e6, hint);
        if (r.st) snprintf(why, sizeof why, "the step failed: %s", r.fail);
        grade_check(g, "training, step 1: all-reduces hidden under backward (comm stream), finish waits for them", ok,
                    "%s", why);
    }
    if (g->p == 4 && g->me == 0 && !r.st) show_buckets(&pl);
    /* after the steps: rank 0's parameters everywhere */
    float *P = m ? mdc_gpt2_params(m) : got;
    memcpy(got, P, PSI * sizeof(float));
    int bc = !mdc_bcast(got, PSI, MDC_F32, 0, g->rt.world);
    snprintf(why, sizeof why, "the steps failed: %s", r.fail);
    ok = bc && !r.st && same_bits(P, got, "after 3 steps", why, sizeof why);
    if (!r.st && !ok) strncat(why, " (rank 0's)", sizeof why - strlen(why) - 1);
    grade_check(g, "training: after 3 AdamW steps every replica holds rank 0's parameters, bit for bit", ok, "%s", why);
    lab_ddp_free(r.d);
    mdc_gpt2_free(m);
    free(snaps), free(got), free(snap);
}

/* Exact mode: the replicas against one process on the whole batch (its own device). */
static void check_exact(grade *g, const mdc_adamw_config *opt) {
    int rows = ROWS / g->p, row0 = g->me * rows;
    run r = {0};
    mdc_gpt2 *m = NULL, *one = NULL;
    mdc_device *sdev = NULL;
    mdc_status sst = mdc_device_create_spec(&sdev, mdc_device_get_spec(g->rt.dev),
                                            mdc_device_get_energy_table(g->rt.dev), 1, MDC_EMULATE_OFF, 1, 0);
    if (!sst) sst = replica(&one, sdev, ROWS, 1, NULL);
    failed(&r, replica(&m, g->rt.dev, rows, 1, &r), "creating the model");
    if (!r.st) failed(&r, lab_ddp_create(&r.d, m, g->rt.world, EXACT_CAP), "lab_ddp_create");
    char why[200] = "";
    int ok1 = 0, compared = 0;
    for (int s = 0; s < STEPS && !r.st && !sst; s++) {
        sst = step(one, NULL, s, 0, ROWS);
        if (!sst) step(m, &r, s, row0, rows);
        if (!sst && !r.st && s == 0)
            compared = 1, ok1 = same_bits(mdc_gpt2_grads(m), mdc_gpt2_grads(one), "step 1:", why, sizeof why);
        if (!sst && !r.st)
            failed(&r, mdc_gpt2_update(m, opt, NULL), "the update"), sst = mdc_gpt2_update(one, opt, NULL);
    }
    if (sst) snprintf(why, sizeof why, "the one-process run failed: %s", mdc_detail());
    else if (!compared) snprintf(why, sizeof why, "the step failed: %s", r.fail);
    grade_check(g, "exact mode, step 1: gradients = one process's on the whole batch, bit for bit", ok1 && !sst, "%s",
                why);
    if (sst) snprintf(why, sizeof why, "the one-process run failed: %s", mdc_detail());
    else snprintf(why, sizeof why, "the steps failed: %s", r.fail);
    int ok = !r.st && !sst && same_bits(mdc_gpt2_params(m), mdc_gpt2_params(one), "after 3 steps", why, sizeof why);
    grade_check(g, "exact mode: parameters after 3 AdamW steps = one process's, bit for bit", ok, "%s", why);
    lab_ddp_free(r.d);
    mdc_gpt2_free(m), mdc_gpt2_free(one), mdc_device_free(sdev);
}

int main(int argc, char **argv) {
    grade g;
    mdc_status st = grade_begin(&g, &argc, &argv, 20);
    if (st) {
        fprintf(stderr, "lab 2 grader: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    mdc_kernels_init();
    mdc_coll_prefer_ring();
    mdc_gpt2 *m = NULL;
    if ((st = mdc_gpt2_config_check(&CFG)) || (st = mdc_coll_register_allreduce("graded", "lab 2", graded_ring)) ||
        (st = mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "graded")) ||
        (st = mdc_gpt2_create(&m, g.rt.dev, &CFG, 1, CFG.T)) || (st = mdc_gpt2_zero_grad(m))) {
        fprintf(stderr, "lab 2 grader: %s\n", mdc_detail());
        return 2;
    }
    NT = mdc_gpt2_local_count(m), PSI = mdc_gpt2_local_floats(m);
    for (int t = 0; t < NT && t < MAXT; t++) TEN[t] = *mdc_gpt2_local_tensor(m, t);
    mdc_transport_set_trace(g.rt.tr, on_message, NULL);
    size_t caps[3] = {4096, 16896, (size_t)1 << 20}; /* 16896 B: mlp.c_fc's weight and bias exactly */
    for (int k = 0; k < 3; k++) check_integers(&g, m, caps[k]);
    mdc_gpt2_free(m);
    mdc_adamw_config opt;
    mdc_adamw_config_default(&opt);
    opt.lr = 1e-2f;
    check_training(&g, &opt);
    check_exact(&g, &opt);
    return grade_end(&g);
}
