#!/bin/bash
# A Hugging Face model directory (config.json and model.safetensors as transformers saves a
# GPT-2): minidc forward reads it without --heads and dumps the same bytes as from the same
# tensors in one file with --heads; a config that contradicts the tensors, another
# layer_norm_epsilon or model_type, trailing garbage, a missing field and --heads against n_head
# are refused (exit 2 or 1 with the field named). config.json is read as RFC 8259 says, as
# Python's json reads it: a key given twice, invalid UTF-8, control bytes as whitespace, "2.",
# 4.0 or 4e0 for an integer are refused naming the file and the key; so is every setting that
# changes GPT-2's math to a value minidc does not compute (activation_function relu,
# scale_attn_weights false, n_inner 64, ...), while the keys that do not change it, and the
# supported values written out, give the same dump as without them.
# Each config is a scenario (tests/cli/scenario.sh); the test files and the two reference dumps
# (from the directory and from the file) are always made.
. "$(dirname "$0")/scenario.sh"
BUILD=${BUILD:-build}
bin=$BUILD/minidc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mkdir "$tmp/gpt2"
python3 - "$tmp" <<'EOF' || { flunk "setup: writing the test files" "python failed"; exit 1; }
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
label="a Hugging Face directory without --heads: the same dump as the file with --heads 4"
if scenario "$label"; then
    if [ $rc_dir = 0 ] && [ $rc = 0 ] && cmp -s "$tmp/dir.st" "$tmp/file.st"; then pass "$label"
    else flunk "$label" "directory (exit $rc_dir) against file (exit $rc)"; cat "$tmp/out"; fi
fi
# names kept as read: the gradients (and the final weights of --steps) are written under the
# names the weights file used: wte.weight as HF spells it, transformer.wte or wte as others do
names() { python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]
print(" ".join(sorted(k for k in json.loads(b[8:8+n]) if k.startswith(("grad.","final.")))))' "$1"; }
label="HF names in, HF names out (grad.wte.weight)"
if scenario "$label"; then
    got=" $(names "$tmp/file.st") "
    case $got in *" grad.wte.weight "*) pass "$label";;
        *) flunk "$label" "HF-named weights dumped as:$got";; esac
fi
for spell in "transformer.|" "|short" "transformer.|short"; do
    pre=${spell%|*} short=${spell#*|}
    e="${pre}wte"; [ -z "$short" ] && e="$e.weight"
    label="weights spelled as $e: gradients and final weights as grad.$e, final.$e"
    scenario "$label" || continue
    python3 - "$tmp/one.safetensors" "$tmp/spelled.st" "$pre" "$short" <<'EOF'
import json, struct, sys
src, dst, pre, short = sys.argv[1:5]
b = open(src, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
ren = lambda k: pre + ({"wte.weight": "wte", "wpe.weight": "wpe"}.get(k, k) if short else k)
h = {ren(k): v for k, v in h.items()}
j = json.dumps(h).encode(); j += b" " * (-len(j) % 8)
open(dst, "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
EOF
    run --weights "$tmp/spelled.st" --heads 4 --dump "$tmp/spelled_out.st" --steps 1
    got=" $(names "$tmp/spelled_out.st") "
    miss=""
    for w in "grad.$e" "final.$e" "grad.${pre}h.0.ln_1.weight" "final.${pre}h.1.mlp.c_fc.bias"; do
        case $got in *" $w "*) ;; *) miss="$miss $w";; esac
    done
    if [ $rc = 0 ] && [ -z "$miss" ]; then pass "$label"
    else flunk "$label" "exit $rc: no$miss in:$got"; fi
done

expect() { # what pattern config-edit (python expression on c, the config dict) [forward args...]
    local what=$1 pat=$2 edit=$3; shift 3
    scenario "$what" || return 0
    rm -rf "$tmp/bad"; cp -r "$tmp/gpt2" "$tmp/bad"
    python3 -c "import json, sys; c = json.load(open(sys.argv[1])); $edit; open(sys.argv[1], 'wb').write(c if isinstance(c, bytes) else (c if isinstance(c, str) else json.dumps(c)).encode())" \
        "$tmp/bad/config.json"
    run --weights "$tmp/bad" --dump "$tmp/bad.st" "$@"
    if [ $rc != 0 ] && [ $rc != 124 ] && grep -q -- "$pat" "$tmp/out"; then pass "$what"; echo "  $(grep -m1 -- "$pat" "$tmp/out")"
    else flunk "$what" "exit $rc"; cat "$tmp/out"; fi
}
expect "n_layer against the tensors" '"n_layer" is 3 but' 'c["n_layer"] = 3'
expect "n_positions against the tensors" '"n_positions" is 1024 but' 'c["n_positions"] = 1024'
expect "another epsilon" '"layer_norm_epsilon" is 1e-06; minidc' 'c["layer_norm_epsilon"] = 1e-6'
expect "another model" '"model_type" is "gemma", not one of "gpt2"' 'c["model_type"] = "gemma"'
expect "a llama type on GPT-2 keys" 'no "hidden_size" (a llama config has it)' 'c["model_type"] = "llama"'
expect "a missing field" 'no "n_embd"' 'del c["n_embd"]'
expect "a fractional size" '"n_head" must be a positive integer' 'c["n_head"] = 4.5'
expect "trailing garbage" 'not one JSON object' 'c = json.dumps(c) + " {}"'
expect "--heads against n_head" '--heads 2 contradicts' 'pass' --heads 2

# ---- the JSON itself, byte by byte (the file and the key named) ----
raw() { echo "c = json.dumps(c, indent=1).replace($1, $2)"; } # a textual edit of the file
expect "a key given twice" 'config.json: the key "n_head" is given twice (at bytes' 'c = json.dumps(c)[:-1] + ", \"n_head\": 2}"'
expect "a key given twice, once escaped" 'the key "n_head" is given twice' 'c = json.dumps(c)[:-1] + ", \"n\\u005fhead\": 4}"'
expect "a key given twice, nested" 'the key "max_length" is given twice in "task_specific_params"."text-generation"' \
    'c["task_specific_params"] = {"text-generation": {"max_length": 50}}; c = json.dumps(c)[:-3] + ", \"max_length\": 9}}}"'
expect "invalid UTF-8 in a value" 'config.json: invalid UTF-8 (byte 0xff; JSON text is UTF-8) at byte .*, in "activation_function"' \
    'c = json.dumps(c).encode().replace(b"gelu_new", b"gelu\xffnew")'
expect "an overlong UTF-8 form in a key" 'invalid UTF-8 (byte 0xc0.*in the key after "architectures"' \
    'c = json.dumps(c).encode().replace(b"\"activation_function", b"\"\xc0\xafactivation_function")'
expect "a surrogate as UTF-8 bytes" 'invalid UTF-8 (byte 0xed' 'c = json.dumps(c).encode().replace(b"gpt2", b"gpt\xed\xa0\x802")'
expect "a form feed as whitespace" 'config.json: a control byte 0x0c used as whitespace .*, after "n_head"' "$(raw "'\"n_layer\"'" "'\f\"n_layer\"'")"
expect "a NUL byte as whitespace" 'a control byte 0x00 used as whitespace' "$(raw "'\"n_layer\"'" "'\0\"n_layer\"'")"
expect "a tab inside a string" 'a control byte 0x09 inside a string .*, in "model_type"' "$(raw "'gpt2'" "'gpt\t2'")"
expect "a byte order mark" 'a byte order mark' 'c = "\ufeff" + json.dumps(c)'
expect '"2." as a number' 'config.json: a number without digits after its .\.. ("2\." is not JSON; write 2 or 2\.0) at byte .*, in "n_layer"' \
    "$(raw "'\"n_layer\": 2'" "'\"n_layer\": 2.'")"
expect "4.0 for an integer" 'config.json: "n_head" must be a positive integer (digits only, at most 2^30), not 4\.0' "$(raw "'\"n_head\": 4'" "'\"n_head\": 4.0'")"
expect "4e0 for an integer" '"n_head" must be a positive integer (digits only, at most 2^30), not 4e0' "$(raw "'\"n_head\": 4'" "'\"n_head\": 4e0'")"
expect "a leading zero" 'a number with a leading zero .*, in "n_head"' "$(raw "'\"n_head\": 4'" "'\"n_head\": 04'")"
expect "NaN" 'NaN or Infinity .*, in "layer_norm_epsilon"' 'c["layer_norm_epsilon"] = float("nan")'
expect "a trailing comma" "a ',' before '}'" 'c = json.dumps(c)[:-1] + ",}"'
expect "an escaped NUL" 'a NUL character (\\u0000) in a string .*, in "model_type"' "$(raw "'gpt2'" "'gpt2\\\\u0000'")"
expect "an unpaired surrogate" 'an unpaired surrogate \\uD800' "$(raw "'gpt2'" "'gpt2\\\\ud800'")"
expect "an integer past 2^30" '"n_embd" must be a positive integer (digits only, at most 2^30), not 99999999999' \
    'c["n_embd"] = 99999999999'

# ---- settings that change the math: refused by name with the value minidc computes ----
expect "activation_function relu" '"activation_function" is "relu"; minidc.s MLP computes "gelu_new"' 'c["activation_function"] = "relu"'
expect "activation_function gelu (erf)" '"activation_function" is "gelu"' 'c["activation_function"] = "gelu"'
expect "scale_attn_weights false" '"scale_attn_weights" is false; minidc supports only true' 'c["scale_attn_weights"] = False'
expect "n_inner 64" '"n_inner" is 64; minidc.s MLP is 4 \* n_embd = 128 wide' 'c["n_inner"] = 64'
expect "n_inner 128.0" '"n_inner" must be a positive integer' "c = json.dumps(dict(c, n_inner=1)).replace('\"n_inner\": 1', '\"n_inner\": 128.0')"
expect "scale_attn_by_inverse_layer_idx true" '"scale_attn_by_inverse_layer_idx" is true; minidc supports only false' \
    'c["scale_attn_by_inverse_layer_idx"] = True'
expect "reorder_and_upcast_attn true" '"reorder_and_upcast_attn" is true; minidc supports only false' 'c["reorder_and_upcast_attn"] = True'
expect "tie_word_embeddings false" '"tie_word_embeddings" is false; minidc supports only true' 'c["tie_word_embeddings"] = False'
expect "add_cross_attention true" '"add_cross_attention" is true; minidc supports only false' 'c["add_cross_attention"] = True'
expect "pruned heads" '"pruned_heads" is {"0": \[1\]}; minidc supports only {}' 'c["pruned_heads"] = {"0": [1]}'
expect "a quantized model" '"quantization_config" is given' 'c["quantization_config"] = {"quant_method": "gptq"}'
expect "hidden_size against n_embd" '"hidden_size" is 64 but "n_embd" is 32' 'c["hidden_size"] = 64'
expect "n_ctx not an integer" '"n_ctx" must be a positive integer' 'c["n_ctx"] = 4.5'
expect "epsilon near 1e-5" '"layer_norm_epsilon" is 1.0000001e-05; minidc' 'c["layer_norm_epsilon"] = 1.0000001e-5'

# ---- keys that do not change the math, and the supported values written out: the same dump ----
same() { # what config-edit: the scenario "WHAT: the same dump"
    local label="$1: the same dump"
    scenario "$label" || return 0
    rm -rf "$tmp/ok"; cp -r "$tmp/gpt2" "$tmp/ok"
    python3 -c "import json, sys; c = json.load(open(sys.argv[1])); $2; open(sys.argv[1], 'wb').write(c if isinstance(c, bytes) else (c if isinstance(c, str) else json.dumps(c)).encode())" \
        "$tmp/ok/config.json"
    run --weights "$tmp/ok" --dump "$tmp/ok.st"
    if [ $rc = 0 ] && cmp -s "$tmp/ok.st" "$tmp/dir.st"; then pass "$label"
    else flunk "$label" "exit $rc or another dump"; cat "$tmp/out"; fi
}
same "GPT-2's defaults written out" 'c.update(n_inner=None, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
    reorder_and_upcast_attn=False, tie_word_embeddings=True, add_cross_attention=False, pruned_heads={}, n_ctx=16,
    hidden_size=32, max_position_embeddings=16, num_attention_heads=4, num_hidden_layers=2, quantization_config=None)'
same "gelu_pytorch_tanh, n_inner 4 * n_embd" 'c.update(activation_function="gelu_pytorch_tanh", n_inner=128)'
same "keys that do not change the math" 'c.update(attn_pdrop=0.1, embd_pdrop=0.1, resid_pdrop=0.1, initializer_range=0.02,
    bos_token_id=50256, eos_token_id=50256, summary_type="cls_index", summary_use_proj=True, summary_activation=None,
    use_cache=True, torch_dtype="float32", transformers_version="4.40.0", _name_or_path="mod\u00e8le/\U0001F600",
    task_specific_params={"text-generation": {"do_sample": True, "max_length": 50}}, id2label={"0": "A"}, x=[-1, 0.5, 2E+3, -0.0e-1])'
same "escapes, CRLF and tabs" 'c = json.dumps(c, indent="\t", ensure_ascii=True).replace("\n", "\r\n").replace("gpt2", "g\\u0070t2")'
label="no config.json"
if scenario "$label"; then
    rm "$tmp/gpt2/config.json"
    run --weights "$tmp/gpt2" --dump "$tmp/bad.st"
    [ $rc != 0 ] && grep -q "config.json: cannot open" "$tmp/out" && { pass "$label"; echo "  $(grep -m1 config.json "$tmp/out")"; } ||
        { flunk "$label" "exit $rc"; cat "$tmp/out"; }
fi
exit $fail
