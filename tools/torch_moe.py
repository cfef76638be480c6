"""A plain float64 PyTorch GPT-2 whose MLPs are Mixture-of-Experts layers (every moe_every-th block,
from block 0): the reference tests/xcheck/xcheck_moe.py checks minidc's MoE model against. GPT-2 itself is
tools/torch_gpt2.py's. Run with Debian's PyTorch (/usr/bin/python3).

Config keys: V, T, L, H, C as torch_gpt2; E experts, topk, moe_every, capacity_factor (0 =
dropless), drop ("position" | "probs"), renorm (bool), aux (load-balancing coefficient), z
(router z-loss coefficient). A MoE block's tensors follow h.N.ln_2.bias: h.N.mlp.router.weight
[C, E] (no bias), then h.N.mlp.experts.J.{c_fc.weight, c_fc.bias, c_proj.weight, c_proj.bias}."""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from torch_gpt2 import write_safetensors


def is_moe(c, l):
    return c["E"] > 0 and l % c.get("moe_every", 1) == 0


class MoEGPT2(torch.nn.Module):
    def __init__(self, c, gen, router_std=0.2):
        super().__init__()
        self.c = c
        V, T, L, C = c["V"], c["T"], c["L"], c["C"]
        p = {}

        def rnd(*shape, std=0.02, mean=0.0):
            return mean + std * torch.randn(*shape, generator=gen, dtype=torch.float64)

        def mlp(pre):
            p[pre + "c_fc.weight"] = rnd(C, 4 * C)
            p[pre + "c_fc.bias"] = rnd(4 * C)
            p[pre + "c_proj.weight"] = rnd(4 * C, C, std=0.02 / (2 * L) ** 0.5)
            p[pre + "c_proj.bias"] = rnd(C)

        p["wte.weight"] = rnd(V, C)
        p["wpe.weight"] = rnd(T, C, std=0.01)
        for i in range(L):
            h = f"h.{i}."
            p[h + "ln_1.weight"] = rnd(C, std=0.1, mean=1.0)
            p[h + "ln_1.bias"] = rnd(C)
            p[h + "attn.c_attn.weight"] = rnd(C, 3 * C)
            p[h + "attn.c_attn.bias"] = rnd(3 * C)
            p[h + "attn.c_proj.weight"] = rnd(C, C, std=0.02 / (2 * L) ** 0.5)
            p[h + "attn.c_proj.bias"] = rnd(C)
            p[h + "ln_2.weight"] = rnd(C, std=0.1, mean=1.0)
            p[h + "ln_2.bias"] = rnd(C)
            if is_moe(c, i):
                # a router far from uniform: the top-k choice is then not decided by rounding
                p[h + "mlp.router.weight"] = rnd(C, c["E"], std=router_std)
                for j in range(c["E"]):
                    mlp(f"{h}mlp.experts.{j}.")
            else:
                mlp(h + "mlp.")
        p["ln_f.weight"] = rnd(C, std=0.1, mean=1.0)
        p["ln_f.bias"] = rnd(C)
        self.names = list(p)
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(v) for v in p.values()])
        self.p = dict(zip(self.names, self.ps))
        self.reset_stats()

    def load(self, weights, dtype=torch.float64):
        """Sets every tensor from a dict name -> numpy array (e.g. a read_safetensors result)."""
        with torch.no_grad():
            for n, q in zip(self.names, self.ps):
                q.data = torch.from_numpy(np.array(weights[n])).to(dtype)

    def reset_stats(self):
        # the smallest p gap the discrete decisions hinge on, over every forward since the reset:
        # k-th vs (k+1)-th p of a token, and (policy "probs") an expert's last kept vs first dropped
        self.stats = {"topk_margin": math.inf, "drop_margin": math.inf, "dropped": 0, "assigned": 0}

    def keep_mask(self, prob, sel):
        """prob (B,T,E), sel (B,T,k), no gradient: which assignments fit their expert's capacity
        (each sequence is a group of T tokens)."""
        c = self.c
        B, T, k = sel.shape
        keep = torch.ones(B, T, k, dtype=torch.bool)
        f = c["capacity_factor"]
        if f == 0:
            return keep
        cap = math.ceil(k * T * f / c["E"])
        prob, sel = prob.tolist(), sel.tolist()
        for b in range(B):
            if c["drop"] == "position":  # slot 0 of every position in order, then slot 1, ...
                used = [0] * c["E"]
                for s in range(k):
                    for t in range(T):
                        j = sel[b][t][s]
                        if used[j] < cap:
                            used[j] += 1
                        else:
                            keep[b, t, s] = False
            else:  # "probs": each expert keeps its cap highest p, ties to the earlier position
                for j in range(c["E"]):
                    mine = sorted((-prob[b][t][j], t, s) for t in range(T) for s in range(k) if sel[b][t][s] == j)
                    for _, t, s in mine[cap:]:
                        keep[b, t, s] = False
                    if len(mine) > cap:
                        gap = mine[cap][0] - mine[cap - 1][0]
                        self.stats["drop_margin"] = min(self.stats["drop_margin"], gap)
        return keep

    def moe(self, i, x):
        """Block i's MoE layer on x (B,T,C): the output, the aux loss and the z-loss."""
        c, p = self.c, self.p
        B, T, C = x.shape
        E, k = c["E"], c["topk"]
        h = f"h.{i}.mlp."
        z = x @ p[h + "router.weight"]
        prob = z.softmax(-1)
        # top-k, ties to the lower expert index: a stable sort of -p
        ps, order = torch.sort(-prob.detach(), dim=-1, stable=True)
        sel = order[..., :k]
        if k < E:
            gap = (ps[..., k] - ps[..., k - 1]).min().item()
            self.stats["topk_margin"] = min(self.stats["topk_margin"], gap)
        gate = prob.gather(-1, sel)
        if c["renorm"]:
            gate = gate / gate.sum(-1, keepdim=True)
        keep = self.keep_mask(prob.detach(), sel)
        self.stats["dropped"] += int((~keep).sum())
        self.stats["assigned"] += keep.numel()
        # w[b,t,j]: token (b,t)'s weight for expert j (0 where not chosen or dropped); the gradient
        # reaches the router through the gates only, never through sel or keep
        w = (F.one_hot(sel, E).to(x.dtype) * (gate * keep)[..., None]).sum(-2)
        out = 0
        for j in range(E):
            e = f"{h}experts.{j}."
            a = F.gelu(x @ p[e + "c_fc.weight"] + p[e + "c_fc.bias"], approximate="tanh")
            out = out + w[..., j:j + 1] * (a @ p[e + "c_proj.weight"] + p[e + "c_proj.bias"])
        frac = F.one_hot(sel.reshape(B, T * k), E).sum(1).to(x.dtype) / (k * T)  # before dropping
        aux = c["aux"] * E * (frac * prob.mean(1)).sum(-1).mean()
        zl = c["z"] * torch.logsumexp(z, -1).pow(2).mean()
        return out, aux, zl

    def forward(self, idx, targets):
        """(logits, total objective, mean cross-entropy, sum of aux losses, sum of z-losses)"""
        c, p = self.c, self.p
        B, T = idx.shape
        C, H = c["C"], c["H"]
        x = p["wte.weight"][idx] + p["wpe.weight"][:T]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        aux = zl = torch.zeros((), dtype=x.dtype)
        for i in range(c["L"]):
            h = f"h.{i}."
            a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps=1e-5)
            qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=2))
            att = (q @ k.transpose(-2, -1)) / (C // H) ** 0.5
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
            a = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps=1e-5)
            if is_moe(c, i):
                m, la, lz = self.moe(i, a)
                x, aux, zl = x + m, aux + la, zl + lz
            else:
                a = F.gelu(a @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
                x = x + a @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
        x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
        logits = x @ p["wte.weight"].t()
        ce = F.cross_entropy(logits.reshape(-1, c["V"]), targets.reshape(-1))
        return logits, ce + aux + zl, ce, aux, zl


def write_moe_case(d, c, seed):
    """Random weights (float32 safetensors, heads and top-k in __metadata__), tokens x.npy
    (int64, c["B"] sequences of c["T"]) and next-token targets y.npy (int32) in directory d;
    returns the three paths."""
    gen = torch.Generator().manual_seed(seed)
    model = MoEGPT2(c, gen)
    ids = torch.randint(0, c["V"], (c.get("B", 2), c["T"] + 1), generator=gen)
    name = c.get("name", "moe")
    paths = [os.path.join(d, name + s) for s in (".safetensors", ".x.npy", ".y.npy")]
    meta = {"format": "pt", "n_head": str(c["H"]), "moe_topk": str(c["topk"])}
    write_safetensors(paths[0], {n: q.detach().float().numpy() for n, q in zip(model.names, model.ps)}, meta)
    np.save(paths[1], ids[:, :-1].numpy().astype(np.int64))
    np.save(paths[2], ids[:, 1:].numpy().astype(np.int32))
    return paths
