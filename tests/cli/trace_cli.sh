#!/bin/bash
# train --trace: a Chrome trace (the format Perfetto and chrome://tracing read) of every rank:
# valid JSON, every event well-formed (complete "X" events with ts and dur >= 0, instant "i"
# events, "M" names), one process per rank with a virtual-time and a wall-time track, kernels,
# sends, receives and the collective calls on each, the kernels of a rank one after another in
# virtual time; serially too; a bad destination refused before any step.
# Each run is a scenario (tests/cli/scenario.sh): one result line, CASE reruns one alone.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
model="--vocab 256 --ctx 32 --layers 2 --heads 4 --channels 32 --batch 4 --seq 32 --steps 2 --quiet"
check() { # file ranks collectives...
    /usr/bin/python3 - "$@" <<'PY'
import json, sys
path, ranks, colls = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
d = json.load(open(path))
ev = d["traceEvents"]
bad = [e for e in ev if e.get("ph") not in ("X", "i", "M") or not isinstance(e.get("pid"), int)
       or (e["ph"] in ("X", "i") and (e.get("tid") not in (0, 1) or not e.get("ts", -1) >= 0))
       or (e["ph"] == "X" and not e.get("dur", -1) >= 0)]
assert not bad, f"malformed events, the first: {bad[0]}"
assert {e["pid"] for e in ev} == set(range(ranks)), f"pids {sorted({e['pid'] for e in ev})}, want 0..{ranks - 1}"
for r in range(ranks):
    names = {e["name"] for e in ev if e["pid"] == r and e["ph"] != "M"}
    # kernels named by their function (the model's, the optimizer's)
    want = {"matmul_forward", "layernorm_forward", "attention_forward_drop", "adamw_update"} | set(colls) | (
        {"send", "recv"} if ranks > 1 else set())
    assert want <= names, f"rank {r}: no {sorted(want - names)} events"
    kn = [e for e in ev if e["pid"] == r and e.get("cat") == "kernel"]
    assert all(e["name"] != "kernel" for e in kn), f"rank {r}: an unnamed kernel"
    ks = sorted((e["ts"], e["dur"]) for e in kn if e.get("tid") == 0)
    over = [i for i in range(1, len(ks)) if ks[i][0] < ks[i - 1][0] + ks[i - 1][1] - 1e-2]
    assert not over, f"rank {r}: kernel {over[0]} starts before the previous one ends in virtual time"
print(f"{len(ev)} events, {ranks} rank(s)")
PY
}
label="--dp 2 --ep 2: a trace of kernels, messages and collective calls per rank"
if scenario "$label"; then
    res=""
    out=$("$MPIEXEC" -n 2 "$bin" train $model --dp 2 --experts 4 --ep 2 --trace "$tmp/t.json" 2>&1)
    if [ $? = 0 ] && [[ "$out" == *"trace: $tmp/t.json"* ]] && res=$(check "$tmp/t.json" 2 mdc_allreduce mdc_alltoall mdc_alltoallv 2>&1); then
        pass "$label"; echo "  $res"
    else flunk "$label" "the 2-rank trace: ${res:-}"; echo "$out" | tail -2; fi
fi
label="serial: a trace of the kernels"
if scenario "$label"; then
    res=""
    out=$("$bin" train $model --trace "$tmp/s.json" 2>&1)
    if [ $? = 0 ] && res=$(check "$tmp/s.json" 1 2>&1); then pass "$label"; echo "  $res"
    else flunk "$label" "the serial trace: ${res:-}"; fi
fi
# --timeline without a pipeline: an SVG with a row per rank and the last step's kernels and receives
label="--timeline without a pipeline: an SVG row per rank with its kernels and receives"
if scenario "$label"; then
    out=$("$MPIEXEC" -n 4 "$bin" train $model --dp 2 --tp 2 --experts 4 --ep 2 --timeline "$tmp/t.svg" 2>&1)
    if [ $? = 0 ] && /usr/bin/python3 - "$tmp/t.svg" <<'PY'
import sys, xml.dom.minidom
d = xml.dom.minidom.parse(sys.argv[1])
texts = [t.firstChild.data for t in d.getElementsByTagName("text") if t.firstChild]
fills = [r.getAttribute("fill") for r in d.getElementsByTagName("rect")]
assert all(f"rank {r}" in texts for r in range(4)), "a row per rank"
assert fills.count("#4c72b0") > 4 * 10 and fills.count("#c44e52") > 4, f"kernels {fills.count('#4c72b0')}, receives {fills.count('#c44e52')}"
PY
    then pass "$label"
    else flunk "$label" "$(echo "$out" | tail -1)"; fi
fi
label="a directory as --trace refused before any step"
if scenario "$label"; then
    mkdir "$tmp/dir"
    out=$("$MPIEXEC" -n 2 "$bin" train $model --dp 2 --trace "$tmp/dir" 2>&1)
    if [ $? = 2 ] && [[ "$out" == *"--trace"* ]] && [[ "$out" != *"step "* ]]; then pass "$label"
    else flunk "$label" "--trace to a directory: $(echo "$out" | tail -1)"; fi
fi
exit $fail
