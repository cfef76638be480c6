/* Predict's timing of an algorithm that cannot be mirrored over a folded group.
 *
 * predict folds a mesh axis by letting one representative stand for every rank of it and mirror
 * their messages (collectives/transport_dry.c), which is exact where every member of a group
 * does the same thing, as a ring's do. A tree is not so: its root, inner members and leaves send
 * different messages. When such an algorithm runs on a group whose other members are all folded,
 * the representative instead replays the algorithm's schedule (its explain builder, which
 * tests/mesh/test_explain.c keeps equal to the code message by message) on the device's links:
 * every member starts at this rank's clock (the symmetry folding assumes), a member's sends of a
 * step leave once it has finished the previous one (each link class of a rank sends one message
 * at a time, as mdc_dev_msg_depart charges), its step ends when its messages have arrived and its
 * sends have left, then it adds what it received (mdc_dev_reduce's time). The representative
 * stands for every member, so its clock moves to the last member's end: this rank's reductions,
 * and communication the rest of the way. Exact for one call; over several, the members of a real
 * run start the next one at their own ends, so the replay's is an upper bound (predict says so). */
#include "schedule_build.h"

#include "minidc/device.h"

int mdc_i_replay_wanted(const mdc_group *g, const mdc_i_algo *a) {
    if (!(a->flags & MDC_I_ASYMMETRIC)) return 0;
    const mdc_transport *t = mdc_group_transport(g);
    int p = mdc_group_size(g), me = mdc_group_rank(g), folded = 0;
    for (int i = 0; i < p; i++) {
        int w = mdc_group_world_rank(g, i);
        folded += i != me && mdc_transport_rep(t, w) != w;
    }
    return folded == 0 ? 0 : folded == p - 1 ? 1 : -1;
}

/* The remembered replay of the last call's size: DDP's buckets repeat a few sizes. */
typedef struct {
    const mdc_group *g;
    const mdc_i_algo *a;
    size_t count;
    mdc_dtype t;
    double span, reduce, bytes, msgs;
    mdc_link link; /* this rank's messages: inside a node or across */
    int nred;      /* this rank's reductions: nred sizes (the chunks have at most three), how many of each */
    size_t red_elems[16], red_count[16];
} replayed;
static replayed memo;

static mdc_status replay(mdc_group *g, mdc_device *dev, const mdc_i_algo *a, size_t count, mdc_dtype t, replayed *out) {
    int p = mdc_group_size(g), me = mdc_group_rank(g), G = 1;
    if (mdc_i_group_nodes(g, &G) < 1 || G < 1) G = 1;
    mdc_schedule s;
    mdc_status st = mdc_schedule_build(&s, MDC_COLL_ALLREDUCE, a->info.name, p, count, NULL, t, MDC_SUM, 0,
                                       mdc_coll_ring_chunk(), G);
    if (st) return st;
    double *c = calloc((size_t)p * 5, sizeof(double)), *eg = c + p, *red = eg + 2 * p, *end = red + p, bw[2], lat[2];
    if (!c) {
        mdc_schedule_free(&s);
        return mdc_fail(MDC_ERR_OOM_HOST, "predict: the replay of allreduce %s", a->info.name);
    }
    size_t esz = mdc_dtype_size(t);
    for (int l = 0; l < 2; l++) { /* 0: inside a node (NVLink), 1: across (the network) */
        mdc_link link = l ? MDC_LINK_NET : MDC_LINK_NVLINK;
        bw[l] = mdc_dev_link_bw(dev, link), lat[l] = mdc_dev_link_latency(dev, link);
    }
    *out = (replayed){g, a, count, t, 0, 0, 0, 0, G >= p ? MDC_LINK_NVLINK : MDC_LINK_NET, 0, {0}, {0}};
    for (size_t k = 0; k < s.nmsgs;) { /* the messages come step by step (the builders add them so) */
        int step = s.msgs[k].step;
        for (int r = 0; r < p; r++) end[r] = c[r], red[r] = 0;
        for (; k < s.nmsgs && s.msgs[k].step == step; k++) {
            const mdc_sched_msg *m = &s.msgs[k];
            int l = m->src / G != m->dst / G;
            double *free_at = &eg[2 * m->src + l], dep = c[m->src] > *free_at ? c[m->src] : *free_at;
            *free_at = dep + (double)m->bytes / bw[l];
            if (*free_at > end[m->src]) end[m->src] = *free_at;
            if (*free_at + lat[l] > end[m->dst]) end[m->dst] = *free_at + lat[l];
            if (m->reduce != MDC_SCHED_STORE) {
                red[m->dst] += mdc_dev_reduce_seconds(dev, (double)m->len, (double)esz);
                int i = 0;
                while (m->dst == me && i < out->nred && out->red_elems[i] != m->len) i++;
                if (m->dst == me && i == out->nred && i < 16) out->red_elems[out->nred++] = m->len;
                if (m->dst == me && i < 16) out->red_count[i]++;
            }
            if (m->src == me) out->bytes += (double)m->bytes, out->msgs += 1;
        }
        for (int r = 0; r < p; r++) c[r] = end[r] + red[r];
        out->reduce += red[me];
    }
    for (int r = 0; r < p; r++) /* the representative stands for every member: its call ends with the last's */
        if (c[r] > out->span) out->span = c[r];
    free(c);
    mdc_schedule_free(&s);
    return MDC_OK;
}

static unsigned long long replays;
unsigned long long mdc_coll_replayed_calls(void) { return replays; }

mdc_status mdc_i_replay_allreduce(const mdc_i_algo *a, size_t count, mdc_dtype t, mdc_group *g) {
    mdc_device *dev = mdc_transport_device(mdc_group_transport(g));
    if (!dev)
        return mdc_fail(MDC_ERR_INVALID, "predict: allreduce %s over a folded group needs a device", a->info.name);
    if (!(memo.g == g && memo.a == a && memo.count == count && memo.t == t)) {
        mdc_status st = replay(g, dev, a, count, t, &memo);
        if (st) {
            memo.g = NULL;
            return st;
        }
    }
    replays++;
    mdc_dev_comm_until(dev, mdc_dev_now(dev) + memo.span - memo.reduce, memo.bytes, memo.msgs, memo.link);
    for (int i = 0; i < memo.nred; i++)
        for (size_t k = 0; k < memo.red_count[i]; k++)
            mdc_dev_reduce(dev, (double)memo.red_elems[i], (double)mdc_dtype_size(t));
    return MDC_OK;
}
