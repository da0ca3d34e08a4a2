"""Reference forward pass for llama / qwen2 / qwen3 / qwen3_moe (moe.py) decoder-only transformers, from the published
model definitions (LLaMA: RMSNorm pre-norm, RoPE, SwiGLU; Qwen2: + q/k/v biases; Qwen3: + per-head
RMSNorm on q and k before RoPE and an explicit head_dim, so n_head*head_dim may differ from dim).

RoPE conventions, and why each file format needs its own:
  A head vector x of size d is split into d/2 pairs, pair i rotated by angle pos * theta^(-2i/d).
  * "interleaved" (Meta's original LLaMA code, GPT-J style, llama.cpp's LLAMA_ROPE_TYPE_NORM):
    pair i = (x[2i], x[2i+1]).
  * "neox" (rotate-half, Hugging Face transformers, llama.cpp's LLAMA_ROPE_TYPE_NEOX):
    pair i = (x[i], x[i + d/2]).
  The two are the same model up to a permutation of the rows of Wq and Wk inside each head.
  - HF safetensors (any architecture): rotate-half. HF's llama conversion permuted Meta's q/k rows
    so that rotate-half reproduces Meta's interleaved model.
  - GGUF `llama`: llama.cpp's converter undoes that permutation (q/k rows are stored in Meta's
    interleaved order) and llama.cpp applies interleaved RoPE. HF row r of a head (r < d/2 -> first
    member of pair r, r >= d/2 -> second member of pair r-d/2) is GGUF row 2*(r mod d/2) + (r >= d/2).
  - GGUF `qwen2` / `qwen3`: no permutation; llama.cpp applies NEOX (rotate-half).
  - llama2.c .bin: trained with the interleaved (complex-number) formulation; rows as trained.
So the loader records `rope` per file, and the forward pass applies that convention as stored.

All arithmetic is float64 for models small enough (< 200M parameters); bigger ones keep float32
weights and matmuls.
"""

import json
import os

import numpy as np

import hybrid
import moe
import qwen4_exp
import qwen4_exp_load
import readers


class Model:
    def __init__(self):
        self.arch = "llama"
        self.rope = "neox"         # "neox" or "interleaved"
        self.n_vocab = 0
        self.dim = 0
        self.n_layers = 0
        self.n_head = 0
        self.n_head_kv = 0
        self.head_dim = 0
        self.n_ff = 0
        self.eps = 1e-5
        self.theta = 10000.0
        self.ctx = 0
        self.bos = None
        self.eos = None
        self.tok_embd = None       # [n_vocab, dim]
        self.output = None         # [n_vocab, dim]
        self.out_norm = None       # [dim]
        self.layers = []           # dicts: attn_norm [dim], wq [n_head*hd, dim], bq, wk [n_kv*hd, dim],
                                   # bk, wv, bv, wo [dim, n_head*hd], q_norm [hd], k_norm [hd],
                                   # ffn_norm [dim], gate [n_ff, dim], up [n_ff, dim], down [dim, n_ff]
        self.gguf = None           # GGUFFile when loaded from GGUF (tokenizer metadata)
        self.hybrid = False        # qwen3_next / qwen3_5: layers differ by kind (hybrid.py)

    def n_params(self):
        n = self.tok_embd.size + (0 if self.output is self.tok_embd else self.output.size)
        for L in self.layers:
            n += sum(v.size for v in L.values() if v is not None)
        return n

    def cast(self, dtype):
        conv = lambda a: None if a is None else a.astype(dtype, copy=False)
        tied = self.output is self.tok_embd
        self.tok_embd = conv(self.tok_embd)
        self.output = self.tok_embd if tied else conv(self.output)
        self.out_norm = conv(self.out_norm)
        self.layers = [{k: conv(v) for k, v in L.items()} for L in self.layers]


# ---------------------------------------------------------------------------------------------
# loaders


def _finish(m, compute_dtype=None):
    if compute_dtype is None:
        compute_dtype = np.float64 if m.n_params() < 200_000_000 else np.float32
    m.cast(compute_dtype)
    return m


def load_llama2c(path):
    cfg, w = readers.read_llama2c(path)
    m = Model()
    m.arch = "llama"
    m.rope = "interleaved"
    m.n_vocab, m.dim, m.n_layers = cfg["vocab"], cfg["dim"], cfg["n_layers"]
    m.n_head, m.n_head_kv = cfg["n_heads"], cfg["n_kv"]
    m.head_dim = m.dim // m.n_head
    m.n_ff = cfg["hidden"]
    m.eps = 1e-5
    m.theta = 10000.0
    m.ctx = cfg["seq_len"]
    m.bos, m.eos = 1, 2
    m.tok_embd, m.output, m.out_norm = w["tok_embd"], w["output"], w["out_norm"]
    for il in range(m.n_layers):
        m.layers.append(dict(
            attn_norm=w["attn_norm"][il], wq=w["wq"][il], wk=w["wk"][il], wv=w["wv"][il],
            wo=w["wo"][il], ffn_norm=w["ffn_norm"][il], gate=w["w1"][il], up=w["w3"][il],
            down=w["w2"][il], bq=None, bk=None, bv=None, q_norm=None, k_norm=None))
    return _finish(m)


def load_gguf(path, compute_dtype=None):
    g = readers.GGUFFile(path)
    md = g.metadata
    arch = md["general.architecture"]
    if arch in hybrid.GGUF_ARCHS:
        return _load_gguf_hybrid(g, arch, compute_dtype)
    if arch not in ("llama", "qwen2", "qwen3", "qwen3moe"):
        raise ValueError(f"{path}: architecture {arch} not supported by the reference")
    m = Model()
    m.gguf = g
    m.arch = "qwen3_moe" if arch == "qwen3moe" else arch
    m.rope = "interleaved" if arch == "llama" else "neox"
    m.dim = int(md[f"{arch}.embedding_length"])
    m.n_layers = int(md[f"{arch}.block_count"])
    m.n_head = int(md[f"{arch}.attention.head_count"])
    m.n_head_kv = int(md.get(f"{arch}.attention.head_count_kv", m.n_head))
    m.head_dim = int(md.get(f"{arch}.attention.key_length", m.dim // m.n_head))
    m.n_ff = int(md.get(f"{arch}.feed_forward_length", 0))
    m.eps = float(md.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5))
    m.theta = float(md.get(f"{arch}.rope.freq_base", 10000.0))
    m.ctx = int(md.get(f"{arch}.context_length", 0))
    m.bos = md.get("tokenizer.ggml.bos_token_id")
    m.eos = md.get("tokenizer.ggml.eos_token_id")
    m.tok_embd = g.tensor("token_embd.weight")
    m.n_vocab = m.tok_embd.shape[0]
    m.output = g.tensor("output.weight") if "output.weight" in g.tensors else m.tok_embd
    m.out_norm = g.tensor("output_norm.weight")
    opt = lambda n: g.tensor(n) if n in g.tensors else None
    for il in range(m.n_layers):
        p = f"blk.{il}."
        m.layers.append(dict(
            attn_norm=g.tensor(p + "attn_norm.weight"),
            wq=g.tensor(p + "attn_q.weight"), bq=opt(p + "attn_q.bias"),
            wk=g.tensor(p + "attn_k.weight"), bk=opt(p + "attn_k.bias"),
            wv=g.tensor(p + "attn_v.weight"), bv=opt(p + "attn_v.bias"),
            wo=g.tensor(p + "attn_output.weight"),
            q_norm=opt(p + "attn_q_norm.weight"), k_norm=opt(p + "attn_k_norm.weight"),
            ffn_norm=g.tensor(p + "ffn_norm.weight"),
            gate=opt(p + "ffn_gate.weight"), up=opt(p + "ffn_up.weight"),
            down=opt(p + "ffn_down.weight")))
    moe.load_gguf(m, g, arch)
    return _finish(m, compute_dtype)


def _load_gguf_hybrid(g, arch, compute_dtype):
    md = g.metadata
    m = Model()
    m.gguf = g
    m.arch = hybrid.GGUF_ARCHS[arch]
    m.dim = int(md[f"{arch}.embedding_length"])
    m.n_layers = int(md[f"{arch}.block_count"])
    # llama.cpp counts MTP (nextn) blocks in block_count, after the model's own layers (mtp.py).
    nextn = int(md.get(f"{arch}.nextn_predict_layers", 0))
    if nextn and f"blk.{m.n_layers - nextn}.nextn.eh_proj.weight" in g.tensors:
        m.n_layers -= nextn
    m.n_head = int(md[f"{arch}.attention.head_count"])
    m.n_head_kv = int(md.get(f"{arch}.attention.head_count_kv", m.n_head))
    m.head_dim = int(md[f"{arch}.attention.key_length"])
    m.n_ff = int(md[f"{arch}.feed_forward_length"])
    m.eps = float(md.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6))
    m.theta = float(md.get(f"{arch}.rope.freq_base", 10000.0))
    m.ctx = int(md.get(f"{arch}.context_length", 0))
    m.bos = md.get("tokenizer.ggml.bos_token_id")
    m.eos = md.get("tokenizer.ggml.eos_token_id")
    m.tok_embd = g.tensor("token_embd.weight")
    m.n_vocab = m.tok_embd.shape[0]
    m.output = g.tensor("output.weight") if "output.weight" in g.tensors else m.tok_embd
    m.out_norm = g.tensor("output_norm.weight")
    hybrid.load_gguf_hybrid(m, g, arch)
    return _finish(m, compute_dtype)


def load_hf(path, compute_dtype=None):
    st = readers.SafetensorsDir(path)
    c = st.config
    m = Model()
    mt = c.get("model_type", "llama")
    mt = hybrid.HF_MODEL_TYPES.get(mt, mt)
    if mt in hybrid.HYBRID_ARCHS:
        c = c.get("text_config", c)
    m.arch = mt if mt in ("llama", "qwen2", "qwen3") + hybrid.HYBRID_ARCHS else "llama"
    m.rope = "neox"
    m.dim = int(c["hidden_size"])
    m.n_layers = int(c["num_hidden_layers"])
    m.n_head = int(c["num_attention_heads"])
    m.n_head_kv = int(c.get("num_key_value_heads") or m.n_head)
    m.head_dim = int(c.get("head_dim") or m.dim // m.n_head)
    m.n_ff = int(c.get("intermediate_size", 0))
    m.eps = float(c.get("rms_norm_eps", 1e-6))
    m.theta = float(c.get("rope_theta", 10000.0))
    m.ctx = int(c.get("max_position_embeddings", 0))
    m.bos = c.get("bos_token_id")
    m.eos = c.get("eos_token_id")
    gen = os.path.join(path, "generation_config.json")
    if os.path.exists(gen):
        with open(gen) as f:
            g = json.load(f)
        m.bos = g.get("bos_token_id", m.bos)
        m.eos = g.get("eos_token_id", m.eos)
    m.tok_embd = st.tensor("model.embed_tokens.weight")
    m.n_vocab = m.tok_embd.shape[0]
    if st.has("lm_head.weight") and not c.get("tie_word_embeddings", False):
        m.output = st.tensor("lm_head.weight")
    else:
        m.output = m.tok_embd
    m.out_norm = st.tensor("model.norm.weight")
    if mt in hybrid.HYBRID_ARCHS:
        m.arch = mt
        hybrid.load_hf_hybrid(m, st, c)
        return _finish(m, compute_dtype)
    opt = lambda n: st.tensor(n) if st.has(n) else None
    for il in range(m.n_layers):
        p = f"model.layers.{il}."
        a = p + "self_attn."
        m.layers.append(dict(
            attn_norm=st.tensor(p + "input_layernorm.weight"),
            wq=st.tensor(a + "q_proj.weight"), bq=opt(a + "q_proj.bias"),
            wk=st.tensor(a + "k_proj.weight"), bk=opt(a + "k_proj.bias"),
            wv=st.tensor(a + "v_proj.weight"), bv=opt(a + "v_proj.bias"),
            wo=st.tensor(a + "o_proj.weight"),
            q_norm=opt(a + "q_norm.weight"), k_norm=opt(a + "k_norm.weight"),
            ffn_norm=st.tensor(p + "post_attention_layernorm.weight"),
            gate=opt(p + "mlp.gate_proj.weight"), up=opt(p + "mlp.up_proj.weight"),
            down=opt(p + "mlp.down_proj.weight")))
    if mt == "qwen3_moe":
        m.arch = mt
    moe.load_hf(m, st, c)
    return _finish(m, compute_dtype)


def load(path, compute_dtype=None):
    """A Model, or a qwen4_exp.Model for Flash-Next checkpoints (forward/greedy dispatch on it)."""
    if os.path.isdir(path):
        with open(os.path.join(path, "config.json")) as f:
            if json.load(f).get("model_type") in qwen4_exp_load.HF_MODEL_TYPES:
                return qwen4_exp_load.load_hf(path)
        return load_hf(path, compute_dtype)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"GGUF":
        if readers.GGUFFile(path).metadata.get("general.architecture") == "qwen4exp":
            return qwen4_exp_load.load_gguf(path)
        return load_gguf(path, compute_dtype)
    return load_llama2c(path)


# ---------------------------------------------------------------------------------------------
# forward


def rms_norm(x, w, eps):
    """x [..., n], w [n]: x / sqrt(mean(x^2) + eps) * w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def apply_rope(x, pos, theta, style):
    """x [T, H, d], pos [T] -> rotated copy."""
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)        # [d/2]
    ang = pos.astype(np.float64)[:, None] * inv[None, :]               # [T, d/2]
    cos = np.cos(ang)[:, None, :].astype(x.dtype)
    sin = np.sin(ang)[:, None, :].astype(x.dtype)
    if style == "neox":
        a, b = x[..., :d // 2], x[..., d // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    if style == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    raise ValueError(style)


class KVCache:
    def __init__(self, m):
        self.k = [np.zeros((0, m.n_head_kv, m.head_dim), dtype=m.tok_embd.dtype) for _ in m.layers]
        self.v = [np.zeros((0, m.n_head_kv, m.head_dim), dtype=m.tok_embd.dtype) for _ in m.layers]

    @property
    def n_past(self):
        return self.k[0].shape[0]


def int8_acts(x):
    """Activations as the integer dot products of quantized kernels see them (llama.cpp-style, our
    CPU kernels bit for bit): each run of 32 values rounded to int8 codes (ties to even) with the
    f32 scale max|x| / 127. Used only when Model.int8_acts is set (see forward)."""
    x32 = np.asarray(x, dtype=np.float32)
    blocks = x32.reshape(*x32.shape[:-1], -1, 32)
    d = np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127.0)
    inv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.rint(blocks * inv)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


def _lin(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def new_cache(m):
    if isinstance(m, qwen4_exp.Model):
        return qwen4_exp.State(m.cfg)
    return hybrid.HybridCache(m) if m.hybrid else KVCache(m)


def forward(m, tokens, cache=None):
    """tokens: list of ids appended after what `cache` holds -> logits [len(tokens), n_vocab]."""
    if cache is None:
        cache = new_cache(m)
    if isinstance(m, qwen4_exp.Model):
        if min(tokens) < 0 or max(tokens) >= m.cfg.vocab:
            raise ValueError(f"token id out of range [0, {m.cfg.vocab})")
        return qwen4_exp.forward(m, [int(t) for t in tokens], cache)
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.size == 0:
        return np.zeros((0, m.n_vocab), dtype=np.float32)
    if tokens.min() < 0 or tokens.max() >= m.n_vocab:
        raise ValueError(f"token id out of range [0, {m.n_vocab})")
    if m.hybrid:
        return hybrid.forward(m, tokens, cache, int8_acts if getattr(m, "int8_acts", False) else None)
    T = tokens.size
    p0 = cache.n_past
    pos = np.arange(p0, p0 + T)
    x = m.tok_embd[tokens].copy()                                     # [T, dim]
    # Model.int8_acts: every matmul input rounded as quantized kernels do (the file's matrices must
    # all be quantized: a "pure" GGUF or an MLX file), except the MoE router and shared-expert gate,
    # which Splash runs in f32. Lets a discontinuous model (MoE top-k routing) be compared against
    # quantized-kernel output without near-tie flips.
    qa = int8_acts if getattr(m, "int8_acts", False) else (lambda v: v)
    hd, H, Hkv = m.head_dim, m.n_head, m.n_head_kv
    group = H // Hkv
    # causal mask over [T, p0+T]: query t sees keys 0..p0+t
    mask = np.arange(p0 + T)[None, :] > (p0 + np.arange(T))[:, None]
    for il, L in enumerate(m.layers):
        h = rms_norm(x, L["attn_norm"], m.eps)
        hq = qa(h)
        q = _lin(hq, L["wq"], L["bq"]).reshape(T, H, hd)
        k = _lin(hq, L["wk"], L["bk"]).reshape(T, Hkv, hd)
        v = _lin(hq, L["wv"], L["bv"]).reshape(T, Hkv, hd)
        if L["q_norm"] is not None:
            q = rms_norm(q, L["q_norm"], m.eps)
        if L["k_norm"] is not None:
            k = rms_norm(k, L["k_norm"], m.eps)
        q = apply_rope(q, pos, m.theta, m.rope)
        k = apply_rope(k, pos, m.theta, m.rope)
        cache.k[il] = np.concatenate([cache.k[il], k], axis=0)
        cache.v[il] = np.concatenate([cache.v[il], v], axis=0)
        K = np.repeat(cache.k[il], group, axis=1)                     # [S, H, hd]
        V = np.repeat(cache.v[il], group, axis=1)
        scores = q.transpose(1, 0, 2) @ K.transpose(1, 2, 0) / np.sqrt(hd)  # [H, T, S]
        scores = np.where(mask[None], -np.inf, scores)
        scores = scores - scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        att = (p @ V.transpose(1, 0, 2)).transpose(1, 0, 2).reshape(T, H * hd)  # [T, H*hd]
        x = x + _lin(qa(att), L["wo"])
        h = rms_norm(x, L["ffn_norm"], m.eps)
        if moe.is_sparse(L):
            x = x + moe.ffn(L, h, m, qa)
            continue
        g = _lin(qa(h), L["gate"])
        u = _lin(qa(h), L["up"])
        x = x + _lin(qa(g / (1.0 + np.exp(-g)) * u), L["down"])
    x = rms_norm(x, m.out_norm, m.eps)
    return _lin(qa(x), m.output)


def greedy(m, prompt, n):
    cache = new_cache(m)
    logits = forward(m, prompt, cache)
    out = []
    for _ in range(n):
        t = int(np.argmax(logits[-1]))
        out.append(t)
        logits = forward(m, [t], cache)
    return out


def nll_sum(m, ids, ctx, bos):
    """Sum of -log p over the text ids, scored in independent windows of ctx tokens, each window
    starting with BOS followed by the next ctx-1 text ids (every text id is predicted once).
    Returns (sum of nll, count)."""
    total = 0.0
    count = 0
    step = ctx - 1
    for s in range(0, len(ids), step):
        chunk = list(ids[s:s + step])
        seq = [bos] + chunk
        logits = forward(m, seq[:-1]).astype(np.float64)
        mx = logits.max(axis=-1, keepdims=True)
        lse = (mx[:, 0] + np.log(np.exp(logits - mx).sum(axis=-1)))
        tgt = np.asarray(seq[1:])
        total += float(np.sum(lse - logits[np.arange(len(tgt)), tgt]))
        count += len(tgt)
    return total, count
