#!/bin/sh
# Mixed precision against fp32 in the same run (part of make bench). Two questions:
#  1. this machine: the wall ms per step (median of steps 2..6) of the `small` config, B=8 T=128,
#     serial on 2 threads, in bf16 and fp16 against fp32 (the CPU computes in fp32 either way: the
#     16-bit runs pay for their rounding, nothing buys them speed here);
#  2. the emulated GPU: the virtual ms of one step on the h100 preset for GPT-2 sizes (small,
#     gpt2 124M at B=1 T=1024) in fp32 and bf16, the ratio, and the activations' and
#     parameters' peak (bf16: tensor cores at 989 TFLOP/s against 67 fp32, and half the bytes).
# Usage: tools/bench_precision.sh BUILD
BUILD=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # config batch seq steps precision
    env -u OMP_WAIT_POLICY OMP_NUM_THREADS=2 "$BUILD/minidc" train --config "$1" --batch "$2" --seq "$3" --steps "$4" \
        --precision "$5" >"$tmp/out" 2>&1 || { echo "bench_precision: $1 $5 failed"; tail -3 "$tmp/out"; exit 1; }
}
virt_step() { sed -nE 's/^step +([0-9]+) .*virtual +([0-9.]+) ms.*/\1 \2/p' "$tmp/out" | tail -2 |
    awk 'NR == 1 { a = $2 } NR == 2 { printf "%.3f", $2 - a }'; }
peak() { sed -nE "s/^ +$1 +peak +([0-9.]+) MiB/\\1/p" "$tmp/out" | head -1; }
echo "== mixed precision against fp32 (tools/bench_precision.sh)"
echo "  this machine: small config, B=8 T=128, serial on 2 threads"
printf '  %-10s %10s %8s\n' precision "wall ms" ratio
for p in fp32 bf16 fp16; do
    run small 8 128 6 $p
    wall=$(sed -nE 's/^step +([2-6]) .* ([0-9.]+) ms +[0-9]+ tok\/s.*/\2/p' "$tmp/out" | sort -n | sed -n 3p)
    [ $p = fp32 ] && w0=$wall
    awk -v p=$p -v w="$wall" -v w0="$w0" 'BEGIN { printf "  %-10s %10.1f %7.2fx\n", p, w, w / w0 }'
done
echo "  the emulated h100: one step's virtual time and the peaks"
printf '  %-22s %-10s %12s %8s %14s %14s\n' config precision "virtual ms" ratio "acts peak MiB" "params MiB"
for c in "small 8 128" "gpt2 1 1024"; do
    set -- $c
    for p in fp32 bf16; do
        run "$1" "$2" "$3" 2 $p
        v=$(virt_step)
        [ $p = fp32 ] && v0=$v
        awk -v c="$1 B=$2 T=$3" -v p=$p -v v="$v" -v v0="$v0" -v a="$(peak activations)" -v q="$(peak parameters)" \
            'BEGIN { printf "  %-22s %-10s %12.3f %7.2fx %14.2f %14.2f\n", c, p, v, v / v0, a, q }'
    done
done
