/* Bounds of every collective algorithm: each writes only the elements the call gives it.
 * Every registered algorithm of every collective (forced by name), out of place, with
 * MDC_IN_PLACE and with sendbuf == recvbuf, with uneven per-rank counts (zeros too) and gaps
 * between blocks where the collective allows them. Every buffer sits between guard elements
 * and starts full of a known pattern (a NaN payload for floats, 0xA5 bytes for the rest);
 * afterwards an element the rank owns must hold its result, every other element exactly what
 * it held before (the pattern, or the caller's input in place), and the send buffer must be
 * unchanged. Reductions run in the default dtypes and in exact mode's (MDC_EXACT,
 * MDC_EXACT_F64). Inputs are small integers, so results do not depend on the order of
 * reduction. A failure names the case, algorithm, rank, buffer, index and both values.
 * Options: --slice BYTES (testutil.h), --chunk BYTES (the ring chunk). */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>

#include "testutil.h"

#define GUARD 4 /* pattern elements before and after every buffer */

static int P, R;
static long ncalls;
static char ctx[224]; /* the case being run, for failure messages */

/* One buffer of a call: GUARD + n + GUARD elements, what it must hold afterwards, and what
 * each element is ('g' guard, 'k' kept: pattern or input, 'r' a result of this rank). */
typedef struct {
    mdc_dtype t;
    size_t n;
    char *mem, *want, *kind;
} tbuf;

static void pattern(void *dst, mdc_dtype t) {
    static const uint64_t pat[MDC_DTYPE_END] = {[MDC_F32] = 0x7fc0a5a5u, [MDC_F64] = 0x7ff8a5a5a5a5a5a5u,
                                                [MDC_F16] = 0x7e5au,     [MDC_BF16] = 0x7fe5u,
                                                [MDC_I32] = 0xa5a5a5a5u, [MDC_I64] = 0xa5a5a5a5a5a5a5a5u,
                                                [MDC_U8] = 0xa5u,        [MDC_EXACT_F64] = 0x7ff8a5a5a5a5a5a5u};
    size_t es = mdc_dtype_size(t);
    if (t == MDC_EXACT) memset(dst, 0xa5, es);
    else
        for (size_t b = 0; b < es; b++) ((unsigned char *)dst)[b] = (unsigned char)(pat[t] >> (8 * b));
}

static void tb_make(tbuf *b, mdc_dtype t, size_t n) {
    size_t es = mdc_dtype_size(t), all = n + 2 * GUARD;
    b->t = t, b->n = n;
    b->mem = malloc(all * es), b->want = malloc(all * es), b->kind = malloc(all);
    if (!b->mem || !b->want || !b->kind) exit(2);
    for (size_t i = 0; i < all; i++) {
        pattern(b->mem + i * es, t);
        b->kind[i] = i < GUARD || i >= GUARD + n ? 'g' : 'k';
    }
    memcpy(b->want, b->mem, all * es);
}
static void tb_free(tbuf *b) {
    free(b->mem);
    free(b->want);
    free(b->kind);
}
static void *tb_at(const tbuf *b, size_t i) { return b->mem + (GUARD + i) * mdc_dtype_size(b->t); }
/* Element i holds v before the call and must still hold it after (unless tb_out follows). */
static void tb_in(tbuf *b, size_t i, double v) {
    mdc_dtype_set(b->mem, b->t, GUARD + i, v);
    mdc_dtype_set(b->want, b->t, GUARD + i, v);
}
/* Element i is this rank's result, v. */
static void tb_out(tbuf *b, size_t i, double v) {
    mdc_dtype_set(b->want, b->t, GUARD + i, v);
    b->kind[GUARD + i] = 'r';
}

static void show(char *s, size_t n, const tbuf *b, const char *buf, size_t i) {
    size_t es = mdc_dtype_size(b->t), k = es < 8 ? es : 8;
    unsigned long long bits = 0;
    for (size_t j = 0; j < k; j++) bits |= (unsigned long long)(unsigned char)buf[i * es + j] << (8 * j);
    snprintf(s, n, "%.9g (0x%0*llx%s)", mdc_dtype_get(buf, b->t, i), (int)(2 * k), bits, es > 8 ? "..." : "");
}

/* Every element against its expected bytes (an exact result by its value: sums of
 * accumulators need not share their limbs); reports how many differ and the first one. */
static void tb_check(const tbuf *b, const char *what) {
    size_t es = mdc_dtype_size(b->t), all = b->n + 2 * GUARD, bad[3] = {0, 0, 0}, first = 0, nbad = 0;
    for (size_t i = 0; i < all; i++) {
        const char *g = b->mem + i * es, *w = b->want + i * es;
        int same = b->kind[i] == 'r' && b->t == MDC_EXACT ? mdc_dtype_get(g, b->t, 0) == mdc_dtype_get(w, b->t, 0)
                                                          : !memcmp(g, w, es);
        if (same) continue;
        if (!nbad++) first = i;
        bad[b->kind[i] == 'g' ? 0 : b->kind[i] == 'k' ? 1 : 2]++;
    }
    if (!nbad) return;
    tu_failures++;
    if (tu_printed++ >= 30) return;
    char got[64], want[64];
    show(got, sizeof got, b, b->mem, first);
    show(want, sizeof want, b, b->want, first);
    const char *where = b->kind[first] == 'r'   ? "its result"
                        : b->kind[first] == 'k' ? "not the rank's"
                        : first < GUARD         ? "guard before"
                                                : "guard after";
    fprintf(stderr,
            "[%s] rank %d/%d: %s: %zu of %zu elements wrong (%zu guard, %zu not the rank's, %zu results); "
            "first: element %ld (%s) is %s, want %s\n",
            ctx, R, P, what, nbad, all, bad[0], bad[1], bad[2], (long)first - GUARD, where, got, want);
}

static void ok(mdc_status st) {
    if (st != MDC_OK) {
        fprintf(stderr, "rank %d: [%s]: %s: %s\n", R, ctx, mdc_strerror(st), mdc_detail());
        exit(1);
    }
    ncalls++;
}

static const char *const mode_name[] = {"out of place", "MDC_IN_PLACE", "sendbuf == recvbuf"};
static void name_case(mdc_coll c, int a, mdc_dtype t, int op, const char *mode, const char *fmt, ...) {
    char more[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(more, sizeof more, fmt, ap);
    va_end(ap);
    snprintf(ctx, sizeof ctx, "%s %s: %s%s%s, %s%s%s", mdc_coll_name(c), mdc_coll_algo_at(c, a)->name,
             mdc_dtype_name(t), op < 0 ? "" : " ", op < 0 ? "" : mdc_op_name((mdc_op)op), more, *mode ? ", " : "",
             mode);
}
static int force(mdc_coll c, int a) {
    MDC_CHECK(mdc_coll_set_algo(c, mdc_coll_algo_at(c, a)->name));
    return 1;
}
#define FOR_ALGOS(c, a) for (int a = 0; a < mdc_coll_algo_count(c) && force(c, a); a++)
/* The send argument of mode m: its own buffer, MDC_IN_PLACE, or the receive buffer. */
static const void *send_arg(int m, const tbuf *s, const tbuf *r) {
    return m == 0 ? tb_at(s, 0) : m == 1 ? MDC_IN_PLACE : tb_at(r, 0);
}

/* The input of rank r, element i (alltoall: r = sender * P + receiver); reduced: over all ranks. */
static double val(int r, size_t i) { return (double)((r * 7 + (long)i * 3 + 1) % 9 - 4); }
static double reduced(size_t i, mdc_op op) {
    double acc = val(0, i);
    for (int r = 1; r < P; r++) acc = op == MDC_MAX ? fmax(acc, val(r, i)) : acc + val(r, i);
    return acc;
}

static const struct {
    mdc_dtype t;
    mdc_op op;
} reds[] = {
    {MDC_F32, MDC_SUM}, {MDC_BF16, MDC_SUM}, {MDC_I32, MDC_MAX}, {MDC_EXACT, MDC_SUM}, {MDC_EXACT_F64, MDC_SUM}};
#define NRED (int)(sizeof reds / sizeof reds[0])
static const mdc_dtype moves[] = {MDC_U8, MDC_F32};
#define NMOVE 2

/* Block sizes: shapes 0-1 equal (1, P + 1), 2-4 per rank (zeros among them, small, above a
 * 100-byte slice). Returns 1 for the equal ones. */
#define NSHAPE 5
static int shape(int k, size_t *cnt) {
    for (int i = 0; i < P; i++)
        cnt[i] = k == 0   ? 1
                 : k == 1 ? (size_t)P + 1
                 : k == 2 ? (size_t)(3 * i + 1) % 4
                 : k == 3 ? 5 + (size_t)(i % 3)
                          : 33 + (size_t)(i % 4);
    return k < 2;
}
static const size_t sizes[] = {1, 3, 37};
#define NSIZE 3

static void test_allreduce(mdc_group *g, const char *gname) {
    int me = mdc_group_rank(g);
    for (int k = 0; k < NRED; k++)
        for (int c = 0; c < NSIZE; c++) FOR_ALGOS(MDC_COLL_ALLREDUCE, a)
    for (int m = 0; m < 3; m++) {
        size_t n = sizes[c] + (c ? (size_t)P : 0);
        tbuf s, r;
        tb_make(&s, reds[k].t, m ? 0 : n);
        tb_make(&r, reds[k].t, n);
        for (size_t i = 0; i < n; i++) tb_in(m ? &r : &s, i, val(me, i)), tb_out(&r, i, reduced(i, reds[k].op));
        name_case(MDC_COLL_ALLREDUCE, a, reds[k].t, reds[k].op, mode_name[m], "count %zu on %s", n, gname);
        ok(mdc_allreduce(send_arg(m, &s, &r), tb_at(&r, 0), n, reds[k].t, reds[k].op, g));
        tb_check(&s, "sendbuf"), tb_check(&r, "recvbuf");
        tb_free(&s), tb_free(&r);
    }
}

/* recvbuf always spans every block: beyond the rank's own count nothing is its own. */
static void test_reduce_scatter(mdc_group *g) {
    int me = mdc_group_rank(g);
    size_t *cnt = malloc(sizeof(size_t) * (size_t)P);
    for (int k = 0; k < NRED; k++)
        for (int sh = 0; sh < NSHAPE; sh++) FOR_ALGOS(MDC_COLL_REDUCE_SCATTER, a)
    for (int m = 0; m < 3; m++) {
        int equal = shape(sh, cnt);
        size_t total = 0, off = 0;
        for (int i = 0; i < P; i++) off += i < me ? cnt[i] : 0, total += cnt[i];
        tbuf s, r;
        tb_make(&s, reds[k].t, m ? 0 : total);
        tb_make(&r, reds[k].t, total);
        for (size_t i = 0; i < total; i++) tb_in(m ? &r : &s, i, val(me, i));
        for (size_t i = 0; i < cnt[me]; i++) tb_out(&r, i, reduced(off + i, reds[k].op));
        name_case(MDC_COLL_REDUCE_SCATTER, a, reds[k].t, reds[k].op, mode_name[m], "%s counts, %zu here of %zu",
                  equal ? "equal" : "per-rank", cnt[me], total);
        const void *sb = send_arg(m, &s, &r);
        ok(equal ? mdc_reduce_scatter(sb, tb_at(&r, 0), cnt[0], reds[k].t, reds[k].op, g)
                 : mdc_reduce_scatterv(sb, tb_at(&r, 0), cnt, reds[k].t, reds[k].op, g));
        tb_check(&s, "sendbuf"), tb_check(&r, "recvbuf");
        tb_free(&s), tb_free(&r);
    }
    free(cnt);
}

static void test_reduce(mdc_group *g) {
    int me = mdc_group_rank(g);
    for (int root = 0; root < P; root++)
        for (int k = 0; k < NRED; k++)
            for (int c = 0; c < NSIZE; c++) FOR_ALGOS(MDC_COLL_REDUCE, a)
    for (int m = 0; m < 3; m++) {
        size_t n = sizes[c] + (c ? (size_t)P : 0);
        int at = me == root, ip = m && at; /* a non-root's recvbuf is not its own */
        tbuf s, r;
        tb_make(&s, reds[k].t, ip ? 0 : n);
        tb_make(&r, reds[k].t, n);
        for (size_t i = 0; i < n; i++) {
            tb_in(ip ? &r : &s, i, val(me, i));
            if (at) tb_out(&r, i, reduced(i, reds[k].op));
        }
        name_case(MDC_COLL_REDUCE, a, reds[k].t, reds[k].op, mode_name[m], "count %zu root %d", n, root);
        ok(mdc_reduce(ip ? send_arg(m, &s, &r) : tb_at(&s, 0), tb_at(&r, 0), n, reds[k].t, reds[k].op, root, g));
        tb_check(&s, "sendbuf"), tb_check(&r, at ? "recvbuf" : "recvbuf (not the root)");
        tb_free(&s), tb_free(&r);
    }
}

/* Per-rank shapes leave one or two pattern elements between the blocks. */
static void test_allgather(mdc_group *g) {
    int me = mdc_group_rank(g);
    size_t *cnt = malloc(2 * sizeof(size_t) * (size_t)P), *dsp = cnt + P;
    for (int k = 0; k < NMOVE; k++)
        for (int sh = 0; sh < NSHAPE; sh++) FOR_ALGOS(MDC_COLL_ALLGATHER, a)
    for (int m = 0; m < 3; m++) {
        int equal = shape(sh, cnt);
        size_t ext = 0;
        for (int j = 0; j < P; j++) dsp[j] = ext + (equal ? 0 : 1 + (size_t)(j % 2)), ext = dsp[j] + cnt[j];
        tbuf s, r;
        tb_make(&s, moves[k], m ? 0 : cnt[me]);
        tb_make(&r, moves[k], ext + (equal ? 0 : 2));
        for (size_t i = 0; i < cnt[me]; i++) tb_in(m ? &r : &s, (m ? dsp[me] : 0) + i, val(me, i));
        for (int j = 0; j < P; j++)
            for (size_t i = 0; i < cnt[j]; i++) tb_out(&r, dsp[j] + i, val(j, i));
        name_case(MDC_COLL_ALLGATHER, a, moves[k], -1, mode_name[m], "%s counts, %zu here of %zu",
                  equal ? "equal" : "per-rank (gaps)", cnt[me], ext);
        const void *sb = send_arg(m, &s, &r);
        ok(equal ? mdc_allgather(sb, tb_at(&r, 0), cnt[0], moves[k], g)
                 : mdc_allgatherv(sb, tb_at(&r, 0), cnt, dsp, moves[k], g));
        tb_check(&s, "sendbuf"), tb_check(&r, "recvbuf");
        tb_free(&s), tb_free(&r);
    }
    free(cnt);
}

static void test_bcast(mdc_group *g) {
    int me = mdc_group_rank(g);
    for (int root = 0; root < P; root++)
        for (int k = 0; k < NMOVE; k++)
            for (int c = 0; c < NSIZE; c++) FOR_ALGOS(MDC_COLL_BCAST, a) {
                    size_t n = sizes[c] + (c ? (size_t)P : 0);
                    tbuf b;
                    tb_make(&b, moves[k], n);
                    for (size_t i = 0; i < n; i++)
                        me == root ? tb_in(&b, i, val(root, i)) : tb_out(&b, i, val(root, i));
                    name_case(MDC_COLL_BCAST, a, moves[k], -1, "", "count %zu root %d", n, root);
                    ok(mdc_bcast(tb_at(&b, 0), n, moves[k], root, g));
                    tb_check(&b, "buf");
                    tb_free(&b);
                }
}

/* Gather and scatter: a non-root's root-side buffer (recvbuf, sendbuf) is passed too, and
 * must stay untouched. In place at the root the own block stays where it is. */
static void test_gather_scatter(mdc_group *g, int scatter) {
    int me = mdc_group_rank(g);
    mdc_coll coll = scatter ? MDC_COLL_SCATTER : MDC_COLL_GATHER;
    for (int root = 0; root < P; root++)
        for (int k = 0; k < NMOVE; k++)
            for (int c = 0; c < NSIZE; c++) FOR_ALGOS(coll, a)
    for (int m = 0; m < 3; m++) {
        size_t n = sizes[c] + (c ? (size_t)P : 0), all = n * (size_t)P;
        int at = me == root, ip = m && at;
        tbuf one, whole; /* the rank's block; the root's p blocks */
        tb_make(&one, moves[k], ip ? 0 : n);
        tb_make(&whole, moves[k], all);
        for (size_t i = 0; i < n; i++) {
            if (!scatter) tb_in(ip ? &whole : &one, (ip ? (size_t)root * n : 0) + i, val(me, i));
            else if (!ip) tb_out(&one, i, val(me, i));
        }
        for (int j = 0; j < P && at; j++)
            for (size_t i = 0; i < n; i++)
                scatter ? tb_in(&whole, (size_t)j * n + i, val(j, i)) : tb_out(&whole, (size_t)j * n + i, val(j, i));
        name_case(coll, a, moves[k], -1, mode_name[m], "count %zu root %d", n, root);
        const void *in_place = ip ? send_arg(m, &one, &whole) : tb_at(&one, 0);
        ok(scatter ? mdc_scatter(tb_at(&whole, 0), (void *)in_place, n, moves[k], root, g)
                   : mdc_gather(in_place, tb_at(&whole, 0), n, moves[k], root, g));
        tb_check(&one, scatter ? "recvbuf" : "sendbuf");
        tb_check(&whole,
                 scatter ? (at ? "sendbuf" : "sendbuf (not the root)") : (at ? "recvbuf" : "recvbuf (not the root)"));
        tb_free(&one), tb_free(&whole);
    }
}

static void test_alltoall(mdc_group *g) {
    int me = mdc_group_rank(g);
    for (int k = 0; k < NMOVE; k++)
        for (int c = 0; c < NSIZE; c++) FOR_ALGOS(MDC_COLL_ALLTOALL, a)
    for (int m = 0; m < 3; m++) {
        size_t n = sizes[c], all = n * (size_t)P;
        tbuf s, r;
        tb_make(&s, moves[k], m ? 0 : all);
        tb_make(&r, moves[k], all);
        for (int j = 0; j < P; j++)
            for (size_t i = 0; i < n; i++) {
                tb_in(m ? &r : &s, (size_t)j * n + i, val(me * P + j, i));
                tb_out(&r, (size_t)j * n + i, val(j * P + me, i));
            }
        name_case(MDC_COLL_ALLTOALL, a, moves[k], -1, mode_name[m], "count %zu", n);
        ok(mdc_alltoall(send_arg(m, &s, &r), tb_at(&r, 0), n, moves[k], g));
        tb_check(&s, "sendbuf"), tb_check(&r, "recvbuf");
        tb_free(&s), tb_free(&r);
    }
}

/* Per-pair counts (zeros among them) with one or two pattern elements between blocks; in
 * place the counts are symmetric, as recvcounts then describe the data sent too. */
static void test_alltoallv(mdc_group *g) {
    int me = mdc_group_rank(g);
    size_t *sc = malloc(4 * sizeof(size_t) * (size_t)P), *sd = sc + P, *rc = sd + P, *rd = rc + P;
    for (int k = 0; k < NMOVE; k++)
        for (int v = 0; v < 3; v++) FOR_ALGOS(MDC_COLL_ALLTOALLV, a)
    for (int m = 0; m < 3; m++) {
        size_t se = 0, re = 0;
        for (int j = 0; j < P; j++) {
            sc[j] = m ? (size_t)(me + j + v) % 3 : (size_t)(me + 2 * j + v) % 4;
            rc[j] = m ? sc[j] : (size_t)(j + 2 * me + v) % 4;
            sd[j] = se + 1 + (size_t)(j % 2), se = sd[j] + sc[j];
            rd[j] = re + 1 + (size_t)(j % 2), re = rd[j] + rc[j];
        }
        tbuf s, r;
        tb_make(&s, moves[k], m ? 0 : se + 1);
        tb_make(&r, moves[k], re + 1);
        for (int j = 0; j < P; j++) {
            for (size_t i = 0; i < sc[j]; i++) tb_in(m ? &r : &s, (m ? rd : sd)[j] + i, val(me * P + j, i));
            for (size_t i = 0; i < rc[j]; i++) tb_out(&r, rd[j] + i, val(j * P + me, i));
        }
        name_case(MDC_COLL_ALLTOALLV, a, moves[k], -1, mode_name[m], "counts %d", v);
        ok(mdc_alltoallv(send_arg(m, &s, &r), m ? NULL : sc, m ? NULL : sd, tb_at(&r, 0), rc, rd, moves[k], g));
        tb_check(&s, "sendbuf"), tb_check(&r, "recvbuf");
        tb_free(&s), tb_free(&r);
    }
    free(sc);
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    tu_coll_options(argc, argv);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--chunk")) mdc_coll_set_ring_chunk((size_t)strtoull(argv[i + 1], NULL, 10));
    P = rt.size, R = rt.rank;
    double t0 = MPI_Wtime();
    /* Every collective with algorithms has its test here: a new one fails until it has. */
    for (int c = 0; c < MDC_COLL_COUNT; c++) {
        long before = ncalls;
        switch ((mdc_coll)c) {
        case MDC_COLL_ALLREDUCE: test_allreduce(rt.world, "world"); break;
        case MDC_COLL_REDUCE_SCATTER: test_reduce_scatter(rt.world); break;
        case MDC_COLL_ALLGATHER: test_allgather(rt.world); break;
        case MDC_COLL_BCAST: test_bcast(rt.world); break;
        case MDC_COLL_REDUCE: test_reduce(rt.world); break;
        case MDC_COLL_GATHER: test_gather_scatter(rt.world, 0); break;
        case MDC_COLL_SCATTER: test_gather_scatter(rt.world, 1); break;
        case MDC_COLL_ALLTOALL: test_alltoall(rt.world); break;
        case MDC_COLL_ALLTOALLV: test_alltoallv(rt.world); break;
        case MDC_COLL_BARRIER: before = -1; break; /* moves no data */
        default: break;
        }
        TU_CHECK(before < 0 || ncalls > before, "no bounds test for %s", mdc_coll_name((mdc_coll)c));
        MDC_CHECK(mdc_coll_set_algo((mdc_coll)c, "auto"));
        if (R == 0 && getenv("TEST_VERBOSE")) printf("  %-16s %.2f s\n", mdc_coll_name((mdc_coll)c), MPI_Wtime() - t0);
    }
    /* 2 GPUs per virtual node: the hierarchical allreduce runs for real when p is even. */
    mdc_transport *t2;
    mdc_group *w2;
    MDC_CHECK(mdc_transport_create(&t2, NULL, rt.dev, 2));
    MDC_CHECK(mdc_group_world(&w2, t2));
    test_allreduce(w2, "2 per node");
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "auto"));
    mdc_group_free(w2);
    mdc_transport_free(t2);

    long total = 0;
    MPI_Allreduce(&ncalls, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (R == 0)
        printf("test_coll_bounds: %ld collective calls checked on %d ranks in %.2f s\n", total, P, MPI_Wtime() - t0);
    int rc = tu_finish("test_coll_bounds");
    mdc_runtime_finalize(&rt);
    return rc;
}
