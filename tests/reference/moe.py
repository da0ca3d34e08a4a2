"""Mixture-of-experts feed-forward block, from the published model definitions:

  Qwen3-MoE (transformers Qwen3MoeSparseMoeBlock):
    router_logits = h @ W_router^T                       [T, E]
    p = softmax(router_logits)                           over all E experts
    (w, idx) = top-k of p                                k = num_experts_per_tok
    if norm_topk_prob: w /= sum(w)
    y = sum_j w_j * expert_idx_j(h),  expert(h) = down(silu(gate h) * up h)
  Qwen3-Next / Qwen2-MoE add a shared expert applied to every token:
    y += sigmoid(h @ w_shared_gate) * shared_expert(h)

Layers: every layer is sparse unless listed in `mlp_only_layers` or off the `decoder_sparse_step`
grid ((il + 1) % step != 0); in GGUF files a layer is sparse when it has a router (ffn_gate_inp).

Tensor layouts:
  GGUF (llama.cpp):   blk.N.ffn_gate_inp [E, dim]; ffn_{gate,up}_exps [E, f, dim]; ffn_down_exps
                      [E, dim, f]; ffn_{gate,up,down}_shexp; ffn_gate_inp_shexp [dim].
  HF safetensors:     model.layers.N.mlp.gate [E, dim]; mlp.experts.<e>.{gate,up,down}_proj (one
                      tensor per expert) or, transformers 5 / Qwen3.5-MoE, mlp.experts.gate_up_proj
                      [E, 2f, dim] (gate rows, then up rows) + mlp.experts.down_proj [E, dim, f];
                      mlp.shared_expert.*; mlp.shared_expert_gate [1, dim].
  MLX (mlx-lm):       mlp.switch_mlp.{gate,up,down}_proj stacked [E, rows, cols] (quantized per row).
Layer dicts get flat keys (moe_router, moe_gate, moe_up, moe_down, moe_sh_gate, moe_sh_up,
moe_sh_down, moe_sh_inp), None when absent, so Model.cast and n_params handle them like the rest.
"""

import numpy as np

KEYS = ("moe_router", "moe_gate", "moe_up", "moe_down", "moe_sh_gate", "moe_sh_up", "moe_sh_down", "moe_sh_inp")


def _empty(L):
    for k in KEYS:
        L.setdefault(k, None)


def load_gguf(m, g, arch):
    md = g.metadata
    m.moe_top_k = int(md.get(f"{arch}.expert_used_count", 0))
    m.moe_norm_topk = bool(md.get(f"{arch}.expert_weights_norm", True))
    for il, L in enumerate(m.layers):
        L.update(gguf_layer(g, f"blk.{il}."))


def gguf_layer(g, p):
    """The MoE keys of the GGUF block with prefix p ("blk.N."), all None when it has no router."""
    L = {}
    _empty(L)
    if p + "ffn_gate_inp.weight" not in g.tensors:
        return L
    opt = lambda n: g.tensor(n) if n in g.tensors else None
    L.update(moe_router=g.tensor(p + "ffn_gate_inp.weight"), moe_gate=g.tensor(p + "ffn_gate_exps.weight"),
             moe_up=g.tensor(p + "ffn_up_exps.weight"), moe_down=g.tensor(p + "ffn_down_exps.weight"),
             moe_sh_gate=opt(p + "ffn_gate_shexp.weight"), moe_sh_up=opt(p + "ffn_up_shexp.weight"),
             moe_sh_down=opt(p + "ffn_down_shexp.weight"), moe_sh_inp=opt(p + "ffn_gate_inp_shexp.weight"))
    if L["moe_sh_inp"] is not None:
        L["moe_sh_inp"] = L["moe_sh_inp"].reshape(-1)
    return L


def sparse_layers(c, n_layers):
    if not c.get("num_experts"):
        return [False] * n_layers
    step = int(c.get("decoder_sparse_step", 1) or 0)
    only = set(c.get("mlp_only_layers") or [])
    return [step > 0 and (il + 1) % step == 0 and il not in only for il in range(n_layers)]


def load_hf(m, st, c):
    m.moe_top_k = int(c.get("num_experts_per_tok", 0))
    m.moe_norm_topk = bool(c.get("norm_topk_prob", True))
    n_exp = int(c.get("num_experts", 0))
    for il, (L, sparse) in enumerate(zip(m.layers, sparse_layers(c, m.n_layers))):
        _empty(L)
        if sparse:
            L.update(hf_layer(st, f"model.layers.{il}.", n_exp))


def hf_layer(st, p, n_exp):
    """The MoE keys of the sparse decoder layer with prefix p ("model.layers.N.", "mtp.layers.0.")."""
    p += "mlp."
    opt = lambda n: st.tensor(n) if st.has(n) else None

    def experts(proj):
        if st.has(p + f"switch_mlp.{proj}.weight"):
            return st.tensor(p + f"switch_mlp.{proj}.weight")
        if st.has(p + "experts.gate_up_proj"):
            if proj == "down_proj":
                return st.tensor(p + "experts.down_proj")
            gu = st.tensor(p + "experts.gate_up_proj")
            f = gu.shape[1] // 2
            return gu[:, :f] if proj == "gate_proj" else gu[:, f:]
        return np.stack([st.tensor(p + f"experts.{e}.{proj}.weight") for e in range(n_exp)])

    L = dict(moe_router=st.tensor(p + "gate.weight"), moe_gate=experts("gate_proj"), moe_up=experts("up_proj"),
             moe_down=experts("down_proj"), moe_sh_gate=opt(p + "shared_expert.gate_proj.weight"),
             moe_sh_up=opt(p + "shared_expert.up_proj.weight"),
             moe_sh_down=opt(p + "shared_expert.down_proj.weight"), moe_sh_inp=opt(p + "shared_expert_gate.weight"))
    if L["moe_sh_inp"] is not None:
        L["moe_sh_inp"] = L["moe_sh_inp"].reshape(-1)
    return L


def is_sparse(L):
    return L.get("moe_router") is not None


def _silu(x):
    return x / (1.0 + np.exp(-x))


def route(h, router, k, norm):
    """h [T, dim] -> (experts [T, k], weights [T, k]); ties go to the lower expert index."""
    logits = h @ router.T
    logits = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    idx = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    w = np.take_along_axis(p, idx, axis=-1)
    if norm:
        w = w / w.sum(axis=-1, keepdims=True)
    return idx, w


def ffn(L, h, m, qa=lambda v: v):
    """The block's output for normalized input h [T, dim] (the caller adds it to the residual).
    qa: how matmul inputs are rounded (model.int8_acts or identity); the router and the shared
    gate always see h itself."""
    idx, w = route(h, L["moe_router"], m.moe_top_k, m.moe_norm_topk)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        for j in range(idx.shape[1]):
            e = idx[t, j]
            hq = qa(h[t])
            a = _silu(L["moe_gate"][e] @ hq) * (L["moe_up"][e] @ hq)
            out[t] += w[t, j] * (L["moe_down"][e] @ qa(a))
    if L["moe_sh_gate"] is not None:
        hq = qa(h)
        s = qa(_silu(hq @ L["moe_sh_gate"].T) * (hq @ L["moe_sh_up"].T)) @ L["moe_sh_down"].T
        if L["moe_sh_inp"] is not None:
            s = s / (1.0 + np.exp(-(h @ L["moe_sh_inp"])))[:, None]
        out += s
    return out
