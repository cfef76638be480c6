"""A plain PyTorch GPT-2 with Hugging Face parameter names and the safetensors reading and
writing minidc's PyTorch tools share (tools/torch_dump.py, tests/xcheck/xcheck_torch.py): by hand,
so the `safetensors` and `transformers` packages are not needed. Run with Debian's PyTorch
(/usr/bin/python3)."""
import json
import struct

import numpy as np
import torch
import torch.nn.functional as F


def write_safetensors(path, tensors, metadata=None, order=None, bf16=()):
    """tensors: dict name -> numpy array (float32, int64, int32 or bool), written in key order (sorted
    unless `order` lists the names: a dump's execution order); the names in bf16 as BF16."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    dt = {np.dtype("float32"): "F32", np.dtype("int64"): "I64", np.dtype("int32"): "I32", np.dtype("bool"): "BOOL"}
    for name in order if order is not None else sorted(tensors):
        a = np.asarray(tensors[name])
        a = np.ascontiguousarray(a) if a.ndim else a  # (ascontiguousarray makes a scalar 1-D)
        if name in bf16:  # float32 rounded to its upper half, to nearest even
            u = np.atleast_1d(a.astype(np.float32)).view(np.uint32).astype(np.uint64)
            b, kind = ((u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype(np.uint16).tobytes(), "BF16"
        else:
            b, kind = a.tobytes(), dt[a.dtype]
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path, with_metadata=False):
    """name -> numpy array (F32, F64, F16 and BF16 as float32; I64, I32 as integers)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", None) or {}
    dt = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        buf = raw[8 + n + a:8 + n + b]
        if e["dtype"] == "BF16":  # the upper half of a float32
            x = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            out[name] = x.view(np.float32).reshape(e["shape"])
        else:
            out[name] = np.frombuffer(buf, dtype=dt[e["dtype"]]).reshape(e["shape"])
    return (out, meta) if with_metadata else out


class GPT2(torch.nn.Module):
    """A plain GPT-2 with Hugging Face parameter names (minus the transformer. prefix)."""

    def __init__(self, c, gen):
        super().__init__()
        self.c = c
        V, T, L, C = c["V"], c["T"], c["L"], c["C"]
        p = {}

        def rnd(*shape, std=0.02, mean=0.0):
            return mean + std * torch.randn(*shape, generator=gen, dtype=torch.float64)

        p["wte.weight"] = rnd(V, C)
        p["wpe.weight"] = rnd(T, C, std=0.01)
        for i in range(L):
            h = f"h.{i}."
            # LayerNorm and biases are random too, so every gradient path is exercised
            p[h + "ln_1.weight"] = rnd(C, std=0.1, mean=1.0)
            p[h + "ln_1.bias"] = rnd(C, std=0.02)
            p[h + "attn.c_attn.weight"] = rnd(C, 3 * C)
            p[h + "attn.c_attn.bias"] = rnd(3 * C)
            p[h + "attn.c_proj.weight"] = rnd(C, C, std=0.02 / (2 * L) ** 0.5)
            p[h + "attn.c_proj.bias"] = rnd(C)
            p[h + "ln_2.weight"] = rnd(C, std=0.1, mean=1.0)
            p[h + "ln_2.bias"] = rnd(C)
            p[h + "mlp.c_fc.weight"] = rnd(C, 4 * C)
            p[h + "mlp.c_fc.bias"] = rnd(4 * C)
            p[h + "mlp.c_proj.weight"] = rnd(4 * C, C, std=0.02 / (2 * L) ** 0.5)
            p[h + "mlp.c_proj.bias"] = rnd(C)
        p["ln_f.weight"] = rnd(C, std=0.1, mean=1.0)
        p["ln_f.bias"] = rnd(C)
        self.names = list(p)
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(v) for v in p.values()])
        self.p = dict(zip(self.names, self.ps))

    def forward(self, idx, targets, sites=None, double_bias=()):
        """(logits, mean loss). sites (a dict): each tensor minidc's dumps name (embed, h.N.in,
        h.N.ln_1, ..., ln_f, logits), kept with retain_grad so its gradient can be read after the
        backward. double_bias: names of biases added twice (a planted bug for the tests)."""
        c, p = self.c, self.p
        B, T = idx.shape
        C, H = c["C"], c["H"]

        def site(name, t):
            if sites is not None:
                if t.requires_grad:
                    t.retain_grad()
                sites[name] = t
            return t

        def bias(name):
            return p[name] * (2 if name in double_bias else 1)

        x = site("embed", p["wte.weight"][idx] + p["wpe.weight"][:T])
        mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
        for i in range(c["L"]):
            h = f"h.{i}."
            site(h + "in", x)
            a = site(h + "ln_1", F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps=1e-5))
            qkv = site(h + "attn.qkv", a @ p[h + "attn.c_attn.weight"] + bias(h + "attn.c_attn.bias"))
            q, k, v = qkv.split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / (C // H) ** 0.5
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = site(h + "attn.y", (att @ v).transpose(1, 2).reshape(B, T, C))
            x = site(h + "res_2", x + site(h + "attn.c_proj", y @ p[h + "attn.c_proj.weight"]) + bias(h + "attn.c_proj.bias"))
            a = site(h + "ln_2", F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps=1e-5))
            a = site(h + "mlp.c_fc", a @ p[h + "mlp.c_fc.weight"] + bias(h + "mlp.c_fc.bias"))
            a = site(h + "mlp.gelu", F.gelu(a, approximate="tanh"))
            x = site(h + "out", x + site(h + "mlp.c_proj", a @ p[h + "mlp.c_proj.weight"]) + bias(h + "mlp.c_proj.bias"))
        x = site("ln_f", F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5))
        logits = site("logits", x @ p["wte.weight"].t())
        loss = F.cross_entropy(logits.reshape(-1, c["V"]), targets.reshape(-1))
        return logits, loss
