#!/bin/sh
# Context parallelism against serial in the same run (part of make bench): the `small` config
# with a 1024-position context, global batch 2 x 1024; wall ms per step (median of steps 2-4 of
# minidc train) of serial on 2 threads, then cp = 2 on 2 ranks of 1 thread on the same 2 cores,
# each algorithm with the zigzag layout and ring with the contiguous one; the virtual ms of a step
# on the h100 preset beside, and the ranks' attention work (max/mean). Target: ring zigzag
# <= 1.2x serial.
# Usage: tools/bench_cp.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
common="--config small --ctx 1024 --seq 1024 --batch 2 --steps 4"
. "$(dirname "$0")/bench_steps.sh"
echo "== context parallelism, small config at T = 1024, batch 2 (tools/bench_cp.sh): wall ms per step, ratio to serial"
s=$(env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" train $common | grep '^step' | stats) ||
    { echo "bench_cp: serial failed"; exit 1; }
echo "  serial (2 threads)             wall $(echo $s | cut -d' ' -f1) ms  virtual $(echo $s | cut -d' ' -f2) ms/step"
sw=$(echo $s | cut -d' ' -f1)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for spec in "ring zigzag" "allgather zigzag" "ulysses zigzag" "ring contiguous"; do
    set -- $spec
    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE "$MPIEXEC" -n 2 "$BUILD/minidc" train $common --cp 2 --cp-algo $1 \
        --cp-layout $2 >"$tmp" 2>&1 || { echo "bench_cp: cp 2 $1 $2 failed"; exit 1; }
    r=$(grep '^step' "$tmp" | stats)
    bal=$(awk '/forward attention FLOPs/ {for (i = 1; i < NF; i++) if ($i == "max/mean") print $(i + 1)}' "$tmp")
    w=$(echo $r | cut -d' ' -f1)
    awk -v w="$w" -v s="$sw" -v v="$(echo $r | cut -d' ' -f2)" -v a=$1 -v l=$2 -v b="$bal" 'BEGIN{r = w / s;
        printf "  cp 2 %-9s %-10s (2 x 1) wall %.1f ms  virtual %s ms/step  %.2fx serial  attention max/mean %s%s\n",
               a, l, w, v, r, b, a == "ring" && l == "zigzag" ? (r <= 1.2 ? " (target <= 1.2x): PASS" : " (target <= 1.2x): MISS") : ""}'
done
