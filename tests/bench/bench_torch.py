"""The PyTorch side of `minidc bench train`: the same training step as minidc's (forward,
backward, global-norm clipping, AdamW; fp32, minidc's initialisation) on CPU, in PyTorch's best
setting on this machine, for GPT-2 (pre-LN, learned positions, causal attention, 4C tanh-GELU
MLP, tied LM head) and Llama (RMSNorm, rotary positions, grouped-query causal attention, SwiGLU
MLP, no biases, untied LM head; Hugging Face's LlamaForCausalLM). Prints one line: wall ms per
step and CPU ms per step divided by the 2 cores (medians over the timed steps; the second is
what the step costs when the cores are shared).
Usage: /usr/bin/python3 tests/bench/bench_torch.py --config tiny|small|gpt2|llama-tiny|llama-gpt2
       [--batch 4] [--seq T] [--steps N] [--threads 2] [--blas-threads 2]
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

# minidc's named configs (ref/model/gpt2.c, mdc_gpt2_config_named; ref/model/family.c,
# mdc_i_family_named): V, Vp (the vocabulary padded to a multiple of 128), context, L, H, C;
# Llama's add kv heads, intermediate_size, rms_norm_eps, rope_theta and the llama3 rope_scaling
# (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings) or None.
CONFIGS = {"tiny": (512, 512, 64, 2, 4, 128), "small": (4096, 4096, 128, 4, 8, 256),
           "gpt2": (50257, 50304, 1024, 12, 12, 768)}
LLAMA = {"llama-tiny": (512, 512, 64, 2, 4, 128, 2, 352, 1e-5, 500000.0, (8.0, 1.0, 4.0, 32)),
         "llama-gpt2": (50257, 50304, 1024, 12, 12, 768, 4, 2048, 1e-5, 500000.0, None)}
SIZE = {"llama-tiny": "tiny", "llama-gpt2": "gpt2"}  # steps and warm-up as the GPT-2 config's

ap = argparse.ArgumentParser()
ap.add_argument("--config", default="tiny", choices=list(CONFIGS) + list(LLAMA))
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


class RMSNorm(nn.Module):  # LlamaRMSNorm: w * x / sqrt(mean(x^2) + eps)
    def __init__(self, C, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(C)), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope_tables(d, T, theta, scaling):
    """cos and sin (T, d) as transformers builds them in float32: inv_freq = 1 / theta^(2j/d),
    with llama3 scaling as _compute_llama3_parameters adjusts it; angles pos * inv_freq, the
    halves repeated (rotate_half's layout)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    if scaling:
        factor, low, high, old = scaling
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv_freq
        inv_llama = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(medium, smoothed, inv_llama)
    freqs = torch.arange(T).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rope(x, cos, sin):  # x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class LlamaBlock(nn.Module):
    """LlamaDecoderLayer. q_proj|k_proj|v_proj are one product and gate_proj|up_proj another
    (the same products, fused as minidc's kernels fuse them: fewer, larger sgemm calls)."""

    def __init__(self, C, H, KV, I, eps):
        super().__init__()
        self.H, self.KV, self.d, self.I = H, KV, C // H, I
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(C, eps), RMSNorm(C, eps)
        self.qkv_proj = nn.Linear(C, (H + 2 * KV) * self.d, bias=False)
        self.o_proj = nn.Linear(H * self.d, C, bias=False)
        self.gate_up_proj = nn.Linear(C, 2 * I, bias=False)
        self.down_proj = nn.Linear(I, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        H, KV, d = self.H, self.KV, self.d
        q, k, v = self.qkv_proj(self.input_layernorm(x)).split((H * d, KV * d, KV * d), dim=2)
        q = rope(q.view(B, T, H, d).transpose(1, 2), cos, sin)
        k = rope(k.view(B, T, KV, d).transpose(1, 2), cos, sin)
        v = v.view(B, T, KV, d).transpose(1, 2)
        # repeat_kv: query head h reads kv head h // (H / KV)
        k, v = (t[:, :, None].expand(B, KV, H // KV, T, d).reshape(B, H, T, d) for t in (k, v))
        y = attention(q, k, v).transpose(1, 2).contiguous().view(B, T, H * d)
        x = x + self.o_proj(y)
        gate, up = self.gate_up_proj(self.post_attention_layernorm(x)).split(self.I, dim=2)
        return x + self.down_proj(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, V, Vp, T, L, H, C, KV, I, eps, theta, scaling):
        super().__init__()
        self.embed_tokens = nn.Embedding(Vp, C)
        self.layers = nn.ModuleList(LlamaBlock(C, H, KV, I, eps) for _ in range(L))
        self.norm = RMSNorm(C, eps)
        self.lm_head = nn.Linear(C, Vp, bias=False)
        cos, sin = rope_tables(C // H, T, theta, scaling)  # built once, as minidc's tables
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        # matrices N(0, 0.02), the output projections N(0, 0.02 / sqrt(2 L)), RMSNorm weights 1
        with torch.no_grad():
            for n, p in self.named_parameters():
                if p.dim() == 2:
                    proj = n.endswith(("o_proj.weight", "down_proj.weight"))
                    p.normal_(0, 0.02 / math.sqrt(2 * L) if proj else 0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = self.embed_tokens(idx)
        for b in self.layers:
            x = b(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    shape = LLAMA[a.config] if a.config in LLAMA else CONFIGS[a.config]
    V, Tc, size = shape[0], shape[2], SIZE.get(a.config, a.config)
    T = a.seq or min(256, Tc)
    steps = a.steps or {"tiny": 50, "small": 15, "gpt2": 3}[size]
    warm = {"tiny": 3, "small": 2, "gpt2": 1}[size]  # the first allocates AdamW's state
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Llama(*shape) if a.config in LLAMA else GPT(*shape)
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
