"""The mixture-of-experts part of tools/torch_family.py: the sparse MoE block of Mixtral, Qwen3-MoE
and Qwen2-MoE (MixtralForCausalLM, Qwen3MoeForCausalLM, Qwen2MoeForCausalLM), written from
transformers' modeling_mixtral.py, modeling_qwen3_moe.py and modeling_qwen2_moe.py: which blocks
are sparse, their tensors' names and shapes, the routing, the experts, Qwen2-MoE's shared expert,
and the families' config.json keys. torch_family.py imports it (and re-exports its names); the
attention, the norms and the dense MLP are there. Run with Debian's PyTorch (/usr/bin/python3).

mixtral: every block sparse (block_sparse_moe.gate, experts.J.w1 / w3 / w2 = gate / up / down,
intermediate_size wide) with num_local_experts E, num_experts_per_tok k, the k gates always
renormalized. qwen3_moe and qwen2_moe: block N is sparse (mlp.gate, mlp.experts.J.{gate,up,down}_proj,
moe_intermediate_size wide; num_experts, num_experts_per_tok, gates renormalized when
norm_topk_prob) when N is not in mlp_only_layers and (N + 1) % decoder_sparse_step == 0, else the
dense MLP (intermediate_size). qwen2_moe's sparse block adds a shared expert every token runs
(mlp.shared_expert.{gate,up,down}_proj, shared_expert_intermediate_size Fs wide) scaled per token by
sigmoid(n @ mlp.shared_expert_gate^T) (shared_expert_gate [1, C]).

A sparse block's MLP on n (the post_attention_layernorm output; dropless, no router noise, no
auxiliary loss in the loss): router logits z = n @ gate^T, p = softmax(z) (at the model's dtype:
transformers takes it in float32), the k largest p chosen, equal p to the lower expert index;
gates g = the chosen p (/ their sum where renormalized); routed = sum over the k chosen of
g_j * down_j(silu(gate_j(n)) * up_j(n)); out = routed (+ qwen2_moe's
sigmoid(n @ shared_expert_gate^T) * shared_down(silu(shared_gate(n)) * shared_up(n)))."""
import torch
import torch.nn.functional as F

MOE_FAMILIES = ("mixtral", "qwen3_moe", "qwen2_moe")
MOE_ARCH = {"mixtral": "MixtralForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
            "qwen2_moe": "Qwen2MoeForCausalLM"}
_GUD = ("gate_proj", "up_proj", "down_proj")
# a sparse block's module, its experts' weights in transformers' module order, and (gate, up, down)
MOE_NAMES = {"mixtral": ("block_sparse_moe", ("w1", "w2", "w3"), ("w1", "w3", "w2")),
             "qwen3_moe": ("mlp", _GUD, _GUD), "qwen2_moe": ("mlp", _GUD, _GUD)}


def moe_dims(c):
    """E, k, F (an expert's width), and whether the k gates are renormalized."""
    if c["model_type"] == "mixtral":
        return c["num_local_experts"], c["num_experts_per_tok"], c["intermediate_size"], True
    return c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], bool(c.get("norm_topk_prob"))


def has_shared(c):
    """Whether a sparse block has the shared expert and its gate (qwen2_moe)."""
    return c["model_type"] == "qwen2_moe"


def is_sparse(c, i):
    """Whether block i's MLP is the sparse MoE block."""
    t = c["model_type"]
    if t in ("qwen3_moe", "qwen2_moe"):
        return (c["num_experts"] > 0 and i not in (c.get("mlp_only_layers") or [])
                and (i + 1) % c["decoder_sparse_step"] == 0)
    return t == "mixtral"


def expert_names(c, i, j):
    """Block i's expert j: its (gate, up, down) weights' names."""
    mod, _, gud = MOE_NAMES[c["model_type"]]
    return tuple(f"model.layers.{i}.{mod}.experts.{j}.{n}.weight" for n in gud)


def shared_names(c, i):
    """Block i's shared expert: its (gate, up, down) weights' names and shared_expert_gate's."""
    b = f"model.layers.{i}.mlp."
    return tuple(b + f"shared_expert.{n}.weight" for n in _GUD) + (b + "shared_expert_gate.weight",)


def sparse_shapes(c, i):
    """name -> shape: block i's sparse MLP in transformers' module order (router, experts, the
    shared expert, its gate)."""
    C = c["hidden_size"]
    E, _, Fe, _ = moe_dims(c)
    mod, order, gud = MOE_NAMES[c["model_type"]]
    b = f"model.layers.{i}.{mod}."
    s = {b + "gate.weight": (E, C)}
    for j in range(E):
        for n in order:
            s[b + f"experts.{j}.{n}.weight"] = (C, Fe) if n == gud[2] else (Fe, C)
    if has_shared(c):
        Fs = c["shared_expert_intermediate_size"]
        wg, wu, wd, wsg = shared_names(c, i)
        s.update({wg: (Fs, C), wu: (Fs, C), wd: (C, Fs), wsg: (1, C)})
    return s


def route(z, k, renorm):
    """(p, chosen (..., k), gates (..., k)) from router logits z (..., E): p = softmax(z), the k
    largest p in descending order, equal p to the lower index (a stable sort; torch.topk does not
    promise it), gates the chosen p, / their sum where renorm."""
    p = z.softmax(dim=-1)
    chosen = torch.sort(p, dim=-1, descending=True, stable=True).indices[..., :k]
    g = p.gather(-1, chosen)
    return p, chosen, (g / g.sum(-1, keepdim=True) if renorm else g)


def moe_mlp(n, router, experts, k, renorm, slots=False):
    """(out, p): the routed experts on n (..., C); router [E, C]; experts [(gate [F, C],
    up [F, C], down [C, F])]; each expert runs on its tokens only, summed in expert order.
    slots: (out, p, ys) with ys (..., k C) each token's k chosen experts' outputs in slot order
    (descending p), before the gates; a copy beside the sum, out's values and graph unchanged."""
    shape = n.shape
    xs = n.reshape(-1, shape[-1])
    p, chosen, g = route(xs @ router.t(), k, renorm)
    out = torch.zeros_like(xs)
    ys = xs.new_zeros(xs.shape[0], k, shape[-1]) if slots else None
    for j, (wg, wu, wd) in enumerate(experts):
        tok, slot = (chosen == j).nonzero(as_tuple=True)
        if tok.numel():
            xe = xs[tok]
            y = (F.silu(xe @ wg.t()) * (xe @ wu.t())) @ wd.t()
            out = out.index_add(0, tok, (g[tok, slot, None] * y).to(out.dtype))  # bf16 under autocast
            if slots:
                ys = ys.index_put((tok, slot), y.detach().to(ys.dtype))
    if slots:
        return out.view(shape), p.view(*shape[:-1], -1), ys.view(*shape[:-1], -1)
    return out.view(shape), p.view(*shape[:-1], -1)


def sparse_mlp(n, router, experts, k, renorm, shared=None, slots=False):
    """(out, p, ys, s): the sparse block's MLP on n (..., C): moe_mlp's routed sum, plus with
    shared = (gate [Fs, C], up [Fs, C], down [C, Fs], shared_expert_gate [1, C]) the shared
    expert s = down(silu(gate n) * up n) (..., C) scaled per token by sigmoid(n @ shared_expert_gate^T)
    (..., 1). ys: moe_mlp's slots where slots, else None; s: the shared expert's output before its
    scale, a tensor of out's graph (None without shared)."""
    ys, s = None, None
    out, p, *rest = moe_mlp(n, router, experts, k, renorm, slots)
    if slots:
        ys = rest[0]
    if shared is not None:
        wg, wu, wd, wsg = shared
        s = (F.silu(n @ wg.t()) * (n @ wu.t())) @ wd.t()
        out = out + torch.sigmoid(n @ wsg.t()) * s
    return out, p, ys, s


def moe_config(c, cfg):
    """Updates cfg (the dense keys hf_config writes) to the MoE family's config.json: its
    config class's keys and transformers' defaults for the rest."""
    t = c["model_type"]
    E, k, Fe, renorm = moe_dims(c)
    if t == "mixtral":  # MixtralConfig's keys (no rope_scaling)
        del cfg["rope_scaling"]
        cfg.update({"num_local_experts": E, "num_experts_per_tok": k, "output_router_logits": False,
                    "router_aux_loss_coef": 0.02, "router_jitter_noise": 0.0, "sliding_window": None,
                    "attention_dropout": 0.0})
        return cfg
    sparse = {"num_experts": E, "num_experts_per_tok": k, "moe_intermediate_size": Fe,
              "norm_topk_prob": renorm, "decoder_sparse_step": c["decoder_sparse_step"],
              "mlp_only_layers": list(c.get("mlp_only_layers") or []),
              "output_router_logits": False, "router_aux_loss_coef": 0.001}
    if t == "qwen2_moe":  # Qwen2MoeConfig's keys: no head_dim (C / H), no attention_bias (q/k/v biases always)
        C, H = c["hidden_size"], c["num_attention_heads"]
        if (c.get("head_dim") or C // H) * H != C:
            raise ValueError(f"qwen2_moe: head_dim is hidden_size / num_attention_heads, not {c.get('head_dim')}")
        del cfg["head_dim"]
        sparse["shared_expert_intermediate_size"] = c["shared_expert_intermediate_size"]
        sparse.update({"use_sliding_window": False, "sliding_window": None,
                       "max_window_layers": c.get("max_window_layers", 28), "attention_dropout": 0.0})
    cfg.update(sparse)
    return cfg
