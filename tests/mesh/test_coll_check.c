/* The collective check (mdc_coll_set_check): matching calls pass and give their results;
 * group rank p-1 calling allgather where the others call allreduce, then (on a fresh group) a
 * count that differs, then a root that differs: every rank gets MDC_ERR_MISMATCH naming group
 * rank 0's call and the divergent rank's, with the call's number, instead of a hang or a mix of
 * messages. With the check off, the same matching calls still run. */
#include "testutil.h"

int main(int argc, char **argv) {
    mdc_runtime rt;
    MDC_CHECK(mdc_runtime_init(&rt, &argc, &argv));
    int p = rt.size, me = rt.rank;
    float buf[16], out[16 * 8];
    for (int i = 0; i < 16; i++) buf[i] = (float)(me + i);
    mdc_coll_set_check(1);
    TU_CHECK(mdc_coll_check_enabled(), "the check is on");
    MDC_CHECK(mdc_allreduce(buf, out, 16, MDC_F32, MDC_SUM, rt.world));
    TU_EQ_DBL(out[2], p * 2.0 + p * (p - 1) / 2.0);
    MDC_CHECK(mdc_allgather(buf, out, 4, MDC_F32, rt.world));
    MDC_CHECK(mdc_barrier(rt.world));
    MDC_CHECK(mdc_bcast(buf, 4, MDC_F32, 0, rt.world));
    if (p > 1) {
        int ranks[8];
        for (int i = 0; i < p; i++) ranks[i] = i;
        char want[96];
        snprintf(want, sizeof want, "group rank %d (world rank %d) is at call", p - 1, p - 1);
        /* a different collective */
        mdc_status st = me == p - 1 ? mdc_allgather(buf, out, 4, MDC_F32, rt.world)
                                    : mdc_allreduce(buf, out, 4, MDC_F32, MDC_SUM, rt.world);
        TU_STATUS(st, MDC_ERR_MISMATCH);
        TU_CONTAINS(mdc_detail(), want);
        TU_CONTAINS(mdc_detail(), "call 5: allreduce of 4 f32, sum");
        snprintf(want, sizeof want, "call 5: allgather of %d f32", 4 * p); /* the gathered count */
        TU_CONTAINS(mdc_detail(), want);
        /* a different count, on a fresh group (its own call numbers and tag space) */
        mdc_group *g2;
        MDC_CHECK(mdc_group_create(&g2, rt.tr, ranks, p, 5));
        st = mdc_allreduce(buf, out, me == p - 1 ? 3 : 4, MDC_F32, MDC_SUM, g2);
        TU_STATUS(st, MDC_ERR_MISMATCH);
        TU_CONTAINS(mdc_detail(), "call 1: allreduce of 3 f32");
        mdc_group_free(g2);
        /* a different root */
        MDC_CHECK(mdc_group_create(&g2, rt.tr, ranks, p, 6));
        st = mdc_bcast(buf, 4, MDC_F32, me == p - 1 ? 1 : 0, g2);
        TU_STATUS(st, MDC_ERR_MISMATCH);
        TU_CONTAINS(mdc_detail(), "root 1");
        mdc_group_free(g2);
        /* after the refusals (nothing but the checks was sent) a matching call still works */
        MDC_CHECK(mdc_group_create(&g2, rt.tr, ranks, p, 7));
        for (int i = 0; i < 16; i++) buf[i] = (float)(me + i); /* the bcast above overwrote the first 4 */
        MDC_CHECK(mdc_allreduce(buf, out, 16, MDC_F32, MDC_SUM, g2));
        TU_EQ_DBL(out[2], p * 2.0 + p * (p - 1) / 2.0);
        mdc_group_free(g2);
    }
    mdc_coll_set_check(0);
    MDC_CHECK(mdc_allreduce(buf, out, 16, MDC_F32, MDC_SUM, rt.world));
    int rc = tu_finish("test_coll_check");
    mdc_runtime_finalize(&rt);
    return rc;
}
