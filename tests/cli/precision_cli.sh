#!/bin/bash
# Mixed precision (--precision bf16 | fp16): exact mode gives serial's bits in bf16 and fp16 on
# meshes of tp + SP, cp, pp (zero-bubble with full recomputation), ZeRO-3 and experts; default mode
# stays within the dtype's limits of serial (--check-serial in units of the dtype's roundoff); a
# planted inf makes fp16's loss scaling skip the step on every rank and halve the scale, an inf at
# every step stops the run with the underflow error; the device charges the tensor cores' rate and
# the 16-bit bytes; the memory the allocator measures equals the formulas (the ZeRO table, the
# activations per layer); --grad-reduce bf16 halves the gradients' bytes (and is refused where it
# cannot apply); a bad dtype is refused by name.
. "$(dirname "$0")/scenario.sh"
[ "${1:-}" = long ] && TIER=long # make check-long: the long tier (more meshes of the same checks)
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
run() { # name ranks args...: the run's output in $tmp/name.out, its status in rc
    local name=$1 n=$2; shift 2
    timeout -k 5 150 "$MPIEXEC" -n "$n" "$bin" train "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}
exact() { # what ranks args...: exact mode on the mesh equals serial bit for bit
    local what=$1 n=$2; shift 2
    scenario "$what" || return 0
    run x "$n" --steps 2 --exact --check-serial --quiet "$@"
    if [ $rc = 0 ] && grep -q "identical to serial bit for bit: ok" "$tmp/x.out"; then
        pass "$what"
    else flunk "$what" "exit $rc"; grep -E "check-serial|rror" "$tmp/x.out" | head -3; fi
}
near() { # what ranks args...: default mode within the dtype's limits of serial
    local what=$1 n=$2; shift 2
    scenario "$what" || return 0
    run d "$n" --steps 3 --check-serial --quiet "$@"
    if [ $rc = 0 ] && grep -q "within the limits" "$tmp/d.out" && grep -q "check-serial: 3 step(s).*: ok" "$tmp/d.out"
    then pass "$what"
    else flunk "$what" "exit $rc"; grep -E "check-serial|rror" "$tmp/d.out" | head -3; fi
}
exact "bf16 exact, 8 ranks --tp 2 --sp --cp 2 --pp 2 (qwen3-tiny): serial's bits" 8 --config qwen3-tiny --tp 2 --sp --cp 2 --pp 2 --microbatches 2 --precision bf16
exact "fp16 exact, --dp 2 --zero 3 --tp 2 (qwen2-moe-tiny: routed and shared experts): serial's bits" 4 --config qwen2-moe-tiny --dp 2 --zero 3 --tp 2 --precision fp16
near "bf16 default, --tp 2 --sp --dp 2 with dropout: within bf16's limits of serial" 4 --config tiny --tp 2 --sp --dp 2 --dropout 0.1 --precision bf16

what="fp16: a planted inf skips step 2 on every rank, halves the scale, and the run goes on"
if scenario "$what"; then
    MINIDC_FAULT_INF_STEP=2 run skip 2 --steps 3 --dp 2 --precision fp16 --check-replicas
    if [ $rc = 0 ] && grep -q "^step     2  skipped: an inf or NaN gradient at loss scale 65536 .*now 32768" "$tmp/skip.out" &&
        grep -q "^loss scale 32768 after 3 steps, 1 skipped" "$tmp/skip.out" && ! grep -q "step     3  skipped" "$tmp/skip.out"
    then pass "$what"
    else flunk "$what" "exit $rc"; grep -E "^step|loss scale|rror" "$tmp/skip.out" | head -5; fi
fi

what="fp16: a skipped step leaves the weights as they were; a resumed run continues its scale and count"
if scenario "$what"; then
    MINIDC_FAULT_INF_STEP=2 run s2 1 --steps 2 --precision fp16 --save "$tmp/s2.st" --quiet
    r1=$rc
    run s1 1 --steps 1 --precision fp16 --save "$tmp/s1.st" --quiet
    r2=$rc
    run s4 1 --steps 2 --precision fp16 --resume "$tmp/s2.st" --quiet
    MINIDC_FAULT_INF_STEP=2 run n4 1 --steps 4 --precision fp16 --quiet
    # the tensors (parameters and AdamW's moments) are the same bytes (the header records the step);
    # the resumed steps 3 and 4 are the uninterrupted run's
    if [ $r1 = 0 ] && [ $r2 = 0 ] && [ $rc = 0 ] &&
        "$bin" compare "$tmp/s1.st" "$tmp/s2.st" --rtol 0 --atol 0 --quiet >"$tmp/c.out" 2>&1 &&
        grep -q "^EQUAL" "$tmp/c.out" && grep -q "^loss scale 32768 after 4 steps, 1 skipped" "$tmp/s4.out" &&
        diff <(grep -E "^step +4 " "$tmp/s4.out" | sed -E 's/ +[0-9.]+ ms.*//') \
            <(grep -E "^step +4 " "$tmp/n4.out" | sed -E 's/ +[0-9.]+ ms.*//') >/dev/null
    then pass "$what"
    else flunk "$what" "exit $r1 $r2 $rc"; tail -2 "$tmp/c.out"; grep -E "^step +4|loss scale" "$tmp/s4.out" "$tmp/n4.out"; fi
fi

what="fp16: an inf at every step halves the scale below 1: every rank stops with the underflow error"
if scenario "$what"; then
    MINIDC_FAULT_INF_STEP=1+ run under 2 --steps 30 --dp 2 --precision fp16 --quiet
    if [ $rc != 0 ] && grep -q "step 17: fp16 loss scale underflow" "$tmp/under.out"; then pass "$what"
    else flunk "$what" "exit $rc"; grep -E "rror|underflow" "$tmp/under.out" | head -3; fi
fi

what="the device: bf16's products at the tensor cores' rate, its bytes 16-bit: less compute and HBM time, MFU of 989 TFLOP/s"
if scenario "$what"; then
    run f32 1 --config small --steps 2 --batch 4 --seq 128 --recompute none --quiet
    run b16 1 --config small --steps 2 --batch 4 --seq 128 --recompute none --precision bf16 --quiet
    fig() { # the whole run's virtual ms, flop-bound ms, HBM bytes
        sed -nE 's/^  virtual time +([0-9.]+) ms .*/\1/p; s/^    compute +([0-9.]+) (u?s|ms) .*/\1 \2/p; s/^    HBM +[0-9.e+-]+ += ([0-9.e+]+) B .*/\1/p' "$1" |
            awk '/ us$/ { printf "%g ", $1 / 1000; next } / s$/ { printf "%g ", $1 * 1000; next } { printf "%s ", $1 }'
    }
    read -r v32 c32 h32 <<<"$(fig "$tmp/f32.out")"
    read -r v16 c16 h16 <<<"$(fig "$tmp/b16.out")"
    # tensor cores: 989 / 67 = 14.8x the products' rate (they turn memory-bound); bytes: 16-bit tensors,
    # fp32 statistics and optimizer
    if [ $rc = 0 ] &&
        awk -v v32="$v32" -v v16="$v16" -v c32="$c32" -v c16="$c16" -v h32="$h32" -v h16="$h16" \
            'BEGIN { exit !(v32 > 0 && v16 < v32 && c16 < c32 / 5 && h16 / h32 > 0.45 && h16 / h32 < 0.7) }' &&
        grep -q "MFU .* of 1 x 989 TFLOP/s bf16/fp16" "$tmp/b16.out" && grep -q "of 1 x 67 TFLOP/s fp32" "$tmp/f32.out"
    then pass "$what"
    else flunk "$what" "fp32: virtual $v32 ms, compute $c32 ms, HBM $h32 B; bf16: $v16, $c16, $h16"; fi
fi

what="memory: the ZeRO paper's mixed-precision table (bf16 gradients) and Megatron's (fp32) equal the allocator, stages 0-3"
if scenario "$what"; then
    ok=1
    paper=("16 Psi" "4 Psi + 12 Psi/N" "2 Psi + 14 Psi/N" "16 Psi/N")
    fp32g=("18 Psi" "6 Psi + 12 Psi/N" "2 Psi + 16 Psi/N" "18 Psi/N")
    for z in 0 1 2 3; do
        for g in bf16 fp32; do
            run z$z$g 2 --steps 1 --dp 2 --zero $z --precision bf16 --grad-reduce $g
            f=$tmp/z$z$g.out
            if [ $g = bf16 ]; then want=${paper[$z]}; else want=${fp32g[$z]}; fi
            # the total equals the allocator; the ZeRO paper's figure (bf16 gradients) or Megatron's
            # (fp32, stages 0 and 1) is the table's formula
            if [ $rc != 0 ] || grep -q DIFFERS "$f" || ! grep "^  total  " "$f" | grep -F "$want " | grep -q " ok (" ||
                { [ $g = bf16 ] && ! grep -q "ZeRO paper's Table 1 .* bytes, this table's formula" "$f"; } ||
                { [ $g = fp32 ] && [ $z -le 1 ] && ! grep -q "Megatron-LM's .* bytes, this table's formula" "$f"; }; then
                ok=0; flunk "$what" "--zero $z --grad-reduce $g: exit $rc"; grep -E "total|DIFFERS|paper" "$f" | head -3
            fi
        done
    done
    [ $ok = 1 ] && pass "$what"
fi

what="memory: a layer's activations in bf16 (fp32 statistics) equal the formula and the allocator, half of fp32's"
if scenario "$what"; then
    for p in fp32 bf16; do run a$p 1 --steps 1 --recompute none --precision $p; done
    k32=$(sed -nE 's/^recompute none: a layer keeps .* = ([0-9]+) bytes.*/\1/p' "$tmp/afp32.out")
    k16=$(sed -nE 's/^recompute none: a layer keeps .* = ([0-9]+) bytes.*/\1/p' "$tmp/abf16.out")
    if [ $rc = 0 ] && grep -q "minidc's bf16 with fp32 statistics.*allocator [0-9]* ok" "$tmp/abf16.out" &&
        awk -v a="$k32" -v b="$k16" 'BEGIN { exit !(a != "" && b > a / 2 && b < 0.51 * a) }'; then pass "$what"
    else flunk "$what" "fp32 $k32 bytes, bf16 $k16"; grep "recompute none" "$tmp/abf16.out"; fi
fi

what="bf16 tp 2 (+ SP): f and g move 16-bit activations, half fp32's bytes, each equal to its formula"
if scenario "$what"; then
    ok=1
    for sp in "" --sp; do
        run t16 2 --steps 1 --tp 2 $sp --precision bf16 --accum 2
        run t32 2 --steps 1 --tp 2 $sp --accum 2
        sum() { sed -nE 's/^  (AllReduce \(b,s,h\)|AllGather \(b,s,h\)|ReduceScatter \(b,s,h\)) +[0-9]+ +[0-9]+ +([0-9]+) .*/\2/p' "$1" |
            awk '{ s += $1 } END { print s + 0 }'; }
        a=$(sum "$tmp/t16.out") b=$(sum "$tmp/t32.out")
        if [ $rc != 0 ] || grep -q DIFFERS "$tmp/t16.out" || ! grep -q "beta = 2 (the 16-bit activations" "$tmp/t16.out" ||
            [ "$a" = 0 ] || [ "$((2 * a))" != "$b" ]; then
            ok=0; flunk "$what" "tp 2 $sp: bf16 $a bytes, fp32 $b"; grep DIFFERS "$tmp/t16.out" | head -3
        fi
    done
    [ $ok = 1 ] && pass "$what"
fi

what="bf16 exact, --dp 2 --zero 1 and --zero 3 (the fp32 master in shards, 16-bit gathers): serial's bits, every figure its formula's"
if scenario "$what"; then
    ok=1
    for z in 1 3; do
        run xz$z 2 --steps 3 --dp 2 --zero $z --precision bf16 --exact --check-serial --check-replicas --quiet
        if [ $rc != 0 ] || grep -q DIFFERS "$tmp/xz$z.out" || ! grep -q "identical to serial bit for bit: ok" "$tmp/xz$z.out" ||
            ! grep -q "^bytes sent per rank per step: .* ok (the 16-bit parameters' gathers" "$tmp/xz$z.out"; then
            ok=0; flunk "$what" "--zero $z: exit $rc"; grep -E "check-serial|DIFFERS|rror" "$tmp/xz$z.out" | head -3
        fi
    done
    [ $ok = 1 ] && pass "$what"
fi

what="bf16 --ep 2: the dispatch and combine rows move 16-bit (beta 2), the bytes their rows' count gives"
if scenario "$what"; then
    run e16 2 --steps 2 --config qwen3-moe-tiny --dp 2 --ep 2 --precision bf16 --quiet
    line=$(grep "moe:" "$tmp/e16.out" | tail -1)
    a2a=$(sed -nE 's/.* a2a ([0-9]+) B\/rank \(rows ([0-9]+) \+ counts; 4 T k h beta \(e-1\)\/e = ([0-9]+), beta 2 \(16-bit rows\);.*/\1 \2 \3/p' <<<"$line")
    read -r bytes rows form <<<"$a2a"
    # the counts: 4 moves x 2 blocks x E int32 = 64 bytes here at most; the formula at beta 2
    if [ $rc = 0 ] && [ -n "$bytes" ] && [ $((bytes - rows)) -ge 0 ] && [ $((bytes - rows)) -le 64 ] &&
        [ "$form" = 786432 ]; then pass "$what"
    else flunk "$what" "exit $rc: $a2a"; echo "$line" | head -c 400; echo; fi
fi

what="bf16 --cp 2 ring and all-gather: the key blocks move 16-bit, the bytes equal the formula, below fp32's"
if scenario "$what"; then
    ok=1
    for algo in ring allgather; do
        for p in bf16 fp32; do
            run c$p 2 --steps 1 --config qwen3-tiny --cp 2 --cp-algo $algo --precision $p --quiet
            eval "b_$p=\$(sed -nE 's/^  0 +[0-9.]+ +[0-9.]+ +([0-9]+) +([0-9]+) ok$/\1/p' \"\$tmp/c\$p.out\")"
        done
        # ring: (c-1) K twice at 2 bytes + c K of dK, dV at 4 (fp32: all at 4); all-gather: 2 (c-1) K at 2 + (c-1) K at 4
        if [ $rc != 0 ] || [ -z "$b_bf16" ] || [ -z "$b_fp32" ] || grep -q DIFFERS "$tmp/cbf16.out" ||
            { [ $algo = ring ] && [ $((4 * b_bf16)) != $((3 * b_fp32)) ]; } ||
            { [ $algo = allgather ] && [ $((3 * b_bf16)) != $((2 * b_fp32)) ]; }; then
            ok=0; flunk "$what" "$algo: bf16 $b_bf16 bytes, fp32 $b_fp32"
        fi
    done
    [ $ok = 1 ] && pass "$what"
fi

what="bf16 --pp 2: the boundary tensors move 16-bit, half fp32's bytes, each stage's equal to its formula"
if scenario "$what"; then
    run p16 2 --steps 1 --pp 2 --microbatches 4 --precision bf16
    run p32 2 --steps 1 --pp 2 --microbatches 4
    b16=$(sed -nE 's/^  0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+ +[0-9]+ +([0-9]+) +([0-9]+) ok$/\1/p' "$tmp/p16.out")
    b32=$(sed -nE 's/^  0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+ +[0-9]+ +([0-9]+) +([0-9]+) ok$/\1/p' "$tmp/p32.out")
    if [ $rc = 0 ] && [ -n "$b16" ] && [ "$((2 * b16))" = "$b32" ] && ! grep -q DIFFERS "$tmp/p16.out" &&
        grep -q "one boundary tensor .* (16-bit: 2 bytes an element)" "$tmp/p16.out"; then pass "$what"
    else flunk "$what" "stage 0: bf16 $b16 bytes, fp32 $b32"; grep -E "DIFFERS" "$tmp/p16.out" | head -3; fi
fi

what="--grad-reduce bf16: the gradients' bytes halve (the bytes line equals its formula), serial within bf16's limits"
if scenario "$what"; then
    ok=1
    for z in 0 3; do
        run g$z 2 --steps 2 --dp 2 --zero $z --precision bf16 --grad-reduce bf16 --check-serial --quiet
        if [ $rc != 0 ] || ! grep -q "^bytes sent per rank per step: formula .* ok (the .*bf16 gradients" "$tmp/g$z.out" ||
            ! grep -q "within the limits" "$tmp/g$z.out" || grep -q DIFFERS "$tmp/g$z.out"; then
            ok=0; flunk "$what" "--zero $z: exit $rc"; grep -E "bytes sent per rank|check-serial|rror" "$tmp/g$z.out" | head -3
        fi
    done
    run g32 2 --steps 2 --dp 2 --precision bf16 --quiet # fp32 gradients
    b16=$(sed -nE 's/^bytes sent per rank per step: .* measured ([0-9]+) ok.*/\1/p' "$tmp/g0.out")
    b32=$(sed -nE 's/^bytes sent per rank per step: .* measured ([0-9]+) ok.*/\1/p' "$tmp/g32.out")
    if [ $ok = 1 ] && [ -n "$b16" ] && [ "$((2 * b16))" = "$b32" ]; then pass "$what"
    elif [ $ok = 1 ]; then flunk "$what" "DDP bytes: bf16 $b16, fp32 $b32"; fi
fi

what="--grad-reduce bf16 is refused with --exact, with --ep and without --precision, --grad-reduce fp16 by name"
if scenario "$what"; then
    run gn 2 --steps 1 --dp 2 --grad-reduce bf16
    r0=$rc
    run ge 2 --steps 1 --dp 2 --exact --precision bf16 --grad-reduce bf16
    r1=$rc
    run gp 2 --steps 1 --dp 2 --ep 2 --experts 4 --precision bf16 --grad-reduce bf16
    r2=$rc
    run gf 1 --steps 1 --grad-reduce fp16
    if [ $r0 != 0 ] && grep -q "grad-reduce bf16 needs --precision bf16 or fp16" "$tmp/gn.out" &&
        [ $r1 != 0 ] && grep -q "grad-reduce bf16 with --exact: exact mode sums the gradients exactly" "$tmp/ge.out" &&
        [ $r2 != 0 ] && grep -q "grad-reduce bf16 with --ep 2" "$tmp/gp.out" &&
        [ $rc != 0 ] && grep -q "\-\-grad-reduce 'fp16': fp32 or bf16" "$tmp/gf.out"; then pass "$what"
    else flunk "$what" "exit $r1 $r2 $rc"; tail -1 "$tmp/ge.out" "$tmp/gp.out" "$tmp/gf.out"; fi
fi

what="--precision fp8 is refused by name"
if scenario "$what"; then
    run bad 1 --steps 1 --precision fp8
    if [ $rc != 0 ] && grep -q "\-\-precision 'fp8': fp32, bf16 or fp16" "$tmp/bad.out"; then pass "$what"
    else flunk "$what" "exit $rc"; tail -2 "$tmp/bad.out"; fi
fi

tier=long
exact "bf16 exact, --pp 2 zb-h1 --dp 2 --zero 1 --recompute full: serial's bits" 4 --config tiny --pp 2 --dp 2 --zero 1 --schedule zb-h1 --microbatches 4 --recompute full --precision bf16
near "fp16 default, --tp 2 --sp --pp 2 (llama-tiny): within fp16's limits of serial" 4 --config llama-tiny --tp 2 --sp --pp 2 --microbatches 2 --precision fp16
near "bf16 default, --cp 2 ring (qwen3-tiny): within bf16's limits of serial" 2 --config qwen3-tiny --cp 2 --precision bf16
exact "bf16 exact, deepseek-moe-tiny --ep 2 --dp 4 --tp 2 --sp --etp 2: serial's bits" 8 --config deepseek-moe-tiny --ep 2 --dp 4 --tp 2 --sp --etp 2 --precision bf16
exact "fp16 exact, qwen3-tiny --cp 2 ulysses: serial's bits" 2 --config qwen3-tiny --cp 2 --cp-algo ulysses --precision fp16
near "bf16 default, qwen3-moe-tiny --ep 2 --dp 2 --tp 2 --sp: within bf16's limits" 4 --config qwen3-moe-tiny --ep 2 --dp 2 --tp 2 --sp --precision bf16
near "bf16 default, --dp 2 --zero 2: within bf16's limits" 2 --config tiny --dp 2 --zero 2 --precision bf16
near "bf16 default, --pp 2 --dp 2 --zero 3 --grad-reduce bf16 (a stage's deferred reductions): within bf16's limits" 4 --config tiny --pp 2 --dp 2 --zero 3 --microbatches 2 --precision bf16 --grad-reduce bf16
exit $fail
