#!/bin/sh
# Tensor and sequence parallelism against serial in the same run (part of make bench): the
# `small` config, the same global batch (B=4, T=128), wall ms per step (median of minidc bench
# train) of serial on 2 threads, then tp=2 on 2 ranks of 1 thread, tp=2 with SP, tp=4 on the
# same 2 cores; each ratio tp/serial beside its target (1.2, 1.2, 1.5). The virtual ms per step
# on the h100 preset is printed beside the wall time.
# Usage: tools/bench_tp.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
run() { # label, target, command... : prints the line and the ratio against serial
    line=$("$@" 2>&1 | grep "minidc ") || { echo "bench_tp: $1 failed"; return 1; }
    echo "$line"
}
ms() { echo "$1" | sed -n 's/.* minidc *\([0-9.]*\) ms.*/\1/p'; }
echo "== tensor parallelism, small config, B=4 T=128 (tools/bench_tp.sh): wall ms per step, ratio to serial on 2 threads"
serial=$(env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" bench train --config small --steps 8 | grep "minidc ") ||
    { echo "bench_tp: serial failed"; exit 1; }
echo "$serial"
s=$(ms "$serial")
for spec in "2 --tp 2 1.2" "2 --tp 2 --sp 1.2" "4 --tp 4 1.5"; do
    set -- $spec
    n=$1; target=$(echo "$spec" | awk '{print $NF}'); opts=$(echo "$spec" | cut -d' ' -f2- | sed 's/ [0-9.]*$//')
    line=$(OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE "$MPIEXEC" -n "$n" "$BUILD/minidc" bench train --config small \
        --threads 1 --steps 8 $opts | grep "minidc ") || { echo "bench_tp: $opts failed"; exit 1; }
    t=$(ms "$line")
    echo "$line"
    awk -v t="$t" -v s="$s" -v g="$target" -v o="$opts" 'BEGIN{r = t / s;
        printf "  %-12s %.2fx serial (target <= %.1fx): %s\n", o, r, g, r <= g ? "PASS" : "MISS"}'
done
