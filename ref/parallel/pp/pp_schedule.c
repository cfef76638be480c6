/* Pipeline schedules as data (include/minidc/pp.h): the builders, the validation by simulation,
 * and the text grid of `minidc explain pipeline`. */
#include <stdlib.h>
#include <string.h>

#include "minidc/model.h"
#include "pp_internal.h"

mdc_status mdc_pp_schedule_push(mdc_pp_schedule *s, int stage, char kind, int mb, int chunk) {
    if (!s || !s->n || stage < 0 || stage >= s->p)
        return mdc_fail(MDC_ERR_INVALID, "schedule %s: mdc_pp_schedule_push: stage %d outside 0..%d", s ? s->name : "?",
                        stage, s ? s->p - 1 : -1);
    int n = s->n[stage];
    if (n == 0 || (n >= 16 && (n & (n - 1)) == 0)) { /* capacity 16, then doubled when full */
        mdc_pp_action *a = realloc(s->a[stage], (size_t)(n ? 2 * n : 16) * sizeof *a);
        if (!a) return mdc_fail(MDC_ERR_OOM_HOST, "pipeline schedule %s: stage %d", s->name, stage);
        s->a[stage] = a;
    }
    s->a[stage][n] = (mdc_pp_action){kind, mb, chunk};
    s->n[stage] = n + 1;
    return MDC_OK;
}
/* the builders below: 1 when out of memory */
static int push_chunk(mdc_pp_schedule *s, int st, char kind, int mb, int chunk) {
    return mdc_pp_schedule_push(s, st, kind, mb, chunk) != MDC_OK;
}
static int push(mdc_pp_schedule *s, int st, char kind, int mb) { return push_chunk(s, st, kind, mb, 0); }

void mdc_pp_schedule_free(mdc_pp_schedule *s) {
    if (!s) return;
    for (int i = 0; s->a && i < s->p; i++) free(s->a[i]);
    free(s->a), free(s->n);
    memset(s, 0, sizeof *s);
}

/* The 1F1B order of F and B for stage st. */
static int one_f_one_b(mdc_pp_schedule *s, int st) {
    int p = s->p, m = s->m, w = p - st - 1 < m ? p - st - 1 : m, f = 0, b = 0, e = 0;
    for (; f < w; f++) e |= push(s, st, MDC_PP_F, f);
    for (; f < m; f++, b++) e |= push(s, st, MDC_PP_F, f), e |= push(s, st, MDC_PP_B, b);
    for (; b < m; b++) e |= push(s, st, MDC_PP_B, b);
    return e;
}

/* Megatron's interleaved 1F1B for stage st: the k-th forward runs chunk (k mod pv) / p of
 * micro-batch (k / pv) p + k mod p (groups of p micro-batches per chunk), the k-th backward the
 * same with the chunks in reverse; warm-up 2(p-st-1) + (v-1)p forwards (all of them when m = p),
 * then one forward and one backward in turn, then the remaining backwards. */
static int interleaved(mdc_pp_schedule *s, int st) {
    int p = s->p, v = s->v, total = s->m * v, e = 0;
    int w = s->m == p ? total : 2 * (p - st - 1) + (v - 1) * p;
    if (w > total) w = total;
#define MB(k) ((k) / (p * v) * p + (k) % p)
#define FCHUNK(k) ((k) % (p * v) / p)
    for (int k = 0; k < w; k++) e |= push_chunk(s, st, MDC_PP_F, MB(k), FCHUNK(k));
    for (int k = 0; k < total; k++) {
        if (k + w < total) e |= push_chunk(s, st, MDC_PP_F, MB(k + w), FCHUNK(k + w));
        e |= push_chunk(s, st, MDC_PP_B, MB(k), v - 1 - FCHUNK(k));
    }
#undef MB
#undef FCHUNK
    return e;
}

/* State of a simulation: per stage, the next action and the time its previous one ends; per
 * (virtual stage chunk p + stage, micro-batch) when its F, B and W ended (-1: not yet). */
typedef struct {
    const mdc_pp_schedule *s;
    int *next, *free_at, *fe, *be, *we;
} sim;

static int done_at(const sim *x, const int *arr, int vs, int mb) { return arr[(size_t)vs * x->s->m + mb]; }

/* The time action a of stage st can start (its inputs ready), or -1 if one is not done yet:
 * F after F of the virtual stage before, B after its F and B of the virtual stage after. */
static int ready(const sim *x, int st, const mdc_pp_action *a) {
    int P = x->s->p * x->s->v, vs = a->chunk * x->s->p + st, t = 0, d;
    if (a->kind == MDC_PP_F) {
        if (vs > 0 && (t = done_at(x, x->fe, vs - 1, a->mb)) < 0) return -1;
    } else if (a->kind == MDC_PP_B) {
        if ((d = done_at(x, x->fe, vs, a->mb)) < 0) return -1;
        t = d;
        if (vs < P - 1) {
            if ((d = done_at(x, x->be, vs + 1, a->mb)) < 0) return -1;
            t = d > t ? d : t;
        }
    } else {
        if ((t = done_at(x, x->be, vs, a->mb)) < 0) return -1;
    }
    return t;
}

static int cost(const mdc_pp_schedule *s, char kind) { return kind == MDC_PP_B && !s->split ? 2 : 1; }

/* Runs the schedule; fills tl if given. Returns the makespan or -1 (deadlock: *stuck_stage). */
static int run_sim(const mdc_pp_schedule *s, mdc_pp_timeline *tl, int *stuck_stage) {
    int p = s->p, m = s->m, v = s->v, P = p * v, total = 0, left = 0;
    size_t cells = (size_t)P * m;
    sim x = {s,
             calloc((size_t)p, sizeof(int)),
             calloc((size_t)p, sizeof(int)),
             malloc(sizeof(int) * cells),
             malloc(sizeof(int) * cells),
             malloc(sizeof(int) * cells)};
    if (!x.next || !x.free_at || !x.fe || !x.be || !x.we) {
        free(x.next), free(x.free_at), free(x.fe), free(x.be), free(x.we);
        return -2;
    }
    for (size_t i = 0; i < cells; i++) x.fe[i] = x.be[i] = x.we[i] = -1;
    for (int st = 0; st < p; st++) left += s->n[st];
    /* event loop: repeatedly start, on every stage, the next action whose inputs are ready */
    while (left) {
        int progressed = 0;
        for (int st = 0; st < p; st++) {
            if (x.next[st] >= s->n[st]) continue;
            const mdc_pp_action *a = &s->a[st][x.next[st]];
            int r = ready(&x, st, a);
            if (r < 0) continue;
            int start = r > x.free_at[st] ? r : x.free_at[st], end = start + cost(s, a->kind);
            int *arr = a->kind == MDC_PP_F ? x.fe : a->kind == MDC_PP_B ? x.be : x.we;
            size_t at = (size_t)(a->chunk * p + st) * m + a->mb;
            arr[at] = end;
            if (!s->split && a->kind == MDC_PP_B) x.we[at] = end;
            x.free_at[st] = end;
            x.next[st]++, left--, progressed = 1;
            if (end > total) total = end;
        }
        if (!progressed) {
            for (int st = 0; st < p; st++)
                if (x.next[st] < s->n[st]) {
                    *stuck_stage = st;
                    break;
                }
            total = -1;
            break;
        }
    }
    if (total >= 0 && tl) {
        memset(tl, 0, sizeof *tl);
        tl->units = total;
        tl->busy = calloc((size_t)p, sizeof(int)), tl->peak = calloc((size_t)p, sizeof(int));
        tl->cell = calloc((size_t)p * (size_t)(total ? total : 1), sizeof *tl->cell);
        if (tl->busy && tl->peak && tl->cell)
            for (int st = 0; st < p; st++) {
                for (int c = 0; c < v; c++)
                    for (int mb = 0; mb < m; mb++) {
                        size_t at = (size_t)(c * p + st) * m + mb;
                        int spans[3][2] = {{x.fe[at] - 1, x.fe[at]},
                                           {x.be[at] - cost(s, MDC_PP_B), x.be[at]},
                                           {x.we[at] - 1, x.we[at]}};
                        const char kinds[3] = {MDC_PP_F, MDC_PP_B, MDC_PP_W};
                        for (int k = 0; k < (s->split ? 3 : 2); k++)
                            for (int u = spans[k][0]; u < spans[k][1]; u++) {
                                char *cell = tl->cell[(size_t)st * total + u];
                                if (v > 1) snprintf(cell, sizeof *tl->cell, "%c%d%c", kinds[k], mb % 100, 'a' + c);
                                else snprintf(cell, sizeof *tl->cell, "%c%d", kinds[k], mb % 100);
                                tl->busy[st]++;
                            }
                    }
                for (int u = 0; u < total; u++) { /* activation sets held: F started, its B (or W) not ended */
                    int held = 0;
                    for (int c = 0; c < v; c++)
                        for (int mb = 0; mb < m; mb++) {
                            size_t at = (size_t)(c * p + st) * m + mb;
                            held += x.fe[at] - 1 <= u && x.we[at] > u;
                        }
                    if (held > tl->peak[st]) tl->peak[st] = held;
                }
            }
    }
    free(x.next), free(x.free_at), free(x.fe), free(x.be), free(x.we);
    return total;
}

int mdc_pp_simulate(const mdc_pp_schedule *s, mdc_pp_timeline *t) {
    int stuck = -1, r = run_sim(s, t, &stuck);
    return r < 0 ? -1 : r;
}

void mdc_pp_timeline_free(mdc_pp_timeline *t) {
    if (!t) return;
    free(t->busy), free(t->peak), free(t->cell);
    memset(t, 0, sizeof *t);
}

/* zb-h1: each stage follows 1F1B's order of F and B, never holding more activation sets (F
 * done, B not) than 1F1B's min(p - s, m); the W of a finished B waits in a queue and runs when
 * the stage's next F or B is not ready yet, when more than s are waiting, or at the end. Stage
 * s thus holds at most p - s + s = p sets, the 1F1B peak of stage 0 (the paper's bound), and the
 * later stages, which 1F1B leaves idle at the end, defer the most W: their B reach the earlier
 * stages sooner. With unit F, B and W the makespan is 3m + p - 1 (bubble (p-1)/(3m+p-1)), the
 * paper's ZB-H1. Built by simulating all stages at once. */
static mdc_status build_zb(mdc_pp_schedule *s) {
    int p = s->p, m = s->m;
    mdc_pp_schedule ord = {.p = p, .m = m, .v = 1, .split = 1};
    ord.n = calloc((size_t)p, sizeof(int)), ord.a = calloc((size_t)p, sizeof(mdc_pp_action *));
    int *pos = calloc((size_t)p, sizeof(int)), *freeat = calloc((size_t)p, sizeof(int));
    int *fe = malloc(sizeof(int) * (size_t)p * m), *be = malloc(sizeof(int) * (size_t)p * m);
    int *wq = malloc(sizeof(int) * (size_t)p * m), *wh = calloc((size_t)p, sizeof(int)),
        *wt = calloc((size_t)p, sizeof(int));
    int *held = calloc((size_t)p, sizeof(int));
    mdc_status st = MDC_OK;
    if (!ord.n || !ord.a || !pos || !freeat || !fe || !be || !wq || !wh || !wt || !held) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "zb-h1 schedule");
        goto done;
    }
    for (int q = 0; q < p && !st; q++)
        if (one_f_one_b(&ord, q)) st = mdc_fail(MDC_ERR_OOM_HOST, "zb-h1 schedule");
    for (int i = 0; i < p * m; i++) fe[i] = be[i] = -1;
    int left = 2 * p * m + p * m;
    while (!st && left) {
        int progressed = 0;
        for (int q = 0; q < p; q++) {
            int limit = p - q < m ? p - q : m, t = -1, ok = 0;
            const mdc_pp_action *a = pos[q] < ord.n[q] ? &ord.a[q][pos[q]] : NULL;
            if (a && a->kind == MDC_PP_F && held[q] < limit) {
                t = q > 0 ? fe[(q - 1) * m + a->mb] : 0, ok = t >= 0;
            } else if (a && a->kind == MDC_PP_B) {
                int d = q < p - 1 ? be[(q + 1) * m + a->mb] : fe[q * m + a->mb];
                t = d, ok = d >= 0 && fe[q * m + a->mb] >= 0;
                if (ok && fe[q * m + a->mb] > t) t = fe[q * m + a->mb];
            }
            int must_w = wt[q] - wh[q] > q;        /* pending W beyond what keeps the stage within p sets */
            if (ok && t <= freeat[q] && !must_w) { /* the next F or B can start now */
                freeat[q] += 1;
                if (a->kind == MDC_PP_F) fe[q * m + a->mb] = freeat[q], held[q]++;
                else be[q * m + a->mb] = freeat[q], wq[q * m + wt[q]++] = a->mb, held[q]--;
                if (push(s, q, a->kind, a->mb)) st = mdc_fail(MDC_ERR_OOM_HOST, "zb-h1 schedule");
                pos[q]++, left--, progressed = 1;
            } else if (wh[q] < wt[q]) { /* it would wait: a pending W fills the time */
                int mb = wq[q * m + wh[q]++];
                freeat[q] += 1;
                if (push(s, q, MDC_PP_W, mb)) st = mdc_fail(MDC_ERR_OOM_HOST, "zb-h1 schedule");
                left--, progressed = 1;
            } else if (ok) { /* ready later than the stage is free: idle until then */
                freeat[q] = t;
                progressed = 1;
            }
        }
        if (!progressed) { /* every stage waits on another: advance the earliest one in time */
            int q0 = -1;
            for (int q = 0; q < p; q++)
                if (pos[q] < ord.n[q] && (q0 < 0 || freeat[q] < freeat[q0])) q0 = q;
            if (q0 < 0) break;
            freeat[q0]++;
        }
    }
done:
    mdc_pp_schedule_free(&ord);
    free(pos), free(freeat), free(fe), free(be), free(wq), free(wh), free(wt), free(held);
    return st;
}

mdc_status mdc_pp_schedule_build(mdc_pp_schedule *s, const char *name, int p, int m, int v) {
    memset(s, 0, sizeof *s);
    if (p < 1 || m < 1) return mdc_fail(MDC_ERR_INVALID, "pipeline schedule: %d stage(s), %d micro-batch(es)", p, m);
    if (name && mdc_pp_i_registered(name)) return mdc_pp_i_build_registered(s, name, p, m, v);
    if (!name ||
        (strcmp(name, "gpipe") && strcmp(name, "1f1b") && strcmp(name, "zb-h1") && strcmp(name, "interleaved")))
        return mdc_fail(MDC_ERR_INVALID, "--schedule %s: unknown (known: gpipe 1f1b interleaved zb-h1)",
                        name ? name : "(null)");
    int inter = !strcmp(name, "interleaved");
    if (inter && (v < 2 || v > MDC_GPT2_MAX_CHUNKS))
        return mdc_fail(MDC_ERR_INVALID, "--schedule interleaved: --virtual-stages %d: 2 to %d model chunks per stage",
                        v, MDC_GPT2_MAX_CHUNKS);
    if (!inter && v != 1)
        return mdc_fail(MDC_ERR_INVALID,
                        "--virtual-stages %d: only --schedule interleaved runs several model chunks "
                        "per stage (schedule %s has one)",
                        v, name);
    if (inter && m % p)
        return mdc_fail(MDC_ERR_INVALID,
                        "--schedule interleaved: --microbatches %d is not a multiple of --pp %d (the "
                        "chunks run in groups of p micro-batches)",
                        m, p);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->p = p, s->m = m, s->v = v, s->split = !strcmp(name, "zb-h1");
    s->n = calloc((size_t)p, sizeof(int)), s->a = calloc((size_t)p, sizeof(mdc_pp_action *));
    mdc_status st = s->n && s->a ? MDC_OK : mdc_fail(MDC_ERR_OOM_HOST, "pipeline schedule");
    for (int q = 0; !st && q < p; q++) {
        int e = 0;
        if (!strcmp(name, "gpipe")) {
            for (int j = 0; j < m; j++) e |= push(s, q, MDC_PP_F, j);
            for (int j = 0; j < m; j++) e |= push(s, q, MDC_PP_B, j);
        } else if (!strcmp(name, "1f1b")) {
            e = one_f_one_b(s, q);
        } else if (inter) {
            e = interleaved(s, q);
        }
        if (e) st = mdc_fail(MDC_ERR_OOM_HOST, "pipeline schedule");
    }
    if (!st && s->split) st = build_zb(s);
    if (!st) st = mdc_pp_schedule_validate(s);
    if (st) mdc_pp_schedule_free(s);
    return st;
}

mdc_status mdc_pp_schedule_validate(const mdc_pp_schedule *s) {
    int p = s->p, m = s->m, v = s->v;
    if (v < 1 || v > MDC_GPT2_MAX_CHUNKS)
        return mdc_fail(MDC_ERR_INVALID, "schedule %s: %d chunks per stage", s->name, v);
    char *seen = calloc((size_t)m * v * 3, 1);
    if (!seen) return mdc_fail(MDC_ERR_OOM_HOST, "schedule validation");
    mdc_status st = MDC_OK;
    for (int q = 0; q < p && !st; q++) {
        memset(seen, 0, (size_t)m * v * 3);
        for (int k = 0; k < s->n[q] && !st; k++) {
            const mdc_pp_action *a = &s->a[q][k];
            int kind = a->kind == MDC_PP_F ? 0 : a->kind == MDC_PP_B ? 1 : a->kind == MDC_PP_W ? 2 : -1;
            char *at = seen + ((size_t)a->chunk * m + a->mb) * 3;
            if (kind < 0 || a->mb < 0 || a->mb >= m || a->chunk < 0 || a->chunk >= v || (kind == 2 && !s->split))
                st = mdc_fail(MDC_ERR_INVALID,
                              "schedule %s: stage %d action %d (%c%d chunk %d) is not an action of this "
                              "schedule",
                              s->name, q, k, a->kind, a->mb, a->chunk);
            else if (at[kind]++)
                st = mdc_fail(MDC_ERR_INVALID, "schedule %s: stage %d action %d (%c%d chunk %d) comes twice", s->name,
                              q, k, a->kind, a->mb, a->chunk);
            else if (kind == 2 && !at[1])
                st = mdc_fail(MDC_ERR_INVALID, "schedule %s: stage %d action %d (W%d) before its B", s->name, q, k,
                              a->mb);
        }
        for (int j = 0; j < m * v && !st; j++)
            for (int kind = 0; kind < (s->split ? 3 : 2); kind++)
                if (!seen[j * 3 + kind])
                    st = mdc_fail(MDC_ERR_INVALID, "schedule %s: stage %d has no %c%d (chunk %d)", s->name, q,
                                  "FBW"[kind], j % m, j / m);
    }
    free(seen);
    if (st) return st;
    int stuck = -1, r = run_sim(s, NULL, &stuck);
    if (r == -2) return mdc_fail(MDC_ERR_OOM_HOST, "schedule simulation");
    if (r < 0) { /* name the first action that can never run */
        return mdc_fail(MDC_ERR_INVALID,
                        "schedule %s: deadlock: stage %d waits forever (every stage's next action needs "
                        "one that has not run)",
                        s->name, stuck);
    }
    return MDC_OK;
}

double mdc_pp_bubble_formula(const mdc_pp_schedule *s, double tf, double tb, double tw) {
    int p = s->p, m = s->m, v = s->v;
    if (!s->split) return (double)(p - 1) / (v * m + p - 1);
    double idle = (p - 1) * (tf + tb - tw); /* ZB-H1: each stage waits F + B - W per stage before it */
    if (idle < 0) idle = 0;
    return idle / (m * (tf + tb + tw) + idle);
}

/* GPipe's formulas: the built-in schedule, or one registered like it. */
static int gpipe_like(const mdc_pp_schedule *s) { return !strcmp(s->name, "gpipe") || !strcmp(s->like, "gpipe"); }

int mdc_pp_sets_formula(const mdc_pp_schedule *s, int q) {
    int p = s->p, m = s->m, v = s->v, w;
    if (gpipe_like(s)) return m;
    if (s->split) return p < m ? p : m;
    if (v == 1) return p - q < m ? p - q : m;
    w = m == p ? m * v : 2 * (p - q - 1) + (v - 1) * p + 1;
    return w < m * v ? w : m * v;
}

const char *mdc_pp_formula_text(const mdc_pp_schedule *s, int sets) {
    if (sets)
        return gpipe_like(s) ? "m" : s->split ? "min(p, m)" : s->v > 1 ? "min(2(p-s-1)+(v-1)p+1, vm)" : "min(p-s, m)";
    return s->split ? "(p-1)(F+B-W)/(m(F+B+W)+(p-1)(F+B-W))" : s->v > 1 ? "(p-1)/(vm+p-1)" : "(p-1)/(m+p-1)";
}

void mdc_pp_schedule_print(const mdc_pp_schedule *s, FILE *out) {
    mdc_pp_timeline t;
    if (mdc_pp_simulate(s, &t) < 0 || !t.cell) {
        fprintf(out, "schedule %s, p = %d, m = %d, v = %d: cannot be simulated\n", s->name, s->p, s->m, s->v);
        return;
    }
    int p = s->p, m = s->m, v = s->v, w = v > 1 ? 4 : 3;
    fprintf(out, "schedule %s, p = %d stages, m = %d micro-batches", s->name, p, m);
    if (v > 1) fprintf(out, ", v = %d model chunks per stage (a, b, ...: chunk 0, 1, ...; each 1/v of its layers)", v);
    fprintf(out, "; units: F 1, %s; '.' idle\n",
            s->split ? "B 1 (input gradient), W 1 (weight gradients)" : "B 2 (input and weight gradients)");
    for (int q = 0; q < p; q++) {
        fprintf(out, "  stage %d |", q);
        for (int u = 0; u < t.units; u++) {
            const char *c = t.cell[(size_t)q * t.units + u];
            fprintf(out, "%-*s", w, c[0] ? c : ".");
        }
        fprintf(out, "|\n");
    }
    fprintf(out, "  makespan %d units; ideal (no bubble) %d\n", t.units, 3 * m * v);
    double f = mdc_pp_bubble_formula(s, 1, 1, 1);
    for (int q = 0; q < p; q++)
        fprintf(out,
                "  stage %d: bubble %.3f (idle / makespan; formula %s = %.3f), peak %s held %d (formula %s = %d)\n", q,
                1.0 - (double)t.busy[q] / t.units, mdc_pp_formula_text(s, 0), f,
                v > 1 ? "chunk activation sets" : "activation sets", t.peak[q], mdc_pp_formula_text(s, 1),
                mdc_pp_sets_formula(s, q));
    mdc_pp_timeline_free(&t);
}
