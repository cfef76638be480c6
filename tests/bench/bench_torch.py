"""The PyTorch side of `minidc bench train`: the same GPT-2 training step as minidc's (forward,
backward, global-norm clipping, AdamW; pre-LN, learned positions, causal attention, 4C tanh-GELU
MLP, tied LM head, fp32, minidc's initialisation) on CPU, in PyTorch's best setting on this
machine. Prints one line: wall ms per step and CPU ms per step divided by the 2 cores (medians
over the timed steps; the second is what the step costs when the cores are shared).
Usage: /usr/bin/python3 tests/bench/bench_torch.py --config tiny|small|gpt2 [--batch 4] [--seq T]
       [--steps N] [--threads 2] [--blas-threads 2]
--threads is PyTorch's own (OpenMP) thread count, used by its elementwise, normalisation and
softmax kernels; --blas-threads is OpenBLAS's, which runs every matmul (PyTorch hands a whole
product to sgemm and does not split it itself). tools/bench.sh runs --threads 2 and 1 and keeps
the faster; see docs/performance.md, "The PyTorch reference".
The environment is fixed here, before torch loads OpenBLAS, whatever the caller exported:
- OPENBLAS_NUM_THREADS = --blas-threads (tools/bench.sh exports 1 for minidc, which cuts its
  products into blocks on its own OpenMP team; inherited, it ran PyTorch's matmuls on one core);
- OMP_WAIT_POLICY=PASSIVE unless set (spinning OpenMP threads take the core from OpenBLAS's);
- OPENBLAS_CORETYPE, when unset, as minidc sets it (Debian's OpenBLAS 0.3.21 falls back to its
  Prescott kernels on CPUs newer than itself), so both sides use the same BLAS kernels;
- GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (re-executing once to set it): PyTorch on CPU frees
  through glibc, which returns every large block to the kernel, so each step faults its
  activations and gradients in again, 4 KiB at a time; with transparent huge pages on malloc'd
  memory the faults are 2 MiB each."""
import argparse
import os
import sys

CONFIGS = {"tiny": (512, 512, 64, 2, 4, 128), "small": (4096, 4096, 128, 4, 8, 256),
           "gpt2": (50257, 50304, 1024, 12, 12, 768)}

ap = argparse.ArgumentParser()
ap.add_argument("--config", default="tiny", choices=CONFIGS)
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seq", type=int, default=0)
ap.add_argument("--steps", type=int, default=0)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--blas-threads", type=int, default=2)
a = ap.parse_args()

if "glibc.malloc.hugetlb" not in os.environ.get("GLIBC_TUNABLES", ""):
    t = os.environ.get("GLIBC_TUNABLES")
    os.environ["GLIBC_TUNABLES"] = (t + ":" if t else "") + "glibc.malloc.hugetlb=1"
    os.execv(sys.executable, [sys.executable] + sys.argv)
os.environ["OPENBLAS_NUM_THREADS"] = str(a.blas_threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if "OPENBLAS_CORETYPE" not in os.environ:
    flags = open("/proc/cpuinfo").read()
    if " avx512f" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif " avx2" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Causal attention without the (T, T) mask pass: torch >= 2.0's scaled_dot_product_attention,
# or 1.13's private one (the same math; 3-4% faster a step here than masked_fill + softmax).
if hasattr(F, "scaled_dot_product_attention"):
    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
else:
    def attention(q, k, v):
        return F._scaled_dot_product_attention(q, k, v, is_causal=True)[0]


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = attention(q, k, v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, Vp, T, L, H, C):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        # mdc_gpt2_init's distribution: matrices N(0, 0.02), the two output projections
        # N(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm 1 and 0. (PyTorch's defaults, N(0, 1)
        # embeddings, give an initial loss of 87-480 instead of ln V and a saturated softmax.)
        with torch.no_grad():
            for n, p in self.named_parameters():
                if p.dim() == 2:
                    proj = n.endswith(("c_proj.weight", "mlp_proj.weight"))
                    p.normal_(0, 0.02 / math.sqrt(2 * L) if proj else 0.02)
                else:
                    p.fill_(1.0 if "ln_" in n and n.endswith(".weight") else 0.0)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    V, Vp, Tc, L, H, C = CONFIGS[a.config]
    T = a.seq or min(256, Tc)
    steps = a.steps or {"tiny": 50, "small": 15, "gpt2": 3}[a.config]
    warm = {"tiny": 3, "small": 2, "gpt2": 1}[a.config]  # the first allocates AdamW's state
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(V, Vp, Tc, L, H, C)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, foreach=True)
    x = torch.randint(0, V, (a.batch, T))
    y = torch.randint(0, V, (a.batch, T))
    times, cpu = [], []
    for s in range(warm + steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if s >= warm:
            times.append(time.perf_counter() - t0)
            cpu.append((time.process_time() - c0) / 2)
    times.sort()
    cpu.sort()
    print("%.3f %.3f" % (1e3 * times[len(times) // 2], 1e3 * cpu[len(cpu) // 2]))
    print("# torch %s, %d+%d threads (aten+OpenBLAS), OPENBLAS_CORETYPE=%s, loss %.4f" % (
        torch.__version__, a.threads, a.blas_threads, os.environ.get("OPENBLAS_CORETYPE", "-"),
        loss.item()), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
