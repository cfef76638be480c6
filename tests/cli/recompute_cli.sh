#!/bin/bash
# Activation recomputation (--recompute selective | full) changes memory and FLOPs, never a bit:
# each mesh's checkpoint after 2 steps in default mode is byte-identical to the run without it
# (with dropout, tp + SP, an interleaved pipeline, a zero-bubble one whose W runs apart, ring cp,
# ZeRO-3, and a MoE family on ep x tp with DeepSeek routing, the global aux loss and the aux-free
# bias: its MoE line equal but for the all-to-all's bytes), exact mode equals serial bit for bit on
# an 8-rank mesh, a dump holds the same tensors, the memory a layer keeps and the work region
# equal their formulas (and the allocator's peak shrinks), the recomputed forwards count in the
# hardware FLOPs but not the model's, and the tp and cp reports count the recomputed forward's
# messages in their formulas. A bad mode is refused by name.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
run() { # name ranks args...: the run's output in $tmp/name.out, its status in rc
    local name=$1 n=$2; shift 2
    timeout -k 5 120 "$MPIEXEC" -n "$n" "$bin" train --steps 2 "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}
same() { # what ranks args...: the checkpoints of none and the modes in $modes are the same bytes
    local what=$1 n=$2; shift 2
    scenario "$what" || return 0
    local m
    rm -f "$tmp"/*.st "$tmp"/*.out
    for m in none ${modes:-selective full}; do
        run "$m" "$n" "$@" --recompute "$m" --save "$tmp/$m.st"
        if [ $rc != 0 ]; then flunk "$what" "--recompute $m: exit $rc"; tail -3 "$tmp/$m.out"; return; fi
        if ! cmp -s "$tmp/none.st" "$tmp/$m.st"; then flunk "$what" "the checkpoints of none and $m differ"; return; fi
    done
    # the MoE line: the same routing, loads and losses (the all-to-all's bytes grow with the recomputation)
    if ! diff <(grep "moe:" "$tmp/none.out" | sed 's/  a2a .*//') <(grep "moe:" "$tmp/full.out" | sed 's/  a2a .*//') >/dev/null; then
        flunk "$what" "the MoE lines differ"; grep "moe:" "$tmp/none.out" "$tmp/full.out"; return
    fi
    if grep -q DIFFERS "$tmp"/*.out; then flunk "$what" "a figure differs"; grep DIFFERS "$tmp"/*.out; return; fi
    pass "$what"
}
same "serial with dropout: selective and full give none's checkpoint" 1 --config tiny --dropout 0.1
same "--tp 2 --sp with dropout" 2 --config tiny --tp 2 --sp --dropout 0.1
# the attention's probabilities are the same kernel's on every mesh (cp keeps none): full alone here
modes=full
same "--pp 2 interleaved (2 virtual stages, 4 micro-batches) --dp 2 with dropout" 4 --config tiny --layers 4 --pp 2 --schedule interleaved --virtual-stages 2 --microbatches 4 --dp 2 --dropout 0.1
same "--pp 2 zb-h1 (W apart from B: the recomputed tensors kept for W)" 2 --config llama-tiny --pp 2 --schedule zb-h1 --microbatches 4
same "qwen3-tiny --cp 2 (ring, zigzag; the recomputed forward's ring again)" 2 --config qwen3-tiny --cp 2
same "qwen2-moe-tiny --dp 2 --zero 3 (parameters gathered for the backward's recomputation)" 2 --config qwen2-moe-tiny --dp 2 --zero 3
same "deepseek-moe-tiny --ep 2 --dp 2 --tp 2 --sp, aux loss and aux-free bias: routing and losses recorded once" 4 --config deepseek-moe-tiny --ep 2 --dp 2 --tp 2 --sp --router-aux-loss 0.02 --moe-bias-rate 0.01 --moe-z-loss 0.001

what="exact, 8 ranks --tp 2 --sp --cp 2 --pp 2 --recompute full: serial's bits"
if scenario "$what"; then
    run exact 8 --config qwen3-tiny --tp 2 --sp --cp 2 --pp 2 --microbatches 2 --exact --recompute full --check-serial --quiet
    if [ $rc = 0 ] && grep -q "identical to serial bit for bit: ok" "$tmp/exact.out"; then pass "$what"
    else flunk "$what" "exit $rc"; grep -E "check-serial|rror" "$tmp/exact.out" | head -3; fi
fi

what="a dump with --recompute full holds none's tensors (the recomputed forward taps nothing)"
if scenario "$what"; then
    run dn 2 --config tiny --tp 2 --sp --dump-dir "$tmp/dn" --exact
    run df 2 --config tiny --tp 2 --sp --dump-dir "$tmp/df" --exact --recompute full
    "$bin" compare "$tmp/dn" "$tmp/df" --quiet --rtol 0 --atol 0 >"$tmp/cmp.out" 2>&1
    if [ $rc = 0 ] && grep -q "^EQUAL" "$tmp/cmp.out" && [ "$(ls "$tmp/df" | wc -l)" = 4 ]; then pass "$what"
    else flunk "$what" "exit $rc"; tail -3 "$tmp/cmp.out"; fi
fi

what="memory: a layer keeps its formula's bytes, the work region once, the activations' peak the derived figure, below none's"
if scenario "$what"; then
    run mn 1 --config tiny --layers 6
    run mf 1 --config tiny --layers 6 --recompute full
    run ms 1 --config tiny --layers 6 --recompute selective
    pn=$(sed -nE 's/^ +activations +peak +([0-9.]+) MiB/\1/p' "$tmp/mn.out" | head -1)
    pf=$(sed -nE 's/^ +activations +peak +([0-9.]+) MiB/\1/p' "$tmp/mf.out" | head -1)
    ps=$(sed -nE 's/^ +activations +peak +([0-9.]+) MiB/\1/p' "$tmp/ms.out" | head -1)
    # the memory line's derived activations (MiB, one decimal) against the allocator's peak
    dn=$(sed -nE 's/^memory: .* activations ([0-9.]+) = .*/\1/p' "$tmp/mn.out")
    df=$(sed -nE 's/^memory: .* activations ([0-9.]+) = .*/\1/p' "$tmp/mf.out")
    if [ $rc = 0 ] && awk -v a="$dn" -v b="$pn" -v c="$df" -v d="$pf" \
        'BEGIN { exit !(a != "" && c != "" && (a - b) ^ 2 < 0.0025 && (c - d) ^ 2 < 0.0025) }' &&
        [ "$(grep -c "allocator .* ok\|allocated .* ok" "$tmp/mf.out")" = 2 ] &&
        [ "$(grep -c "allocator .* ok\|allocated .* ok" "$tmp/ms.out")" = 2 ] && [ -n "$pn" ] &&
        awk -v n="$pn" -v f="$pf" -v s="$ps" 'BEGIN { exit !(f < s && s < n) }'; then
        pass "$what"; echo "  activations peak: none $pn MiB, selective $ps, full $pf"
    else flunk "$what" "peaks none $pn selective $ps full $pf, derived none $dn full $df"; grep -E "recompute|allocat" "$tmp/mf.out" "$tmp/ms.out"; fi
fi

what="FLOPs: the recomputed forwards in the hardware count, not in the model's"
if scenario "$what"; then
    run fl 1 --config tiny --recompute full
    ratio=$(sed -nE 's/.*recomputed or replicated work included: ([0-9.]+)x.*/\1/p' "$tmp/fl.out")
    if [ $rc = 0 ] && [ -n "$ratio" ] && awk -v r="$ratio" 'BEGIN { exit !(r > 1.1 && r < 1.5) }'; then pass "$what ($ratio x)"
    else flunk "$what" "hardware / model '$ratio'"; grep FLOPs "$tmp/fl.out"; fi
fi

what="--tp 2 --sp --recompute full: the recomputed forward's AG and RS in the tp formulas"
if scenario "$what"; then
    run tpr 2 --config tiny --tp 2 --sp --recompute full
    if [ $rc = 0 ] && grep -q "AllGather (b,s,h) .* k(8L+3) .* ok" "$tmp/tpr.out" &&
        grep -q "ReduceScatter (b,s,h) .* k(6L+2) .* ok" "$tmp/tpr.out" && ! grep -q DIFFERS "$tmp/tpr.out"; then pass "$what"
    else flunk "$what" "exit $rc"; grep -E "AllGather|ReduceScatter|DIFFERS" "$tmp/tpr.out"; fi
fi

what="--cp 2 --recompute full: the cp figures per layer equal their formulas, the recomputed ring's bytes apart"
if scenario "$what"; then
    run cpr 2 --config tiny --cp 2 --recompute full
    if [ $rc = 0 ] && [ "$(grep -cE '^  [01] .* ok$' "$tmp/cpr.out")" = 2 ] &&
        grep -q "forwards beyond one per layer and micro-batch (full recomputation.*: their messages [1-9][0-9]* bytes more" "$tmp/cpr.out"; then pass "$what"
    else flunk "$what" "exit $rc"; sed -n '/^context parallel/,/activations of/p' "$tmp/cpr.out"; fi
fi

what="--recompute sometimes: refused by name"
if scenario "$what"; then
    run bad 1 --config tiny --recompute sometimes
    if [ $rc = 2 ] || [ $rc = 1 ] && grep -q "\-\-recompute 'sometimes': none, selective or full" "$tmp/bad.out"; then pass "$what"
    else flunk "$what" "exit $rc"; cat "$tmp/bad.out"; fi
fi
exit $fail
