#!/bin/bash
# Context parallelism: c = 2, 3, 4 with each layout (zigzag, contiguous) and algorithm (ring,
# allgather, ulysses), with dropout, and composed with dp (ZeRO 0-3), tp (+SP) and pp, each run
# passing --check-serial (the loss every step and the parameters at the end against the serial
# model on the same global batch) with every figure of the context-parallel report equal to its
# formula; under --exact (with dropout) byte-identical checkpoints to serial for every algorithm,
# layout and composition; the layouts' attention work per rank (zigzag 1, contiguous near (2c-1)/c); bad
# configurations refused before any message (exit 2, the option named).
# Each run is a scenario (tests/cli/scenario.sh); the serial exact run, the reference of the
# exact ones, runs when one of them is selected.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
model="--vocab 384 --ctx 48 --layers 2 --heads 4 --channels 32 --batch 4 --seq 48 --steps 2 --seed 5 --quiet"
run() { # name ranks args...
    local name=$1 n=$2; shift 2
    timeout -k 5 120 "$MPIEXEC" -n "$n" "$bin" train $model "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}
check() { # name label: --check-serial passed, and the reports say nothing DIFFERS
    if [ $rc = 0 ] && grep -q "check-serial: .*: ok" "$tmp/$1.out" && ! grep -q DIFFERS "$tmp/$1.out" &&
        grep -q "^context parallel: " "$tmp/$1.out"; then
        pass "$2"
    else flunk "$2" "exit $rc"; grep -E "check-serial|DIFFERS|error" "$tmp/$1.out" | head -5; fi
}
serial_label="equal to serial, every figure equal to its formula"
i=0
for c in 2 3 4; do
    for algo in ring allgather ulysses; do
        [ $algo = ulysses ] && [ $c = 3 ] && continue # 4 heads over 3 ranks: refused below
        for layout in zigzag contiguous; do
            i=$((i + 1))
            label="--cp $c --cp-algo $algo --cp-layout $layout: $serial_label"
            scenario "$label" || continue
            run cp$i $c --cp $c --cp-algo $algo --cp-layout $layout --check-serial
            check cp$i "$label"
        done
    done
done
for spec in "2 --cp 2 --dropout 0.1" "2 --cp 2 --cp-algo ulysses --dropout 0.1" "4 --cp 2 --dp 2 --zero 1" \
    "4 --cp 2 --dp 2 --zero 3 --cp-algo allgather" "4 --cp 2 --tp 2" "4 --cp 2 --tp 2 --sp --cp-layout contiguous" \
    "4 --cp 2 --tp 2 --sp --cp-algo ulysses --heads 8" "4 --cp 2 --pp 2 --microbatches 2" \
    "8 --cp 2 --tp 2 --dp 2 --zero 2 --sp"; do
    set -- $spec; n=$1; shift; i=$((i + 1))
    label="$*: $serial_label"
    scenario "$label" || continue
    run cp$i "$n" "$@" --check-serial
    check cp$i "$label"
done

# exact mode: every algorithm and layout, composed, saves the serial run's checkpoint byte for byte
xspecs=("2 --cp 2" "2 --cp 2 --cp-algo allgather" "2 --cp 2 --cp-algo ulysses" "3 --cp 3 --cp-layout contiguous"
    "3 --cp 3 --cp-algo allgather" "4 --cp 4" "4 --cp 4 --cp-algo ulysses --cp-layout contiguous"
    "4 --cp 2 --tp 2 --sp" "4 --cp 2 --dp 2 --zero 3 --cp-algo allgather" "4 --cp 2 --pp 2 --microbatches 2"
    "8 --cp 2 --tp 2 --dp 2 --cp-algo ulysses --cp-layout contiguous")
exact_label() { echo "exact, $*: byte-identical to serial"; }
need_serial=0
for spec in "${xspecs[@]}"; do
    set -- $spec; shift
    scenario "$(exact_label "$@")" && need_serial=1
done
if [ $need_serial = 1 ]; then
    timeout -k 5 100 "$MPIEXEC" -n 1 "$bin" train $model --exact-block 2 --dropout 0.1 --save "$tmp/serial.st" >/dev/null 2>&1 ||
        { flunk "serial exact run (the reference of the exact scenarios)" "exit $?"; exit 1; }
fi
for spec in "${xspecs[@]}"; do
    set -- $spec; n=$1; shift; i=$((i + 1))
    label=$(exact_label "$@")
    scenario "$label" || continue
    run cp$i "$n" "$@" --exact-block 2 --dropout 0.1 --save "$tmp/cp$i.st"
    if [ $rc = 0 ] && cmp -s "$tmp/serial.st" "$tmp/cp$i.st"; then pass "$label"
    else flunk "$label" "exit $rc or the checkpoint differs"; tail -3 "$tmp/cp$i.out"; fi
done

# the collective check on the whole mesh: every group's calls agree (its own messages count in the
# measured bytes, so only --check-serial is asked of it)
label="--check-collectives on cp x tp x dp: every call agrees"
if scenario "$label"; then
    run cc 8 --cp 2 --tp 2 --dp 2 --zero 2 --sp --check-collectives --check-serial
    [ $rc = 0 ] && grep -q "check-serial: .*: ok" "$tmp/cc.out" && grep -q "collective check: on" "$tmp/cc.out" &&
        pass "$label" || flunk "$label" "--check-collectives (exit $rc)"
fi

# the layouts' balance: zigzag gives every rank the same attention work, contiguous the last rank most
ratio() { awk '/forward attention FLOPs/ {for (i = 1; i < NF; i++) if ($i == "max/mean") print $(i + 1)}' "$tmp/bal.out"; }
label="contiguous, c = 4: max/mean attention work between 1.6 and 1.75"
if scenario "$label"; then
    run bal 4 --cp 4 --cp-layout contiguous
    r=$(ratio)
    [ $rc = 0 ] && awk -v r="$r" 'BEGIN {exit !(r > 1.6 && r < 1.75)}' && { pass "$label"; echo "  max/mean $r"; } ||
        flunk "$label" "contiguous balance '$r'"
fi
label="zigzag, c = 4: max/mean attention work 1.000"
if scenario "$label"; then
    run bal 4 --cp 4
    r=$(ratio)
    [ $rc = 0 ] && [ "$r" = 1.000 ] && pass "$label" || flunk "$label" "zigzag balance '$r'"
fi

expect_error() { # what pattern ranks args...
    local what=$1 pat=$2 n=$3; shift 3
    scenario "$what" || return 0
    run err "$n" "$@"
    if [ $rc = 2 ] && grep -q -- "$pat" "$tmp/err.out"; then pass "$what"; echo "  $(grep -m1 -- "$pat" "$tmp/err.out")"
    else flunk "$what" "exit $rc"; cat "$tmp/err.out"; fi
}
expect_error "zigzag, T not divisible by 2c" "--seq 36 is not divisible by 8, the zigzag layout's chunks for --cp 4" 4 \
    --cp 4 --seq 36
expect_error "contiguous, T not divisible by c" "--seq 46 is not divisible by 4, the contiguous layout's chunks" 4 \
    --cp 4 --cp-layout contiguous --seq 46
expect_error "ulysses, heads not divisible by c" "--cp-algo ulysses: the 4 heads on each tensor-parallel rank are not divisible by --cp 3" \
    3 --cp 3 --cp-algo ulysses
expect_error "unknown algorithm" "--cp-algo tree: unknown" 2 --cp 2 --cp-algo tree
expect_error "unknown layout" "--cp-layout spiral: unknown" 2 --cp 2 --cp-layout spiral
expect_error "exact block across chunks" "--exact-block 4 does not divide the 6 positions of a context-parallel chunk" 4 \
    --cp 4 --exact-block 4
expect_error "layout without cp" "--cp-layout and --cp-algo arrange context parallelism" 1 --cp-layout zigzag

exit $fail
