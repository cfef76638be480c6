#!/bin/bash
# Fault injection: MINIDC_FAULT_CORRUPT=RANK:N flips a bit of one message in flight. Each of rank
# 1's first six sends of a dp 2 run, corrupted in turn, must be caught: by --check-replicas (the
# replicas differ) or by --check-serial (both took the corrupted sum alike and left serial's
# parameters); and the same run without the fault passes both checks.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
run="--vocab 384 --ctx 24 --layers 2 --heads 4 --channels 32 --batch 8 --seq 24 --steps 2 --seed 3 --quiet --dp 2"
label="without the fault both checks pass"
if scenario "$label"; then
    timeout -k 5 100 "$MPIEXEC" -n 2 "$bin" train $run --check-replicas --check-serial >"$tmp/clean" 2>&1
    if [ $? = 0 ] && grep -q "check-serial: .*: ok" "$tmp/clean"; then pass "$label"
    else flunk "$label" "the run without a fault"; tail -3 "$tmp/clean"; fi
fi
caught="check-replicas: after step [0-9]+ tensor '[^']*' differs|check-serial: .*: FAILED"
for n in 1 2 3 4 5 6; do
    label="send $n of rank 1 corrupted: caught"
    scenario "$label" || continue
    timeout -k 5 100 env MINIDC_FAULT_CORRUPT=1:$n "$MPIEXEC" -n 2 "$bin" train $run --check-replicas --check-serial \
        >"$tmp/c$n" 2>&1
    rc=$?
    if [ $rc != 0 ] && grep -qE "check-replicas: after step [0-9]+ tensor '.*' differs|check-serial: .*: FAILED" "$tmp/c$n"; then
        pass "$label"; echo "  $(grep -oE "$caught" "$tmp/c$n" | head -1 | cut -c1-90)"
    else flunk "$label" "not caught (exit $rc)"; tail -3 "$tmp/c$n"; fi
done
exit $fail
