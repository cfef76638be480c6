/* The collective check (mdc_coll_set_check, MINIDC_CHECK_COLLECTIVES=1, `minidc train
 * --check-collectives`): before every collective a dispatcher runs, its group compares what each
 * member is calling, the call's number on the group, the collective, the count, the dtype, the op
 * and the root, in one gather to group rank 0 and one broadcast of the verdict, both point to
 * point on a tag no algorithm uses. A member that calls something else is named on every rank
 * with both calls (the desync report, exact), and the call fails with MDC_ERR_MISMATCH instead
 * of hanging or mixing messages. Every member learns it from the same verdict, so nothing is left
 * in flight and the group stays usable. The check is the same exchange whatever the collective, so
 * the members meet in it even when they call different ones. */
#include <stdio.h>
#include <stdlib.h>

#include "coll_internal.h"

enum { TAG_SIG = MDC_I_TAG(MDC_COLL_COUNT, 0), TAG_VERDICT = MDC_I_TAG(MDC_COLL_COUNT, 1), NSIG = 6 };

static int enabled = -1; /* -1: read MINIDC_CHECK_COLLECTIVES on first use */

void mdc_coll_set_check(int on) { enabled = on != 0; }

int mdc_coll_check_enabled(void) {
    if (enabled < 0) {
        const char *e = getenv("MINIDC_CHECK_COLLECTIVES");
        enabled = e && *e && strcmp(e, "0");
        if (enabled && strcmp(e, "1")) /* "false", "off": said, not taken silently as on */
            fprintf(stderr,
                    "minidc: MINIDC_CHECK_COLLECTIVES='%s' is not 0 or 1: checking collectives (0 turns the "
                    "check off)\n",
                    e);
    }
    return enabled;
}

static void describe(char *buf, size_t cap, const long long *s) {
    int n = snprintf(buf, cap, "call %lld: %s", s[0], mdc_coll_name((mdc_coll)s[1]));
    if (s[1] == MDC_COLL_BARRIER) return;
    if (s[2] >= 0) n += snprintf(buf + n, cap - (size_t)n, " of %lld %s", s[2], mdc_dtype_name((mdc_dtype)s[3]));
    else n += snprintf(buf + n, cap - (size_t)n, " of %s", mdc_dtype_name((mdc_dtype)s[3]));
    if (s[4] >= 0) n += snprintf(buf + n, cap - (size_t)n, ", %s", mdc_op_name((mdc_op)s[4]));
    if (s[5] >= 0) snprintf(buf + n, cap - (size_t)n, ", root %lld", s[5]);
}

mdc_status mdc_i_check_call(const char *what, mdc_group *g, mdc_coll c, long long count, mdc_dtype t, int op,
                            int root) {
    mdc_dev_trace_mark(mdc_transport_device(mdc_group_transport(g)), what, (double)count); /* --trace */
    if (!mdc_coll_check_enabled() || mdc_group_size(g) < 2) return MDC_OK;
    int p = mdc_group_size(g), me = mdc_group_rank(g);
    long long sig[NSIG] = {(long long)mdc_i_group_next_call(g), (long long)c, count, (long long)t, op, root};
    long long verdict[1 + 2 * NSIG] = {-1}; /* the first member that differs, its call, rank 0's call */
    mdc_status st = MDC_OK;
    if (me != 0) {
        st = mdc_send(sig, sizeof sig, 0, TAG_SIG, g);
        if (!st) st = mdc_recv(verdict, sizeof verdict, 0, TAG_VERDICT, g);
    } else {
        long long other[NSIG];
        for (int i = 1; !st && i < p; i++) {
            if ((st = mdc_recv(other, sizeof other, i, TAG_SIG, g))) break;
            if (verdict[0] < 0 && memcmp(other, sig, sizeof sig)) {
                verdict[0] = i;
                memcpy(verdict + 1, other, sizeof other);
            }
        }
        memcpy(verdict + 1 + NSIG, sig, sizeof sig);
        for (int i = 1; !st && i < p; i++) st = mdc_send(verdict, sizeof verdict, i, TAG_VERDICT, g);
    }
    if (st || verdict[0] < 0) return st;
    char a[160], b[160];
    describe(a, sizeof a, verdict + 1 + NSIG);
    describe(b, sizeof b, verdict + 1);
    int bad = (int)verdict[0];
    return mdc_fail(MDC_ERR_MISMATCH,
                    "%s: collective check on a group of %d: group rank 0 (world rank %d) is at %s; "
                    "group rank %d (world rank %d) is at %s",
                    what, p, mdc_group_world_rank(g, 0), a, bad, mdc_group_world_rank(g, bad), b);
}
