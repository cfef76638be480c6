#!/bin/sh
# Activation recomputation against none in the same run (part of make bench): the `small` config,
# B=8 T=128, serial on 2 threads and tp 2 with SP on 2 ranks of 1 thread (the same 2 cores); per
# mode the wall ms per step (median of steps 2..6), the virtual ms of a step on the h100 preset,
# the activations' peak and the hardware FLOPs over the model's, each as a ratio to none.
# Korthikanti et al. 2022 report about 1.33x the FLOPs for full and 1.02-1.04x for selective.
# Usage: tools/bench_recompute.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== recomputation against none, small config, B=8 T=128 (tools/bench_recompute.sh)"
printf '  %-12s %-10s %10s %8s %12s %8s %14s %8s %10s\n' mesh mode "wall ms" ratio "virtual ms" ratio "acts peak MiB" ratio "HW/model"
for mesh in serial "tp 2 + SP"; do
    for mode in none selective full; do
        if [ "$mesh" = serial ]; then
            env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" train --config small --batch 8 --seq 128 \
                --steps 6 --recompute $mode >"$tmp/out" 2>&1 || { echo "bench_recompute: serial $mode failed"; exit 1; }
        else
            OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE "$MPIEXEC" -n 2 "$BUILD/minidc" train --config small --batch 8 \
                --seq 128 --steps 6 --tp 2 --sp --recompute $mode >"$tmp/out" 2>&1 ||
                { echo "bench_recompute: $mesh $mode failed"; exit 1; }
        fi
        wall=$(sed -nE 's/^step +([2-6]) .* ([0-9.]+) ms +[0-9]+ tok\/s.*/\2/p' "$tmp/out" | sort -n | sed -n 3p)
        virt=$(sed -nE 's/^step +([0-9]+) .*virtual +([0-9.]+) ms.*/\1 \2/p' "$tmp/out" | tail -2 |
            awk 'NR == 1 { a = $2 } NR == 2 { printf "%.3f", $2 - a }')
        peak=$(sed -nE 's/^ +activations +peak +([0-9.]+) MiB/\1/p' "$tmp/out" | head -1)
        hw=$(sed -nE 's/.*recomputed or replicated work included: ([0-9.]+)x.*/\1/p' "$tmp/out")
        [ -n "$hw" ] || { echo "bench_recompute: $mesh $mode: no FLOPs line"; exit 1; }
        if [ $mode = none ]; then w0=$wall v0=$virt p0=$peak; fi
        awk -v m="$mesh" -v o=$mode -v w="$wall" -v v="$virt" -v p="$peak" -v h="$hw" -v w0="$w0" -v v0="$v0" \
            -v p0="$p0" 'BEGIN { printf "  %-12s %-10s %10.1f %7.2fx %12.3f %7.2fx %14.2f %7.2fx %9.3fx\n",
                m, o, w, w / w0, v, v / v0, p, p / p0, h }'
    done
done
