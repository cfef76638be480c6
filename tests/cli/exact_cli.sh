#!/bin/bash
# Exact mode: for one seed and global batch, serial, dp 2-4 with every ZeRO stage and
# accumulation, tp 2-4 with and without SP, and their products up to 8 ranks save checkpoints
# (parameters, AdamW moments) that are byte-identical (cmp), and print the same loss and norm
# bits at every step; a checkpoint resumed on another mesh continues with the same bits; a
# planted reordering inside one block breaks the identity; blocks that do not fit are refused.
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# H = 12 heads divide by 1-4, Vp = 384 by 3 x 32, T = 24 positions split by 2-4 into multiples of 2
model="--vocab 384 --ctx 24 --layers 2 --heads 12 --channels 48 --batch 12 --steps 3 --seed 5 --exact-block 2"
run() { # name ranks args...: trains, keeps the checkpoint and the step lines' loss and norm
    local name=$1 n=$2; shift 2
    timeout -k 5 200 "$MPIEXEC" -n "$n" "$bin" train $model --save "$tmp/$name.st" "$@" >"$tmp/$name.out" 2>&1
    rc=$?
    grep '^step' "$tmp/$name.out" | awk '{print $2, $4, $6}' >"$tmp/$name.loss"
}
same() { # what name: byte-identical to serial, same losses and norms
    local what=$1 name=$2
    if [ $rc != 0 ]; then echo "FAIL: $what: exit $rc"; tail -5 "$tmp/$name.out"; fail=1; return; fi
    if ! cmp -s "$tmp/serial.st" "$tmp/$name.st"; then echo "FAIL: $what: checkpoint differs from serial"; fail=1; return; fi
    if ! cmp -s "$tmp/serial.loss" "$tmp/$name.loss" || [ ! -s "$tmp/$name.loss" ]; then
        echo "FAIL: $what: losses differ"; paste "$tmp/serial.loss" "$tmp/$name.loss"; fail=1; return
    fi
    echo "ok: $what: byte-identical to serial (loss $(tail -1 "$tmp/$name.loss" | cut -d' ' -f2))"
}

run serial 1
[ $rc = 0 ] || { echo "FAIL: serial exact run: exit $rc"; cat "$tmp/serial.out"; exit 1; }
grep -q "exact mode: canonical blocks" "$tmp/serial.out" || { echo "FAIL: no block summary"; fail=1; }

run dp2 2 --dp 2; same "dp 2 DDP" dp2
run dp3z1 3 --dp 3 --zero 1 --accum 2; same "dp 3 ZeRO-1 accum 2" dp3z1
run dp4z2 4 --dp 4 --zero 2 --accum 3; same "dp 4 ZeRO-2 accum 3" dp4z2
run dp2z3 2 --dp 2 --zero 3 --accum 2 --prefetch; same "dp 2 ZeRO-3 accum 2 prefetch" dp2z3
run ser4 1 --accum 4; same "serial accum 4" ser4
for t in 2 3 4; do
    run tp$t $t --tp $t; same "tp $t" tp$t
    run tp${t}sp $t --tp $t --sp; same "tp $t + SP" tp${t}sp
done
run d2t2 4 --dp 2 --tp 2 --sp --zero 1; same "dp 2 x tp 2 + SP ZeRO-1" d2t2
run d2t2z3 4 --dp 2 --tp 2 --zero 3 --accum 2; same "dp 2 x tp 2 ZeRO-3 accum 2" d2t2z3
run d3t2 6 --dp 3 --tp 2 --sp --zero 2; same "dp 3 x tp 2 + SP ZeRO-2" d3t2
run d2t4 8 --dp 2 --tp 4 --sp --zero 2 --accum 2; same "dp 2 x tp 4 + SP ZeRO-2 accum 2" d2t4
run d4t2 8 --dp 4 --tp 2 --accum 3; same "dp 4 x tp 2 DDP accum 3" d4t2

# --check-serial in exact mode demands every bit
timeout -k 5 200 "$MPIEXEC" -n 2 "$bin" train $model --tp 2 --check-serial >"$tmp/chk.out" 2>&1
if [ $? = 0 ] && grep -q "identical to serial bit for bit: ok" "$tmp/chk.out"; then echo "ok: --check-serial exact"
else echo "FAIL: --check-serial exact"; tail -3 "$tmp/chk.out"; fail=1; fi

# resume on another mesh: 2 serial steps, then 1 on dp 2 x tp 2, equals 3 serial steps
timeout -k 5 200 "$MPIEXEC" -n 1 "$bin" train ${model/--steps 3/--steps 2} --save "$tmp/two.st" >/dev/null 2>&1
run resumed 4 --dp 2 --tp 2 --sp --steps 1 --resume "$tmp/two.st"
if [ $rc = 0 ] && cmp -s "$tmp/serial.st" "$tmp/resumed.st"; then echo "ok: resumed on dp 2 x tp 2: byte-identical"
else echo "FAIL: resume on another mesh (exit $rc)"; tail -3 "$tmp/resumed.out"; fail=1; fi

# a planted reordering inside one block must break the identity (blocks of 4: two rows commute)
export MINIDC_EXACT_PLANT=1
run pserial 1 --exact-block 4; run pdp2 2 --dp 2 --exact-block 4
unset MINIDC_EXACT_PLANT
if [ $rc = 0 ] && ! cmp -s "$tmp/pserial.st" "$tmp/pdp2.st"; then echo "ok: planted reordering breaks byte identity"
else echo "FAIL: the planted reordering went unnoticed (exit $rc)"; fail=1; fi

# blocks that do not fit are refused before any message, naming the option
timeout -k 5 60 "$MPIEXEC" -n 4 "$bin" train $model --tp 4 --sp --exact-block 4 >"$tmp/e1.out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q -- "--exact-block 4 does not divide the 6 positions" "$tmp/e1.out"; then
    echo "ok: block that does not divide a rank's positions: $(grep -m1 -- '--exact-block 4' "$tmp/e1.out")"
else echo "FAIL: --exact-block 4 with --tp 4 --sp: exit $rc"; cat "$tmp/e1.out"; fail=1; fi

# the default block (no --exact-block): at --seq 24 it is 3, which divides tp 2 + SP's 12
# positions and tp 4 + SP's 6; the header names it
d24="${model/--exact-block 2/--exact}"
timeout -k 5 200 "$MPIEXEC" -n 1 "$bin" train $d24 --save "$tmp/d1.st" >"$tmp/d1.out" 2>&1
grep -q "3 positions of one sequence (--exact-block 3)" "$tmp/d1.out" ||
    { echo "FAIL: the default block at --seq 24 is not 3:"; grep -A2 "exact mode" "$tmp/d1.out"; fail=1; }
for t in 2 4; do
    timeout -k 5 200 "$MPIEXEC" -n $t "$bin" train $d24 --tp $t --sp --save "$tmp/d$t.st" >"$tmp/d$t.out" 2>&1
    rc=$?
    if [ $rc = 0 ] && cmp -s "$tmp/d1.st" "$tmp/d$t.st"; then echo "ok: the default block on tp $t + SP: byte-identical"
    else echo "FAIL: --exact alone on tp $t + SP at --seq 24: exit $rc or the checkpoint differs"; tail -3 "$tmp/d$t.out"; fail=1; fi
done

# a vocabulary tp 8 cannot shard in blocks of 32 (100, padded to 128 serially) is padded to 256
# inside the run: the same bytes as serial
v8="--vocab 100 --ctx 16 --layers 1 --heads 8 --channels 32 --batch 8 --steps 2 --exact"
timeout -k 5 60 "$MPIEXEC" -n 1 "$bin" train $v8 --save "$tmp/v1.st" >"$tmp/v1.out" 2>&1
timeout -k 5 60 "$MPIEXEC" -n 8 "$bin" train $v8 --tp 8 --save "$tmp/v8.st" >"$tmp/v8.out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "V=100 (padded 256)" "$tmp/v8.out" && cmp -s "$tmp/v1.st" "$tmp/v8.st"; then
    echo "ok: --tp 8 on vocabulary 100: padded to 256, byte-identical to serial"
else echo "FAIL: --exact --tp 8 on vocabulary 100: exit $rc, or not padded to 256, or the bytes differ"; head -3 "$tmp/v8.out"; fail=1; fi

[ $fail = 0 ] && echo "exact_cli: all passed"
exit $fail
