#!/bin/bash
# Inputs a fuzzing run found to hang, crash or overflow, each now refused at once with a message
# naming the field or option: device files with absurd rates or stack counts (the virtual clock
# went infinite and throttle mode waited forever; 1e9 stacks overflowed the bus width),
# mdc_wait_wall of an infinite wait, `bench train` with huge or malformed numbers,
# `data generate` with an unbounded --tokens, and checkpoints changed after they were saved (a
# flipped byte read by `forward --weights`, edited, added or removed metadata, a step that is not
# a plain integer or contradicts adam_step, a checkpoint-1 file). Every case runs under
# `timeout`, so a hang fails.
# Each case is a scenario (tests/cli/scenario.sh); the files the cases read are always written.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
m=$BUILD/minidc
fail=0
t=$(mktemp -d /tmp/minidc-badinput-XXXXXX)
trap 'rm -rf "$t"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# expect DESCRIPTION WANT_RC PATTERN COMMAND...: COMMAND exits WANT_RC within 20 s and its
# output contains PATTERN (a fixed string)
expect() {
    local what=$1 want=$2 pat=$3
    shift 3
    scenario "$what" || return 0
    timeout -k 2 20 "$@" >"$t/out" 2>&1 </dev/null
    local rc=$?
    if [ $rc != "$want" ]; then
        flunk "$what" "exit $rc, want $want$([ $rc = 124 ] && echo ' (timed out: a hang)')"
        sed 's/^/  | /' "$t/out" | tail -n 8
    elif ! grep -qF -- "$pat" "$t/out"; then
        flunk "$what" "no '$pat' in:"
        sed 's/^/  | /' "$t/out" | tail -n 8
    else
        pass "$what"
    fi
}

# A valid device (h100-like); dev KEY VALUE writes it with one field replaced.
dev() {
    local f="$t/dev_$1.json"
    python3 - "$1" "$2" >"$f" <<'EOF'
import json, sys
d = {"name": "x", "description": "d", "hbm_bytes": 8e10, "hbm_bw": 3.35e12,
     "hbm_bus_bits_per_stack": 1024, "hbm_stacks": 5, "hbm_gen": "HBM3", "flops_fp32": 6.7e13,
     "flops_bf16": 9.9e14, "sram_bytes": 5e7, "nvlink_bw": 4.5e11, "nvlink_latency": 1e-6,
     "net_bw": 5e10, "net_latency": 5e-6, "pcie_bw": 6.4e10, "launch_overhead": 3e-6,
     "tdp_watts": 700}
if sys.argv[1] != "ok":
    d[sys.argv[1]] = float(sys.argv[2])
print(json.dumps(d))
EOF
    echo "$f"
}

# ---- device files: each numeric field has a physical range ----
expect "good device file" 0 "valid device file" $m devices --device-file "$(dev ok 0)"
# field, value, and how the message prints the value and its unit
while read -r field value shown; do
    expect "$field $value" 1 "'$field' = $shown is out of range" $m devices --device-file "$(dev "$field" "$value")"
done <<'CASES'
flops_fp32 1e-300 1e-300 FLOP/s
hbm_bw 1e-300 1e-300 bytes/s
net_bw 1e-300 1e-300 bytes/s
hbm_stacks 1e9 1e+09 stacks
hbm_bytes 1e308 1e+308 bytes
net_latency 1e300 1e+300 s
tdp_watts 1e-300 1e-300 W
CASES
# the widest accepted bus: 65536 bits x 1024 stacks, printed without overflow
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["hbm_bus_bits_per_stack"]=65536; d["hbm_stacks"]=1024; print(json.dumps(d))' \
    "$(dev ok 0)" >"$t/widest.json"
expect "widest bus" 0 "67108864 bits" $m devices --device-file "$t/widest.json"
printf '{"pj_int_op": 1, "pj_fp_op": 1e308, "pj_sram_64b": 26, "pj_dram_64b": 1200, "pj_hbm_bit": 3.97, "pj_nvlink_bit": 1.3, "pj_net_bit": 10, "pj_pcie_bit": 5}\n' >"$t/en_huge.json"
expect "energy pj_fp_op 1e308" 1 "'pj_fp_op' = 1e+308 pJ is out of range" \
    $m devices --energy-table "$t/en_huge.json"

# ---- throttle mode with a device that used to give an infinite clock: an error, not a hang ----
tiny=(--vocab 16 --ctx 8 --layers 1 --heads 1 --channels 8 --batch 2 --steps 2)
expect "train --emulate throttle, flops 1e-300" 1 "'flops_fp32' = 1e-300 FLOP/s is out of range" \
    $m train "${tiny[@]}" --device-file "$t/dev_flops_fp32.json" --emulate throttle
# mdc_wait_wall itself returns at once on an infinite or NaN wait (a sanitized library needs
# the ASan runtime loaded before Python; Python's own allocations are not ours to leak-check)
pre=()
[ "${SANITIZE:-0}" = 1 ] && pre=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
expect "mdc_wait_wall(inf), (nan)" 0 "returned" "${pre[@]}" python3 -c '
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.mdc_wait_wall.argtypes = [ctypes.c_double]
lib.mdc_wait_wall(float("inf")); lib.mdc_wait_wall(float("nan"))
print("returned")' "$BUILD/libminidc.so"

# ---- bench train: strict numbers with bounds ----
expect "bench train --steps 2147483647" 2 "--steps needs an integer in 1..100000, got '2147483647'" \
    $m bench train --batch 1 --seq 8 --steps 2147483647 --threads 1
expect "bench train --batch 1x" 2 "--batch needs an integer in 1..1024, got '1x'" \
    $m bench train --batch 1x --seq 8 --steps 1 --threads 1
expect "bench train --threads 0" 2 "--threads needs an integer in 1..1024, got '0'" \
    $m bench train --batch 1 --seq 8 --steps 1 --threads 0
expect "bench train --seq 8x" 2 "--seq needs an integer" \
    $m bench train --batch 1 --seq 8x --steps 1 --threads 1
expect "bench train --seq past the context" 2 "--seq 100000 is longer than config tiny's context" \
    $m bench train --batch 1 --seq 100000 --steps 1 --threads 1
expect "bench train --torch-ms 5ms" 2 "--torch-ms needs a number, got '5ms'" \
    $m bench train --batch 1 --seq 8 --steps 1 --threads 1 --torch-ms 5ms
expect "bench train --torch-ms nan" 2 "--torch-ms needs a finite number of ms >= 0, got 'nan'" \
    $m bench train --batch 1 --seq 8 --steps 1 --threads 1 --torch-ms nan
expect "bench train, good values" 0 "tiny   B=1 T=8" \
    $m bench train --batch 1 --seq 8 --steps 1 --threads 1 --torch-ms 1.5

# ---- data generate: --tokens bounded before anything is generated ----
expect "data generate --tokens 2^63-1" 2 "--tokens needs an integer in 1..4294967296, got '9223372036854775807'" \
    $m data generate copy --tokens 9223372036854775807 "$t/y.bin"
expect "data generate --tokens 0" 2 "--tokens needs an integer in 1..4294967296, got '0'" \
    $m data generate copy --tokens 0 "$t/y.bin"
expect "data generate --tokens 1000" 0 "1000 tokens, vocab 10" \
    $m data generate copy --tokens 1000 "$t/y.bin"

# ---- device and vocabulary JSON as strict as the safetensors header ----
good=$(dev ok 0)
{ cat "$good"; echo ' {"more": 1}'; } >"$t/trail.json"
expect "device file with text after the object" 1 "text after the JSON object" $m devices --device-file "$t/trail.json"
{ head -c 20 "$good"; printf '\0'; tail -c +21 "$good"; } >"$t/nul.json"
expect "device file with a NUL byte" 1 "a NUL byte at byte 20" $m devices --device-file "$t/nul.json"
$m data generate copy --tokens 300 "$t/v.bin" >/dev/null 2>&1 || flunk "setup: data generate" "exit $?"
vocab() { printf '{"type": "char", "tokens": [%s]}%s' "$1" "$2" >"$t/v.bin.vocab.json"; }
toks='"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"'
vocab "$toks" ""
expect "a good vocabulary" 0 "vocabulary:  0='a'" $m data info "$t/v.bin"
vocab '"a", "b", "c", "d", "e", "f", "g", "h", "a", "j"' ""
expect "a vocabulary with a token twice" 1 'the token "a" appears twice' $m data info "$t/v.bin"
vocab "$toks" " garbage"
expect "a vocabulary with text after it" 1 "text after the JSON object" $m data info "$t/v.bin"

# ---- checkpoints: every read verifies every checksum, the metadata's too ----
ck=(--vocab 65 --ctx 8 --layers 2 --heads 2 --channels 16 --batch 4 --quiet)
here=$(dirname "$0")
$m train "${ck[@]}" --steps 4 --save "$t/c4.st" >/dev/null 2>&1 || flunk "setup: saving a checkpoint" "exit $?"
python3 - "$t" <<'EOF'
import struct, sys
for name, rows in (("x", [[1, 2, 3, 4], [5, 6, 7, 8]]), ("y", [[2, 3, 4, 5], [6, 7, 8, 9]])):
    hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 4), }"
    hdr += " " * (-(len(hdr) + 11) % 64) + "\n"
    open("%s/%s.npy" % (sys.argv[1], name), "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) +
                                                        hdr.encode() + b"".join(struct.pack("<4i", *r) for r in rows))
EOF
ck_edit() { python3 "$here/checkpoint_seal.py" "$t/c4.st" "$t/$1" "${@:2}" || flunk "setup: editing $1" "checkpoint_seal.py failed"; }
fwd=("$m" forward --tokens "$t/x.npy" --targets "$t/y.npy" --dump "$t/d.st" --weights) # then the file
resume=("$m" train "${ck[@]}" --steps 1 --resume)
expect "forward on a good checkpoint" 0 ", loss " "${fwd[@]}" "$t/c4.st"
ck_edit flip.st --unsealed @h.0.ln_1.weight
expect "forward on a checkpoint with a flipped byte" 1 "flip.st: tensor 'h.0.ln_1.weight' does not match its checksum" \
    "${fwd[@]}" "$t/flip.st"
expect "resume from a checkpoint with a flipped byte" 1 "flip.st: tensor 'h.0.ln_1.weight' does not match its checksum" "${resume[@]}" "$t/flip.st"
ck_edit flipv.st --unsealed @adam.v.wte.weight
expect "forward: a flipped byte in a moment it does not use" 1 "tensor 'adam.v.wte.weight' does not match its checksum" \
    "${fwd[@]}" "$t/flipv.st"
ck_edit head.st --unsealed n_head=4
expect "forward: an edited n_head" 1 "head.st: __metadata__ 'n_head' = '4' does not match its checksum" "${fwd[@]}" "$t/head.st"
ck_edit s9.st --unsealed step=9
expect "resume: step 4 edited to 9" 1 "s9.st: adam_step 4 contradicts step 9" "${resume[@]}" "$t/s9.st"
ck_edit s9a.st --unsealed step=9 adam_step=9
expect "resume: step and adam_step edited to 9" 1 "s9a.st: __metadata__ 'step' = '9' does not match its checksum" \
    "${resume[@]}" "$t/s9a.st"
ck_edit sp.st "step= 4"
expect "resume: step ' 4' (sealed)" 1 "sp.st: checkpoint __metadata__ 'step' = ' 4' is not a plain non-negative integer" \
    "${resume[@]}" "$t/sp.st"
ck_edit s04.st step=04 adam_step=04
expect "resume: step '04' (sealed)" 1 "'step' = '04' is not a plain non-negative integer" "${resume[@]}" "$t/s04.st"
ck_edit sa.st adam_step=100000000
expect "resume: adam_step 100000000 (sealed)" 1 "sa.st: adam_step 100000000 contradicts step 4" "${resume[@]}" "$t/sa.st"
ck_edit big.st step=9999999999 adam_step=9999999999
expect "resume: step 9999999999 (sealed)" 1 "big.st: step 9999999999 out of range (at most 2^30)" "${resume[@]}" "$t/big.st"
ck_edit gone.st --unsealed -data_sequences
expect "resume: a field removed" 1 "gone.st: checkpoint __metadata__ has no 'data_sequences'" "${resume[@]}" "$t/gone.st"
expect "forward: a field removed" 1 "gone.st: __metadata__ 'data_sequences' is missing but its checksum" "${fwd[@]}" "$t/gone.st"
ck_edit added.st --unsealed note=hi
expect "forward: a field added" 1 "added.st: __metadata__ 'note' has no checksum" "${fwd[@]}" "$t/added.st"
ck_edit nosum.st --unsealed -checksum.ln_f.bias
expect "forward: a tensor's checksum removed" 1 "nosum.st: tensor 'ln_f.bias' has no checksum" "${fwd[@]}" "$t/nosum.st"
ck_edit sealed.st step=9 adam_step=9
expect "resume: a sealed edit with step = adam_step (what a writer could save)" 0 "step    10" "${resume[@]}" "$t/sealed.st"
python3 -c '
import sys; sys.path.insert(0, sys.argv[1]); sys.dont_write_bytecode = True; import checkpoint_seal as c
h, d = c.read(sys.argv[2]); m = h["__metadata__"]
for k in [k for k in m if k.startswith("checksum.__metadata__.")]: del m[k]
m["minidc.format"] = "checkpoint-1"; c.write(sys.argv[3], h, d)' "$here" "$t/c4.st" "$t/old.st"
expect "resume from a checkpoint-1 file" 1 "old.st: a checkpoint-1 file: it predates the checksum of the checkpoint's metadata" \
    "${resume[@]}" "$t/old.st"
expect "forward on a checkpoint-1 file: accepted, with a warning" 0 "old.st is a checkpoint-1 file, older than the checksum" "${fwd[@]}" "$t/old.st"
MPIEXEC=${MPIEXEC:-mpiexec.mpich}
expect "dp 2: every rank refuses the edited step" 1 "s9.st: adam_step 4 contradicts step 9" \
    "$MPIEXEC" -n 2 $m train "${ck[@]}" --dp 2 --steps 1 --resume "$t/s9.st"
exit $fail
