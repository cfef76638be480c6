/* Bruck allgather (per-rank counts).
 *
 * Algorithm: rank r keeps the blocks in rotated order (position j holds block (r + j) mod p),
 *   starting with its own at 0. At distance d = 1, 2, 4, ... it sends its first min(d, p - d)
 *   blocks to r - d and receives as many from r + d into positions d, d+1, ...; after
 *   ceil(lg p) steps it has every block and un-rotates them into place.
 * Source: Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005 (MPICH allgather bruck).
 * Restrictions: none (any p, not only powers of two); one scratch buffer of the full output.
 * Cost: ceil(lg p) alpha + (p-1)/p n beta + (p+1)/p n c: local copies of the own block into
 *   the rotated scratch and of every block out of it. */
#include "schedule_build.h"

mdc_status mdc_allgather_bruck(const void *sendbuf, void *recvbuf, const size_t *counts, const size_t *displs,
                               mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t esz = mdc_dtype_size(t);
    size_t *pos = malloc(sizeof(size_t) * (size_t)(2 * p + 1));
    if (!pos) return mdc_fail(MDC_ERR_OOM_HOST, "allgather bruck: offsets");
    size_t *dsp = pos + p + 1, o = 0;
    for (int i = 0; i < p; i++) {
        dsp[i] = (displs ? displs[i] : o) * esz;
        o += counts[i];
    }
    pos[0] = 0;
    for (int j = 0; j < p; j++) pos[j + 1] = pos[j] + counts[(me + j) % p] * esz;
    size_t total = pos[p];
    char *rb = NULL;
    mdc_status st = MDC_OK;
    if (total == 0 || p == 1) {
        if (p == 1 && sendbuf != MDC_IN_PLACE && sendbuf != recvbuf && total)
            memmove((char *)recvbuf + dsp[0], sendbuf, total);
        goto done;
    }
    if ((st = mdc_i_alloc((void **)&rb, total, "allgather bruck"))) goto done;
    const char *mine = sendbuf == MDC_IN_PLACE || sendbuf == recvbuf ? (char *)recvbuf + dsp[me] : sendbuf;
    if (pos[1]) memcpy(rb, mine, pos[1]);
    for (int d = 1; d < p && !st; d <<= 1) {
        int cnt = d < p - d ? d : p - d;
        st = mdc_i_xchg(g, rb, pos[cnt], mdc_i_mod(me - d, p), rb + pos[d], pos[d + cnt] - pos[d], (me + d) % p,
                        MDC_I_TAG(MDC_COLL_ALLGATHER, 16));
    }
    if (!st)
        for (int j = 0; j < p; j++) {
            int b = (me + j) % p;
            if (pos[j + 1] > pos[j]) memcpy((char *)recvbuf + dsp[b], rb + pos[j], pos[j + 1] - pos[j]);
        }
done:
    mdc_i_free(rb);
    free(pos);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    char txt[48];
    int p = s->p;
    size_t esz = mdc_dtype_size(s->t), total = mdc_i_sched_total(s);
    mdc_i_sched_formula(s, (double)(p - 1) / p * (double)(total * esz), "(p-1)/p n");
    if (!total || p == 1) return MDC_OK;
    int k = 0;
    for (int d = 1; d < p; d <<= 1, k++) {
        int cnt = d < p - d ? d : p - d;
        mdc_i_sched_phase(s, k, "distance %d: send the first %d blocks held", d, cnt);
        for (int r = 0; r < p; r++) {
            size_t b = 0;
            for (int j = 0; j < cnt; j++) b += s->counts[(r + j) % p] * esz;
            if (!b) continue;
            MDC_I_TRY(mdc_i_sched_add(s, k, r, mdc_i_mod(r - d, p), b, MDC_SCHED_STORE, 0, 0, "%s",
                                      mdc_i_sched_blocks_text(txt, sizeof txt, r, (r + cnt - 1) % p)));
        }
    }
    snprintf(s->note, sizeof s->note,
             "rank r holds blocks in rotated order r, r+1, ... and "
             "un-rotates them at the end");
    return MDC_OK;
}

/* The copies: the own block into the rotated scratch, every block out of it. */
static double cost(const mdc_i_cost_in *x) {
    return x->lg * x->a + x->f * x->n * x->b + (x->P + 1) / x->P * x->n * x->cp;
}

const mdc_i_algo mdc_i_algo_allgather_bruck = {
    .info = {"bruck", "mdc_allgather_bruck", "ceil(lg p) steps at distance 2^k on a rotated buffer",
             "lg p a + (p-1)/p n b + (p+1)/p n c"},
    .coll = MDC_COLL_ALLGATHER,
    .cost = cost,
    .schedule = schedule,
    .run.allgather = mdc_allgather_bruck,
};
