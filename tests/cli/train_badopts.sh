#!/bin/bash
# Bad values for `minidc train` (serial and --dp) and `minidc forward`, found by fuzzing: each is
# refused with the documented exit status (2 for a bad option, 1 for a bad file or a diverged
# run) and a message naming the option or file; --report writes its file on every path; a
# non-finite loss stops the run instead of printing `loss nan` and exiting 0.
# Each value is a scenario (tests/cli/scenario.sh); the checkpoints and tokens they read are
# always made.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
m=$BUILD/minidc
fail=0
t=$(mktemp -d /tmp/minidc-badopts-XXXXXX)
trap 'rm -rf "$t"' EXIT
tiny="--vocab 65 --ctx 8 --layers 2 --heads 2 --channels 16 --batch 12 --quiet"
checked() { # description, exit status, pattern, command...: true when it exits so and says pattern (output in $t/out)
    local what=$1 want=$2 pat=$3; shift 3
    timeout -k 5 60 "$@" >"$t/out" 2>&1 </dev/null
    local rc=$?
    if [ $rc != "$want" ]; then
        flunk "$what" "exit $rc, expected $want"; sed 's/^/  | /' "$t/out" | tail -8; return 1
    elif ! grep -q -- "$pat" "$t/out"; then
        flunk "$what" "no '$pat' in:"; sed 's/^/  | /' "$t/out" | tail -8; return 1
    fi
}
expect() { # description, exit status, pattern, command...: the scenario DESCRIPTION
    scenario "$1" || return 0
    checked "$@" && { pass "$1"; echo "  $(grep -m1 -- "$3" "$t/out")"; }
}
serial_cmd=("$m" train $tiny --steps 1)
dp_cmd=("$MPIEXEC" -n 2 "$m" train $tiny --dp 2 --steps 1)
serial() { expect "$1" "$2" "$3" "${serial_cmd[@]}" "${@:4}"; }
dp() { expect "dp: $1" "$2" "$3" "${dp_cmd[@]}" "${@:4}"; }

# checkpoints: a real one, then the same with its step (or a weight) changed
"$m" train $tiny --steps 1 --save "$t/c1.st" >/dev/null 2>&1 || { flunk "setup: saving a checkpoint" "exit $?"; exit 1; }
edit() { # src dst step nan(0|1): rewrites the safetensors header (and the first weight)
    /usr/bin/python3 - "$@" "$(dirname "$0")" <<'EOF'
import json, struct, sys
src, dst, step, nan = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
sys.path.insert(0, sys.argv[5]); sys.dont_write_bytecode = True; import checkpoint_seal
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = bytearray(b[8 + n:])
h["__metadata__"]["step"] = h["__metadata__"]["adam_step"] = step  # both count the steps taken
if nan:
    o = h["wte.weight"]["data_offsets"][0]
    data[o:o + 4] = struct.pack("<f", float("nan"))
checkpoint_seal.seal(h, data)  # as a writer of that step would: the checksums cover the metadata
hj = json.dumps(h, separators=(",", ":")).encode()
hj += b" " * (-len(hj) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hj)) + hj + bytes(data))
EOF
}
edit "$t/c1.st" "$t/big.st" 99999999999 0 && edit "$t/c1.st" "$t/s30.st" 1073741824 0 &&
    edit "$t/c1.st" "$t/nan.st" 1 1 || { flunk "setup: editing the checkpoint" "python failed"; exit 1; }

# ---- 1, 2: step and batch arithmetic in 64 bits --------------------------------------------
dp "--accum 2^30 (dp x accum overflowed)" 2 "--accum 1073741824 = 2147483648:" --batch 4 --accum 1073741824
dp "--accum INT_MAX" 2 "--accum 2147483647 = 4294967294:" --batch 4 --accum 2147483647
serial "--steps INT_MAX after step 2^30" 2 "--steps 2147483647 after step 1073741824 of the checkpoint" \
    --steps 2147483647 --resume "$t/s30.st"
dp "--steps INT_MAX after step 2^30" 2 "--steps 2147483647 after step 1073741824 of the checkpoint" \
    --steps 2147483647 --resume "$t/s30.st"
serial "checkpoint step 99999999999" 1 "big.st: step 99999999999 out of range" --resume "$t/big.st"
dp "checkpoint step 99999999999 (was truncated)" 1 "big.st: step 99999999999 out of range" --resume "$t/big.st"

# ---- sizes: 0 is an error, not the default -------------------------------------------------
for o in --batch --seq --layers --heads --channels --vocab --ctx; do
    expect "$o 0" 2 "$o needs an integer in 1.." "$m" train --config tiny --steps 1 $o 0
done

# ---- 4: optimizer values, one check for all three paths ------------------------------------
serial "--lr inf" 2 "--lr inf: the learning rate must be a finite number > 0" --lr inf
serial "--lr 1e39 (beyond the float range)" 2 "--lr 1e39 is not representable as a float" --lr 1e39
serial "--weight-decay nan" 2 "--weight-decay nan must be a finite number >= 0" --weight-decay nan
serial "--weight-decay -5" 2 "--weight-decay -5 must be" --weight-decay -5
serial "--grad-clip nan" 2 "--grad-clip nan must be a finite number >= 0" --grad-clip nan
serial "--grad-clip -1" 2 "--grad-clip -1 must be" --grad-clip -1
serial "--grad-clip 0 is 'no clipping'" 0 "^trained 1 step," --grad-clip 0
dp "--lr inf" 2 "--lr inf: the learning rate" --lr inf
dp "--weight-decay inf" 2 "--weight-decay inf must be" --weight-decay inf
dp "--grad-clip -1" 2 "--grad-clip -1 must be" --grad-clip -1

# ---- 5: strict --dp options ----------------------------------------------------------------
for b in nan inf 1e30 -1; do dp "--bucket-mb $b" 2 "--bucket-mb needs a finite number in \[0, 1048576\], got '$b'" --bucket-mb $b; done
dp "--dp -1" 2 "--dp needs an integer in 1..2147483647, got '-1'" --dp -1
dp "--fail-at 1:0x" 2 "--fail-at needs RANK:STEP (two integers >= 0), got '1:0x'" --fail-at 1:0x
dp "--fail-at 5:0 (no rank 5)" 2 "--fail-at 5:0: rank 5 is not in the job (ranks 0..1)" --fail-at 5:0
dp "--fail-at 1:7 (no step 7)" 2 "--fail-at 1:7: step 7 is not one of this run's steps (0..0" --fail-at 1:7

# ---- 6: a non-finite value never trains: a NaN weight is refused when the checkpoint is read
# (datasets/weights.c names the tensor and element), and a loss that diverges to nan (--lr 1e30
# is finite, so accepted) stops the run on every rank, exit 1 --------------------------------
serial "NaN weight in the checkpoint" 1 "tensor 'wte.weight': element 0 is nan" --steps 2 --resume "$t/nan.st"
dp "NaN weight in the checkpoint" 1 "tensor 'wte.weight': element 0 is nan" --steps 2 --resume "$t/nan.st"
label="a diverging run (--lr 1e30): stopped, no nan loss line"
if scenario "$label" && checked "$label" 1 "step 2: the loss is -*nan (the model diverged" "${serial_cmd[@]}" --steps 3 --lr 1e30; then
    grep -q "^step .* loss -*nan" "$t/out" && flunk "$label" "serial: a nan loss line was printed" || pass "$label"
fi
label="dp: a diverging run (--lr 1e30): stopped, the error printed once (rank 0)"
if scenario "$label" && checked "$label" 1 "rank 0: step 2: the loss is -*nan (the model diverged" "${dp_cmd[@]}" --steps 3 --lr 1e30; then
    [ "$(grep -c "the loss is" "$t/out")" = 1 ] && pass "$label" || flunk "$label" "dp: the loss error must be printed once (rank 0)"
fi

# ---- 3: --report on serial train and forward ----------------------------------------------
label="--report (serial train): the JSON report written"
if scenario "$label" && checked "$label" 0 "^trained 1 step," "${serial_cmd[@]}" --report "$t/train.json"; then
    grep -q '"format":.*"minidc-device-report-1"' "$t/train.json" 2>/dev/null && pass "$label" ||
        flunk "$label" "serial train --report wrote no JSON report"
fi
serial "--report to an unwritable path (refused before the first step)" 2 "--report $t/no/such/dir/r.json: the directory $t/no/such/dir does not exist" \
    --report "$t/no/such/dir/r.json"

/usr/bin/python3 - "$t" <<'EOF'
import struct, sys
def npy(path, rows):
    hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }" % (len(rows), len(rows[0]))
    hdr += " " * (-(10 + len(hdr) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        for r in rows: f.write(struct.pack("<%di" % len(r), *r))
npy(sys.argv[1] + "/x.npy", [[1, 2, 3, 4], [5, 6, 7, 8]])
npy(sys.argv[1] + "/y.npy", [[2, 3, 4, 5], [6, 7, 8, 9]])
EOF
fwd_cmd=("$m" forward --weights "$t/c1.st" --tokens "$t/x.npy" --targets "$t/y.npy" --dump "$t/d.st" --steps 1)
fwd() { expect "forward: $1" "$2" "$3" "${fwd_cmd[@]}" "${@:4}"; }
fwd "--lr -1" 2 "--lr -1: the learning rate must be" --lr -1
fwd "--beta1 2" 2 "--beta1 2 must be in \[0, 1)" --beta1 2
fwd "--beta2 1" 2 "--beta2 1 must be in \[0, 1)" --beta2 1
fwd "--eps -1" 2 "--eps -1 must be a finite number > 0" --eps -1
fwd "--grad-clip nan" 2 "--grad-clip nan must be" --grad-clip nan
label="forward: --report: the JSON report written"
if scenario "$label" && checked "$label" 0 "after 1 AdamW steps" "${fwd_cmd[@]}" --report "$t/fwd.json"; then
    grep -q '"format":.*"minidc-device-report-1"' "$t/fwd.json" 2>/dev/null && pass "$label" ||
        flunk "$label" "forward --report wrote no JSON report"
fi
fwd "--report to an unwritable path (refused before any work)" 2 "--report $t/no/such/dir/f.json: the directory $t/no/such/dir does not exist" \
    --report "$t/no/such/dir/f.json"

# a value the float cannot hold is refused as given, not as what it would round to
serial "--lr 1e-300 refused by its value" 2 "--lr 1e-300 is not representable as a float" --lr 1e-300
serial "--weight-decay 1e39 refused by its value" 2 "--weight-decay 1e39 is not representable as a float" --weight-decay 1e39
fwd "--lr 1e-60" 2 "--lr 1e-60 is not representable as a float" --lr 1e-60
# a huge block is refused with the largest that fits (no count-down from 2^31)
serial "--exact-block 2147483647" 2 "--exact-block 2147483647 does not divide the 8 positions.*use --exact-block 8" \
    --exact-block 2147483647
label="--steps 0: nothing trained, no loss"
if scenario "$label" && checked "$label" 0 "^trained 0 steps (--steps 0): no loss computed" "${serial_cmd[@]}" --steps 0; then
    grep -q "final loss" "$t/out" && flunk "$label" "--steps 0 printed a final loss" || pass "$label"
fi
# the test-only environment: a value that cannot act is said
expect "MINIDC_FAULT_CORRUPT=x" 0 "MINIDC_FAULT_CORRUPT='x' is not RANK:N" env MINIDC_FAULT_CORRUPT=x "$m" train $tiny --steps 1
expect "MINIDC_FAULT_CORRUPT=9:1 on 2 ranks" 0 "rank 9 is not in the job (ranks 0..1)" env MINIDC_FAULT_CORRUPT=9:1 \
    "$MPIEXEC" -n 2 "$m" train $tiny --dp 2 --steps 1
expect "MINIDC_CHECK_COLLECTIVES=false" 0 "MINIDC_CHECK_COLLECTIVES='false' is not 0 or 1" env MINIDC_CHECK_COLLECTIVES=false \
    "$MPIEXEC" -n 2 "$m" train $tiny --dp 2 --steps 1
exit $fail
