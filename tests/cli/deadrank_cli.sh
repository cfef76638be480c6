#!/bin/bash
# A rank that stops answering or dies is named: with --fail-at RANK:STEP:stop the peers waiting on
# it time out naming that rank, the message it owes and its process state (stopped); with :kill,
# hydra (MPICH's launcher) ends the job at once and names the dead process's pid, which the
# rank printed (minidc's own "has exited" comes first when the waiting rank looks before hydra
# acts). The ranks know each other's pids from the doorbell segment whether or not their waits
# sleep on it: 2 ranks on 2 cores (no sleeping) name the stopped rank's state too.
# Under PORTABLE=1 (collectives/platform.c's POSIX fallback) a process's state is only "exists
# or not": the stopped rank is named as "running or stopped".
# Each check is a scenario (tests/cli/scenario.sh); the killed run is made when one of the
# checks that read it is selected.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
stopped="is stopped"
[ "${PORTABLE:-0}" = 1 ] && stopped="is running or stopped"
args="--config tiny --steps 4 --dp 3 --quiet"
label="a stopped rank is named"
if scenario "$label"; then
    MINIDC_DOORBELL=1 MINIDC_TIMEOUT=5 timeout -k 5 60 "$MPIEXEC" -n 3 "$bin" train $args --fail-at 1:1:stop >"$tmp/s" 2>&1
    rc=$?
    if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "waited 5 s (MINIDC_TIMEOUT) for rank 1 to send" "$tmp/s" &&
        grep -q "rank 1 (pid [0-9]*) $stopped" "$tmp/s"; then
        pass "$label"; echo "  $(grep -m1 "$stopped" "$tmp/s")"
    else flunk "$label" "stopped rank (exit $rc)"; tail -5 "$tmp/s"; fi
fi
label="without doorbell sleeps too: a stopped rank of 2 on 2 cores is named"
if scenario "$label"; then
    MINIDC_TIMEOUT=5 timeout -k 5 60 "$MPIEXEC" -n 2 "$bin" train --config tiny --steps 4 --dp 2 --quiet --fail-at 1:1:stop >"$tmp/s2" 2>&1
    rc=$?
    if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "rank 1 (pid [0-9]*) $stopped" "$tmp/s2"; then
        pass "$label"; echo "  $(grep -m1 "$stopped" "$tmp/s2")"
    else flunk "$label" "a stopped rank of 2 on 2 cores (exit $rc)"; tail -5 "$tmp/s2"; fi
fi
# 8 ranks, tp 2 x pp 2 x dp 2, rank 7 stopped: most ranks wait on a rank that is running only
# because it waits itself; every rank that times out names rank 7 as stopped all the same
label="8 ranks, rank 7 stopped: named by each rank that timed out"
if scenario "$label"; then
    MINIDC_DOORBELL=1 MINIDC_TIMEOUT=5 timeout -k 5 90 "$MPIEXEC" -n 8 "$bin" train --config tiny --steps 4 --tp 2 \
        --pp 2 --dp 2 --quiet --fail-at 7:1:stop >"$tmp/s8" 2>&1
    rc=$?
    timeouts=$(grep -c "waited 5 s (MINIDC_TIMEOUT)" "$tmp/s8")
    unnamed=$(grep "waited 5 s (MINIDC_TIMEOUT)" "$tmp/s8" | grep -v "rank 7 (pid [0-9]*) $stopped" | head -n 1)
    if [ $rc != 0 ] && [ $rc != 124 ] && [ "$timeouts" -ge 1 ] && [ -z "$unnamed" ]; then
        pass "$label"; echo "  named by each of the $timeouts rank(s) that timed out"
    else flunk "$label" "exit $rc, $timeouts timeout(s); not named in: $unnamed"; tail -5 "$tmp/s8"; fi
fi
killed="a killed rank is named (its pid)"
pidline="rank 1's pid line names the pid it killed itself as"
verbose=()
for r in 0 1 2; do verbose+=("MINIDC_VERBOSE: rank $r of 3 says its pid"); done
want_k=0
for label in "$killed" "$pidline" "${verbose[@]}"; do scenario "$label" && want_k=1; done
[ $want_k = 1 ] || exit $fail
MINIDC_VERBOSE=1 MINIDC_DOORBELL=1 MINIDC_TIMEOUT=30 timeout -k 5 60 "$MPIEXEC" -n 3 "$bin" train $args --fail-at 1:1:kill >"$tmp/k" 2>&1
rc=$?
# the dying rank's own line may be lost (hydra cleans up as the process dies), so the pid comes
# from whichever reports it: minidc's waiting rank (the rank's own pid), or hydra (the pid of the
# process it started: a wrapper's when the rank runs under one, as under the test harness)
hpid=$(sed -n 's/.*PID \([0-9]*\) RUNNING AT.*/\1/p' "$tmp/k" | head -1)
mpid=$(sed -n 's/.*rank 1 (pid \([0-9]*\)) has exited.*/\1/p' "$tmp/k" | head -1)
own=$(sed -n 's/.*--fail-at 1:1: killing this process (pid \([0-9]*\)).*/\1/p' "$tmp/k")
named=${mpid:-$hpid}
if scenario "$killed"; then
    if [ $rc != 0 ] && [ $rc != 124 ] && [ -n "$named" ] && { [ -z "$mpid" ] || [ -z "$own" ] || [ "$own" = "$mpid" ]; }; then
        pass "$killed"; echo "  pid $named named by ${mpid:+minidc}${mpid:-hydra}"
    else flunk "$killed" "exit $rc; pids: minidc '$mpid', hydra '$hpid', its own '$own'"; tail -8 "$tmp/k"; fi
fi
# MINIDC_VERBOSE: every rank says its pid at start, so hydra's pid names a rank
for r in 0 1 2; do
    label=${verbose[$r]}
    scenario "$label" || continue
    grep -q "^minidc: rank $r of 3 is pid [0-9]* on " "$tmp/k" && pass "$label" || flunk "$label" "no pid line of rank $r"
done
if scenario "$pidline"; then
    vpid=$(sed -n 's/^minidc: rank 1 of 3 is pid \([0-9]*\) on .*/\1/p' "$tmp/k")
    [ -z "$own" ] || [ "$vpid" = "$own" ] && pass "$pidline" ||
        flunk "$pidline" "rank 1's pid line says $vpid, the rank killed itself as $own"
fi
exit $fail
