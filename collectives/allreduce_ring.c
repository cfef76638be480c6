/* Ring allreduce in NCCL's order.
 *
 * Algorithm: the vector is cut into loops of p chunks (mdc_allreduce_ring_chunk); for each loop,
 *   a ring reduce-scatter then a ring allgather around 0 -> 1 -> ... -> p-1 -> 0. The rank at
 *   ring position r first sends chunk (r-1) mod p; chunk c is started by position c+1 and
 *   accumulated one rank at a time (partial OP own), ending at c, which then circulates it:
 *   out[i in chunk c] = ((x_{c+1} + x_{c+2}) + ...) + x_c, indices mod p.
 * Source: Patarasuk & Yuan 2009; NCCL src/device/all_reduce.h (runRing), chunking as NCCL's
 *   loop of nranks * chunkSize with realChunkSize = min(chunkSize, ceil(remaining / nranks)).
 * Restrictions: none. Bandwidth-optimal; latency 2(p-1) steps per loop.
 * Cost: 2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma (per loop for the alpha term). */
#include "schedule_build.h"

size_t mdc_allreduce_ring_loops(size_t count, int p, size_t chunk_elems) {
    if (count == 0) return 0;
    if (chunk_elems == 0) return 1;
    size_t per = (size_t)p * chunk_elems;
    return (count + per - 1) / per;
}

void mdc_allreduce_ring_chunk(size_t count, int p, size_t chunk_elems, size_t loop, int c, size_t *off, size_t *len) {
    size_t base = chunk_elems ? loop * (size_t)p * chunk_elems : 0;
    size_t rem = count > base ? count - base : 0;
    size_t q = (rem + (size_t)p - 1) / (size_t)p;
    if (chunk_elems && chunk_elems < q) q = chunk_elems;
    size_t lo = (size_t)c * q, hi = (size_t)(c + 1) * q;
    if (lo > rem) lo = rem;
    if (hi > rem) hi = rem;
    *off = base + lo;
    *len = hi - lo;
}

mdc_status mdc_allreduce_ring(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_op op, mdc_group *g) {
    if (sendbuf == MDC_IN_PLACE) sendbuf = recvbuf;
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    if (mdc_i_allreduce_trivial(sendbuf, recvbuf, count, t, g)) return MDC_OK;
    size_t cb = mdc_coll_ring_chunk(), chunk = cb ? (cb / esz ? cb / esz : 1) : 0;
    size_t *off = malloc(4 * sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "allreduce ring: offsets");
    size_t *len = off + p, *offb = len + p, *lenb = offb + p;
    mdc_status st = MDC_OK;
    size_t loops = mdc_allreduce_ring_loops(count, p, chunk);
    for (size_t l = 0; l < loops && !st; l++) {
        for (int c = 0; c < p; c++) {
            mdc_allreduce_ring_chunk(count, p, chunk, l, c, &off[c], &len[c]);
            offb[c] = off[c] * esz;
            lenb[c] = len[c] * esz;
        }
        /* Partials go straight into recvbuf; the allgather then overwrites every chunk. */
        st = mdc_i_ring_rs(g, NULL, p, me, sendbuf, recvbuf, (char *)recvbuf + offb[me], off, len, t, op,
                           MDC_I_TAG(MDC_COLL_ALLREDUCE, 0));
        if (!st) st = mdc_i_ring_ag(g, NULL, p, me, recvbuf, offb, lenb, NULL, MDC_I_TAG(MDC_COLL_ALLREDUCE, 1));
    }
    if (!st) mdc_reduce_finish(recvbuf, count, t, op, p);
    free(off);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    mdc_i_sched_formula(s, 2.0 * (p - 1) / p * (double)n, "2(p-1)/p n");
    if (p == 1 || s->count == 0) return MDC_OK;
    size_t chunk = s->chunk_bytes ? (s->chunk_bytes / esz ? s->chunk_bytes / esz : 1) : 0;
    size_t loops = mdc_allreduce_ring_loops(s->count, p, chunk);
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    if (!off) return mdc_fail(MDC_ERR_OOM_HOST, "schedule");
    size_t *len = off + p;
    int step = 0;
    mdc_status st = MDC_OK;
    for (size_t l = 0; l < loops && !st; l++) {
        for (int c = 0; c < p; c++) mdc_allreduce_ring_chunk(s->count, p, chunk, l, c, &off[c], &len[c]);
        char label[32] = "";
        if (loops > 1) snprintf(label, sizeof label, "loop %zu: ", l);
        st = mdc_i_sched_ring_rs(s, &step, NULL, p, off, len, label);
        if (!st) st = mdc_i_sched_ring_ag(s, &step, NULL, p, off, len, 1, label, "chunk");
    }
    free(off);
    if (loops > 1)
        snprintf(s->note, sizeof s->note,
                 "ring chunk %zu elements: %zu loops of up to p x chunk "
                 "elements, each a reduce-scatter and an allgather",
                 chunk, loops);
    else
        snprintf(s->note, sizeof s->note,
                 "chunks: p balanced pieces of ceil(count/p) elements "
                 "(the last ones shorter or empty)");
    return st;
}

static double cost(const mdc_i_cost_in *x) {
    return 2 * (x->P - 1) * x->a + 2 * x->f * x->n * x->b + x->f * x->n * x->g;
}

const mdc_i_algo mdc_i_algo_allreduce_ring = {
    .info = {"ring", "mdc_allreduce_ring",
             "reduce-scatter + allgather around the ring, NCCL order, chunked by the ring chunk",
             "2(p-1) a + 2(p-1)/p n b + (p-1)/p n g"},
    .coll = MDC_COLL_ALLREDUCE,
    .cost = cost,
    .schedule = schedule,
    .run.allreduce = mdc_allreduce_ring,
};
