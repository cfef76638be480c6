"""Cross-check of minidc's mixed precision (`minidc forward --precision bf16|fp16`, GPT-2, serial)
against PyTorch: tools/torch_precision.py's float64 GPT-2 that rounds where minidc rounds, and
PyTorch's own CPU autocast.

For each config and dtype the weights (float32 safetensors, written by hand) and tokens (.npy) go
to `minidc forward --dump-dir`, once in exact mode (--exact) and once by default; every tensor of
the dump (the sites of the forward, their gradients, the parameters' gradients, the losses) is
compared. Units: u is the dtype's unit roundoff (bf16 2^-8, fp16 2^-11); an element's ulp is the
dtype's spacing at the reference's value (at most 2u times the value); "rel" is
max|minidc - ref| / max|ref| over a tensor, in u.

(a) exact mode against the reference (same rounding points, float64 -> float32 -> dtype):
  end to end, the reference on its own values. The tensors before any float32 sum of more than
  two terms (embed, h.0.in, h.0.ln_1, h.0.attn.qkv) see the same inputs on both sides, so each
  element differs by at most the one rounding: 1 ulp (asserted). Later tensors inherit those
  one-ulp differences (a flip at a few elements in 10^3-10^4, which moves the next sums by less
  than an ulp and flips a few more); they do not add up coherently, so a tensor stays within a
  few ulps of its largest element: rel <= E2E_U = 8 u asserted (4 ulps at the largest element;
  measured at most 2 u), for the weight gradients and losses too.
  per site, the reference on minidc's own inputs (PrecisionGPT2.run's `given`): each rounding
  point computes its value from the tensors minidc dumped and hands minidc's on, so every site is
  one operation: minidc's float32 result and the float64 one can round apart only where they
  straddle a rounding boundary, at a fraction of about (float32 error / ulp) of the elements.
  Asserted per site: at least SAME_MIN = 99% of the elements bit-identical (measured >= 99.7%)
  and each element within 1 ulp + SLACK max|ref| (SLACK = 2^-18: float32's error at the tensor's
  scale, which is many ulps of an element that a cancellation leaves near 0); the weight
  gradients and the losses, float32 sums of the same rounded tensors, within FP32_TOL = 1e-5.
  A rounding point left out gives values off by up to half an ulp at nearly every element
  (0-6% identical), a wrong order of rounding (the projection's product rounded with the residual
  instead of apart) differences of many ulps: the self-check runs the reference with each of
  torch_precision.FAULTS against the same dump and fails unless this check rejects it.
(b) default mode (OpenBLAS's order of sums) against the same reference: end to end rel <= E2E_U,
  and the per-site check as in (a) with the reference's attention backward taking its row term
  D = sum P dP, as the default kernel does (exact mode's kernels take D = sum dy o from the kept,
  rounded output: the two differ by about u D). Every site of a dump, in both modes, must hold
  values of the dtype (the tensors the model rounds).
(c) bf16, default mode, against torch.autocast("cpu", bfloat16) on tools/torch_gpt2.py's GPT-2:
  autocast rounds elsewhere (bf16 matmul outputs and weight gradients, float32 LayerNorm and
  softmax outputs), so each side is a few u from float64 per rounding on a path and they agree
  only in torch.testing's bf16 sense. Elementwise assert_close fails on elements that cancel to
  near 0, so the bound is per tensor: max|minidc - autocast| <= atol + AUTOCAST_SCALE rtol
  max|autocast|, assert_close's bf16 rtol 1.6e-2 (about 4 u: one result's few roundings) and atol
  1e-5, scaled by 4 for the longest paths (a gradient of block 0 crosses about 20 rounding points
  on each side; measured at most 1.7 rtol). The errors of both against float64 are printed.

The reference checks itself first: with no rounding it is tools/torch_gpt2.py's GPT2 in float64
(rel < 1e-12), and its rounding is to nearest even (ties). fp16 runs without loss scaling: the
configs keep every value in fp16's range (gradients down to its subnormals, rounded alike).

Exit 0: pass; 1: a bound exceeded or a failure; 77: skipped (no torch, no minidc).
"""
import json
import os
import subprocess
import sys
import tempfile

from xcheck_common import MINIDC, np, preflight, rel_err, torch

from torch_gpt2 import GPT2, read_safetensors, write_safetensors  # noqa: E402
from torch_precision import FAULTS, UNIT, PrecisionGPT2, autocast_gpt2, round_to  # noqa: E402

CONFIGS = [
    # V not a multiple of 128 (padded logits), C=72 over H=3 heads of 24
    dict(name="odd", V=97, T=16, L=2, H=3, C=72, B=3, seed=1),
    dict(name="wide", V=128, T=32, L=3, H=4, C=64, B=2, seed=2),
]
PRECS = ("bf16", "fp16")
FIRST = ("embed", "h.0.in", "h.0.ln_1", "h.0.attn.qkv")
SAME_MIN = 0.99
SLACK = 2.0 ** -18
E2E_U = 8.0
FP32_TOL = 1e-5
AUTOCAST_RTOL, AUTOCAST_ATOL, AUTOCAST_SCALE = 1.6e-2, 1e-5, 4.0
MANT = {"bf16": (8, -126), "fp16": (11, -14)}  # significant bits, smallest normal exponent


def read_dump(d):
    """A --dump-dir's tensors as float64 global tensors, by global name without step1."""
    tensors, meta = read_safetensors(os.path.join(d, "step1-rank0.safetensors"), with_metadata=True)
    out = {}
    for k, a in tensors.items():
        e = json.loads(meta["dump:" + k])
        name = e["global"][len("step1."):]
        g = out.setdefault(name, np.zeros(e["shape"]))
        loc = [np.concatenate([np.arange(r[0], r[0] + r[2]) for r in runs]) for runs in e["map"]]
        glob = [np.concatenate([np.arange(r[1], r[1] + r[2]) for r in runs]) for runs in e["map"]]
        piece = np.asarray(a, np.float64)[np.ix_(*loc)] if loc else np.asarray(a, np.float64)
        if e["sum"]:
            g[np.ix_(*glob)] += piece
        else:
            g[np.ix_(*glob)] = piece
    return out


def ulp(a, prec):
    """The dtype's spacing at |a| (subnormals: the smallest spacing)."""
    bits, emin = MANT[prec]
    a = np.abs(np.asarray(a, np.float64))
    e = np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), emin)
    e = np.where(a > 0, e, emin)
    return np.ldexp(1.0, (e - (bits - 1)).astype(int))


def of_dtype(a, prec):
    """The number of elements of a that are not values of the dtype."""
    a = np.asarray(a, np.float64)
    return int(np.sum(round_to(torch.from_numpy(a), prec).numpy() != a))


def stats(got, ref, prec):
    """same: fraction bit-identical; ulps: max |got - ref| / ulp(ref); rel: max|got - ref| /
    max|ref| in u; within: every element <= 1 ulp + SLACK max|ref|."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    d = np.abs(got - ref)
    scale = np.abs(ref).max() if ref.size else 0.0
    return dict(same=float(np.mean(got == ref)), ulps=float((d / ulp(ref, prec)).max()),
                rel=rel_err(got, ref) / UNIT[prec], within=bool(np.all(d <= ulp(ref, prec) + SLACK * scale)),
                excess=float(((d - ulp(ref, prec)) / scale).max() / 2.0 ** -24) if scale > 0 else 0.0)


def per_site(got, ref, prec, params, label):
    """(a)/(b)'s per-site check of got against a reference run on got's own inputs; returns
    (failures, {name: row})."""
    bad, rows = [], {}
    for n, r in ref.items():
        if n not in got or n == "loss":
            continue
        if n == "losses" or n[len("grad."):] in params:
            e = rel_err(got[n], r)
            rows[n] = dict(rel=e)
            if e > FP32_TOL:
                bad.append(f"{label} {n}: rel {e:.2e} > {FP32_TOL:.0e}")
            continue
        s = stats(got[n], r, prec)
        rows[n] = s
        if s["same"] < SAME_MIN:
            bad.append(f"{label} {n}: {100 * s['same']:.2f}% bit-identical < {100 * SAME_MIN:.0f}%")
        elif not s["within"]:
            bad.append(f"{label} {n}: an element beyond 1 ulp + {SLACK:.1e} max|ref| ({s['ulps']:.1f} ulps)")
    return bad, rows


def end_to_end(got, ref, prec, params, label, first):
    """(a)/(b)'s end-to-end bounds; first: assert the 1-ulp bound on FIRST (exact mode)."""
    bad, rows = [], {}
    for n, r in ref.items():
        if n not in got or n == "loss":
            continue
        if n == "losses" or n[len("grad."):] in params:
            rows[n] = dict(rel=rel_err(got[n], r) / UNIT[prec])
        else:
            rows[n] = stats(got[n], r, prec)
        if rows[n]["rel"] > E2E_U:
            bad.append(f"{label} {n}: rel {rows[n]['rel']:.2f} u > {E2E_U:.0f} u")
        if first and n in FIRST and rows[n]["ulps"] > 1:
            bad.append(f"{label} {n}: {rows[n]['ulps']:.1f} ulps > 1 (a first rounded tensor)")
    return bad, rows


def dtype_values(got, prec, params, label):
    """Every site of a 16-bit dump holds values of the dtype."""
    bad = []
    for n, a in got.items():
        if n == "losses" or n[len("grad."):] in params:
            continue
        k = of_dtype(a, prec)
        if k:
            bad.append(f"{label} {n}: {k} of {a.size} values are not {prec} values (a site the model rounds)")
    return bad


def run_minidc(tmp, name, prec, exact, heads):
    d = os.path.join(tmp, f"{name}-{prec}-{'exact' if exact else 'default'}")
    cmd = [MINIDC, "forward", "--weights", os.path.join(tmp, name + ".safetensors"), "--tokens",
           os.path.join(tmp, name + ".x.npy"), "--targets", os.path.join(tmp, name + ".y.npy"), "--heads", str(heads),
           "--precision", prec, "--dump-dir", d] + (["--exact"] if exact else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(" ".join(cmd))
        print(r.stdout + r.stderr)
        raise SystemExit(1)
    return read_dump(d)


def fmt(row, keys):
    """A table cell: identical %, max ulps, rel in u (sites) or rel (float32 tensors)."""
    if row is None:
        return "-".center(22)
    if "same" not in row:
        return f"rel {row['rel']:.1e}".rjust(22) if keys == "fp32" else f"{row['rel']:6.2f}u".rjust(22)
    return f"{100 * row['same']:7.3f}% {row['ulps']:5.1f} {row['rel']:5.2f}u"


def check_prec(c, tmp, prec, w, x, y, params):
    """(a) and (b) for one dtype, and the self-check of (a)'s power; returns the failures."""
    name = c["name"]
    got_x = run_minidc(tmp, name, prec, True, c["H"])
    got_d = run_minidc(tmp, name, prec, False, c["H"])
    ref_x = PrecisionGPT2(c, w, prec).run(x, y)
    ref_d = PrecisionGPT2(c, w, prec, d_from_out=False).run(x, y)
    bad, rows = [], {}
    for label, got, ref, first in (("exact e2e", got_x, ref_x, True), ("default e2e", got_d, ref_d, False)):
        b, rows[label] = end_to_end(got, ref, prec, params, f"{prec} {label}", first)
        bad += b
    for label, got, dfo in (("exact site", got_x, True), ("default site", got_d, False)):
        ref = PrecisionGPT2(c, w, prec, d_from_out=dfo).run(x, y, given=got)
        b, rows[label] = per_site(got, ref, prec, params, f"{prec} {label}")
        bad += b
    bad += dtype_values(got_x, prec, params, f"{prec} exact") + dtype_values(got_d, prec, params, f"{prec} default")

    print(f"  {prec} (u = 2^{int(np.log2(UNIT[prec]))}): per tensor: identical %, max ulps, rel | "
          f"sites: identical %, max ulps, rel (float32 tensors: rel)")
    print(f"    {'tensor':28s} {'exact, end to end':>22s} {'exact, per site':>22s} "
          f"{'default, end to end':>22s} {'default, per site':>22s}")
    for n in ref_x:
        if n == "loss" or n not in got_x:
            continue
        kind = "fp32" if n == "losses" or n[len("grad."):] in params else "site"
        cells = [fmt(rows[k].get(n), kind if k.endswith("site") else "e2e")
                 for k in ("exact e2e", "exact site", "default e2e", "default site")]
        print(f"    {n:28s} " + " ".join(cells))
    for k in rows:
        sites = [r for r in rows[k].values() if "same" in r]
        print(f"  {prec} {k:13s}: excess {max(r['excess'] for r in sites):.1f}, least identical {100 * min(r['same'] for r in sites):.3f}%, "
              f"max ulps {max(r['ulps'] for r in sites):.1f}, worst rel {max(r['rel'] for r in rows[k].values()):.3g}"
              + (" u" if k.endswith("e2e") else " (u for sites, plain for float32 tensors)"))

    # the check's power: each planted fault, against the same exact-mode dump, must be rejected
    for fault, what in FAULTS.items():
        ref = PrecisionGPT2(c, w, prec, fault=fault).run(x, y, given=got_x)
        caught, _ = per_site(got_x, ref, prec, params, "")
        if caught:
            print(f"  {prec} self-check: fault {fault} ({what}) rejected at {len(caught)} tensors, "
                  f"first:{caught[0]}")
        else:
            bad.append(f"{prec} self-check: the per-site check accepts the fault {fault} ({what})")
    if prec == "bf16":
        bad += check_autocast(c, w, x, y, got_d, params)
    return bad


def check_autocast(c, w, x, y, got, params):
    """(c): minidc bf16 (default mode) against PyTorch's CPU autocast."""
    ac = autocast_gpt2(c, w, x, y)
    f64 = PrecisionGPT2(c, w, None).run(x, y)
    mine = dict(got, loss=np.float64(got["losses"].mean()))
    bad, worst, worst_ac = [], 0.0, 0.0
    print(f"  bf16 against torch.autocast(cpu, bfloat16): rel = max|minidc - autocast| / max|autocast| "
          f"(bound {AUTOCAST_SCALE:.0f} x rtol {AUTOCAST_RTOL} + atol); each against float64")
    for n, a in ac.items():
        e = rel_err(mine[n], a)
        worst = max(worst, e)
        ok = np.abs(np.asarray(mine[n]) - a).max() <= AUTOCAST_ATOL + AUTOCAST_SCALE * AUTOCAST_RTOL * np.abs(a).max()
        worst_ac = max(worst_ac, rel_err(a, f64[n]) / AUTOCAST_RTOL)
        print(f"    {n:28s} rel {e:.2e} ({e / AUTOCAST_RTOL:.2f} rtol)   minidc {rel_err(mine[n], f64[n]):.2e}"
              f"   autocast {rel_err(a, f64[n]):.2e}" + ("" if ok else "   <-- above the bound"))
        if not ok:
            bad.append(f"bf16 autocast {n}: rel {e:.2e} > {AUTOCAST_SCALE:.0f} x {AUTOCAST_RTOL}")
    print(f"  bf16 against autocast: worst {worst:.2e} ({worst / AUTOCAST_RTOL:.2f} rtol) autocast-f64 {worst_ac:.2f} rtol")
    return bad


def run_config(c, tmp, precs=PRECS):
    gen = torch.Generator().manual_seed(c["seed"])
    model = GPT2(c, gen)
    ids = torch.randint(0, c["V"], (c["B"], c["T"] + 1), generator=gen)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    w = {n: p.detach().float().numpy() for n, p in zip(model.names, model.ps)}
    write_safetensors(os.path.join(tmp, c["name"] + ".safetensors"), w)
    np.save(os.path.join(tmp, c["name"] + ".x.npy"), x.numpy().astype(np.int64))
    np.save(os.path.join(tmp, c["name"] + ".y.npy"), y.numpy().astype(np.int64))
    bad = []
    for prec in precs:
        bad += check_prec(c, tmp, prec, w, x, y, set(w))
    return bad


def self_check():
    """Unrounded, the reference is torch_gpt2's GPT2 in float64; its rounding ties to even."""
    c = dict(V=61, T=8, L=2, H=2, C=32)
    gen = torch.Generator().manual_seed(7)
    model = GPT2(c, gen)
    ids = torch.randint(0, c["V"], (2, c["T"] + 1), generator=gen)
    x, y = ids[:, :-1], ids[:, 1:]
    w = {n: p.detach().float().numpy() for n, p in zip(model.names, model.ps)}
    with torch.no_grad():
        for n, p in zip(model.names, model.ps):
            p.data = torch.from_numpy(w[n]).double()
    logits, loss = model(x, y)
    loss.backward()
    mine = PrecisionGPT2(c, w, None).run(x, y)
    worst = max([rel_err(mine["logits"], logits.detach()), rel_err(mine["loss"], loss.item())] +
                [rel_err(mine["grad." + n], p.grad) for n, p in zip(model.names, model.ps)])
    ties = torch.tensor([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 2.0 ** -25],
                        dtype=torch.float64)
    bf, hf = round_to(ties, "bf16").tolist(), round_to(ties, "fp16").tolist()
    ties_ok = bf[:2] == [1.0, 1 + 2.0 ** -6] and hf[2:4] == [1.0, 1 + 2.0 ** -9] and hf[4] == 0.0
    print(f"self-check: the unrounded reference against torch_gpt2.GPT2 in float64: worst rel {worst:.1e} "
          f"(bound 1e-12); rounding ties to even: {'ok' if ties_ok else 'WRONG'}")
    return worst < 1e-12 and ties_ok


def main():
    st = preflight(self_check)
    if st:
        return st
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in CONFIGS:
            print(f"config {c['name']}: V={c['V']} T={c['T']} L={c['L']} H={c['H']} C={c['C']}, batch "
                  f"{c['B']}x{c['T']}")
            bad += [f"{c['name']}: {b}" for b in run_config(c, tmp)]
    if bad:
        print("FAIL:")
        for b in bad:
            print("  " + b)
        return 1
    print("all within the bounds: exact mode per site bit-identical but for single roundings, "
          "both modes end to end within 8 u, bf16 within 4 rtol of autocast")
    return 0


if __name__ == "__main__":
    sys.exit(main())
