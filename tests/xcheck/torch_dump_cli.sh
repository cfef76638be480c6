#!/bin/bash
# The cross-check workflow: tools/torch_dump.py (Debian's PyTorch, CPU) writes the tensors
# `minidc forward --dump` writes, under the same names; `minidc compare` finds the float32 and
# float64 PyTorch runs equal to minidc's within float32's tolerance, a bf16-autocast run equal
# only at a bf16-sized tolerance, and a weight of block 1 perturbed on the PyTorch side is
# reported with logits as the first differing tensor (exit 1). With --dump-dir on both sides the
# tensors at every site compare clean, and the same perturbed weight is reported at its site
# (h.1.attn.c_proj), a bias added twice at its (h.1.mlp.c_fc). Skipped (77) without PyTorch.
BUILD=${BUILD:-build}
bin=$BUILD/minidc
py=/usr/bin/python3
$py -c "import torch, numpy" 2>/dev/null || { echo "skipped: $py has no torch/numpy (python3-torch python3-numpy)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$bin" train --vocab 128 --ctx 16 --layers 2 --heads 2 --channels 32 --batch 2 --steps 1 --quiet --save "$tmp/w.st" \
    >/dev/null 2>&1 || { echo "FAIL: a checkpoint to compare on"; exit 1; }
$py - "$tmp" <<'PY' || { echo "FAIL: writing tokens"; exit 1; }
import sys, numpy as np
rng = np.random.default_rng(3)
x = rng.integers(0, 128, size=(2, 17))
np.save(sys.argv[1] + "/x.npy", x[:, :-1].astype(np.int32)); np.save(sys.argv[1] + "/y.npy", x[:, 1:].astype(np.int64))
sys.path.insert(0, "tools")
from torch_gpt2 import read_safetensors, write_safetensors
w = read_safetensors(sys.argv[1] + "/w.st")
w = {k: np.array(v) for k, v in w.items() if not k.startswith("adam.")}
w["h.1.attn.c_proj.weight"][3, 5] += 0.05
write_safetensors(sys.argv[1] + "/bad.st", w, {"n_head": "2"})
PY
io="--tokens $tmp/x.npy --targets $tmp/y.npy"
"$bin" forward --weights "$tmp/w.st" $io --dump "$tmp/minidc.st" >/dev/null || { echo "FAIL: minidc forward"; exit 1; }
check() { # what want_rc pattern compare-args...
    local what=$1 want=$2 pat=$3; shift 3
    "$bin" compare "$@" --quiet >"$tmp/out" 2>&1
    local rc=$?
    if [ $rc = "$want" ] && grep -q -- "$pat" "$tmp/out"; then echo "ok: $what: $(head -1 "$tmp/out")"
    else echo "FAIL: $what: exit $rc, want $want"; cat "$tmp/out"; fail=1; fi
}
for d in fp32 fp64 bf16; do
    $py tools/torch_dump.py --weights "$tmp/w.st" $io --dump "$tmp/torch_$d.st" --dtype $d >/dev/null 2>&1 ||
        { echo "FAIL: torch_dump --dtype $d"; fail=1; }
done
check "PyTorch fp32 against minidc" 0 "EQUAL: 31 tensors" "$tmp/torch_fp32.st" "$tmp/minidc.st"
check "PyTorch fp64 against minidc" 0 "EQUAL: 31 tensors" "$tmp/torch_fp64.st" "$tmp/minidc.st"
check "PyTorch bf16 autocast at BF16's own tolerance" 1 "first differing tensor logits" "$tmp/torch_bf16.st" "$tmp/minidc.st"
check "PyTorch bf16 autocast at rtol 0.1, atol 2e-2" 0 "EQUAL" "$tmp/torch_bf16.st" "$tmp/minidc.st" --rtol 0.1 --atol 2e-2
$py tools/torch_dump.py --weights "$tmp/bad.st" $io --dump "$tmp/torch_bad.st" >/dev/null 2>&1 || { echo "FAIL: torch_dump"; fail=1; }
check "a weight of block 1 perturbed" 1 "first differing tensor logits: element" "$tmp/torch_bad.st" "$tmp/minidc.st"
# every site: the residual stream, each LayerNorm, qkv, the attention, each product, their gradients
"$bin" forward --weights "$tmp/w.st" $io --dump-dir "$tmp/md" >/dev/null || { echo "FAIL: minidc forward --dump-dir"; exit 1; }
$py tools/torch_dump.py --weights "$tmp/w.st" $io --dump-dir "$tmp/td" >/dev/null 2>&1 || { echo "FAIL: torch_dump --dump-dir"; fail=1; }
check "PyTorch fp32 against minidc at every site" 0 "EQUAL: 78 tensors" "$tmp/td" "$tmp/md"
$py tools/torch_dump.py --weights "$tmp/bad.st" $io --dump-dir "$tmp/tdbad" >/dev/null 2>&1 || { echo "FAIL: torch_dump"; fail=1; }
check "a weight of block 1 perturbed, at its site" 1 "first differing tensor step1.h.1.attn.c_proj: element" "$tmp/tdbad" "$tmp/md"
$py tools/torch_dump.py --weights "$tmp/w.st" $io --dump-dir "$tmp/td2" --double-bias h.1.mlp.c_fc.bias >/dev/null 2>&1 ||
    { echo "FAIL: torch_dump --double-bias"; fail=1; }
check "a bias of block 1 added twice, at its site" 1 "first differing tensor step1.h.1.mlp.c_fc: element" "$tmp/td2" "$tmp/md"
# a missing input: a message naming it and a non-zero exit, no traceback
out=$($py tools/torch_dump.py --weights "$tmp/missing.st" $io --dump "$tmp/x.st" 2>&1)
rc=$?
{ [ $rc != 0 ] && echo "$out" | grep -q "torch_dump: $tmp/missing.st: No such file or directory" &&
    ! echo "$out" | grep -q Traceback; } || { echo "FAIL: torch_dump on a missing file (exit $rc): $out"; fail=1; }
[ $fail = 0 ] && echo "torch_dump_cli: all passed"
exit $fail
