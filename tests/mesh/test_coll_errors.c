/* Bad input gives a clear error and never a hang: negative (huge) counts, root out of range,
 * NULL buffers with a non-zero count, unknown dtype/op/algorithm names; then (last, since it
 * leaves the transport unusable) a count that differs between ranks: every rank must return an
 * error within a few seconds (MDC_ERR_MISMATCH where a size mismatch is seen, MDC_ERR_PEER on
 * the ranks told by it), not hang. */
#include <mpi.h>

#include "testutil.h"

#define EXPECT_INVALID(expr, needle)       \
    do {                                   \
        mdc_clear_detail();                \
        TU_STATUS(expr, MDC_ERR_INVALID);  \
        TU_CONTAINS(mdc_detail(), needle); \
    } while (0)

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    tu_coll_options(argc, argv);
    mdc_group *g = rt.world;
    int p = rt.size, me = rt.rank;
    float buf[64] = {0}, out[64 * 8] = {0};
    size_t neg = (size_t)-5;
    char rk[32];
    snprintf(rk, sizeof rk, "rank %d", me);

    EXPECT_INVALID(mdc_allreduce(buf, out, neg, MDC_F32, MDC_SUM, g), "count");
    EXPECT_INVALID(mdc_allreduce(buf, out, neg, MDC_F32, MDC_SUM, g), rk);
    EXPECT_INVALID(mdc_allreduce(buf, out, neg, MDC_F32, MDC_SUM, g), "negative");
    EXPECT_INVALID(mdc_allreduce(NULL, out, 4, MDC_F32, MDC_SUM, g), "sendbuf");
    EXPECT_INVALID(mdc_allreduce(buf, NULL, 4, MDC_F32, MDC_SUM, g), "recvbuf");
    EXPECT_INVALID(mdc_allreduce(buf, out, 4, (mdc_dtype)99, MDC_SUM, g), "dtype");
    EXPECT_INVALID(mdc_allreduce(buf, out, 4, MDC_F32, (mdc_op)99, g), "op");
    EXPECT_INVALID(mdc_allreduce(buf, out, 4, MDC_F32, MDC_SUM, NULL), "group");
    EXPECT_INVALID(mdc_reduce_scatter(buf, out, neg, MDC_F32, MDC_SUM, g), "count");
    EXPECT_INVALID(mdc_allgather(buf, out, neg, MDC_F32, g), "count");
    EXPECT_INVALID(mdc_allgather(NULL, out, 4, MDC_F32, g), "sendbuf");
    EXPECT_INVALID(mdc_bcast(buf, 4, MDC_F32, p, g), "root");
    EXPECT_INVALID(mdc_bcast(buf, 4, MDC_F32, -1, g), "root -1");
    EXPECT_INVALID(mdc_bcast(NULL, 4, MDC_F32, 0, g), "buf");
    EXPECT_INVALID(mdc_reduce(buf, out, 4, MDC_F32, MDC_SUM, p + 3, g), "root");
    EXPECT_INVALID(mdc_gather(buf, out, 4, MDC_F32, -2, g), "root");
    EXPECT_INVALID(mdc_scatter(buf, out, 4, MDC_F32, p, g), "root");
    EXPECT_INVALID(mdc_alltoall(buf, out, neg, MDC_F32, g), "count");
    EXPECT_INVALID(mdc_alltoall(buf, NULL, 2, MDC_F32, g), "recvbuf");
    EXPECT_INVALID(mdc_reduce_scatterv(buf, out, NULL, MDC_F32, MDC_SUM, g), "counts");
    EXPECT_INVALID(mdc_alltoallv(buf, NULL, NULL, out, NULL, NULL, MDC_F32, g), "recvcounts");
    EXPECT_INVALID(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, "nosuch"), "known: auto ring");
    TU_CHECK(mdc_dtype_parse("bf16") == MDC_BF16 && mdc_dtype_parse("x") == -1, "dtype parse");
    TU_CHECK(mdc_op_parse("avg") == MDC_AVG && mdc_op_parse("x") == -1, "op parse");
    TU_CHECK(mdc_coll_parse("broadcast") == MDC_COLL_BCAST, "coll parse");
    /* A valid call still works after all that (nothing was sent). */
    for (int i = 0; i < 4; i++) buf[i] = (float)(me + i);
    MDC_CHECK(mdc_allreduce(buf, out, 4, MDC_F32, MDC_SUM, g));
    TU_EQ_DBL(out[3], p * 3.0 + p * (p - 1) / 2.0);

    /* Cost model sanity: ring beats recursive doubling for large vectors, not for small. */
    double a = 5e-6, b = 1e-10, gm = 1e-10;
    TU_CHECK(mdc_coll_cost(MDC_COLL_ALLREDUCE, "ring", 8, 1 << 28, a, b, gm) <
                 mdc_coll_cost(MDC_COLL_ALLREDUCE, "recursive_doubling", 8, 1 << 28, a, b, gm),
             "cost: ring large");
    TU_CHECK(mdc_coll_cost(MDC_COLL_ALLREDUCE, "ring", 8, 8, a, b, gm) >
                 mdc_coll_cost(MDC_COLL_ALLREDUCE, "recursive_doubling", 8, 8, a, b, gm),
             "cost: rd small");
    TU_CHECK(mdc_coll_cost(MDC_COLL_ALLREDUCE, "nosuch", 8, 8, a, b, gm) < 0, "cost: unknown algorithm");
    /* Recursive halving's reduce-scatter copies its block out of scratch (n/p c): with this
     * host's figures it wins on fewer messages below 48 KiB (4 ranks) / 384 KiB (8 ranks), ring
     * above (docs/collectives.md). */
    double ha = 2e-6, hb = 1.0 / 8e9, hg = 1.0 / 4e9;
    for (int q = 4; q <= 8; q += 4) {
        size_t small = q == 4 ? 32u << 10 : 256u << 10, large = q == 4 ? 64u << 10 : 512u << 10;
        TU_CHECK(mdc_coll_cost(MDC_COLL_REDUCE_SCATTER, "recursive_halving", q, small, ha, hb, hg) <
                     mdc_coll_cost(MDC_COLL_REDUCE_SCATTER, "ring", q, small, ha, hb, hg),
                 "cost: halving small");
        TU_CHECK(mdc_coll_cost(MDC_COLL_REDUCE_SCATTER, "recursive_halving", q, large, ha, hb, hg) >
                     mdc_coll_cost(MDC_COLL_REDUCE_SCATTER, "ring", q, large, ha, hb, hg),
                 "cost: ring large");
    }

    /* Mismatched count (rank 0 passes one more): an error everywhere, in bounded time. */
    if (p > 1) {
        mdc_transport_set_timeout(rt.tr, 10);
        /* Everyone must be done with the valid calls above: the abort a failing rank sends
         * stops any wait of its peers, even one for a message already on its way. */
        MPI_Barrier(MPI_COMM_WORLD);
        const char *algos[] = {"ring"};
        MDC_CHECK(mdc_coll_set_algo(MDC_COLL_ALLREDUCE, algos[0]));
        static float big[4001], bigout[4001];
        double t0 = MPI_Wtime();
        mdc_status st = mdc_allreduce(big, bigout, me == 0 ? 4001 : 4000, MDC_F32, MDC_SUM, g);
        double dt = MPI_Wtime() - t0;
        fprintf(stderr, "rank %d: mismatched count: %s (%s) after %.2f s\n", me, mdc_strerror(st), mdc_detail(), dt);
        TU_CHECK(st == MDC_ERR_MISMATCH || st == MDC_ERR_PEER || st == MDC_ERR_TIMEOUT, "mismatched count gave %s",
                 mdc_strerror(st));
        TU_CHECK(dt < 9, "mismatch took %.1f s (a hang cut by the timeout?)", dt);
        int rc = tu_finish("test_coll_errors");
        fflush(stderr);
        mdc_runtime_finalize(&rt);
        return rc;
    }
    int rc = tu_finish("test_coll_errors");
    mdc_runtime_finalize(&rt);
    return rc;
}
