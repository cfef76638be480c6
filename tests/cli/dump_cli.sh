#!/bin/bash
# train --dump-dir: the tensors at every site of a mesh, reassembled by minidc compare, equal the
# serial run's within float32's tolerance (tp with SP and ZeRO-2, cp, a pipeline with
# micro-batches, experts over ep ranks), bit for bit under --exact; the tensors before a
# communication point (":pre") are there and equal serial's. A message corrupted in flight is
# named at its site: the first differing tensor is the all-reduced product whose partial sums
# (":pre") still agree, or the copies that should be equal are named; a missing rank file, a file
# of another run, a rank file copied over another, hostile rank files (shapes beyond what the
# files hold, maps that would loop, a NUL in a name, a bad rank field), an unreadable directory
# and a bad directory are refused with the file and the reason named. The default mode compares
# one step: after AdamW's first step (every parameter moved by about lr sign(g)) a gradient near
# zero whose sign rounds differently moves a parameter by 2 lr, so later steps differ beyond
# float32's tolerance on any two meshes; exact mode compares every step.
# Each comparison is a scenario (tests/cli/scenario.sh). The dumps several of them read (serial,
# tp 2 with SP, exact serial and tp 2 with SP) are cheap and always made; the rest are made by
# the scenario that reads them.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
model="--vocab 200 --ctx 16 --layers 2 --heads 4 --channels 32 --batch 4 --steps 1 --quiet"
run() { # dir ranks options...: a failed run is flunked under its command
    local d=$1 n=$2; shift 2
    if [ "$n" = 1 ]; then "$bin" train $model "$@" --dump-dir "$d" >"$tmp/log" 2>&1
    else $MPIEXEC -n "$n" "$bin" train $model "$@" --dump-dir "$d" >"$tmp/log" 2>&1; fi || {
        flunk "train $* --dump-dir" "exit $?"; tail -5 "$tmp/log"; return 1; }
}
expect() { # what want_rc pattern compare-args...: returns 1 on a failure
    local what=$1 want=$2 pat=$3; shift 3
    "$bin" compare "$@" >"$tmp/out" 2>&1
    local rc=$?
    if [ $rc = "$want" ] && grep -q -- "$pat" "$tmp/out"; then return 0; fi
    flunk "$what" "exit $rc (want $want, '$pat')"; tail -5 "$tmp/out"; return 1
}
check() { # what want_rc pattern compare-args...: the scenario WHAT, when selected
    scenario "$1" || return 0
    expect "$@" && { pass "$1"; echo "  $(tail -1 "$tmp/out")"; }
}
run "$tmp/serial" 1
run "$tmp/tp" 2 --tp 2 --sp
run "$tmp/xs" 1 --exact-block 4 --steps 2
run "$tmp/xm" 2 --exact-block 4 --tp 2 --sp --steps 2
run "$tmp/x1" 1 --exact-block 4
for mesh in "2|--tp 2 --sp" "2|--dp 2 --zero 2" "2|--cp 2" "2|--pp 2 --microbatches 2" "4|--tp 2 --pp 2 --microbatches 2"; do
    ranks=${mesh%%|*} opts=${mesh#*|}
    label="$opts against serial"
    scenario "$label" || continue
    rm -rf "$tmp/mesh"
    run "$tmp/mesh" "$ranks" $opts
    check "$label" 0 "^EQUAL" "$tmp/serial" "$tmp/mesh" --quiet
done
# the tensor-parallel run's tensors before its all-reduces and all-gathers, each equal serial's
label="tp 2 with SP: 18 tensors before a communication point, each equal to serial's"
if scenario "$label"; then
    "$bin" compare "$tmp/serial" "$tmp/tp" >"$tmp/out" 2>&1
    # per block 2 all-gathers and 2 reduce-scatters forward, as many backward, and ln_f's each way
    pre=$(grep -c '^step1\..*:pre .* 0$' "$tmp/out")
    if [ "$pre" = 18 ]; then pass "$label"
    else flunk "$label" "$pre ':pre' rows within the tolerance, want 18"; grep ':pre' "$tmp/out" | head; fi
fi
# experts over the ep ranks against serial MoE
label="MoE, ep 2 against serial"
if scenario "$label"; then
    run "$tmp/moe" 1 --experts 4 --topk 2
    run "$tmp/ep" 2 --experts 4 --topk 2 --dp 2 --ep 2
    check "$label" 0 "^EQUAL" "$tmp/moe" "$tmp/ep" --quiet
fi
# exact mode: every site bit for bit
label="exact, serial, 2 steps: 2 rank files"
if scenario "$label"; then
    n=$(ls "$tmp/xs" | wc -l)
    [ "$n" = 2 ] && pass "$label" || flunk "$label" "serial, 2 steps: $n rank files, want 2"
fi
check "exact, tp 2 with SP, two steps at tolerance 0" 0 "^EQUAL" "$tmp/xs" "$tmp/xm" --quiet --rtol 0 --atol 0
check "default mode against exact at tolerance 0 (it can fail)" 1 "^DIFFERENT" "$tmp/x1" "$tmp/tp" --quiet --rtol 0 --atol 0
# a message of rank 1 corrupted: in the reduce-scatter of block 0's projection (send 3), the
# partial sums agree and the reduced product does not; in its all-gather (send 4) the copies differ
label="a corrupted reduce-scatter message: the product named, its partial sums equal"
if scenario "$label"; then
    rm -rf "$tmp/f"
    MINIDC_FAULT_CORRUPT=1:3 $MPIEXEC -n 2 "$bin" train $model --tp 2 --dump-dir "$tmp/f" >/dev/null 2>&1
    if expect "$label" 1 "first differing tensor step1.h.0.attn.c_proj: element" "$tmp/serial" "$tmp/f"; then
        if grep -q '^step1.h.0.attn.c_proj:pre .* 0$' "$tmp/out"; then pass "$label"; echo "  $(tail -1 "$tmp/out")"
        else flunk "$label" "the partial sums before the corrupted message differ"; fi
    fi
fi
label="a corrupted all-gather message"
if scenario "$label"; then
    rm -rf "$tmp/f"
    MINIDC_FAULT_CORRUPT=1:4 $MPIEXEC -n 2 "$bin" train $model --tp 2 --dump-dir "$tmp/f" >/dev/null 2>&1
    check "$label" 1 "step1.h.0.attn.c_proj: the copies of element \[" "$tmp/f" "$tmp/serial"
fi
# what reassembly refuses
cp -r "$tmp/tp" "$tmp/hole" && rm "$tmp/hole/step1-rank1.safetensors"
check "a missing rank file" 1 "elements are in no piece" "$tmp/serial" "$tmp/hole"
cp -r "$tmp/tp" "$tmp/mixed" && cp "$tmp/xm/step1-rank1.safetensors" "$tmp/mixed/"
check "a rank file of another run" 1 "is from another run" "$tmp/serial" "$tmp/mixed"
# hostile rank files, each refused with its file, the tensor or field and the reason named (exit
# 2), never a crash, a hang or an allocation the files cannot fill: a shape too large to hold, a
# piece outside its tensor, an entry that is not JSON, a 600 KB file claiming a global tensor of
# 128e6 or 12.8e9 elements, runs that cover the piece 4096 times (4096^3 blocks to place), a
# global name with a NUL, a rank field that is not "R of N"
for spec in "huge|shape too large to hold" "outside|a run lies outside" "garbage|dump entry of step1.mb0.x: 'n' where a key" \
    "big|global tensor step1.x of shape \[4, 32, 1000000\] needs 256000000 bytes of pieces .* hold 599[0-9]* bytes" \
    "bigger|of shape \[4, 32, 100000000\] needs 25600000000 bytes of pieces" "overlap|cover more than the piece" \
    "nul|dump entry of step1.mb0.x: a NUL character (\\\\u0000) in a string" "rankx|field dump.rank is \"x\", not \"R of N\""; do
    bad=${spec%%|*} pat=${spec#*|}
    label="a hostile rank file ($bad)"
    scenario "$label" || continue
    mkdir -p "$tmp/bad-$bad"
    /usr/bin/python3 - "$tmp/bad-$bad/step1-rank0.safetensors" "$bad" <<'PY'
import json, struct, sys
path, kind = sys.argv[1], sys.argv[2]
r, w = (4, 1171) if kind in ("big", "bigger") else (2, 4)  # 4 x 32 x 1171 floats: a 600 KB file
entry = {"global": "step1.x", "shape": [r, 32, w], "sum": 0, "order": 0, "map": [[[0, 0, r]], [[0, 0, 32]], [[0, 0, w]]]}
if kind == "huge": entry["shape"] = [10**11, 10**11, 10**11]
if kind == "outside": entry["map"][2] = [[0, 2, 4]]
if kind == "big": entry["shape"] = [4, 32, 10**6]
if kind == "bigger": entry["shape"] = [4, 32, 10**8]
if kind == "overlap": entry["map"] = [[[0, 0, 2]] * 4096] * 3
if kind == "nul": entry["global"] = "step1.a\u0000b"
meta = {"dump.format": "minidc-dump 1", "dump.run": "1", "dump.rank": "x" if kind == "rankx" else "0 of 1",
        "dump:step1.mb0.x": "{not json" if kind == "garbage" else json.dumps(entry)}
n = r * 32 * w * 4
h = json.dumps({"__metadata__": meta, "step1.mb0.x": {"dtype": "F32", "shape": [r, 32, w], "data_offsets": [0, n]}}).encode()
h += b" " * (-len(h) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + bytes(n))
PY
    timeout 30 "$bin" compare "$tmp/bad-$bad" "$tmp/serial" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc = 2 ] && grep -q "bad-$bad/step1-rank0.safetensors" "$tmp/out" && grep -q -- "$pat" "$tmp/out"; then
        pass "$label"; echo "  $(head -1 "$tmp/out")"
    else flunk "$label" "exit $rc, want 2 and '$pat'"; head -c 600 "$tmp/out"; echo; fi
done
# a rank's file copied over another's: two files claim one rank, both named
cp -r "$tmp/tp" "$tmp/twice" && cp "$tmp/twice/step1-rank0.safetensors" "$tmp/twice/step1-rank1.safetensors"
check "a rank file copied over another" 1 "two files claim rank 0 of 2 for step 1: .*twice/step1-rank0.safetensors and .*twice/step1-rank1.safetensors" \
    "$tmp/serial" "$tmp/twice"
# a directory that cannot be read: the reason is given (as root, the check runs as nobody)
label="an unreadable directory"
if scenario "$label"; then
    mkdir -p "$tmp/locked" && cp "$tmp/tp/"* "$tmp/locked/" && chmod 000 "$tmp/locked"
    as=()
    [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && chmod 755 "$tmp" && as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    if [ "$(id -u)" != 0 ] || [ ${#as[@]} -gt 0 ]; then
        "${as[@]}" "$bin" compare "$tmp/locked" "$tmp/serial" >"$tmp/out" 2>&1
        rc=$?
        if [ $rc = 2 ] && grep -q "locked: cannot open the directory: Permission denied" "$tmp/out"; then
            pass "$label"; echo "  $(head -1 "$tmp/out")"
        else flunk "$label" "exit $rc"; cat "$tmp/out"; fi
    else echo "skip: an unreadable directory (root without setpriv)"; fi
    chmod 755 "$tmp/locked"
fi
label="a dump directory under a file: exit 2 before any step"
if scenario "$label"; then
    touch "$tmp/file"
    "$bin" train $model --dump-dir "$tmp/file/d" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc = 2 ] && grep -q -- "--dump-dir" "$tmp/out" && ! grep -q "^step" "$tmp/out"; then pass "$label"
    else flunk "$label" "--dump-dir under a file: exit $rc"; cat "$tmp/out"; fi
fi
# a rerun into the same directory replaces the earlier run's files (xm holds the 2-step exact run)
label="a rerun removes the earlier run's rank files"
if scenario "$label"; then
    run "$tmp/xm" 2 --tp 2 --sp
    n=$(ls "$tmp/xm" | wc -l)
    [ "$n" = 2 ] && pass "$label" || flunk "$label" "$n files after a 1-step rerun"
fi
exit $fail
