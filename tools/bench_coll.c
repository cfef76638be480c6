/* minidc bench COLL: nccl-tests style collective benchmark, side by side with MPICH's own
 * collective in the same run.
 *
 *   mpiexec.mpich -n 4 build/minidc bench allreduce -b 8 -e 64M -f 4 [--algo A] [--dtype f32]
 *       [--op sum] [--iters N] [--order blocks|alternate] [--inplace] [--check] [--device h100]
 *
 * Sizes are nccl-tests' S: allreduce and broadcast the vector, reduce_scatter and allgather the
 * full buffer of p blocks, alltoall one rank's send buffer. Time: before each call every
 * rank meets in minidc's (polite) barrier, then times the call; minidc's and MPICH's calls
 * run in short blocks that take turns (time_calls), so both see the same machine (the
 * development machine is shared: its speed drifts within seconds); the reported time is the
 * median over iterations of the maximum over ranks. algbw = S / time; busbw = algbw x
 * nccl-tests' factor (AllReduce 2(p-1)/p; ReduceScatter, AllGather, AlltoAll (p-1)/p;
 * Broadcast 1). #wrong counts wrong elements over all ranks (integer-valued inputs, so the
 * exact answer does not depend on summation order); --check verifies every call instead
 * of one call per size. --inplace runs both libraries in place (MPI_IN_PLACE / MDC_IN_PLACE:
 * the input in the receive buffer, where nccl-tests' second set of columns puts it; each timed
 * call then reduces the previous call's result, as repeated in-place calls in nccl-tests do).
 * "mpich" is MPI_<Coll> on the same buffers; ratio = mpich / minidc
 * (above 1: minidc is faster). virt is the emulated device's virtual time for one call (max
 * over ranks, from a zeroed clock). floor is the least time any algorithm could take on this
 * machine: the bytes each rank must at least copy (floor_factor x S) at the rate the machine
 * copies when every rank copies at once (measured in the same run, copy_time); best =
 * mpich / floor, the ratio an algorithm at the floor would reach. Each collective is a
 * definition of its own (tools/bench_coll_<name>.c, bench_coll.h); this driver runs them. This
 * file may call MPI collectives: the comparison and the max-over-ranks reductions are its
 * purpose (docs/design.md rule 1 exempts it). */
#include <ctype.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_coll.h"
#include "commands.h"

/* ---- timing ------------------------------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of_max(double *t, int n) {
    double *tmax = calloc((size_t)n, sizeof *tmax);
    if (!tmax) return 0;
    /* Every rank ran the same iterations unless one failed; a failing rank aborts after. */
    MPI_Allreduce(t, tmax, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(tmax, (size_t)n, sizeof *tmax, cmp_dbl);
    double med = n % 2 ? tmax[n / 2] : 0.5 * (tmax[n / 2 - 1] + tmax[n / 2]);
    free(tmax);
    return med;
}

/* The calls per block of --order blocks: a quarter of the iterations (5 of 20), so drift
 * over a size's run is shared by both libraries, and a block is long enough that most of
 * its calls follow a call of the same library. */
static int block_calls(const bench_opts *o) { return o->alternate ? 1 : (o->iters + 3) / 4; }

/* Times `iters` calls of ours and, when o->mpich, as many of MPICH's: median over iterations of
 * the max over ranks, seconds, into *ours and *theirs. With --check, also counts wrong elements
 * of every call of ours into *wrong.
 * Order. blocks (default): rounds of block_calls() calls of one library, then as many of the
 * other; which goes first swaps every round, so drift on a shared machine hits both alike.
 * Each block starts with one untimed call: a call leaves the caches in a state that the next
 * call pays for (tests/bench/bench_after.c; docs/performance.md "How the two are timed": after a
 * 2-rank 32 KiB MPI_Allgather the next call takes 1.6-2.2 us longer than after an
 * mdc_allgather, whichever library it belongs to), and strict alternation charges all of
 * MPICH's after-effects to minidc and none of minidc's to MPICH. In blocks, each library's timed calls follow its own calls, as in an
 * application that calls one library. alternate (--order alternate): ours, theirs, ours, ...,
 * every call timed, each following the other library's. */
static void time_calls(const bench_opts *o, bench_case *c, double *ours, double *theirs, size_t *wrong,
                       mdc_status *st) {
    double *t = calloc(2 * (size_t)o->iters, sizeof *t), *tm = t + o->iters;
    *ours = *theirs = 0;
    if (!t) {
        *st = MDC_ERR_OOM_HOST;
        return;
    }
    int block = block_calls(o), warm = !o->alternate, done[2] = {0, 0}; /* [0] ours, [1] MPICH */
    for (int round = 0; *st == MDC_OK && (done[0] < o->iters || (o->mpich && done[1] < o->iters)); round++) {
        for (int k = 0; k < 2 && *st == MDC_OK; k++) {
            int side = o->alternate ? k : k ^ (round & 1);
            if (side && !o->mpich) continue;
            int n = o->iters - done[side] < block ? o->iters - done[side] : block;
            for (int j = -warm; j < n && n > 0 && *st == MDC_OK; j++) {
                if (!side && o->check) o->def->prepare(o, c);
                if ((*st = mdc_barrier(c->g))) break;
                double t0 = MPI_Wtime();
                if (!side) *st = o->def->run_minidc(o, c);
                else if (o->def->run_mpich(o, c) != MPI_SUCCESS)
                    *st = mdc_fail(MDC_ERR_MPI, "MPICH's %s failed", o->def->name);
                double dt = MPI_Wtime() - t0;
                if (j >= 0) (side ? tm : t)[done[side]++] = dt;
                if (!side && !*st && o->check) *wrong += o->def->verify(o, c);
            }
        }
    }
    *ours = median_of_max(t, o->iters);
    if (o->mpich) *theirs = median_of_max(tm, o->iters);
    free(t);
}

/* The speed target (MPICH time / ours) for p ranks and S bytes, 0 if none: 2 ranks
 * >= 1.0x at 64 KiB..64 MiB (allreduce >= 1.5x at 16-64 MiB: the definition's target_big2);
 * 4 and 8 ranks >= 10x up to 1 MiB and >= 2x at 64 MiB. Stated for 2 cores; printed whatever
 * the machine. Rooted reduce, gather and scatter have none (target_big2 0). */
static double target_ratio(const bench_coll_def *d, int p, size_t S) {
    const size_t KiB = 1024, MiB = KiB * KiB;
    if (d->target_big2 <= 0) return 0;
    if (p == 2) {
        if (S < 64 * KiB || S > 64 * MiB) return 0;
        return S >= 16 * MiB ? d->target_big2 : 1.0;
    }
    if (p == 4 || p == 8) return S <= MiB ? 10.0 : S >= 64 * MiB ? 2.0 : 0;
    return 0;
}

/* The copy floor's unit: every rank memcpy's `bytes` from its send to its receive buffer at
 * the same moment, after minidc's barrier; median over `iters` of the max over ranks. With
 * more ranks than cores, or cores that share the memory bus, this is what the machine can
 * copy when every rank has copying to do, which is all a collective does with large messages
 * (the receiver copies the payload out of the sender's memory, CMA); no algorithm can move
 * floor_factor x bytes per rank in less time. */
static double copy_time(bench_case *c, size_t bytes, int iters, mdc_status *st) {
    double *t = calloc((size_t)iters, sizeof *t);
    if (!t) {
        *st = MDC_ERR_OOM_HOST;
        return 0;
    }
    for (int it = 0; it < iters && *st == MDC_OK; it++) {
        if ((*st = mdc_barrier(c->g))) break;
        double t0 = MPI_Wtime();
        memcpy(c->recv, c->send, bytes);
        t[it] = MPI_Wtime() - t0;
    }
    double med = median_of_max(t, iters);
    free(t);
    return med;
}

/* memcpy bandwidth of this machine (bytes copied per second, best of 15), on one rank while the
 * others wait politely. Best-of, because a shared machine preempts copies at random. */
static double memcpy_bw(size_t bytes) {
    if (bytes < (1u << 20)) bytes = 1u << 20;
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double best = 1e30;
    for (int r = 0; r < 15; r++) {
        double t0 = mdc_wall_time();
        memcpy(b, a, bytes);
        double dt = mdc_wall_time() - t0;
        if (dt < best) best = dt;
        a[r] = b[bytes - 1 - r]; /* keep the copy observable */
    }
    free(a);
    free(b);
    return (double)bytes / best;
}

int mdc_bench_coll(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            bench_coll_usage(stdout);
            return 0;
        }
    mdc_runtime rt;
    mdc_status st = mdc_runtime_init(&rt, &argc, &argv);
    if (st) mdc_runtime_die(&rt, st, 1, 2);
    bench_opts o;
    int rc = bench_coll_parse_args(&o, argc, argv, rt.rank == 0);
    if (rc) {
        mdc_runtime_finalize(&rt);
        return rc < 0 ? 0 : rc;
    }
    mdc_coll_set_pick(o.pick);
    if (o.algo && (st = mdc_coll_set_algo(o.def->coll, o.algo)) != MDC_OK) mdc_runtime_die(&rt, st, 1, 2);
    int p = rt.size, me = rt.rank;
    if (o.root >= p) {
        if (me == 0) fprintf(stderr, "minidc bench %s: --root %d is not a rank of the %d\n", o.def->name, o.root, p);
        mdc_runtime_finalize(&rt);
        return 2;
    }
    size_t ts = mdc_dtype_size(o.t);
    const char *skip_mpich = o.mpich && o.def->mpich_skip ? o.def->mpich_skip(&o, p) : NULL;
    if (skip_mpich) o.mpich = 0;
    /* Largest buffers: S bytes each side (every collective here fits in S + S). */
    size_t cap = o.maxb + ts * (size_t)p;
    bench_case c = {.p = p, .me = me, .g = rt.world};
    c.send = malloc(cap);
    c.recv = malloc(cap);
    if (!c.send || !c.recv) mdc_runtime_die(&rt, mdc_fail(MDC_ERR_OOM_HOST, "two buffers of %zu bytes", cap), 0, 1);
    memset(c.send, 0, cap);
    memset(c.recv, 0, cap);

    double mbw = 0;
    MDC_CHECK(mdc_barrier(rt.world));
    size_t mcb = o.maxb < (32u << 20) ? o.maxb : (32u << 20);
    if (mcb < (1u << 20)) mcb = 1u << 20;
    if (me == 0) mbw = memcpy_bw(mcb);
    MDC_CHECK(mdc_barrier(rt.world));

    const mdc_device_spec *spec = mdc_device_get_spec(rt.dev);
    if (me == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(ver, &len);
        char *nl = strchr(ver, '\n');
        if (nl) *nl = '\0';
        /* MINIDC_ALGO_<COLL> forces an algorithm as --algo does: the header says which. */
        const char *algo = o.algo ? o.algo : mdc_coll_get_algo(o.def->coll);
        char forced_by[80] = "";
        if (!o.algo && strcmp(algo, "auto") != 0) {
            int k = snprintf(forced_by, sizeof forced_by, " (forced by MINIDC_ALGO_");
            for (const char *n = mdc_coll_name(o.def->coll); *n && k + 2 < (int)sizeof forced_by; n++)
                forced_by[k++] = (char)toupper((unsigned char)*n);
            snprintf(forced_by + k, sizeof forced_by - (size_t)k, ")");
        }
        printf("# minidc bench %s: %d ranks, %s, op %s, algo %s%s, virtual device %s, "
               "time = median over iterations of max over ranks\n# order: %s\n# buffers: %s\n# reference: %s\n",
               o.def->name, p, mdc_dtype_name(o.t), mdc_op_name(o.op), algo,
               o.algo                    ? ""
               : *forced_by              ? forced_by
               : !strcmp(o.pick, "host") ? " (cost model on this host's links, --pick host)"
                                         : " (cost model on the device's links, --pick device)",
               spec->name,
               o.alternate
                   ? "alternate (ours, MPICH's, ours, ...: every call follows the other library's)"
                   : "blocks (iters/4 calls of one library, then of the other, each block after one untimed call)",
               !o.inplace ? "out of place (input in the send buffer)" : o.def->inplace_buffers, ver);
        if (o.def->rooted) printf("# root: %d\n", o.root);
        if (skip_mpich) printf("# no MPICH column: %s\n", skip_mpich);
        printf("# busbw factor %.4g; ratio = MPICH time / minidc time (>1: minidc faster)\n", o.def->busfactor(p));
        printf("# floor = %.4g x the time for every rank to memcpy S bytes at once (the least any "
               "algorithm can take); best = mpich / floor, the ratio an algorithm at the floor would reach\n",
               o.def->floor_factor(p, o.inplace));
        printf("%12s %11s %5s %-19s %11s %8s %8s %7s %11s %7s %11s %10s %6s  %s\n", "bytes", "count", "type",
               "algorithm", "time(us)", "algbw", "busbw", "#wrong", "mpich(us)", "ratio", "virt(us)", "floor(us)",
               "best", "target");
        printf("%12s %11s %5s %-19s %11s %8s %8s %7s %11s %7s %11s\n", "", "", "", "", "", "GB/s", "GB/s", "", "", "",
               "");
    }
    double last_busbw = 0, last_copy = 0;
    size_t last_bytes = 0, total_wrong = 0;
    for (double s = (double)o.minb; s <= (double)o.maxb * 1.0000001; s *= o.factor) {
        size_t S = (size_t)s;
        int per_block = o.def->per_block;
        c.count = per_block ? S / (ts * (size_t)p) : S / ts;
        c.sbytes = c.count * ts * (per_block ? (size_t)p : 1);
        int iters = o.iters ? o.iters : c.sbytes <= (1u << 20) ? 20 : c.sbytes <= (16u << 20) ? 10 : 5;
        bench_opts oi = o;
        oi.iters = iters;
        double t_copy = copy_time(&c, c.sbytes, iters, &st);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        double t_floor = o.def->floor_factor(p, o.inplace) * t_copy;
        /* One verified call (also the warm-up), unless every iteration is verified. */
        size_t wrong = 0;
        o.def->prepare(&oi, &c);
        MDC_CHECK(mdc_barrier(rt.world));
        st = o.def->run_minidc(&oi, &c);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        wrong += o.def->verify(&oi, &c);
        if (o.mpich && o.def->run_mpich(&oi, &c) != MPI_SUCCESS) /* MPICH's warm-up */
            mdc_runtime_die(&rt, mdc_fail(MDC_ERR_MPI, "MPICH's %s failed", o.def->name), 0, 1);
        double t_ours, t_mpich;
        time_calls(&oi, &c, &t_ours, &t_mpich, &wrong, &st);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        /* Virtual time of one call on a zeroed clock. */
        MDC_CHECK(mdc_barrier(rt.world));
        mdc_dev_reset_counters(rt.dev);
        st = o.def->run_minidc(&oi, &c);
        if (st) mdc_runtime_die(&rt, st, 0, 1);
        double vt = mdc_dev_now(rt.dev), vmax = 0;
        MPI_Allreduce(&vt, &vmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        unsigned long long w = wrong, wsum = 0;
        MPI_Allreduce(&w, &wsum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        total_wrong += (size_t)wsum;
        if (me == 0) {
            double algbw = t_ours > 0 ? (double)c.sbytes / t_ours / 1e9 : 0;
            double busbw = algbw * o.def->busfactor(p);
            char mp[32] = "-", ra[32] = "-";
            if (o.mpich) {
                snprintf(mp, sizeof mp, "%.1f", t_mpich * 1e6);
                snprintf(ra, sizeof ra, "%.2f", t_ours > 0 ? t_mpich / t_ours : 0);
            }
            char tg[64] = "-", be[32] = "-";
            double best = o.mpich && t_floor > 0 ? t_mpich / t_floor : 0;
            if (best > 0) snprintf(be, sizeof be, "%.2f", best);
            double want = target_ratio(o.def, p, c.sbytes);
            if (o.mpich && want > 0)
                snprintf(tg, sizeof tg, ">=%.3gx %s%s", want, t_ours > 0 && t_mpich / t_ours >= want ? "ok" : "MISS",
                         best > 0 && best < want ? " (beyond the floor)" : "");
            printf("%12zu %11zu %5s %-19s %11.1f %8.3f %8.3f %7llu %11s %7s %11.2f %10.1f %6s  %s\n", c.sbytes,
                   c.count * (per_block ? (size_t)p : 1), mdc_dtype_name(o.t),
                   mdc_coll_choose(o.def->coll, c.sbytes, rt.world), t_ours * 1e6, algbw, busbw, wsum, mp, ra,
                   vmax * 1e6, t_floor * 1e6, be, tg);
            fflush(stdout);
            last_busbw = busbw;
            last_bytes = c.sbytes;
            last_copy = t_copy;
        }
    }
    if (me == 0) {
        printf("# memcpy bandwidth (one rank, best of 15 copies of %zu bytes): %.2f GB/s\n", mcb, mbw / 1e9);
        if (mbw > 0 && last_bytes)
            printf("# busbw at %zu bytes: %.3f GB/s = %.1f%% of memcpy\n", last_bytes, last_busbw,
                   100.0 * last_busbw * 1e9 / mbw);
        if (last_copy > 0)
            printf("# every rank copying %zu bytes at once: %.2f GB/s per rank, %.2f GB/s for the %d ranks\n",
                   last_bytes, (double)last_bytes / last_copy / 1e9, p * (double)last_bytes / last_copy / 1e9, p);
        mdc_wait_stats ws;
        mdc_wait_stats_get(&ws);
        if (ws.on)
            printf("# doorbells on (more ranks than cores): rank 0's waits slept %llu times, %llu ended by a ring, "
                   "%llu ran out\n",
                   ws.sleeps, ws.rung, ws.timed_out);
        else printf("# doorbells off (no more ranks than cores, or MINIDC_DOORBELL=0): waits poll and yield\n");
        if (getenv("MINIDC_VERBOSE"))
            printf("# requests in flight on rank 0: high-water mark %zu over the run (bound 2p + 8 = %zu)\n",
                   mdc_transport_requests_hwm(mdc_group_transport(rt.world)), MDC_REQUESTS_BOUND(p));
        printf("# %s: %zu wrong elements in total\n", total_wrong ? "FAILED" : "ok", total_wrong);
    }
    free(c.send);
    free(c.recv);
    mdc_runtime_finalize(&rt);
    return total_wrong ? 1 : 0;
}
