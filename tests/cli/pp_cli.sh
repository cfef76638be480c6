#!/bin/bash
# Pipeline parallelism: every schedule (interleaved too), p 2-4, m 1-8, uneven layouts, and pipelines composed
# with dp (ZeRO 0/1) and tp (+SP) save checkpoints byte-identical to serial under --exact and
# pass --check-serial by default; bad pipelines are refused before any message (exit 2, the
# option named); a rank failing mid-run stops every stage; minidc explain pipeline's bubble and
# held activation sets equal the formulas for every schedule.
# Each mesh and each check is a scenario (tests/cli/scenario.sh); the serial exact run, the
# reference of the exact ones, runs when one of them is selected.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
model="--vocab 384 --ctx 24 --layers 4 --heads 12 --channels 48 --batch 24 --steps 2 --seed 3 --quiet"
run() { # name ranks args...
    local name=$1 n=$2; shift 2
    timeout -k 5 200 "$MPIEXEC" -n "$n" "$bin" train $model "$@" >"$tmp/$name.out" 2>&1
    rc=$?
}
xspecs=("2 --pp 2 --microbatches 1" "2 --pp 2 --microbatches 4" "2 --pp 2 --microbatches 8 --schedule gpipe"
    "3 --pp 3 --microbatches 2 --schedule zb-h1" "3 --pp 3 --microbatches 6 --pp-layout 2,1,1"
    "4 --pp 4 --microbatches 8 --schedule zb-h1" "4 --pp 4 --microbatches 3 --schedule gpipe"
    "4 --pp 2 --dp 2 --microbatches 3 --zero 1" "4 --pp 2 --dp 2 --microbatches 2 --zero 2"
    "4 --pp 2 --dp 2 --microbatches 3 --zero 3 --schedule gpipe" "4 --pp 2 --tp 2 --sp --microbatches 4 --schedule zb-h1"
    "8 --pp 2 --tp 2 --dp 2 --microbatches 2" "2 --pp 2 --virtual-stages 2 --microbatches 4"
    "2 --pp 2 --schedule interleaved --microbatches 2"
    "4 --pp 2 --virtual-stages 2 --tp 2 --sp --microbatches 2"
    "4 --pp 2 --virtual-stages 2 --dp 2 --microbatches 2 --zero 3")
exact_label() { echo "exact, $*: byte-identical to serial"; }
need_serial=0
for spec in "${xspecs[@]}"; do
    set -- $spec; shift
    scenario "$(exact_label "$@")" && need_serial=1
done
if [ $need_serial = 1 ]; then
    timeout -k 5 100 "$MPIEXEC" -n 1 "$bin" train $model --exact-block 2 --save "$tmp/serial.st" >/dev/null 2>&1 ||
        { flunk "serial exact run (the reference of the exact scenarios)" "exit $?"; exit 1; }
fi
i=0
for spec in "${xspecs[@]}"; do
    set -- $spec; n=$1; shift; i=$((i + 1))
    label=$(exact_label "$@")
    scenario "$label" || continue
    run pp$i "$n" "$@" --exact-block 2 --save "$tmp/pp$i.st"
    if [ $rc = 0 ] && cmp -s "$tmp/serial.st" "$tmp/pp$i.st"; then pass "$label"
    else flunk "$label" "exit $rc or the checkpoint differs"; tail -3 "$tmp/pp$i.out"; fi
done
for spec in "2 --pp 2 --microbatches 4 --dropout 0.1" "4 --pp 2 --dp 2 --microbatches 2 --schedule zb-h1" \
    "4 --pp 2 --dp 2 --microbatches 3 --zero 3" "2 --pp 2 --virtual-stages 2 --microbatches 4 --dropout 0.1" \
    "8 --pp 2 --tp 2 --sp --dp 2 --microbatches 2 --check-replicas"; do
    set -- $spec; n=$1; shift; i=$((i + 1))
    label="default mode, $*: --check-serial, every report figure equal to its formula"
    scenario "$label" || continue
    run pp$i "$n" "$@" --check-serial
    if [ $rc = 0 ] && grep -q "check-serial: .*: ok" "$tmp/pp$i.out" && ! grep -q DIFFERS "$tmp/pp$i.out"; then pass "$label"
    else flunk "$label" "exit $rc"; tail -3 "$tmp/pp$i.out"; fi
done

expect_error() { # what pattern ranks args...
    local what=$1 pat=$2 n=$3; shift 3
    scenario "$what" || return 0
    run err "$n" "$@"
    if [ $rc = 2 ] && grep -q -- "$pat" "$tmp/err.out"; then pass "$what"; echo "  $(grep -m1 -- "$pat" "$tmp/err.out")"
    else flunk "$what" "exit $rc"; cat "$tmp/err.out"; fi
}
expect_error "more stages than layers" "--pp 5: more stages than the model's 4 layers" 5 --pp 5
expect_error "layout not summing to the layers" "--pp-layout: 2 stage(s) of 5 layers in all" 2 --pp 2 --pp-layout 2,3
expect_error "unknown schedule" "--schedule nope: unknown" 2 --pp 2 --schedule nope
expect_error "batch not split into the micro-batches" "is not divisible by --dp 1 x 5 micro-batches" 2 --pp 2 --microbatches 5
expect_error "interleaved, m not a multiple of p" "--microbatches 3 is not a multiple of --pp 2" 2 --pp 2 --virtual-stages 2 \
    --microbatches 3
expect_error "chunks on a schedule without them" "--virtual-stages 2: only --schedule interleaved" 2 --pp 2 \
    --virtual-stages 2 --schedule 1f1b --microbatches 2
expect_error "more virtual stages than layers" "more virtual stages than the model's 4 layers" 2 --pp 2 --virtual-stages 3 \
    --microbatches 2
expect_error "interleaved layout of p stages, not p v" "--pp-layout: 2 stage(s) of 4 layers in all, but --pp 2 x --virtual-stages" \
    2 --pp 2 --virtual-stages 2 --pp-layout 2,2 --microbatches 2

# a stage that fails mid-run stops the others (the transport's abort), every rank exits non-zero
label="a failing stage stops the pipeline"
if scenario "$label"; then
    timeout -k 5 120 "$MPIEXEC" -n 3 "$bin" train $model --pp 3 --microbatches 3 --steps 3 --fail-at 1:1 >"$tmp/f.out" 2>&1
    rc=$?
    if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "failing on purpose" "$tmp/f.out"; then pass "$label"
    else flunk "$label" "--fail-at 1:1 on --pp 3: exit $rc"; tail -5 "$tmp/f.out"; fi
fi

# the schedules' simulated bubble and held sets equal the formulas on every stage (units F 1, B 2
# or B 1 + W 1): GPipe and 1F1B (p-1)/(m+p-1), interleaved (p-1)/(vm+p-1), ZB-H1 from F, B, W;
# ZB-H1's makespan is the paper's 3m + p - 1 = 27 at p = 4, m = 8, below 1F1B's 3(m + p - 1) = 33
for spec in "gpipe -m 8" "1f1b -m 8" "interleaved -m 8 -v 2" "interleaved -m 4 -v 3" "zb-h1 -m 8" "zb-h1 -m 16"; do
    label="explain pipeline $spec: each stage's bubble and held sets equal the formulas"
    scenario "$label" || continue
    out=$("$bin" explain pipeline -p 4 --schedule $spec)
    got=$(echo "$out" | awk '/^  stage [0-9]+: bubble/ {k = 0; for (i = 1; i <= NF; i++) {if ($i == "=") v[++k] = $(i + 1) + 0;
        if ($i == "held") h = $(i + 1)}; n++; if ($4 + 0 != v[1] || h + 0 != v[2]) bad++} END {print n + 0, bad + 0}')
    if [ "$got" = "4 0" ]; then pass "$label"
    else flunk "$label" "stages, mismatches: $got"; echo "$out"; fi
done
label="zb-h1 makespan 27 units at p = 4, m = 8"
if scenario "$label"; then
    z=$("$bin" explain pipeline --schedule zb-h1 -p 4 -m 8 | grep -c "makespan 27 units")
    [ "$z" = 1 ] && pass "$label" || flunk "$label" "zb-h1 makespan"
fi

# --timeline: the last step's schedule as SVG, a box per action of every stage
label="--timeline: 12 action boxes (2 stages x 3 micro-batches x F, B)"
if scenario "$label"; then
    run tl 2 --pp 2 --microbatches 3 --timeline "$tmp/t.svg"
    if [ $rc = 0 ] && [ "$(grep -c '<title>[FB][0-9]' "$tmp/t.svg")" = 12 ] && grep -q '</svg>' "$tmp/t.svg"; then pass "$label"
    else flunk "$label" "--timeline (exit $rc)"; tail -3 "$tmp/tl.out"; fi
fi
label="--timeline, interleaved: 16 action boxes (2 stages x 2 chunks x 2 micro-batches x F, B)"
if scenario "$label"; then
    run tl 2 --pp 2 --virtual-stages 2 --microbatches 2 --timeline "$tmp/t.svg"
    if [ $rc = 0 ] && [ "$(grep -c '<title>[FB][0-9][ab]:' "$tmp/t.svg")" = 16 ]; then pass "$label"
    else flunk "$label" "--timeline interleaved (exit $rc)"; tail -3 "$tmp/tl.out"; fi
fi
label="--timeline without a pipeline: the ranks' kernels and messages"
if scenario "$label"; then
    run tl 1 --timeline "$tmp/t2.svg" # without a pipeline: the device's kernels and messages (tests/cli/trace_cli.sh)
    if [ $rc = 0 ] && grep -q "kernels and messages of every rank" "$tmp/tl.out" && grep -q '</svg>' "$tmp/t2.svg"; then pass "$label"
    else flunk "$label" "--timeline without a pipeline (exit $rc)"; tail -3 "$tmp/tl.out"; fi
fi

# the measured bubble against (p-1)/(m+p-1): on a device whose links cost nothing and stages that
# do the same work (a tiny vocabulary, so the head weighs little), the busiest stage's bubble in
# virtual time is the formula's within 0.01 (the lighter stage idles for the imbalance too)
python3 -c 'import json; print(json.dumps({"name": "free-links", "description": "links that cost nothing",
    "hbm_bytes": 8e10, "hbm_bw": 3.35e12, "hbm_bus_bits_per_stack": 1024, "hbm_stacks": 5, "hbm_gen": "HBM3",
    "flops_fp32": 6.7e13, "flops_bf16": 9.9e14, "sram_bytes": 5e7, "nvlink_bw": 1e16, "nvlink_latency": 0,
    "net_bw": 1e16, "net_latency": 0, "pcie_bw": 1e16, "launch_overhead": 0, "tdp_watts": 700}))' >"$tmp/free.json"
for spec in "--microbatches 4" "--microbatches 8" "--microbatches 4 --virtual-stages 2" "--microbatches 8 --schedule zb-h1"; do
    label="measured bubble, free links, $spec: the busiest stage's within 0.01 of the formula"
    scenario "$label" || continue
    m=$(echo "$spec" | tr -dc 0-9 | head -c 1)$(echo "$spec" | tr ' ' _)
    timeout -k 5 100 "$MPIEXEC" -n 2 "$bin" train --device-file "$tmp/free.json" --vocab 128 --ctx 32 --layers 8 --heads 4 \
        --channels 128 --batch 16 --steps 2 --pp 2 $spec --quiet >"$tmp/b$m.out" 2>&1
    rc=$?
    got=$(awk '/^pipeline:/ {on = 1} /^  bubble = / {on = 0} on && $1 ~ /^[0-9]+$/ && $NF == "ok" {if ($2 > best) {best = $2; b = $3; f = $4}}
               END {d = b - f; if (d < 0) d = -d; printf "%s %s %s", b, f, d <= 0.01 ? "ok" : "off"}' "$tmp/b$m.out")
    if [ $rc = 0 ] && [ "${got##* }" = ok ]; then pass "$label"; echo "  busiest stage $got"
    else flunk "$label" "'$got' (exit $rc)"; tail -8 "$tmp/b$m.out"; fi
done
exit $fail
