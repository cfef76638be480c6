/* Broadcast as a binomial scatter followed by a ring allgather (van de Geijn).
 *
 * Algorithm: the buffer is cut into p balanced blocks; block j belongs to relative rank j
 *   (rank (root + j) mod p). A binomial scatter sends each subtree its blocks, straight into
 *   place in every rank's buffer; then a ring allgather over the ranks in relative order
 *   (root, root+1, ...) completes every buffer. No scratch, no copies.
 * Source: Barnett et al. 1994; Thakur, Rabenseifner & Gropp 2005 (MPICH bcast
 *   scatter_ring_allgather).
 * Restrictions: none; pays off for long vectors.
 * Cost: (lg p + p - 1) alpha + 2(p-1)/p n beta. */
#include "schedule_build.h"

mdc_status mdc_bcast_scatter_allgather(void *buf, size_t count, mdc_dtype t, int root, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), rel = mdc_i_mod(me - root, p);
    size_t esz = mdc_dtype_size(t);
    if (p == 1 || count == 0) return MDC_OK;
    size_t *off = malloc(2 * sizeof(size_t) * (size_t)p);
    int *mem = malloc(sizeof(int) * (size_t)p);
    if (!off || !mem) {
        free(off);
        free(mem);
        return mdc_fail(MDC_ERR_OOM_HOST, "bcast scatter_allgather: offsets");
    }
    size_t *len = off + p;
    mdc_i_partition(count, p, off, len);
    for (int j = 0; j < p; j++) {
        off[j] *= esz;
        len[j] *= esz;
        mem[j] = (root + j) % p;
    }
    mdc_status st = mdc_i_binomial_scatter(g, root, (char *)buf + off[rel], off, len, MDC_I_TAG(MDC_COLL_BCAST, 8));
    if (!st) st = mdc_i_ring_ag(g, mem, p, rel, buf, off, len, NULL, MDC_I_TAG(MDC_COLL_BCAST, 9));
    free(off);
    free(mem);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p, step = 0;
    size_t esz = mdc_dtype_size(s->t), n = s->count * esz;
    mdc_i_sched_formula(s, (double)(p - 1) / p * (double)n * 2,
                        "~2(p-1)/p n  (the root: scatter (p-1)/p n, ring n/p per step)");
    if (p == 1 || !s->count) return MDC_OK;
    size_t *off;
    int *mem;
    MDC_I_TRY(mdc_i_sched_root_blocks(s, &off, &mem));
    size_t *len = off + p;
    for (int j = 0; j < p; j++) off[j] *= esz, len[j] *= esz;
    mdc_status st = mdc_i_sched_binomial_scatter(s, &step, s->root, off, len, "");
    if (!st) st = mdc_i_sched_ring_ag(s, &step, mem, p, off, len, 0, "", "block of rank");
    snprintf(s->note, sizeof s->note, "block j (balanced, %zu or %zu elements) belongs to rank root + j",
             s->count / (size_t)p + (s->count % (size_t)p != 0), s->count / (size_t)p);
    free(off);
    free(mem);
    return st;
}

static double cost(const mdc_i_cost_in *x) { return (x->lg + x->P - 1) * x->a + 2 * x->f * x->n * x->b; }

const mdc_i_algo mdc_i_algo_bcast_scatter_allgather = {
    .info = {"scatter_allgather", "mdc_bcast_scatter_allgather",
             "binomial scatter of p blocks + ring allgather (van de Geijn)", "(lg p + p-1) a + 2(p-1)/p n b"},
    .coll = MDC_COLL_BCAST,
    .cost = cost,
    .schedule = schedule,
    .run.bcast = mdc_bcast_scatter_allgather,
};
