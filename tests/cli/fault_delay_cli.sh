#!/bin/bash
# Fault injection: MINIDC_FAULT_DELAY=N makes every send wait a random 0..N microseconds first,
# so messages arrive in other orders; no result may change. Default mode: the step lines' loss
# and norm with and without the delays are the same digits on a dp x tp x pp mesh and a cp x dp
# one; exact mode: the checkpoints are byte-identical to serial's.
# Each mesh in each mode is a scenario (tests/cli/scenario.sh); the serial exact run, the
# reference of the exact ones, runs when one of them is selected.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
model="--vocab 384 --ctx 24 --layers 4 --heads 12 --channels 48 --batch 24 --seq 24 --steps 2 --seed 3"
losses() { awk '/^step/ {print $4, $6}' "$1"; }
specs=("8 --dp 2 --tp 2 --pp 2 --sp --microbatches 2" "4 --cp 2 --dp 2 --zero 2" "4 --pp 2 --virtual-stages 2 --dp 2 --microbatches 2")
exact_label() { echo "exact, $*, delayed: byte-identical to serial"; }
need_serial=0
for spec in "${specs[@]}"; do
    set -- $spec; shift
    scenario "$(exact_label "$@")" && need_serial=1
done
if [ $need_serial = 1 ]; then
    timeout -k 5 100 "$MPIEXEC" -n 1 "$bin" train $model --exact-block 2 --save "$tmp/serial.st" --quiet >/dev/null 2>&1 ||
        { flunk "serial exact run (the reference of the exact scenarios)" "exit $?"; exit 1; }
fi
i=0
for spec in "${specs[@]}"; do
    set -- $spec; n=$1; shift; i=$((i + 1))
    label="default mode, $*: the same loss and norm with random send delays"
    if scenario "$label"; then
        timeout -k 5 200 "$MPIEXEC" -n "$n" "$bin" train $model "$@" >"$tmp/a$i" 2>&1
        ra=$?
        timeout -k 5 200 env MINIDC_FAULT_DELAY=1500 "$MPIEXEC" -n "$n" "$bin" train $model "$@" >"$tmp/b$i" 2>&1
        rb=$?
        if [ $ra = 0 ] && [ $rb = 0 ] && [ -n "$(losses "$tmp/a$i")" ] && [ "$(losses "$tmp/a$i")" = "$(losses "$tmp/b$i")" ]; then
            pass "$label"
        else flunk "$label" "exit $ra/$rb"; losses "$tmp/a$i"; losses "$tmp/b$i"; fi
    fi
    label=$(exact_label "$@")
    if scenario "$label"; then
        timeout -k 5 200 env MINIDC_FAULT_DELAY=1500 "$MPIEXEC" -n "$n" "$bin" train $model "$@" --exact-block 2 --quiet \
            --save "$tmp/x$i.st" >"$tmp/x$i" 2>&1
        rc=$?
        if [ $rc = 0 ] && cmp -s "$tmp/serial.st" "$tmp/x$i.st"; then pass "$label"
        else flunk "$label" "exit $rc or the checkpoint differs"; tail -3 "$tmp/x$i"; fi
    fi
done
exit $fail
