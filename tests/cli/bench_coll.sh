#!/bin/bash
# minidc bench COLL: runs every collective at 2 and 3 ranks on small sizes with --check (every
# iteration verified), out of place and in place, rooted ones at another root too, prints the
# nccl-tests columns and MPICH's column, and finds 0 wrong.
set -u
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
fail=0
for p in 2 3; do
    for c in allreduce reduce_scatter allgather alltoall broadcast reduce gather scatter; do
        out=$(timeout 120 "$MPIEXEC" -n $p "$BUILD/minidc" bench $c -b 8 -e 64K -f 8 --iters 3 --check 2>&1)
        if [ $? != 0 ] || ! echo "$out" | grep -q '^# ok: 0 wrong elements'; then
            echo "bench $c at $p ranks failed:"; echo "$out" | tail -n 12; fail=1; continue
        fi
        echo "$out" | grep -q 'busbw' && echo "$out" | grep -q 'mpich(us)' && echo "$out" | grep -q 'of memcpy' ||
            { echo "bench $c: columns missing"; echo "$out"; fail=1; }
        rows=$(echo "$out" | grep -c '^ *[0-9]')
        [ "$rows" -ge 4 ] || { echo "bench $c at $p ranks: $rows size rows"; fail=1; }
    done
done
# Forced algorithms and other types go through the same path.
out=$(timeout 120 "$MPIEXEC" -n 3 "$BUILD/minidc" bench allreduce -b 1K -e 64K -f 8 --algo ring --dtype bf16 --check 2>&1) &&
    echo "$out" | grep -q ' ring ' && echo "$out" | grep -q '^# ok: 0' || { echo "bench --algo ring --dtype bf16:"; echo "$out"; fail=1; }
out=$(timeout 120 "$MPIEXEC" -n 2 "$BUILD/minidc" bench allreduce -b 1K -e 1K --dtype i32 --op max --check 2>&1) &&
    echo "$out" | grep -q '^# ok: 0' || { echo "bench --dtype i32 --op max:"; echo "$out"; fail=1; }
# MINIDC_ALGO_<COLL> forces the algorithm as --algo does; the header says so (not "auto").
out=$(MINIDC_ALGO_BCAST=scatter_allgather timeout 120 "$MPIEXEC" -n 3 "$BUILD/minidc" bench broadcast -b 64K -e 64K --check 2>&1) &&
    echo "$out" | grep -q 'algo scatter_allgather (forced by MINIDC_ALGO_BCAST)' && echo "$out" | grep -q ' scatter_allgather ' &&
    echo "$out" | grep -q '^# ok: 0' || { echo "MINIDC_ALGO_BCAST=scatter_allgather bench broadcast:"; echo "$out"; fail=1; }
# Both call orders (--order): named in the header, every call of ours verified.
for o in blocks alternate; do
    out=$(timeout 120 "$MPIEXEC" -n 2 "$BUILD/minidc" bench allgather -b 1K -e 16K -f 4 --iters 9 --order $o --check 2>&1) &&
        echo "$out" | grep -q "^# order: $o" && echo "$out" | grep -q '^# ok: 0' || { echo "bench --order $o:"; echo "$out"; fail=1; }
done
# In place (--inplace: MPI_IN_PLACE / MDC_IN_PLACE on both sides): named in the header, every
# call of ours verified, at an odd rank count (uneven blocks are not possible here, but the
# folds of non-powers of two are).
for c in allreduce reduce_scatter allgather alltoall broadcast reduce gather scatter; do
    out=$(timeout 120 "$MPIEXEC" -n 3 "$BUILD/minidc" bench $c -b 8 -e 64K -f 8 --iters 3 --inplace --check 2>&1) &&
        echo "$out" | grep -q "^# buffers: in place" && echo "$out" | grep -q '^# ok: 0' &&
        [ "$(echo "$out" | grep -c '^ *[0-9]')" -ge 4 ] || { echo "bench $c --inplace:"; echo "$out" | tail -n 12; fail=1; }
done
out=$(timeout 60 "$MPIEXEC" -n 2 "$BUILD/minidc" bench alltoall -b 1K -e 1K --iters 2 2>&1) &&
    echo "$out" | grep -q "^# buffers: out of place" || { echo "bench alltoall: header does not say out of place"; fail=1; }
# Rooted ones at the last rank (--root), out of place and in place; MPICH 4.0.2's in-place
# MPI_Reduce at such a root crashes, so that run says it has no MPICH column.
for c in broadcast reduce gather scatter; do
    for ip in "" --inplace; do
        out=$(timeout 120 "$MPIEXEC" -n 3 "$BUILD/minidc" bench $c -b 8 -e 64K -f 8 --iters 3 --root 2 $ip --check 2>&1) &&
            echo "$out" | grep -q "^# root: 2" && echo "$out" | grep -q '^# ok: 0' ||
            { echo "bench $c --root 2 $ip:"; echo "$out" | tail -n 12; fail=1; }
    done
done
out=$(timeout 60 "$MPIEXEC" -n 3 "$BUILD/minidc" bench gather -b 8 -e 8 --root 3 2>&1) &&
    { echo "bench gather --root 3 at 3 ranks was accepted"; fail=1; }
echo "$out" | grep -q -- "--root 3 is not a rank of the 3" || { echo "bench gather --root 3: $out"; fail=1; }
# Sizes, factors and iteration counts that cannot run (a size of 0 never grew by -f and looped
# for ever; 1e30 and nan became 0 or 2^63 bytes; "2x" and a count past INT_MAX were taken):
# exit 2 on every rank within seconds, one message naming the option (rank 0 says it).
for bad in "-b 0" "-b 1e30" "-e nan" "-e -8" "-f 1" "-f nan" "-f 2x" "--iters 0" "--iters 2x" "--iters 99999999999"; do
    out=$(timeout 30 "$MPIEXEC" -n 2 "$BUILD/minidc" bench allreduce $bad --no-mpich 2>&1)
    rc=$?
    [ $rc = 2 ] && [ "$(echo "$out" | grep -c "bad option or value: $bad\$")" = 1 ] ||
        { echo "bench allreduce $bad: rc $rc (want 2 and one message):"; echo "$out" | head -4; fail=1; }
done
# MINIDC_* tuning read strictly: a bad value is named (once per rank) and the default used.
out=$(MINIDC_TIMEOUT=abc MINIDC_SLICE=4x MINIDC_SPIN_US=-1 timeout 60 "$MPIEXEC" -n 2 "$BUILD/minidc" bench allreduce -b 1M -e 1M --no-mpich --check 2>&1) &&
    [ "$(echo "$out" | grep -c "MINIDC_TIMEOUT='abc' is not a number in .*; using 120")" = 2 ] &&
    echo "$out" | grep -q "MINIDC_SLICE='4x' is not a byte count" && echo "$out" | grep -q "MINIDC_SPIN_US='-1'" &&
    echo "$out" | grep -q '^# ok: 0' || { echo "bad MINIDC_* values:"; echo "$out" | head; fail=1; }
"$BUILD/minidc" bench allgather --order sideways >/dev/null 2>&1 && { echo "--order sideways was accepted"; fail=1; }
"$BUILD/minidc" bench nosuch >/dev/null 2>&1 && { echo "an unknown benchmark was accepted"; fail=1; }
[ $fail = 0 ] && echo "bench_coll: ok"
exit $fail
