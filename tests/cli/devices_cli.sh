#!/bin/bash
# The CLI of the device layer: `minidc devices` (table, --device, --device-file, --energy),
# `minidc bench device --quick` (runs and prints its rows; timings are not gated here), and
# `minidc workload` on 2 ranks with --hbm-scale small enough to run out of memory.
# Every assertion is a scenario (tests/cli/scenario.sh); the commands are cheap and always run.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
m=$BUILD/minidc
fail=0
t=$(mktemp -d /tmp/minidc-cli-XXXXXX)
trap 'rm -rf "$t"' EXIT
check() { # description, command output file, grep pattern
    scenario "$1" || return 0
    if grep -q -- "$3" "$2"; then pass "$1"; else flunk "$1" "no '$3' in:"; sed 's/^/  | /' "$2"; fi
}
status() { # description, want (0 or nonzero), exit status
    scenario "$1" || return 0
    if { [ "$2" = 0 ] && [ "$3" = 0 ]; } || { [ "$2" = nonzero ] && [ "$3" != 0 ]; }; then pass "$1"
    else flunk "$1" "exit $3"; fi
}
$m devices >"$t/table" 2>&1
status "minidc devices exits 0" 0 $?
check "vr300 row" "$t/table" "^vr300 .* 15\.7x"
check "a100-80 row" "$t/table" "^a100-80 .*2\.039 .* 1\.0x"
check "h100 NVLink bidirectional" "$t/table" "^h100 .* 900 "
check "host row" "$t/table" "^host "
check "bus width" "$t/table" "2048x16"
$m devices --device h200 >"$t/h200" 2>&1
status "--device h200 exits 0" 0 $?
check "h200 detail" "$t/h200" "HBM3e, 1024 bits x 6"
check "h200 ridge" "$t/h200" "ridge point (bf16)       206 FLOP/byte"
$m devices --energy >"$t/energy" 2>&1
check "energy default" "$t/energy" "^default  *1  *20  *26  *1200  *3.97"
check "energy horowitz" "$t/energy" "^horowitz45  *0.1  *2.3  *20  *1300"
$m devices --device nosuch >"$t/nosuch" 2>&1
status "unknown preset refused (non-zero exit)" nonzero $?
check "unknown preset message" "$t/nosuch" "unknown preset 'nosuch'"
printf '{"name": "x"}\n' >"$t/bad.json"
$m devices --device-file "$t/bad.json" >"$t/badfile" 2>&1
status "bad device file refused (non-zero exit)" nonzero $?
check "bad device file message" "$t/badfile" "$t/bad.json: missing field 'description'"
$m bench device --quick >"$t/bench" 2>&1
status "bench device --quick exits 0" 0 $?
check "bench throttle row" "$t/bench" "10.0 ms .*|err| <= 2%"
check "bench accounting row" "$t/bench" "mdc_dev_kernel .* ns/call"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
$MPIEXEC -n 2 $m workload --steps 1 --report "$t/r.json" >"$t/wl" 2>&1
status "workload on 2 ranks exits 0" 0 $?
check "workload table" "$t/wl" "device report: 2 rank(s)"
check "workload rank 1" "$t/wl" "rank 1: device h100"
check "workload per token" "$t/wl" "energy/token"
check "workload JSON" "$t/r.json" '"format":.*"minidc-device-report-1"'
$MPIEXEC -n 2 $m workload --steps 1 --device a100-40 --hbm-scale 1e-4 >"$t/oom" 2>&1
status "workload at --hbm-scale 1e-4 runs out of memory (non-zero exit)" nonzero $?
check "workload OOM message" "$t/oom" "rank 0: out of memory on emulated device a100-40"
exit $fail
