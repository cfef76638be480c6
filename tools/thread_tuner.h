/* The OpenMP thread count of a one-process run, chosen by measuring its own steps.
 *
 * Laptops run other programs. With two threads on two cores and a busy process beside them,
 * every parallel region waits for the thread that lost its core: a tiny step measured 6.9 ms
 * alone took 15.6 ms beside one busy loop and 1040 ms beside a 3-rank MPICH program polling in
 * MPI_Recv (libgomp's default wait spins through the time slices the other thread needs),
 * where one thread took 12.1 and 24 ms. No wait policy fixes that (PASSIVE: 27.7 ms, and
 * 11.4 ms instead of 6.9 when idle); fewer threads do, and the kernels give the same bits with
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
