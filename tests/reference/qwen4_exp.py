"""Reference for qwen4_exp (Qwen3.8-Flash-Next), text only, float64, written from the published model
definitions (transformers `modeling_qwen4_exp.py` for the trunk, vLLM / SGLang for the MTP head;
see docs/FLASH_NEXT.md for where the sources differ and which one this file follows).

Weights are held in one canonical form (qwen4_exp_load.py reads every layout into it):
  * every RMSNorm gain is the effective multiplier, i.e. 1 + w for the 1-centred norms (hc_norm,
    q_norm, k_norm, indexer q/k_layernorm, PLE norm_key/norm_query/norm_conv, MTP pre_fc norms) and
    the plain w of the GDN gated norm (linear_attn.norm);
  * GDN value heads in Hugging Face order (value head j reads key head j // (nv / nk)), A = -exp(A_log);
  * matrices [out, in] as PyTorch stores them; the PLE table [rows, head_dim] with any fp8 scale applied.

The pieces (each a function below):
  bank            the residual is hc_count streams of hidden_size, flattened stream-major
  hc_mix          xn = grouped RMS(B) * g; w = sigmoid(W_up silu(W_down xn / hc)); m = mean_s(w*xn)_s;
                  inject = 2 sigmoid(W_inj xn / hc); the layer adds inject[s] * block(m) to stream s
  ngram hash      splitmix64 multipliers, per-head primes and offsets, the EOS window rule
  PLE layer       gate from per-stream keys, grouped norms, dilated depthwise conv with its state
  GDN             conv + silu, l2-normed q/k, gated delta rule, RMS(o) * w * sigmoid(z)
  QSA             gated attention over the tokens the block indexer selects
  MoE             softmax router, top-k renormalised, stacked experts, sigmoid-gated shared expert
  final mixer     hc_mix without inject: there is no final norm
All state a decode step needs lives in State (KV, raw indexer keys, GDN conv + recurrent state, the
PLE id context and its conv history), so a prefill of N tokens equals N one-token steps.
"""

import math

import numpy as np

import moe

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
M1 = 0xBF58476D1CE4E5B9
M2 = 0x94D049BB133111EB
LAYER_SEED_STRIDE = 10007
QSA_KINDS = ("full_attention", "qwen_sparse_attention", "hybrid_indexed", "deepseek_sparse_attention")

# ---------------------------------------------------------------------------------------------
# n-gram hash


def splitmix64(v):
    v = (v + GAMMA) & MASK64
    v = ((v ^ (v >> 30)) * M1) & MASK64
    v = ((v ^ (v >> 27)) * M2) & MASK64
    return (v ^ (v >> 31)) & MASK64


def layer_multipliers(vocab, ngram_size, ple_index, seed):
    """One odd multiplier per n-gram position, below (2^63-1)/vocab so id * m fits a signed int64."""
    half = max(1, ((1 << 63) - 1) // max(vocab, 1) // 2)
    base = seed + LAYER_SEED_STRIDE * ple_index
    return [2 * (splitmix64((base + GAMMA * (i + 1)) & MASK64) % half) + 1 for i in range(ngram_size)]


def is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


def head_geometry(base, n_heads, ple_index, divisible_by):
    """(sizes, offsets, padded_rows): head h of PLE module ple_index gets the
    (ple_index * n_heads + h + 1)-th prime >= base; offsets are prefix sums; rows pad up to a multiple."""
    primes, p = [], base - 1
    while len(primes) < (ple_index + 1) * n_heads:
        p += 1
        if is_prime(p):
            primes.append(p)
    sizes = primes[ple_index * n_heads:]
    offsets = [sum(sizes[:h]) for h in range(n_heads)]
    total = sum(sizes)
    return sizes, offsets, -(-total // divisible_by) * divisible_by


def shifted_ids(history, ctx_len, eos, shift):
    """Token `shift` places back for every position of history[ctx_len:], or eos when an EOS lies in
    between (the window never crosses an EOS; an EOS token keeps its own predecessors). Written as
    the segment computation transformers uses, over the whole history."""
    out, last_eos = [], -1
    prev_eos = []
    for i, tok in enumerate(history):
        prev_eos.append(last_eos)          # last EOS strictly before i
        if tok == eos:
            last_eos = i
    for i in range(ctx_len, len(history)):
        src = i - shift
        ok = src >= 0 and (i - (prev_eos[i] + 1)) >= shift
        out.append(history[src] if ok else eos)
    return out


def window(history, t, eos):
    """The 3-gram window rule of the research note, one position at a time (used by the self-tests to
    check shifted_ids): w0 = h[t], w1 = h[t-1], w2 = eos if h[t-1] is eos else h[t-2]."""
    h1 = history[t - 1] if t >= 1 else eos
    h2 = history[t - 2] if t >= 2 else eos
    return history[t], h1, (eos if h1 == eos else h2)


def ngram_rows(history, ctx_len, cfg):
    """Row ids [T, n_heads] for the tokens history[ctx_len:] (history starts with the ngram_size-1
    ids before them, eos at a sequence start). Heads 0..hp-1 hash bigrams, hp..2hp-1 trigrams, ..."""
    n, hp = cfg.ngram_size, cfg.heads_per_ngram
    sh = [shifted_ids(history, ctx_len, cfg.eos, k) for k in range(n)]
    rows = []
    for t in range(len(history) - ctx_len):
        row = []
        for g in range(2, n + 1):
            mixed = 0
            for k in range(g):
                mixed ^= sh[k][t] * cfg.multipliers[k]
            for h in range((g - 2) * hp, (g - 1) * hp):
                row.append(mixed % cfg.head_sizes[h] + cfg.head_offsets[h])
        rows.append(row)
    return np.array(rows, dtype=np.int64).reshape(-1, (n - 1) * hp)


# ---------------------------------------------------------------------------------------------
# config


class Config:
    """The text_config fields the forward pass reads (names as in transformers)."""

    def __init__(self, c):
        self.vocab = int(c["vocab_size"])
        self.hidden = int(c["hidden_size"])
        self.n_layers = int(c["num_hidden_layers"])
        self.n_head, self.n_kv = int(c["num_attention_heads"]), int(c["num_key_value_heads"])
        self.head_dim = int(c.get("head_dim") or self.hidden // self.n_head)
        rp = c.get("rope_parameters") or {}
        self.theta = float(rp.get("rope_theta", c.get("rope_theta", 10000.0)))
        self.n_rot = int(self.head_dim * float(rp.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0))))
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        types = c.get("layer_types")
        if types is None:
            iv = int(c.get("full_attention_interval", 4))
            types = ["linear_attention" if (i + 1) % iv else "full_attention" for i in range(self.n_layers)]
        unknown = sorted(set(types) - {"linear_attention"} - set(QSA_KINDS))
        if unknown or len(types) != self.n_layers:
            raise ValueError(f"qwen4_exp: layer_types {unknown or 'length'} not understood")
        self.kinds = ["gdn" if t == "linear_attention" else "qsa" for t in types]
        self.lin_nk, self.lin_dk = int(c["linear_num_key_heads"]), int(c["linear_key_head_dim"])
        self.lin_nv, self.lin_dv = int(c["linear_num_value_heads"]), int(c["linear_value_head_dim"])
        self.conv_k = int(c.get("linear_conv_kernel_dim", 4))
        gate = c.get("output_gate_type") or c.get("hidden_act", "silu")
        if gate not in ("sigmoid", "silu"):
            raise ValueError(f"qwen4_exp: output_gate_type {gate} not supported")
        self.gdn_gate = gate
        self.n_exp, self.top_k = int(c["num_experts"]), int(c["num_experts_per_tok"])
        self.norm_topk = bool(c.get("norm_topk_prob", True))
        self.hc, self.hc_rank = int(c.get("hc_count", 4)), int(c.get("hc_lowrank", 320))
        self.idx_heads, self.idx_dim = int(c["indexer_n_heads"]), int(c["indexer_head_dim"])
        if int(c.get("indexer_kv_heads", 1)) != 1:
            raise ValueError("qwen4_exp: the QSA indexer has exactly one key head")
        self.idx_ratio = int(c["indexer_compress_ratio"])
        self.idx_topk = int(c["indexer_budget"]) // self.idx_ratio      # blocks kept per query
        ids = sorted(set(c.get("ple_layer_ids") or []))
        if len(ids) > 1:
            raise ValueError("qwen4_exp: one PLE layer supported (the shipped model has one)")
        self.ple_layer = ids[0] - 1 if ids else None                    # one-indexed in the config
        self.ple_dim = int(c.get("ple_embed_dim") or self.hidden)
        self.ngram_size, self.heads_per_ngram = int(c.get("ngram_size", 3)), int(c.get("heads_per_ngram", 8))
        self.n_ple_heads = (self.ngram_size - 1) * self.heads_per_ngram
        self.ple_head_dim = self.ple_dim // self.n_ple_heads
        self.ple_conv_k = int(c.get("ple_conv_kernel_size", 4))
        self.ngram_base = int(c.get("ngram_vocab_size_base", 20_000_000))
        self.ngram_div = int(c.get("make_ngram_vocab_size_divisible_by", 128))
        self.seed = int(c.get("seed", 1234))
        self.split_parts = int(c.get("split_ngram_parts", 512))
        eos = c.get("eos_token_id")
        self.eos = int(eos[0] if isinstance(eos, list) else eos) if eos is not None else None
        if self.ple_layer is not None and self.eos is None:
            raise ValueError("qwen4_exp: eos_token_id is required by the PLE hash")
        self.multipliers = layer_multipliers(self.vocab, self.ngram_size, 0, self.seed)
        self.head_sizes, self.head_offsets, self.ple_rows = head_geometry(
            self.ngram_base, self.n_ple_heads, 0, self.ngram_div)
        self.mtp_layers = int(c.get("mtp_num_hidden_layers", 0))
        if self.ple_dim % self.n_ple_heads or self.n_rot > self.idx_dim or self.hc < 2:
            raise ValueError("qwen4_exp: ple_embed_dim must split into the n-gram heads, the RoPE dims must fit "
                             "the indexer head, and hc_count must be > 1 (transformers' own checks)")


# ---------------------------------------------------------------------------------------------
# small ops


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def rms(x, gain, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gain


def grouped_rms(x, gain, group, eps):
    """RMSNorm of each `group`-wide slice of the last axis, then the flat gain."""
    g = x.reshape(*x.shape[:-1], -1, group)
    g = g / np.sqrt(np.mean(g * g, axis=-1, keepdims=True) + eps)
    return g.reshape(x.shape) * gain


def rope(x, pos, n_rot, theta):
    """Rotate-half RoPE on the first n_rot dims. x [T, heads, d], pos [T]."""
    inv = theta ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :n_rot // 2], x[..., n_rot // 2:n_rot]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin, x[..., n_rot:]], axis=-1)


# ---------------------------------------------------------------------------------------------
# state


class State:
    """Everything a sequence carries between steps. `stats` counts indexer events (queries whose
    selection was sparse, top-k cuts that fell on a tie, queries whose own block was dropped)."""

    def __init__(self, cfg, layers=None):
        self.n_past = 0
        self.k, self.v, self.idx_k, self.conv, self.S = {}, {}, {}, {}, {}
        conv_dim = 2 * cfg.lin_nk * cfg.lin_dk + cfg.lin_nv * cfg.lin_dv
        for il in (layers if layers is not None else range(cfg.n_layers)):
            if il == "mtp" or cfg.kinds[il] == "qsa":
                self.k[il] = np.zeros((0, cfg.n_kv, cfg.head_dim))
                self.v[il] = np.zeros((0, cfg.n_kv, cfg.head_dim))
                self.idx_k[il] = np.zeros((0, cfg.idx_dim))
            else:
                self.conv[il] = np.zeros((cfg.conv_k - 1, conv_dim))
                self.S[il] = np.zeros((cfg.lin_nv, cfg.lin_dk, cfg.lin_dv))
        self.ple_ids = [cfg.eos] * (cfg.ngram_size - 1)
        self.ple_conv = np.zeros(((cfg.ple_conv_k - 1) * cfg.ngram_size, cfg.hc * cfg.hidden))
        self.stats = dict(sparse=0, tie_at_cut=0, own_block_dropped=0)


# ---------------------------------------------------------------------------------------------
# blocks


def hc_mix(cfg, P, B):
    """P: dict norm, down, up[, inject]. B [T, hc*H] -> (m [T, H], inject [T, hc] or None)."""
    H, hc = cfg.hidden, cfg.hc
    xn = grouped_rms(B, P["norm"], H, cfg.eps)
    w = sigmoid(silu(xn @ P["down"].T / hc) @ P["up"].T)
    m = (w * xn).reshape(-1, hc, H).mean(axis=1)
    inj = 2.0 * sigmoid(xn @ P["inject"].T / hc) if P.get("inject") is not None else None
    return m, inj


def hc_add(B, y, inj):
    return B + (inj[:, :, None] * y[:, None, :]).reshape(B.shape)


def ple_layer(cfg, P, table, B, ids, st):
    """The PLE output added to the bank before the attention HC of its layer. ids: the new tokens."""
    H, hc = cfg.hidden, cfg.hc
    ctx = list(st.ple_ids)
    history = ctx + list(ids)
    rows = ngram_rows(history, len(ctx), cfg)
    st.ple_ids = history[len(history) - (cfg.ngram_size - 1):]
    emb = table(rows).reshape(len(ids), cfg.ple_dim)              # heads side by side, head order
    kn = grouped_rms(emb @ P["key"].T, P["norm_key"], H, cfg.eps).reshape(-1, hc, H)
    v = emb @ P["value"].T                                        # [T, H], shared by the streams
    qn = grouped_rms(B, P["norm_query"], H, cfg.eps).reshape(-1, hc, H)
    s = (kn * qn).sum(axis=-1) / math.sqrt(H)                     # [T, hc]
    s = np.sign(s) * np.sqrt(np.maximum(np.abs(s), 1e-6))
    gv = (sigmoid(s)[:, :, None] * v[:, None, :]).reshape(len(ids), hc * H)
    return gv + ple_conv(cfg, P["conv"], grouped_rms(gv, P["norm_conv"], H, cfg.eps), st)


def ple_conv(cfg, w, u, st):
    """silu of the depthwise conv with dilation ngram_size over the normed gated values u [T, C]: tap j
    of token t reads u[t - d * (K - 1 - j)], rows before the sequence are zeros, and st.ple_conv keeps
    the last (K - 1) * d rows (not reset at an EOS)."""
    d, K = cfg.ngram_size, cfg.ple_conv_k
    n_state = (K - 1) * d
    hist = np.concatenate([st.ple_conv, u])                       # row n_state + t is token t
    conv = np.stack([sum(w[:, j] * hist[n_state + t - d * (K - 1 - j)] for j in range(K))
                     for t in range(u.shape[0])])
    st.ple_conv = hist[-n_state:]
    return silu(conv)


def gdn(cfg, L, il, x, st):
    T = x.shape[0]
    nk, dk, nv, dv, K = cfg.lin_nk, cfg.lin_dk, cfg.lin_nv, cfg.lin_dv, cfg.conv_k
    mixed = x @ L["qkv"].T
    z = (x @ L["z"].T).reshape(T, nv, dv)
    beta = sigmoid(x @ L["b"].T)
    g = L["A"] * np.logaddexp(0.0, x @ L["a"].T + L["dt_bias"])
    win = np.concatenate([st.conv[il], mixed])
    conv = silu(np.stack([(win[t:t + K] * L["conv"].T).sum(axis=0) for t in range(T)]))
    st.conv[il] = win[T:]
    q = conv[:, :nk * dk].reshape(T, nk, dk)
    k = conv[:, nk * dk:2 * nk * dk].reshape(T, nk, dk)
    v = conv[:, 2 * nk * dk:].reshape(T, nv, dv)
    l2 = lambda a: a / np.sqrt((a * a).sum(axis=-1, keepdims=True) + 1e-6)
    q, k = l2(q) / math.sqrt(dk), l2(k)
    S = st.S[il]
    out = np.empty((T, nv, dv))
    for t in range(T):
        for h in range(nv):
            kh = h // (nv // nk)
            S[h] *= math.exp(g[t, h])
            delta = beta[t, h] * (v[t, h] - k[t, kh] @ S[h])
            S[h] += np.outer(k[t, kh], delta)
            out[t, h] = q[t, kh] @ S[h]
    gate = sigmoid(z) if cfg.gdn_gate == "sigmoid" else silu(z)
    return (rms(out, L["norm"], cfg.eps) * gate).reshape(T, nv * dv) @ L["out"].T


def select_tokens(cfg, L, q_idx, keys, p, st):
    """Token indices query position p attends to: the top blocks of `ratio` tokens by the indexer
    score (ties to the lower block index) plus the incomplete tail. keys: raw indexer keys 0..p."""
    r = cfg.idx_ratio
    nb = (p + 1) // r
    tail = list(range(nb * r, p + 1))
    if nb == 0:
        return tail
    pooled = keys[:nb * r].reshape(nb, r, -1).mean(axis=1)
    kb = rope(rms(pooled, L["idx_k_norm"], cfg.eps)[:, None, :], np.arange(nb) * r, cfg.n_rot, cfg.theta)[:, 0]
    score = np.maximum(q_idx @ kb.T, 0.0).sum(axis=0) / math.sqrt(cfg.idx_dim)   # [nb]
    keep = min(cfg.idx_topk, nb)
    order = np.argsort(-score, kind="stable")
    chosen = sorted(order[:keep].tolist())
    if keep < nb:
        st.stats["sparse"] += 1
        if score[order[keep - 1]] == score[order[keep]]:
            st.stats["tie_at_cut"] += 1
        if (p + 1) % r == 0 and (nb - 1) not in chosen:
            st.stats["own_block_dropped"] += 1
    return [b * r + i for b in chosen for i in range(r)] + tail


def qsa(cfg, L, key, x, pos, st, dense=False):
    """Gated attention over the indexer's selection (all visible tokens when dense)."""
    T, H, Hkv, hd = x.shape[0], cfg.n_head, cfg.n_kv, cfg.head_dim
    qg = (x @ L["wq"].T).reshape(T, H, 2 * hd)
    q, gate = qg[..., :hd], qg[..., hd:].reshape(T, H * hd)
    q = rope(rms(q, L["q_norm"], cfg.eps), pos, cfg.n_rot, cfg.theta)
    k = rope(rms((x @ L["wk"].T).reshape(T, Hkv, hd), L["k_norm"], cfg.eps), pos, cfg.n_rot, cfg.theta)
    v = (x @ L["wv"].T).reshape(T, Hkv, hd)
    ni = cfg.idx_heads * cfg.idx_dim
    qk = x @ L["idx_qk"].T
    qi = rope(rms(qk[:, :ni].reshape(T, cfg.idx_heads, cfg.idx_dim), L["idx_q_norm"], cfg.eps), pos,
              cfg.n_rot, cfg.theta)
    st.idx_k[key] = np.concatenate([st.idx_k[key], qk[:, ni:]])
    st.k[key] = np.concatenate([st.k[key], k])
    st.v[key] = np.concatenate([st.v[key], v])
    K, V = st.k[key], st.v[key]
    out = np.empty((T, H, hd))
    for t in range(T):
        p = int(pos[t])
        sel = list(range(p + 1)) if dense else select_tokens(cfg, L, qi[t], st.idx_k[key][:p + 1], p, st)
        for h in range(H):
            s = K[sel, h // (H // Hkv)] @ q[t, h] / math.sqrt(hd)
            w = np.exp(s - s.max())
            out[t, h] = (w / w.sum()) @ V[sel, h // (H // Hkv)]
    return (out.reshape(T, H * hd) * sigmoid(gate)) @ L["wo"].T


def moe_block(cfg, L, x):
    idx, w = moe.route(x, L["router"], cfg.top_k, cfg.norm_topk)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(idx.shape[1]):
            e = idx[t, j]
            out[t] += w[t, j] * (L["exp_down"][e] @ (silu(L["exp_gate"][e] @ x[t]) * (L["exp_up"][e] @ x[t])))
    shared = (silu(x @ L["sh_gate"].T) * (x @ L["sh_up"].T)) @ L["sh_down"].T
    return out + sigmoid(x @ L["sh_inp"])[:, None] * shared


def decoder_layer(cfg, L, key, kind, B, pos, st, dense=False):
    m, inj = hc_mix(cfg, L["hc_attn"], B)
    y = gdn(cfg, L, key, m, st) if kind == "gdn" else qsa(cfg, L, key, m, pos, st, dense)
    B = hc_add(B, y, inj)
    m, inj = hc_mix(cfg, L["hc_mlp"], B)
    return hc_add(B, moe_block(cfg, L, m), inj)


# ---------------------------------------------------------------------------------------------
# model


class Model:
    """cfg; embed [V, H]; lm_head [V, H]; mixer (final HC mix); layers (dicts); ple (dict with
    `table`: a function row ids -> rows, and the layer's projections); mtp (dict or None)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.embed = self.lm_head = self.mixer = None
        self.layers, self.ple, self.mtp = [], None, None


def forward(model, ids, st, dense=False, banks=None):
    """Logits [T, V] for the new tokens `ids`, continuing from state st. banks: a list that receives
    the pre-mixer bank [T, hc*H] (what the MTP head reads)."""
    cfg = model.cfg
    T = len(ids)
    pos = np.arange(st.n_past, st.n_past + T)
    B = np.tile(model.embed[np.asarray(ids)], (1, cfg.hc))
    for il, L in enumerate(model.layers):
        if il == cfg.ple_layer:
            B = B + ple_layer(cfg, model.ple, model.ple["table"], B, ids, st)
        B = decoder_layer(cfg, L, il, cfg.kinds[il], B, pos, st, dense)
    st.n_past += T
    if banks is not None:
        banks.append(B)
    return hc_mix(cfg, model.mixer, B)[0] @ model.lm_head.T


def greedy(model, prompt, n, stats=None):
    """stats: a dict that receives the indexer counts of the run (State.stats)."""
    st = State(model.cfg)
    logits = forward(model, prompt, st)
    out = []
    for _ in range(n):
        out.append(int(np.argmax(logits[-1])))
        logits = forward(model, [out[-1]], st)
    _add_stats(stats, st)
    return out


def _add_stats(stats, *states):
    if stats is not None:
        for st in states:
            for k, v in st.stats.items():
                stats[k] = stats.get(k, 0) + v


# ---------------------------------------------------------------------------------------------
# MTP head (vLLM Qwen4ExpMultiTokenPredictor / SGLang NextN; transformers drops mtp.*)


def mtp_rows(model, ids, banks, pos0, st):
    """Rows at positions pos0..: ids [T] (the next tokens), banks [T, hc*H] (the trunk's pre-mixer
    banks, or the head's own from the previous draft step) -> (bank [T, hc*H], logits [T, V])."""
    cfg, P = model.cfg, model.mtp
    pos = np.arange(pos0, pos0 + len(ids))
    X = decoder_layer(cfg, P["layer"], "mtp", "qsa", mtp_input(model, ids, banks), pos, st)
    return X, hc_mix(cfg, P["mixer"], X)[0] @ model.lm_head.T


def mtp_input(model, ids, banks):
    """The head's input bank: fc_hidden applied to each stream of the normed bank, plus the projected
    normed embedding on every stream. The bank is normed by ONE RMS over all hc*H features (vLLM,
    SGLang, oMLX); llama.cpp norms each stream, which is a different model (docs/FLASH_NEXT.md)."""
    cfg, P = model.cfg, model.mtp
    H, hc = cfg.hidden, cfg.hc
    e = rms(model.embed[np.asarray(ids)], P["norm_e"], cfg.eps) @ P["fc_embedding"].T      # [T, H]
    hn = rms(banks, P["norm_h"], cfg.eps).reshape(-1, hc, H)
    return (hn @ P["fc_hidden"].T + e[:, None, :]).reshape(-1, hc * H)


def mtp_draft(model, tokens, n_draft, stats=None):
    """Proposals and their logits [n_draft, V] after the committed `tokens` (>= 2; the last one not
    yet run through the trunk): row i pairs token i+1 with the trunk bank of token i at position i;
    further steps feed the previous proposal with the head's own bank (chained drafting)."""
    banks, trunk = [], State(model.cfg)
    forward(model, tokens[:-1], trunk, banks=banks)
    st = State(model.cfg, layers=["mtp"])
    n = len(tokens)
    X, logits = mtp_rows(model, tokens[1:], banks[0], 0, st)
    props, out = [int(np.argmax(logits[-1]))], [logits[-1]]
    X = X[-1:]
    for k in range(1, n_draft):
        X, logits = mtp_rows(model, [props[-1]], X, n - 2 + k, st)
        props.append(int(np.argmax(logits[-1])))
        out.append(logits[-1])
    _add_stats(stats, trunk, st)
    return props, np.stack(out)
