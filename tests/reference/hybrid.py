"""Reference for the hybrid Gated-DeltaNet models qwen3_next (Qwen3-Next) and qwen3_5 (Qwen3.5),
written from the published model definitions:

* Layer schedule: `layer_types` ("linear_attention" / "full_attention") or every
  `full_attention_interval`-th layer full attention (default 4).
* Zero-centred RMSNorm: y = x / rms(x) * (1 + w) for the layer norms, the final norm and the q/k
  norms. Where the 1 lives depends on who wrote the file (stored_gains_shifted below): transformers
  checkpoints store w; llama.cpp's GGUF converter stores 1 + w; mlx-lm's sanitize() adds the 1 when it
  meets the raw layout and rewrites that layout (conv1d [C, 1, K] -> [C, K, 1], per-expert tensors
  stacked into switch_mlp, MTP tensors dropped), so a saved mlx-lm folder holds 1 + w and mlx-lm
  uses it as the RMSNorm weight directly.
* Gated full attention: q_proj yields [q | gate] per head (2 * head_dim rows per head); per-head
  q/k norms; RoPE on the first head_dim * partial_rotary_factor dims (rotate-half inside them);
  the attention output is multiplied by sigmoid(gate) before o_proj.
* Gated DeltaNet (linear attention), per token t and value head h:
    q, k, v = causal depthwise conv (kernel K, no bias) + SiLU over the concatenation [q | k | v]
    q, k    = l2-normalized per head (eps 1e-6), q scaled by 1/sqrt(head_k_dim); value head h reads
              key head h // (nv/nk) (Hugging Face order) or h % nk (GGUF qwen35: llama.cpp's
              converter tiles the value heads so that ggml's broadcast works)
    beta    = sigmoid(b),  g = A * softplus(a + dt_bias),  A = -exp(A_log)
    S       = exp(g) * S;  S += k (beta (v - S^T k))^T;  o = S^T q        S: [head_k_dim, head_v_dim]
    out     = out_proj(rms_norm(o) * w_norm * silu(z))   (plain weight: linear_attn.norm is not
              zero-centred)
  Qwen3-Next packs q/k/v/z in `in_proj_qkvz` grouped by key head ([q_g k_g v_g z_g] for each key
  head g, v_g/z_g holding that head's nv/nk value heads) and b/a in `in_proj_ba` ([b_g a_g]);
  Qwen3.5 stores `in_proj_qkv` ([q all heads | k | v]), `in_proj_z`, `in_proj_b`, `in_proj_a`.
  llama.cpp's current qwen3next GGUF splits in_proj_qkvz that way too (attn_qkv, attn_gate) but keeps
  b/a grouped (ssm_ba); its older files keep ssm_in / ssm_ba as Hugging Face groups them.
* MoE variants (Qwen3-Next, Qwen3.5-MoE: config num_experts > 0; GGUF qwen3next with
  expert_count, qwen35moe): the MLP after each mixer is moe.py's block (router, top-k, gated shared
  expert) on the layers moe.sparse_layers marks (GGUF: those with ffn_gate_inp), a dense SwiGLU on
  the others. HF model_type qwen3_5_moe reads as qwen3_5.
Everything here is token-by-token recurrence in float64; the chunked form is the C++'s business.
"""

import numpy as np

import moe

HYBRID_ARCHS = ("qwen3_next", "qwen3_5")
HF_MODEL_TYPES = {"qwen3_next": "qwen3_next", "qwen3_5": "qwen3_5", "qwen3_5_moe": "qwen3_5"}
GGUF_ARCHS = {"qwen3next": "qwen3_next", "qwen35": "qwen3_5", "qwen35moe": "qwen3_5"}


def _layer_kinds(n_layers, layer_types=None, interval=4):
    if layer_types:
        if len(layer_types) != n_layers:
            raise ValueError("layer_types has the wrong length")
        return ["linear" if t == "linear_attention" else "full" for t in layer_types]
    return ["full" if (il + 1) % interval == 0 else "linear" for il in range(n_layers)]


def _split_qkvz(m, qkvz, ba):
    """Qwen3-Next grouped in_proj_qkvz / in_proj_ba -> [q | k | v] rows, z rows, b rows, a rows."""
    nk, dk, nv, dv = m.lin_nk, m.lin_dk, m.lin_nv, m.lin_dv
    r = nv // nk
    per = 2 * dk + 2 * r * dv
    g = qkvz.reshape(nk, per, -1)
    q = g[:, :dk].reshape(nk * dk, -1)
    k = g[:, dk:2 * dk].reshape(nk * dk, -1)
    v = g[:, 2 * dk:2 * dk + r * dv].reshape(nv * dv, -1)
    z = g[:, 2 * dk + r * dv:].reshape(nv * dv, -1)
    gb = ba.reshape(nk, 2 * r, -1)
    b = gb[:, :r].reshape(nv, -1)
    a = gb[:, r:].reshape(nv, -1)
    return np.concatenate([q, k, v], axis=0), z, b, a


def stored_gains_shifted(st, arch):
    """True when a safetensors directory holds 1 + w (mlx-lm's sanitized layout), False for w
    (transformers). mlx-lm adds the 1 in the same pass that moves conv1d from [C, 1, K] to [C, K, 1],
    a shape transformers never writes, so that axis decides; without a conv1d, mlx-lm's own markers
    of the raw layout: per-expert tensors (qwen3_next), MTP tensors (qwen3_5)."""
    names = list(st.where)
    for n in names:
        if n.endswith("linear_attn.conv1d.weight"):
            shape = st.raw(n)[0].shape
            if shape[-1] != 1:
                return False
            if len(shape) == 3 and shape[1] > 1:
                return True
    if arch == "qwen3_next":
        return not any(".mlp.experts." in n and n.split(".mlp.experts.")[1][:1].isdigit() for n in names)
    return not any(n.startswith("mtp.") or ".mtp." in n for n in names)


def load_hf_hybrid(m, st, c):
    """Fills m (dims already read) from a safetensors directory of qwen3_next / qwen3_5."""
    m.hybrid = True
    m.v_tiled = False
    m.partial_rotary = float(c.get("partial_rotary_factor", 0.25))
    m.kinds = _layer_kinds(m.n_layers, c.get("layer_types"), int(c.get("full_attention_interval", 4)))
    m.lin_nk, m.lin_dk = int(c["linear_num_key_heads"]), int(c["linear_key_head_dim"])
    m.lin_nv, m.lin_dv = int(c["linear_num_value_heads"]), int(c["linear_value_head_dim"])
    m.conv_k = int(c.get("linear_conv_kernel_dim", 4))
    shift = 0.0 if stored_gains_shifted(st, m.arch) else 1.0
    one = lambda w: shift + w   # zero-centred norms: the gain is 1 + w
    m.out_norm = one(m.out_norm)
    sparse = moe.sparse_layers(c, m.n_layers)
    for il in range(m.n_layers):
        p = f"model.layers.{il}."
        L = dict(attn_norm=one(st.tensor(p + "input_layernorm.weight")),
                 ffn_norm=one(st.tensor(p + "post_attention_layernorm.weight")))
        if not sparse[il]:
            L.update(gate=st.tensor(p + "mlp.gate_proj.weight"), up=st.tensor(p + "mlp.up_proj.weight"),
                     down=st.tensor(p + "mlp.down_proj.weight"))
        if m.kinds[il] == "full":
            a = p + "self_attn."
            L.update(wq=st.tensor(a + "q_proj.weight"), wk=st.tensor(a + "k_proj.weight"),
                     wv=st.tensor(a + "v_proj.weight"), wo=st.tensor(a + "o_proj.weight"),
                     q_norm=one(st.tensor(a + "q_norm.weight")), k_norm=one(st.tensor(a + "k_norm.weight")))
        else:
            a = p + "linear_attn."
            if st.has(a + "in_proj_qkvz.weight"):
                qkv, z, b, al = _split_qkvz(m, st.tensor(a + "in_proj_qkvz.weight"), st.tensor(a + "in_proj_ba.weight"))
            else:
                qkv, z = st.tensor(a + "in_proj_qkv.weight"), st.tensor(a + "in_proj_z.weight")
                b, al = st.tensor(a + "in_proj_b.weight"), st.tensor(a + "in_proj_a.weight")
            conv = st.tensor(a + "conv1d.weight")
            L.update(qkv=qkv, z=z, b=b, a=al, conv=conv.reshape(conv.shape[0], -1),
                     A=-np.exp(st.tensor(a + "A_log")), dt_bias=st.tensor(a + "dt_bias"),
                     norm=st.tensor(a + "norm.weight"), out=st.tensor(a + "out_proj.weight"))
        m.layers.append(L)
    moe.load_hf(m, st, c)


def load_gguf_hybrid(m, g, arch):
    """Fills m from a GGUF qwen3next / qwen35 file (llama.cpp names; norms hold 1 + w, ssm_a holds A)."""
    md = g.metadata
    m.hybrid = True
    m.v_tiled = arch in ("qwen35", "qwen35moe")
    rot = int(md.get(f"{arch}.rope.dimension_count", m.head_dim))
    m.partial_rotary = rot / m.head_dim
    m.kinds = _layer_kinds(m.n_layers, None, int(md.get(f"{arch}.full_attention_interval", 4)))
    m.lin_dk = int(md[f"{arch}.ssm.state_size"])
    m.lin_nk = int(md[f"{arch}.ssm.group_count"])
    m.lin_nv = int(md[f"{arch}.ssm.time_step_rank"])
    m.lin_dv = int(md[f"{arch}.ssm.inner_size"]) // m.lin_nv
    m.conv_k = int(md[f"{arch}.ssm.conv_kernel"])
    t = g.tensor
    for il in range(m.n_layers):
        p = f"blk.{il}."
        L = dict(attn_norm=t(p + "attn_norm.weight"), ffn_norm=t(p + "post_attention_norm.weight"))
        if p + "ffn_gate_inp.weight" not in g.tensors:  # a dense MLP (moe.load_gguf fills sparse ones)
            L.update(gate=t(p + "ffn_gate.weight"), up=t(p + "ffn_up.weight"), down=t(p + "ffn_down.weight"))
        if m.kinds[il] == "full":
            L.update(wq=t(p + "attn_q.weight"), wk=t(p + "attn_k.weight"), wv=t(p + "attn_v.weight"),
                     wo=t(p + "attn_output.weight"), q_norm=t(p + "attn_q_norm.weight"),
                     k_norm=t(p + "attn_k_norm.weight"))
        else:
            if p + "ssm_in.weight" in g.tensors:
                qkv, z, b, al = _split_qkvz(m, t(p + "ssm_in.weight"), t(p + "ssm_ba.weight"))
            elif p + "ssm_ba.weight" in g.tensors:
                # llama.cpp's current qwen3next converter: in_proj_qkvz split into [q | k | v]
                # (attn_qkv) and z (attn_gate), value heads still grouped by key head; b/a kept
                # grouped per key head in ssm_ba ([b_g a_g]).
                qkv, z = t(p + "attn_qkv.weight"), t(p + "attn_gate.weight")
                r = m.lin_nv // m.lin_nk
                gb = t(p + "ssm_ba.weight").reshape(m.lin_nk, 2 * r, -1)
                b, al = gb[:, :r].reshape(m.lin_nv, -1), gb[:, r:].reshape(m.lin_nv, -1)
            else:
                qkv, z = t(p + "attn_qkv.weight"), t(p + "attn_gate.weight")
                b, al = t(p + "ssm_beta.weight"), t(p + "ssm_alpha.weight")
            L.update(qkv=qkv, z=z, b=b, a=al, conv=t(p + "ssm_conv1d.weight"), A=t(p + "ssm_a"),
                     dt_bias=t(p + "ssm_dt.bias"), norm=t(p + "ssm_norm.weight"), out=t(p + "ssm_out.weight"))
        m.layers.append(L)
    moe.load_gguf(m, g, arch)


class HybridCache:
    def __init__(self, m):
        dt = m.tok_embd.dtype
        conv_dim = 2 * m.lin_nk * m.lin_dk + m.lin_nv * m.lin_dv
        self.n_past = 0
        self.k, self.v, self.conv, self.S = {}, {}, {}, {}
        for il, kind in enumerate(m.kinds):
            if kind == "full":
                self.k[il] = np.zeros((0, m.n_head_kv, m.head_dim), dtype=dt)
                self.v[il] = np.zeros((0, m.n_head_kv, m.head_dim), dtype=dt)
            else:
                self.conv[il] = np.zeros((m.conv_k - 1, conv_dim), dtype=dt)
                self.S[il] = np.zeros((m.lin_nv, m.lin_dk, m.lin_dv), dtype=dt)


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope_partial(x, pos, theta, n_rot):
    inv = theta ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)
    ang = pos.astype(np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :n_rot // 2], x[..., n_rot // 2:n_rot]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin, x[..., n_rot:]], axis=-1)


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _full_attention(m, L, il, h, pos, cache, qa):
    T, H, Hkv, hd = h.shape[0], m.n_head, m.n_head_kv, m.head_dim
    h = qa(h)
    qg = (h @ L["wq"].T).reshape(T, H, 2 * hd)
    q, gate = qg[..., :hd], qg[..., hd:].reshape(T, H * hd)
    k = (h @ L["wk"].T).reshape(T, Hkv, hd)
    v = (h @ L["wv"].T).reshape(T, Hkv, hd)
    q, k = _rms(q, L["q_norm"], m.eps), _rms(k, L["k_norm"], m.eps)
    n_rot = int(hd * m.partial_rotary)
    n_rot -= n_rot % 2
    q, k = _rope_partial(q, pos, m.theta, n_rot), _rope_partial(k, pos, m.theta, n_rot)
    cache.k[il] = np.concatenate([cache.k[il], k])
    cache.v[il] = np.concatenate([cache.v[il], v])
    K = np.repeat(cache.k[il], H // Hkv, axis=1)
    V = np.repeat(cache.v[il], H // Hkv, axis=1)
    p0 = pos[0]
    mask = np.arange(p0 + T)[None, :] > (p0 + np.arange(T))[:, None]
    s = q.transpose(1, 0, 2) @ K.transpose(1, 2, 0) / np.sqrt(hd)
    s = np.where(mask[None], -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    att = (p @ V.transpose(1, 0, 2)).transpose(1, 0, 2).reshape(T, H * hd)
    att = att / (1.0 + np.exp(-gate))
    return qa(att) @ L["wo"].T


def _linear_attention(m, L, il, h, cache, qa):
    T = h.shape[0]
    h = qa(h)
    nk, dk, nv, dv, K = m.lin_nk, m.lin_dk, m.lin_nv, m.lin_dv, m.conv_k
    mixed = h @ L["qkv"].T                                   # [T, conv_dim]
    z = (h @ L["z"].T).reshape(T, nv, dv)
    beta = 1.0 / (1.0 + np.exp(-(h @ L["b"].T)))             # [T, nv]
    a = h @ L["a"].T + L["dt_bias"]
    g = L["A"] * np.logaddexp(0.0, a)                        # softplus; [T, nv]
    window = np.concatenate([cache.conv[il], mixed])         # [K-1+T, conv_dim]
    conv = np.stack([(window[t:t + K] * L["conv"].T).sum(axis=0) for t in range(T)])
    cache.conv[il] = window[T:]
    conv = _silu(conv)
    q = conv[:, :nk * dk].reshape(T, nk, dk)
    k = conv[:, nk * dk:2 * nk * dk].reshape(T, nk, dk)
    v = conv[:, 2 * nk * dk:].reshape(T, nv, dv)
    l2 = lambda x: x / np.sqrt((x * x).sum(axis=-1, keepdims=True) + 1e-6)
    q, k = l2(q) / np.sqrt(dk), l2(k)
    kh = np.arange(nv) % nk if m.v_tiled else np.arange(nv) // (nv // nk)
    S = cache.S[il]
    out = np.empty((T, nv, dv))
    for t in range(T):
        for hh in range(nv):
            kt, qt = k[t, kh[hh]], q[t, kh[hh]]
            S[hh] *= np.exp(g[t, hh])
            delta = beta[t, hh] * (v[t, hh] - kt @ S[hh])
            S[hh] += np.outer(kt, delta)
            out[t, hh] = qt @ S[hh]
    o = _rms(out, L["norm"], m.eps) * _silu(z)
    return qa(o.reshape(T, nv * dv)) @ L["out"].T


def forward(m, tokens, cache, qa=None, hidden=None):
    """qa: rounding of every matmul input (model.int8_acts) or None. hidden: a list that receives
    the final-normed hidden states [T, dim] (what the MTP head reads, mtp.py)."""
    qa = qa or (lambda v: v)
    T = len(tokens)
    pos = np.arange(cache.n_past, cache.n_past + T)
    x = m.tok_embd[np.asarray(tokens)].copy()
    for il, L in enumerate(m.layers):
        h = _rms(x, L["attn_norm"], m.eps)
        if m.kinds[il] == "full":
            x = x + _full_attention(m, L, il, h, pos, cache, qa)
        else:
            x = x + _linear_attention(m, L, il, h, cache, qa)
        h = _rms(x, L["ffn_norm"], m.eps)
        if moe.is_sparse(L):  # the router and the shared gate see h itself (moe.ffn)
            x = x + moe.ffn(L, h, m, qa)
            continue
        h = qa(h)
        x = x + qa(_silu(h @ L["gate"].T) * (h @ L["up"].T)) @ L["down"].T
    cache.n_past += T
    normed = _rms(x, m.out_norm, m.eps)
    if hidden is not None:
        hidden.append(normed)
    return qa(normed) @ m.output.T
