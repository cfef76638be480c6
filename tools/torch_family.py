"""A plain PyTorch model of transformers' Llama, Qwen2 and Qwen3 decoders (LlamaForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM) and of the mixtures of experts Mixtral, Qwen3-MoE and Qwen2-MoE
(MixtralForCausalLM, Qwen3MoeForCausalLM, Qwen2MoeForCausalLM), written from their definitions
(transformers is not needed), with Hugging Face's tensor names, and the writer of a Hugging Face
model directory for them: the reference tests/xcheck/xcheck_family.py and
tests/xcheck/xcheck_moe_family.py check minidc's families against, and the model tools/torch_dump.py
runs on a family's directory (its forward can keep the tensors at minidc's dump sites). The sparse
MoE block is tools/torch_moe_family.py's (its names are re-exported here); the safetensors reading
and writing is tools/torch_gpt2.py's. Run with Debian's PyTorch (/usr/bin/python3).

The config is a dict with transformers' keys: model_type ("llama" | "qwen2" | "qwen3" | "mixtral" |
"qwen3_moe" | "qwen2_moe"),
vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps, rope_theta, rope_scaling
(None or the llama3 dict), tie_word_embeddings, attention_bias (llama: q/k/v/o biases; qwen3:
the same, off in real checkpoints), mlp_bias (llama: gate/up/down biases); qwen2 and qwen2_moe
always have q/k/v biases and no o_proj bias; qwen3 and qwen3_moe have q_norm and k_norm. Other keys
are ignored. mixtral: Llama's attention without biases (no attention_bias key); qwen3_moe: Qwen3's
attention; qwen2_moe: Qwen2's (head_dim = hidden_size / num_attention_heads, no head_dim key). Their
sparse blocks, the experts' keys, qwen2_moe's shared expert, DeepSeek-V3's routing keys (its
e_score_correction_bias, a buffer: in the table and the files, not a parameter), the shared
experts, first_k_dense_replace and the auxiliary loss (output_router_logits, added to the loss):
tools/torch_moe_family.py.

The model, per block (pre-norm, nn.Linear weights [out, in]):
  h = x + o_proj(attn(input_layernorm(x))),  out = h + down_proj(silu(gate_proj(n)) * up_proj(n)),
  n = post_attention_layernorm(h) (a sparse block: out = h + its sparse MLP on n); then model.norm
  and logits = norm(x) @ lm_head^T (the embedding when tied); RMSNorm y = w * x * rsqrt(mean(x^2)
  + eps). Attention: H query heads, KV kv heads (query head h reads kv head h // (H / KV)),
  head_dim d, (qwen3: q_norm / k_norm per head before the rotation) rotary positions 0..T-1 with
  rotate_half, scores / sqrt(d), causal softmax.

Rotary tables as transformers builds them: inv_freq in float32 (then llama3 scaling in float32
torch ops, the same expressions as _compute_llama3_parameters), angle = position * inv_freq as a
float32 product; cos and sin of that float32 angle are then taken at the model's dtype (transformers
takes them in float32: a 6e-8 difference)."""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from torch_gpt2 import read_safetensors, write_safetensors
from torch_moe_family import (MOE_ARCH, MOE_FAMILIES, MOE_NAMES, Router, bias_name, block_shared,  # noqa: F401
                              expert_names, has_shared, is_buffer, is_sparse, load_balancing_loss, moe_config,
                              moe_dims, moe_mlp, moe_router, route, route_sigmoid, router_name, shared_experts_names,
                              shared_names, sigmoid_choice, sparse_mlp, sparse_shapes)

FAMILIES = ("llama", "qwen2", "qwen3")  # the dense ones
ARCH = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", **MOE_ARCH}


def dims(c):
    """V, C, L, H, KV, d, I."""
    C, H = c["hidden_size"], c["num_attention_heads"]
    return (c["vocab_size"], C, c["num_hidden_layers"], H, c.get("num_key_value_heads") or H,
            c.get("head_dim") or C // H, c["intermediate_size"])


def has_qkv_bias(c):
    return c["model_type"] in ("qwen2", "qwen2_moe") or bool(c.get("attention_bias"))


def has_o_bias(c):
    return c["model_type"] not in ("qwen2", "qwen2_moe") and bool(c.get("attention_bias"))


def has_mlp_bias(c):
    return c["model_type"] == "llama" and bool(c.get("mlp_bias"))


def has_qk_norm(c):
    return c["model_type"] in ("qwen3", "qwen3_moe")


def tensor_shapes(c):
    """name -> shape, in transformers' module order (the tensor table: the parameters and the
    buffers is_buffer names)."""
    V, C, L, H, KV, d, I = dims(c)
    if c["model_type"] in MOE_FAMILIES:
        moe_router(c)  # refuses a routing the reference does not define
    s = {"model.embed_tokens.weight": (V, C)}
    for i in range(L):
        b = f"model.layers.{i}."
        s[b + "input_layernorm.weight"] = (C,)
        for n, rows in (("q", H * d), ("k", KV * d), ("v", KV * d)):
            s[b + f"self_attn.{n}_proj.weight"] = (rows, C)
            if has_qkv_bias(c):
                s[b + f"self_attn.{n}_proj.bias"] = (rows,)
        if has_qk_norm(c):
            s[b + "self_attn.q_norm.weight"] = (d,)
            s[b + "self_attn.k_norm.weight"] = (d,)
        s[b + "self_attn.o_proj.weight"] = (C, H * d)
        if has_o_bias(c):
            s[b + "self_attn.o_proj.bias"] = (C,)
        s[b + "post_attention_layernorm.weight"] = (C,)
        if is_sparse(c, i):
            s.update(sparse_shapes(c, i))
            continue
        for n, shape in (("gate", (I, C)), ("up", (I, C)), ("down", (C, I))):
            s[b + f"mlp.{n}_proj.weight"] = shape
            if has_mlp_bias(c):
                s[b + f"mlp.{n}_proj.bias"] = shape[:1]
    s["model.norm.weight"] = (C,)
    if not c.get("tie_word_embeddings"):
        s["lm_head.weight"] = (V, C)
    return s


def random_weights(c, gen, std=0.02, bias_std=0.02, norm_std=0.0):
    """name -> float64 numpy array: weights ~ N(0, std), norms 1 (+ N(0, norm_std)), biases ~
    N(0, bias_std) (small but nonzero, so that their gradients are tested), the routing biases
    (e_score_correction_bias, no gradient) ~ N(0, bias_std) too."""
    out = {}
    for n, shape in tensor_shapes(c).items():
        r = torch.randn(*shape, generator=gen, dtype=torch.float64)
        if "norm" in n:
            out[n] = (1.0 + norm_std * r).numpy()
        elif n.endswith(".bias") or is_buffer(n):
            out[n] = (bias_std * r).numpy()
        else:
            out[n] = (std * r).numpy()
    return out


def rope_inv_freq(c):
    """float32 [d/2]: transformers' _compute_default_rope_parameters, then, where rope_scaling
    says llama3, _compute_llama3_parameters (the same float32 torch expressions)."""
    d, base = dims(c)[5], c["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    rs = c.get("rope_scaling")
    if not rs:
        return inv_freq
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "default":
        return inv_freq
    if kind != "llama3":
        raise ValueError(f"rope_scaling {rs}: only llama3 is modelled")
    factor, low_freq_factor = rs["factor"], rs["low_freq_factor"]
    high_freq_factor, old_context_len = rs["high_freq_factor"], rs["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def rope_cos_sin(c, T, dtype):
    """cos, sin [T, d] at dtype for positions 0..T-1: angle = pos * inv_freq in float32, then
    emb = cat(angle, angle)."""
    inv_freq = rope_inv_freq(c)
    angle = torch.arange(T, dtype=torch.int64).float()[:, None] * inv_freq[None, :]  # float32
    emb = torch.cat((angle, angle), dim=-1).to(dtype)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


class Family(torch.nn.Module):
    """The decoder, its parameters named as in the Hugging Face checkpoint."""

    def __init__(self, c, weights, dtype=torch.float64):
        """weights: name -> array (numpy or torch), every name of tensor_shapes(c). names / ps / p:
        the parameters; buffer_names / bs / b: the buffers (the sigmoid router's
        e_score_correction_bias: no gradient, not trained). aux: the auxiliary loss's term of the
        last forward (A times load_balancing_loss, detached; 0.0 without output_router_logits)."""
        super().__init__()
        self.c, self.dtype = c, dtype
        shapes = tensor_shapes(c)
        self.names = [n for n in shapes if not is_buffer(n)]
        self.buffer_names = [n for n in shapes if is_buffer(n)]
        ts = {}
        for n in shapes:
            a = torch.as_tensor(np.asarray(weights[n])).to(dtype).clone()
            if tuple(a.shape) != shapes[n]:
                raise ValueError(f"{n}: shape {tuple(a.shape)}, expected {shapes[n]}")
            ts[n] = a
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(ts[n]) for n in self.names])
        self.p = dict(zip(self.names, self.ps))
        # buffers as parameters without a gradient, so that .to() moves them
        self.bs = torch.nn.ParameterList([torch.nn.Parameter(ts[n], requires_grad=False) for n in self.buffer_names])
        self.b = dict(zip(self.buffer_names, self.bs))
        self.aux = 0.0

    def forward(self, idx, targets, p=None, sites=None, unrotated_k=(), moe_sites=False):
        """(logits (B, T, V), mean cross-entropy against targets (B, T)). p: name -> tensor in
        place of the parameters (for gradcheck). sites (a dict): the tensors at minidc's dump
        sites (embed, h.N.in, h.N.ln_1, h.N.attn.qkv, ..., ln_f, logits; widths as minidc dumps
        them; a sparse block's MLP: h.N.mlp.router, p (B, T, E), the sigmoid router's s), each
        kept with retain_grad so that its gradient can be read after the backward. moe_sites: a
        sparse block's MLP keeps h.N.mlp.experts too (the k chosen experts' outputs before the
        gates, (B, T, k C); no gradient), the shared expert's h.N.mlp.shared (qwen2_moe's before
        its sigmoid scale; n_shared_experts' output, (B, T, C)) and h.N.mlp.moe (the MLP's
        output, (B, T, C)), in this order after h.N.mlp.router. With output_router_logits the
        loss adds router_aux_loss_coef times load_balancing_loss of the sparse blocks' logits
        (self.aux keeps that term).
        unrotated_k: blocks whose k skips the rotation (a planted bug for the tests)."""
        c, p = self.c, p if p is not None else self.p
        if self.b:
            p = {**self.b, **p}
        V, C, L, H, KV, d, I = dims(c)
        rt = moe_router(c) if c["model_type"] in MOE_FAMILIES else None
        zs = []  # the sparse blocks' router logits, for the auxiliary loss
        B, T = idx.shape
        eps = c["rms_norm_eps"]
        cos, sin = (t.to(idx.device) for t in rope_cos_sin(c, T, self.dtype))
        mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()

        def site(name, t):
            if sites is not None:
                if t.requires_grad:
                    t.retain_grad()
                sites[name] = t
            return t

        def lin(x, name):
            y = x @ p[name + ".weight"].t()
            return y + p[name + ".bias"] if name + ".bias" in p else y

        def residual(x, g, name):  # x + (g + b): the product g is the site, its bias after it
            return x + (g + p[name + ".bias"] if name + ".bias" in p else g)

        def rotate(t):  # (B, heads, T, d)
            return t * cos + rotate_half(t) * sin

        def kept(name, t):  # t (B, T, heads, d): the site (B, T, heads d) viewed back; without sites t itself
            return t if sites is None else site(name, t.reshape(B, T, -1)).view(B, T, -1, d)

        x = site("embed", p["model.embed_tokens.weight"][idx])
        for i in range(L):
            b, h = f"model.layers.{i}.", f"h.{i}."
            site(h + "in", x)
            a = site(h + "ln_1", rms_norm(x, p[b + "input_layernorm.weight"], eps))
            q, k, v = (lin(a, b + f"self_attn.{n}_proj") for n in "qkv")
            if sites is not None:  # one tensor [q | k | v], the projections' outputs
                q, k, v = site(h + "attn.qkv", torch.cat((q, k, v), -1)).split((H * d, KV * d, KV * d), -1)
            q, k, v = q.view(B, T, H, d), k.view(B, T, KV, d), v.view(B, T, KV, d)
            if has_qk_norm(c):
                q = kept(h + "attn.q_norm", rms_norm(q, p[b + "self_attn.q_norm.weight"], eps))
                k = kept(h + "attn.k_norm", rms_norm(k, p[b + "self_attn.k_norm.weight"], eps))
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, heads, T, d)
            q = kept(h + "attn.rope_q", rotate(q).transpose(1, 2)).transpose(1, 2)
            k = kept(h + "attn.rope_k", (k if i in unrotated_k else rotate(k)).transpose(1, 2)).transpose(1, 2)
            k = k.repeat_interleave(H // KV, dim=1)  # query head h reads kv head h // (H / KV)
            v = v.repeat_interleave(H // KV, dim=1)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = site(h + "attn.y", (att @ v).transpose(1, 2).reshape(B, T, H * d))
            g = site(h + "attn.c_proj", y @ p[b + "self_attn.o_proj.weight"].t())
            x = site(h + "res_2", residual(x, g, b + "self_attn.o_proj"))
            n = site(h + "ln_2", rms_norm(x, p[b + "post_attention_layernorm.weight"], eps))
            if is_sparse(c, i):
                E, k, _, renorm = moe_dims(c)
                slots = moe_sites and sites is not None
                router = p[router_name(c, i)]
                sig = (p[bias_name(c, i)], rt.n_group, rt.topk_group, rt.scale) if rt.sigmoid else None
                g, prob, ys, sh = sparse_mlp(n, router, [[p[e] for e in expert_names(c, i, j)] for j in range(E)], k,
                                             renorm, block_shared(c, i, p), slots, sig)
                if rt.aux_coef:
                    zs.append(n.reshape(-1, C) @ router.t())  # the logits the router computed
                site(h + "mlp.router", prob)
                if slots:
                    site(h + "mlp.choice", ys[1])
                    site(h + "mlp.gates", ys[2])
                    site(h + "mlp.experts", ys[0])
                    if sh is not None:
                        site(h + "mlp.shared", sh)
                    g = site(h + "mlp.moe", g)
                x = site(h + "out", x + g)
                continue
            gate = site(h + "mlp.gate", lin(n, b + "mlp.gate_proj"))
            up = site(h + "mlp.up", lin(n, b + "mlp.up_proj"))
            m = site(h + "mlp.product", F.silu(gate) * up)
            g = site(h + "mlp.c_proj", m @ p[b + "mlp.down_proj.weight"].t())
            x = site(h + "out", residual(x, g, b + "mlp.down_proj"))
        x = site("ln_f", rms_norm(x, p["model.norm.weight"], eps))
        head = p["lm_head.weight"] if "lm_head.weight" in p else p["model.embed_tokens.weight"]
        logits = site("logits", x @ head.t())
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1).long())
        if zs:
            aux = rt.aux_coef * load_balancing_loss(zs, moe_dims(c)[0], moe_dims(c)[1])
            self.aux = float(aux.detach())
            loss = loss + aux
        return logits, loss


def hf_config(c, torch_dtype="float32"):
    """config.json's dict, as transformers writes the family's config."""
    V, C, L, H, KV, d, I = dims(c)
    t = c["model_type"]
    cfg = {"architectures": [ARCH[t]], "model_type": t, "vocab_size": V, "hidden_size": C,
           "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": H,
           "num_key_value_heads": KV, "head_dim": d,
           "max_position_embeddings": c["max_position_embeddings"],
           "rms_norm_eps": float(c["rms_norm_eps"]), "rope_theta": float(c["rope_theta"]),
           "rope_scaling": c.get("rope_scaling"),
           "tie_word_embeddings": bool(c.get("tie_word_embeddings"))}
    if t in ("llama", "qwen3", "qwen3_moe"):
        cfg["attention_bias"] = bool(c.get("attention_bias"))
    if t == "llama":
        cfg["mlp_bias"] = bool(c.get("mlp_bias"))
    if t in MOE_FAMILIES:
        moe_config(c, cfg)
    cfg.update({"hidden_act": "silu", "torch_dtype": torch_dtype})
    return cfg


def write_hf_dir(d, c, weights, bf16=False, shards=1):
    """Writes a Hugging Face model directory d: config.json and model.safetensors, or with
    shards > 1 model-0000K-of-0000N.safetensors and model.safetensors.index.json. bf16: every
    tensor stored as BF16 (round to nearest even). Returns name -> float32 array: the values the
    files hold (read back), which a reference must start from."""
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(hf_config(c, "bfloat16" if bf16 else "float32"), f, indent=2)
        f.write("\n")
    names = list(tensor_shapes(c))
    w32 = {n: np.asarray(weights[n], np.float32) for n in names}
    if shards <= 1:
        files = {"model.safetensors": names}
    else:
        per = -(-len(names) // shards)
        files = {f"model-{k + 1:05d}-of-{shards:05d}.safetensors": names[k * per:(k + 1) * per]
                 for k in range(shards)}
    back = {}
    for fname, part in files.items():
        path = os.path.join(d, fname)
        write_safetensors(path, {n: w32[n] for n in part}, {"format": "pt"},
                          bf16=set(part) if bf16 else ())
        back.update(read_safetensors(path))
    if shards > 1:
        total = sum(back[n].size * (2 if bf16 else 4) for n in names)
        index = {"metadata": {"total_size": int(total)},
                 "weight_map": {n: fname for fname, part in files.items() for n in part}}
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    return {n: np.array(back[n], np.float32) for n in names}
