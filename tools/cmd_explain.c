/* minidc explain COLL: what a collective algorithm does, step by step, without running MPI.
 *
 *   minidc explain allreduce --algo ring -n 4 --count 8 --element 5
 *
 * Prints the schedule (collectives/schedule*.c): every message with its step, sender,
 * receiver, the blocks it carries and what the receiver does with them; for reductions the
 * summation expression of an element in the exact order the code adds (tests/mesh/test_explain.c
 * checks both against the real algorithm); bytes sent per rank next to the formula; and the
 * alpha-beta-gamma time on a device preset's link. Never calls MPI_Init. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "commands.h"
#include "minidc/algorithms.h"
#include "minidc/schedule.h"

static void usage(FILE *f) {
    fprintf(f, "usage: minidc explain COLL [--algo A] -n P --count K [options]\n"
               "       minidc explain block --tp T [--sp] [sizes]   (one GPT-2 block, tensor parallel)\n"
               "       minidc explain exact [--dp D]... [--exact-block N]   (one gradient element, exact mode)\n"
               "       minidc explain pipeline [--schedule S] [-p P] [-m M] [--sweep-m]   (a pipeline schedule)\n"
               "  COLL           allreduce reduce_scatter allgather bcast reduce gather scatter\n"
               "                 alltoall alltoallv barrier\n"
               "  --algo A       algorithm (default: the cost model's choice; --list shows them)\n"
               "  -n P           ranks, 1..1024 (default 4)\n"
               "  --count K      elements per rank: the vector (allreduce, bcast, reduce, gather,\n"
               "                 scatter) or one block (reduce_scatter, allgather, alltoall); default 8\n"
               "  --counts a,b,..  per-rank counts (reduce_scatter, allgather, alltoallv)\n"
               "  --element I    print the summation expression of element I (reductions)\n"
               "  --chunk BYTES  ring allreduce chunk size (default 0: one chunk per rank); the pipelined\n"
               "                 broadcast's chunk (default 1 MiB)\n"
               "  --root R       root of bcast, reduce, gather, scatter (default 0)\n"
               "  --dtype T      f32 f64 f16 bf16 i32 i64 u8 exact (default f32; exact: sum only)\n"
               "  --op OP        sum prod min max avg (default sum)\n"
               "  --device NAME  preset whose links give alpha, beta, gamma (default h100)\n"
               "  --gpus-per-node G  ranks per virtual node (default 8): NVLink inside, network across\n"
               "  --summary      skip the step listing\n"
               "  --list         list the algorithms of COLL with their cost formulas\n");
}

/* Counts above this (2^40 elements, 4 TiB of f32 per rank) are refused: byte counts must not
 * overflow, and no one explains a larger call. */
#define MAX_COUNT ((size_t)1 << 40)

/* "a,b,c": exactly p counts, each in 0..MAX_COUNT. */
static int parse_counts(const char *s, int p, size_t **out) {
    size_t *c = calloc((size_t)p, sizeof *c);
    if (!c) return -1;
    const char *q = s;
    for (int i = 0; i < p; i++) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = isdigit((unsigned char)*q) ? strtoull(q, &end, 10) : ULLONG_MAX;
        if (v > MAX_COUNT || errno || *end != (i + 1 < p ? ',' : '\0')) {
            free(c);
            return -1;
        }
        c[i] = (size_t)v;
        q = end + 1;
    }
    *out = c;
    return 0;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static void human_bytes(char *buf, size_t len, double b) {
    if (b >= 1 << 30) snprintf(buf, len, "%.3g GiB", b / (1 << 30));
    else if (b >= 1 << 20) snprintf(buf, len, "%.3g MiB", b / (1 << 20));
    else if (b >= 1 << 10) snprintf(buf, len, "%.3g KiB", b / (1 << 10));
    else snprintf(buf, len, "%.0f B", b);
}

static void human_time(char *buf, size_t len, double t) {
    if (t >= 1) snprintf(buf, len, "%.3f s", t);
    else if (t >= 1e-3) snprintf(buf, len, "%.3f ms", t * 1e3);
    else snprintf(buf, len, "%.3f us", t * 1e6);
}

/* The "n" of docs/design.md's cost formulas for this call, in bytes. */
static size_t cost_bytes(const mdc_schedule *s) {
    size_t esz = mdc_dtype_size(s->t), all = 0;
    if (s->counts)
        for (int r = 0; r < s->p; r++) all += s->counts[r];
    switch (s->coll) {
    case MDC_COLL_REDUCE_SCATTER:
    case MDC_COLL_ALLGATHER: return (s->counts ? all : s->count * (size_t)s->p) * esz;
    case MDC_COLL_ALLTOALL: return s->count * (size_t)s->p * esz;
    case MDC_COLL_ALLTOALLV: return all * esz;
    case MDC_COLL_GATHER:
    case MDC_COLL_SCATTER: return s->count * (size_t)s->p * esz;
    case MDC_COLL_BARRIER: return 0;
    default: return s->count * esz;
    }
}

static void print_steps(const mdc_schedule *s) {
    size_t esz = mdc_dtype_size(s->t);
    for (int k = 0; k < s->nsteps; k++) {
        printf("step %d%s%s\n", k + 1, s->phase[k][0] ? "  " : "", s->phase[k]);
        int any = 0;
        for (size_t i = 0; i < s->nmsgs; i++) {
            const mdc_sched_msg *m = &s->msgs[i];
            if (m->step != k) continue;
            any = 1;
            char b[32];
            human_bytes(b, sizeof b, (double)m->bytes);
            const char *act = m->reduce == MDC_SCHED_IN_OP_OWN   ? "reduces: incoming OP own"
                              : m->reduce == MDC_SCHED_OWN_OP_IN ? "reduces: own OP incoming"
                                                                 : "stores it";
            printf("  r%-3d -> r%-3d  %-28s %9s   r%d %s\n", m->src, m->dst, m->what, b, m->dst, act);
        }
        if (!any) printf("  (no messages: local work only)\n");
    }
    (void)esz;
}

int mdc_cmd_explain(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "block"))
        return mdc_explain_block(argc - 1, argv + 1); /* tools/explain_block.c */
    if (argc >= 2 && !strcmp(argv[1], "exact"))
        return mdc_explain_exact(argc - 1, argv + 1); /* tools/explain_exact.c */
    if (argc >= 2 && !strcmp(argv[1], "pipeline")) return mdc_explain_pipeline(argc - 1, argv + 1);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int ci = mdc_coll_parse(argv[1]);
    if (ci < 0 && !strcmp(argv[1], "broadcast")) ci = MDC_COLL_BCAST;
    if (ci < 0) {
        fprintf(stderr, "minidc explain: unknown collective '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    mdc_coll c = (mdc_coll)ci;
    const char *algo = NULL, *device = "h100", *counts_arg = NULL;
    int p = 4, root = 0, summary = 0, list = 0, gpn = 8, dt = MDC_F32, op = MDC_SUM;
    long long element = -1;
    size_t count = 8, chunk = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1, takes = 1;
        long long ll = 0;
        if (!strcmp(a, "--algo") && v) algo = v;
        else if (!strcmp(a, "-n")) ok = mdc_arg_int("explain", a, v, 1, 1024, &p);
        else if (!strcmp(a, "--count")) ok = mdc_arg_size("explain", a, v, MAX_COUNT, &count);
        else if (!strcmp(a, "--counts") && v) counts_arg = v;
        else if (!strcmp(a, "--element")) ok = mdc_arg_ll("explain", a, v, 0, MAX_COUNT, &ll), element = ll;
        else if (!strcmp(a, "--chunk")) ok = mdc_arg_size("explain", a, v, MAX_COUNT, &chunk);
        else if (!strcmp(a, "--root")) ok = mdc_arg_int("explain", a, v, 0, 1 << 30, &root);
        else if (!strcmp(a, "--dtype") && v) dt = mdc_dtype_parse(v), ok = dt >= 0;
        else if (!strcmp(a, "--op") && v) op = mdc_op_parse(v), ok = op >= 0;
        else if (!strcmp(a, "--device") && v) device = v;
        else if (!strcmp(a, "--gpus-per-node")) ok = mdc_arg_int("explain", a, v, 1, 1 << 30, &gpn);
        else if (!strcmp(a, "--summary")) summary = 1, takes = 0;
        else if (!strcmp(a, "--list")) list = 1, takes = 0;
        else {
            fprintf(stderr, "minidc explain: unknown option or missing value: %s\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) {
            if (!strcmp(a, "--dtype") || !strcmp(a, "--op"))
                fprintf(stderr, "minidc explain: %s: unknown value '%s'\n", a, v);
            usage(stderr);
            return 2;
        }
        i += takes;
    }
    if (list) {
        printf("%s algorithms:\n", mdc_coll_name(c));
        for (int i = 0; i < mdc_coll_algo_count(c); i++) {
            const mdc_algo_info *inf = mdc_coll_algo_at(c, i);
            printf("  %-20s %s\n  %-20s cost: %s\n", inf->name, inf->summary, "", inf->cost);
        }
        return 0;
    }
    mdc_device_spec spec;
    if (mdc_preset_find(device, &spec) != MDC_OK) {
        fprintf(stderr, "minidc explain: %s\n", mdc_detail());
        return 2;
    }
    mdc_cost_params m = {.alpha = spec.nvlink_latency,
                         .beta = 1.0 / spec.nvlink_bw,
                         .gamma = 3.0 / spec.hbm_bw,
                         .alpha_inter = spec.net_latency,
                         .beta_inter = 1.0 / spec.net_bw,
                         .ranks_per_node = gpn};
    size_t *counts = NULL;
    if (counts_arg && parse_counts(counts_arg, p, &counts)) {
        fprintf(stderr, "minidc explain: --counts needs %d integers in 0..%zu, comma separated, got '%s'\n", p,
                MAX_COUNT, counts_arg);
        return 2;
    }
    if (counts) {
        count = 0;
        for (int r = 0; r < p; r++) count = counts[r] > count ? counts[r] : count;
    }
    int chosen = 0;
    /* The chunk also enters the cost model (the pipelined broadcast's chunk count). */
    if (chunk) mdc_coll_set_ring_chunk(chunk);
    if (!algo) {
        /* The cost model's choice for these bytes on this link. */
        double best = 0;
        mdc_schedule tmp = {.coll = c, .p = p, .count = count, .t = (mdc_dtype)dt, .counts = counts};
        size_t nb = cost_bytes(&tmp);
        tmp.counts = NULL;
        for (int i = 0; i < mdc_coll_algo_count(c); i++) {
            const char *nm = mdc_coll_algo_at(c, i)->name;
            double t = mdc_coll_cost_params(c, nm, p, nb, &m);
            if (t >= 0 && (!algo || t < best)) best = t, algo = nm;
        }
        chosen = 1;
        if (!algo) {
            fprintf(stderr, "minidc explain: %s has no algorithms\n", mdc_coll_name(c));
            free(counts);
            return 1;
        }
    }
    mdc_schedule s;
    mdc_status st = mdc_schedule_build(&s, c, algo, p, count, counts, (mdc_dtype)dt, (mdc_op)op, root, chunk, gpn);
    free(counts);
    if (st) {
        fprintf(stderr, "minidc explain: %s: %s\n", mdc_strerror(st), mdc_detail());
        return 2;
    }
    int ai = mdc_coll_algo_find(c, algo);
    const mdc_algo_info *inf = ai >= 0 ? mdc_coll_algo_at(c, ai) : NULL;
    size_t nb = cost_bytes(&s);
    char hb[32];
    human_bytes(hb, sizeof hb, (double)nb);
    printf("%s, algorithm %s%s (%s), %d ranks, %zu x %s per rank%s%s%s\n", mdc_coll_name(c), algo,
           chosen ? " [the cost model's choice]" : "", inf ? inf->function : "?", p, count, mdc_dtype_name(s.t),
           mdc_coll_is_reduction(c) ? ", op " : "", mdc_coll_is_reduction(c) ? mdc_op_name(s.op) : "", "");
    if (c == MDC_COLL_BCAST || c == MDC_COLL_REDUCE || c == MDC_COLL_GATHER || c == MDC_COLL_SCATTER)
        printf("root: rank %d\n", s.root);
    if (inf) printf("what it does: %s\n", inf->summary);
    if (s.note[0]) printf("%s\n", s.note);
    if (mdc_coll_is_reduction(c))
        printf("x_r is rank r's input; every message carries elements of the sender's partial "
               "result as it was at the start of the step\n");
    printf("\n");
    if (!summary) print_steps(&s);

    if (mdc_coll_is_reduction(c) && s.vec > 0) {
        printf("\nsummation order (the code adds exactly so; tests/mesh/test_explain.c checks it bit for bit):\n");
        size_t cap = 1 << 16;
        char *e = malloc(cap);
        if (!e) return 1;
        size_t first = element >= 0 ? (size_t)element : 0, last = first;
        if (element < 0) {
            /* One element per block the schedule moves: the start of each message range. */
            last = s.vec - 1;
        }
        if (element >= 0 && (size_t)element >= s.vec) {
            fprintf(stderr, "minidc explain: --element %lld is outside the %zu elements\n", element, s.vec);
            free(e);
            mdc_schedule_free(&s);
            return 2;
        }
        /* An element's expression depends only on which messages carry it: it is constant
         * between consecutive edges of the messages' element ranges (and of the ranks' results),
         * so one expression per segment, consecutive equal segments printed as one range. */
        char *prev = malloc(cap);
        size_t nedge = 0, *edge = malloc((2 * s.nmsgs + (size_t)p + 2) * sizeof *edge);
        if (!prev || !edge) {
            free(prev), free(edge), free(e);
            mdc_schedule_free(&s);
            return 1;
        }
        edge[nedge++] = first;
        edge[nedge++] = last + 1;
        for (size_t i = 0; i < s.nmsgs; i++) {
            size_t lo = s.msgs[i].off, hi = s.msgs[i].off + s.msgs[i].len;
            if (!s.msgs[i].len) continue;
            if (lo > first && lo <= last) edge[nedge++] = lo;
            if (hi > first && hi <= last) edge[nedge++] = hi;
        }
        if (c == MDC_COLL_REDUCE_SCATTER)
            for (size_t r = 0, o = 0; r < (size_t)p; r++)
                if ((o += s.counts[r]) > first && o <= last) edge[nedge++] = o;
        qsort(edge, nedge, sizeof *edge, cmp_size);
        prev[0] = '\0';
        size_t start = first;
        int prev_rank = -1, shown = 0;
        for (size_t k = 0; k < nedge && shown < 64; k++) {
            size_t el = edge[k];
            if (k > 0 && el == edge[k - 1]) continue;
            int r = el <= last ? mdc_schedule_result_rank(&s, el) : -1;
            if (el <= last && mdc_schedule_expr(&s, r, el, e, cap)) break;
            if (el > first && (el > last || r != prev_rank || strcmp(e, prev))) {
                char idx[64];
                size_t base = 0;
                if (c == MDC_COLL_REDUCE_SCATTER)
                    for (int q = 0; q < prev_rank; q++) base += s.counts[q];
                if (el - 1 == start) snprintf(idx, sizeof idx, "%zu", start - base);
                else snprintf(idx, sizeof idx, "%zu..%zu", start - base, el - 1 - base);
                if (c == MDC_COLL_REDUCE_SCATTER) printf("  rank %d: out[%s] = %s\n", prev_rank, idx, prev);
                else if (c == MDC_COLL_REDUCE)
                    printf("  out[%s] = %s   (at the root, rank %d)\n", idx, prev, prev_rank);
                else printf("  out[%s] = %s\n", idx, prev);
                shown++;
                start = el;
            }
            if (el <= last) {
                memcpy(prev, e, strlen(e) + 1);
                prev_rank = r;
            }
        }
        free(edge);
        free(prev);
        if (element < 0) printf("  (--element I for one element)\n");
        if (c == MDC_COLL_ALLREDUCE) printf("  every rank ends with the same bits\n");
        free(e);
    }

    printf("\nbytes sent per rank:");
    size_t maxsent = 0;
    for (int r = 0; r < p; r++) {
        size_t b = mdc_schedule_bytes_sent(&s, r);
        if (b > maxsent) maxsent = b;
        if (p <= 16) printf(" r%d %zu%s", r, b, r + 1 < p ? "," : "");
    }
    if (p > 16) printf(" max %zu", maxsent);
    printf("\n  formula: %s = %.0f bytes (n = %zu bytes)\n", s.bytes_formula, s.bytes_formula_value, nb);

    char t1[32], t2[32], ta[32], tb[32], tg[32];
    double model = inf ? mdc_coll_cost_params(c, algo, p, nb, &m) : -1;
    double sched = mdc_schedule_time(&s, &m);
    human_time(ta, sizeof ta, m.alpha);
    human_time(t1, sizeof t1, model);
    human_time(t2, sizeof t2, sched);
    snprintf(tb, sizeof tb, "%.4g GB/s", 1e-9 / m.beta);
    snprintf(tg, sizeof tg, "%.4g GB/s", 1e-9 / m.gamma);
    printf("\ncost on %s (alpha %s, beta = 1/(%s NVLink per direction), gamma = 1/(%s): 3 bytes "
           "of HBM traffic per byte reduced",
           spec.name, ta, tb, tg);
    if (p > gpn) {
        char ti[32];
        human_time(ti, sizeof ti, m.alpha_inter);
        printf("; across %d-rank nodes: alpha %s, beta = 1/%.4g GB/s", gpn, ti, 1e-9 / m.beta_inter);
    }
    printf("):\n");
    if (inf) printf("  formula  %s\n           = %s\n", inf->cost, model >= 1e30 ? "n/a (does not apply)" : t1);
    if (inf && strstr(inf->cost, " c")) printf("           (c = 2/3 gamma: a local copy reads and writes each byte)\n");
    printf("  schedule (per step, the slowest rank: alpha + beta x bytes + gamma x reduced) = %s\n", t2);
    mdc_schedule_free(&s);
    return 0;
}
