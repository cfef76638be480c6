#!/bin/bash
# minidc compare: a checkpoint against itself is EQUAL (exit 0); one element of one tensor
# perturbed is DIFFERENT (exit 1) with that tensor and element named first; the same tensors
# rounded to BF16 pass BF16's tolerance and fail a tight --rtol; a missing tensor, another shape
# and an extra tensor are named; bad usage exits 2.
BUILD=${BUILD:-build}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$bin" train --vocab 128 --ctx 16 --layers 2 --heads 2 --channels 16 --batch 2 --steps 1 --quiet \
    --save "$tmp/a.st" >/dev/null 2>&1 || { echo "FAIL: making a checkpoint"; exit 1; }
python3 - "$tmp" <<'EOF' || { echo "FAIL: editing the checkpoint"; exit 1; }
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
check() { # what want_rc pattern args...
    local what=$1 want=$2 pat=$3; shift 3
    "$bin" compare "$@" >"$tmp/out" 2>&1
    local rc=$?
    if [ $rc = "$want" ] && grep -q -- "$pat" "$tmp/out"; then echo "ok: $what: $(grep -m1 -- "$pat" "$tmp/out")"
    else echo "FAIL: $what: exit $rc, want $want"; cat "$tmp/out"; fail=1; fi
}
check "a file against itself" 0 "EQUAL: " "$tmp/a.st" "$tmp/a.st"
check "one element perturbed" 1 "first differing tensor h.1.attn.c_proj.weight: element 5 is" "$tmp/perturbed.st" "$tmp/a.st"
check "the perturbed tensor alone differs" 1 "DIFFERS" "$tmp/perturbed.st" "$tmp/a.st"
n=$(grep -c DIFFERS "$tmp/out")
[ "$n" = 1 ] && echo "ok: one tensor marked" || { echo "FAIL: $n tensors marked"; fail=1; }
check "BF16 against F32 at BF16's tolerance" 0 "EQUAL: " "$tmp/bf16.st" "$tmp/a.st"
check "BF16 against F32 at a tight rtol" 1 "rtol 1e-06" "$tmp/bf16.st" "$tmp/a.st" --rtol 1e-6 --atol 0
check "a missing tensor" 1 "ln_f.bias: not in B" "$tmp/a.st" "$tmp/missing.st"
check "an extra tensor" 1 "extra: only in B" "$tmp/a.st" "$tmp/extra.st"
check "another shape" 1 "h.0.attn.c_attn.weight: shape \[16, 48\] in A, \[48, 16\] in B" "$tmp/a.st" "$tmp/shape.st"
check "one file" 2 "give two files" "$tmp/a.st"
check "a bad tolerance" 2 "--rtol needs a number" "$tmp/a.st" "$tmp/a.st" --rtol x
check "an unreadable file" 2 "minidc compare: " "$tmp/a.st" "$tmp/nope.st"
[ $fail = 0 ] && echo "compare_cli: all passed"
exit $fail
