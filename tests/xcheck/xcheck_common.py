"""What the PyTorch cross-checks (tests/xcheck/xcheck_*.py) share: the bound on relative errors,
the AdamW settings both sides train with, the skip (exit 77) where PyTorch or numpy is missing,
where the tree and the minidc binary are (BUILD, default build), tools/ on the import path for
the PyTorch models, the relative error every check reports and the AdamW steps the references
train with."""
import os
import sys

__all__ = ["ADAM", "MINIDC", "ROOT", "TOL", "adamw_steps", "np", "preflight", "rel_err", "torch"]
TOL = 1e-5
ADAM = dict(lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-5, grad_clip=1.0)

try:
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover
    print(f"skipped: PyTorch or numpy not importable ({e}); install python3-torch python3-numpy")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINIDC = os.path.join(ROOT, os.environ.get("BUILD", "build"), "minidc")
sys.path.insert(0, os.path.join(ROOT, "tools"))


def rel_err(got, want):
    """max |got - want| / max |want| (the plain difference where want is 0; inf for other shapes)"""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    scale = np.abs(want).max() if want.size else 0.0
    diff = np.abs(got - want).max() if want.size else 0.0
    return float(diff / scale) if scale > 0 else float(diff)


def adamw_steps(ps, first_loss, loss_fn, steps, eps=ADAM["eps"]):
    """minidc's training on the reference side: AdamW with weight decay on the matrices only and
    global-norm clipping, `steps` updates. ps hold the gradients of the first step's loss
    (first_loss, a float); loss_fn() runs a fresh forward. Returns the step losses and the loss
    after the last update."""
    decay = [p for p in ps if p.dim() == 2]
    nodecay = [p for p in ps if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": ADAM["weight_decay"]},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=ADAM["lr"], betas=(ADAM["beta1"], ADAM["beta2"]), eps=eps)
    losses = [first_loss]
    for k in range(steps):
        if k > 0:
            for p in ps:
                if p.grad is not None:
                    p.grad.zero_()
            loss = loss_fn()
            loss.backward()
            losses.append(loss.item())
        torch.nn.utils.clip_grad_norm_(ps, ADAM["grad_clip"])
        opt.step()
    with torch.no_grad():
        losses.append(loss_fn().item())
    return losses


def preflight(self_check):
    """Before a check's configs: one thread, the reference's own check, a minidc binary. 0 to go
    on, else the exit code (1: the reference disagrees with itself, 77: minidc not built)."""
    torch.set_num_threads(1)
    if not self_check():
        print("FAIL: the reference disagrees with itself (see above)")
        return 1
    if not os.access(MINIDC, os.X_OK):
        print(f"skipped: {MINIDC} not built")
        return 77
    return 0
