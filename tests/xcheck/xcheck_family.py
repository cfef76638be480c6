"""Cross-check of minidc's Llama, Qwen2 and Qwen3 families against the independent float64
PyTorch model of tools/torch_family.py, as tests/xcheck/xcheck_torch.py does for GPT-2.

First the reference checks itself: torch.autograd.gradcheck (autograd against finite
differences, float64) on a tiny config of each family; the llama3-scaled inverse frequencies of
config llama against the formula evaluated independently (numpy, float64 and float32); the
rotation against the complex product (q_i + i q_{i+d/2}) e^{i angle}.

Then, per config, a Hugging Face model directory (config.json, model.safetensors, or BF16 shards
with model.safetensors.index.json) and x.npy (int64) / y.npy (int32) are written, `minidc forward
--weights DIR --steps 10` runs on them (the directory's config.json says everything: no --heads),
and logits, loss, every gradient, the loss before each AdamW step and after the last, and every
parameter after the steps (nanoGPT grouping: weight decay on 2-D tensors only, global-norm
clipping first, eps 1e-5 as xcheck_torch.py explains) are compared with xcheck_torch's error
measure, max|minidc - torch| / max|torch| per tensor, bound 1e-5; then the same with --exact.

Configs, odd sizes on purpose: llama (V=97, GQA 6/2, head_dim 16 != C/H = 12, llama3 rope
scaling, untied, attention and MLP biases), qwen2 (tied, q/k/v biases, BF16, two shards), qwen3
(q_norm / k_norm, one kv head, head_dim 24 != C/H = 12, three layers, tied).

Exit 0: pass; 1: an error above the bound or a failure; 77: skipped (no torch, no minidc).
"""
import math
import os
import subprocess
import sys
import tempfile

from xcheck_common import ADAM, MINIDC, TOL, adamw_steps, np, preflight, rel_err, torch

STEPS = 10
from torch_family import (Family, dims, random_weights, rope_cos_sin, rope_inv_freq,  # noqa: E402
                          rotate_half, write_hf_dir)
from torch_gpt2 import read_safetensors  # noqa: E402

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8}
CONFIGS = [
    dict(name="llama", model_type="llama", vocab_size=97, max_position_embeddings=16,
         num_hidden_layers=2, hidden_size=72, num_attention_heads=6, num_key_value_heads=2,
         head_dim=16, intermediate_size=100, rms_norm_eps=1e-5, rope_theta=10000.0,
         rope_scaling=LLAMA3, tie_word_embeddings=False, attention_bias=True, mlp_bias=True,
         B=3, seq=13, bf16=False, shards=1, seed=1),
    dict(name="qwen2", model_type="qwen2", vocab_size=130, max_position_embeddings=16,
         num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
         head_dim=16, intermediate_size=96, rms_norm_eps=1e-6, rope_theta=1e6, rope_scaling=None,
         tie_word_embeddings=True, B=2, seq=16, bf16=True, shards=2, seed=2),
    dict(name="qwen3", model_type="qwen3", vocab_size=97, max_position_embeddings=16,
         num_hidden_layers=3, hidden_size=48, num_attention_heads=4, num_key_value_heads=1,
         head_dim=24, intermediate_size=80, rms_norm_eps=1e-6, rope_theta=1e6, rope_scaling=None,
         tie_word_embeddings=True, attention_bias=False, B=2, seq=11, bf16=False, shards=1, seed=3),
]

# gradcheck sizes: llama's rope scaling puts one frequency in each of the three llama3 branches
# (theta 100, d = 6: wavelengths 6.3, 29, 135 against 8 and 32)
TINY = [
    dict(model_type="llama", vocab_size=11, max_position_embeddings=6, num_hidden_layers=2,
         hidden_size=12, num_attention_heads=3, num_key_value_heads=1, head_dim=6,
         intermediate_size=10, rms_norm_eps=1e-5, rope_theta=100.0,
         rope_scaling=dict(LLAMA3, original_max_position_embeddings=32), tie_word_embeddings=False,
         attention_bias=True, mlp_bias=True),
    dict(model_type="qwen2", vocab_size=13, max_position_embeddings=6, num_hidden_layers=2,
         hidden_size=8, num_attention_heads=2, num_key_value_heads=2, head_dim=4,
         intermediate_size=12, rms_norm_eps=1e-6, rope_theta=1e6, rope_scaling=None,
         tie_word_embeddings=True),
    dict(model_type="qwen3", vocab_size=11, max_position_embeddings=6, num_hidden_layers=2,
         hidden_size=8, num_attention_heads=4, num_key_value_heads=2, head_dim=6,
         intermediate_size=10, rms_norm_eps=1e-6, rope_theta=1e6, rope_scaling=None,
         tie_word_embeddings=True, attention_bias=False),
]


def llama3_formula(d, theta, rs, dtype):
    """The llama3 inverse frequencies, the formula evaluated in numpy at dtype (float64: the
    exact values to within rounding; float32: every operation rounded to float), and each
    frequency's branch."""
    f = np.dtype(dtype).type
    e = (np.arange(0, d, 2).astype(dtype) / f(d)).astype(np.float64)
    inv = f(1.0) / (np.float64(f(theta)) ** e).astype(dtype)  # pow correctly rounded (numpy's powf is not)
    factor, lo, hi = f(rs["factor"]), f(rs["low_freq_factor"]), f(rs["high_freq_factor"])
    old = f(rs["original_max_position_embeddings"])
    low_wl, high_wl = f(rs["original_max_position_embeddings"] / rs["low_freq_factor"]), \
        f(rs["original_max_position_embeddings"] / rs["high_freq_factor"])
    wavelen = (f(1.0) / inv) * f(2 * math.pi)
    llama = np.where(wavelen > low_wl, inv / factor, inv)
    smooth = ((f(1.0) / wavelen) * old - lo) / (hi - lo)
    smoothed = (f(1.0) - smooth) * llama / factor + smooth * llama
    medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
    branch = np.where(medium, "medium", np.where(wavelen > low_wl, "low (/factor)", "high (kept)"))
    return np.where(medium, smoothed, llama), wavelen, branch


def self_check():
    """The reference against finite differences, the llama3 formula and the complex rotation."""
    ok = True
    for t in TINY:
        gen = torch.Generator().manual_seed(7)
        model = Family(t, random_weights(t, gen, std=0.3, bias_std=0.1, norm_std=0.1))
        ids = torch.randint(0, t["vocab_size"], (2, t["max_position_embeddings"] + 1), generator=gen)
        x, y = ids[:, :-1], ids[:, 1:]
        ts = [q.detach().clone().requires_grad_() for q in model.ps]

        def fn(*ts):
            return model(x, y, p=dict(zip(model.names, ts)))

        good = torch.autograd.gradcheck(fn, ts, raise_exception=False)
        n = sum(q.numel() for q in ts)
        V, C, L, H, KV, d, I = dims(t)
        print(f"reference: gradcheck {t['model_type']} (V={V} C={C} L={L} H={H} KV={KV} d={d} I={I}, "
              f"{len(ts)} tensors, {n} elements; logits and loss): {'ok' if good else 'FAILED'}")
        ok = ok and good

    for t in [CONFIGS[0], TINY[0]]:
        d, rs = dims(t)[5], t["rope_scaling"]
        got = rope_inv_freq(t).numpy()
        want64, wavelen, branch = llama3_formula(d, t["rope_theta"], rs, np.float64)
        want32, _, _ = llama3_formula(d, t["rope_theta"], rs, np.float32)
        e64 = float(np.abs(got.astype(np.float64) - want64).max() / np.abs(want64).max())
        same32 = int((got == want32).sum())
        print(f"reference: llama3 inv_freq, d={d} theta={t['rope_theta']:g} factor {rs['factor']:g} "
              f"low/high {rs['low_freq_factor']:g}/{rs['high_freq_factor']:g} original "
              f"{rs['original_max_position_embeddings']}: rel err vs the float64 formula {e64:.1e} "
              f"(bound 1e-6), equal to the float32 formula's bits in {same32} of {d // 2}")
        for i in range(d // 2):
            print(f"    i={i}: wavelen {wavelen[i]:10.4f}  {branch[i]:14s} inv_freq {got[i]:.9g} "
                  f"(float64 formula {want64[i]:.9g})")
        ok = ok and e64 <= 1e-6

    # rotate_half = the complex product over the pairs (i, i + d/2)
    c = CONFIGS[0]
    d, T = dims(c)[5], c["max_position_embeddings"]
    cos, sin = rope_cos_sin(c, T, torch.float64)
    q = torch.randn(T, d, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    r = q * cos + rotate_half(q) * sin
    ang = torch.arange(T, dtype=torch.int64).float()[:, None] * rope_inv_freq(c)[None, :]
    z = torch.complex(q[:, :d // 2], q[:, d // 2:]) * torch.polar(torch.ones_like(ang.double()), ang.double())
    e = rel_err(r.numpy(), torch.cat((z.real, z.imag), dim=-1).numpy())
    print(f"reference: rotation = complex product (q_i + i q_(i+d/2)) e^(i angle): rel err {e:.1e} (bound 1e-14)")
    return ok and e <= 1e-14


def reference(c, weights, x, y, dtype=torch.float64):
    """Logits, loss, gradients, then STEPS AdamW steps (as xcheck_torch), at dtype."""
    model = Family(c, weights, dtype)
    logits, loss = model(x, y)
    loss.backward()
    out = {"logits": logits.detach().double().numpy(), "loss": loss.item()}
    for n, p in zip(model.names, model.ps):
        out["grad." + n] = p.grad.double().numpy().copy()
    out["steps.loss"] = np.array(adamw_steps(model.ps, loss.item(), lambda: model(x, y)[1], STEPS))
    for n, p in zip(model.names, model.ps):
        out["final." + n] = p.detach().double().numpy().copy()
    return out


def run_minidc(c, wdir, tmp, exact=False):
    """(minidc's output line, the dump), or None after printing the command and its output."""
    dump = os.path.join(tmp, c["name"] + (".exact" if exact else "") + ".dump.safetensors")
    cmd = [MINIDC, "forward", "--weights", wdir, "--tokens", os.path.join(tmp, "x.npy"),
           "--targets", os.path.join(tmp, "y.npy"), "--dump", dump, "--steps", str(STEPS)]
    for k, v in ADAM.items():
        cmd += ["--" + k.replace("_", "-"), repr(v)]
    if exact:
        cmd += ["--exact"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("  " + " ".join(cmd))
        print("  " + (r.stdout + r.stderr).strip().replace("\n", "\n  "))
        print(f"  minidc exited {r.returncode}")
        return None
    return r.stdout.strip(), read_safetensors(dump)


def compare(ref, got, verbose):
    """(worst error, names above the bound or missing); one line per tensor when verbose, else
    only the bad ones."""
    worst, bad = 0.0, []
    for name, want in ref.items():
        if name not in got:
            print(f"    {name:52s}   missing from the dump")
            bad.append(name)
            continue
        e = rel_err(got[name], want)
        worst = max(worst, e)
        if verbose or e > TOL:
            print(f"    {name:52s} {e:9.2e}{'' if e <= TOL else '   <-- above 1e-5'}")
        if e > TOL:
            bad.append(name)
            g64, w64 = np.asarray(got[name], np.float64), np.asarray(want, np.float64)
            if g64.shape == w64.shape:
                i = np.unravel_index(np.abs(g64 - w64).argmax(), w64.shape) if w64.ndim else ()
                print(f"      worst element {tuple(int(k) for k in i)}: minidc {g64[i]:.9g}, torch {w64[i]:.9g}")
                gname = "grad." + name[len("final."):]
                if name.startswith("final.") and gname in ref and gname in got:
                    print(f"      its step-0 gradient: minidc {got[gname][i]:.6g}, torch {ref[gname][i]:.6g}")
            else:
                print(f"      shape {list(g64.shape)} in the dump, {list(w64.shape)} expected")
    return worst, bad


def run_config(c, tmp):
    gen = torch.Generator().manual_seed(c["seed"])
    w64 = random_weights(c, gen)
    B, T, V = c["B"], c["seq"], c["vocab_size"]
    ids = torch.randint(0, V, (B, T + 1), generator=gen)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    wdir = os.path.join(tmp, c["name"])
    # the reference starts from the values the files hold (float32, or BF16-rounded)
    w = write_hf_dir(wdir, c, w64, bf16=c["bf16"], shards=c["shards"])
    print(f"  {wdir}: {', '.join(sorted(os.listdir(wdir)))}")
    np.save(os.path.join(tmp, "x.npy"), x.numpy().astype(np.int64))
    np.save(os.path.join(tmp, "y.npy"), y.numpy().astype(np.int32))
    ref = reference(c, w, x, y)
    # what the bound leaves an fp32 code (measured, not asserted): PyTorch's own float32
    t32 = reference(c, w, x, y, torch.float32)
    print(f"  PyTorch float32 against float64 (not asserted): worst {max(rel_err(t32[n], ref[n]) for n in ref):.2e}")

    r = run_minidc(c, wdir, tmp)
    if r is None:
        return None, ["minidc failed"]
    print("  " + r[0])
    worst, bad = compare(ref, r[1], verbose=True)
    print(f"  default mode: worst {worst:.2e}, {len(bad)} of {len(ref)} tensors above the bound or missing")
    bad = [f"{len(bad)} of {len(ref)} tensors ({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''})"] if bad else []

    # exact mode must still be the right answer: the same bound against float64
    rx = run_minidc(c, wdir, tmp, exact=True)
    if rx is None:
        return worst, bad + ["minidc --exact failed"]
    worst_x, bad_x = compare(ref, rx[1], verbose=False)
    print(f"  exact mode (--exact): worst {worst_x:.2e} against float64 (bound {TOL:.0e}), "
          f"{len(bad_x)} of {len(ref)} tensors above the bound or missing")
    if bad_x:
        bad.append(f"--exact: {len(bad_x)} of {len(ref)} tensors ({', '.join(bad_x[:3])}{', ...' if len(bad_x) > 3 else ''})")
    return max(worst, worst_x), bad


def describe(c):
    V, C, L, H, KV, d, I = dims(c)
    rs = c["rope_scaling"]
    bias = {"llama": f"attention_bias {c.get('attention_bias')}, mlp_bias {c.get('mlp_bias')}",
            "qwen2": "q/k/v biases", "qwen3": "q_norm/k_norm"}[c["model_type"]]
    return (f"V={V} T={c['max_position_embeddings']} L={L} C={C} H={H} KV={KV} head_dim={d} I={I}, "
            f"{'tied' if c['tie_word_embeddings'] else 'untied'}, {bias}, rope_theta {c['rope_theta']:g}"
            f"{' llama3 factor %g' % rs['factor'] if rs else ''}, eps {c['rms_norm_eps']:g}"
            f"{', BF16' if c['bf16'] else ''}{', %d shards' % c['shards'] if c['shards'] > 1 else ''}, "
            f"batch {c['B']}x{c['seq']}")


def main():
    rc = preflight(self_check)
    if rc:
        return rc
    all_bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in CONFIGS:
            print(f"config {c['name']}: {describe(c)}; error = max|minidc - torch| / max|torch| per tensor")
            worst, bad = run_config(c, tmp)
            print(f"  worst {worst:.2e} (bound {TOL:.0e})" if worst is not None else "  worst: none (minidc failed)")
            all_bad += [f"{c['name']}:{b}" for b in bad]
    if all_bad:
        print("FAIL: above 1e-5, missing or failed: " + "; ".join(all_bad))
        return 1
    print(f"all tensors within 1e-5 ({len(CONFIGS)} configs, default and --exact)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
