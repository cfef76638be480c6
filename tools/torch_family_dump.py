"""tools/torch_dump.py's Llama, Qwen2, Qwen3, Mixtral, Qwen3-MoE and Qwen2-MoE part: a Hugging Face
directory of one of these families read (config.json, and model.safetensors or the shards
model.safetensors.index.json names) and run by the PyTorch model of tools/torch_family.py, keeping
the tensors at minidc's dump sites (a sparse block's router p (the sigmoid router's s), its experts'
outputs, the shared expert's output and the MLP's output among them). Run with Debian's PyTorch
(/usr/bin/python3)."""
import json
import os

import numpy as np
import torch

from torch_family import (FAMILIES, MOE_FAMILIES, Family, dims, expert_names, has_qk_norm, has_shared, is_sparse,
                          moe_dims, moe_router, router_name, shared_experts_names, shared_names, tensor_shapes)
from torch_gpt2 import read_safetensors


def family_config(path):
    """config.json's dict where path is a directory whose model_type is a family's, else None."""
    cfg = os.path.join(path, "config.json")
    if not os.path.isdir(path) or not os.path.exists(cfg):
        return None
    with open(cfg) as f:
        c = json.load(f)
    return c if c.get("model_type") in FAMILIES + MOE_FAMILIES else None


def load(path):
    """name -> float32 array: the directory's tensors, from one file or every shard."""
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for name in files:
        w.update({n: np.array(a, np.float32) for n, a in read_safetensors(os.path.join(path, name)).items()})
    return w


def block_sites(c, i=0, grads=False):
    """Block i's sites in execution order, as minidc dumps them for the family: a dense block's
    SwiGLU (mlp.gate, mlp.up, mlp.product, mlp.c_proj), a sparse block's mlp.router (p; the
    sigmoid router's s), mlp.choice (the k chosen experts, int32), mlp.gates (their gates),
    mlp.experts (the k chosen experts' outputs), mlp.shared (qwen2_moe's
    shared expert's output before its sigmoid scale; n_shared_experts' output) and mlp.moe (the
    MLP's output). grads: the sites whose gradients minidc dumps (a sparse block's router and
    experts have none there)."""
    qk = ["attn.q_norm", "attn.k_norm"] if has_qk_norm(c) else []
    if not is_sparse(c, i):
        mlp = ["mlp.gate", "mlp.up", "mlp.product", "mlp.c_proj"]
    else:
        shared = ["mlp.shared"] if has_shared(c) or moe_router(c).n_shared else []
        mlp = shared + ["mlp.moe"] if grads else ["mlp.router", "mlp.choice", "mlp.gates", "mlp.experts"] + shared + [
            "mlp.moe"]
    return ["in", "ln_1", "attn.qkv"] + qk + ["attn.rope_q", "attn.rope_k", "attn.y", "attn.c_proj", "res_2",
                                              "ln_2"] + mlp + ["out"]


def extra_losses(c, lb=0.0):
    """name -> value: the scalars minidc's --dump writes after losses for the family: a MoE
    family's loss.aux and loss.z (minidc's own aux and z terms: zero, the directory's run has
    none), and with output_router_logits loss.lb (lb: transformers' auxiliary term in the loss,
    router_aux_loss_coef times load_balancing_loss_func); none for a dense family."""
    if c["model_type"] not in MOE_FAMILIES:
        return {}
    return {"loss.aux": 0.0, "loss.z": 0.0, **({"loss.lb": lb} if moe_router(c).aux_coef else {})}


# a block's tensors in minidc's table order (ref/model/family.c): q, k, v's weights adjacent, then
# their biases; gate's and up's the same (transformers' module order puts each bias after its weight);
# a sparse block's router and experts take the dense MLP's place (block_tensors)
BLOCK_TENSORS = ["input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                 "self_attn.v_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                 "self_attn.q_norm.weight", "self_attn.k_norm.weight", "self_attn.o_proj.weight",
                 "self_attn.o_proj.bias", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                 "mlp.up_proj.weight", "mlp.gate_proj.bias", "mlp.up_proj.bias", "mlp.down_proj.weight",
                 "mlp.down_proj.bias"]


def block_tensors(c, i):
    """Block i's tensors' names in minidc's table order: a sparse block's attention and
    post_attention_layernorm, qwen2_moe's shared expert (gate, up, down) and shared_expert_gate
    or the shared experts' (gate, up, down), the router, then per expert j its gate, up and down
    (Mixtral's w1, w3, w2); the parameters only (not e_score_correction_bias)."""
    b = f"model.layers.{i}."
    if not is_sparse(c, i):
        return [b + k for k in BLOCK_TENSORS]
    dense_mlp = BLOCK_TENSORS.index("mlp.gate_proj.weight")
    experts = [n for j in range(moe_dims(c)[0]) for n in expert_names(c, i, j)]
    shared = (list(shared_names(c, i)) if has_shared(c) else
              list(shared_experts_names(c, i)) if moe_router(c).n_shared else [])
    return [b + k for k in BLOCK_TENSORS[:dense_mlp]] + shared + [router_name(c, i)] + experts


def param_order(c):
    """The parameters' names in the order minidc writes their gradients."""
    have = tensor_shapes(c)
    blocks = [n for i in range(dims(c)[2]) for n in block_tensors(c, i)]
    return [n for n in ["model.embed_tokens.weight"] + blocks + ["model.norm.weight", "lm_head.weight"] if n in have]


def run(c, w, x, y, dtype, dev, bf16, unrotated_k=()):
    """(params, sites, logits, loss, layers, extra): one forward at dtype on dev (under bf16
    autocast where bf16), the sites kept for the backward; params: [(name, parameter)] in minidc's
    order; extra: extra_losses (the auxiliary loss's term of this forward).
    The experts' weights start with a zero .grad, which the backward adds to: an expert no token
    reaches has the zero gradient minidc writes for it."""
    model = Family(c, w, dtype).to(dev)
    for i in range(dims(c)[2]):
        for n in (e for j in range(moe_dims(c)[0] if is_sparse(c, i) else 0) for e in expert_names(c, i, j)):
            model.p[n].grad = torch.zeros_like(model.p[n])
    sites = {}
    with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
        logits, loss = model(x, y, sites=sites, unrotated_k=unrotated_k, moe_sites=True)
    return ([(n, model.p[n]) for n in param_order(c)], sites, logits, loss, dims(c)[2],
            extra_losses(c, model.aux))
