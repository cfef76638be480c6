#!/bin/bash
# minidc compare: a checkpoint against itself is EQUAL (exit 0); one element of one tensor
# perturbed is DIFFERENT (exit 1) with that tensor and element named first; the same tensors
# rounded to BF16 pass BF16's tolerance and fail a tight --rtol; a missing tensor, another shape
# and an extra tensor are named; bad usage exits 2. Non-finite values: a NaN, an infinity against
# a finite value and infinities of opposite sign differ both ways at any tolerance, equal
# infinities are equal, NaN against NaN only with --nan-equal; F64 beyond float32's range is
# compared as F64. Names: one with a NUL, one not UTF-8 and one tensor under minidc's and
# Hugging Face's names are refused (exit 2, the file named); long names are compared in full.
# Dtypes: F32 against I64 says so; integers name their first differing element.
# Each comparison is a scenario (tests/cli/scenario.sh); the files are written whatever is selected.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$bin" train --vocab 128 --ctx 16 --layers 2 --heads 2 --channels 16 --batch 2 --steps 1 --quiet \
    --save "$tmp/a.st" >/dev/null 2>&1 || { flunk "setup: a checkpoint to compare" "minidc train failed"; exit 1; }
python3 - "$tmp" <<'EOF' || { flunk "setup: editing the checkpoint" "python failed"; exit 1; }
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/a.st", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n]); data = raw[8 + n:]
names = [k for k in hdr if k != "__metadata__"]
def write(path, tensors, meta):
    h, blobs, off = {}, [], 0
    if meta: h["__metadata__"] = meta
    for name, (dt, shape, b) in tensors.items():
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}; blobs.append(b); off += len(b)
    j = json.dumps(h).encode(); j += b" " * (-len(j) % 8)
    open(path, "wb").write(struct.pack("<Q", len(j)) + j + b"".join(blobs))
def tensors():
    return {k: (hdr[k]["dtype"], hdr[k]["shape"], bytearray(data[hdr[k]["data_offsets"][0]:hdr[k]["data_offsets"][1]])) for k in names}
meta = {}  # the checksums in __metadata__ would refuse an edited file as a checkpoint, not as tensors
t = tensors(); dt, sh, b = t["h.1.attn.c_proj.weight"]
x = struct.unpack_from("<f", b, 20)[0]; struct.pack_into("<f", b, 20, x * 1.01 + 1e-3)
write(d + "/perturbed.st", t, meta)
t = tensors()
for k, (dt, sh, b) in list(t.items()):
    vals = struct.unpack("<%df" % (len(b) // 4), b)
    out = bytearray()
    for v in vals:
        u = struct.unpack("<I", struct.pack("<f", v))[0]
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
        out += struct.pack("<H", u)
    t[k] = ("BF16", sh, out)
write(d + "/bf16.st", t, meta)
t = tensors(); del t["ln_f.bias"]; write(d + "/missing.st", t, meta)
t = tensors(); t["extra"] = ("F32", [1], bytearray(4)); write(d + "/extra.st", t, meta)
t = tensors(); dt, sh, b = t["h.0.attn.c_attn.weight"]; t["h.0.attn.c_attn.weight"] = (dt, [sh[1], sh[0]], b); write(d + "/shape.st", t, meta)
EOF
/usr/bin/python3 - "$tmp" <<'EOF' || { flunk "setup: writing the special files" "python failed"; exit 1; }
import json, struct, sys
d = sys.argv[1]
def write(name, tensors, edit=None):
    h, blobs, off = {}, [], 0
    for k, (dt, shape, b) in tensors.items():
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}; blobs.append(b); off += len(b)
    j = json.dumps(h).encode()  # ASCII: a NUL in a name is written as \u0000
    if edit: j = edit(j)
    j += b" " * (-len(j) % 8)
    open(d + "/" + name, "wb").write(struct.pack("<Q", len(j)) + j + b"".join(blobs))
f32 = lambda *v: ("F32", [len(v)], struct.pack("<%df" % len(v), *v))
inf, nan = float("inf"), float("nan")
for name, v in {"fin": 0, "pinf": inf, "ninf": -inf, "five": 5, "nan": nan}.items():
    write("s-" + name + ".st", {"x": f32(1, v, 3)})
write("s-nan0.st", {"x": f32(nan, 1, 3)})
write("s-nan1.st", {"x": f32(1, nan, 3)})
write("s-f64a.st", {"x": ("F64", [1], struct.pack("<d", 1e300))})
write("s-f64b.st", {"x": ("F64", [1], struct.pack("<d", 2e300))})
write("s-a.st", {"a": f32(1)})
write("s-anul.st", {"a\u0000b": f32(1)})
write("s-badutf.st", {"a": f32(1)}, lambda j: j.replace(b'"a"', b'"a\xff"'))
write("s-both.st", {"wte": f32(1, 2), "transformer.wte.weight": f32(1, 2)})
write("s-hf.st", {"wte.weight": f32(1, 2)})
write("s-longa.st", {"x" * 512 + "a": f32(1)})
write("s-longb.st", {"x" * 512 + "b": f32(1)})
write("s-i64.st", {"x": ("I64", [3], struct.pack("<3q", 1, 0, 3))})
write("s-i64b.st", {"x": ("I64", [3], struct.pack("<3q", 1, 7, 3))})
EOF
check() { # what want_rc pattern args...
    local what=$1 want=$2 pat=$3; shift 3
    scenario "$what" || return 0
    "$bin" compare "$@" >"$tmp/out" 2>&1
    local rc=$?
    if [ $rc = "$want" ] && grep -q -- "$pat" "$tmp/out"; then pass "$what"; echo "  $(grep -m1 -- "$pat" "$tmp/out")"
    else flunk "$what" "exit $rc, want $want"; cat "$tmp/out"; fi
}
check "a file against itself" 0 "EQUAL: " "$tmp/a.st" "$tmp/a.st"
check "one element perturbed" 1 "first differing tensor h.1.attn.c_proj.weight: element 5 is" "$tmp/perturbed.st" "$tmp/a.st"
check "the perturbed tensor alone differs" 1 "DIFFERS" "$tmp/perturbed.st" "$tmp/a.st"
label="the perturbed file: one tensor marked DIFFERS"
if scenario "$label"; then
    "$bin" compare "$tmp/perturbed.st" "$tmp/a.st" >"$tmp/out" 2>&1
    n=$(grep -c DIFFERS "$tmp/out")
    [ "$n" = 1 ] && pass "$label" || flunk "$label" "$n tensors marked"
fi
check "BF16 against F32 at BF16's tolerance" 0 "EQUAL: " "$tmp/bf16.st" "$tmp/a.st"
check "BF16 against F32 at a tight rtol" 1 "rtol 1e-06" "$tmp/bf16.st" "$tmp/a.st" --rtol 1e-6 --atol 0
check "a missing tensor" 1 "ln_f.bias: not in B" "$tmp/a.st" "$tmp/missing.st"
check "an extra tensor" 1 "extra: only in B" "$tmp/a.st" "$tmp/extra.st"
check "another shape" 1 "h.0.attn.c_attn.weight: shape \[16, 48\] in A, \[48, 16\] in B" "$tmp/a.st" "$tmp/shape.st"
check "one file" 2 "give two files" "$tmp/a.st"
check "a bad tolerance" 2 "--rtol needs a number" "$tmp/a.st" "$tmp/a.st" --rtol x
check "an unreadable file" 2 "minidc compare: " "$tmp/a.st" "$tmp/nope.st"
# non-finite values: outside every tolerance, both ways
inf="a NaN or an infinity against another value is outside every tolerance"
check "an infinity in B against a finite value" 1 "element 1 is 0 in A, inf in B.*$inf" "$tmp/s-fin.st" "$tmp/s-pinf.st"
check "an infinity in A against a finite value" 1 "element 1 is inf in A, 0 in B" "$tmp/s-pinf.st" "$tmp/s-fin.st"
check "a finite value against -inf" 1 "element 1 is 5 in A, -inf in B" "$tmp/s-five.st" "$tmp/s-ninf.st"
check "-inf against a finite value" 1 "element 1 is -inf in A, 5 in B" "$tmp/s-ninf.st" "$tmp/s-five.st"
check "+inf against -inf" 1 "element 1 is inf in A, -inf in B" "$tmp/s-pinf.st" "$tmp/s-ninf.st"
check "-inf against +inf" 1 "element 1 is -inf in A, inf in B" "$tmp/s-ninf.st" "$tmp/s-pinf.st"
check "an infinity at the largest tolerance" 1 "^DIFFERENT" "$tmp/s-fin.st" "$tmp/s-pinf.st" --rtol 1e6 --atol 1e6
check "a NaN in A at the largest tolerance" 1 "element 1 is nan in A, 0 in B" "$tmp/s-nan.st" "$tmp/s-fin.st" --rtol 1e6 --atol 1e6
check "a NaN in B with --nan-equal" 1 "element 1 is 0 in A, nan in B" "$tmp/s-fin.st" "$tmp/s-nan.st" --nan-equal
check "NaN against NaN" 1 "NaN on both sides is equal only with --nan-equal" "$tmp/s-nan.st" "$tmp/s-nan.st"
check "NaN against NaN with --nan-equal" 0 "^EQUAL" "$tmp/s-nan.st" "$tmp/s-nan.st" --nan-equal
check "NaNs at other places with --nan-equal" 1 "element 0 is nan in A, 1 in B" "$tmp/s-nan0.st" "$tmp/s-nan1.st" --nan-equal
check "+inf against +inf" 0 "^EQUAL" "$tmp/s-pinf.st" "$tmp/s-pinf.st" --rtol 0 --atol 0
check "-inf against -inf" 0 "^EQUAL" "$tmp/s-ninf.st" "$tmp/s-ninf.st"
check "F64 beyond float32's range" 1 "element 0 is 1.0000000000000001e+300 in A, 2.0000000000000001e+300 in B" \
    "$tmp/s-f64a.st" "$tmp/s-f64b.st"
label="--help names --nan-equal"
if scenario "$label"; then
    "$bin" compare --help | grep -q -- "--nan-equal" && pass "$label" || flunk "$label" "--help has no --nan-equal"
fi
# names: refused with the file named, or compared in full
check "a name with a NUL (in A)" 2 'anul.st: header: a NUL character (\\u0000) in a string' "$tmp/s-anul.st" "$tmp/s-a.st"
check "a name with a NUL (in B)" 2 "anul.st: header: a NUL character" "$tmp/s-a.st" "$tmp/s-anul.st"
check "a name that is not UTF-8" 2 'badutf.st: header: invalid UTF-8 (byte 0xff' "$tmp/s-a.st" "$tmp/s-badutf.st"
check "one tensor under two names (in A)" 2 "both.st: tensors 'wte' and 'transformer.wte.weight' are one tensor" "$tmp/s-both.st" "$tmp/s-hf.st"
check "one tensor under two names (in B)" 2 "both.st: tensors 'wte' and 'transformer.wte.weight'" "$tmp/s-hf.st" "$tmp/s-both.st"
check "names that differ after 512 bytes" 1 "not in B" "$tmp/s-longa.st" "$tmp/s-longb.st"
# dtypes
check "F32 against I64" 1 "x: dtypes differ: F32 vs I64" "$tmp/s-fin.st" "$tmp/s-i64.st"
check "I64 against F32" 1 "x: dtypes differ: I64 vs F32" "$tmp/s-i64.st" "$tmp/s-fin.st"
check "integers that differ" 1 "x: element 1 is 0 in A, 7 in B; 1 of 3 differ" "$tmp/s-i64.st" "$tmp/s-i64b.st"
check "integers that agree" 0 "^EQUAL" "$tmp/s-i64.st" "$tmp/s-i64.st"
exit $fail
