#!/bin/sh
# make bench: every benchmark of `minidc bench` (each prints its target and pass/fail per row).
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
echo "== minidc bench device"
"$BUILD/minidc" bench device || exit 1

# ---- collectives (tools/bench_coll.c): minidc vs MPICH's own in the same run, nccl-tests
# columns; speed targets (on 2 cores): 2 ranks >= 1.0x MPICH at 64 KiB..64 MiB (allreduce
# >= 1.5x at 16-64 MiB); 4 and 8 ranks >= 10x up to 1 MiB and >= 2x at 64 MiB.
# BENCH_COLL_RANKS (default "2 4 8") and BENCH_COLL_MAX (default 64M) shorten the run.
echo "== minidc bench COLL: $(getconf _NPROCESSORS_ONLN) cores, $(date -u +%Y-%m-%d)"  # (nproc obeys OMP_NUM_THREADS)
for p in ${BENCH_COLL_RANKS:-2 4 8}; do
    lo=64
    [ "$p" = 2 ] && lo=64K
    for c in allreduce reduce_scatter allgather alltoall broadcast; do
        echo "\$ $MPIEXEC -n $p $BUILD/minidc bench $c -b $lo -e ${BENCH_COLL_MAX:-64M} -f 4"
        "$MPIEXEC" -n "$p" "$BUILD/minidc" bench "$c" -b "$lo" -e "${BENCH_COLL_MAX:-64M}" -f 4 || exit 1
    done
done
# In place (the input in the receive buffer, as a training step's gradient allreduce is; nccl-tests'
# second set of columns): the reducing collectives at 2 and 4 ranks, no targets of their own.
for p in ${BENCH_COLL_RANKS:-2 4}; do
    [ "$p" -gt 4 ] && continue
    for c in allreduce reduce_scatter; do
        echo "\$ $MPIEXEC -n $p $BUILD/minidc bench $c -b 64K -e ${BENCH_COLL_MAX:-64M} -f 4 --inplace"
        "$MPIEXEC" -n "$p" "$BUILD/minidc" bench "$c" -b 64K -e "${BENCH_COLL_MAX:-64M}" -f 4 --inplace || exit 1
    done
done
# ---- why the benchmark times each library in blocks: what a call leaves for the next ----
echo "== tests/bench/bench_after.c: a call after MPI_Allgather vs after mdc_allgather (2 ranks, 32 KiB per rank)"
"$MPIEXEC" -n 2 "$BUILD/tests/bench_after" 32 MMMdddd 2000 || exit 1
"$MPIEXEC" -n 2 "$BUILD/tests/bench_after" 32 MdMd 2000 || exit 1
"$MPIEXEC" -n 2 "$BUILD/tests/bench_after" 32 MFdFMFd 300 || exit 1
# ---- why waits sleep on doorbells (collectives/doorbell.c): a copy next to yielding waiters ----
echo "== tests/bench/bench_p2p.c yield: one 64 MiB message at 4 ranks, waiters yielding vs sleeping"
"$MPIEXEC" -n 4 "$BUILD/tests/bench_p2p" yield 64 || exit 1
# ---- what MPI point-to-point moves on this machine when every rank exchanges at once ----
echo "== tests/bench/bench_p2p.c exchange: ranks exchange 32 MiB in pairs, all at once (a plain pattern's rate, not a ceiling)"
for p in 2 4 8; do "$MPIEXEC" -n $p "$BUILD/tests/bench_p2p" exchange 32 || exit 1; done
echo "== tests/bench/bench_p2p.c copy: one rank moves 64 and 16 MiB of the other's buffer: an MPI message, process_vm_readv, memcpy"
for m in 64 16; do "$MPIEXEC" -n 2 "$BUILD/tests/bench_p2p" copy $m || exit 1; done
# ---- the 64 MiB targets against the bare cost of the copies and additions they need ----
echo "== tests/bench/bench_bare.c: each collective's copies (and additions) made with process_vm_readv and no MPI, next to minidc and MPICH"
for p in 2 4 8; do for c in reduce_scatter allreduce alltoall allgather; do
    "$MPIEXEC" -n $p "$BUILD/tests/bench_bare" $c 64 || exit 1
done; done
# ---- the interposer: a plain MPI program with and without LD_PRELOAD=libminidc_mpi.so ----
echo "== tools/bench_interposer.sh (tests/bench/bench_interposer.c with and without the library)"
BUILD=$BUILD MPIEXEC=$MPIEXEC tools/bench_interposer.sh || exit 1
# ---- kernels: training step vs PyTorch (tools/bench_train.c, tests/bench/bench_torch.py) ----------
# Each config in its own process (peak RSS per config); PyTorch measured right before minidc,
# each in its own best setting on the 2 cores (docs/performance.md, "The PyTorch reference").
# PyTorch: OpenBLAS on 2 threads (OPENBLAS_NUM_THREADS=1, exported above for minidc, which cuts
# its products itself, ran every PyTorch matmul on one core: 74 against 140 GFLOP/s here),
# OMP_WAIT_POLICY=PASSIVE (its OpenMP threads otherwise spin against OpenBLAS's), huge pages for
# malloc (bench_torch.py sets them); run with 2 and with 1 OpenMP thread of its own (2 is
# faster when its elementwise kernels are large, 1 when the per-op wake-ups dominate), the
# faster compared. minidc: libgomp's default wait policy (spin ~0.3 ms, then sleep: one thread
# pool, so the short spin between kernels costs nothing; PASSIVE makes tiny 2x slower by waking
# threads through the kernel at every parallel region). Multi-rank runs keep PASSIVE.
# The Llama configs (ref/model/family.c) take the steps and target of GPT-2's config of their size.
echo "== minidc bench train (training step, B=4, 2 threads; PyTorch in the same run)"
for cfg in tiny small gpt2 llama-tiny llama-gpt2; do
    r="0 0"
    for t in 2 1; do
        p=$(OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=2 \
            /usr/bin/python3 tests/bench/bench_torch.py --config $cfg --threads $t --blas-threads 2 2>/dev/null) || continue
        echo "# PyTorch $cfg, $t+2 threads (its own + OpenBLAS): wall ms, cpu ms per step: $p"
        r=$(echo "$p $r" | awk '{ if ($3 == 0 || $1 < $3) print $1, $2; else print $3, $4 }')
    done
    env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" bench train --config $cfg \
        --torch-ms "${r% *}" --torch-cpu-ms "${r#* }" || exit 1
done
# ---- end kernels ---------------------------------------------------------------------------
# ---- tensor and sequence parallelism against serial in the same run (tools/bench_tp.sh) -----
"$(dirname "$0")/bench_tp.sh" "$BUILD" "$MPIEXEC" || exit 1
# ---- exact mode against default in the same run (tools/bench_exact.sh) ----------------------
"$(dirname "$0")/bench_exact.sh" "$BUILD" "$MPIEXEC" || exit 1
# ---- activation recomputation against none in the same run (tools/bench_recompute.sh) -------
"$(dirname "$0")/bench_recompute.sh" "$BUILD" "$MPIEXEC" || exit 1

# ---- mixed precision against fp32 in the same run (tools/bench_precision.sh) ------------------
"$(dirname "$0")/bench_precision.sh" "$BUILD" || exit 1
# ---- pipeline parallelism against serial in the same run (tools/bench_pp.sh) -----------------
"$(dirname "$0")/bench_pp.sh" "$BUILD" "$MPIEXEC" || exit 1
# ---- context parallelism against serial in the same run (tools/bench_cp.sh) -------------------
"$(dirname "$0")/bench_cp.sh" "$BUILD" "$MPIEXEC" || exit 1
# ---- expert parallelism against serial in the same run (tools/bench_ep.sh): small with 8 experts,
# then the Mixtral family (mixtral-tiny and a config.json of hidden 256), ep 2 and ep 4 ------------
"$(dirname "$0")/bench_ep.sh" "$BUILD" "$MPIEXEC" || exit 1
# ---- a training step beside other programs: the thread tuner (tools/bench_load.sh) ------------
"$(dirname "$0")/bench_load.sh" "$BUILD" "$MPIEXEC" || exit 1
