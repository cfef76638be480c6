#!/bin/bash
# minidc train with tensor and sequence parallelism: bad meshes and sizes refused before any
# message (exit 2, rank 0 names the option and the sizes), a tp checkpoint resumed on another
# mesh with --check-serial, the report's collective counts and bytes equal to the formulas, and
# dropout drawing the same masks on a mesh as in serial.
# Each refusal and each mesh is a scenario (tests/cli/scenario.sh); a run whose checkpoint
# other scenarios resume is made when one of them is selected.
. "$(dirname "$0")/scenario.sh"
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
    scenario "$what" || return 0
    run "$@"
    if [ $rc != "$want" ]; then flunk "$what" "exit $rc, want $want"; cat "$tmp/out"; return; fi
    if ! grep -q -- "$pat" "$tmp/out"; then flunk "$what" "no '$pat' in:"; cat "$tmp/out"; return; fi
    [ "$(grep -c -- "$pat" "$tmp/out")" = 1 ] || { flunk "$what" "the error must be printed once"; return; }
    pass "$what"; echo "  $(grep -m1 -- "$pat" "$tmp/out")"
}
ran() { # what: the run in $tmp/out exited 0 (else the scenario WHAT fails)
    [ $rc = 0 ] && return 0
    flunk "$1" "exit $rc"; cat "$tmp/out"; return 1
}
verdict() { # what, the problems found ("" when none)
    if [ -z "$2" ]; then pass "$1"; else flunk "$1" "${2#; }"; fi
}

expect_error "heads not divisible by tp" 2 "--tp 4 does not divide --heads 6" 4 --tp 4 $odd --steps 1
# tp 3 on a vocabulary padded to 512 (not a multiple of 3): the run pads to 768 = 2 x 384, a
# multiple of lcm(128, 32 x 3), inside; the checkpoint keeps [512, C]: tp 3 saves serial's bytes
# in exact mode, and resumes serially and on tp 2 to the same bytes
v3="--config tiny --heads 6 --channels 48 --batch 6 --seq 32 --exact --quiet"
pad="tp 3, vocabulary 512 padded to 768 inside the run, exact: serial's bytes"
resumes="the tp 3 checkpoint resumed serially and on tp 2: the same bytes"
if scenario "$pad" || scenario "$resumes"; then
    run 3 --tp 3 $v3 --steps 2 --save "$tmp/v3.st"
    rc3=$rc
    cp "$tmp/out" "$tmp/v3.out"
fi
if scenario "$pad"; then
    if ran "$pad"; then
        why=""
        grep -q "model: V=512 (padded 768)" "$tmp/v3.out" || { why="$why; tp 3 does not pad to 768"; head -n 3 "$tmp/v3.out"; }
        run 1 $v3 --steps 2 --save "$tmp/v1.st"
        if [ $rc != 0 ]; then why="$why; serial, vocabulary 512, exact: exit $rc"; cat "$tmp/out"
        else cmp "$tmp/v1.st" "$tmp/v3.st" || why="$why; tp 3's exact checkpoint differs from serial's"; fi
        verdict "$pad" "$why"
    fi
fi
if scenario "$resumes"; then
    if [ $rc3 != 0 ]; then flunk "$resumes" "the tp 3 run that saves the checkpoint: exit $rc3"; cat "$tmp/v3.out"
    else
        run 1 $v3 --steps 1 --resume "$tmp/v3.st" --save "$tmp/v3s.st"
        if ran "$resumes"; then
            run 2 --tp 2 $v3 --steps 1 --resume "$tmp/v3.st" --save "$tmp/v3t.st"
            if ran "$resumes"; then
                cmp "$tmp/v3s.st" "$tmp/v3t.st" && pass "$resumes" ||
                    flunk "$resumes" "resumed on tp 2, the checkpoint differs from serial's"
            fi
        fi
    fi
fi
expect_error "--sp without tp" 2 "--sp needs --tp 2 or more" 2 --dp 2 --sp $odd --steps 1
expect_error "sequence not divisible by tp with SP" 2 "sequence length 10 (--seq) is not divisible by --tp 4" 4 \
    --tp 4 --sp --vocab 300 --ctx 12 --layers 1 --heads 4 --channels 32 --batch 4 --seq 10 --steps 1
expect_error "mesh larger than the job" 2 "but the job has 2" 2 --tp 2 --dp 2 $odd --steps 1
expect_error "--ep without experts" 2 "--ep 2: expert parallelism needs a mixture of experts" 2 --ep 2 --dp 2 $odd --steps 1

# every collective of the report equals its formula; the replicas stay identical
label="tp 2 x dp 2, ZeRO-1, --check-serial --check-replicas: every figure equal to its formula"
if scenario "$label"; then
    run 4 --tp 2 --dp 2 --zero 1 $odd --steps 4 --check-serial --check-replicas --report "$tmp/r.json"
    if ran "$label"; then
        why=""
        /usr/bin/python3 - "$tmp/r.json" <<'EOF' || why="$why; the JSON report's tensor-parallel figures"
import json, sys
s = json.load(open(sys.argv[1]))["schemes"]
tp, dp = s["tensor_parallel"], s["data_parallel"]
assert s["mesh"]["tp"] == 2 and s["mesh"]["dp"] == 2, s["mesh"]
assert tp["allreduce_bsh"]["calls"] == tp["allreduce_bsh"]["calls_formula"] == 10, tp
for k in tp.values():
    if isinstance(k, dict): assert k["bytes"] == k["bytes_formula"], k
assert dp["step_bytes"] == dp["step_bytes_exact"] and dp["zero"] == 1, dp
EOF
        grep -q "check-serial: .* ok" "$tmp/out" || { why="$why; tp 2 x dp 2 check-serial"; cat "$tmp/out"; }
        grep -q "AllReduce (b,s,h) .* ok" "$tmp/out" || { why="$why; TP allreduce figures"; grep -A8 "tensor parallel" "$tmp/out"; }
        ! grep -q DIFFERS "$tmp/out" || { why="$why; a figure differs from its formula"; grep DIFFERS "$tmp/out"; }
        verdict "$label" "$why"
    fi
fi
# the tp 3 checkpoint (tp3.st) holds global tensors: resumed below on dp 2 ZeRO-3 and on tp 2 with SP
tp3="tp 3 with SP, accumulation 2, --check-serial: every figure equal to its formula"
ondp="tp 3 checkpoint resumed on dp 2 ZeRO-3"
ontp="tp 3 checkpoint resumed on tp 2 with SP"
if scenario "$tp3" || scenario "$ondp" || scenario "$ontp"; then
    run 3 --tp 3 --sp --accum 2 $odd --steps 4 --check-serial --check-replicas --save "$tmp/tp3.st"
    if scenario "$tp3" && ran "$tp3"; then
        why=""
        grep -q "check-serial: .* ok" "$tmp/out" || { why="$why; tp 3 SP check-serial"; cat "$tmp/out"; }
        for k in AllGather ReduceScatter; do
            grep -q "$k (b,s,h) .* ok" "$tmp/out" || { why="$why; SP $k figures"; grep -A8 "tensor parallel" "$tmp/out"; }
        done
        ! grep -q DIFFERS "$tmp/out" || { why="$why; a figure differs from its formula"; grep DIFFERS "$tmp/out"; }
        verdict "$tp3" "$why"
    fi
fi

# dropout keyed by global indices: the mesh drops what serial drops (a different mask would move
# the loss by about 1e-3); without dropout the loss differs
label="tp 2 with SP x dp 2, ZeRO-2, --dropout 0.1, --check-serial: the serial masks"
if scenario "$label"; then
    run 4 --tp 2 --sp --dp 2 --zero 2 $odd --steps 4 --dropout 0.1 --check-serial --check-replicas
    if ran "$label"; then
        why=""
        grep -q "check-serial: .* ok" "$tmp/out" || { why="$why; dropout check-serial"; cat "$tmp/out"; }
        l_drop=$(awk '/^step     4 /{print $4}' "$tmp/out")
        run 1 $odd --steps 4
        l_none=$(awk '/^step     4 /{print $4}' "$tmp/out")
        [ -n "$l_drop" ] && [ "$l_drop" != "$l_none" ] || why="$why; --dropout 0.1 did not change the loss ($l_drop, $l_none)"
        verdict "$label" "$why"
    fi
fi

for on in "$ondp" "$ontp"; do
    scenario "$on" || continue
    if [ "$on" = "$ondp" ]; then run 2 --dp 2 --zero 3 $odd --steps 2 --resume "$tmp/tp3.st" --check-serial
    else run 2 --tp 2 --sp $odd --steps 2 --resume "$tmp/tp3.st" --check-serial; fi
    if ran "$on"; then
        grep -q "check-serial: .* ok" "$tmp/out" && pass "$on" || { flunk "$on" "check-serial after the resume"; cat "$tmp/out"; }
    fi
done
exit $fail
