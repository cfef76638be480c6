/* Pipelined chain broadcast (NCCL's ring broadcast).
 *
 * Algorithm: the ranks form a chain in order from the root (position i = (r - root) mod p;
 *   root -> root+1 -> ... -> root+p-1). The buffer travels in m chunks of C bytes (the ring
 *   chunk, mdc_coll_ring_chunk / MINIDC_RING_CHUNK, else 1 MiB); a rank forwards chunk k to
 *   the next position as soon as it has received it, so every link of the chain carries a
 *   chunk at once. A rank keeps PIPE_WINDOW receives posted ahead and PIPE_WINDOW sends in flight
 *   (it waits on the oldest before posting another), so its requests stay bounded however many
 *   chunks there are.
 * Source: NCCL's broadcast (a ring from the root, pipelined in chunks); van de Geijn's
 *   pipelined broadcast.
 * Restrictions: none. With one chunk it is a plain chain, p-1 hops of the whole buffer.
 * Cost: (p - 2 + m)(alpha + n/m beta); every non-root rank receives n bytes, the root sends n. */
#include <math.h>

#include "schedule_build.h"

#define PIPE_CHUNK (1u << 20) /* default chunk bytes */
#define PIPE_WINDOW 4         /* receives posted ahead */

size_t mdc_i_pipeline_chunk(size_t chunk_bytes, size_t esz) {
    size_t c = chunk_bytes ? chunk_bytes : PIPE_CHUNK;
    c -= c % esz;
    return c ? c : esz;
}

mdc_status mdc_bcast_pipeline(void *buf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), pos = mdc_i_mod(me - root, p);
    size_t esz = mdc_dtype_size(t), bytes = count * esz;
    const int tag = MDC_I_TAG(MDC_COLL_BCAST, 1);
    if (p == 1 || bytes == 0) return MDC_OK;
    size_t chunk = mdc_i_pipeline_chunk(mdc_coll_ring_chunk(), esz), m = (bytes + chunk - 1) / chunk;
    int prev = pos ? mdc_i_mod(me - 1, p) : -1, next = pos < p - 1 ? mdc_i_mod(me + 1, p) : -1;
    /* sends[k % PIPE_WINDOW]: chunk k to next, recvs[k % PIPE_WINDOW]: the receive of chunk k
     * (NULL until posted; mdc_waitall skips NULLs) */
    mdc_request *sends[PIPE_WINDOW] = {NULL}, *recvs[PIPE_WINDOW] = {NULL};
    char *b = buf;
    mdc_status st = MDC_OK;
    size_t posted = 0;
#define CHUNK_LEN(k) ((k) + 1 < m ? chunk : bytes - (k)*chunk)
    for (; prev >= 0 && posted < m && posted < PIPE_WINDOW && !st; posted++)
        st = mdc_irecv(b + posted * chunk, CHUNK_LEN(posted), prev, tag, g, &recvs[posted % PIPE_WINDOW]);
    for (size_t k = 0; k < m && !st; k++) {
        if (prev >= 0) {
            st = mdc_waitall(&recvs[k % PIPE_WINDOW], 1);
            if (!st && posted < m) {
                st = mdc_irecv(b + posted * chunk, CHUNK_LEN(posted), prev, tag, g, &recvs[posted % PIPE_WINDOW]);
                posted++;
            }
        }
        if (!st && next >= 0 && !(st = mdc_waitall(&sends[k % PIPE_WINDOW], 1)))
            st = mdc_isend(b + k * chunk, CHUNK_LEN(k), next, tag, g, &sends[k % PIPE_WINDOW]);
    }
#undef CHUNK_LEN
    if (st) mdc_i_abandon(recvs, PIPE_WINDOW);
    mdc_status st2 = mdc_waitall(sends, PIPE_WINDOW);
    return st ? st : st2;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

/* The chain from the root in chunks: chunk k leaves position i-1
 * (rank root+i-1) for position i at step k + i - 1, so up to p-1 chunks move at once. The chunk
 * is the ring chunk (explain --chunk), else 1 MiB, in whole elements. */
static mdc_status schedule(mdc_schedule *s) {
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    size_t chunk = mdc_i_pipeline_chunk(s->chunk_bytes, esz), m = (n + chunk - 1) / chunk;
    mdc_i_sched_formula(s, p > 1 ? (double)n : 0,
                        "n  (the root sends each chunk once; every other rank "
                        "receives n and forwards it, but the last)");
    if (p == 1 || !n) return MDC_OK;
    for (size_t k = 0; k < m; k++) {
        size_t len = k + 1 < m ? chunk : n - k * chunk;
        for (int i = 1; i < p; i++) {
            int step = (int)k + i - 1;
            mdc_i_sched_phase(s, step, "chunks along the chain");
            MDC_I_TRY(mdc_i_sched_add(s, step, mdc_i_mod(s->root + i - 1, p), mdc_i_mod(s->root + i, p), len,
                                      MDC_SCHED_STORE, 0, 0, "chunk %zu", k));
        }
    }
    snprintf(s->note, sizeof s->note,
             "%zu chunk(s) of up to %zu bytes; the chain runs root, root+1, ..., "
             "root+p-1",
             m, chunk);
    return MDC_OK;
}

/* m = the chunks of the ring chunk (mdc_coll_ring_chunk) the buffer is cut into. */
static double cost(const mdc_i_cost_in *x) {
    double chunks = ceil(x->n / (double)mdc_i_pipeline_chunk(mdc_coll_ring_chunk(), 1));
    if (chunks < 1) chunks = 1;
    return (x->P - 2 + chunks) * (x->a + x->n / chunks * x->b);
}

const mdc_i_algo mdc_i_algo_bcast_pipeline = {
    .info = {"pipeline", "mdc_bcast_pipeline",
             "chain from the root in chunks of the ring chunk (default 1 MiB), NCCL's ring broadcast",
             "(p-2+m)(a + n/m b), m = chunks"},
    .coll = MDC_COLL_BCAST,
    .cost = cost,
    .schedule = schedule,
    .run.bcast = mdc_bcast_pipeline,
};
