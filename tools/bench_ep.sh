#!/bin/sh
# Expert parallelism against serial in the same run (part of make bench): the `small` config with
# E = 8 experts, top-2, dropless, the same global batch (12 x 128); wall ms per step (median of
# steps 2-5 of minidc train) of the dense model and the MoE model serially on 2 threads, then the
# MoE model on 2 and 4 ranks of 1 thread on the same 2 cores: ep = dp (every rank its own experts),
# and dp 4 without ep (every rank all experts); the virtual ms of a step on the h100 preset and
# the formula's GFLOP per step beside. The all-to-all's share of the wall time (its wall ms,
# waiting for the slowest rank included) and the ranks' expert load (max/mean rows) say where an
# ep run's time goes. Target: ep 4 (dp 4) <= 1.3x the serial MoE step.
# Usage: tools/bench_ep.sh BUILD MPIEXEC
BUILD=${1:-build}
MPIEXEC=${2:-mpiexec.mpich}
common="--config small --steps 5"
moe="--experts 8 --topk 2"
. "$(dirname "$0")/bench_steps.sh"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
gflop() { # GFLOP per step the device was charged (the report's work line over the 5 steps)
    awk '/^  work / {for (i = 1; i < NF; i++) if ($(i + 1) == "FLOP,") printf "%.2f", $i / 5e9}' "$1"
}
echo "== expert parallelism, small config, E = 8, top-2, global batch 12 x 128 (tools/bench_ep.sh): wall ms per step"
env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" train $common >"$tmp" 2>&1 || { echo "bench_ep: dense failed"; exit 1; }
d=$(grep '^step' "$tmp" | stats)
df=$(gflop "$tmp")
env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" train $common $moe >"$tmp" 2>&1 || { echo "bench_ep: serial failed"; exit 1; }
s=$(grep '^step' "$tmp" | stats)
sf=$(gflop "$tmp")
sw=$(echo $s | cut -d' ' -f1)
awk -v d="$d" -v s="$s" -v df="$df" -v sf="$sf" 'BEGIN{split(d, a, " "); split(s, b, " ");
    printf "  dense serial (2 threads)   wall %.1f ms  virtual %.3f ms/step  %s GFLOP/step\n", a[1], a[2], df;
    f = "  MoE serial (2 threads)     wall %.1f ms  virtual %.3f ms/step  %s GFLOP/step  (%.2fx the dense time, %.2fx its FLOPs; virtual %.2fx)\n";
    printf f, b[1], b[2], sf, b[1] / a[1], sf / df, b[2] / a[2]}'
for spec in "2 --dp 2 --ep 2" "4 --dp 4 --ep 4" "4 --dp 4"; do
    set -- $spec; n=$1; shift
    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE "$MPIEXEC" -n "$n" "$BUILD/minidc" train $common $moe "$@" >"$tmp" 2>&1 ||
        { echo "bench_ep: $* failed"; exit 1; }
    r=$(grep '^step' "$tmp" | stats)
    a2a=$(awk '/^  moe:/ {for (i = 1; i < NF; i++) if ($(i + 1) == "ms" && $(i + 2) == "wall)") v = $i} END {print v}' "$tmp")
    awk -v r="$r" -v s="$sw" -v a="$a2a" -v spec="$*" -v n="$n" 'BEGIN{split(r, x, " "); q = x[1] / s;
        printf "  MoE %-16s (%s x 1) wall %.1f ms  virtual %.3f ms/step  %.2fx serial%s%s\n", spec, n, x[1], x[2], q,
               a != "" ? sprintf("  all-to-all %s ms of it", a) : "",
               spec == "--dp 4 --ep 4" ? (q <= 1.3 ? " (target <= 1.3x): PASS" : " (target <= 1.3x): MISS") : ""}'
done
