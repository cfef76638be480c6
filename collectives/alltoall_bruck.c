/* Bruck all-to-all.
 *
 * Algorithm: rotate the send blocks so that position j holds the block for rank r + j. At
 *   distance k = 1, 2, 4, ..., pack every block whose position has bit k set, send the pack to
 *   r + k and replace those positions with the pack received from r - k. After ceil(lg p)
 *   steps position j holds the block rank r - j sent to r; un-rotate into place.
 * Source: Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005 (MPICH alltoall bruck).
 * Restrictions: none; trades bandwidth (each block travels up to lg p hops) for latency, so it
 *   wins for short blocks. Scratch: the rotated buffer and two packs of about half of it.
 * Cost: lg p a + n/2 lg p b + (2 + lg p) n c, n = one rank's send buffer (the rotations and packing copy). */
#include "schedule_build.h"

mdc_status mdc_alltoall_bruck(const void *sendbuf, void *recvbuf, size_t count, mdc_dtype t, mdc_group *g) {
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    size_t bs = count * mdc_dtype_size(t);
    if (bs == 0) return MDC_OK;
    const char *src = sendbuf == MDC_IN_PLACE ? recvbuf : sendbuf;
    char *out = recvbuf;
    if (p == 1) {
        if (src != out) memcpy(out, src, bs);
        return MDC_OK;
    }
    size_t half = (size_t)(p / 2 + 1) * bs;
    char *rot;
    mdc_status st = mdc_i_alloc((void **)&rot, (size_t)p * bs + 2 * half, "alltoall bruck");
    if (st) return st;
    char *spk = rot + (size_t)p * bs, *rpk = spk + half;
    for (int j = 0; j < p; j++) memcpy(rot + (size_t)j * bs, src + (size_t)((me + j) % p) * bs, bs);
    for (int k = 1; k < p && !st; k <<= 1) {
        size_t n = 0;
        for (int j = 1; j < p; j++)
            if (j & k) memcpy(spk + (n++) * bs, rot + (size_t)j * bs, bs);
        st = mdc_i_xchg(g, spk, n * bs, (me + k) % p, rpk, n * bs, mdc_i_mod(me - k, p),
                        MDC_I_TAG(MDC_COLL_ALLTOALL, 8));
        n = 0;
        for (int j = 1; j < p && !st; j++)
            if (j & k) memcpy(rot + (size_t)j * bs, rpk + (n++) * bs, bs);
    }
    if (!st)
        for (int j = 0; j < p; j++) memcpy(out + (size_t)mdc_i_mod(me - j, p) * bs, rot + (size_t)j * bs, bs);
    mdc_i_free(rot);
    return st;
}

/* ---- registry entry: the schedule `minidc explain` prints, the cost model, the descriptor ---- */

static mdc_status schedule(mdc_schedule *s) {
    int p = s->p;
    size_t bs = s->count * mdc_dtype_size(s->t), sent = 0;
    for (int d = 1; d < p; d <<= 1)
        for (int j = 1; j < p; j++) sent += (j & d) ? bs : 0;
    mdc_i_sched_formula(s, (double)sent, "n/p x (blocks with bit k set, summed over steps) ~ n/2 lg p");
    if (!bs || p == 1) return MDC_OK;
    int k = 0;
    for (int d = 1; d < p; d <<= 1, k++) {
        int nb = 0;
        for (int j = 1; j < p; j++) nb += (j & d) != 0;
        mdc_i_sched_phase(s, k, "distance %d: blocks at rotated positions j with bit %d set", d, k);
        for (int r = 0; r < p; r++) {
            char txt[64];
            size_t o = 0;
            o += (size_t)snprintf(txt, sizeof txt, "%d block%s, j =", nb, nb > 1 ? "s" : "");
            for (int j = 1; j < p && o < sizeof txt - 8; j++)
                if (j & d) o += (size_t)snprintf(txt + o, sizeof txt - o, " %d", j);
            MDC_I_TRY(mdc_i_sched_add(s, k, r, (r + d) % p, (size_t)nb * bs, MDC_SCHED_STORE, 0, 0, "%s", txt));
        }
    }
    snprintf(s->note, sizeof s->note,
             "rank r rotates its send blocks: position j holds the block "
             "for rank r + j; after the last step position j holds what rank r - j sent");
    return MDC_OK;
}

/* The copies: rotate in, pack and unpack about n/2 per step, rotate out. */
static double cost(const mdc_i_cost_in *x) {
    return x->lg * x->a + x->n / 2 * x->lg * x->b + (2 + x->lg) * x->n * x->cp;
}

const mdc_i_algo mdc_i_algo_alltoall_bruck = {
    .info = {"bruck", "mdc_alltoall_bruck", "ceil(lg p) steps at distance 2^k, packed blocks",
             "lg p a + n/2 lg p b + (2 + lg p) n c"},
    .coll = MDC_COLL_ALLTOALL,
    .cost = cost,
    .schedule = schedule,
    .run.alltoall = mdc_alltoall_bruck,
};
