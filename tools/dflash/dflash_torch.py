"""Torch pieces of the DFlash training tool: a llama2.c checkpoint reader and llama forward
(stories15M, the target), the DFlash block drafter in the published checkpoint layout, and a
minimal safetensors writer/reader. Our own code, written from the formats' descriptions and the
DFlash math (docs/SPECULATIVE.md, "DFlash block drafter").

Shapes follow one notation: [batch, tokens, features]; weights are [out_features, in_features].
"""

import json
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# safetensors (F32 / I32 / I64 only: what the tool writes and the fixtures hold)

_ST_DTYPES = {torch.float32: "F32", torch.int32: "I32", torch.int64: "I64", torch.float64: "F64"}
_ST_NUMPY = {"F32": np.float32, "I32": np.int32, "I64": np.int64, "F64": np.float64}


def save_safetensors(path, tensors, metadata=None):
    """tensors: name -> torch tensor (contiguous copy taken). Names sorted, 8-byte aligned data."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        if t.dtype not in _ST_DTYPES:
            raise ValueError(f"{name}: dtype {t.dtype} not supported by this writer")
        data = t.numpy().tobytes()
        header[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=_ST_NUMPY[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


# ---------------------------------------------------------------------------------------------
# The target: a llama2.c checkpoint (stories15M) and its forward pass


class KVCache:
    """Preallocated K/V of every layer for batched generation: no copy of the past per token."""

    def __init__(self, n_layers, b, n_kv, max_len, hd, dtype=torch.float32):
        self.k = torch.empty(n_layers, b, n_kv, max_len, hd, dtype=dtype)  # [layer, b, n_kv, pos, hd]
        self.v = torch.empty_like(self.k)

    def append(self, il, start, k, v):
        """Writes k, v [b, n_kv, t, hd] at positions [start, start + t); returns views of [0, start + t)."""
        end = start + k.shape[2]
        self.k[il, :, :, start:end] = k
        self.v[il, :, :, start:end] = v
        return self.k[il, :, :, :end], self.v[il, :, :, :end]


class Llama2c:
    """llama2.c `.bin`: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
    seq_len; vocab_size < 0 = separate classifier) then f32 tensors in a fixed order. RoPE pairs
    are interleaved (2i, 2i+1)."""

    def __init__(self, path, dtype=torch.float32):
        raw = np.fromfile(path, dtype=np.uint8)
        dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", raw[:28].tobytes())
        shared = vocab > 0
        vocab = abs(vocab)
        self.dim, self.hidden, self.n_layers = dim, hidden, n_layers
        self.n_heads, self.n_kv, self.vocab, self.seq_len = n_heads, n_kv, vocab, seq_len
        self.head_dim = dim // n_heads
        w = np.frombuffer(raw[28:].tobytes(), dtype=np.float32)
        pos = 0

        def take(*shape):
            nonlocal pos
            n = int(np.prod(shape))
            t = torch.from_numpy(w[pos:pos + n].copy()).reshape(shape).to(dtype)
            pos += n
            return t

        kv_dim = n_kv * self.head_dim
        self.embed = take(vocab, dim)
        self.rms_att = take(n_layers, dim)
        self.wq = take(n_layers, dim, dim)
        self.wk = take(n_layers, kv_dim, dim)
        self.wv = take(n_layers, kv_dim, dim)
        self.wo = take(n_layers, dim, dim)
        self.rms_ffn = take(n_layers, dim)
        self.w1 = take(n_layers, hidden, dim)
        self.w2 = take(n_layers, dim, hidden)
        self.w3 = take(n_layers, hidden, dim)
        self.rms_final = take(dim)
        pos += seq_len * self.head_dim  # freq_cis_real, freq_cis_imag (unused: recomputed)
        self.head = self.embed if shared else take(vocab, dim)
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))
        ang = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv[None, :]
        self.cos = torch.cos(ang).to(dtype)  # [seq_len, head_dim / 2]
        self.sin = torch.sin(ang).to(dtype)

    def _rope(self, x, positions):
        # x: [b, t, h, hd], interleaved pairs
        c = self.cos[positions][None, :, None, :]
        s = self.sin[positions][None, :, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)

    @staticmethod
    def _rms(x, w, eps=1e-5):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def forward(self, tokens, start, cache, taps=(), logits=True, last_layer=None):
        """tokens: [b, t] int64 at positions [start, start + t). cache: a KVCache, or a list per
        layer of (k, v) [b, n_kv, past, hd] (updated in place; None entries start empty). Returns
        (logits [b, t, V] or None, {il: residual after layer il [b, t, dim]})."""
        b, t = tokens.shape
        positions = torch.arange(start, start + t)
        x = self.embed[tokens]
        hd, nh, nkv = self.head_dim, self.n_heads, self.n_kv
        out = {}
        n_run = self.n_layers if last_layer is None else last_layer + 1
        for il in range(n_run):
            h = self._rms(x, self.rms_att[il])
            q = self._rope((h @ self.wq[il].T).view(b, t, nh, hd), positions).transpose(1, 2)
            k = self._rope((h @ self.wk[il].T).view(b, t, nkv, hd), positions).transpose(1, 2)
            v = (h @ self.wv[il].T).view(b, t, nkv, hd).transpose(1, 2)
            if isinstance(cache, KVCache):
                k, v = cache.append(il, start, k, v)
            elif cache is not None:
                if cache[il] is not None:
                    k = torch.cat([cache[il][0], k], dim=2)
                    v = torch.cat([cache[il][1], v], dim=2)
                cache[il] = (k, v)
            if nkv != nh:
                k = k.repeat_interleave(nh // nkv, dim=1)
                v = v.repeat_interleave(nh // nkv, dim=1)
            n_k = k.shape[2]
            qpos = positions[:, None]
            kpos = torch.arange(n_k)[None, :]
            mask = torch.zeros(t, n_k, dtype=x.dtype).masked_fill(kpos > qpos, float("-inf"))
            att = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(hd) + mask, dim=-1) @ v
            x = x + att.transpose(1, 2).reshape(b, t, nh * hd) @ self.wo[il].T
            h = self._rms(x, self.rms_ffn[il])
            x = x + (F.silu(h @ self.w1[il].T) * (h @ self.w3[il].T)) @ self.w2[il].T
            if il in taps:
                out[il] = x
        if not logits:
            return None, out
        return self._rms(x, self.rms_final) @ self.head.T, out


class Llama2cTokenizer:
    """llama2.c `tokenizer.bin`: int32 max token length, then per id: f32 merge score, int32 byte
    length, bytes. Encoding is llama2.c's: BOS, a dummy-prefix space, one id per UTF-8 character
    (bytes + 3 when the character has none), then merge the best-scoring adjacent pair until none
    merges. Used to turn the held-out evaluation prompts into ids as `splash` does."""

    def __init__(self, path, vocab):
        self.pieces, self.scores = [], []
        with open(path, "rb") as f:
            struct.unpack("<i", f.read(4))
            for _ in range(vocab):
                score, n = struct.unpack("<fi", f.read(8))
                self.scores.append(score)
                self.pieces.append(f.read(n))
        self.ids = {p: i for i, p in enumerate(self.pieces)}

    def encode(self, text, bos=True):
        out = [1] if bos else []
        if not text:
            return out
        toks = [self.ids[b" "]]
        for ch in text:
            b = ch.encode()
            toks += [self.ids[b]] if b in self.ids else [x + 3 for x in b]
        while True:
            best, at = None, -1
            for i in range(len(toks) - 1):
                j = self.ids.get(self.pieces[toks[i]] + self.pieces[toks[i + 1]])
                if j is not None and (best is None or self.scores[j] > self.scores[best]):
                    best, at = j, i
            if best is None:
                return out + toks
            toks[at:at + 2] = [best]

    def decode(self, ids):
        return b"".join(self.pieces[i] for i in ids).decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# The DFlash block drafter (published layout: fc, hidden_norm, norm, layers.N.{self_attn,mlp,...})


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_neox(x, positions, theta):
    """x: [b, t, h, hd], rotate-half pairs (i, i + hd/2); positions: [t] int64."""
    hd = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    c = torch.cos(ang).to(x.dtype)[None, :, None, :]
    s = torch.sin(ang).to(x.dtype)[None, :, None, :]
    x0, x1 = x[..., : hd // 2], x[..., hd // 2:]
    return torch.cat([x0 * c - x1 * s, x1 * c + x0 * s], dim=-1)


def make_config(*, hidden_size, n_layers, n_heads, n_kv_heads, head_dim, intermediate_size, vocab_size,
                block_size, mask_token_id, target_layer_ids, num_target_layers, rms_norm_eps=1e-5,
                rope_theta=10000.0, max_position_embeddings=2048, sliding_window=None):
    cfg = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "attention_bias": False,
        "hidden_act": "silu",
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": n_layers,
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_kv_heads,
        "head_dim": head_dim,
        "rms_norm_eps": rms_norm_eps,
        "rope_theta": rope_theta,
        "max_position_embeddings": max_position_embeddings,
        "vocab_size": vocab_size,
        "tie_word_embeddings": False,
        "block_size": block_size,
        "num_target_layers": num_target_layers,
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": list(target_layer_ids)},
        "torch_dtype": "float32",
    }
    if sliding_window is not None:
        cfg["sliding_window"] = sliding_window
        cfg["use_sliding_window"] = True
        cfg["layer_types"] = ["sliding_attention"] * n_layers
        cfg["is_causal"] = False
    return cfg


class DFlashDrafter(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, hd = cfg["hidden_size"], cfg["head_dim"]
        nh, nkv, ff = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
        n_taps = len(cfg["dflash_config"]["target_layer_ids"])
        P = torch.nn.Parameter
        self.params = torch.nn.ParameterDict()
        self.params[self._key("fc.weight")] = P(torch.randn(d, n_taps * d) / math.sqrt(n_taps * d))
        self.params[self._key("hidden_norm.weight")] = P(torch.ones(d))
        self.params[self._key("norm.weight")] = P(torch.ones(d))
        for il in range(cfg["num_hidden_layers"]):
            pre = f"layers.{il}."
            shapes = {
                "self_attn.q_proj.weight": (nh * hd, d), "self_attn.k_proj.weight": (nkv * hd, d),
                "self_attn.v_proj.weight": (nkv * hd, d), "self_attn.o_proj.weight": (d, nh * hd),
                "mlp.gate_proj.weight": (ff, d), "mlp.up_proj.weight": (ff, d), "mlp.down_proj.weight": (d, ff),
            }
            for name, shape in shapes.items():
                self.params[self._key(pre + name)] = P(torch.randn(*shape) / math.sqrt(shape[1]))
            for name, n in (("self_attn.q_norm.weight", hd), ("self_attn.k_norm.weight", hd),
                            ("input_layernorm.weight", d), ("post_attention_layernorm.weight", d)):
                self.params[self._key(pre + name)] = P(torch.ones(n))

    @staticmethod
    def _key(name):  # ParameterDict keys may not contain '.'
        return name.replace(".", "__")

    def p(self, name):
        return self.params[self._key(name)]

    def state(self):
        return {k.replace("__", "."): v.detach().clone() for k, v in self.params.items()}

    def load_state(self, tensors):
        for k, v in tensors.items():
            self.params[self._key(k)].data.copy_(v)

    def forward(self, feats, ctx_pos, block_emb, block_pos, visible):
        """feats: [b, n_ctx, n_taps * d] target hidden states of the context rows at ctx_pos [n_ctx];
        block_emb: [b, n_q, d] embedded block rows at block_pos [n_q]; visible: [n_q, n_ctx + n_q]
        bool (which keys each block row sees). Returns the final-normed block rows [b, n_q, d]."""
        cfg = self.cfg
        eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
        hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        b, n_ctx = feats.shape[:2]
        n_q = block_emb.shape[1]
        ctx = rms_norm(feats @ self.p("fc.weight").T, self.p("hidden_norm.weight"), eps)
        bias = torch.zeros(visible.shape, dtype=block_emb.dtype).masked_fill(~visible, float("-inf"))
        x = block_emb
        for il in range(cfg["num_hidden_layers"]):
            pre = f"layers.{il}."
            h = rms_norm(x, self.p(pre + "input_layernorm.weight"), eps)
            q = rms_norm((h @ self.p(pre + "self_attn.q_proj.weight").T).view(b, n_q, nh, hd),
                         self.p(pre + "self_attn.q_norm.weight"), eps)
            kw, vw = self.p(pre + "self_attn.k_proj.weight"), self.p(pre + "self_attn.v_proj.weight")
            kn = self.p(pre + "self_attn.k_norm.weight")
            k_ctx = rope_neox(rms_norm((ctx @ kw.T).view(b, n_ctx, nkv, hd), kn, eps), ctx_pos, theta)
            k_blk = rope_neox(rms_norm((h @ kw.T).view(b, n_q, nkv, hd), kn, eps), block_pos, theta)
            q = rope_neox(q, block_pos, theta)
            k = torch.cat([k_ctx, k_blk], dim=1).transpose(1, 2)
            v = torch.cat([(ctx @ vw.T).view(b, n_ctx, nkv, hd), (h @ vw.T).view(b, n_q, nkv, hd)],
                          dim=1).transpose(1, 2)
            if nkv != nh:
                k = k.repeat_interleave(nh // nkv, dim=1)
                v = v.repeat_interleave(nh // nkv, dim=1)
            q = q.transpose(1, 2)
            att = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(hd) + bias, dim=-1) @ v
            x = x + att.transpose(1, 2).reshape(b, n_q, nh * hd) @ self.p(pre + "self_attn.o_proj.weight").T
            h = rms_norm(x, self.p(pre + "post_attention_layernorm.weight"), eps)
            g = h @ self.p(pre + "mlp.gate_proj.weight").T
            u = h @ self.p(pre + "mlp.up_proj.weight").T
            x = x + (F.silu(g) * u) @ self.p(pre + "mlp.down_proj.weight").T
        return rms_norm(x, self.p("norm.weight"), eps)


def draft_step_logits(model, feats, start, anchor, embed, head):
    """One drafting round exactly as the inference engine runs it, recomputed from scratch:
    context = all rows [0, start) (feats [start, n_taps * d], one row per position), block =
    [anchor, mask x (B-1)] at positions [start, start + B). Returns logits [B-1, V] of the
    proposals. Keys older than the sliding window (when the config has one) are invisible."""
    cfg = model.cfg
    B = cfg["block_size"]
    mask_id = cfg["dflash_config"]["mask_token_id"]
    tokens = torch.tensor([anchor] + [mask_id] * (B - 1))
    ctx_pos = torch.arange(start)
    block_pos = torch.arange(start, start + B)
    key_pos = torch.cat([ctx_pos, block_pos])
    visible = torch.ones(B, start + B, dtype=torch.bool)
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
    if window:
        visible &= (block_pos[:, None] - key_pos[None, :]) < window
    hidden = model(feats[None], ctx_pos, embed[tokens][None], block_pos, visible)
    return (hidden[0, 1:] @ head.T)
