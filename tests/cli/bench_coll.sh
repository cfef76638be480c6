#!/bin/bash
# minidc bench COLL: runs every collective at 2 and 3 ranks on small sizes with --check (every
# iteration verified), out of place and in place, rooted ones at another root too, prints the
# nccl-tests columns and MPICH's column, and finds 0 wrong.
# Each run is a scenario (tests/cli/scenario.sh): one result line, CASE reruns one alone.
set -u
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
fail=0
for p in 2 3; do
    for c in allreduce reduce_scatter allgather alltoall broadcast reduce gather scatter; do
        label="bench $c at $p ranks: 0 wrong, the columns, every size"
        scenario "$label" || continue
        out=$(timeout 120 "$MPIEXEC" -n $p "$BUILD/minidc" bench $c -b 8 -e 64K -f 8 --iters 3 --check 2>&1)
        if [ $? != 0 ] || ! echo "$out" | grep -q '^# ok: 0 wrong elements'; then
            flunk "$label" "bench $c at $p ranks failed:"; echo "$out" | tail -n 12; continue
        fi
        rows=$(echo "$out" | grep -c '^ *[0-9]')
        if ! { echo "$out" | grep -q 'busbw' && echo "$out" | grep -q 'mpich(us)' && echo "$out" | grep -q 'of memcpy'; }; then
            flunk "$label" "columns missing"; echo "$out"
        elif [ "$rows" -lt 4 ]; then flunk "$label" "$rows size rows"
        else pass "$label"; fi
    done
done
# Forced algorithms and other types go through the same path.
label="bench allreduce --algo ring --dtype bf16 at 3 ranks"
if scenario "$label"; then
    out=$(timeout 120 "$MPIEXEC" -n 3 "$BUILD/minidc" bench allreduce -b 1K -e 64K -f 8 --algo ring --dtype bf16 --check 2>&1) &&
        echo "$out" | grep -q ' ring ' && echo "$out" | grep -q '^# ok: 0' && pass "$label" ||
        { flunk "$label" "bench --algo ring --dtype bf16:"; echo "$out"; }
fi
label="bench allreduce --dtype i32 --op max at 2 ranks"
if scenario "$label"; then
    out=$(timeout 120 "$MPIEXEC" -n 2 "$BUILD/minidc" bench allreduce -b 1K -e 1K --dtype i32 --op max --check 2>&1) &&
        echo "$out" | grep -q '^# ok: 0' && pass "$label" || { flunk "$label" "bench --dtype i32 --op max:"; echo "$out"; }
fi
# MINIDC_ALGO_<COLL> forces the algorithm as --algo does; the header says so (not "auto").
label="MINIDC_ALGO_BCAST=scatter_allgather: bench broadcast runs it, the header says forced"
if scenario "$label"; then
    out=$(MINIDC_ALGO_BCAST=scatter_allgather timeout 120 "$MPIEXEC" -n 3 "$BUILD/minidc" bench broadcast -b 64K -e 64K --check 2>&1) &&
        echo "$out" | grep -q 'algo scatter_allgather (forced by MINIDC_ALGO_BCAST)' && echo "$out" | grep -q ' scatter_allgather ' &&
        echo "$out" | grep -q '^# ok: 0' && pass "$label" ||
        { flunk "$label" "MINIDC_ALGO_BCAST=scatter_allgather bench broadcast:"; echo "$out"; }
fi
# Both call orders (--order): named in the header, every call of ours verified.
for o in blocks alternate; do
    label="bench allgather --order $o: named in the header, 0 wrong"
    scenario "$label" || continue
    out=$(timeout 120 "$MPIEXEC" -n 2 "$BUILD/minidc" bench allgather -b 1K -e 16K -f 4 --iters 9 --order $o --check 2>&1) &&
        echo "$out" | grep -q "^# order: $o" && echo "$out" | grep -q '^# ok: 0' && pass "$label" ||
        { flunk "$label" "bench --order $o:"; echo "$out"; }
done
# In place (--inplace: MPI_IN_PLACE / MDC_IN_PLACE on both sides): named in the header, every
# call of ours verified, at an odd rank count (uneven blocks are not possible here, but the
# folds of non-powers of two are).
for c in allreduce reduce_scatter allgather alltoall broadcast reduce gather scatter; do
    label="bench $c --inplace at 3 ranks: named in the header, 0 wrong, every size"
    scenario "$label" || continue
    out=$(timeout 120 "$MPIEXEC" -n 3 "$BUILD/minidc" bench $c -b 8 -e 64K -f 8 --iters 3 --inplace --check 2>&1) &&
        echo "$out" | grep -q "^# buffers: in place" && echo "$out" | grep -q '^# ok: 0' &&
        [ "$(echo "$out" | grep -c '^ *[0-9]')" -ge 4 ] && pass "$label" ||
        { flunk "$label" "bench $c --inplace:"; echo "$out" | tail -n 12; }
done
label="bench alltoall: the header says out of place"
if scenario "$label"; then
    out=$(timeout 60 "$MPIEXEC" -n 2 "$BUILD/minidc" bench alltoall -b 1K -e 1K --iters 2 2>&1) &&
        echo "$out" | grep -q "^# buffers: out of place" && pass "$label" ||
        flunk "$label" "bench alltoall: header does not say out of place"
fi
# Rooted ones at the last rank (--root), out of place and in place; MPICH 4.0.2's in-place
# MPI_Reduce at such a root crashes, so that run says it has no MPICH column.
for c in broadcast reduce gather scatter; do
    for ip in "" --inplace; do
        label="bench $c --root 2${ip:+ $ip} at 3 ranks: named in the header, 0 wrong"
        scenario "$label" || continue
        out=$(timeout 120 "$MPIEXEC" -n 3 "$BUILD/minidc" bench $c -b 8 -e 64K -f 8 --iters 3 --root 2 $ip --check 2>&1) &&
            echo "$out" | grep -q "^# root: 2" && echo "$out" | grep -q '^# ok: 0' && pass "$label" ||
            { flunk "$label" "bench $c --root 2 $ip:"; echo "$out" | tail -n 12; }
    done
done
label="bench gather --root 3 at 3 ranks refused, naming the root"
if scenario "$label"; then
    if out=$(timeout 60 "$MPIEXEC" -n 3 "$BUILD/minidc" bench gather -b 8 -e 8 --root 3 2>&1); then
        flunk "$label" "bench gather --root 3 at 3 ranks was accepted"
    elif ! echo "$out" | grep -q -- "--root 3 is not a rank of the 3"; then flunk "$label" "bench gather --root 3: $out"
    else pass "$label"; fi
fi
# Sizes, factors and iteration counts that cannot run (a size of 0 never grew by -f and looped
# for ever; 1e30 and nan became 0 or 2^63 bytes; "2x" and a count past INT_MAX were taken):
# exit 2 on every rank within seconds, one message naming the option (rank 0 says it).
for bad in "-b 0" "-b 1e30" "-e nan" "-e -8" "-f 1" "-f nan" "-f 2x" "--iters 0" "--iters 2x" "--iters 99999999999"; do
    label="bench allreduce $bad refused: exit 2, one message"
    scenario "$label" || continue
    out=$(timeout 30 "$MPIEXEC" -n 2 "$BUILD/minidc" bench allreduce $bad --no-mpich 2>&1)
    rc=$?
    [ $rc = 2 ] && [ "$(echo "$out" | grep -c "bad option or value: $bad\$")" = 1 ] && pass "$label" ||
        { flunk "$label" "rc $rc (want 2 and one message):"; echo "$out" | head -4; }
done
# MINIDC_* tuning read strictly: a bad value is named (once per rank) and the default used.
label="bad MINIDC_TIMEOUT, MINIDC_SLICE, MINIDC_SPIN_US values named, the defaults used"
if scenario "$label"; then
    out=$(MINIDC_TIMEOUT=abc MINIDC_SLICE=4x MINIDC_SPIN_US=-1 timeout 60 "$MPIEXEC" -n 2 "$BUILD/minidc" bench allreduce -b 1M -e 1M --no-mpich --check 2>&1) &&
        [ "$(echo "$out" | grep -c "MINIDC_TIMEOUT='abc' is not a number in .*; using 120")" = 2 ] &&
        echo "$out" | grep -q "MINIDC_SLICE='4x' is not a byte count" && echo "$out" | grep -q "MINIDC_SPIN_US='-1'" &&
        echo "$out" | grep -q '^# ok: 0' && pass "$label" || { flunk "$label" "bad MINIDC_* values:"; echo "$out" | head; }
fi
label="bench allgather --order sideways refused"
if scenario "$label"; then
    "$BUILD/minidc" bench allgather --order sideways >/dev/null 2>&1 && flunk "$label" "--order sideways was accepted" || pass "$label"
fi
label="an unknown benchmark refused"
if scenario "$label"; then
    "$BUILD/minidc" bench nosuch >/dev/null 2>&1 && flunk "$label" "an unknown benchmark was accepted" || pass "$label"
fi
exit $fail
