#!/bin/bash
# A Hugging Face model directory (config.json and model.safetensors as transformers saves a
# GPT-2): minidc forward reads it without --heads and dumps the same bytes as from the same
# tensors in one file with --heads; a config that contradicts the tensors, another
# layer_norm_epsilon or model_type, trailing garbage, a missing field and --heads against n_head
# are refused (exit 2 or 1 with the field named).
BUILD=${BUILD:-build}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mkdir "$tmp/gpt2"
python3 - "$tmp" <<'EOF' || { echo "FAIL: writing the test files"; exit 1; }
import json, random, struct, sys
d = sys.argv[1]
V, T, L, H, C = 96, 16, 2, 4, 32
random.seed(7)
def t(*shape):
    n = 1
    for s in shape: n *= s
    return shape, [random.gauss(0, 0.2) for _ in range(n)]
ones = lambda n: ((n,), [1.0 + random.gauss(0, 0.05) for _ in range(n)])
tensors = {"wte.weight": t(V, C), "wpe.weight": t(T, C), "ln_f.weight": ones(C), "ln_f.bias": t(C)}
for l in range(L):
    p = "h.%d." % l
    tensors.update({p + "ln_1.weight": ones(C), p + "ln_1.bias": t(C), p + "attn.c_attn.weight": t(C, 3 * C),
                    p + "attn.c_attn.bias": t(3 * C), p + "attn.c_proj.weight": t(C, C), p + "attn.c_proj.bias": t(C),
                    p + "ln_2.weight": ones(C), p + "ln_2.bias": t(C), p + "mlp.c_fc.weight": t(C, 4 * C),
                    p + "mlp.c_fc.bias": t(4 * C), p + "mlp.c_proj.weight": t(4 * C, C), p + "mlp.c_proj.bias": t(C)})
def write(path, meta):
    header, blobs, off = {}, [], 0
    if meta: header["__metadata__"] = meta
    for name, (shape, vals) in tensors.items():
        b = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
write(d + "/gpt2/model.safetensors", {"format": "pt"})
write(d + "/one.safetensors", None)
config = {"model_type": "gpt2", "n_head": H, "n_layer": L, "n_embd": C, "vocab_size": V, "n_positions": T,
          "layer_norm_epsilon": 1e-05, "architectures": ["GPT2LMHeadModel"], "activation_function": "gelu_new"}
json.dump(config, open(d + "/gpt2/config.json", "w"), indent=2)
def npy(path, rows):
    hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d, %d), }" % (len(rows), len(rows[0]))
    hdr += " " * (-(len(hdr) + 11) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        for r in rows: f.write(struct.pack("<%di" % len(r), *r))
x = [[random.randrange(V) for _ in range(T)] for _ in range(2)]
npy(d + "/x.npy", [r[:-1] for r in x]); npy(d + "/y.npy", [r[1:] for r in x])
EOF
run() { "$bin" forward "$@" --tokens "$tmp/x.npy" --targets "$tmp/y.npy" >"$tmp/out" 2>&1; rc=$?; }
run --weights "$tmp/gpt2" --dump "$tmp/dir.st"
rc_dir=$rc
run --weights "$tmp/one.safetensors" --heads 4 --dump "$tmp/file.st"
if [ $rc_dir = 0 ] && [ $rc = 0 ] && cmp -s "$tmp/dir.st" "$tmp/file.st"; then
    echo "ok: a Hugging Face directory without --heads: the same dump as the file with --heads 4"
else echo "FAIL: directory (exit $rc_dir) against file (exit $rc)"; cat "$tmp/out"; fail=1; fi

expect() { # what pattern config-edit (python expression on c, the config dict) [forward args...]
    local what=$1 pat=$2 edit=$3; shift 3
    rm -rf "$tmp/bad"; cp -r "$tmp/gpt2" "$tmp/bad"
    python3 -c "import json, sys; c = json.load(open(sys.argv[1])); $edit; open(sys.argv[1], 'w').write(json.dumps(c) if not isinstance(c, str) else c)" \
        "$tmp/bad/config.json"
    run --weights "$tmp/bad" --dump "$tmp/bad.st" "$@"
    if [ $rc != 0 ] && [ $rc != 124 ] && grep -q -- "$pat" "$tmp/out"; then echo "ok: $what: $(grep -m1 -- "$pat" "$tmp/out")"
    else echo "FAIL: $what: exit $rc"; cat "$tmp/out"; fail=1; fi
}
expect "n_layer against the tensors" '"n_layer" is 3 but' 'c["n_layer"] = 3'
expect "n_positions against the tensors" '"n_positions" is 1024 but' 'c["n_positions"] = 1024'
expect "another epsilon" '"layer_norm_epsilon" is 1e-06; minidc' 'c["layer_norm_epsilon"] = 1e-6'
expect "another model" '"model_type" is "llama"' 'c["model_type"] = "llama"'
expect "a missing field" 'no "n_embd"' 'del c["n_embd"]'
expect "a fractional size" '"n_head" must be a positive integer' 'c["n_head"] = 4.5'
expect "trailing garbage" 'not one JSON object' 'c = json.dumps(c) + " {}"'
expect "--heads against n_head" '--heads 2 contradicts' 'pass' --heads 2
rm "$tmp/gpt2/config.json"
run --weights "$tmp/gpt2" --dump "$tmp/bad.st"
[ $rc != 0 ] && grep -q "config.json: cannot open" "$tmp/out" && echo "ok: no config.json: $(grep -m1 config.json "$tmp/out")" ||
    { echo "FAIL: no config.json: exit $rc"; cat "$tmp/out"; fail=1; }

[ $fail = 0 ] && echo "hf_dir_cli: all passed"
exit $fail
