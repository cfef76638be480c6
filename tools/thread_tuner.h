/* The OpenMP thread count of a one-process run, chosen by measuring its own steps.
 *
 * Laptops run other programs. With two threads on two cores and a busy process beside them,
 * every parallel region waits for the thread that lost its core: beside a 3-rank MPICH program
 * polling in its receives, a tiny step of 7.3 ms idle took 1656 ms on 2 threads (libgomp's
 * default wait spins through the time slices the other thread needs) and 33 ms on one
 * (tools/bench_load.sh). No wait policy fixes that (PASSIVE is as slow as one thread loaded and
 * slower idle: docs/performance.md); fewer threads do, and the kernels give the same bits with
 * any thread count (kernels/blas.c), so the count may change between steps.
 *
 * The tuner runs the steps at a level of [max, max/2, ..., 1] threads and now and then times
 * three steps at the neighbouring level (fewer, then more, in turn); a probe whose median is
 * at least 10% faster than the median of the level's last three steps moves there (medians:
 * one step disturbed by the other programs does not decide). Each probe that does not win
 * doubles the interval to the next (8 steps up to 256), so an idle machine pays three slower
 * steps in hundreds. */
#ifndef MINIDC_TOOLS_THREAD_TUNER_H
#define MINIDC_TOOLS_THREAD_TUNER_H

enum { MDC_TUNER_LEVELS = 12 };

typedef struct {
    int on;                       /* 0: the count stays as it is */
    int nlevels, level, probe;    /* probe: the level being timed, or -1 */
    int levels[MDC_TUNER_LEVELS]; /* thread counts, most first */
    int interval, until, down;    /* steps to the next probe; its direction */
    double recent[3];             /* the current level's last step times (s) */
    double probed[3];             /* the probe's step times */
    int nrecent, nprobed, moves, probes;
} mdc_thread_tuner;

/* Tunes between max_threads and 1 when on and max_threads > 1. */
void mdc_tuner_init(mdc_thread_tuner *t, int max_threads, int on);
/* Sets the thread count for the next step (omp_set_num_threads) and returns it. */
int mdc_tuner_before(mdc_thread_tuner *t);
/* The wall time of the step just run with the count mdc_tuner_before set. */
void mdc_tuner_after(mdc_thread_tuner *t, double seconds);

#endif
