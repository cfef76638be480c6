"""The PyTorch side of `minidc bench train`: the same GPT-2 training step (forward, backward,
global-norm clipping, AdamW) on CPU, 2 threads, in PyTorch's best setting on this machine
(OMP_WAIT_POLICY=PASSIVE, multi-tensor AdamW). Prints one line: wall ms per step and CPU ms per step divided by the thread count (medians; the
second is what the step costs when the cores are shared with other work).
Usage: /usr/bin/python3 tests/bench_torch.py --config tiny|small|gpt2 [--batch 4] [--seq T] [--steps N]
OPENBLAS_CORETYPE is set as minidc sets it (Debian's OpenBLAS 0.3.21 falls back to its
Prescott kernels on CPUs newer than itself), so both sides use the same BLAS kernels."""
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if "OPENBLAS_CORETYPE" not in os.environ:
    flags = open("/proc/cpuinfo").read()
    if " avx512f" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif " avx2" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {"tiny": (512, 512, 64, 2, 4, 128), "small": (4096, 4096, 128, 4, 8, 256),
           "gpt2": (50257, 50304, 1024, 12, 12, 768)}


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
        att = att.masked_fill(mask[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, Vp, T, L, H, C):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)))

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="tiny", choices=CONFIGS)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--steps", type=int, default=0)
    a = ap.parse_args()
    V, Vp, Tc, L, H, C = CONFIGS[a.config]
    T = a.seq or min(256, Tc)
    steps = a.steps or {"tiny": 30, "small": 10, "gpt2": 3}[a.config]
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = GPT(V, Vp, Tc, L, H, C)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, foreach=True)
    x = torch.randint(0, V, (a.batch, T))
    y = torch.randint(0, V, (a.batch, T))
    times, cpu = [], []
    for s in range(steps + 1):  # the first step warms up
        t0, c0 = time.perf_counter(), time.process_time()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if s:
            times.append(time.perf_counter() - t0)
            cpu.append((time.process_time() - c0) / 2)
    times.sort()
    cpu.sort()
    print("%.3f %.3f" % (1e3 * times[len(times) // 2], 1e3 * cpu[len(cpu) // 2]))


if __name__ == "__main__":
    sys.exit(main())
