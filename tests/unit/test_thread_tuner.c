/* The thread tuner (tools/thread_tuner.c) on made-up step times: the levels it offers; on an
 * idle machine it stays at the most threads and probes less and less often; when fewer threads
 * run faster it moves there at its first probe; when the load goes away it moves back within
 * the longest probe interval; a probe that is faster by less than 10% does not move it. */
#include <omp.h>
#include <stdio.h>

#include "../tools/thread_tuner.c"

static int fails;
#define CHECK(c, ...)                     \
    do {                                  \
        if (!(c)) {                       \
            printf("FAIL: " __VA_ARGS__); \
            printf("\n");                 \
            fails++;                      \
        }                                 \
    } while (0)

/* runs steps [from, to) with step time ms_at[level] and returns the count of probes made */
static int run(mdc_thread_tuner *t, int steps, const double *ms_at) {
    int p0 = t->probes;
    for (int s = 0; s < steps; s++) {
        int n = mdc_tuner_before(t), lv = 0;
        while (t->levels[lv] != n) lv++;
        mdc_tuner_after(t, ms_at[lv] * 1e-3);
    }
    return t->probes - p0;
}

int main(void) {
    mdc_thread_tuner t;
    mdc_tuner_init(&t, 6, 1);
    CHECK(t.on && t.nlevels == 3 && t.levels[0] == 6 && t.levels[1] == 3 && t.levels[2] == 1,
          "levels for 6 threads: %d of them, %d %d %d", t.nlevels, t.levels[0], t.levels[1], t.levels[2]);
    mdc_tuner_init(&t, 8, 1);
    CHECK(t.nlevels == 4 && t.levels[3] == 1, "levels for 8 threads end at 1: %d levels", t.nlevels);
    mdc_tuner_init(&t, 1, 1);
    CHECK(!t.on, "one thread: nothing to tune");
    mdc_tuner_init(&t, 4, 0);
    CHECK(!t.on && mdc_tuner_before(&t) == omp_get_max_threads(), "off: the count is left as it is");

    const double idle[] = {10, 18}, loaded[] = {100, 12}, slightly[] = {10, 9.5};
    mdc_tuner_init(&t, 2, 1);
    int p = run(&t, 1000, idle);
    CHECK(t.level == 0 && t.moves == 0, "idle: stays on 2 threads (level %d, %d moves)", t.level, t.moves);
    CHECK(p >= 4 && p <= 10, "idle: probes back off to one in 256 steps: %d probes in 1000 steps", p);

    mdc_tuner_init(&t, 2, 1);
    run(&t, 14, loaded); /* 3 steps, then 8, then a probe of 3 */
    CHECK(t.level == 1 && t.moves == 1, "loaded: on 1 thread after its first probe (level %d, %d moves)", t.level,
          t.moves);
    run(&t, 300, loaded);
    CHECK(t.level == 1 && t.moves == 1, "loaded: stays on 1 thread (level %d, %d moves)", t.level, t.moves);
    run(&t, 2 * (256 + 3) + 8, idle);
    CHECK(t.level == 0 && t.moves == 2, "load gone: back on 2 threads (level %d, %d moves)", t.level, t.moves);

    mdc_tuner_init(&t, 2, 1);
    run(&t, 1000, slightly);
    CHECK(t.level == 0, "a probe 5%% faster does not move it (level %d)", t.level);

    printf("%s\n", fails ? "test_thread_tuner: FAILED" : "test_thread_tuner: ok");
    return fails != 0;
}
