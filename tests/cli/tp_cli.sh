#!/bin/bash
# minidc train with tensor and sequence parallelism: bad meshes and sizes refused before any
# message (exit 2, rank 0 names the option and the sizes), a tp checkpoint resumed on another
# mesh with --check-serial, the report's collective counts and bytes equal to the formulas, and
# dropout drawing the same masks on a mesh as in serial.
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
odd="--vocab 300 --ctx 12 --layers 2 --heads 6 --channels 48 --batch 12 --quiet"
run() { # ranks args...
    local n=$1; shift
    timeout -k 5 120 "$MPIEXEC" -n "$n" "$bin" train "$@" >"$tmp/out" 2>&1
    rc=$?
}
expect_error() { # what want_rc pattern ranks args...
    local what=$1 want=$2 pat=$3; shift 3
    run "$@"
    if [ $rc != "$want" ]; then echo "FAIL: $what: exit $rc, want $want"; cat "$tmp/out"; fail=1; return; fi
    if ! grep -q -- "$pat" "$tmp/out"; then echo "FAIL: $what: no '$pat' in:"; cat "$tmp/out"; fail=1; return; fi
    [ "$(grep -c -- "$pat" "$tmp/out")" = 1 ] || { echo "FAIL: $what: the error must be printed once"; fail=1; }
    echo "ok: $what: $(grep -m1 -- "$pat" "$tmp/out")"
}
expect_ok() { # what ranks args...
    local what=$1; shift
    run "$@"
    if [ $rc != 0 ]; then echo "FAIL: $what: exit $rc"; cat "$tmp/out"; fail=1; else echo "ok: $what"; fi
}

expect_error "heads not divisible by tp" 2 "--tp 4 does not divide --heads 6" 4 --tp 4 $odd --steps 1
# tp 3 on a vocabulary padded to 512 (not a multiple of 3): the run pads to 768 = 2 x 384, a
# multiple of lcm(128, 32 x 3), inside; the checkpoint keeps [512, C]: tp 3 saves serial's bytes
# in exact mode, and resumes serially and on tp 2 to the same bytes
v3="--config tiny --heads 6 --channels 48 --batch 6 --seq 32 --exact --quiet"
expect_ok "serial, vocabulary 512, exact" 1 $v3 --steps 2 --save "$tmp/v1.st"
expect_ok "tp 3, vocabulary 512 padded to 768 inside the run, exact" 3 --tp 3 $v3 --steps 2 --save "$tmp/v3.st"
grep -q "model: V=512 (padded 768)" "$tmp/out" || { echo "FAIL: tp 3 does not pad to 768"; head -n 3 "$tmp/out"; fail=1; }
cmp "$tmp/v1.st" "$tmp/v3.st" || { echo "FAIL: tp 3's exact checkpoint differs from serial's"; fail=1; }
expect_ok "the tp 3 checkpoint resumed serially" 1 $v3 --steps 1 --resume "$tmp/v3.st" --save "$tmp/v3s.st"
expect_ok "the tp 3 checkpoint resumed on tp 2" 2 --tp 2 $v3 --steps 1 --resume "$tmp/v3.st" --save "$tmp/v3t.st"
cmp "$tmp/v3s.st" "$tmp/v3t.st" || { echo "FAIL: resumed on tp 2, the checkpoint differs from serial's"; fail=1; }
expect_error "--sp without tp" 2 "--sp needs --tp 2 or more" 2 --dp 2 --sp $odd --steps 1
expect_error "sequence not divisible by tp with SP" 2 "sequence length 10 (--seq) is not divisible by --tp 4" 4 \
    --tp 4 --sp --vocab 300 --ctx 12 --layers 1 --heads 4 --channels 32 --batch 4 --seq 10 --steps 1
expect_error "mesh larger than the job" 2 "but the job has 2" 2 --tp 2 --dp 2 $odd --steps 1
expect_error "--ep without experts" 2 "--ep 2: expert parallelism needs a mixture of experts" 2 --ep 2 --dp 2 $odd --steps 1

# every collective of the report equals its formula; the replicas stay identical
expect_ok "tp 2 x dp 2, ZeRO-1, --check-serial --check-replicas" 4 --tp 2 --dp 2 --zero 1 $odd --steps 4 \
    --check-serial --check-replicas --report "$tmp/r.json"
/usr/bin/python3 - "$tmp/r.json" <<'EOF' || { echo "FAIL: the JSON report's tensor-parallel figures"; fail=1; }
import json, sys
s = json.load(open(sys.argv[1]))["schemes"]
tp, dp = s["tensor_parallel"], s["data_parallel"]
assert s["mesh"]["tp"] == 2 and s["mesh"]["dp"] == 2, s["mesh"]
assert tp["allreduce_bsh"]["calls"] == tp["allreduce_bsh"]["calls_formula"] == 10, tp
for k in tp.values():
    if isinstance(k, dict): assert k["bytes"] == k["bytes_formula"], k
assert dp["step_bytes"] == dp["step_bytes_exact"] and dp["zero"] == 1, dp
EOF
grep -q "check-serial: .* ok" "$tmp/out" || { echo "FAIL: tp 2 x dp 2 check-serial"; cat "$tmp/out"; fail=1; }
grep -q "AllReduce (b,s,h) .* ok" "$tmp/out" || { echo "FAIL: TP allreduce figures"; grep -A8 "tensor parallel" "$tmp/out"; fail=1; }
! grep -q DIFFERS "$tmp/out" || { echo "FAIL: a figure differs from its formula"; grep DIFFERS "$tmp/out"; fail=1; }
expect_ok "tp 3 with SP, accumulation 2, --check-serial" 3 --tp 3 --sp --accum 2 $odd --steps 4 --check-serial \
    --check-replicas --save "$tmp/tp3.st"
grep -q "check-serial: .* ok" "$tmp/out" || { echo "FAIL: tp 3 SP check-serial"; cat "$tmp/out"; fail=1; }
for k in AllGather ReduceScatter; do
    grep -q "$k (b,s,h) .* ok" "$tmp/out" || { echo "FAIL: SP $k figures"; grep -A8 "tensor parallel" "$tmp/out"; fail=1; }
done
! grep -q DIFFERS "$tmp/out" || { echo "FAIL: a figure differs from its formula"; grep DIFFERS "$tmp/out"; fail=1; }

# dropout keyed by global indices: the mesh drops what serial drops (a different mask would move
# the loss by about 1e-3); without dropout the loss differs
expect_ok "tp 2 with SP x dp 2, ZeRO-2, --dropout 0.1, --check-serial" 4 --tp 2 --sp --dp 2 --zero 2 $odd --steps 4 \
    --dropout 0.1 --check-serial --check-replicas
grep -q "check-serial: .* ok" "$tmp/out" || { echo "FAIL: dropout check-serial"; cat "$tmp/out"; fail=1; }
l_drop=$(awk '/^step     4 /{print $4}' "$tmp/out")
run 1 $odd --steps 4
l_none=$(awk '/^step     4 /{print $4}' "$tmp/out")
[ -n "$l_drop" ] && [ "$l_drop" != "$l_none" ] || { echo "FAIL: --dropout 0.1 did not change the loss ($l_drop, $l_none)"; fail=1; }

# the tp 3 checkpoint holds global tensors: resumed on dp 2 ZeRO-3 and on tp 2 with SP
expect_ok "tp 3 checkpoint resumed on dp 2 ZeRO-3" 2 --dp 2 --zero 3 $odd --steps 2 --resume "$tmp/tp3.st" --check-serial
grep -q "check-serial: .* ok" "$tmp/out" || { echo "FAIL: resume on dp 2"; cat "$tmp/out"; fail=1; }
expect_ok "tp 3 checkpoint resumed on tp 2 with SP" 2 --tp 2 --sp $odd --steps 2 --resume "$tmp/tp3.st" --check-serial
grep -q "check-serial: .* ok" "$tmp/out" || { echo "FAIL: resume on tp 2"; cat "$tmp/out"; fail=1; }
exit $fail
