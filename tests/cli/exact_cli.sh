#!/bin/bash
# Exact mode: for one seed and global batch, serial, dp 2-4 with every ZeRO stage and
# accumulation, tp 2-4 with and without SP, and their products up to 8 ranks save checkpoints
# (parameters, AdamW moments) that are byte-identical (cmp), and print the same loss and norm
# bits at every step; a checkpoint resumed on another mesh continues with the same bits; a
# planted reordering inside one block breaks the identity; blocks that do not fit are refused.
# Each mesh and each check is a scenario (tests/cli/scenario.sh).
. "$(dirname "$0")/scenario.sh"
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
mesh() { # what name ranks args...: the scenario "WHAT: byte-identical to serial", the run NAME
    local what="$1: byte-identical to serial" name=$2; shift 2
    scenario "$what" || return 0
    run "$name" "$@"
    same "$what" "$name"
}
same() { # what name: byte-identical to serial, same losses and norms
    local what=$1 name=$2
    if [ $rc != 0 ]; then flunk "$what" "exit $rc"; tail -5 "$tmp/$name.out"; return; fi
    if ! cmp -s "$tmp/serial.st" "$tmp/$name.st"; then flunk "$what" "checkpoint differs from serial"; return; fi
    if ! cmp -s "$tmp/serial.loss" "$tmp/$name.loss" || [ ! -s "$tmp/$name.loss" ]; then
        flunk "$what" "losses differ"; paste "$tmp/serial.loss" "$tmp/$name.loss"; return
    fi
    pass "$what"; echo "  loss $(tail -1 "$tmp/$name.loss" | cut -d' ' -f2)"
}

# the serial run every mesh is compared with (one rank, a few seconds): always made
run serial 1
[ $rc = 0 ] || { flunk "serial exact run (the reference of every mesh)" "exit $rc"; cat "$tmp/serial.out"; exit 1; }
label="serial: the header summarizes the canonical blocks"
if scenario "$label"; then
    grep -q "exact mode: canonical blocks" "$tmp/serial.out" && pass "$label" || flunk "$label" "no block summary"
fi

mesh "dp 2 DDP" dp2 2 --dp 2
mesh "dp 3 ZeRO-1 accum 2" dp3z1 3 --dp 3 --zero 1 --accum 2
mesh "dp 4 ZeRO-2 accum 3" dp4z2 4 --dp 4 --zero 2 --accum 3
mesh "dp 2 ZeRO-3 accum 2 prefetch" dp2z3 2 --dp 2 --zero 3 --accum 2 --prefetch
mesh "serial accum 4" ser4 1 --accum 4
for t in 2 3 4; do
    mesh "tp $t" tp$t $t --tp $t
    mesh "tp $t + SP" tp${t}sp $t --tp $t --sp
done
mesh "dp 2 x tp 2 + SP ZeRO-1" d2t2 4 --dp 2 --tp 2 --sp --zero 1
mesh "dp 2 x tp 2 ZeRO-3 accum 2" d2t2z3 4 --dp 2 --tp 2 --zero 3 --accum 2
mesh "dp 3 x tp 2 + SP ZeRO-2" d3t2 6 --dp 3 --tp 2 --sp --zero 2
mesh "dp 2 x tp 4 + SP ZeRO-2 accum 2" d2t4 8 --dp 2 --tp 4 --sp --zero 2 --accum 2
mesh "dp 4 x tp 2 DDP accum 3" d4t2 8 --dp 4 --tp 2 --accum 3

# --check-serial in exact mode demands every bit
label="--check-serial exact"
if scenario "$label"; then
    timeout -k 5 200 "$MPIEXEC" -n 2 "$bin" train $model --tp 2 --check-serial >"$tmp/chk.out" 2>&1
    if [ $? = 0 ] && grep -q "identical to serial bit for bit: ok" "$tmp/chk.out"; then pass "$label"
    else flunk "$label" "no 'identical to serial bit for bit: ok'"; tail -3 "$tmp/chk.out"; fi
fi

# resume on another mesh: 2 serial steps, then 1 on dp 2 x tp 2, equals 3 serial steps
label="resumed on dp 2 x tp 2: byte-identical"
if scenario "$label"; then
    timeout -k 5 200 "$MPIEXEC" -n 1 "$bin" train ${model/--steps 3/--steps 2} --save "$tmp/two.st" >/dev/null 2>&1
    run resumed 4 --dp 2 --tp 2 --sp --steps 1 --resume "$tmp/two.st"
    if [ $rc = 0 ] && cmp -s "$tmp/serial.st" "$tmp/resumed.st"; then pass "$label"
    else flunk "$label" "resume on another mesh (exit $rc)"; tail -3 "$tmp/resumed.out"; fi
fi

# a planted reordering inside one block must break the identity (blocks of 4: two rows commute)
label="planted reordering breaks byte identity"
if scenario "$label"; then
    export MINIDC_EXACT_PLANT=1
    run pserial 1 --exact-block 4; run pdp2 2 --dp 2 --exact-block 4
    unset MINIDC_EXACT_PLANT
    if [ $rc = 0 ] && ! cmp -s "$tmp/pserial.st" "$tmp/pdp2.st"; then pass "$label"
    else flunk "$label" "the planted reordering went unnoticed (exit $rc)"; fi
fi

# blocks that do not fit are refused before any message, naming the option
label="block that does not divide a rank's positions"
if scenario "$label"; then
    timeout -k 5 60 "$MPIEXEC" -n 4 "$bin" train $model --tp 4 --sp --exact-block 4 >"$tmp/e1.out" 2>&1
    rc=$?
    if [ $rc = 2 ] && grep -q -- "--exact-block 4 does not divide the 6 positions" "$tmp/e1.out"; then
        pass "$label"; echo "  $(grep -m1 -- '--exact-block 4' "$tmp/e1.out")"
    else flunk "$label" "--exact-block 4 with --tp 4 --sp: exit $rc"; cat "$tmp/e1.out"; fi
fi

# the default block (no --exact-block): at --seq 24 it is 3, which divides tp 2 + SP's 12
# positions and tp 4 + SP's 6; the header names it
d24="${model/--exact-block 2/--exact}"
named="the default block at --seq 24 is 3 (the header names it)"
tlabel() { echo "the default block on tp $1 + SP: byte-identical"; }
if scenario "$named" || scenario "$(tlabel 2)" || scenario "$(tlabel 4)"; then
    timeout -k 5 200 "$MPIEXEC" -n 1 "$bin" train $d24 --save "$tmp/d1.st" >"$tmp/d1.out" 2>&1
fi
if scenario "$named"; then
    grep -q "3 positions of one sequence (--exact-block 3)" "$tmp/d1.out" && pass "$named" ||
        { flunk "$named" "the default block at --seq 24 is not 3:"; grep -A2 "exact mode" "$tmp/d1.out"; }
fi
for t in 2 4; do
    label=$(tlabel $t)
    scenario "$label" || continue
    timeout -k 5 200 "$MPIEXEC" -n $t "$bin" train $d24 --tp $t --sp --save "$tmp/d$t.st" >"$tmp/d$t.out" 2>&1
    rc=$?
    if [ $rc = 0 ] && cmp -s "$tmp/d1.st" "$tmp/d$t.st"; then pass "$label"
    else flunk "$label" "--exact alone on tp $t + SP at --seq 24: exit $rc or the checkpoint differs"; tail -3 "$tmp/d$t.out"; fi
done

# a vocabulary tp 8 cannot shard in blocks of 32 (100, padded to 128 serially) is padded to 256
# inside the run: the same bytes as serial
label="--tp 8 on vocabulary 100: padded to 256, byte-identical to serial"
if scenario "$label"; then
    v8="--vocab 100 --ctx 16 --layers 1 --heads 8 --channels 32 --batch 8 --steps 2 --exact"
    timeout -k 5 60 "$MPIEXEC" -n 1 "$bin" train $v8 --save "$tmp/v1.st" >"$tmp/v1.out" 2>&1
    timeout -k 5 60 "$MPIEXEC" -n 8 "$bin" train $v8 --tp 8 --save "$tmp/v8.st" >"$tmp/v8.out" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -q "V=100 (padded 256)" "$tmp/v8.out" && cmp -s "$tmp/v1.st" "$tmp/v8.st"; then pass "$label"
    else flunk "$label" "exit $rc, or not padded to 256, or the bytes differ"; head -3 "$tmp/v8.out"; fi
fi
exit $fail
