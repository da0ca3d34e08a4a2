"""Minimal writers used only by the reference's self-tests: they build one tiny random model as an
HF-layout safetensors directory, as MLX-quantized safetensors, and as GGUF (with llama's q/k row
permutation), so the tests can check that the readers and RoPE conventions agree."""

import json
import os
import struct

import numpy as np

import readers


def tiny_weights(arch, seed=0, dim=64, n_layers=2, n_head=4, n_kv=2, head_dim=16, n_ff=128, vocab=128):
    rng = np.random.default_rng(seed)
    r = lambda *s: (rng.standard_normal(s) * 0.08).astype(np.float32)
    ones = lambda n: (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    w = {"model.embed_tokens.weight": r(vocab, dim), "model.norm.weight": ones(dim),
         "lm_head.weight": r(vocab, dim)}
    for il in range(n_layers):
        p = f"model.layers.{il}."
        a = p + "self_attn."
        w[p + "input_layernorm.weight"] = ones(dim)
        w[p + "post_attention_layernorm.weight"] = ones(dim)
        w[a + "q_proj.weight"] = r(n_head * head_dim, dim)
        w[a + "k_proj.weight"] = r(n_kv * head_dim, dim)
        w[a + "v_proj.weight"] = r(n_kv * head_dim, dim)
        w[a + "o_proj.weight"] = r(dim, n_head * head_dim)
        if arch == "qwen2":
            w[a + "q_proj.bias"] = r(n_head * head_dim)
            w[a + "k_proj.bias"] = r(n_kv * head_dim)
            w[a + "v_proj.bias"] = r(n_kv * head_dim)
        if arch == "qwen3":
            w[a + "q_norm.weight"] = ones(head_dim)
            w[a + "k_norm.weight"] = ones(head_dim)
        w[p + "mlp.gate_proj.weight"] = r(n_ff, dim)
        w[p + "mlp.up_proj.weight"] = r(n_ff, dim)
        w[p + "mlp.down_proj.weight"] = r(dim, n_ff)
    cfg = {"model_type": arch, "hidden_size": dim, "num_hidden_layers": n_layers,
           "num_attention_heads": n_head, "num_key_value_heads": n_kv, "head_dim": head_dim,
           "intermediate_size": n_ff, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "vocab_size": vocab, "max_position_embeddings": 256, "tie_word_embeddings": False}
    return cfg, w


def write_safetensors(path, tensors, dtypes=None):
    """tensors: name -> numpy array (float32 written as F32 unless dtypes[name] says BF16/F16/U32)."""
    dtypes = dtypes or {}
    header = {}
    blobs = []
    off = 0
    for name, a in tensors.items():
        dt = dtypes.get(name) or {np.dtype(np.float32): "F32", np.dtype(np.uint32): "U32",
                                  np.dtype(np.float16): "F16"}[a.dtype]
        if dt == "BF16":
            data = (np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_hf_dir(path, cfg, w, shards=1):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    names = list(w.keys())
    if shards == 1:
        write_safetensors(os.path.join(path, "model.safetensors"), w)
        return
    wmap = {}
    per = (len(names) + shards - 1) // shards
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: w[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(path, fname), part)
        wmap.update({n: fname for n in part})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)


def mlx_quantize(w, bits, group):
    """Affine quantization per group of `group` along the rows: returns (codes uint32, scales, biases,
    dequantized float32)."""
    rows, n = w.shape
    g = w.reshape(rows, n // group, group).astype(np.float64)
    lo = g.min(axis=2)
    hi = g.max(axis=2)
    levels = (1 << bits) - 1
    scale = np.where(hi > lo, (hi - lo) / levels, 1.0).astype(np.float32)
    bias = lo.astype(np.float32)
    q = np.clip(np.round((g - bias[..., None]) / scale[..., None]), 0, levels).astype(np.int64)
    deq = (scale[..., None].astype(np.float64) * q + bias[..., None]).reshape(rows, n)
    return readers.mlx_pack(q.reshape(rows, n), bits), scale, bias, deq.astype(np.float32)


def write_mlx_dir(path, cfg, w, bits, group):
    """Quantizes every 2-D weight; returns the dense weights the file represents."""
    out, dense = {}, {}
    for name, a in w.items():
        if a.ndim == 2 and name.endswith(".weight"):
            codes, s, b, deq = mlx_quantize(a, bits, group)
            base = name[:-len(".weight")]
            out[name] = codes
            out[base + ".scales"] = s
            out[base + ".biases"] = b
            dense[name] = deq
        else:
            out[name] = a
            dense[name] = a
    cfg = dict(cfg, quantization={"group_size": group, "bits": bits})
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_safetensors(os.path.join(path, "model.safetensors"), out)
    return dense


# ---------------------------------------------------------------------------------------------
# GGUF


def _gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _gguf_kv(key, value):
    out = _gguf_str(key)
    if isinstance(value, str):
        return out + struct.pack("<I", 8) + _gguf_str(value)
    if isinstance(value, float):
        return out + struct.pack("<If", 6, value)
    if isinstance(value, int):
        return out + struct.pack("<II", 4, value)
    raise TypeError(key)


def permute_llama_qk(w, n_head):
    """HF (rotate-half) row order -> llama.cpp GGUF (interleaved) row order inside each head."""
    rows, cols = w.shape
    d = rows // n_head
    return w.reshape(n_head, 2, d // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def write_gguf_from_hf(path, cfg, w):
    """F32 GGUF with llama.cpp names; q/k rows permuted for llama, untouched for qwen2/qwen3."""
    arch = cfg["model_type"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    kv = {"general.architecture": arch, f"{arch}.block_count": cfg["num_hidden_layers"],
          f"{arch}.embedding_length": cfg["hidden_size"], f"{arch}.attention.head_count": nh,
          f"{arch}.attention.head_count_kv": nkv, f"{arch}.feed_forward_length": cfg["intermediate_size"],
          f"{arch}.rope.freq_base": float(cfg["rope_theta"]),
          f"{arch}.attention.layer_norm_rms_epsilon": float(cfg["rms_norm_eps"]),
          f"{arch}.attention.key_length": cfg["head_dim"],
          f"{arch}.context_length": cfg["max_position_embeddings"]}
    rename = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight"}
    sub = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
           "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
           "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
           "mlp.down_proj": "ffn_down"}
    tensors = []
    for name, a in w.items():
        if name in rename:
            gname = rename[name]
        else:
            parts = name.split(".")
            il = parts[2]
            mod = ".".join(parts[3:-1])
            gname = f"blk.{il}.{sub[mod]}.{parts[-1]}"
        a = np.asarray(a, dtype=np.float32)
        if arch == "llama" and gname.endswith(("attn_q.weight", "attn_q.bias")):
            a = permute_llama_qk(a.reshape(a.shape[0], -1), nh).reshape(a.shape)
        if arch == "llama" and gname.endswith(("attn_k.weight", "attn_k.bias")):
            a = permute_llama_qk(a.reshape(a.shape[0], -1), nkv).reshape(a.shape)
        tensors.append((gname, a))
    align = 32
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, v in kv.items():
        head += _gguf_kv(k, v)
    off = 0
    datas = []
    for gname, a in tensors:
        dims = list(reversed(a.shape))
        head += _gguf_str(gname) + struct.pack("<I", len(dims))
        head += b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", 0, off)
        data = a.tobytes()
        datas.append(data)
        off += (len(data) + align - 1) // align * align
    with open(path, "wb") as f:
        f.write(head)
        f.write(b"\0" * ((align - len(head) % align) % align))
        for d in datas:
            f.write(d)
            f.write(b"\0" * ((align - len(d) % align) % align))
