/* Thread count by measurement (tools/thread_tuner.h). */
#include <omp.h>
#include <string.h>

#include "thread_tuner.h"

enum { FIRST_INTERVAL = 8, MAX_INTERVAL = 256 };

void mdc_tuner_init(mdc_thread_tuner *t, int max_threads, int on) {
    memset(t, 0, sizeof *t);
    t->probe = -1;
    for (int n = max_threads; n >= 1 && t->nlevels < MDC_TUNER_LEVELS; n /= 2) t->levels[t->nlevels++] = n;
    if (t->nlevels && t->levels[t->nlevels - 1] != 1 && t->nlevels < MDC_TUNER_LEVELS) t->levels[t->nlevels++] = 1;
    t->on = on && max_threads > 1;
    t->interval = FIRST_INTERVAL;
    t->until = FIRST_INTERVAL;
    t->down = 1;
}

static double median3(const double *r) {
    double a = r[0], b = r[1], c = r[2];
    return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

int mdc_tuner_before(mdc_thread_tuner *t) {
    if (!t->on) return omp_get_max_threads();
    if (t->probe < 0 && t->nrecent == 3 && --t->until <= 0) { /* time three steps at a neighbouring level */
        int to = t->level + (t->down ? 1 : -1);
        if (to < 0 || to >= t->nlevels) to = t->level + (t->down ? -1 : 1), t->down = !t->down;
        if (to >= 0 && to < t->nlevels) t->probe = to, t->nprobed = 0, t->probes++;
        t->down = !t->down;
    }
    int n = t->levels[t->probe >= 0 ? t->probe : t->level];
    omp_set_num_threads(n);
    return n;
}

void mdc_tuner_after(mdc_thread_tuner *t, double seconds) {
    if (!t->on) return;
    if (t->probe >= 0) {
        t->probed[t->nprobed++] = seconds;
        if (t->nprobed < 3) return;
        if (median3(t->probed) < 0.9 * median3(t->recent)) { /* faster: move there, and look again soon */
            t->level = t->probe, t->nrecent = 0, t->interval = FIRST_INTERVAL, t->moves++;
        } else if (t->interval < MAX_INTERVAL) {
            t->interval *= 2;
        }
        t->probe = -1, t->until = t->interval;
        return;
    }
    if (t->nrecent < 3) t->recent[t->nrecent++] = seconds;
    else t->recent[0] = t->recent[1], t->recent[1] = t->recent[2], t->recent[2] = seconds;
}
