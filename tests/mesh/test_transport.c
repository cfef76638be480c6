/* Transport: ping-pong arrival times on the virtual clock, queued messages on one egress
 * link, a ring exchange of integer data, a receive in pieces through a window of slots,
 * group index mapping, and the pick a group remembers. */
#include <unistd.h>

#include "testutil.h"
#include "../collectives/coll_internal.h" /* the sliced and windowed receives */

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    mdc_group *w = rt.world;
    int r = rt.rank, p = rt.size;
    const mdc_device_spec *s = mdc_device_get_spec(rt.dev);

    /* Ring exchange: every rank sends its rank-stamped block to the next. */
    int sendv[257], recvv[257];
    for (int i = 0; i < 257; i++) sendv[i] = r * 1000 + i;
    MDC_CHECK(mdc_sendrecv(sendv, sizeof sendv, (r + 1) % p, recvv, sizeof recvv, (r - 1 + p) % p, 3, w));
    int src = (r - 1 + p) % p;
    for (int i = 0; i < 257; i++) TU_CHECK(recvv[i] == src * 1000 + i, "recv[%d]=%d from %d", i, recvv[i], src);

    /* Ping-pong between ranks 0 and 1 on a fresh clock: exact virtual times. */
    if (p >= 2 && r < 2) {
        mdc_dev_reset_counters(rt.dev);
        double bytes = 1 << 20;
        static char buf[1 << 20];
        double t1 = s->nvlink_latency + bytes / s->nvlink_bw;
        if (r == 0) {
            MDC_CHECK(mdc_send(buf, sizeof buf, 1, 0, w));
            TU_EQ_DBL(mdc_dev_now(rt.dev), bytes / s->nvlink_bw); /* send done */
            MDC_CHECK(mdc_recv(buf, sizeof buf, 1, 0, w));
            TU_EQ_DBL(mdc_dev_now(rt.dev), t1 + t1);
        } else {
            MDC_CHECK(mdc_recv(buf, sizeof buf, 0, 0, w));
            TU_EQ_DBL(mdc_dev_now(rt.dev), t1);
            MDC_CHECK(mdc_send(buf, sizeof buf, 0, 0, w));
        }
        /* Two messages queued on rank 0's egress link: the second departs when the first is done. */
        mdc_dev_reset_counters(rt.dev);
        if (r == 0) {
            mdc_request *q[2];
            MDC_CHECK(mdc_isend(buf, 1000, 1, 1, w, &q[0]));
            MDC_CHECK(mdc_isend(buf, 1000, 1, 2, w, &q[1]));
            MDC_CHECK(mdc_waitall(q, 2));
            TU_EQ_DBL(mdc_dev_now(rt.dev), 2000.0 / s->nvlink_bw);
        } else {
            MDC_CHECK(mdc_recv(buf, 1000, 0, 1, w));
            TU_EQ_DBL(mdc_dev_now(rt.dev), 1000.0 / s->nvlink_bw + s->nvlink_latency);
            MDC_CHECK(mdc_recv(buf, 1000, 0, 2, w));
            TU_EQ_DBL(mdc_dev_now(rt.dev), 2000.0 / s->nvlink_bw + s->nvlink_latency);
        }
    }

    /* A message in 11 pieces of 256 bytes (the last 68) received through 3 slots: piece k is
     * in slot k % 3 with its own bytes when waited on, although later pieces reuse the slots;
     * waiting on the whole receive while pieces are still to be posted is refused and changes
     * nothing. Then the same through no window, the virtual clock charged alike. */
    if (p >= 2 && r < 2) {
        enum { N = 657, SLICE = 256, W = 3 }; /* 2628 bytes: 10 full pieces + 68 bytes */
        int data[N], slots[W * SLICE / sizeof(int)];
        double clock[2];
        for (int pass = 0; pass < 2; pass++) {
            mdc_dev_reset_counters(rt.dev);
            if (r == 0) {
                for (int i = 0; i < N; i++) data[i] = 7 * i + 1 + pass;
                mdc_request *q;
                MDC_CHECK(mdc_i_isend_sliced(data, sizeof data, SLICE, 1, 8, w, &q));
                MDC_CHECK(mdc_waitall(&q, 1));
            } else {
                mdc_request *q;
                if (pass == 0) MDC_CHECK(mdc_i_irecv_window(slots, sizeof data, SLICE, W, 0, 8, w, &q));
                else MDC_CHECK(mdc_i_irecv_sliced(data, sizeof data, SLICE, 0, 8, w, &q));
                TU_CHECK(mdc_i_request_pieces(q) == 11, "%d pieces", mdc_i_request_pieces(q));
                for (int k = 0; k < 11; k++) {
                    MDC_CHECK(mdc_i_wait_piece(q, k));
                    const int *d = mdc_i_piece_data(q, k);
                    if (pass == 0) {
                        TU_CHECK(d == slots + (k % W) * (SLICE / sizeof(int)), "piece %d not in slot %d", k, k % W);
                        if (k == 1) TU_STATUS(mdc_waitall(&q, 1), MDC_ERR_INVALID);
                    }
                    int first = k * SLICE / (int)sizeof(int), n = k < 10 ? SLICE / (int)sizeof(int) : N - first;
                    for (int i = 0; i < n; i++)
                        TU_CHECK(d[i] == 7 * (first + i) + 1 + pass, "pass %d piece %d [%d] = %d", pass, k, i, d[i]);
                }
                MDC_CHECK(mdc_waitall(&q, 1));
            }
            clock[pass] = mdc_dev_now(rt.dev);
        }
        TU_EQ_DBL(clock[0], clock[1]);
    }

    /* The dispatcher remembers each group's last pick: it must follow a change of the pick
     * basis (a fresh group, which remembers nothing, is the reference), and the basis must
     * matter at 2 ranks (1 MiB allreduce: recursive doubling on the h100's links, the ring on
     * this host's). */
    {
        char was[16];
        snprintf(was, sizeof was, "%s", mdc_coll_get_pick());
        mdc_group *fresh;
        const char *pick[2];
        for (int k = 0; k < 2; k++) {
            mdc_coll_set_pick(k ? "host" : "device");
            pick[k] = mdc_coll_choose(MDC_COLL_ALLREDUCE, 1 << 20, w);
            TU_CHECK(!strcmp(mdc_coll_choose(MDC_COLL_ALLREDUCE, 1 << 20, w), pick[k]), "second pick");
            int *all = malloc(sizeof(int) * (size_t)p);
            for (int i = 0; i < p; i++) all[i] = i;
            MDC_CHECK(mdc_group_create(&fresh, rt.tr, all, p, 6));
            TU_CHECK(!strcmp(mdc_coll_choose(MDC_COLL_ALLREDUCE, 1 << 20, fresh), pick[k]),
                     "%s basis: remembered %s, fresh group %s", k ? "host" : "device", pick[k],
                     mdc_coll_choose(MDC_COLL_ALLREDUCE, 1 << 20, fresh));
            mdc_group_free(fresh);
            free(all);
        }
        if (p == 2 && !strcmp(s->name, "h100"))
            TU_CHECK(strcmp(pick[0], pick[1]) != 0, "device and host picks both %s", pick[0]);
        /* The reduce-scatter's ring/pairwise tie: pairwise on the host's clock, never on the
         * device's (which keeps NCCL's ring order for large blocks). */
        if (p >= 2) {
            mdc_coll_set_pick("host");
            TU_CHECK(!strcmp(mdc_coll_choose(MDC_COLL_REDUCE_SCATTER, 4u << 20, w), "pairwise"), "host pick %s",
                     mdc_coll_choose(MDC_COLL_REDUCE_SCATTER, 4u << 20, w));
            mdc_coll_set_pick("device");
            TU_CHECK(strcmp(mdc_coll_choose(MDC_COLL_REDUCE_SCATTER, 4u << 20, w), "pairwise") != 0,
                     "device pick pairwise");
        }
        /* The allgather goes direct on the host's clock with 3 or more ranks to a core and 1 MiB
         * or more, when every rank is on this host (MPI_LOCALNRANKS = p); never on the
         * device's, never below 1 MiB. In make check at 8 ranks on a 2-core runner: direct. */
        {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            const char *lr = getenv("MPI_LOCALNRANKS");
            int want = lr && atol(lr) == p && cores > 0 && (double)p / (double)cores >= 3;
            mdc_coll_set_pick("host");
            const char *big = mdc_coll_choose(MDC_COLL_ALLGATHER, 4u << 20, w);
            const char *small = mdc_coll_choose(MDC_COLL_ALLGATHER, 256u << 10, w);
            TU_CHECK((strcmp(big, "direct") == 0) == want, "%d ranks, %ld cores: 4 MiB allgather: host pick %s", p,
                     cores, big);
            TU_CHECK(strcmp(small, "direct") != 0, "256 KiB allgather: host pick direct");
            mdc_coll_set_pick("device");
            TU_CHECK(strcmp(mdc_coll_choose(MDC_COLL_ALLGATHER, 4u << 20, w), "direct") != 0, "device pick direct");
            if (rt.rank == 0 && want) printf("allgather: host pick direct at %d ranks on %ld cores\n", p, cores);
        }
        mdc_coll_set_pick(was);
    }

    /* A reversed group: index i is world rank p-1-i. */
    int *ranks = malloc(sizeof(int) * (size_t)p);
    for (int i = 0; i < p; i++) ranks[i] = p - 1 - i;
    mdc_group *rev;
    MDC_CHECK(mdc_group_create(&rev, rt.tr, ranks, p, 7));
    TU_CHECK(mdc_group_rank(rev) == p - 1 - r, "group rank %d", mdc_group_rank(rev));
    TU_CHECK(mdc_group_world_rank(rev, 0) == p - 1, "world rank of 0");
    /* Bad input: peer out of range, NULL buffer, rank not a member. */
    TU_STATUS(mdc_send(sendv, 4, p, 0, rev), MDC_ERR_INVALID);
    TU_STATUS(mdc_send(NULL, 4, 0, 0, rev), MDC_ERR_INVALID);
    mdc_group *bad;
    int other = (r + 1) % p;
    if (p > 1) TU_STATUS(mdc_group_create(&bad, rt.tr, &other, 1, 0), MDC_ERR_INVALID);
    mdc_group_free(rev);
    free(ranks);
    int rc = tu_finish("test_transport");
    mdc_runtime_finalize(&rt);
    return rc;
}
