#!/bin/sh
# Pipeline parallelism against serial in the same run (part of make bench): the `small` config,
# global batch 8 x 128 in 8 micro-batches; wall ms per step (median of steps 2-5 of minidc train)
# of serial on 2 threads (--accum 8), then pp = 2 on 2 ranks and pp = 4 on 4 ranks of 1 thread on
# the same 2 cores, each schedule; the virtual ms of a step on the h100 preset beside. Target:
# 1f1b <= 1.3x serial.
# Usage: tools/bench_pp.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
common="--config small --batch 8 --steps 5"
. "$(dirname "$0")/bench_steps.sh"
echo "== pipeline parallelism, small config, 8 x 128 in 8 micro-batches (tools/bench_pp.sh): wall ms per step, ratio to serial"
s=$(env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" train $common --accum 8 | grep '^step' | stats) ||
    { echo "bench_pp: serial failed"; exit 1; }
echo "  serial (2 threads)        wall $(echo $s | cut -d' ' -f1) ms  virtual $(echo $s | cut -d' ' -f2) ms/step"
sw=$(echo $s | cut -d' ' -f1)
for p in 2 4; do
    scheds="gpipe 1f1b zb-h1"
    [ $p = 2 ] && scheds="gpipe 1f1b interleaved zb-h1" # interleaved: 2 chunks of 1 of small's 4 layers per stage
    for sched in $scheds; do
        r=$(OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE "$MPIEXEC" -n $p "$BUILD/minidc" train $common --pp $p \
            --microbatches 8 --schedule $sched | grep '^step' | stats) || { echo "bench_pp: pp $p $sched failed"; exit 1; }
        w=$(echo $r | cut -d' ' -f1)
        awk -v w="$w" -v s="$sw" -v v="$(echo $r | cut -d' ' -f2)" -v p=$p -v n=$sched 'BEGIN{r = w / s;
            printf "  pp %d %-11s (%d x 1 thread) wall %.1f ms  virtual %s ms/step  %.2fx serial%s\n", p, n, p, w, v, r,
                   n == "1f1b" ? (r <= 1.3 ? " (target <= 1.3x): PASS" : " (target <= 1.3x): MISS") : ""}'
    done
done
