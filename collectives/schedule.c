/* Schedules: the message list of one collective call, its summation expressions and its
 * cost (include/minidc/schedule.h). The builders are in the algorithms' own files, registered
 * with them (coll_registry.h); their shared patterns and mdc_schedule_build in schedule_build.c.
 * Nothing here calls MPI: `minidc explain` runs without MPI_Init. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minidc/schedule.h"

int mdc_coll_is_reduction(mdc_coll c) {
    return c == MDC_COLL_ALLREDUCE || c == MDC_COLL_REDUCE_SCATTER || c == MDC_COLL_REDUCE;
}

mdc_status mdc_schedule_add(mdc_schedule *s, int step, int src, int dst, size_t bytes, int reduce, size_t off,
                            size_t len, const char *what) {
    if (s->nmsgs == MDC_SCHEDULE_MAX_MSGS)
        return mdc_fail(MDC_ERR_INVALID,
                        "%s %s on %d ranks: more than %zu messages, too many to "
                        "list (fewer ranks, a smaller count or a larger ring chunk)",
                        mdc_coll_name(s->coll), s->algo, s->p, MDC_SCHEDULE_MAX_MSGS);
    if (s->nmsgs == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        mdc_sched_msg *m = realloc(s->msgs, cap * sizeof *m);
        if (!m) return mdc_fail(MDC_ERR_OOM_HOST, "schedule of %zu messages", cap);
        s->msgs = m;
        s->cap = cap;
    }
    mdc_sched_msg *m = &s->msgs[s->nmsgs++];
    m->step = step;
    m->src = src;
    m->dst = dst;
    m->bytes = bytes;
    m->reduce = reduce;
    m->off = off;
    m->len = len;
    snprintf(m->what, sizeof m->what, "%s", what ? what : "");
    return mdc_schedule_step(s, step);
}

mdc_status mdc_schedule_step(mdc_schedule *s, int step) {
    if (step < s->nsteps) return MDC_OK;
    if (step >= s->phase_cap) {
        int cap = s->phase_cap ? s->phase_cap : 16;
        while (cap <= step) cap *= 2;
        char(*ph)[80] = realloc(s->phase, (size_t)cap * sizeof *ph);
        if (!ph) return mdc_fail(MDC_ERR_OOM_HOST, "schedule of %d steps", step + 1);
        s->phase = ph;
        s->phase_cap = cap;
    }
    for (int k = s->nsteps; k <= step; k++) s->phase[k][0] = '\0';
    s->nsteps = step + 1;
    return MDC_OK;
}

void mdc_schedule_free(mdc_schedule *s) {
    if (!s) return;
    free(s->msgs);
    free(s->phase);
    free(s->counts);
    memset(s, 0, sizeof *s);
}

size_t mdc_schedule_bytes_sent(const mdc_schedule *s, int rank) {
    size_t b = 0;
    for (size_t i = 0; i < s->nmsgs; i++)
        if (s->msgs[i].src == rank) b += s->msgs[i].bytes;
    return b;
}

size_t mdc_schedule_bytes_recv(const mdc_schedule *s, int rank) {
    size_t b = 0;
    for (size_t i = 0; i < s->nmsgs; i++)
        if (s->msgs[i].dst == rank) b += s->msgs[i].bytes;
    return b;
}

size_t mdc_schedule_msgs_sent(const mdc_schedule *s, int rank) {
    size_t n = 0;
    for (size_t i = 0; i < s->nmsgs; i++) n += s->msgs[i].src == rank;
    return n;
}

double mdc_schedule_time(const mdc_schedule *s, const mdc_cost_params *m) {
    double total = 0;
    size_t p = (size_t)s->p;
    /* per rank: send seconds, receive seconds, largest send alpha, largest receive alpha,
     * reduced bytes, busy */
    double *w = calloc(6 * p, sizeof *w);
    if (!w) return -1;
    int rpn = m->ranks_per_node > 0 ? m->ranks_per_node : s->p;
    for (int k = 0; k < s->nsteps; k++) {
        memset(w, 0, 6 * p * sizeof *w);
        for (size_t i = 0; i < s->nmsgs; i++) {
            const mdc_sched_msg *g = &s->msgs[i];
            if (g->step != k) continue;
            int inter = g->src / rpn != g->dst / rpn;
            double a = inter ? m->alpha_inter : m->alpha, b = inter ? m->beta_inter : m->beta;
            w[6 * (size_t)g->src + 0] += b * (double)g->bytes;
            w[6 * (size_t)g->dst + 1] += b * (double)g->bytes;
            if (a > w[6 * (size_t)g->src + 2]) w[6 * (size_t)g->src + 2] = a;
            if (a > w[6 * (size_t)g->dst + 3]) w[6 * (size_t)g->dst + 3] = a;
            if (g->reduce) w[6 * (size_t)g->dst + 4] += (double)g->bytes;
            w[6 * (size_t)g->src + 5] = w[6 * (size_t)g->dst + 5] = 1;
        }
        double worst = 0;
        for (size_t r = 0; r < p; r++) {
            const double *x = &w[6 * r];
            if (!x[5]) continue;
            double snd = x[2] + x[0], rcv = x[3] + x[1];
            double t = (snd > rcv ? snd : rcv) + m->gamma * x[4];
            if (t > worst) worst = t;
        }
        total += worst;
    }
    free(w);
    return total;
}

int mdc_schedule_result_rank(const mdc_schedule *s, size_t elem) {
    if (s->coll == MDC_COLL_REDUCE) return s->root;
    if (s->coll == MDC_COLL_REDUCE_SCATTER && s->counts) {
        size_t off = 0;
        for (int r = 0; r < s->p; r++) {
            off += s->counts[r];
            if (elem < off) return r;
        }
    }
    return 0;
}

/* ---- expressions ------------------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t len, cap;
} dstr;

static int dstr_put(dstr *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int dstr_put(dstr *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if (d->len + (size_t)n + 1 > d->cap) {
        size_t cap = (d->len + (size_t)n + 1) * 2;
        char *p = realloc(d->s, cap);
        if (!p) return -1;
        d->s = p;
        d->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(d->s + d->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    d->len += (size_t)n;
    return 0;
}

/* An operand of an infix op needs parentheses unless it is a leaf or a call. */
static int is_compound(const char *e) { return strchr(e, ' ') && !(e[0] == 'm' && e[1] != '\0'); }

static char *combine(mdc_op op, const char *l, const char *r) {
    dstr d = {0};
    int rc;
    if (op == MDC_MIN || op == MDC_MAX) rc = dstr_put(&d, "%s(%s, %s)", op == MDC_MIN ? "min" : "max", l, r);
    else {
        const char *sym = op == MDC_PROD ? "*" : "+";
        int pl = is_compound(l), pr = is_compound(r);
        rc = dstr_put(&d, "%s%s%s %s %s%s%s", pl ? "(" : "", l, pl ? ")" : "", sym, pr ? "(" : "", r, pr ? ")" : "");
    }
    if (rc) {
        free(d.s);
        return NULL;
    }
    return d.s;
}

static int cmp_step(const void *a, const void *b) {
    const mdc_sched_msg *x = *(const mdc_sched_msg *const *)a, *y = *(const mdc_sched_msg *const *)b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return x < y ? -1 : x > y; /* stable: list order within a step */
}

mdc_status mdc_schedule_expr(const mdc_schedule *s, int rank, size_t elem, char *buf, size_t len) {
    if (!mdc_coll_is_reduction(s->coll))
        return mdc_fail(MDC_ERR_INVALID, "%s is not a reduction: no summation expression", mdc_coll_name(s->coll));
    if (rank < 0 || rank >= s->p || elem >= s->vec)
        return mdc_fail(MDC_ERR_INVALID, "element %zu of rank %d: outside %zu elements x %d ranks", elem, rank, s->vec,
                        s->p);
    int p = s->p;
    mdc_status st = MDC_OK;
    char **cur = calloc((size_t)p, sizeof *cur), **old = calloc((size_t)p, sizeof *old);
    const mdc_sched_msg **order = malloc((s->nmsgs ? s->nmsgs : 1) * sizeof *order);
    if (!cur || !old || !order) {
        st = mdc_fail(MDC_ERR_OOM_HOST, "expression of %d ranks", p);
        goto done;
    }
    for (int r = 0; r < p; r++) {
        char leaf[24];
        snprintf(leaf, sizeof leaf, "x%d", r);
        if (!(cur[r] = strdup(leaf))) {
            st = mdc_fail(MDC_ERR_OOM_HOST, "expression");
            goto done;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < s->nmsgs; i++)
        if (s->msgs[i].len && elem >= s->msgs[i].off && elem < s->msgs[i].off + s->msgs[i].len)
            order[n++] = &s->msgs[i];
    qsort(order, n, sizeof *order, cmp_step);
    for (size_t i = 0; i < n;) {
        /* One step: every message reads the senders' values from the start of the step. */
        int step = order[i]->step;
        size_t j = i;
        for (; j < n && order[j]->step == step; j++) {
            int src = order[j]->src;
            if (!old[src] && !(old[src] = strdup(cur[src]))) {
                st = mdc_fail(MDC_ERR_OOM_HOST, "expression");
                goto done;
            }
        }
        for (size_t k = i; k < j; k++) {
            const mdc_sched_msg *m = order[k];
            const char *in = old[m->src];
            char *next = m->reduce == MDC_SCHED_IN_OP_OWN   ? combine(s->op, in, cur[m->dst])
                         : m->reduce == MDC_SCHED_OWN_OP_IN ? combine(s->op, cur[m->dst], in)
                                                            : strdup(in);
            if (!next) {
                st = mdc_fail(MDC_ERR_OOM_HOST, "expression");
                goto done;
            }
            free(cur[m->dst]);
            cur[m->dst] = next;
        }
        for (int r = 0; r < p; r++) {
            free(old[r]);
            old[r] = NULL;
        }
        i = j;
    }
    if (len) {
        const char *e = cur[rank];
        char tail[32] = "";
        if (s->op == MDC_AVG) snprintf(tail, sizeof tail, "%s / %d", is_compound(e) ? ")" : "", p);
        int lp = s->op == MDC_AVG && is_compound(e);
        int w = snprintf(buf, len, "%s%s%s", lp ? "(" : "", e, tail);
        if (w >= 0 && (size_t)w >= len && len > 4) memcpy(buf + len - 4, "...", 4);
    }
done:
    if (cur)
        for (int r = 0; r < p; r++) free(cur[r]);
    if (old)
        for (int r = 0; r < p; r++) free(old[r]);
    free(cur);
    free(old);
    free(order);
    return st;
}

/* ---- evaluating an expression in float --------------------------------------------------- */

typedef struct {
    const char *p;
    const float *x;
    int nx, err;
} parser;

static void skip(parser *ps) {
    while (*ps->p == ' ') ps->p++;
}

static float parse_expr(parser *ps);

static float parse_operand(parser *ps) {
    skip(ps);
    if (*ps->p == '(') {
        ps->p++;
        float v = parse_expr(ps);
        skip(ps);
        if (*ps->p != ')') ps->err = 1;
        else ps->p++;
        return v;
    }
    if (*ps->p == 'x') {
        char *end;
        long r = strtol(ps->p + 1, &end, 10);
        if (end == ps->p + 1 || r < 0 || r >= ps->nx) {
            ps->err = 1;
            return 0;
        }
        ps->p = end;
        return ps->x[r];
    }
    if (!strncmp(ps->p, "min(", 4) || !strncmp(ps->p, "max(", 4)) {
        int is_min = ps->p[1] == 'i';
        ps->p += 4;
        float l = parse_expr(ps);
        skip(ps);
        if (*ps->p != ',') {
            ps->err = 1;
            return 0;
        }
        ps->p++;
        float r = parse_expr(ps);
        skip(ps);
        if (*ps->p != ')') ps->err = 1;
        else ps->p++;
        /* The left operand wins ties, as collectives/reduce_op.c does. */
        return is_min ? (r < l ? r : l) : (r > l ? r : l);
    }
    char *end;
    float v = strtof(ps->p, &end);
    if (end == ps->p) ps->err = 1;
    ps->p = end;
    return v;
}

/* Left-associative infix: every compound operand the schedule prints is parenthesized. */
static float parse_expr(parser *ps) {
    float v = parse_operand(ps);
    for (;;) {
        skip(ps);
        char c = *ps->p;
        if (ps->err || (c != '+' && c != '*' && c != '/')) return v;
        ps->p++;
        float r = parse_operand(ps);
        v = c == '+' ? v + r : c == '*' ? v * r : v / r;
    }
}

int mdc_expr_eval_f32(const char *expr, const float *x, int nx, float *out) {
    parser ps = {expr, x, nx, 0};
    float v = parse_expr(&ps);
    skip(&ps);
    if (ps.err || *ps.p) return -1;
    *out = v;
    return 0;
}
