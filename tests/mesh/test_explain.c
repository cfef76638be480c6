/* `minidc explain` cannot drift from the code: for every collective x algorithm, counts 0, 1,
 * p-1, p+1, 37 and uneven per-rank counts, roots 0 and p-1, and several ring chunk sizes,
 * (a) the messages the real algorithm posts (recorded with mdc_transport_set_trace) equal the
 *     schedule's, rank by rank, in order: peer and bytes of every send, and of every receive;
 * (b) for reductions, every result element equals, bit for bit, the schedule's summation
 *     expression evaluated in float in its order on the same random inputs (with exponents
 *     spread so that a different order would round differently). */
#include "testutil.h"
#include "minidc/algorithms.h"
#include "minidc/schedule.h"

typedef struct {
    int is_send, peer;
    size_t bytes;
} event;

static event *evs;
static size_t nev, evcap;

static void on_msg(void *ctx, int is_send, int grank, int peer, size_t bytes, int tag) {
    (void)ctx, (void)grank, (void)tag;
    if (nev == evcap) {
        evcap = evcap ? 2 * evcap : 256;
        evs = realloc(evs, evcap * sizeof *evs);
        if (!evs) abort();
    }
    evs[nev++] = (event){is_send, peer, bytes};
}

/* Deterministic random input of rank r, element e: +-[1,2) x 2^(-12..12). */
static float input(int r, size_t e, int salt) {
    uint64_t h = (uint64_t)r * 0x9E3779B97F4A7C15ull ^ (uint64_t)e * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)salt * 0x165667B19E3779F9ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    float m = 1.0f + (float)(h & 0xffffff) / 16777216.0f;
    int ex = (int)((h >> 24) % 25) - 12;
    return ((h >> 50) & 1 ? -1.0f : 1.0f) * ldexpf(m, ex);
}

static int cases, checked_elems;

/* Compares this rank's traced messages with the schedule's. */
static void compare_trace(const mdc_schedule *s, int me, const char *what) {
    for (int side = 1; side >= 0; side--) {
        size_t k = 0, bad = 0;
        /* The schedule's messages of this rank, in step order (stable within a step). */
        for (int step = 0; step < s->nsteps && !bad; step++)
            for (size_t i = 0; i < s->nmsgs && !bad; i++) {
                const mdc_sched_msg *m = &s->msgs[i];
                if (m->step != step || (side ? m->src : m->dst) != me) continue;
                int peer = side ? m->dst : m->src;
                while (k < nev && evs[k].is_send != side) k++;
                if (k == nev) {
                    TU_CHECK(0, "%s: rank %d: schedule %s %s r%d (%zu B) at step %d, the code posted no more", what, me,
                             side ? "sends" : "receives", side ? "to" : "from", peer, m->bytes, step + 1);
                    bad = 1;
                } else if (evs[k].peer != peer || evs[k].bytes != m->bytes) {
                    TU_CHECK(0, "%s: rank %d: step %d: schedule %s r%d %zu B, the code r%d %zu B", what, me, step + 1,
                             side ? "sends to" : "receives from", peer, m->bytes, evs[k].peer, evs[k].bytes);
                    bad = 1;
                }
                k++;
            }
        if (!bad) {
            while (k < nev && evs[k].is_send != side) k++;
            TU_CHECK(k == nev, "%s: rank %d: the code %s r%d %zu B beyond the schedule", what, me,
                     side ? "sends to" : "receives from", k < nev ? evs[k].peer : -1, k < nev ? evs[k].bytes : 0);
        }
    }
}

/* Checks result elements [e0, e0 + n) of the logical vector, held by this rank in `got`. */
static void compare_exprs(const mdc_schedule *s, int me, const float *got, size_t e0, size_t n, int salt,
                          const char *what) {
    static char expr[1 << 16];
    float x[64];
    for (size_t i = 0; i < n; i++) {
        size_t e = e0 + i;
        for (int r = 0; r < s->p; r++) x[r] = input(r, e, salt);
        mdc_status st = mdc_schedule_expr(s, me, e, expr, sizeof expr);
        float want = 0;
        if (st || mdc_expr_eval_f32(expr, x, s->p, &want)) {
            TU_CHECK(0, "%s: rank %d: element %zu: no expression (%s)", what, me, e, mdc_detail());
            return;
        }
        if (memcmp(&want, &got[i], sizeof want)) {
            TU_CHECK(0, "%s: rank %d: element %zu: code %.9g, expression %s = %.9g", what, me, e, got[i], expr, want);
            return;
        }
        checked_elems++;
    }
}

static void run_case(mdc_runtime *rt, mdc_coll c, const char *algo, size_t count, const size_t *counts, int root,
                     size_t chunk, mdc_op op) {
    mdc_group *g = rt->world;
    int p = rt->size, me = rt->rank, salt = cases++;
    char what[160];
    snprintf(what, sizeof what, "%s/%s p=%d count=%zu%s root=%d chunk=%zu op=%s", mdc_coll_name(c), algo, p, count,
             counts ? " (per-rank counts)" : "", root, chunk, mdc_op_name(op));
    mdc_schedule s;
    mdc_status st = mdc_schedule_build(&s, c, algo, p, count, counts, MDC_F32, op, root, chunk, rt->opts.gpus_per_node);
    if (st == MDC_ERR_UNSUPPORTED) {
        TU_CHECK(0, "%s: no schedule: %s", what, mdc_detail());
        return;
    }
    TU_STATUS(st, MDC_OK);
    if (st) return;
    size_t total = 0, cnt[64], off[64], maxc = count;
    for (int i = 0; i < p; i++) {
        cnt[i] = counts ? counts[i] : count;
        off[i] = total;
        total += cnt[i];
        if (cnt[i] > maxc) maxc = cnt[i];
    }
    size_t nsend = total + maxc * (size_t)p + 1;
    float *sb = malloc(nsend * sizeof *sb), *rb = malloc(nsend * sizeof *rb);
    for (size_t i = 0; i < nsend; i++) sb[i] = input(me, i, salt), rb[i] = -1.0f;
    MDC_CHECK(mdc_coll_set_algo(c, algo));
    mdc_coll_set_ring_chunk(chunk);
    nev = 0;
    mdc_transport_set_trace(rt->tr, on_msg, NULL);
    switch (c) {
    case MDC_COLL_ALLREDUCE: st = mdc_allreduce(sb, rb, count, MDC_F32, op, g); break;
    case MDC_COLL_REDUCE_SCATTER:
        st = counts ? mdc_reduce_scatterv(sb, rb, counts, MDC_F32, op, g)
                    : mdc_reduce_scatter(sb, rb, count, MDC_F32, op, g);
        break;
    case MDC_COLL_REDUCE: st = mdc_reduce(sb, rb, count, MDC_F32, op, root, g); break;
    case MDC_COLL_ALLGATHER:
        st = counts ? mdc_allgatherv(sb, rb, counts, NULL, MDC_F32, g) : mdc_allgather(sb, rb, count, MDC_F32, g);
        break;
    case MDC_COLL_BCAST: st = mdc_bcast(me == root ? sb : rb, count, MDC_F32, root, g); break;
    case MDC_COLL_GATHER: st = mdc_gather(sb, rb, count, MDC_F32, root, g); break;
    case MDC_COLL_SCATTER: st = mdc_scatter(sb, rb, count, MDC_F32, root, g); break;
    case MDC_COLL_ALLTOALL: st = mdc_alltoall(sb, rb, count, MDC_F32, g); break;
    case MDC_COLL_ALLTOALLV: {
        size_t rc[64], sd[64], rd[64], o = 0;
        for (int i = 0; i < p; i++) rc[i] = cnt[me], rd[i] = (size_t)i * cnt[me], sd[i] = o, o += cnt[i];
        st = mdc_alltoallv(sb, cnt, sd, rb, rc, rd, MDC_F32, g);
        break;
    }
    case MDC_COLL_BARRIER: st = mdc_barrier(g); break;
    default: break;
    }
    mdc_transport_set_trace(rt->tr, NULL, NULL);
    TU_STATUS(st, MDC_OK);
    if (!st) {
        compare_trace(&s, me, what);
        if (c == MDC_COLL_ALLREDUCE) compare_exprs(&s, me, rb, 0, count, salt, what);
        if (c == MDC_COLL_REDUCE && me == root) compare_exprs(&s, me, rb, 0, count, salt, what);
        if (c == MDC_COLL_REDUCE_SCATTER) compare_exprs(&s, me, rb, off[me], cnt[me], salt, what);
    }
    mdc_coll_set_algo(c, NULL);
    mdc_coll_set_ring_chunk(0);
    free(sb);
    free(rb);
    mdc_schedule_free(&s);
    /* Ranks must not run ahead into the next case's messages with a failed peer. */
    MDC_CHECK(mdc_barrier(g));
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    tu_coll_options(argc, argv);
    int p = rt.size;
    if (p > 64) {
        printf("skip: at most 64 ranks\n");
        mdc_runtime_finalize(&rt);
        return 77;
    }
    size_t uneven[64];
    for (int i = 0; i < p; i++) uneven[i] = (size_t)((i * 5 + 2) % 4); /* includes zeros */
    size_t counts_list[] = {0, 1, (size_t)(p > 1 ? p - 1 : 2), (size_t)p + 1, 37};
    for (int ci = 0; ci < MDC_COLL_COUNT; ci++) {
        mdc_coll c = (mdc_coll)ci;
        for (int ai = 0; ai < mdc_coll_algo_count(c); ai++) {
            const char *algo = mdc_coll_algo_at(c, ai)->name;
            int roots[2] = {0, p - 1}, nroots = (c == MDC_COLL_BCAST || c == MDC_COLL_REDUCE || c == MDC_COLL_GATHER ||
                                                 c == MDC_COLL_SCATTER) &&
                                                        p > 1
                                                    ? 2
                                                    : 1;
            for (size_t k = 0; k < sizeof counts_list / sizeof counts_list[0]; k++)
                for (int ri = 0; ri < nroots; ri++) {
                    run_case(&rt, c, algo, counts_list[k], NULL, roots[ri], 0, MDC_SUM);
                    if (c == MDC_COLL_BARRIER) break;
                }
            if (c == MDC_COLL_BARRIER) continue;
            if (c == MDC_COLL_REDUCE_SCATTER || c == MDC_COLL_ALLGATHER || c == MDC_COLL_ALLTOALLV)
                run_case(&rt, c, algo, 0, uneven, 0, 0, MDC_SUM);
            if (mdc_coll_is_reduction(c)) run_case(&rt, c, algo, 37, NULL, p - 1, 0, MDC_MAX);
        }
    }
    /* Ring allreduce chunking: chunks of 1, 3 and 5 elements, and one larger than a loop. */
    size_t chunks[] = {4, 12, 20, 4096};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        run_case(&rt, MDC_COLL_ALLREDUCE, "ring", 37, NULL, 0, chunks[k], MDC_SUM);
        run_case(&rt, MDC_COLL_ALLREDUCE, "ring", (size_t)p * 3 + 1, NULL, 0, chunks[k], MDC_SUM);
        /* The pipelined broadcast's chunks: 1, 3, 5 elements and one chunk, both roots. */
        run_case(&rt, MDC_COLL_BCAST, "pipeline", 37, NULL, 0, chunks[k], MDC_SUM);
        run_case(&rt, MDC_COLL_BCAST, "pipeline", 37, NULL, p - 1, chunks[k], MDC_SUM);
    }
    if (rt.rank == 0) printf("test_explain: %d cases, %d reduced elements checked bit for bit\n", cases, checked_elems);
    free(evs);
    int rc = tu_finish("test_explain");
    mdc_runtime_finalize(&rt);
    return rc;
}
