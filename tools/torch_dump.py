#!/usr/bin/python3
"""The PyTorch side of a cross-check: loads the weights `minidc forward` takes (a safetensors
file, or a Hugging Face directory with config.json and model.safetensors), runs one forward and
backward on the same tokens, on the CPU or a CUDA device, in float32, float64 or under bf16
autocast, and writes what `minidc forward --dump` writes under the same names: logits (B, T, V),
loss, losses (B, T), grad.<name> (named as the weights file spells them), in execution order (BF16
after a bf16 run, so the comparison takes BF16's tolerance). Then `minidc compare torch.st
minidc.st` names the first tensor that differs. The model is a plain GPT-2 (tools/torch_gpt2.py),
or, for a directory whose config.json says model_type llama, qwen2, qwen3, mixtral, qwen3_moe or
qwen2_moe, that family's decoder (tools/torch_family.py, via tools/torch_family_dump.py; model.safetensors or
the shards model.safetensors.index.json names), its gradients in minidc's order (a MoE family's
dump has loss.aux and loss.z after losses, zero as minidc's for the directory, and where config.json
has output_router_logits loss.lb, transformers' auxiliary term, which loss includes).
With --dump-dir D it writes what `minidc forward --dump-dir` writes: the tensors at every site
(the residual stream at each block boundary, each norm, qkv, the attention's output, each
linear's product, the GELU; a family's q_norm, k_norm, rotated q and k, SwiGLU's gate, up and
product; a sparse block's router p (DeepSeek-V3 routing's sigmoid scores s) and its k chosen
experts' outputs, forward only as minidc dumps them, the shared expert's output (Qwen2-MoE's, or
n_shared_experts'), and the block's sum; ln_f, the logits, the
losses), their gradients and the parameters' gradients, as D/step1-rank0.safetensors in minidc's dump format (include/minidc/dump.h), so
`minidc compare D minidc_dir` names the first site where the two runs part.

  /usr/bin/python3 tools/torch_dump.py --weights W --tokens X.npy --targets Y.npy
                   (--dump OUT.st | --dump-dir D) [--heads H] [--device cpu|cuda] [--dtype fp32|fp64|bf16]
                   [--double-bias NAME]  (GPT-2; a planted bug for the tests: bias NAME added twice)
                   [--unrotated-k N]     (a family; a planted bug for the tests: block N's k not rotated)
Exit 0 written, 2 bad usage or input."""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_family_dump as family  # noqa: E402
from torch_gpt2 import GPT2, read_safetensors, write_safetensors  # noqa: E402


def load(path, heads):
    """HF-named float32 tensors and the config (V, T, L, H, C)."""
    meta_heads = None
    if os.path.isdir(path):
        with open(os.path.join(path, "config.json")) as f:
            meta_heads = json.load(f)["n_head"]
        path = os.path.join(path, "model.safetensors")
    tensors, meta = read_safetensors(path, with_metadata=True)
    # the names are written as this file spells them (as minidc forward does): its wte's name
    wname = next((k for k in tensors if k in ("wte", "wte.weight", "transformer.wte", "transformer.wte.weight")),
                 "wte.weight")
    prefix = "transformer." if wname.startswith("transformer.") else ""
    short = wname.endswith("wte")

    def spelled(hf):
        return prefix + ({"wte.weight": "wte", "wpe.weight": "wpe"}.get(hf, hf) if short else hf)
    w = {}
    for name, a in tensors.items():
        n = name[len("transformer."):] if name.startswith("transformer.") else name
        n = {"wte": "wte.weight", "wpe": "wpe.weight"}.get(n, n)
        if n.endswith(".attn.bias") and a.ndim == 4 or n.endswith(".attn.masked_bias") or n == "lm_head.weight":
            continue  # causal-mask buffers and the tied head
        if n.startswith(("adam.", "grad.", "final.")):
            continue  # a checkpoint's moments
        w[n] = np.array(a, np.float32)  # a writable copy
    H = heads or meta_heads or int(meta.get("n_head", 0))
    if not H:
        raise SystemExit("torch_dump: the number of heads is not in the file: give --heads")
    V, C = w["wte.weight"].shape
    L = 1 + max(int(n.split(".")[1]) for n in w if n.startswith("h."))
    return w, dict(V=V, T=w["wpe.weight"].shape[0], L=L, H=H, C=C), spelled


BLOCK_SITES = ["in", "ln_1", "attn.qkv", "attn.y", "attn.c_proj", "res_2", "ln_2", "mlp.c_fc", "mlp.gelu",
               "mlp.c_proj", "out"]


def write_dump_dir(d, sites, losses, params, layers, bf16, block_sites=BLOCK_SITES):
    """sites: name -> tensor in execution order (forward), with .grad after the backward;
    params: [(name, parameter)], their gradients in this order; block_sites: a block's sites,
    whose gradients are written in the backward's order (a list for every block, or a function
    of the block's index)."""
    out, order = {}, []
    for n, t in sites.items():
        out["step1." + n] = t
        order.append("step1." + n)
    out["step1.losses"] = losses
    order.append("step1.losses")
    per_block = block_sites if callable(block_sites) else lambda i: block_sites
    back = ["logits", "ln_f"] + [f"h.{i}.{s}" for i in reversed(range(layers)) for s in reversed(per_block(i))]
    for n in back:
        out["step1.grad." + n] = sites[n].grad
        order.append("step1.grad." + n)
    for n, p in params:
        out["step1.grad." + n] = p.grad
        order.append("step1.grad." + n)
    ints = {k for k, v in out.items() if not v.is_floating_point()}  # a MoE block's choices: int32
    out = {k: v.detach().cpu().numpy().astype(np.int32) if k in ints else v.detach().float().cpu().numpy()
           for k, v in out.items()}
    meta = {"dump.format": "minidc-dump 1", "dump.run": "torch_dump", "dump.rank": "0 of 1", "dump.mesh": "PyTorch",
            "producer": "tools/torch_dump.py"}
    for k, name in enumerate(order):
        shape = list(out[name].shape)
        meta["dump:" + name] = json.dumps({"global": name, "shape": shape, "sum": 0, "order": k,
                                           "map": [[[0, 0, n]] for n in shape]}, separators=(",", ":"))
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "step1-rank0.safetensors"), out, meta, order,
                      bf16=[n for n in order if n not in ints] if bf16 else ())
    return len(order)


def run_gpt2(c, w, spelled, x, y, dtype, dev, bf16, double_bias):
    """(params, sites, logits, loss): one forward at dtype on dev (under bf16 autocast where bf16);
    params: [(name as the weights file spells it, parameter)]."""
    model = GPT2(c, torch.Generator().manual_seed(0))
    with torch.no_grad():
        for n, p in zip(model.names, model.ps):
            p.data = torch.from_numpy(w[n]).to(dtype)
    model.to(dev)
    sites = {}
    with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
        logits, loss = model(x, y, sites, double_bias)
    return [(spelled(n), p) for n, p in zip(model.names, model.ps)], sites, logits, loss


def ids(path):
    a = np.load(path)
    return torch.from_numpy(np.atleast_2d(a).astype(np.int64))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--targets", required=True)
    ap.add_argument("--dump")
    ap.add_argument("--dump-dir")
    ap.add_argument("--double-bias", action="append", default=[])
    ap.add_argument("--heads", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", choices=["fp32", "fp64", "bf16"], default="fp32")
    ap.add_argument("--unrotated-k", type=int, action="append", default=[])
    a = ap.parse_args()
    if not a.dump and not a.dump_dir:
        ap.error("give --dump or --dump-dir")
    # a missing or unreadable input is an error message naming the file, not a traceback
    try:
        fc = family.family_config(a.weights)
        w, c, spelled = (family.load(a.weights), fc, None) if fc else load(a.weights, a.heads)
        x, y = ids(a.tokens), ids(a.targets)
    except OSError as e:
        raise SystemExit(f"torch_dump: {e.filename or a.weights}: {e.strerror or e}")
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        raise SystemExit(f"torch_dump: cannot read the inputs ({a.weights}, {a.tokens}, {a.targets}): {e!r}")
    if fc and a.double_bias:
        ap.error("--double-bias is GPT-2's; a family's planted bug is --unrotated-k")
    if not fc and a.unrotated_k:
        ap.error("--unrotated-k is the families'; GPT-2's planted bug is --double-bias")
    dev = torch.device(a.device)
    param_dtype = torch.float64 if a.dtype == "fp64" else torch.float32
    x, y = x.to(dev), y.to(dev)
    if fc:
        try:
            params, sites, logits, loss, layers, extra = family.run(c, w, x, y, param_dtype, dev,
                                                                   a.dtype == "bf16", a.unrotated_k)
        except (ValueError, KeyError) as e:
            raise SystemExit(f"torch_dump: {a.weights}: not the {fc['model_type']} model its config.json "
                             f"describes: {e!r}")
        block_sites, V = (lambda i: family.block_sites(c, i, grads=True)), c["vocab_size"]
    else:
        params, sites, logits, loss = run_gpt2(c, w, spelled, x, y, param_dtype, dev, a.dtype == "bf16",
                                               a.double_bias)
        extra = {}
        block_sites, V, layers = BLOCK_SITES, c["V"], c["L"]
    losses = F.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1), reduction="none").reshape(y.shape)
    loss.backward()
    if a.dump_dir:
        n = write_dump_dir(a.dump_dir, sites, losses, params, layers, a.dtype == "bf16", block_sites)
        print(f"torch_dump: {a.dump_dir}/step1-rank0.safetensors: loss {float(loss):.6f}, {n} tensors at their sites")
    if not a.dump:
        return 0
    out = {"logits": logits, "loss": loss, "losses": losses}
    out.update({n: torch.tensor(v) for n, v in extra.items()})
    order = list(out)
    for n, p in params:
        out["grad." + n] = p.grad
        order.append("grad." + n)
    out = {k: v.detach().float().cpu().numpy() for k, v in out.items()}
    # a bf16 run's tensors are bf16-accurate: written as BF16, `minidc compare` applies BF16's tolerance
    write_safetensors(a.dump, out, {"producer": "tools/torch_dump.py", "dtype": a.dtype, "device": a.device}, order,
                      bf16=order if a.dtype == "bf16" else ())
    print(f"torch_dump: {a.dump}: loss {float(out['loss']):.6f}, {len(order)} tensors ({a.dtype} on {a.device})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
