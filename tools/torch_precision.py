"""A GPT-2 in PyTorch that rounds where `minidc forward --precision bf16|fp16` rounds
(docs/precision.md), for tests/xcheck/xcheck_precision.py.

minidc keeps every 16-bit tensor as a float holding a value of the dtype. This model does the
same in float64: each operation is computed in float64, rounded to float32 and then to the dtype
(round to nearest even, both steps), and kept as float64. The rounding points, forward:

  every parameter: its compute copy, rounded (the gradient is the compute copy's, in float64)
  x0  = R(wte[tok] + wpe[pos])
  ln1 = R(LayerNorm(x)); qkv = R(ln1 Wqkv + bqkv); y = R(attention(q, k, v)) (P not rounded)
  p   = R(y Wo) (the product alone); x2 = R(fl32(fl32(x + bo) + p))
  ln2 = R(LayerNorm(x2)); h = R(ln2 Wfc + bfc); u = R(gelu_tanh(h))
  p2  = R(u Wp); x3 = R(fl32(fl32(x2 + bp) + p2))
  lnf = R(LayerNorm(x)); logits = R(lnf wte^T); the loss from the rounded logits (no rounding)

fl32 is the float32 rounding of minidc's two float32 additions (the sum of two floats, exact in
float64, rounded once: the float32 addition's result). R's backward rounds the gradient that
reaches it the same way, and since autograd sums the gradients of a tensor's uses before its
node's backward, that is minidc's backward: dlogits = R(softmax - onehot) / (B T),
dlnf = R(dlogits wte), dres = R(LayerNorm_backward), du, dh, dln2, then
dres = R(dres + LayerNorm2_backward(dln2)) (both uses of x2 summed, then rounded), dy, dqkv, dln1,
dres = R(dres + LayerNorm1_backward(dln1)); the weight gradients are float64 sums of rounded
tensors (minidc's fp32 main_grad). The residual sums' float32 roundings pass gradients through.
The attention's backward is a fused kernel's, in float64 from q, k, v and the saved P: with
d_from_out (the default) its row term D_i = sum_c dy_ic o_ic reads the output o the layer kept,
rounded (FlashAttention's choice, and minidc's exact kernels', kernels/exact_attention.c);
without, D_i = sum_j P_ij dP_ij (minidc's default kernel, kernels/attention.c). The two agree in
float32 and differ by about u D_i once o is rounded.

PrecisionGPT2(c, weights, prec, fault, d_from_out).run(idx, targets, given) returns every tensor
`minidc forward --dump-dir` writes (names without the step1. prefix): the sites, their gradients
as minidc dumps them (after the rounding), the parameter gradients, logits, losses, loss. With
given (minidc's dump) every rounding point starts from minidc's own inputs (run's docstring).
prec None rounds nowhere: the model is then tools/torch_gpt2.py's GPT2 (the test's self-check).
A fault leaves out one rounding point (FAULTS), to show that the test notices a missing one.

autocast_gpt2 runs tools/torch_gpt2.py's plain GPT-2 under PyTorch's CPU autocast, a mixed
precision that rounds elsewhere. Run with Debian's PyTorch (/usr/bin/python3)."""
import math

import numpy as np
import torch
import torch.nn.functional as F

from torch_gpt2 import GPT2

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# unit roundoff u (half the spacing at 1): bf16 keeps 8 significant bits, fp16 11
UNIT = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}

# planted faults: a mixed precision that leaves out one rounding point
FAULTS = {
    "attn-unrounded": "the attention's output y kept in float32 (not rounded)",
    "fused-residual": "the projections' product not rounded apart: x2 = R(x + bo + y Wo)",
    "grads-unrounded": "no activation gradient rounded in the backward",
    "ln1-unrounded": "LayerNorm 1's output kept in float32",
    "p-unrounded": "the attention's probabilities not rounded before P V and dV's P^T dO",
}

BLOCK_SITES = ["in", "ln_1", "attn.qkv", "attn.y", "attn.c_proj", "res_2", "ln_2", "mlp.c_fc", "mlp.gelu",
               "mlp.c_proj", "out"]


def round_to(t, prec):
    """prec "bf16" or "fp16": float64 -> float32 -> the dtype, to nearest even each time; "fp32":
    to float32 only; None: unchanged. float64 out."""
    if prec is None:
        return t
    t = t.to(torch.float32)
    if prec != "fp32":
        t = t.to(DTYPES[prec])
    return t.to(torch.float64)


class _Round(torch.autograd.Function):
    """R: the forward value rounded to prec, and the gradient that reaches it rounded to
    grad_prec. rec (a _Record) keeps both under the site's name; where rec.given holds minidc's
    tensor of the site (or its gradient), that tensor goes on instead of the reference's own."""

    @staticmethod
    def forward(ctx, x, prec, grad_prec, name, rec):
        ctx.grad_prec, ctx.name, ctx.rec = grad_prec, name, rec
        own = round_to(x, prec)
        rec.vals[name] = own.detach()
        forced = rec.given.get(name) if rec.given else None
        return forced.clone() if forced is not None else own

    @staticmethod
    def backward(ctx, g):
        rec = ctx.rec
        own = round_to(g, ctx.grad_prec)
        rec.grads[ctx.name] = own.detach()
        forced = rec.given.get("grad." + rec.grad_site(ctx.name)) if rec.given else None
        return (forced.clone() if forced is not None else own), None, None, None, None


class _F32(torch.autograd.Function):
    """fl32: the float32 rounding of a float32 addition; the gradient passes unchanged."""

    @staticmethod
    def forward(ctx, x):
        return x.to(torch.float32).to(torch.float64)

    @staticmethod
    def backward(ctx, g):
        return g


class _Attention(torch.autograd.Function):
    """Causal attention of one (B, H, T, d) q, k, v in float64, rounding its probabilities where
    minidc's kernels do (held.prec; None: nowhere), then with the backward of one of two kernels:
      held.o set (exact mode's kernel, as FlashAttention): the forward's P V reads the unnormalized
        E = exp(S - m) rounded (m the row's max), divided by the fp32 sum l; the backward's
        dV reads P = exp(S - lse) rounded, dS = P (dP - D) with the unrounded P and
        D_i = sum_c dy_ic o_ic from the output o the layer kept (the rounded y);
      held.o None (the default kernel, which materializes P): P = softmax(S) rounded is what P V,
        dV's P^T dy, D = sum_j P_ij dP_ij and dS = P (dP - D) all read."""

    @staticmethod
    def forward(ctx, q, k, v, held):
        T, d = q.shape[-2], q.shape[-1]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        S = ((q @ k.transpose(-2, -1)) / math.sqrt(d)).masked_fill(~mask, float("-inf"))
        P = S.softmax(-1)
        ctx.save_for_backward(q, k, v, P)
        ctx.held = held
        if held.prec is None:
            return P @ v
        if held.exact:
            E = round_to(round_to(torch.exp(S - S.amax(-1, keepdim=True)), "fp32"), held.prec)
            l = round_to(torch.exp(S - S.amax(-1, keepdim=True)), "fp32").sum(-1, keepdim=True)
            return (E @ v) / l
        return round_to(P, held.prec) @ v

    @staticmethod
    def backward(ctx, dy):
        q, k, v, P = ctx.saved_tensors
        held = ctx.held
        scale = 1.0 / math.sqrt(q.shape[-1])
        dP = dy @ v.transpose(-2, -1)
        Pv = P if held.prec is None else round_to(P, held.prec)  # the P dV reads
        Ps = Pv if not held.exact else P  # the P dS and D read: the default kernel's kept, rounded P
        o = held.o
        D = (dy * o).sum(-1, keepdim=True) if o is not None else (Ps * dP).sum(-1, keepdim=True)
        dS = Ps * (dP - D)
        return (dS @ k) * scale, (dS.transpose(-2, -1) @ q) * scale, Pv.transpose(-2, -1) @ dy, None


class _Held:
    """The attention's kept output, for its backward's D (None: D from P and dP); the dtype its
    probabilities round to (None: none) and which kernel's rounding (exact: FlashAttention's)."""
    o = None
    prec = None
    exact = False


class _Record:
    """The reference's own rounded values (vals) and gradients (grads) by site; given: minidc's
    tensors by dump name (site, grad.<site>) to go on with, or None."""

    def __init__(self, given):
        self.vals, self.grads = {}, {}
        self.given = {n: torch.as_tensor(np.array(a, np.float64)) for n, a in given.items()} if given else None

    @staticmethod
    def grad_site(name):
        """The dump's name of the gradient a rounding point's backward gives: the residual
        stream's after block N is dumped as grad.h.N.out, the embedding's as grad.h.0.in."""
        return "h.0.in" if name == "embed" else name


class PrecisionGPT2:
    """GPT-2 (pre-LN, learned positions, tanh GELU, tied head, Conv1D weights [in, out]) in
    float64 with minidc's rounding points for prec "bf16" or "fp16" (None: float64, no rounding).
    c: V, T, L, H, C; weights: Hugging Face name (no transformer. prefix) -> float32 array;
    fault: one of FAULTS (a rounding point left out) or None."""

    def __init__(self, c, weights, prec, fault=None, d_from_out=True):
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"fault {fault!r}: one of {', '.join(FAULTS)}")
        self.c, self.prec, self.fault, self.d_from_out = c, prec, fault, d_from_out
        self.names = list(weights)
        self.master = {n: torch.from_numpy(np.array(w, np.float32)).to(torch.float64) for n, w in weights.items()}

    def run(self, idx, targets, given=None):
        """name -> float64 numpy array: the sites (embed, h.N.in ... h.N.out, ln_f, logits,
        losses), loss, grad.<site> for the sites minidc's backward dumps, grad.<parameter>.

        given None: the reference runs on its own values. given (minidc's dump, the same names):
        each rounding point computes its value from minidc's inputs, records its own rounding and
        passes minidc's tensor on; the backward likewise. Every site's value is then one
        operation of the reference on minidc's own inputs: their differences do not propagate,
        and each site is compared alone. The weight gradients are then the float64 sums of
        minidc's own rounded tensors."""
        c, prec, fault = self.c, self.prec, self.fault
        B, T = idx.shape
        C, H = c["C"], c["H"]
        rec = _Record(given)
        # a rounding point left out keeps float32, as minidc's fp32 tensors (None: float64 throughout)
        kept = None if prec is None else "fp32"
        gprec = kept if fault == "grads-unrounded" else prec

        def R(name, t, skip=False):  # a rounding point, the dump site `name`
            return _Round.apply(t, kept if skip else prec, gprec, name, rec)

        def fl32(t):
            return t if prec is None else _F32.apply(t)

        # the compute copy of each parameter: the master rounded; its .grad is the weight gradient
        p = {n: round_to(w, prec).clone().requires_grad_() for n, w in self.master.items()}
        x = R("embed", p["wte.weight"][idx] + p["wpe.weight"][:T])
        for i in range(c["L"]):
            h = f"h.{i}."
            a = R(h + "ln_1", F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps=1e-5),
                  skip=fault == "ln1-unrounded")
            qkv = R(h + "attn.qkv", a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"])
            q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=2))
            held = _Held()
            held.prec = prec if prec in DTYPES and fault != "p-unrounded" else None
            held.exact = self.d_from_out
            y = R(h + "attn.y", _Attention.apply(q, k, v, held).transpose(1, 2).reshape(B, T, C),
                  skip=fault == "attn-unrounded")
            if self.d_from_out:
                held.o = y.detach().reshape(B, T, H, C // H).transpose(1, 2)
            if fault == "fused-residual":
                x = R(h + "res_2", fl32(x + p[h + "attn.c_proj.bias"] + y @ p[h + "attn.c_proj.weight"]))
            else:
                pr = R(h + "attn.c_proj", y @ p[h + "attn.c_proj.weight"])
                x = R(h + "res_2", fl32(fl32(x + p[h + "attn.c_proj.bias"]) + pr))
            a = R(h + "ln_2", F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps=1e-5))
            a = R(h + "mlp.c_fc", a @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
            a = R(h + "mlp.gelu", F.gelu(a, approximate="tanh"))
            pr = R(h + "mlp.c_proj", a @ p[h + "mlp.c_proj.weight"])
            x = R(h + "out", fl32(fl32(x + p[h + "mlp.c_proj.bias"]) + pr))
        a = R("ln_f", F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5))
        logits = R("logits", a @ p["wte.weight"].t())
        losses = F.cross_entropy(logits.reshape(-1, c["V"]), targets.reshape(-1), reduction="none").reshape(B, T)
        loss = losses.mean()
        loss.backward()
        out = {n: t.numpy() for n, t in rec.vals.items()}
        for i in range(c["L"]):  # block N's input: the embedding's or block N-1's output
            out[f"h.{i}.in"] = out["embed" if i == 0 else f"h.{i - 1}.out"]
        out["losses"], out["loss"] = losses.detach().numpy(), np.float64(loss.item())
        for n, g in rec.grads.items():
            out["grad." + _Record.grad_site(n)] = g.numpy()
        for i in range(1, c["L"]):  # the residual stream's gradient between blocks, under both names
            out[f"grad.h.{i}.in"] = out[f"grad.h.{i - 1}.out"]
        for n in self.names:
            out["grad." + n] = p[n].grad.numpy()
        return out


def autocast_gpt2(c, weights, idx, targets):
    """tools/torch_gpt2.py's GPT-2 with float32 parameters under torch.autocast("cpu", bfloat16):
    its matrix products take bf16 inputs and give bf16 outputs, LayerNorm, softmax and the loss
    stay float32. Returns what `minidc forward --dump` writes: logits, loss, losses, grad.<name>
    (float64 numpy arrays)."""
    model = GPT2(c, torch.Generator().manual_seed(0))
    with torch.no_grad():
        for n, q in zip(model.names, model.ps):
            q.data = torch.from_numpy(np.array(weights[n], np.float32))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, loss = model(idx, targets)
    losses = F.cross_entropy(logits.float().reshape(-1, c["V"]), targets.reshape(-1), reduction="none")
    loss.backward()
    out = {"logits": logits.detach().double().numpy(), "loss": np.float64(loss.item()),
           "losses": losses.detach().double().reshape(targets.shape).numpy()}
    for n, q in zip(model.names, model.ps):
        out["grad." + n] = q.grad.double().numpy()
    return out
