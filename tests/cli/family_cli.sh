#!/bin/bash
# The Llama, Qwen2 and Qwen3 families on the mesh: each family's small config on tp 2, tp 2 with
# SP, dp 2 with ZeRO-3 and pp 2 equal to serial (--check-serial), exact mode on tp 2 (+SP) and
# pp 2 bit for bit; what is not built yet refused by name (context parallelism, more tp ranks
# than kv heads); a run saved as a Hugging Face directory read back by forward, and resumed from
# it bit for bit. Each is a scenario (tests/cli/scenario.sh).
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
run() { # ranks args...
    local n=$1; shift
    timeout -k 5 120 "$MPIEXEC" -n "$n" "$bin" train "$@" >"$tmp/out" 2>&1
    rc=$?
}
parity() { # what want ranks args...: the run exits 0 and prints want
    local what=$1 want=$2; shift 2
    scenario "$what" || return 0
    run "$@" --steps 3 --quiet --check-serial
    if [ $rc != 0 ]; then flunk "$what" "exit $rc"; cat "$tmp/out"; return; fi
    if ! grep -q -- "$want" "$tmp/out"; then flunk "$what" "no '$want' in:"; grep check-serial "$tmp/out"; return; fi
    pass "$what"; echo "  $(grep -m1 check-serial "$tmp/out" | cut -c1-150)"
}
near="within the limits"
same="identical to serial bit for bit: ok"
for c in llama-tiny qwen2-tiny qwen3-tiny; do
    parity "$c: --tp 2 equals serial" "$near" 2 --config $c --tp 2
    parity "$c: --tp 2 --sp equals serial" "$near" 2 --config $c --tp 2 --sp
    parity "$c: --dp 2 --zero 3 equals serial" "$near" 2 --config $c --dp 2 --zero 3
    parity "$c: --pp 2 equals serial" "$near" 2 --config $c --pp 2
    parity "$c: exact, --tp 2 --sp bit for bit" "$same" 2 --config $c --tp 2 --sp --exact
    parity "$c: exact, --pp 2 --dp 2 bit for bit" "$same" 4 --config $c --pp 2 --dp 2 --exact
done

refused() { # what pattern ranks args...
    local what=$1 pat=$2; shift 2
    scenario "$what" || return 0
    run "$@" --steps 1
    if [ $rc = 0 ] || ! grep -q -- "$pat" "$tmp/out"; then flunk "$what" "exit $rc, want a refusal naming '$pat'"; cat "$tmp/out"; return; fi
    pass "$what"; echo "  $(grep -m1 -- "$pat" "$tmp/out")"
}
refused "context parallelism refused by name" "context-parallel attention over grouped-query heads" 2 --config llama-tiny --cp 2
refused "tp above the kv heads refused" "--tp 4 is more than the 2 key/value heads" 4 --config qwen3-tiny --tp 4

if scenario "--save DIR/: a directory forward reads, resumed bit for bit"; then
    what="--save DIR/: a directory forward reads, resumed bit for bit"
    run 1 --config qwen3-tiny --steps 4 --quiet && cp "$tmp/out" "$tmp/four"
    run 2 --config qwen3-tiny --tp 2 --steps 2 --quiet --save "$tmp/q3/"
    run 1 --config qwen3-tiny --steps 2 --quiet --resume "$tmp/q3/" && cp "$tmp/out" "$tmp/resumed"
    last() { grep -E '^step +4 ' "$1" | awk '{print $4, $6}'; }
    python3 -c 'import struct, sys
h = b"{\x27descr\x27: \x27<i4\x27, \x27fortran_order\x27: False, \x27shape\x27: (1, 4), }"
h += b" " * (63 - (10 + len(h)) % 64) + b"\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + struct.pack("<4i", 3, 1, 4, 1))' "$tmp/x.npy"
    timeout 60 "$bin" forward --weights "$tmp/q3" --tokens "$tmp/x.npy" --targets "$tmp/x.npy" --dump "$tmp/d.st" >"$tmp/fwd" 2>&1
    frc=$?
    if [ ! -s "$tmp/q3/config.json" ] || [ ! -s "$tmp/q3/model.safetensors" ] || [ ! -s "$tmp/q3/training_state.safetensors" ]; then
        flunk "$what" "missing files: $(ls "$tmp/q3" 2>&1)"
    elif ! grep -q '"model_type": "qwen3"' "$tmp/q3/config.json"; then
        flunk "$what" "config.json: $(head -5 "$tmp/q3/config.json")"
    elif [ -z "$(last "$tmp/four")" ] || [ "$(last "$tmp/four")" != "$(last "$tmp/resumed")" ]; then
        flunk "$what" "step 4 after resuming '$(last "$tmp/resumed")', straight '$(last "$tmp/four")'"
    elif [ $frc != 0 ] || ! grep -aq "grad.model.layers.0.mlp.up_proj.weight" "$tmp/d.st"; then
        flunk "$what" "forward --weights DIR: exit $frc, no grad.model.layers.0.mlp.up_proj.weight: $(head -3 "$tmp/fwd")"
    else
        pass "$what"; echo "  step 4: $(last "$tmp/resumed") both ways"
    fi
fi
exit $fail
