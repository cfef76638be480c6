"""The mixture-of-experts part of tools/torch_family.py: the sparse MoE block of Mixtral, Qwen3-MoE
and Qwen2-MoE (MixtralForCausalLM, Qwen3MoeForCausalLM, Qwen2MoeForCausalLM), written from
transformers' modeling_mixtral.py, modeling_qwen3_moe.py and modeling_qwen2_moe.py: which blocks
are sparse, their tensors' names and shapes, the routing, the experts, Qwen2-MoE's shared expert,
and the families' config.json keys; DeepSeek-V3's routing and shared experts on these families
(modeling_deepseek_v3.py: DeepseekV3TopkRouter, DeepseekV3MoE.route_tokens_to_experts) and
transformers' auxiliary load-balancing loss (load_balancing_loss_func). torch_family.py imports it
(and re-exports its names); the attention, the norms and the dense MLP are there. Run with
Debian's PyTorch (/usr/bin/python3).

mixtral: every block sparse (block_sparse_moe.gate, experts.J.w1 / w3 / w2 = gate / up / down,
intermediate_size wide) with num_local_experts E, num_experts_per_tok k, the k gates always
renormalized. qwen3_moe and qwen2_moe: block N is sparse (mlp.gate, mlp.experts.J.{gate,up,down}_proj,
moe_intermediate_size wide; num_experts, num_experts_per_tok, gates renormalized when
norm_topk_prob) when N is not in mlp_only_layers and (N + 1) % decoder_sparse_step == 0, else the
dense MLP (intermediate_size). qwen2_moe's sparse block adds a shared expert every token runs
(mlp.shared_expert.{gate,up,down}_proj, shared_expert_intermediate_size Fs wide) scaled per token by
sigmoid(n @ mlp.shared_expert_gate^T) (shared_expert_gate [1, C]).

A sparse block's MLP on n (the post_attention_layernorm output; dropless, no router noise): router
logits z = n @ gate^T, p = softmax(z) (at the model's dtype: transformers takes it in float32), the
k largest p chosen, equal p to the lower expert index; gates g = the chosen p (/ their sum where
renormalized); routed = sum over the k chosen of g_j * down_j(silu(gate_j(n)) * up_j(n));
out = routed (+ qwen2_moe's sigmoid(n @ shared_expert_gate^T) * shared_down(silu(shared_gate(n)) *
shared_up(n))).

DeepSeek-V3 routing on any of the three families (block = model.layers.N.block_sparse_moe for
mixtral, model.layers.N.mlp for qwen3_moe / qwen2_moe), from config.json's keys:
  scoring_func "sigmoid" (absent or "softmax": the family's routing above, and none of the keys
    topk_method, n_group, topk_group may be given, routed_scaling_factor only as 1);
  topk_method "noaux_tc" (or absent); n_group G (default 1) groups of E / G consecutive experts
    (E / G >= 2), topk_group K_g kept (default G; K_g (E / G) >= k); routed_scaling_factor r
    (default 1.0, > 0); the renormalization as the family's (norm_topk_prob; Mixtral always);
  the buffer <block>.gate.e_score_correction_bias [E] (not a parameter: no gradient, never trained
    here; stored with the weights).
  s = sigmoid(z); s_choice = s + bias; a group's score is the sum of its two largest s_choice; the
  K_g groups of the largest scores kept (equal scores: the lower group); s_choice of the other
  groups' experts set to 0.0 (masked_fill with 0.0 as transformers does, not -inf: a kept expert
  whose s_choice is below 0 loses to them); the k largest masked s_choice chosen (equal: the lower
  expert); gates = s at the chosen (not s_choice), / (their sum + 1e-20) where renormalized, times
  r. The choice is not differentiated: the gradient reaches z through the chosen s only.
n_shared_experts S (default 0; either router): the ungated shared experts, one SwiGLU MLP S F wide
  (F the routed experts' width: moe_intermediate_size, Mixtral's intermediate_size), named
  <block>.shared_experts.{gate,up,down}_proj.weight, its output added to every token's routed sum
  (qwen2_moe's own gated shared expert and S > 0 together are refused).
first_k_dense_replace D (default 0; either router): blocks N < D are dense (the dense MLP,
  intermediate_size wide, model.layers.N.mlp.{gate,up,down}_proj), then the family's rule.

The auxiliary loss (either router), output_router_logits true with router_aux_loss_coef A (the
family's default where absent: Mixtral 0.02, Qwen 0.001): loss = the mean cross-entropy +
A * load_balancing_loss_func(the router logits z of every sparse block of the forward, E, k) as
transformers writes it (attention_mask None): the logits of the L_s sparse blocks concatenated
[L_s N, E], p = softmax(z), selected = the top k of p per row (equal p: the lower index;
whatever the router chose: also for the sigmoid router), tokens_per_expert = the mean over the
L_s N rows of one_hot(selected) [k, E], router_prob_per_expert = the mean of p over the rows [E],
aux = E * sum(tokens_per_expert * router_prob_per_expert). The counts are constants: the
gradient flows through p. One forward is one batch (minidc: one micro-batch)."""
from collections import namedtuple

import torch
import torch.nn.functional as F

MOE_FAMILIES = ("mixtral", "qwen3_moe", "qwen2_moe")
MOE_ARCH = {"mixtral": "MixtralForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
            "qwen2_moe": "Qwen2MoeForCausalLM"}
_GUD = ("gate_proj", "up_proj", "down_proj")
# a sparse block's module, its experts' weights in transformers' module order, and (gate, up, down)
MOE_NAMES = {"mixtral": ("block_sparse_moe", ("w1", "w2", "w3"), ("w1", "w3", "w2")),
             "qwen3_moe": ("mlp", _GUD, _GUD), "qwen2_moe": ("mlp", _GUD, _GUD)}
BIAS = "gate.e_score_correction_bias"  # DeepSeek-V3 routing's buffer, under a sparse block's module
AUX_COEF = {"mixtral": 0.02, "qwen3_moe": 0.001, "qwen2_moe": 0.001}  # router_aux_loss_coef's defaults

# The checked routing keys: sigmoid (DeepSeek-V3's router), n_group G, topk_group K_g,
# routed_scaling_factor r, n_shared_experts S, first_k_dense_replace D, and the auxiliary loss's
# coefficient A (0.0 where output_router_logits is false).
Router = namedtuple("Router", "sigmoid n_group topk_group scale n_shared first_dense aux_coef")


def moe_dims(c):
    """E, k, F (an expert's width), and whether the k gates are renormalized."""
    if c["model_type"] == "mixtral":
        return c["num_local_experts"], c["num_experts_per_tok"], c["intermediate_size"], True
    return c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], bool(c.get("norm_topk_prob"))


def _int(c, key, default, lo):
    v = c.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{c['model_type']}: {key} {v!r} is not an integer >= {lo}")
    return v


def moe_router(c):
    """The Router of a MoE family's config (the module docstring's keys and defaults); ValueError
    for a combination transformers or DeepSeek-V3 does not define."""
    t = c["model_type"]
    E, k, _, _ = moe_dims(c)
    scoring = c.get("scoring_func") or "softmax"
    if scoring not in ("softmax", "sigmoid"):
        raise ValueError(f"{t}: scoring_func {scoring!r} is neither \"softmax\" nor \"sigmoid\"")
    sigmoid = scoring == "sigmoid"
    G, Kg = _int(c, "n_group", 1, 1), _int(c, "topk_group", None, 1)
    r = c.get("routed_scaling_factor")
    if sigmoid:
        if c.get("topk_method") not in (None, "noaux_tc"):
            raise ValueError(f"{t}: topk_method {c['topk_method']!r}: the sigmoid router is DeepSeek-V3's \"noaux_tc\"")
        Kg = G if Kg is None else Kg
        r = 1.0 if r is None else float(r)
        if E % G or Kg > G or E // G < 2 or Kg * (E // G) < k or not r > 0:
            raise ValueError(f"{t}: n_group {G} must divide the {E} experts into groups of at least 2, topk_group "
                             f"{Kg} be at most n_group and its groups hold the top {k}, routed_scaling_factor {r} "
                             f"be positive")
    elif c.get("topk_method") is not None or G != 1 or Kg is not None or r not in (None, 1, 1.0):
        raise ValueError(f"{t}: topk_method, n_group, topk_group and routed_scaling_factor are DeepSeek-V3 "
                         f"routing's (scoring_func \"sigmoid\")")
    S, D = _int(c, "n_shared_experts", 0, 0), _int(c, "first_k_dense_replace", 0, 0)
    if S and t == "qwen2_moe":
        raise ValueError(f"{t}: n_shared_experts {S} beside Qwen2-MoE's gated shared expert: one shared expert at most")
    if D > c["num_hidden_layers"]:
        raise ValueError(f"{t}: first_k_dense_replace {D} is more than the {c['num_hidden_layers']} layers")
    on = c.get("output_router_logits") or False
    if not isinstance(on, bool):
        raise ValueError(f"{t}: output_router_logits {on!r} is not true or false")
    A = c.get("router_aux_loss_coef")
    A = AUX_COEF[t] if A is None else float(A)
    if not A >= 0:
        raise ValueError(f"{t}: router_aux_loss_coef {A} is negative")
    return Router(sigmoid, G, Kg if sigmoid else 1, r if sigmoid else 1.0, S, D, A if on else 0.0)


def has_shared(c):
    """Whether a sparse block has the shared expert and its gate (qwen2_moe)."""
    return c["model_type"] == "qwen2_moe"


def is_sparse(c, i):
    """Whether block i's MLP is the sparse MoE block (never below first_k_dense_replace)."""
    t = c["model_type"]
    if t in MOE_FAMILIES and i < (c.get("first_k_dense_replace") or 0):
        return False
    if t in ("qwen3_moe", "qwen2_moe"):
        return (c["num_experts"] > 0 and i not in (c.get("mlp_only_layers") or [])
                and (i + 1) % c["decoder_sparse_step"] == 0)
    return t == "mixtral"


def expert_names(c, i, j):
    """Block i's expert j: its (gate, up, down) weights' names."""
    mod, _, gud = MOE_NAMES[c["model_type"]]
    return tuple(f"model.layers.{i}.{mod}.experts.{j}.{n}.weight" for n in gud)


def router_name(c, i):
    """Block i's router weight [E, C]."""
    return f"model.layers.{i}.{MOE_NAMES[c['model_type']][0]}.gate.weight"


def bias_name(c, i):
    """Block i's e_score_correction_bias [E] (the sigmoid router's buffer)."""
    return f"model.layers.{i}.{MOE_NAMES[c['model_type']][0]}.{BIAS}"


def is_buffer(name):
    """Whether a tensor of the table is a buffer (stored, not trained, no gradient)."""
    return name.endswith("." + BIAS)


def shared_names(c, i):
    """Block i's shared expert: its (gate, up, down) weights' names and shared_expert_gate's."""
    b = f"model.layers.{i}.mlp."
    return tuple(b + f"shared_expert.{n}.weight" for n in _GUD) + (b + "shared_expert_gate.weight",)


def shared_experts_names(c, i):
    """Block i's ungated shared experts (n_shared_experts): their (gate, up, down) weights' names."""
    return tuple(f"model.layers.{i}.{MOE_NAMES[c['model_type']][0]}.shared_experts.{n}.weight" for n in _GUD)


def block_shared(c, i, p):
    """Block i's shared expert for sparse_mlp from p (name -> tensor): qwen2_moe's 4 tensors
    (gated), the 3 of n_shared_experts (ungated), or None."""
    if has_shared(c):
        return [p[q] for q in shared_names(c, i)]
    return [p[q] for q in shared_experts_names(c, i)] if moe_router(c).n_shared else None


def sparse_shapes(c, i):
    """name -> shape: block i's sparse MLP in transformers' module order (router, its bias,
    experts, the shared expert and its gate, or the shared experts)."""
    C = c["hidden_size"]
    E, _, Fe, _ = moe_dims(c)
    rt = moe_router(c)
    mod, order, gud = MOE_NAMES[c["model_type"]]
    b = f"model.layers.{i}.{mod}."
    s = {b + "gate.weight": (E, C)}
    if rt.sigmoid:
        s[b + BIAS] = (E,)
    for j in range(E):
        for n in order:
            s[b + f"experts.{j}.{n}.weight"] = (C, Fe) if n == gud[2] else (Fe, C)
    if has_shared(c):
        Fs = c["shared_expert_intermediate_size"]
        wg, wu, wd, wsg = shared_names(c, i)
        s.update({wg: (Fs, C), wu: (Fs, C), wd: (C, Fs), wsg: (1, C)})
    if rt.n_shared:
        Fs = rt.n_shared * Fe
        wg, wu, wd = shared_experts_names(c, i)
        s.update({wg: (Fs, C), wu: (Fs, C), wd: (C, Fs)})
    return s


def route(z, k, renorm):
    """(p, chosen (..., k), gates (..., k)) from router logits z (..., E): p = softmax(z), the k
    largest p in descending order, equal p to the lower index (a stable sort; torch.topk does not
    promise it), gates the chosen p, / their sum where renorm."""
    p = z.softmax(dim=-1)
    chosen = torch.sort(p, dim=-1, descending=True, stable=True).indices[..., :k]
    g = p.gather(-1, chosen)
    return p, chosen, (g / g.sum(-1, keepdim=True) if renorm else g)


def sigmoid_choice(s, bias, k, n_group, topk_group):
    """(chosen (..., k), the masked s_choice (..., E), the group scores (..., G)) of DeepSeek-V3's
    noaux_tc from the scores s (..., E): s_choice = s + bias, a group's score the sum of its two
    largest s_choice, the topk_group best groups kept (equal scores: the lower group), the
    others' s_choice 0.0, the k largest masked s_choice in descending order (equal: the lower
    index). Not differentiated."""
    with torch.no_grad():
        sc = s + bias
        lead, E = sc.shape[:-1], sc.shape[-1]
        groups = sc.reshape(*lead, n_group, E // n_group)
        gs = torch.sort(groups, dim=-1, descending=True).values[..., :2].sum(-1)
        keep = torch.sort(gs, dim=-1, descending=True, stable=True).indices[..., :topk_group]
        gmask = torch.zeros_like(gs, dtype=torch.bool).scatter(-1, keep, True)
        sc = sc.masked_fill(~gmask.unsqueeze(-1).expand(groups.shape).reshape(sc.shape), 0.0)
        chosen = torch.sort(sc, dim=-1, descending=True, stable=True).indices[..., :k]
    return chosen, sc, gs


def route_sigmoid(z, bias, k, renorm, n_group=1, topk_group=1, scale=1.0):
    """(s, chosen (..., k), gates (..., k)) from router logits z (..., E) by DeepSeek-V3's router:
    s = sigmoid(z), the choice sigmoid_choice's (bias [E]: e_score_correction_bias), gates = the
    chosen s, / (their sum + 1e-20) where renorm, times scale (routed_scaling_factor)."""
    s = torch.sigmoid(z)
    chosen = sigmoid_choice(s, bias, k, n_group, topk_group)[0]
    g = s.gather(-1, chosen)
    if renorm:
        g = g / (g.sum(-1, keepdim=True) + 1e-20)
    return s, chosen, g * scale


def moe_mlp(n, router, experts, k, renorm, slots=False, sig=None):
    """(out, p): the routed experts on n (..., C); router [E, C]; experts [(gate [F, C],
    up [F, C], down [C, F])]; each expert runs on its tokens only, summed in expert order.
    sig: None (route's softmax), or (bias [E], n_group, topk_group, routed_scaling_factor) for
    DeepSeek-V3's sigmoid router (route_sigmoid; then p is s, the sigmoid scores).
    slots: (out, p, (ys, chosen, gates)) with ys (..., k C) each token's k chosen experts' outputs
    in slot order (descending p; the sigmoid router's: descending masked s_choice), before the
    gates, chosen (..., k) those experts and gates (..., k) their gates; copies beside the sum,
    out's values and graph unchanged."""
    shape = n.shape
    xs = n.reshape(-1, shape[-1])
    z = xs @ router.t()
    p, chosen, g = route(z, k, renorm) if sig is None else route_sigmoid(z, sig[0], k, renorm, *sig[1:])
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
        return out.view(shape), p.view(*shape[:-1], -1), (ys.view(*shape[:-1], -1), chosen.view(*shape[:-1], k),
                                                          g.detach().view(*shape[:-1], k))
    return out.view(shape), p.view(*shape[:-1], -1)


def sparse_mlp(n, router, experts, k, renorm, shared=None, slots=False, sig=None):
    """(out, p, ys, s): the sparse block's MLP on n (..., C): moe_mlp's routed sum (sig: its
    router), plus with shared = (gate [Fs, C], up [Fs, C], down [C, Fs], shared_expert_gate [1, C])
    the shared expert s = down(silu(gate n) * up n) (..., C) scaled per token by
    sigmoid(n @ shared_expert_gate^T) (..., 1), with shared = (gate, up, down) (DeepSeek's
    shared_experts) s unscaled. ys: moe_mlp's slots (ys, chosen, gates) where slots, else None; s: the shared
    expert's output before its scale, a tensor of out's graph (None without shared)."""
    ys, s = None, None
    out, p, *rest = moe_mlp(n, router, experts, k, renorm, slots, sig)
    if slots:
        ys = rest[0]
    if shared is not None:
        wg, wu, wd = shared[:3]
        s = (F.silu(n @ wg.t()) * (n @ wu.t())) @ wd.t()
        out = out + (torch.sigmoid(n @ shared[3].t()) * s if len(shared) == 4 else s)
    return out, p, ys, s


def load_balancing_loss(zs, E, k):
    """transformers' load_balancing_loss_func(zs, E, k) without an attention mask: zs the router
    logits of the forward's sparse blocks (each (..., E)), concatenated; p = softmax; the top k
    of p per row (equal p: the lower index); E * sum over (slot, expert) of the mean one-hot count
    times the mean p. Differentiated through p only."""
    z = torch.cat([t.reshape(-1, E) for t in zs], 0)
    p = z.softmax(dim=-1)
    selected = torch.sort(p, dim=-1, descending=True, stable=True).indices[:, :k]
    tokens_per_expert = F.one_hot(selected, E).to(p.dtype).mean(0)  # [k, E]
    router_prob_per_expert = p.mean(0)  # [E]
    return E * (tokens_per_expert * router_prob_per_expert.unsqueeze(0)).sum()


def moe_config(c, cfg):
    """Updates cfg (the dense keys hf_config writes) to the MoE family's config.json: its
    config class's keys and transformers' defaults for the rest, then the routing keys c gives
    (scoring_func, topk_method, n_group, topk_group, routed_scaling_factor, n_shared_experts,
    first_k_dense_replace) and its output_router_logits and router_aux_loss_coef."""
    t = c["model_type"]
    E, k, Fe, renorm = moe_dims(c)
    moe_router(c)  # refuses what the reference does not define
    on, coef = bool(c.get("output_router_logits")), c.get("router_aux_loss_coef")
    extra = {key: c[key] for key in ("scoring_func", "topk_method", "n_group", "topk_group", "routed_scaling_factor",
                                      "n_shared_experts", "first_k_dense_replace") if c.get(key) is not None}
    if t == "mixtral":  # MixtralConfig's keys (no rope_scaling)
        del cfg["rope_scaling"]
        cfg.update({"num_local_experts": E, "num_experts_per_tok": k, "output_router_logits": on,
                    "router_aux_loss_coef": AUX_COEF[t] if coef is None else coef, "router_jitter_noise": 0.0,
                    "sliding_window": None, "attention_dropout": 0.0})
        cfg.update(extra)
        return cfg
    sparse = {"num_experts": E, "num_experts_per_tok": k, "moe_intermediate_size": Fe,
              "norm_topk_prob": renorm, "decoder_sparse_step": c["decoder_sparse_step"],
              "mlp_only_layers": list(c.get("mlp_only_layers") or []),
              "output_router_logits": on, "router_aux_loss_coef": AUX_COEF[t] if coef is None else coef}
    if t == "qwen2_moe":  # Qwen2MoeConfig's keys: no head_dim (C / H), no attention_bias (q/k/v biases always)
        C, H = c["hidden_size"], c["num_attention_heads"]
        if (c.get("head_dim") or C // H) * H != C:
            raise ValueError(f"qwen2_moe: head_dim is hidden_size / num_attention_heads, not {c.get('head_dim')}")
        del cfg["head_dim"]
        sparse["shared_expert_intermediate_size"] = c["shared_expert_intermediate_size"]
        sparse.update({"use_sliding_window": False, "sliding_window": None,
                       "max_window_layers": c.get("max_window_layers", 28), "attention_dropout": 0.0})
    cfg.update(sparse)
    cfg.update(extra)
    return cfg
