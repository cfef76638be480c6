#!/bin/bash
# Planted faults (include/minidc/fault.h, the course's lab 9): each kind, planted at a block and a
# rank, is found by minidc compare against a serial dump at the tensor lab 9's grader expects, and
# the first wrong element (or the odd copy) leads back to the rank it was planted on: the reduction
# a rank drops (its copy is the odd one of three), the message it corrupts (the ring chunk it sends
# first: chunk c leaves rank c + 1), the dropout key it gets wrong (its batch rows), the key/value
# block it leaves out (its zigzag positions). Without a plant the same runs compare equal;
# malformed settings are named and plant nothing.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
M="--vocab 300 --ctx 24 --layers 2 --heads 12 --channels 48 --seq 24 --batch 6 --steps 1 --quiet"
n=$((6 * 24 * 48)) # elements of an activation (B, T, C)
serial() { # dir [args]: the serial dump, once
    [ -d "$tmp/$1" ] || timeout -k 5 60 "$bin" train $M "${@:2}" --dump-dir "$tmp/$1" >/dev/null 2>&1
}
planted() { # plant ranks mesh... -> $tmp/cmp (minidc compare's output against the serial dump)
    local plant=$1 np=$2 ref=serial
    shift 2
    case " $* " in *" --dropout "*) ref=serial_drop ;; esac
    rm -rf "$tmp/d"
    MINIDC_FAULT_PLANT=$plant timeout -k 5 120 "$MPIEXEC" -n "$np" "$bin" train $M "$@" --dump-dir "$tmp/d" >"$tmp/run" 2>&1
    "$bin" compare "$tmp/$ref" "$tmp/d" >"$tmp/cmp" 2>&1
}
first_element() { sed -n "s/^DIFFERENT: first differing tensor step1.$1: element \([0-9]*\) .*/\1/p" "$tmp/cmp"; }
serial serial
serial serial_drop --dropout 0.1

for spec in reduction:1:1 reduction:2:0 reduction:0:1; do
    scenario "$spec" || continue
    IFS=: read -r _ r b <<<"$spec"
    planted "$spec" 3 --tp 3
    line=$(grep "dump: step1.h.$b.attn.c_proj: the copies of element" "$tmp/cmp")
    # the copies "v in FILE, ...": the rank whose value no other copy has
    odd=$(echo "$line" | grep -o '[-0-9.e]* in [^ ,]*rank[0-9]' | awk '{v[NR]=$1; r[NR]=substr($3, length($3))} END {
        for (i = 1; i <= NR; i++) { c = 0; for (j = 1; j <= NR; j++) c += v[i] == v[j]; if (c == 1) print r[i] } }')
    if [ -z "$line" ]; then flunk "$spec" "compare does not name h.$b.attn.c_proj's copies:"; tail -n 2 "$tmp/cmp"
    elif [ "$odd" != "$r" ]; then flunk "$spec" "the odd copy is rank '$odd', the plant's rank $r: $line"
    else pass "$spec: h.$b.attn.c_proj's copies differ, rank $r's the odd one"; fi
done

for spec in message:0:1 message:2:0; do
    scenario "$spec" || continue
    IFS=: read -r _ r b <<<"$spec"
    planted "$spec" 3 --tp 3
    e=$(first_element "h.$b.attn.c_proj")
    if [ -z "$e" ]; then flunk "$spec" "compare does not find h.$b.attn.c_proj first:"; tail -n 1 "$tmp/cmp"; continue; fi
    sender=$(((e / (n / 3) + 1) % 3)) # ring chunk c is sent first by rank c + 1
    if [ "$sender" = "$r" ]; then pass "$spec: h.$b.attn.c_proj element $e, in the chunk rank $r sends"
    else flunk "$spec" "element $e is in the chunk rank $sender sends, the plant's rank is $r"; fi
done

for spec in dropout:2:1 dropout:1:0; do
    scenario "$spec" || continue
    IFS=: read -r _ r b <<<"$spec"
    planted "$spec" 3 --dp 3 --dropout 0.1
    e=$(first_element "h.$b.attn.y")
    row=$((${e:-0} / (24 * 48)))
    if [ -z "$e" ]; then flunk "$spec" "compare does not find h.$b.attn.y first:"; tail -n 1 "$tmp/cmp"
    elif [ $((row / 2)) = "$r" ]; then pass "$spec: h.$b.attn.y element $e, batch row $row of dp rank $r"
    else flunk "$spec" "element $e is in row $row, dp rank $((row / 2)); the plant's rank is $r"; fi
done

for spec in kv:1:1 kv:0:0; do
    scenario "$spec" || continue
    IFS=: read -r _ r b <<<"$spec"
    planted "$spec" 2 --cp 2
    e=$(first_element "h.$b.attn.y")
    chunk=$(((${e:-0} / 48 % 24) / 6)) # zigzag over 2 ranks: rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2
    owner=$(((chunk == 1 || chunk == 2) ? 1 : 0))
    if [ -z "$e" ]; then flunk "$spec" "compare does not find h.$b.attn.y first:"; tail -n 1 "$tmp/cmp"
    elif [ "$owner" = "$r" ]; then pass "$spec: h.$b.attn.y element $e, in a chunk of cp rank $r"
    else flunk "$spec" "element $e is in chunk $chunk of cp rank $owner; the plant's rank is $r"; fi
done

if scenario none; then
    planted "" 3 --tp 3
    grep -q "^EQUAL" "$tmp/cmp" && pass "none: a tp 3 run without a plant compares equal" ||
        { flunk none "without a plant:"; tail -n 2 "$tmp/cmp"; }
fi

if scenario malformed; then
    MINIDC_FAULT_PLANT=reduce:1:0 "$bin" train $M >/dev/null 2>"$tmp/err"
    MINIDC_PUZZLE=9 "$bin" train $M >/dev/null 2>>"$tmp/err"
    if grep -q "MINIDC_FAULT_PLANT='reduce:1:0' is not KIND:RANK:BLOCK" "$tmp/err" && grep -q "MINIDC_PUZZLE='9' is not a puzzle" "$tmp/err"; then
        pass "malformed: both settings named, nothing planted"
    else flunk malformed "$(cat "$tmp/err")"; fi
fi
exit $fail
