"""Cross-check of minidc's Mixture-of-Experts GPT-2 against the float64 PyTorch reference of
tools/torch_moe.py, as tests/xcheck/xcheck_torch.py does for the dense model.

First the reference checks itself: with one expert, top-1, dropless and no extra losses it must be
tools/torch_gpt2.py's GPT2 on the same weights (rel err < 1e-12), and torch.autograd.gradcheck
must accept its gradients on tiny cases (through the gates; the top-k choice and the capacity
drops are discrete). Then, per config, weights (float32 safetensors), x.npy and y.npy are written by
torch_moe.write_moe_case, `minidc forward --steps 3` runs on them, and logits, the total loss, the
aux and z losses, every gradient, the loss before each AdamW step and after the last and every
parameter after the steps are compared with xcheck_torch's error measure, bound 1e-5.

float32 and float64 must make the same discrete decisions (top-k, and under the "probs" policy
which assignments an expert keeps), so a seed is used only where every such decision, in every
forward of the run, is decided by a p gap of at least 1e-4, and where capacity drops something
when there is a capacity; otherwise the next seed is tried. The gaps are printed.

Exit 0: pass; 1: an error above the bound or a failure; 77: skipped (no torch, no minidc).
"""
import subprocess
import sys
import tempfile

from xcheck_common import ADAM, MINIDC, TOL, adamw_steps, np, preflight, rel_err, torch

STEPS = 3
MARGIN = 1e-4
from torch_gpt2 import GPT2, read_safetensors  # noqa: E402
from torch_moe import MoEGPT2, write_moe_case  # noqa: E402

BASE = dict(moe_every=1, capacity_factor=0.0, drop="position", renorm=False, aux=0.0, z=0.0)
# cli_topk: pass --topk, else minidc takes k from the weights' __metadata__ moe_topk
CONFIGS = [
    dict(BASE, name="e4-top1-dropless", V=100, T=12, L=2, H=2, C=32, B=3, E=4, topk=1,
         aux=0.1, z=0.02, cli_topk=True, seed=10),
    dict(BASE, name="e4-top2-cap1-renorm", V=128, T=16, L=2, H=4, C=64, B=2, E=4, topk=2,
         capacity_factor=1.0, renorm=True, cli_topk=False, seed=20),
    dict(BASE, name="e8-top2-cap1.25-probs", V=112, T=16, L=2, H=2, C=32, B=3, E=8, topk=2,
         capacity_factor=1.25, drop="probs", aux=0.1, cli_topk=True, seed=30),
    dict(BASE, name="every2-L3", V=100, T=8, L=3, H=2, C=48, B=2, E=4, topk=2, moe_every=2,
         capacity_factor=1.25, renorm=True, aux=0.05, z=0.02, cli_topk=False, seed=40),
]


def self_check():
    """The reference against torch_gpt2.GPT2 (E=1) and against finite differences."""
    c = dict(BASE, V=64, T=8, L=2, H=2, C=32, E=1, topk=1)
    gen = torch.Generator().manual_seed(5)
    dense, moe = GPT2(c, gen), MoEGPT2(c, gen)
    dn = {n.replace("mlp.experts.0.", "mlp."): n for n in moe.names}  # dense name -> MoE name
    w = {n: q.detach().numpy() for n, q in zip(moe.names, moe.ps)}  # keeps its own router
    w.update({dn[n]: q.detach().numpy() for n, q in zip(dense.names, dense.ps)})
    moe.load(w)
    ids = torch.randint(0, c["V"], (2, c["T"] + 1), generator=gen)
    x, y = ids[:, :-1], ids[:, 1:]
    lm, tm, ce, aux, zl = moe(x, y)
    ld, td = dense(x, y)
    tm.backward()
    td.backward()
    worst = max(rel_err(lm.detach(), ld.detach()), rel_err(tm.item(), td.item()), rel_err(ce.item(), td.item()))
    for n, q in zip(dense.names, dense.ps):
        worst = max(worst, rel_err(moe.p[dn[n]].grad, q.grad))
    for n in set(moe.names) - {dn[d] for d in dense.names}:  # the router: the one gate is 1 whatever its logit
            worst = max(worst, moe.p[n].grad.abs().max().item())
    ok = worst < 1e-12 and aux.item() == 0 and zl.item() == 0
    print(f"reference: one expert, top-1, dropless = torch_gpt2.GPT2: worst {worst:.1e} (bound 1e-12)")

    tiny = [dict(V=16, T=6, L=2, H=2, C=8, E=4, topk=2, moe_every=2, capacity_factor=1.0,
                 drop="probs", renorm=True, aux=0.1, z=0.05),
            dict(V=16, T=6, L=2, H=2, C=8, E=3, topk=1, moe_every=1, capacity_factor=1.0,
                 drop="position", renorm=False, aux=0.1, z=0.05)]
    for t in tiny:
        t["B"] = 2
        gen = torch.Generator().manual_seed(7)
        model = MoEGPT2(t, gen)
        ids = torch.randint(0, t["V"], (2, t["T"] + 1), generator=gen)
        x, y = ids[:, :-1], ids[:, 1:]
        ts = [q.detach().clone().requires_grad_() for q in model.ps]

        def fn(*ts):
            model.p = dict(zip(model.names, ts))
            logits, loss, _, aux, zl = model(x, y)
            return logits, loss, aux, zl

        good = torch.autograd.gradcheck(fn, ts, fast_mode=True, raise_exception=False)
        s = model.stats
        print(f"reference: gradcheck E={t['E']} k={t['topk']} {t['drop']}: {'ok' if good else 'FAILED'} "
              f"(dropped {s['dropped']} of {s['assigned']}, smallest gaps {gap(s['topk_margin'])} "
              f"{gap(s['drop_margin'])})")
        ok = ok and good
    return ok


def reference(c, weights, x, y):
    """Logits, losses, gradients, then STEPS AdamW steps (as xcheck_torch), in float64."""
    model = MoEGPT2(c, torch.Generator().manual_seed(0))
    model.load(weights)
    logits, loss, _, aux, zl = model(x, y)
    loss.backward()
    out = {"logits": logits.detach().numpy(), "loss": loss.item(), "loss.aux": aux.item(), "loss.z": zl.item()}
    for n, p in zip(model.names, model.ps):
        out["grad." + n] = p.grad.numpy().copy()
    out["steps.loss"] = np.array(adamw_steps(model.ps, loss.item(), lambda: model(x, y)[1], STEPS))
    for n, p in zip(model.names, model.ps):
        out["final." + n] = p.detach().numpy().copy()
    return out, model.stats


def gap(g):
    return "n/a" if g == float("inf") else f"{g:.1e}"  # n/a: no such decision (k = E, dropless, "position")


def pick_case(c, tmp):
    """The first seed from c["seed"] whose discrete decisions are clear in float32 too."""
    for seed in range(c["seed"], c["seed"] + 50):
        paths = write_moe_case(tmp, c, seed)
        w = read_safetensors(paths[0])
        x, y = (torch.from_numpy(np.load(p).astype(np.int64)) for p in paths[1:])
        ref, s = reference(c, w, x, y)
        gaps = f"k-th vs (k+1)-th p {gap(s['topk_margin'])}, kept vs dropped p {gap(s['drop_margin'])}"
        drops = f"{s['dropped']} of {s['assigned']} assignments dropped over {STEPS + 1} forwards"
        if min(s["topk_margin"], s["drop_margin"]) >= MARGIN and (c["capacity_factor"] == 0 or s["dropped"]):
            print(f"  seed {seed}: smallest gaps: {gaps}; {drops}")
            return paths, ref
        print(f"  seed {seed} not used: {gaps}; {drops}")
    raise SystemExit(f"FAIL: {c['name']}: no seed with gaps >= {MARGIN:.0e}")


def run_minidc(c, paths):
    dump = paths[0].replace(".safetensors", ".dump.safetensors")
    cmd = [MINIDC, "forward", "--weights", paths[0], "--tokens", paths[1], "--targets", paths[2],
           "--dump", dump, "--steps", str(STEPS)]
    if c["cli_topk"]:
        cmd += ["--topk", str(c["topk"])]
    cmd += ["--capacity-factor", repr(c["capacity_factor"])]
    if c["drop"] == "probs":
        cmd += ["--moe-drop", "probs"]
    if c["renorm"]:
        cmd += ["--moe-renorm"]
    cmd += ["--moe-aux-loss", repr(c["aux"]), "--moe-z-loss", repr(c["z"])]
    for k, v in ADAM.items():
        cmd += ["--" + k.replace("_", "-"), repr(v)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(" ".join(cmd))
        print(r.stdout + r.stderr)
        print(f"FAIL: {c['name']}: minidc exited {r.returncode}")
        raise SystemExit(1)
    return r.stdout.strip(), read_safetensors(dump)


def run_config(c, tmp):
    paths, ref = pick_case(c, tmp)
    line, got = run_minidc(c, paths)
    print("  " + line)
    worst, bad = 0.0, []
    for name, want in ref.items():
        if name not in got:
            print(f"    {name:40s}   missing from the dump")
            bad.append(name)
            continue
        e = rel_err(got[name], want)
        worst = max(worst, e)
        print(f"    {name:40s} {e:9.2e}{'' if e <= TOL else '   <-- above 1e-5'}")
        if e > TOL:
            bad.append(name)
            g64, w64 = np.asarray(got[name], np.float64), np.asarray(want, np.float64)
            if g64.shape == w64.shape:
                i = np.unravel_index(np.abs(g64 - w64).argmax(), w64.shape) if w64.ndim else ()
                print(f"      worst element {tuple(int(k) for k in i)}: minidc {g64[i]:.9g}, torch {w64[i]:.9g}")
            else:
                print(f"      shape {list(g64.shape)} in the dump, {list(w64.shape)} expected")
    return worst, bad


def main():
    rc = preflight(self_check)
    if rc:
        return rc
    all_bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in CONFIGS:
            print(f"config {c['name']}: V={c['V']} T={c['T']} L={c['L']} H={c['H']} C={c['C']} E={c['E']} "
                  f"k={c['topk']} moe_every={c['moe_every']} capacity {c['capacity_factor']} ({c['drop']}) "
                  f"renorm={c['renorm']} aux={c['aux']} z={c['z']}, batch {c['B']}x{c['T']}")
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
