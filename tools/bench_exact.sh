#!/bin/sh
# Exact mode against the default mode in the same run (part of make bench): the `small` config,
# B=4 T=128, serial on 2 threads and dp=2 x tp=2 on 4 ranks of 1 thread (the same 2 cores);
# wall ms per step (median of minidc bench train) and the bytes rank 0 sends per step; each
# ratio exact/default beside its target (3x).
# Usage: tools/bench_exact.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
ms() { echo "$1" | sed -n 's/.* minidc *\([0-9.]*\) ms.*/\1/p'; }
echo "== exact mode against default, small config, B=4 T=128 (tools/bench_exact.sh): wall ms per step"
for mesh in serial "dp 2 x tp 2"; do
    for mode in default exact; do
        x=; [ $mode = exact ] && x=--exact
        if [ "$mesh" = serial ]; then
            line=$(env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" bench train --config small --steps 6 $x |
                grep "minidc ") || { echo "bench_exact: serial $mode failed"; exit 1; }
        else
            line=$(OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE "$MPIEXEC" -n 4 "$BUILD/minidc" bench train --config small \
                --threads 1 --steps 6 --dp 2 --tp 2 $x | grep "minidc ") || { echo "bench_exact: $mesh $mode failed"; exit 1; }
        fi
        echo "$line"
        [ $mode = default ] && d=$(ms "$line") || e=$(ms "$line")
    done
    awk -v d="$d" -v e="$e" -v m="$mesh" 'BEGIN{r = e / d;
        printf "  %-12s exact %.2fx default (target <= 3x): %s\n", m, r, r <= 3 ? "PASS" : "MISS"}'
done
