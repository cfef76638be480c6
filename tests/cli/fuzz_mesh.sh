#!/bin/bash
# Random configurations on random meshes: model sizes (a vocabulary that needs padding, heads,
# head sizes, layers, sequence lengths, experts and top-k, capacity, dropout) and a mesh of
# tp (+SP), cp (layout, algorithm), pp (schedule, micro-batches), dp (ZeRO stage) and ep drawn
# from what the schemes allow, each run twice: --check-serial in the default mode, and --exact
# saving serial's checkpoint byte for byte, its --dump-dir (every site, every step, reassembled
# from the mesh's pieces) equal to serial's at tolerance 0. Every case prints its seed; a failure
# prints the command that reruns it.
# Usage: tests/cli/fuzz_mesh.sh [CASES [MAX_RANKS [FIRST_SEED]]]   (make check: 5 cases, 8 ranks;
# make check-long: 40 cases, 32 ranks)
# Each case is a scenario (tests/cli/scenario.sh) labelled by its seed and draw: with the same
# FIRST_SEED, CASE='seed 123,' reruns that case alone.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
cases=${1:-5} max=${2:-8} seed0=${3:-$(( $(date +%s) % 100000 ))}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
pick() { # VAR CHOICES...: one of the choices into VAR (no subshell: bash reseeds RANDOM in one)
    local var=$1; shift
    local a=("$@")
    printf -v "$var" '%s' "${a[RANDOM % ${#a[@]}]}"
}

draw() { # sets model, mesh, n from the seed
    RANDOM=$1
    local H hs C V L T E k tp sp cp pp dp ep zero drop layout algo sched cap algos
    pick H 2 4; pick hs 8 12; pick L 2 3 4; pick T 16 32; V=$((100 + RANDOM % 500))
    C=$((H * hs))
    pick E 0 0 4 8; pick k 1 2
    for try in $(seq 20); do
        pick tp 1 2; pick cp 1 1 2; pick pp 1 2; pick dp 1 2 4; pick zero 0 1 2 3
        sp=0 ep=1
        [ $tp = 2 ] && pick sp 0 1
        [ $E != 0 ] && [ $((dp % 2)) = 0 ] && pick ep 1 2
        [ $ep -gt 1 ] && zero=0
        [ $((tp * cp * pp * dp)) -le "$max" ] && [ $pp -le $L ] && break
        tp=1 sp=0 cp=1 pp=1 dp=1 ep=1 zero=0
    done
    n=$((tp * cp * pp * dp))
    pick drop 0 0 0.1; pick layout zigzag contiguous; pick sched gpipe 1f1b zb-h1; pick cap 0 1.0 1.25
    algos="ring allgather"
    [ $((H / tp % cp)) = 0 ] && algos="$algos ulysses" # Ulysses spreads the local heads over cp
    pick algo $algos
    model="--vocab $V --ctx $T --seq $T --layers $L --heads $H --channels $C --steps 2 --seed $1 --quiet"
    model="$model --batch $((dp * 2)) --dropout $drop"
    mesh="--tp $tp --cp $cp --pp $pp --dp $dp"
    [ $sp = 1 ] && mesh="$mesh --sp"
    [ $cp = 2 ] && mesh="$mesh --cp-layout $layout --cp-algo $algo"
    [ $pp = 2 ] && mesh="$mesh --microbatches 2 --schedule $sched"
    [ $zero != 0 ] && mesh="$mesh --zero $zero"
    if [ $E != 0 ]; then
        model="$model --experts $E --topk $k --moe-z-loss 0.001"
        [ $sp = 0 ] && [ $cp = 1 ] && model="$model --capacity-factor $cap --moe-aux-loss 0.01"
        [ $ep = 2 ] && mesh="$mesh --ep 2"
    fi
}

for ((c = 0; c < cases; c++)); do
    seed=$((seed0 + c))
    draw $seed
    label="seed $seed, $n rank(s): $mesh | $model"
    scenario "$label" || continue
    cmd="$MPIEXEC -n $n $bin train $model $mesh"
    # the default mode: --check-serial's criterion (the first step's loss and gradients, every
    # parameter within AdamW's bound, the later losses within what that allows: docs/oracle.md);
    # the parameters' normwise difference after the updates is printed, not asserted: rounding
    # noise of a gradient near 0 moves an element by lr whatever the mesh. Exact mode below is
    # the strict check.
    timeout -k 5 300 $cmd --check-serial >"$tmp/d.out" 2>&1
    rc=$?
    if [ $rc != 0 ] || ! grep -q "^check-serial: .*: ok$" "$tmp/d.out" || grep -q "error" "$tmp/d.out"; then
        flunk "$label" "$cmd --check-serial (exit $rc)"; grep -E "check-serial|error|minidc:" "$tmp/d.out" | head -3
        continue
    fi
    # exact mode: serial's checkpoint byte for byte, and every site of the dump
    timeout -k 5 300 "$MPIEXEC" -n 1 "$bin" train $model --exact-block 4 --save "$tmp/s.st" --dump-dir "$tmp/sd" >"$tmp/s.out" 2>&1 &&
        timeout -k 5 300 $cmd --exact-block 4 --save "$tmp/m.st" --dump-dir "$tmp/md" >"$tmp/m.out" 2>&1
    rc=$?
    if [ $rc = 0 ] && cmp -s "$tmp/s.st" "$tmp/m.st"; then
        if "$bin" compare "$tmp/sd" "$tmp/md" --quiet --rtol 0 --atol 0 >"$tmp/c.out" 2>&1; then
            pass "$label"
        else
            flunk "$label" "exact: the dumps of -n 1 and $cmd --exact-block 4 --dump-dir differ:"
            tail -1 "$tmp/c.out"
        fi
    else
        flunk "$label" "exact: $cmd --exact-block 4 --save m.st, against -n 1 (exit $rc or the checkpoints differ)"
        tail -2 "$tmp/m.out"
    fi
done
echo "rerun any case: tests/cli/fuzz_mesh.sh 1 $max SEED"
exit $fail
