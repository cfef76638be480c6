"""Cross-check of minidc's serial GPT-2 against an independent PyTorch implementation.

For each config it builds the same GPT-2 in PyTorch (pre-LN, learned positions, causal
attention, 4C tanh-GELU MLP, LM head tied to wte; Conv1D weights [in, out] as Hugging Face
stores them), writes the weights as safetensors (by hand: the `safetensors` package is not
needed) and the tokens as .npy, runs `minidc forward --steps 10`, and compares

  logits, loss, every parameter gradient, and the loss and every parameter after 10 AdamW steps
  (nanoGPT grouping: weight decay on 2-D tensors only; global-norm clipping first; eps = 1e-5,
  see run_config for why 1e-8 makes the comparison ill-conditioned for any fp32 code; the eps=1e-8
  errors of minidc and of PyTorch's own fp32 are printed next to it).

The reference runs in float64, so the error printed is minidc's own fp32 error, not the sum of
two fp32 roundings. Error measure, per tensor: max|minidc - torch| / max|torch| (the error
relative to the tensor's scale, which stays meaningful where single elements are near 0); an
all-zero reference tensor uses the absolute max error instead. Every tensor must be <= 1e-5.

The second config is written the way `transformers` saves a GPT2LMHeadModel: "transformer."
prefixes, the h.N.attn.bias causal-mask buffers, lm_head.weight (tied), keys sorted, heads in
__metadata__ n_head, so the test also shows such a checkpoint loads unchanged.

Exit 0: pass; 1: an error above the bound or a failure; 77: skipped (no torch, no minidc).
"""
import os
import subprocess
import sys
import tempfile

from xcheck_common import ADAM, MINIDC, TOL, adamw_steps, np, rel_err, torch

STEPS = 10
from torch_gpt2 import GPT2, read_safetensors, write_safetensors  # noqa: E402

CONFIGS = [
    # odd sizes: V not a multiple of 128 (padded), C=72, H=3 (head size 24), T=13
    dict(name="odd", V=97, T=13, L=2, H=3, C=72, B=3, seq=13, hf_style=False, seed=1),
    dict(name="hf-style", V=128, T=32, L=3, H=4, C=64, B=2, seq=24, hf_style=True, seed=2),
]


def reference(c, weights, x, y, dtype, eps):
    """Logits, loss, gradients, then STEPS AdamW steps, in PyTorch at `dtype`."""
    model = GPT2(c, torch.Generator().manual_seed(0))
    with torch.no_grad():
        for n, p in zip(model.names, model.ps):
            p.data = torch.from_numpy(weights[n]).to(dtype)
    logits, loss = model(x, y)
    model.zero_grad()
    loss.backward()
    out = {"logits": logits.detach().double().numpy(), "loss": loss.item()}
    for n, p in zip(model.names, model.ps):
        out["grad." + n] = p.grad.double().numpy().copy()
    out["steps.loss"] = np.array(adamw_steps(model.ps, loss.item(), lambda: model(x, y)[1], STEPS, eps))
    for n, p in zip(model.names, model.ps):
        out["final." + n] = p.detach().double().numpy().copy()
    return out


def run_minidc(c, tmp, wpath, eps, exact=False):
    dump = os.path.join(tmp, c["name"] + ".dump.safetensors")
    cmd = [MINIDC, "forward", "--weights", wpath, "--tokens", os.path.join(tmp, "x.npy"),
           "--targets", os.path.join(tmp, "y.npy"), "--dump", dump, "--steps", str(STEPS)]
    if exact:
        cmd += ["--exact"]
    if not c["hf_style"]:
        cmd += ["--heads", str(c["H"])]
    for k, v in dict(ADAM, eps=eps).items():
        cmd += ["--" + k.replace("_", "-"), repr(v)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(" ".join(cmd))
        print(r.stdout + r.stderr)
        raise SystemExit(1)
    return r.stdout.strip(), read_safetensors(dump)


def run_config(c, tmp):
    gen = torch.Generator().manual_seed(c["seed"])
    model = GPT2(c, gen)
    B, T, V = c["B"], c["seq"], c["V"]
    ids = torch.randint(0, V, (B, T + 1), generator=gen)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    # weights file in float32; the references start from exactly these values
    w32 = {n: p.detach().float().numpy() for n, p in zip(model.names, model.ps)}
    w, meta = dict(w32), None
    if c["hf_style"]:
        w = {"transformer." + n: a for n, a in w.items()}
        for i in range(c["L"]):
            w[f"transformer.h.{i}.attn.bias"] = np.tril(np.ones((c["T"], c["T"]), np.float32))[None, None]
        w["lm_head.weight"] = w["transformer.wte.weight"]
        meta = {"format": "pt", "n_head": str(c["H"])}
    wpath = os.path.join(tmp, c["name"] + ".safetensors")
    write_safetensors(wpath, w, meta)
    np.save(os.path.join(tmp, "x.npy"), x.numpy().astype(np.int64))
    np.save(os.path.join(tmp, "y.npy"), y.numpy().astype(np.int32))

    line, got = run_minidc(c, tmp, wpath, ADAM["eps"])
    print("  " + line)
    ref = reference(c, w32, x, y, torch.float64, ADAM["eps"])
    worst, bad = 0.0, []
    def as_read(name):  # minidc writes grad.* and final.* under the names its input used
        for pre in ("grad.", "final."):
            if c["hf_style"] and name.startswith(pre):
                return pre + "transformer." + name[len(pre):]
        return name
    for name, want in ref.items():
        if as_read(name) not in got:
            print(f"    {name:34s} missing: minidc wrote no {as_read(name)}")
            bad.append(name)
            continue
        g = got[as_read(name)]
        e = rel_err(g, want)
        worst = max(worst, e)
        flag = "" if e <= TOL else "   <-- above 1e-5"
        print(f"    {name:34s} {e:9.2e}{flag}")
        if e > TOL:
            bad.append(name)
            g64, w64 = np.asarray(g, np.float64), np.asarray(want, np.float64)
            i = np.unravel_index(np.abs(g64 - w64).argmax(), w64.shape) if w64.ndim else ()
            print(f"      worst element {tuple(int(k) for k in i)}: minidc {g64[i]:.9g}, torch {w64[i]:.9g}")
            gname = "grad." + name[len("final."):]
            if gname in ref:
                print(f"      its step-0 gradient: minidc {got[as_read(gname)][i]:.6g}, torch {ref[gname][i]:.6g}")

    # exact mode must still be the right answer: the same bound against float64
    _, gotx = run_minidc(c, tmp, wpath, ADAM["eps"], exact=True)
    worst_x = max(rel_err(gotx[as_read(n)], ref[n]) for n in ref)
    print(f"  exact mode (--exact): worst {worst_x:.2e} against float64 (bound {TOL:.0e})")
    worst = max(worst, worst_x)
    if worst_x > TOL:
        bad += [n + " (exact)" for n in ref if rel_err(gotx[as_read(n)], ref[n]) > TOL]

    # Why the 10-step check uses eps = 1e-5: with eps = 1e-8, elements whose gradient is ~0
    # (the attention key bias has an exactly-zero gradient: softmax ignores a per-row constant)
    # get updates lr * g / (|g| + eps) that are pure rounding noise, so ANY fp32 implementation
    # drifts from the exact result there. Measured, not asserted: minidc and PyTorch's own fp32
    # both against the float64 reference, with eps = 1e-8.
    _, got8 = run_minidc(c, tmp, wpath, 1e-8)
    ref8 = reference(c, w32, x, y, torch.float64, 1e-8)
    t32 = reference(c, w32, x, y, torch.float32, 1e-8)
    finals = [n for n in ref8 if n.startswith("final.")]
    m8 = max(rel_err(got8[as_read(n)], ref8[n]) for n in finals)
    t8 = max(rel_err(t32[n], ref8[n]) for n in finals)
    tg = max(rel_err(t32[n], ref8[n]) for n in ref8 if not n.startswith("final."))
    print(f"  with eps=1e-8 (not asserted): worst parameter after {STEPS} steps vs float64: "
          f"minidc {m8:.2e}, PyTorch fp32 {t8:.2e} (PyTorch fp32 logits/loss/gradients: {tg:.2e})")
    return worst, bad


def main():
    if not os.access(MINIDC, os.X_OK):
        print(f"skipped: {MINIDC} not built")
        return 77
    torch.set_num_threads(1)
    all_bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in CONFIGS:
            print(f"config {c['name']}: V={c['V']} T={c['T']} L={c['L']} H={c['H']} C={c['C']}, "
                  f"batch {c['B']}x{c['seq']}; error = max|minidc - torch| / max|torch| per tensor")
            worst, bad = run_config(c, tmp)
            print(f"  worst {worst:.2e} (bound {TOL:.0e})")
            all_bad += [f"{c['name']}:{b}" for b in bad]
    if all_bad:
        print("FAIL: above 1e-5: " + ", ".join(all_bad))
        return 1
    print("all tensors within 1e-5")
    return 0


if __name__ == "__main__":
    sys.exit(main())
