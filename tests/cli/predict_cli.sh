#!/bin/bash
# minidc predict runs train's code dry and folded: for meshes small enough to run for real, the
# predicted step equals the emulated run's virtual step (the last rank's end of step 2 minus its
# end of step 1, from train's --report) within 1%, at the peak model and at the achievable one;
# the parts it prints add up to the step; folding changes nothing (--no-fold gives the same
# step); --attention picks the kernel whose memory a prediction of Megatron before FlashAttention
# needs; what predict cannot do is refused by name.
. "$(dirname "$0")/scenario.sh"
[ "${1:-}" = long ] && TIER=long
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
py=$(command -v python3 || echo /usr/bin/python3)

step_of_train() { # ranks args...: the emulated run's step 2, seconds
    local n=$1; shift
    local s k=0
    for s in ${STEPS:-1 2}; do
        k=$((k + 1))
        timeout -k 5 120 "$MPIEXEC" -n "$n" "$bin" train "$@" --steps $s --quiet --report "$tmp/t$k.json" \
            >"$tmp/train$k.out" 2>&1 || return 1
    done
    "$py" -c '
import json, sys
end = [max(r["time_s"]["total"] for r in json.load(open(sys.argv[k]))["ranks"]) for k in (1, 2)]
print("%.12g" % (end[1] - end[0]))' "$tmp/t1.json" "$tmp/t2.json"
}

same() { # what ranks args...: predict's step within 1% of train's, its parts adding up to it ($PREDICT_ONLY: predict's own options)
    local what=$1 n=$2; shift 2
    scenario "$what" || return 0
    local t p
    if ! t=$(step_of_train "$n" "$@"); then flunk "$what" "train failed"; tail -3 "$tmp"/train*.out; return; fi
    if ! timeout -k 5 300 "$bin" predict "$@" ${PREDICT_ONLY:-} --json "$tmp/p.json" >"$tmp/p.out" 2>&1; then
        flunk "$what" "predict failed"; tail -3 "$tmp/p.out"; return
    fi
    if ! grep -q "^predicted step " "$tmp/p.out"; then flunk "$what" "no 'predicted step' line"; return; fi
    local why
    why=$("$py" -c '
import json, sys
t = float(sys.argv[1]); p = json.load(open(sys.argv[2]))
err = abs(p["step_s"] - t) / t
parts = sum(p["parts_s"].values())
if err > 0.01: print("predicted %.6g s, the emulated run %.6g s (%.2f%% apart)" % (p["step_s"], t, 100 * err))
elif abs(parts - p["step_s"]) > 0.02 * p["step_s"]: print("the parts add up to %.6g s of %.6g" % (parts, p["step_s"]))
' "$t" "$tmp/p.json")
    if [ -n "$why" ]; then flunk "$what" "$why"; return; fi
    pass "$what"
}

same "serial tiny at the peak model" 1 --config tiny --efficiency peak
same "tiny --tp 2 --sp --dp 2 --pp 2 (1f1b, 4 micro-batches): 2 processes for 8 ranks" 8 --config tiny --tp 2 --sp --dp 2 --pp 2 --microbatches 4 --efficiency peak
same "tiny --dp 4 --zero 1 at the achievable model" 4 --config tiny --dp 4 --zero 1 --efficiency achievable
same "llama-tiny --tp 2 --dp 2 bf16, selective recomputation" 4 --config llama-tiny --tp 2 --dp 2 --precision bf16 --recompute selective --efficiency achievable

# NCCL's all-reduce choice (predict's default; MINIDC_ALGO_ALLREDUCE=nccl for train): DDP in 64 KiB
# buckets over 8 nodes, where the tree costs less than the ring for most buckets. Unfolded, predict
# runs train's tree and equals it; folded, the tree's members doing different things, it replays the
# schedule on the links (collectives/replay.c): exact for one call, but each call starts every
# member at the representative's clock where a real run's members start at their own ends, so the
# folded step may exceed the unfolded one by a few network latencies (at most 2%, and said so)
ddp8="--config tiny --batch 16 --dp 8 --gpus-per-node 1 --bucket-mb 0.0625 --efficiency peak"
MINIDC_ALGO_ALLREDUCE=nccl PREDICT_ONLY=--no-fold same "tiny --dp 8 on 8 nodes, 64 KiB buckets, ring or tree as NCCL picks, unfolded" 8 $ddp8
if scenario "the tree chosen: NCCL's choice predicts less than the ring alone, folded within 2% of unfolded"; then
    for a in ring nccl; do
        for f in "" --no-fold; do
            MINIDC_ALGO_ALLREDUCE=$a timeout -k 5 120 "$bin" predict $ddp8 $f --json "$tmp/$a$f.json" >/dev/null 2>&1
        done
    done
    why=$("$py" -c '
import json, sys
s = {k: json.load(open(sys.argv[1] + "/" + k + ".json"))["step_s"] for k in ("ring", "nccl", "nccl--no-fold")}
if s["nccl"] > 0.99 * s["ring"]: print("nccl %.6g s, ring %.6g s: the tree was not chosen" % (s["nccl"], s["ring"]))
elif not 0 <= s["nccl"] - s["nccl--no-fold"] <= 0.02 * s["nccl--no-fold"]:
    print("folded %.6g s, unfolded %.6g s" % (s["nccl"], s["nccl--no-fold"]))
' "$tmp" 2>&1)
    MINIDC_ALGO_ALLREDUCE=nccl "$bin" predict $ddp8 >"$tmp/said" 2>&1
    grep -q "not exact: the tree's all-reduces over folded ranks were replayed" "$tmp/said" || why="${why:-the report does not say the folding is not exact}"
    [ -z "$why" ] && pass "the tree chosen: NCCL's choice predicts less than the ring alone, folded within 2% of unfolded" ||
        flunk "the tree chosen" "$why"
fi




refused() { # what pattern args...
    local what=$1 pat=$2; shift 2
    scenario "$what" || return 0
    timeout -k 5 60 "$bin" predict "$@" >"$tmp/r.out" 2>&1
    local rc=$?
    if [ $rc != 0 ] && grep -q -- "$pat" "$tmp/r.out"; then pass "$what"; else flunk "$what" "exit $rc: $(tail -1 "$tmp/r.out")"; fi
}
what="--attention tiled at 64 tokens keeps each row's log-sum-exp, not the probabilities: fewer activations"
if scenario "$what"; then
    m=$(timeout -k 5 60 "$bin" train --config tiny --steps 1 --quiet --attention materialized | grep -o "activations [0-9.]*")
    t=$(timeout -k 5 60 "$bin" train --config tiny --steps 1 --quiet --attention tiled | grep -o "activations [0-9.]*")
    if [ -n "$m" ] && [ -n "$t" ] && awk -v a="${m#activations }" -v b="${t#activations }" 'BEGIN { exit !(b < a) }'; then
        pass "$what"
    else flunk "$what" "'$m' and '$t'"; fi
fi
refused "--attention of no kernel is refused" "auto, materialized or tiled" --config tiny --attention flash
what="a device file's efficiencies: its achievable step is longer than its peak one"
if scenario "$what"; then
    cat >"$tmp/dev.json" <<'JSON'
{"name": "x", "description": "a file", "hbm_bytes": 8.6e10, "hbm_bw": 2.0e12, "hbm_bus_bits_per_stack": 1024,
 "hbm_stacks": 5, "hbm_gen": "HBM2e", "flops_fp32": 1.95e13, "flops_bf16": 3.12e14, "sram_bytes": 4e7,
 "nvlink_bw": 3e11, "nvlink_latency": 2e-6, "net_bw": 2.5e10, "net_latency": 5e-6, "pcie_bw": 3.2e10,
 "launch_overhead": 4e-6, "tdp_watts": 400, "gemm_eff": 0.5, "mem_eff": 0.9, "nvlink_eff": 0.8, "net_eff": 0.9}
JSON
    a=$(timeout -k 5 60 "$bin" predict --config tiny --device-file "$tmp/dev.json" | grep -o "^predicted step [0-9.e+-]*")
    p=$(timeout -k 5 60 "$bin" predict --config tiny --device-file "$tmp/dev.json" --efficiency peak | grep -o "^predicted step [0-9.e+-]*")
    if [ -n "$a" ] && [ -n "$p" ] && awk -v a="${a#predicted step }" -v p="${p#predicted step }" 'BEGIN { exit !(a > p) }'; then
        pass "$what"
    else flunk "$what" "'$a' and '$p'"; fi
    sed 's/, "net_eff": 0.9//' "$tmp/dev.json" >"$tmp/dev2.json"
fi
refused "a device file with some of the efficiencies is refused" "come together" --config tiny --device-file "$tmp/dev2.json"
# the zigzag layout balances the cp ranks: they fold onto one process per stage
same "qwen3-tiny --cp 2 --dp 2 zigzag ring (cp folded: one process for 4 ranks)" 4 --config qwen3-tiny --cp 2 --dp 2 --efficiency achievable
# a mixture of experts is predicted under balanced routing; train runs the same routing
# (--moe-routing balanced). Steps 2 to 3 of train: both runs print one MoE line (a reduction
# train charges, predict has no line) at their end
what="--moe-routing balanced: every expert the same tokens, exact --ep 2 --dp 2 serial's bits"
if scenario "$what"; then
    timeout -k 5 120 "$MPIEXEC" -n 2 "$bin" train --config mixtral-tiny --ep 2 --dp 2 --moe-routing balanced --steps 2 \
        --exact --check-serial --quiet >"$tmp/bal.out" 2>&1
    line=$(grep -m1 "moe: tokens/expert" "$tmp/bal.out")
    if ! grep -q "identical to serial bit for bit: ok" "$tmp/bal.out"; then flunk "$what" "not serial's bits"; tail -3 "$tmp/bal.out"
    elif ! echo "$line" | grep -q "(max/mean 1.000)" || ! echo "$line" | grep -q "experts by position"; then
        flunk "$what" "not balanced: $line"
    else pass "$what"; fi
fi
STEPS="2 3" same "mixtral-tiny --ep 2 --dp 2 (balanced routing)" 2 --config mixtral-tiny --ep 2 --dp 2 --moe-routing balanced --efficiency peak
STEPS="2 3" same "qwen2-moe-tiny --tp 2 --sp --ep 2 --dp 2 bf16, achievable" 4 --config qwen2-moe-tiny --tp 2 --sp --ep 2 --dp 2 --moe-routing balanced --precision bf16 --efficiency achievable
refused "--data is refused" "reads and writes no tensors" --config tiny --data /nonexistent
refused "--gpus that the mesh does not make" "--gpus 6 but" --config tiny --tp 2 --dp 2 --gpus 6
refused "--exact is refused" "exact" --config tiny --exact

what="--report FILE writes the prediction's JSON, as --json does"
if scenario "$what"; then
    timeout -k 5 60 "$bin" predict --config tiny --report "$tmp/rep.json" >"$tmp/rep.out" 2>&1
    want=$(sed -n 's/^predicted step \([^ ]*\) s.*/\1/p' "$tmp/rep.out")
    got=$("$py" -c 'import json, sys; print("%.6g" % json.load(open(sys.argv[1]))["step_s"])' "$tmp/rep.json" 2>&1)
    if [ -n "$want" ] && [ "$got" = "$want" ]; then pass "$what"; else flunk "$what" "printed '$want', the file '$got'"; fi
fi

what="--trace and --timeline of the predicted step: a process per stage, named by its mesh rank, within the step"
if scenario "$what"; then
    if ! timeout -k 5 120 "$bin" predict --config tiny --tp 2 --sp --dp 2 --pp 2 --microbatches 4 \
        --trace "$tmp/tr.json" --timeline "$tmp/tl.svg" >"$tmp/tr.out" 2>&1; then
        flunk "$what" "predict failed"; tail -3 "$tmp/tr.out"
    else
        why=$("$py" -c '
import json, re, sys
step = float(re.search(r"^predicted step (\S+) s", open(sys.argv[1]).read(), re.M).group(1))
ev = [e for e in json.load(open(sys.argv[2]))["traceEvents"] if e.get("ph") == "X" and e.get("tid") == 0]
pids = sorted({e["pid"] for e in ev})
span = (max(e["ts"] + e["dur"] for e in ev) - min(e["ts"] for e in ev)) * 1e-6
if pids != [0, 4]: print("processes %s, not mesh ranks 0 and 4 (stages 0 and 1)" % pids)
elif not 0.5 * step <= span <= 1.001 * step: print("events over %.6g s, the step %.6g s" % (span, step))
elif open(sys.argv[3]).read().count("<text") < 4: print("the timeline has no rows")
' "$tmp/tr.out" "$tmp/tr.json" "$tmp/tl.svg" 2>&1)
        if [ -n "$why" ]; then flunk "$what" "$why"; else pass "$what"; fi
    fi
fi

tier=long
same "tiny --dp 4 --zero 3, DDP's shards alike" 4 --config tiny --dp 4 --zero 3 --efficiency achievable
same "tiny --pp 2 interleaved (2 virtual stages) --dp 2, fp16" 4 --config tiny --layers 4 --pp 2 --schedule interleaved --virtual-stages 2 --microbatches 4 --dp 2 --precision fp16 --efficiency peak
same "qwen3-tiny --cp 2 --cp-layout contiguous (ring; cp ranks not folded)" 2 --config qwen3-tiny --cp 2 --cp-layout contiguous --efficiency achievable

what="--no-fold runs every rank and predicts the same step"
if scenario "$what"; then
    a=$(timeout -k 5 120 "$bin" predict --config tiny --tp 2 --dp 2 | grep "^predicted step")
    b=$(timeout -k 5 120 "$bin" predict --config tiny --tp 2 --dp 2 --no-fold | grep "^predicted step")
    if [ -n "$a" ] && [ "${a%%(*}" = "${b%%(*}" ]; then pass "$what"; else flunk "$what" "'$a' and '$b'"; fi
fi

what="a model of 22B parameters on 8 GPUs: an A100's memory and the step's parts"
if scenario "$what"; then
    timeout -k 5 300 "$bin" predict --vocab 51200 --ctx 2048 --layers 48 --heads 64 --channels 6144 --batch 4 --tp 8 \
        --precision fp16 --recompute full --device a100-80 >"$tmp/22b.out" 2>&1
    if grep -q "^predicted step " "$tmp/22b.out" && grep -q "tp communication exposed" "$tmp/22b.out" &&
        grep -q "^peak HBM per GPU" "$tmp/22b.out" && ! grep -q "OUT OF MEMORY" "$tmp/22b.out"; then
        pass "$what"
    else flunk "$what" "$(tail -2 "$tmp/22b.out")"; fi
fi

what="out of memory is predicted and named: 22B on one tp rank"
if scenario "$what"; then
    timeout -k 5 300 "$bin" predict --vocab 51200 --ctx 2048 --layers 48 --heads 64 --channels 6144 --batch 1 \
        --precision fp16 --device a100-80 >"$tmp/oom.out" 2>&1
    if grep -q "^OUT OF MEMORY: .* the largest category is optimizer" "$tmp/oom.out"; then pass "$what"
    else flunk "$what" "$(tail -2 "$tmp/oom.out")"; fi
fi

same "tiny --tp 2 --sp --pp 2 zb-h1 --dp 2 --zero 1" 8 --config tiny --layers 4 --tp 2 --sp --pp 2 --schedule zb-h1 --microbatches 4 --dp 2 --zero 1 --efficiency achievable
same "small --tp 4 --dp 2 bf16" 8 --config small --tp 4 --dp 2 --precision bf16 --batch 8 --efficiency achievable

exit $fail
