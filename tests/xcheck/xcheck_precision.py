"""Cross-check of minidc's mixed precision (`minidc forward --precision bf16|fp16`, GPT-2, serial)
against PyTorch: tools/torch_precision.py's float64 GPT-2 that rounds where minidc rounds, and
PyTorch's own CPU autocast.

For each config and dtype the weights (float32 safetensors, written by hand) and the tokens (.npy)
go to `minidc forward --dump-dir`, once in exact mode (--exact) and once by default, and every
tensor of the dump is compared: the sites of the forward, their gradients, the parameters'
gradients, the losses. Units: u is the dtype's unit roundoff (bf16 2^-8, fp16 2^-11); an
element's ulp is the dtype's spacing at the reference's value (at most 2u times the value);
"rel" is max|minidc - ref| / max|ref| over a tensor, in u for the 16-bit tensors.

(a) exact mode against the reference (the same rounding points; float64, then float32, then the
  dtype, to nearest even):
  per site (the check with power): the reference runs on minidc's own inputs (PrecisionGPT2.run's
  `given`): each rounding point computes its value from the tensors minidc dumped and passes
  minidc's on, so each site is one operation on identical inputs and minidc's float32 result and
  the float64 one round apart only where they straddle a rounding boundary: at about (float32
  error / ulp) of the elements, by one ulp. Asserted at every site: at least SAME_MIN = 99% of
  the elements bit-identical (measured >= 99.80% over 16 seeds x 2 configs), and every element
  within 1 ulp + SLACK max|ref|, SLACK = 2^-20: float32's own error at the tensor's scale, which
  is many ulps of an element that a cancellation leaves near 0 (measured at most 2^-25 beyond the
  ulp; 2^-20 is still 2^12 below bf16's u and 2^9 below fp16's). The weight gradients and the
  losses, float32 sums of the same rounded tensors, within FP32_TOL = 1e-5 (measured <= 5e-7).
  A rounding point left out gives values off by up to half an ulp at nearly every element
  (0-6% identical); the projection's product rounded with the residual instead of apart flips
  9-13% of the residual stream, by up to a hundred ulps: the self-check runs the reference with
  each of torch_precision.FAULTS against the same dump and fails unless this check rejects it.
  end to end: the reference on its own values. The forward's sites up to and including the first
  that differs anywhere have identical inputs on both sides, so each of their elements is within
  1 ulp (+ SLACK) (asserted: embed, h.0.in and h.0.ln_1 always, h.0.attn.qkv and on while
  nothing differs before). Later tensors inherit those differences (a flip at a few elements in
  10^4 moves the next sums by a fraction of an ulp and flips a few more; with fp16's 8 times
  finer ulp, 40-60% of the last tensors' elements differ) but they do not add up coherently, so
  a tensor stays within a few ulps of its largest element: rel <= E2E_U = 8 u asserted for every
  tensor, the weights' gradients included (measured at most 3.7 u).
(b) default mode (OpenBLAS's order of sums) against the same reference: the per-site check of (a)
  (measured >= 99.80% identical, at most 2^-25 beyond the ulp, float32 tensors <= 5e-7) and end
  to end rel <= E2E_U (measured at most 3.8 u). Here the reference's attention backward takes
  its row term from P and dP (D_i = sum_j P_ij dP_ij), as minidc's default kernel does
  (kernels/attention.c); the exact kernels take D_i = sum_c dy_ic o_ic from the kept output o,
  rounded (kernels/exact_attention.c, as FlashAttention): the two differ by about u D in 16 bits.
  Every site of both dumps must hold values of the dtype (the model rounds each of them).
(c) bf16 in default mode against torch.autocast("cpu", dtype=torch.bfloat16) on
  tools/torch_gpt2.py's GPT-2. Autocast rounds elsewhere (bf16 matmul outputs and weight
  gradients; LayerNorm, softmax and the loss in float32), so the two agree only in
  torch.testing's bf16 sense, and per tensor: elementwise assert_close fails on elements that
  cancel to near 0 (by 100x and more here). The model: each side is a few u from float64 per
  rounding on a tensor's path; assert_close's bf16 rtol 1.6e-2 (about 4 u) is one result's
  allowance. minidc stays within 3.2 u (0.8 rtol) of float64 on every tensor; autocast's CPU
  matmul of this PyTorch also rounds its partial sums (printed: about 0.6 sqrt(K) u for K terms,
  10 u for the 4C-term products), which its gradients pass through twice, forward and backward:
  up to 4.9 rtol against float64 here. Asserted per tensor: max|minidc - autocast| <= atol +
  AUTOCAST_SCALE rtol max|autocast|, atol 1e-5, AUTOCAST_SCALE = 8 (measured at most 4.7 rtol).
  Each side's error against float64 is printed beside it.

The reference checks itself first: with no rounding it is tools/torch_gpt2.py's GPT2 in float64
(rel < 1e-12), and its rounding ties to even. fp16 runs without loss scaling: these configs keep
every value in fp16's range (the smallest gradients in its subnormals, rounded alike).

Exit 0: pass; 1: a bound exceeded or a failure; 77: skipped (no torch, no minidc).
"""
import json
import os
import subprocess
import sys
import tempfile

from xcheck_common import MINIDC, np, preflight, rel_err, torch

from torch_gpt2 import GPT2, read_safetensors, write_safetensors  # noqa: E402
from torch_precision import BLOCK_SITES, FAULTS, UNIT, PrecisionGPT2, autocast_gpt2, round_to  # noqa: E402

CONFIGS = [
    # V not a multiple of 128 (padded logits), C=72 over H=3 heads of 24
    dict(name="odd", V=97, T=16, L=2, H=3, C=72, B=3, seed=1),
    dict(name="wide", V=128, T=32, L=3, H=4, C=64, B=2, seed=2),
]
PRECS = ("bf16", "fp16")
SAME_MIN = 0.99
SLACK = 2.0 ** -20
E2E_U = 8.0
FP32_TOL = 1e-5
AUTOCAST_RTOL, AUTOCAST_ATOL, AUTOCAST_SCALE = 1.6e-2, 1e-5, 8.0
MANT = {"bf16": (8, -126), "fp16": (11, -14)}  # significant bits, smallest normal exponent


def forward_sites(L):
    """The forward's sites in execution order."""
    return ["embed"] + [f"h.{i}.{s}" for i in range(L) for s in BLOCK_SITES] + ["ln_f", "logits"]


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
        piece = np.asarray(a, np.float64)
        if loc:
            piece = piece[np.ix_(*loc)]
        if e["sum"]:
            g[np.ix_(*glob)] += piece
        else:
            g[np.ix_(*glob)] = piece
    return out


def ulp(a, prec):
    """The dtype's spacing at |a| (subnormals and 0: the smallest spacing)."""
    bits, emin = MANT[prec]
    a = np.abs(np.asarray(a, np.float64))
    e = np.where(a > 0, np.maximum(np.floor(np.log2(np.where(a > 0, a, 1.0))), emin), emin)
    return np.ldexp(1.0, (e - (bits - 1)).astype(int))


def not_of_dtype(a, prec):
    """The number of elements of a that are not values of the dtype."""
    a = np.asarray(a, np.float64)
    return int(np.sum(round_to(torch.from_numpy(a), prec).numpy() != a))


def internal(name):
    """The sites whose kernel rounds an operand of its own (the attention's probabilities before
    P V, and before dV's P^T dO): a probability that float32 and float64 round apart moves an
    element by up to its ulp times |v|, at most u max|ref| more."""
    return name.endswith("attn.y") or name.endswith("attn.qkv") and name.startswith("grad.")


def stats(got, ref, prec, extra=0.0):
    """same: fraction bit-identical; ulps: max |got - ref| / ulp(ref); rel: max|got - ref| /
    max|ref| in u; within: every element <= 1 ulp + (SLACK + extra) max|ref|; beyond: max(|got -
    ref| - ulp(ref)) / max|ref|, in 2^-24."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    d = np.abs(got - ref)
    u1 = ulp(ref, prec)
    scale = np.abs(ref).max() if ref.size else 0.0
    return dict(same=float(np.mean(got == ref)), ulps=float((d / u1).max()), rel=rel_err(got, ref) / UNIT[prec],
                within=bool(np.all(d <= u1 + (SLACK + extra) * scale)),
                beyond=float(max(0.0, (d - u1).max()) / scale / 2.0 ** -24) if scale > 0 else 0.0)


def is_fp32(name, params):
    """The tensors minidc keeps in float32: the losses and the weight gradients (main_grad)."""
    return name == "losses" or name[len("grad."):] in params


def per_site(got, ref, prec, params, label):
    """(a) and (b)'s per-site check of got against the reference run on got's own inputs:
    (failures, {name: row})."""
    bad, rows = [], {}
    for n, r in ref.items():
        if n not in got or n == "loss":
            continue
        if is_fp32(n, params):
            rows[n] = dict(rel=rel_err(got[n], r))
            if rows[n]["rel"] > FP32_TOL:
                bad.append(f"{label} {n}: rel {rows[n]['rel']:.2e} > {FP32_TOL:.0e}")
            continue
        s = rows[n] = stats(got[n], r, prec, UNIT[prec] if internal(n) else 0.0)
        if s["same"] < SAME_MIN:
            bad.append(f"{label} {n}: {100 * s['same']:.2f}% bit-identical < {100 * SAME_MIN:.0f}%")
        elif not s["within"]:
            bad.append(f"{label} {n}: an element beyond 1 ulp + 2^-20 max|ref|{' + u max|ref|' * internal(n)} "
                       f"({s['ulps']:.0f} ulps)")
    return bad, rows


def end_to_end(got, ref, prec, params, label, L, first):
    """(a) and (b)'s end-to-end bounds; first: the 1-ulp bound on the forward's sites up to the
    first that differs (exact mode). (failures, {name: row}, [those sites])."""
    bad, rows = [], {}
    for n, r in ref.items():
        if n not in got or n == "loss":
            continue
        rows[n] = dict(rel=rel_err(got[n], r) / UNIT[prec]) if is_fp32(n, params) else stats(got[n], r, prec)
        if rows[n]["rel"] > E2E_U:
            bad.append(f"{label} {n}: rel {rows[n]['rel']:.2f} u > {E2E_U:.0f} u")
    firsts = []
    for n in forward_sites(L) if first else []:
        firsts.append(n)
        if not rows[n]["within"]:
            bad.append(f"{label} {n}: {rows[n]['ulps']:.0f} ulps > 1 (+ 2^-20 max|ref|) on identical inputs")
        if rows[n]["same"] < 1:
            break
    return bad, rows, firsts


def dtype_values(got, prec, params, label):
    """Every site of a 16-bit dump holds values of the dtype."""
    bad = []
    for n, a in got.items():
        k = 0 if is_fp32(n, params) else not_of_dtype(a, prec)
        if k:
            bad.append(f"{label} {n}: {k} of {a.size} values are not {prec} values, at a site the model rounds")
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


def cell(row):
    """identical %, max ulps, rel in u (16-bit tensors); rel (float32 tensors, per site)."""
    if row is None:
        return "-".rjust(24)
    if "same" not in row:
        return f"{row['rel']:.1e}".rjust(24) if row["rel"] < 1e-3 else f"{row['rel']:5.2f}u".rjust(24)
    ulps = f"{row['ulps']:6.0f}" if row["ulps"] < 1e5 else " >1e5"
    return f"{100 * row['same']:8.3f}% {ulps} {row['rel']:5.2f}u"


def check_prec(c, tmp, prec, w, x, y, params):
    """(a) and (b) for one dtype, the self-check of the per-site check's power, and (c) for bf16;
    returns the failures."""
    name, L = c["name"], c["L"]
    got_x = run_minidc(tmp, name, prec, True, c["H"])
    got_d = run_minidc(tmp, name, prec, False, c["H"])
    bad, rows = [], {}
    b, rows["exact e2e"], firsts = end_to_end(got_x, PrecisionGPT2(c, w, prec).run(x, y), prec, params,
                                              f"{prec} exact e2e", L, True)
    bad += b
    b, rows["default e2e"], _ = end_to_end(got_d, PrecisionGPT2(c, w, prec, d_from_out=False).run(x, y), prec,
                                           params, f"{prec} default e2e", L, False)
    bad += b
    for label, got, dfo in (("exact site", got_x, True), ("default site", got_d, False)):
        b, rows[label] = per_site(got, PrecisionGPT2(c, w, prec, d_from_out=dfo).run(x, y, given=got), prec, params,
                                  f"{prec} {label}")
        bad += b
    bad += dtype_values(got_x, prec, params, f"{prec} exact") + dtype_values(got_d, prec, params, f"{prec} default")

    cols = ("exact e2e", "exact site", "default e2e", "default site")
    print(f"  {prec} (u = 2^{int(np.log2(UNIT[prec]))}): identical %, max ulps, rel; float32 tensors: rel "
          f"(end to end in u)")
    print(f"    {'tensor':28s}" + "".join(f"{k:>25s}" for k in cols))
    for n in rows["exact site"]:
        print(f"    {n:28s} " + " ".join(cell(rows[k].get(n)) for k in cols))
    print(f"  {prec} exact e2e: the sites before the first difference within 1 ulp: {', '.join(firsts)}")
    for k in cols:
        sites = [r for r in rows[k].values() if "same" in r]
        fp32 = max(r["rel"] for r in rows[k].values() if "same" not in r)
        print(f"  {prec} {k:12s}: least identical {100 * min(r['same'] for r in sites):7.3f}%, max ulps "
              f"{max(r['ulps'] for r in sites):8.3g}, worst rel {max(r['rel'] for r in sites):5.2f} u; float32 "
              f"tensors {fp32:.2g}{' u' if k.endswith('e2e') else ''}"
              + ("" if k.endswith("e2e") else f"; beyond 1 ulp {max(r['beyond'] for r in sites):.2g} x 2^-24 max|ref|"))

    # the check's power: each planted fault, against the same exact-mode dump, must be rejected
    for fault, what in FAULTS.items():
        caught, _ = per_site(got_x, PrecisionGPT2(c, w, prec, fault=fault).run(x, y, given=got_x), prec, params, "")
        if caught:
            print(f"  {prec} self-check: {fault} ({what}): rejected at {len(caught)} tensors, first{caught[0]}")
        else:
            bad.append(f"{prec} self-check: the per-site check accepts the fault {fault} ({what})")
    if prec == "bf16":
        bad += check_autocast(c, w, x, y, got_d)
    return bad


def bf16_matmul_error(K):
    """This PyTorch's CPU bf16 matmul of K terms (64 x K by K x 64, random): rel in u."""
    g = torch.Generator().manual_seed(K)
    a = torch.randn(64, K, generator=g).bfloat16()
    b = torch.randn(K, 64, generator=g).bfloat16()
    return rel_err((a @ b).double(), a.double() @ b.double()) / UNIT["bf16"]


def check_autocast(c, w, x, y, got):
    """(c): minidc bf16 (default mode) against PyTorch's CPU autocast."""
    ac = autocast_gpt2(c, w, x, y)
    f64 = PrecisionGPT2(c, w, None).run(x, y)
    mine = dict(got, loss=np.float64(got["losses"].mean()))
    bad, worst, worst_m, worst_a = [], 0.0, 0.0, 0.0
    print(f"  bf16 against torch.autocast(cpu, bfloat16): rel = max|minidc - autocast| / max|autocast| (bound "
          f"atol + {AUTOCAST_SCALE:.0f} rtol, rtol {AUTOCAST_RTOL}); each against float64; this PyTorch's CPU bf16 "
          f"matmul of {4 * c['C']} terms: {bf16_matmul_error(4 * c['C']):.1f} u (of {c['C']}: "
          f"{bf16_matmul_error(c['C']):.1f} u)")
    for n, a in ac.items():
        e, em, ea = rel_err(mine[n], a), rel_err(mine[n], f64[n]), rel_err(a, f64[n])
        worst, worst_m, worst_a = max(worst, e), max(worst_m, em), max(worst_a, ea)
        ok = np.abs(np.asarray(mine[n]) - a).max() <= AUTOCAST_ATOL + AUTOCAST_SCALE * AUTOCAST_RTOL * np.abs(a).max()
        print(f"    {n:28s} rel {e:.2e} ({e / AUTOCAST_RTOL:.2f} rtol)   minidc {em:.2e}   autocast {ea:.2e}"
              + ("" if ok else "   <-- above the bound"))
        if not ok:
            bad.append(f"bf16 autocast {n}: rel {e:.2e} > {AUTOCAST_SCALE:.0f} x {AUTOCAST_RTOL}")
    print(f"  bf16 against autocast: worst {worst:.2e} ({worst / AUTOCAST_RTOL:.2f} rtol); against float64: minidc "
          f"{worst_m / AUTOCAST_RTOL:.2f} rtol, autocast {worst_a / AUTOCAST_RTOL:.2f} rtol")
    return bad


def run_config(c, tmp, precs=PRECS):
    """Weights, tokens, then check_prec for each dtype: the failures."""
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
    ties_ok = bf[:2] == [1.0, 1 + 2.0 ** -6] and hf[2:] == [1.0, 1 + 2.0 ** -9, 0.0]
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
        print(f"FAIL: {len(bad)} bounds exceeded:")
        for b in bad:
            print("  " + b)
        return 1
    print(f"all within the bounds: per site >= {100 * SAME_MIN:.0f}% bit-identical and 1 ulp, end to end "
          f"{E2E_U:.0f} u, bf16 within {AUTOCAST_SCALE:.0f} rtol of autocast")
    return 0


if __name__ == "__main__":
    sys.exit(main())
