#!/bin/bash
# minidc plan sweeps the meshes of N GPUs, predicts each (minidc predict, at two small
# micro-batch counts extended linearly to the batch's) and prints the fastest that fit: a row's
# step equals predict's at the full batch within 0.1% (the extension is exact once the pipeline's
# warm-up is covered), the table is sorted, a mesh that does not fit in HBM is not printed, and
# bad options are refused by name.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
py=$(command -v python3 || echo /usr/bin/python3)

what="tiny on 8 GPUs: rows sorted, each pipeline row's step equal to predict's at the full batch"
if scenario "$what"; then
    # batch 32: tp 1 pp 2 v 1 dp 4 mbs 1 has m = 8 micro-batches, predicted at 2 and 4 and
    # extended; tp 2 pp 2 dp 2 m = 16 the same; tp 1 pp 2 v 2 m = 8 at 4 and 8 (m itself)
    args=(--config tiny --layers 4 --device h100 --precision bf16)
    if ! timeout -k 5 300 "$bin" plan "${args[@]}" --gpus 8 --batch 32 --tp 1,2 --pp 1,2 --mbs 1 \
        >"$tmp/plan.out" 2>"$tmp/plan.err"; then
        flunk "$what" "plan failed"; tail -5 "$tmp/plan.err"
    else
        why=""
        for mesh in "1 2 1 4" "2 2 1 2" "1 2 2 4"; do
            set -- $mesh
            row=$(awk -v tp=$1 -v pp=$2 -v v=$3 '$4 == tp && $6 == pp && $7 == v {print $2, $8, $11, $12, $13}' "$tmp/plan.out")
            [ -z "$row" ] && { why="no row for tp $1 pp $2 v $3"; break; }
            set -- $mesh $row
            sched=()
            [ "$3" -gt 1 ] && sched=(--schedule interleaved --virtual-stages "$3")
            sp=()
            [ "$1" -gt 1 ] && sp=(--sp)
            p=$(timeout -k 5 120 "$bin" predict "${args[@]}" --tp "$1" "${sp[@]}" --pp "$2" "${sched[@]}" --dp "$6" \
                --batch 32 --microbatches "$7" --zero "$8" --recompute "$9" 2>&1 | sed -n 's/^predicted step \([^ ]*\) s.*/\1/p')
            why=$("$py" -c '
import sys
a, b = float(sys.argv[1]), float(sys.argv[2] or "nan")
if not abs(a - b) <= 1e-3 * b: print("tp %s pp %s v %s: plan %.6g s, predict %.6g s" % tuple(sys.argv[3:6] + [a, b]))
' "$5" "$p" "$1" "$2" "$3")
            [ -n "$why" ] && break
        done
        sorted=$(awk '$1 ~ /^[0-9]+$/ {print $2}' "$tmp/plan.out" | sort -g -c 2>&1)
        if [ -n "$why" ]; then flunk "$what" "$why"; cat "$tmp/plan.out"
        elif [ -n "$sorted" ]; then flunk "$what" "rows not sorted by step"; cat "$tmp/plan.out"
        else pass "$what"; fi
    fi
fi

what="mixtral-tiny on 8 GPUs: ep 1, 2, 4 and 8 swept (DDP under ep), the ep 2 row equal to predict's"
if scenario "$what"; then
    if ! timeout -k 5 300 "$bin" plan --config mixtral-tiny --device h100 --gpus 8 --batch 16 --tp 1 --pp 1 --mbs 1 \
        >"$tmp/moe.out" 2>"$tmp/moe.err"; then
        flunk "$what" "plan failed"; tail -5 "$tmp/moe.err"
    else
        eps=$(awk '$1 ~ /^[0-9]+$/ {print $9}' "$tmp/moe.out" | sort -n | tr '\n' ' ')
        row=$(awk '$1 ~ /^[0-9]+$/ && $9 == 2 {print $2, $12}' "$tmp/moe.out")
        p=$(timeout -k 5 120 "$bin" predict --config mixtral-tiny --device h100 --precision bf16 --dp 8 --ep 2 --batch 16 --accum 2 \
            --zero 0 2>&1 | sed -n 's/^predicted step \([^ ]*\) s.*/\1/p')
        why=$("$py" -c '
import sys
a, z, b = sys.argv[1].split() + [sys.argv[2] or "nan"]
if sys.argv[3] != "1 2 4 8 ": print("ep values %r" % sys.argv[3])
elif z != "0": print("ZeRO %s under ep" % z)
elif not abs(float(a) - float(b)) <= 1e-3 * float(b): print("plan %s s, predict %s s" % (a, b))
' "$row" "$p" "$eps")
        if [ -n "$why" ]; then flunk "$what" "$why"; cat "$tmp/moe.out"; else pass "$what"; fi
    fi
fi

what="HBM for ZeRO-3 with full recomputation only: the plan takes them, the cheaper pairs do not fit"
if scenario "$what"; then
    small=(--config tiny --device h100 --hbm-scale 6e-5 --precision bf16)
    timeout -k 5 300 "$bin" plan "${small[@]}" --gpus 8 --batch 16 --tp 1 --pp 1 --mbs 1 >"$tmp/z.out" 2>&1
    row=$(awk '$1 == 1 {print $12, $13}' "$tmp/z.out")
    oom=""
    for zr in "3 selective" "2 full"; do
        set -- $zr
        timeout -k 5 60 "$bin" predict "${small[@]}" --dp 8 --batch 16 --accum 2 --zero $1 --recompute $2 2>&1 |
            grep -q "^OUT OF MEMORY" || oom="$oom zero $1 $2 fits;"
    done
    if [ "$row" != "3 full" ]; then flunk "$what" "the plan took '$row'"; cat "$tmp/z.out"
    elif [ -n "$oom" ]; then flunk "$what" "$oom"
    else pass "$what"; fi
fi

what="no mesh fits at --hbm-scale 1e-6: said so, exit 1, no row"
if scenario "$what"; then
    timeout -k 5 300 "$bin" plan --config tiny --device h100 --hbm-scale 1e-6 --gpus 2 --batch 4 --tp 1 \
        --pp 1 --mbs 1 >"$tmp/oom.out" 2>&1
    rc=$?
    if [ $rc = 1 ] && grep -q "no mesh fits in HBM" "$tmp/oom.out" && ! grep -qE "^ +1 " "$tmp/oom.out"; then pass "$what"
    else flunk "$what" "exit $rc:"; tail -4 "$tmp/oom.out"; fi
fi

refused() { # what message args...: plan exits 2 and names the fault
    local what=$1 msg=$2; shift 2
    scenario "$what" || return 0
    timeout -k 5 60 "$bin" plan "$@" >"$tmp/bad.out" 2>&1
    local rc=$?
    if [ $rc = 2 ] && grep -q -- "$msg" "$tmp/bad.out"; then pass "$what"
    else flunk "$what" "exit $rc, no '$msg':"; head -3 "$tmp/bad.out"; fi
}
refused "no --gpus refused" "--gpus N and --batch B are required" --config tiny --batch 8
refused "a bad --tp list refused by name" "--tp 2,x" --config tiny --gpus 8 --batch 8 --tp 2,x
refused "--dp refused: the plan sweeps it" "--dp: the plan sweeps the mesh" --config tiny --gpus 8 --batch 8 --dp 2
exit $fail
