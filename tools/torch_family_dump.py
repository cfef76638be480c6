"""tools/torch_dump.py's Llama, Qwen2 and Qwen3 part: a Hugging Face directory of one of these
families read (config.json, and model.safetensors or the shards model.safetensors.index.json
names) and run by the PyTorch model of tools/torch_family.py, keeping the tensors at minidc's
dump sites. Run with Debian's PyTorch (/usr/bin/python3)."""
import json
import os

import numpy as np
import torch

from torch_family import FAMILIES, Family, dims, has_qk_norm, tensor_shapes
from torch_gpt2 import read_safetensors


def family_config(path):
    """config.json's dict where path is a directory whose model_type is a family's, else None."""
    cfg = os.path.join(path, "config.json")
    if not os.path.isdir(path) or not os.path.exists(cfg):
        return None
    with open(cfg) as f:
        c = json.load(f)
    return c if c.get("model_type") in FAMILIES else None


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


def block_sites(c):
    """A block's sites in execution order, as minidc dumps them for the family."""
    qk = ["attn.q_norm", "attn.k_norm"] if has_qk_norm(c) else []
    return (["in", "ln_1", "attn.qkv"] + qk + ["attn.rope_q", "attn.rope_k", "attn.y", "attn.c_proj", "res_2",
            "ln_2", "mlp.gate", "mlp.up", "mlp.product", "mlp.c_proj", "out"])


# a block's tensors in minidc's table order (ref/model/family.c): q, k, v's weights adjacent, then
# their biases; gate's and up's the same (transformers' module order puts each bias after its weight)
BLOCK_TENSORS = ["input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                 "self_attn.v_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                 "self_attn.q_norm.weight", "self_attn.k_norm.weight", "self_attn.o_proj.weight",
                 "self_attn.o_proj.bias", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
                 "mlp.up_proj.weight", "mlp.gate_proj.bias", "mlp.up_proj.bias", "mlp.down_proj.weight",
                 "mlp.down_proj.bias"]


def param_order(c):
    """The parameters' names in the order minidc writes their gradients."""
    have = tensor_shapes(c)
    blocks = [f"model.layers.{i}.{k}" for i in range(dims(c)[2]) for k in BLOCK_TENSORS]
    return [n for n in ["model.embed_tokens.weight"] + blocks + ["model.norm.weight", "lm_head.weight"] if n in have]


def run(c, w, x, y, dtype, dev, bf16, unrotated_k=()):
    """(params, sites, logits, loss, layers): one forward at dtype on dev (under bf16 autocast
    where bf16), the sites kept for the backward; params: [(name, parameter)] in minidc's order."""
    model = Family(c, w, dtype).to(dev)
    sites = {}
    with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
        logits, loss = model(x, y, sites=sites, unrotated_k=unrotated_k)
    return [(n, model.p[n]) for n in param_order(c)], sites, logits, loss, dims(c)[2]
