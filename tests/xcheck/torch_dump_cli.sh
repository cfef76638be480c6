#!/bin/bash
# The cross-check workflow: tools/torch_dump.py (Debian's PyTorch, CPU) writes the tensors
# `minidc forward --dump` writes, under the same names; `minidc compare` finds the float32 and
# float64 PyTorch runs equal to minidc's within float32's tolerance, a bf16-autocast run equal
# only at a bf16-sized tolerance, and a weight of block 1 perturbed on the PyTorch side is
# reported with logits as the first differing tensor (exit 1). With --dump-dir on both sides the
# tensors at every site compare clean, and the same perturbed weight is reported at its site
# (h.1.attn.c_proj), a bias added twice at its (h.1.mlp.c_fc). A Llama, Qwen2 and Qwen3
# directory minidc saves (tools/torch_family.py's model on the PyTorch side) compares clean with
# --dump and at every site (rope_q, rope_k, q_norm, k_norm, the SwiGLU gate, up and product among
# them) in float32 and float64, and block 1's k left unrotated is reported at its site
# (h.1.attn.rope_k). A Mixtral, a Qwen3-MoE (qwen3-moe-tiny: block 0 dense, block 1 sparse), a
# Qwen2-MoE and a DeepSeek-routed directory (trained a step with the routing bias and transformers'
# aux loss: e_score_correction_bias and output_router_logits in it) compare clean with --dump
# (loss.aux, loss.z, loss.lb among the tensors) and at every site in float32 (a sparse block's
# router scores, its choices as int32, their gates, its experts' outputs in slot order and their
# gated sum, the router's and every expert's gradients among them). Skipped (77) without PyTorch.
# Each comparison is a scenario (tests/cli/scenario.sh); a PyTorch dump is made when a scenario
# reading it is selected.
. "$(dirname "$0")/../cli/scenario.sh"
BUILD=${BUILD:-build}
bin=$BUILD/minidc
py=/usr/bin/python3
$py -c "import torch, numpy" 2>/dev/null || { echo "skipped: $py has no torch/numpy (python3-torch python3-numpy)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$bin" train --vocab 128 --ctx 16 --layers 2 --heads 2 --channels 32 --batch 2 --steps 1 --quiet --save "$tmp/w.st" \
    >/dev/null 2>&1 || { flunk "setup: a checkpoint to compare on" "minidc train failed"; exit 1; }
$py - "$tmp" <<'PY' || { flunk "setup: writing tokens" "python failed"; exit 1; }
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
"$bin" forward --weights "$tmp/w.st" $io --dump "$tmp/minidc.st" >/dev/null || { flunk "setup: minidc forward" "exit $?"; exit 1; }
any() { local l; for l; do scenario "$l" && return 0; done; return 1; } # labels...: one is selected
check() { # what want_rc pattern compare-args...
    local what=$1 want=$2 pat=$3; shift 3
    scenario "$what" || return 0
    "$bin" compare "$@" --quiet >"$tmp/out" 2>&1
    local rc=$?
    if [ $rc = "$want" ] && grep -q -- "$pat" "$tmp/out"; then pass "$what"; echo "  $(head -1 "$tmp/out")"
    else flunk "$what" "exit $rc, want $want"; cat "$tmp/out"; fi
}
torch_dump() { # what-for, torch_dump.py args...: a failed run is flunked as a setup step
    local what=$1; shift
    $py tools/torch_dump.py "$@" >/dev/null 2>&1 || flunk "setup: torch_dump $what" "exit $?"
}
fp32="PyTorch fp32 against minidc"
fp64="PyTorch fp64 against minidc"
bf16a="PyTorch bf16 autocast at BF16's own tolerance"
bf16b="PyTorch bf16 autocast at rtol 0.1, atol 2e-2"
scenario "$fp32" && torch_dump "--dtype fp32" --weights "$tmp/w.st" $io --dump "$tmp/torch_fp32.st" --dtype fp32
scenario "$fp64" && torch_dump "--dtype fp64" --weights "$tmp/w.st" $io --dump "$tmp/torch_fp64.st" --dtype fp64
any "$bf16a" "$bf16b" && torch_dump "--dtype bf16" --weights "$tmp/w.st" $io --dump "$tmp/torch_bf16.st" --dtype bf16
check "$fp32" 0 "EQUAL: 31 tensors" "$tmp/torch_fp32.st" "$tmp/minidc.st"
check "$fp64" 0 "EQUAL: 31 tensors" "$tmp/torch_fp64.st" "$tmp/minidc.st"
check "$bf16a" 1 "first differing tensor logits" "$tmp/torch_bf16.st" "$tmp/minidc.st"
check "$bf16b" 0 "EQUAL" "$tmp/torch_bf16.st" "$tmp/minidc.st" --rtol 0.1 --atol 2e-2
label="a weight of block 1 perturbed"
if scenario "$label"; then
    torch_dump "(the perturbed weights)" --weights "$tmp/bad.st" $io --dump "$tmp/torch_bad.st"
    check "$label" 1 "first differing tensor logits: element" "$tmp/torch_bad.st" "$tmp/minidc.st"
fi
# every site: the residual stream, each LayerNorm, qkv, the attention, each product, their gradients
sites="PyTorch fp32 against minidc at every site"
perturbed="a weight of block 1 perturbed, at its site"
twice="a bias of block 1 added twice, at its site"
if any "$sites" "$perturbed" "$twice"; then
    "$bin" forward --weights "$tmp/w.st" $io --dump-dir "$tmp/md" >/dev/null || { flunk "setup: minidc forward --dump-dir" "exit $?"; exit 1; }
fi
if scenario "$sites"; then
    torch_dump "--dump-dir" --weights "$tmp/w.st" $io --dump-dir "$tmp/td"
    check "$sites" 0 "EQUAL: 78 tensors" "$tmp/td" "$tmp/md"
fi
if scenario "$perturbed"; then
    torch_dump "--dump-dir (the perturbed weights)" --weights "$tmp/bad.st" $io --dump-dir "$tmp/tdbad"
    check "$perturbed" 1 "first differing tensor step1.h.1.attn.c_proj: element" "$tmp/tdbad" "$tmp/md"
fi
if scenario "$twice"; then
    torch_dump "--double-bias" --weights "$tmp/w.st" $io --dump-dir "$tmp/td2" --double-bias h.1.mlp.c_fc.bias
    check "$twice" 1 "first differing tensor step1.h.1.mlp.c_fc: element" "$tmp/td2" "$tmp/md"
fi
# the families: a directory minidc saves (config.json, model.safetensors), the same tokens
for f in "llama 24 83" "qwen2 29 88" "qwen3 27 94"; do
    set -- $f
    c=$1 ndump=$2 nsites=$3
    fam32="$c: PyTorch fp32 against minidc"
    famsites="$c: PyTorch fp32 against minidc at every site"
    fam64="$c: PyTorch fp64 against minidc at every site"
    unrot="$c: k of block 1 not rotated, at its site"
    any "$fam32" "$famsites" "$fam64" "$unrot" || continue
    "$bin" train --config $c-tiny --steps 1 --quiet --save "$tmp/$c/" >/dev/null 2>&1 &&
        "$bin" forward --weights "$tmp/$c" $io --dump "$tmp/$c.st" --dump-dir "$tmp/md_$c" >/dev/null ||
        { flunk "setup: $c-tiny saved and replayed by minidc forward" "exit $?"; continue; }
    any "$fam32" "$famsites" && torch_dump "$c" --weights "$tmp/$c" $io --dump "$tmp/t_$c.st" --dump-dir "$tmp/td_$c"
    check "$fam32" 0 "EQUAL: $ndump tensors" "$tmp/t_$c.st" "$tmp/$c.st"
    check "$famsites" 0 "EQUAL: $nsites tensors" "$tmp/td_$c" "$tmp/md_$c"
    scenario "$fam64" && torch_dump "$c --dtype fp64" --weights "$tmp/$c" $io --dump-dir "$tmp/td64_$c" --dtype fp64
    check "$fam64" 0 "EQUAL: $nsites tensors" "$tmp/td64_$c" "$tmp/md_$c"
    scenario "$unrot" && torch_dump "$c --unrotated-k 1" --weights "$tmp/$c" $io --dump-dir "$tmp/tdk_$c" --unrotated-k 1
    check "$unrot" 1 "first differing tensor step1.h.1.attn.rope_k: element" "$tmp/tdk_$c" "$tmp/md_$c"
done
# the mixtures of experts: a directory minidc saves, the same tokens, in float32
for f in "mixtral 70 123" "qwen3-moe 45 108" "qwen2-moe 59 116" \
    "deepseek-moe 91 187 --moe-bias-rate 0.01 --router-aux-loss 0.02"; do
    set -- $f
    c=$1 ndump=$2 nsites=$3
    shift 3
    moe32="$c: PyTorch fp32 against minidc"
    moesites="$c: PyTorch fp32 against minidc at every site"
    any "$moe32" "$moesites" || continue
    "$bin" train --config $c-tiny --steps 1 --quiet --save "$tmp/$c/" "$@" >/dev/null 2>&1 &&
        "$bin" forward --weights "$tmp/$c" $io --dump "$tmp/$c.st" --dump-dir "$tmp/md_$c" >/dev/null ||
        { flunk "setup: $c-tiny saved and replayed by minidc forward" "exit $?"; continue; }
    torch_dump "$c" --weights "$tmp/$c" $io --dump "$tmp/t_$c.st" --dump-dir "$tmp/td_$c"
    check "$moe32" 0 "EQUAL: $ndump tensors" "$tmp/t_$c.st" "$tmp/$c.st"
    check "$moesites" 0 "EQUAL: $nsites tensors" "$tmp/td_$c" "$tmp/md_$c"
done
# a missing input: a message naming it and a non-zero exit, no traceback
label="torch_dump on a missing file: a message naming it, no traceback"
if scenario "$label"; then
    out=$($py tools/torch_dump.py --weights "$tmp/missing.st" $io --dump "$tmp/x.st" 2>&1)
    rc=$?
    { [ $rc != 0 ] && echo "$out" | grep -q "torch_dump: $tmp/missing.st: No such file or directory" &&
        ! echo "$out" | grep -q Traceback; } && pass "$label" || flunk "$label" "exit $rc: $out"
fi
exit $fail
