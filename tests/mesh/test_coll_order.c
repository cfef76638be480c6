/* Reduction order and rounding on random floats.
 * 1. Ring allreduce and ring reduce-scatter follow the documented NCCL order bit for bit:
 *    the test rebuilds every element as ((x_{c+1} + x_{c+2}) + ...) + x_c with the documented
 *    chunk partition (re-implemented here, not taken from the library), for f32, bf16 and f16,
 *    with several ring chunk sizes.
 * 2. Every reducing algorithm (allreduce, reduce_scatter, reduce) on random f32/f64/f16/bf16
 *    stays within the error bound of a length-p summation: |got - exact| <= p u sum|x| + u |exact|.
 * 3. Every allreduce leaves bit-identical results on all ranks, and the same call twice gives
 *    the same bits. */
#include <mpi.h>
#include <stdint.h>

#include "testutil.h"

static int P, R;

/* Input of rank r, element i, in [-1, 1], quantized to type t. */
static float rnd(int r, size_t i, mdc_dtype t, unsigned salt) {
    uint64_t z = (uint64_t)r * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + salt * 0x94D049BB133111EBull + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float f = (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    if (t == MDC_BF16) f = mdc_bf16_to_f32(mdc_f32_to_bf16(f));
    if (t == MDC_F16) f = mdc_f16_to_f32(mdc_f32_to_f16(f));
    return f;
}
/* One step of the GPU ring: a + b in f32, rounded to the type. */
static float add(mdc_dtype t, float a, float b) {
    float s = a + b;
    if (t == MDC_BF16) return mdc_bf16_to_f32(mdc_f32_to_bf16(s));
    if (t == MDC_F16) return mdc_f16_to_f32(mdc_f32_to_f16(s));
    return s;
}
/* NCCL ring order for an element of chunk c. */
static float ring_elem(mdc_dtype t, int p, int c, size_t i, unsigned salt) {
    float acc = rnd((c + 1) % p, i, t, salt);
    for (int k = 2; k <= p; k++) acc = add(t, acc, rnd((c + k) % p, i, t, salt));
    return acc;
}

static int cmp_bits(mdc_dtype t, const void *got, const void *want, size_t n, const char *what) {
    char w[512];
    snprintf(w, sizeof w, "rank %d/%d: %s", R, P, what);
    return tu_cmp_bits(t, got, want, n, w);
}

static void test_ring_order(mdc_group *g, mdc_dtype t, size_t count, size_t chunk_bytes) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t es = mdc_dtype_size(t);
    char *in = malloc(count * es + 1), *out = malloc(count * es + 1), *want = malloc(count * es + 1);
    for (size_t i = 0; i < count; i++) mdc_dtype_set(in, t, i, rnd(me, i, t, 1));
    /* The documented partition: loops of p chunks of q = min(chunk, ceil(rem / p)) elements. */
    size_t chunk = chunk_bytes ? (chunk_bytes / es ? chunk_bytes / es : 1) : 0;
    for (size_t base = 0; base < count;) {
        size_t rem = count - base, q = (rem + (size_t)p - 1) / (size_t)p;
        if (chunk && chunk < q) q = chunk;
        for (int c = 0; c < p; c++)
            for (size_t i = base + (size_t)c * q; i < base + (size_t)(c + 1) * q && i < count; i++)
                mdc_dtype_set(want, t, i, ring_elem(t, p, c, i, 1));
        base += (size_t)p * q;
        if (!chunk) break;
    }
    mdc_coll_set_ring_chunk(chunk_bytes);
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "ring"));
    MDC_CHECK(mdc_allreduce(in, out, count, t, MDC_SUM, g));
    char what[128];
    snprintf(what, sizeof what, "ring allreduce NCCL order, %s count %zu chunk %zu B", mdc_dtype_name(t), count,
             chunk_bytes);
    cmp_bits(t, out, want, count, what);
    /* The library's partition helper agrees with the documented one. */
    size_t loops = mdc_allreduce_ring_loops(count, p, chunk), covered = 0;
    for (size_t l = 0; l < loops; l++)
        for (int c = 0; c < p; c++) {
            size_t o, n;
            mdc_allreduce_ring_chunk(count, p, chunk, l, c, &o, &n);
            TU_CHECK(n == 0 || o == covered, "chunk %zu/%d starts at %zu, expected %zu", l, c, o, covered);
            covered += n;
        }
    TU_CHECK(covered == count, "ring chunks cover %zu of %zu elements", covered, count);
    mdc_coll_set_ring_chunk(0);
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "auto"));
    free(in);
    free(out);
    free(want);
}

static void test_rs_ring_order(mdc_group *g, mdc_dtype t, size_t base) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t es = mdc_dtype_size(t), *counts = malloc(sizeof(size_t) * (size_t)p), total = 0, off = 0;
    for (int i = 0; i < p; i++) {
        counts[i] = base + (size_t)(i % 2);
        if (i < me) off += counts[i];
        total += counts[i];
    }
    char *in = malloc(total * es + 1), *out = malloc(total * es + 1), *want = malloc(total * es + 1);
    for (size_t i = 0; i < total; i++) mdc_dtype_set(in, t, i, rnd(me, i, t, 2));
    for (size_t i = 0; i < counts[me]; i++) mdc_dtype_set(want, t, i, ring_elem(t, p, me, off + i, 2));
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_REDUCE_SCATTER, "ring"));
    MDC_CHECK(mdc_reduce_scatterv(in, out, counts, t, MDC_SUM, g));
    char what[128];
    snprintf(what, sizeof what, "ring reduce_scatterv NCCL order, %s base %zu", mdc_dtype_name(t), base);
    cmp_bits(t, out, want, counts[me], what);
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_REDUCE_SCATTER, "auto"));
    free(in);
    free(out);
    free(want);
    free(counts);
}

static double unit(mdc_dtype t) {
    return t == MDC_F64 ? 0x1p-53 : t == MDC_F32 ? 0x1p-24 : t == MDC_F16 ? 0x1p-11 : 0x1p-8;
}

/* Checks got[k] (k < n) against the exact reduction of element off + k. */
static void check_tol(mdc_dtype t, mdc_op op, int p, const void *got, size_t n, size_t off, unsigned salt,
                      const char *what) {
    size_t bad = 0, first = 0;
    double maxerr = 0, u = unit(t);
    for (size_t k = 0; k < n; k++) {
        double s = 0, a = 0;
        for (int r = 0; r < p; r++) {
            double x = rnd(r, off + k, t, salt);
            s += x;
            a += fabs(x);
        }
        double tol = p * u * a + u * fabs(s);
        if (op == MDC_AVG) {
            s /= p;
            tol = tol / p + u * fabs(s);
        }
        double e = fabs(mdc_dtype_get(got, t, k) - s);
        if (e > maxerr) maxerr = e;
        if (!(e <= tol)) {
            if (!bad) first = k;
            bad++;
        }
    }
    if (bad) {
        tu_failures++;
        if (tu_printed++ < 20)
            fprintf(stderr, "rank %d/%d: %s: %zu of %zu outside the bound; first at %zu (got %.9g); max error %.3g\n",
                    R, P, what, bad, n, first, mdc_dtype_get(got, t, first), maxerr);
    }
}

static void test_tolerance(mdc_group *g, size_t count) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    const mdc_dtype types[] = {MDC_F32, MDC_F64, MDC_F16, MDC_BF16};
    const mdc_op ops[] = {MDC_SUM, MDC_AVG};
    for (int ti = 0; ti < 4; ti++)
        for (int oi = 0; oi < 2; oi++) {
            mdc_dtype t = types[ti];
            mdc_op op = ops[oi];
            size_t es = mdc_dtype_size(t), all = count * (size_t)p;
            char *in = malloc(all * es), *out = malloc(all * es), *again = malloc(all * es), *r0 = malloc(all * es);
            char what[160];
            for (size_t i = 0; i < all; i++) mdc_dtype_set(in, t, i, rnd(me, i, t, 3));
            for (int a = 0; a < mdc_coll_algo_count(MDC_COLL_ALLREDUCE); a++) {
                MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, mdc_coll_algo_at(MDC_COLL_ALLREDUCE, a)->name));
                snprintf(what, sizeof what, "allreduce %s %s %s count %zu",
                         mdc_coll_algo_at(MDC_COLL_ALLREDUCE, a)->name, mdc_dtype_name(t), mdc_op_name(op), count);
                MDC_CHECK(mdc_allreduce(in, out, count, t, op, g));
                check_tol(t, op, p, out, count, 0, 3, what);
                MDC_CHECK(mdc_allreduce(in, again, count, t, op, g));
                cmp_bits(t, again, out, count, "allreduce twice: not deterministic");
                memcpy(r0, out, count * es);
                MPI_Bcast(r0, (int)(count * es), MPI_BYTE, 0, MPI_COMM_WORLD);
                char w2[200];
                snprintf(w2, sizeof w2, "%s: this rank differs from rank 0", what);
                cmp_bits(t, out, r0, count, w2);
            }
            for (int a = 0; a < mdc_coll_algo_count(MDC_COLL_REDUCE_SCATTER); a++) {
                MDC_CHECK(
                    mdc_coll_set_algo(MDC_COLL_REDUCE_SCATTER, mdc_coll_algo_at(MDC_COLL_REDUCE_SCATTER, a)->name));
                snprintf(what, sizeof what, "reduce_scatter %s %s %s count %zu",
                         mdc_coll_algo_at(MDC_COLL_REDUCE_SCATTER, a)->name, mdc_dtype_name(t), mdc_op_name(op), count);
                MDC_CHECK(mdc_reduce_scatter(in, out, count, t, op, g));
                check_tol(t, op, p, out, count, (size_t)me * count, 3, what);
            }
            for (int a = 0; a < mdc_coll_algo_count(MDC_COLL_REDUCE); a++) {
                MDC_CHECK(mdc_coll_set_algo(MDC_COLL_REDUCE, mdc_coll_algo_at(MDC_COLL_REDUCE, a)->name));
                int root = p / 2;
                snprintf(what, sizeof what, "reduce %s %s %s count %zu root %d",
                         mdc_coll_algo_at(MDC_COLL_REDUCE, a)->name, mdc_dtype_name(t), mdc_op_name(op), count, root);
                MDC_CHECK(mdc_reduce(in, out, count, t, op, root, g));
                if (me == root) check_tol(t, op, p, out, count, 0, 3, what);
            }
            free(in);
            free(out);
            free(again);
            free(r0);
        }
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "auto"));
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_REDUCE_SCATTER, "auto"));
    MDC_CHECK(mdc_coll_set_algo(MDC_COLL_REDUCE, "auto"));
}

/* Slicing (and the pipelined ring it enables) must change neither a bit of any result nor the
 * emulated device's clock and counters: every reducing algorithm runs unsliced, then with
 * 100-byte slices (every message here sliced), on random floats, from a zeroed device. */
static void test_slice_invariance(mdc_runtime *rt, size_t count) {
    mdc_group *g = rt->world;
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t all = count * (size_t)p, saved = mdc_coll_slice();
    float *in = malloc(all * 4), *out[2] = {malloc(all * 4), malloc(all * 4)};
    for (size_t i = 0; i < all; i++) in[i] = (float)rnd(me, i, MDC_F32, 3);
    const mdc_coll colls[] = {MDC_COLL_ALLREDUCE, MDC_COLL_REDUCE_SCATTER, MDC_COLL_REDUCE};
    for (int ci = 0; ci < 3; ci++)
        for (int a = 0; a < mdc_coll_algo_count(colls[ci]); a++) {
            const char *name = mdc_coll_algo_at(colls[ci], a)->name;
            MDC_CHECK(mdc_coll_set_algo(colls[ci], name));
            mdc_dev_counters c[2];
            for (int v = 0; v < 2; v++) {
                mdc_coll_set_slice(v ? 100 : 0);
                memset(out[v], 0, all * 4);
                mdc_dev_reset_counters(rt->dev);
                if (colls[ci] == MDC_COLL_ALLREDUCE) MDC_CHECK(mdc_allreduce(in, out[v], all, MDC_F32, MDC_SUM, g));
                else if (colls[ci] == MDC_COLL_REDUCE_SCATTER)
                    MDC_CHECK(mdc_reduce_scatter(in, out[v], count, MDC_F32, MDC_SUM, g));
                else MDC_CHECK(mdc_reduce(in, out[v], all, MDC_F32, MDC_SUM, p - 1, g));
                mdc_dev_get_counters(rt->dev, &c[v]);
            }
            char what[160];
            snprintf(what, sizeof what, "%s %s count %zu: 100-byte slices changed the result", mdc_coll_name(colls[ci]),
                     name, all);
            cmp_bits(MDC_F32, out[1], out[0], colls[ci] == MDC_COLL_REDUCE_SCATTER ? count : all, what);
            TU_CHECK(c[0].now == c[1].now && c[0].t_comm == c[1].t_comm && c[0].t_idle == c[1].t_idle &&
                         c[0].bytes_sent == c[1].bytes_sent && c[0].messages_sent == c[1].messages_sent,
                     "%s %s: rank %d: slices moved the virtual clock: now %.17g vs %.17g, comm %.17g vs %.17g, "
                     "idle %.17g vs %.17g, %g vs %g messages",
                     mdc_coll_name(colls[ci]), name, me, c[1].now, c[0].now, c[1].t_comm, c[0].t_comm, c[1].t_idle,
                     c[0].t_idle, c[1].messages_sent, c[0].messages_sent);
            MDC_CHECK(mdc_coll_set_algo(colls[ci], "auto"));
        }
    mdc_coll_set_slice(saved);
    free(in);
    free(out[0]);
    free(out[1]);
}

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    tu_coll_options(argc, argv);
    P = rt.size;
    R = rt.rank;
    const mdc_dtype types[] = {MDC_F32, MDC_BF16, MDC_F16};
    const size_t counts[] = {1, (size_t)P + 1, 1001};
    const size_t chunks[] = {0, 4, 28, 1000};
    for (int ti = 0; ti < 3; ti++)
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 4; k++) test_ring_order(rt.world, types[ti], counts[c], chunks[k]);
    for (int ti = 0; ti < 3; ti++) {
        test_rs_ring_order(rt.world, types[ti], 0);
        test_rs_ring_order(rt.world, types[ti], 333);
    }
    test_tolerance(rt.world, 1001);
    test_slice_invariance(&rt, 301);
    /* The same on 2 GPUs per node (hierarchical for real). */
    mdc_transport *t2;
    mdc_group *w2;
    MDC_CHECK(mdc_transport_create(&t2, NULL, rt.dev, 2));
    MDC_CHECK(mdc_group_world(&w2, t2));
    test_tolerance(w2, 257);
    mdc_group_free(w2);
    mdc_transport_free(t2);
    int rc = tu_finish("test_coll_order");
    mdc_runtime_finalize(&rt);
    return rc;
}
