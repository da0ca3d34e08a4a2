#!/usr/bin/python3
"""Tiny qwen4_exp (Flash-Next) checkpoints laid out as the owning tools write them, from one set of raw
random weights, with this reference's logits, greedy tokens and MTP drafts. Written from the tools'
published code (transformers' Qwen4ExpForConditionalGeneration save layout, the FP8 table exports
SGLang / vLLM / oMLX load, llama.cpp's conversion/qwen4exp.py), not from Splash's writer.

OUT/ gets:
  hf/       transformers layout, BF16: config.json with text_config + a minimal vision_config (and one
            model.visual.* tensor) that loaders must ignore; model.language_model.* text model,
            lm_head.weight, mtp.*; 1-centred gains stored as w; conv1d [C, 1, K]; experts stacked as
            gate_up_proj [E, 2f, H] (gate rows first) + down_proj [E, H, f]; the PLE table as
            ngram_embedding.shard_{0..parts-1}.weight plus the I64 buffers layer_multipliers,
            ngram_heads_offsets, ngram_heads_vocab_sizes; several safetensors files + index.
  hf_fp8/   the same with the table shards in F8_E4M3 and one shared BF16 [1]
            ngram_embedding.weight_scale (amax / 448), text_config.ple_embedding_dtype set.
  gguf/model.gguf  llama.cpp's qwen4exp layout, F32 (see qwen4_exp_load.py for the name map).
  tokens.txt, ref_logits.npy [T, V] f32 (reference on hf/), ref_greedy.txt, ref_logits_fp8.npy,
  ref_greedy_fp8.txt, ref_mtp.txt (MTP proposals after the prompt), ref_mtp_logits.npy, indexer.json
  (how many queries saw a sparse selection / lost their own block; top-k cuts on a tie must be 0).
Raw weights are BF16 values (norm gains multiples of 1/64), so every layout holds them exactly.

Usage: qwen4_exp_fixtures.py OUT_DIR [--check]   (--check: the reference on gguf/ equals hf/)
"""

import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import qwen4_exp as q4  # noqa: E402
import qwen4_exp_load as q4load  # noqa: E402
import readers  # noqa: E402
import testfiles  # noqa: E402
from hybrid_fixtures import bf16_round  # noqa: E402

EOS = 250
PROMPT = [3, 17, 101, 42, EOS, 5, 99, EOS, EOS, 7, 123, 64, 11, 200, EOS, 31, 8, 77, 140, 2, 66, 91, 180, 13]
N_GREEDY, N_DRAFT = 6, 3
SEED = 5


def text_config():
    return {"model_type": "qwen4_exp_text", "vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 8,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "hidden_act": "silu",
            "rms_norm_eps": 1e-6, "max_position_embeddings": 4096, "tie_word_embeddings": False,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                                "mrope_section": [2, 1, 1], "mrope_interleaved": True},
            "layer_types": ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(8)],
            "full_attention_interval": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 16,
            "linear_num_value_heads": 4, "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
            "output_gate_type": "sigmoid", "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": True,
            "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "hc_count": 4, "hc_lowrank": 8,
            "indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
            "indexer_compress_ratio": 4, "ple_layer_ids": [2], "ple_embed_dim": 64, "ple_conv_kernel_size": 4,
            "ngram_size": 3, "heads_per_ngram": 8, "ngram_vocab_size_base": 37,
            "make_ngram_vocab_size_divisible_by": 128, "split_ngram_parts": 8, "eos_token_id": EOS,
            "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False}


def full_config():
    return {"architectures": ["Qwen4ExpForConditionalGeneration"], "model_type": "qwen4_exp",
            "text_config": text_config(), "tie_word_embeddings": False, "image_token_id": 253,
            "vision_config": {"model_type": "qwen4_exp_vision", "depth": 1, "hidden_size": 16, "num_heads": 2,
                              "intermediate_size": 32, "patch_size": 16, "spatial_merge_size": 2,
                              "temporal_patch_size": 2, "out_hidden_size": 64}}


class Raw:
    """Random raw weights under transformers' text-model names (model.*, lm_head.*, mtp.*)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.w = {}

    def mat(self, name, *shape, scale=None):
        s = scale if scale is not None else 1.0 / np.sqrt(shape[-1])
        self.w[name] = bf16_round((s * self.rng.standard_normal(shape)).astype(np.float32))

    def gain(self, name, n):
        self.w[name] = (self.rng.integers(-12, 13, n) / 64.0).astype(np.float32)

    def hc(self, p, c, inject=True):
        hd = c["hc_count"] * c["hidden_size"]
        self.gain(p + "hc_norm.weight", hd)
        self.mat(p + "input_mix_weight_down.weight", c["hc_lowrank"], hd)
        self.mat(p + "input_mix_weight_up.weight", hd, c["hc_lowrank"])
        if inject:
            self.mat(p + "block_inject_weight.weight", c["hc_count"], hd)

    def layer(self, p, c, kind):
        H = c["hidden_size"]
        self.hc(p + "attn_hyper_connection.", c)
        self.hc(p + "mlp_hyper_connection.", c)
        if kind == "gdn":
            a = p + "linear_attn."
            kd = c["linear_num_key_heads"] * c["linear_key_head_dim"]
            nv, vd = c["linear_num_value_heads"], c["linear_num_value_heads"] * c["linear_value_head_dim"]
            self.mat(a + "in_proj_qkv.weight", 2 * kd + vd, H)
            self.mat(a + "in_proj_z.weight", vd, H)
            self.mat(a + "in_proj_b.weight", nv, H)
            self.mat(a + "in_proj_a.weight", nv, H)
            self.mat(a + "conv1d.weight", 2 * kd + vd, 1, c["linear_conv_kernel_dim"], scale=0.3)
            self.w[a + "A_log"] = bf16_round((0.5 * self.rng.standard_normal(nv)).astype(np.float32))
            self.w[a + "dt_bias"] = bf16_round((1.0 + 0.5 * self.rng.standard_normal(nv)).astype(np.float32))
            self.w[a + "norm.weight"] = bf16_round((1.0 + 0.1 * self.rng.standard_normal(c["linear_value_head_dim"]))
                                                   .astype(np.float32))     # plain gain, not 1-centred
            self.mat(a + "out_proj.weight", H, vd)
        else:
            a = p + "self_attn."
            hd, nh, nkv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
            self.mat(a + "q_proj.weight", 2 * nh * hd, H)         # per head: hd q rows, then hd gate rows
            self.mat(a + "k_proj.weight", nkv * hd, H)
            self.mat(a + "v_proj.weight", nkv * hd, H)
            self.mat(a + "o_proj.weight", H, nh * hd)
            self.gain(a + "q_norm.weight", hd)
            self.gain(a + "k_norm.weight", hd)
            self.mat(a + "indexer.index_qk_proj.weight", (c["indexer_n_heads"] + 1) * c["indexer_head_dim"], H)
            self.gain(a + "indexer.q_layernorm.weight", c["indexer_head_dim"])
            self.gain(a + "indexer.k_layernorm.weight", c["indexer_head_dim"])
        m, E, f, fs = p + "mlp.", c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
        self.mat(m + "gate.weight", E, H)
        self.mat(m + "experts.gate_up_proj", E, 2 * f, H)
        self.mat(m + "experts.down_proj", E, H, f)
        self.mat(m + "shared_expert.gate_proj.weight", fs, H)
        self.mat(m + "shared_expert.up_proj.weight", fs, H)
        self.mat(m + "shared_expert.down_proj.weight", H, fs)
        self.mat(m + "shared_expert_gate.weight", 1, H)


def make_raw(seed=SEED):
    c = text_config()
    cfg = q4.Config(c)
    r = Raw(seed)
    H, hd = c["hidden_size"], c["hc_count"] * c["hidden_size"]
    r.mat("model.embed_tokens.weight", c["vocab_size"], H, scale=1.0)
    for il in range(cfg.n_layers):
        p = f"model.layers.{il}."
        r.layer(p, c, cfg.kinds[il])
        if il == cfg.ple_layer:
            a = p + "ple."
            r.mat(a + "key_proj.weight", hd, cfg.ple_dim)
            r.mat(a + "value_proj.weight", H, cfg.ple_dim)
            for n in ("norm_key", "norm_query", "norm_conv"):
                r.gain(a + n + ".weight", hd)
            r.mat(a + "conv1d.weight", hd, 1, cfg.ple_conv_k, scale=0.3)   # transformers inits zeros
            r.mat(a + q4load.PLE_PREFIX + "table", cfg.ple_rows, cfg.ple_head_dim, scale=1.0)
    r.hc("model.hyper_connection_mixer.", c, inject=False)
    r.mat("lm_head.weight", c["vocab_size"], H)
    r.mat("mtp.fc_embedding.weight", H, H)
    r.mat("mtp.fc_hidden.weight", H, H)
    r.gain("mtp.pre_fc_norm_embedding.weight", H)
    r.gain("mtp.pre_fc_norm_hidden.weight", hd)
    r.hc("mtp.hyper_connection_mixer.", c, inject=False)
    r.layer("mtp.layers.0.", c, "qsa")
    return r, cfg


# ---------------------------------------------------------------------------------------------
# transformers / FP8 directories


def fp8_encode(a):
    """Nearest E4M3 code of every value (ties to the even code); a must lie within +-448."""
    vals = readers.fp8_e4m3_values()
    codes = np.array([c for c in range(256) if np.isfinite(vals[c])])
    order = np.argsort(vals[codes], kind="stable")
    sv, sc = vals[codes][order], codes[order]
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    i = np.clip(np.searchsorted(sv, x), 1, len(sv) - 1)
    lo, hi = sv[i - 1], sv[i]
    pick_hi = (hi - x < x - lo) | ((hi - x == x - lo) & (sc[i] % 2 == 0))
    return np.where(pick_hi, sc[i], sc[i - 1]).astype(np.uint8).reshape(np.shape(a))


def hf_tensors(r, cfg, fp8):
    """name -> (array, safetensors dtype) as transformers saves the model (and an FP8 export)."""
    out = {}
    for n, a in r.w.items():
        name = "model.language_model." + n[len("model."):] if n.startswith("model.") else n
        if not n.endswith(q4load.PLE_PREFIX + "table"):
            out[name] = (a, "BF16")
            continue
        base = name[:-len("table")]
        parts = cfg.split_parts
        per = a.shape[0] // parts
        if per * parts != a.shape[0]:
            raise ValueError("the tiny table must split evenly (SGLang and oMLX split uneven tables differently)")
        scale = float(bf16_round(np.array([np.abs(a).max() / 448.0], dtype=np.float32))[0]) if fp8 else None
        for s in range(parts):
            rows = a[s * per:(s + 1) * per]
            shard = (fp8_encode(rows / scale), "F8_E4M3") if fp8 else (rows, "BF16")
            out[f"{base}ngram_embedding.shard_{s}.weight"] = shard
        if fp8:
            out[base + "ngram_embedding.weight_scale"] = (np.array([scale], dtype=np.float32), "BF16")
        out[base + "layer_multipliers"] = (np.array(cfg.multipliers, dtype=np.int64), "I64")
        out[base + "ngram_heads_offsets"] = (np.array(cfg.head_offsets, dtype=np.int64), "I64")
        out[base + "ngram_heads_vocab_sizes"] = (np.array(cfg.head_sizes, dtype=np.int64), "I64")
    out["model.visual.patch_embed.proj.weight"] = (np.zeros((16, 3 * 2 * 16 * 16), dtype=np.float32), "BF16")
    return out


def write_hf(path, tensors, config, n_files=3):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    names = list(tensors)
    per = -(-len(names) // n_files)
    wmap = {}
    for i in range(n_files):
        fname = f"model-{i + 1:05d}-of-{n_files:05d}.safetensors"
        part = names[i * per:(i + 1) * per]
        testfiles.write_safetensors(os.path.join(path, fname), {n: tensors[n][0] for n in part},
                                    {n: tensors[n][1] for n in part})
        wmap.update({n: fname for n in part})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f, indent=1)


# ---------------------------------------------------------------------------------------------
# llama.cpp GGUF


def tile(a, axis, nk, r, hd):
    """Hugging Face's grouped value-head order -> llama.cpp's tiled order (its Qwen3.5 reorder)."""
    a = np.moveaxis(a, axis, 0)
    rest = a.shape[1:]
    a = a.reshape(nk, r, hd, *rest).swapaxes(0, 1).reshape(nk * r * hd, *rest)
    return np.ascontiguousarray(np.moveaxis(a, 0, axis))


def _gguf_layer(out, w, p, b, cfg, kind):
    for s, hf in (("attn", "attn_hyper_connection."), ("ffn", "mlp_hyper_connection.")):
        out[b + f"hc_{s}_norm.weight"] = w[p + hf + "hc_norm.weight"] + 1
        out[b + f"hc_{s}_down.weight"] = w[p + hf + "input_mix_weight_down.weight"]
        out[b + f"hc_{s}_up.weight"] = w[p + hf + "input_mix_weight_up.weight"]
        out[b + f"hc_{s}_inject.weight"] = w[p + hf + "block_inject_weight.weight"]
    if kind == "gdn":
        a = p + "linear_attn."
        nk, dk, nv, dv = cfg.lin_nk, cfg.lin_dk, cfg.lin_nv, cfg.lin_dv
        r, kd = nv // nk, nk * dk
        qkv, conv = w[a + "in_proj_qkv.weight"], w[a + "conv1d.weight"].reshape(-1, cfg.conv_k)
        out[b + "attn_qkv.weight"] = np.concatenate([qkv[:2 * kd], tile(qkv[2 * kd:], 0, nk, r, dv)])
        out[b + "attn_gate.weight"] = tile(w[a + "in_proj_z.weight"], 0, nk, r, dv)
        out[b + "ssm_conv1d.weight"] = np.concatenate([conv[:2 * kd], tile(conv[2 * kd:], 0, nk, r, dv)])
        out[b + "ssm_beta.weight"] = tile(w[a + "in_proj_b.weight"], 0, nk, r, 1)
        out[b + "ssm_alpha.weight"] = tile(w[a + "in_proj_a.weight"], 0, nk, r, 1)
        out[b + "ssm_a"] = tile(-np.exp(w[a + "A_log"].astype(np.float64)), 0, nk, r, 1)
        out[b + "ssm_dt.bias"] = tile(w[a + "dt_bias"], 0, nk, r, 1)
        out[b + "ssm_norm.weight"] = w[a + "norm.weight"]
        out[b + "ssm_out.weight"] = tile(w[a + "out_proj.weight"], 1, nk, r, dv)
    else:
        a = p + "self_attn."
        for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
            out[b + gg + ".weight"] = w[a + hf + ".weight"]
        out[b + "attn_q_norm.weight"] = w[a + "q_norm.weight"] + 1
        out[b + "attn_k_norm.weight"] = w[a + "k_norm.weight"] + 1
        qk = w[a + "indexer.index_qk_proj.weight"]
        nq = cfg.idx_heads * cfg.idx_dim
        out[b + "indexer.q_proj.weight"], out[b + "indexer.k_proj.weight"] = qk[:nq], qk[nq:]
        out[b + "indexer.q_norm.weight"] = w[a + "indexer.q_layernorm.weight"] + 1
        out[b + "indexer.k_norm.weight"] = w[a + "indexer.k_layernorm.weight"] + 1
    m = p + "mlp."
    gu = w[m + "experts.gate_up_proj"]
    f = gu.shape[1] // 2
    out[b + "ffn_gate_inp.weight"] = w[m + "gate.weight"]
    out[b + "ffn_gate_exps.weight"], out[b + "ffn_up_exps.weight"] = gu[:, :f], gu[:, f:]
    out[b + "ffn_down_exps.weight"] = w[m + "experts.down_proj"]
    for proj in ("gate", "up", "down"):
        out[b + f"ffn_{proj}_shexp.weight"] = w[m + f"shared_expert.{proj}_proj.weight"]
    out[b + "ffn_gate_inp_shexp.weight"] = w[m + "shared_expert_gate.weight"].reshape(-1)


def gguf_tensors(r, cfg):
    w, out = r.w, {}
    out["token_embd.weight"] = w["model.embed_tokens.weight"]
    out["output.weight"] = w["lm_head.weight"]
    for s in ("norm", "down", "up"):
        src = "hc_norm.weight" if s == "norm" else f"input_mix_weight_{s}.weight"
        out[f"output_hc_{s}.weight"] = w["model.hyper_connection_mixer." + src] + (1 if s == "norm" else 0)
    for il in range(cfg.n_layers):
        p, b = f"model.layers.{il}.", f"blk.{il}."
        _gguf_layer(out, w, p, b, cfg, cfg.kinds[il])
        if il == cfg.ple_layer:
            a = p + "ple."
            out[b + "ple_key.weight"] = w[a + "key_proj.weight"]
            out[b + "ple_value.weight"] = w[a + "value_proj.weight"]
            for n in ("norm_key", "norm_query", "norm_conv"):
                out[b + f"ple_{n}.weight"] = w[a + n + ".weight"] + 1
            out[b + "ple_conv1d.weight"] = w[a + "conv1d.weight"].reshape(-1, cfg.ple_conv_k)
            out["per_layer_token_embd.weight"] = w[a + q4load.PLE_PREFIX + "table"]
    b = f"blk.{cfg.n_layers}."
    _gguf_layer(out, w, "mtp.layers.0.", b, cfg, "qsa")
    out[b + "nextn.eh_proj.weight"] = np.concatenate([w["mtp.fc_embedding.weight"], w["mtp.fc_hidden.weight"]], axis=1)
    out[b + "nextn.enorm.weight"] = w["mtp.pre_fc_norm_embedding.weight"] + 1
    out[b + "nextn.hnorm.weight"] = w["mtp.pre_fc_norm_hidden.weight"] + 1
    out[b + "nextn.hc_head_norm.weight"] = w["mtp.hyper_connection_mixer.hc_norm.weight"] + 1
    out[b + "nextn.hc_head_down.weight"] = w["mtp.hyper_connection_mixer.input_mix_weight_down.weight"]
    out[b + "nextn.hc_head_up.weight"] = w["mtp.hyper_connection_mixer.input_mix_weight_up.weight"]
    return out


class U32(int):
    pass


class U64List(list):
    pass


def gguf_metadata(cfg):
    c, A = text_config(), "qwen4exp."
    kv = {"general.architecture": "qwen4exp", "general.name": "tiny-flash-next"}
    u = lambda k, v: kv.__setitem__(A + k, U32(v))
    for k, v in (("block_count", cfg.n_layers + 1), ("context_length", 4096), ("embedding_length", cfg.hidden),
                 ("attention.head_count", cfg.n_head), ("attention.head_count_kv", cfg.n_kv),
                 ("attention.key_length", cfg.head_dim), ("attention.value_length", cfg.head_dim),
                 ("rope.dimension_count", cfg.n_rot), ("ssm.conv_kernel", cfg.conv_k), ("ssm.state_size", cfg.lin_dk),
                 ("ssm.group_count", cfg.lin_nk), ("ssm.time_step_rank", cfg.lin_nv),
                 ("ssm.inner_size", cfg.lin_nv * cfg.lin_dv), ("full_attention_interval", 4),
                 ("expert_count", cfg.n_exp), ("expert_used_count", cfg.top_k),
                 ("expert_feed_forward_length", c["moe_intermediate_size"]),
                 ("expert_shared_feed_forward_length", c["shared_expert_intermediate_size"]),
                 ("hyper_connection.count", cfg.hc), ("hyper_connection.low_rank", cfg.hc_rank),
                 ("attention.indexer.head_count", cfg.idx_heads), ("attention.indexer.key_length", cfg.idx_dim),
                 ("attention.indexer.top_k", c["indexer_budget"]), ("nextn_predict_layers", 1),
                 ("ple.ngram_size", cfg.ngram_size), ("ple.heads_per_ngram", cfg.heads_per_ngram),
                 ("ple.conv_kernel", cfg.ple_conv_k), ("ple.eos_token_id", cfg.eos),
                 ("embedding_length_per_layer_input", cfg.ple_head_dim)):
        u(k, v)
    kv[A + "attention.layer_norm_rms_epsilon"] = cfg.eps
    kv[A + "rope.freq_base"] = cfg.theta
    kv[A + "expert_weights_norm"] = True
    kv[A + "rope.dimension_sections"] = [2, 1, 1, 0]
    kv[A + "attention.compress_ratios"] = [cfg.idx_ratio if k == "qsa" else 0 for k in cfg.kinds] + [0]
    kv[A + "ple.layers"] = [cfg.ple_layer]
    kv[A + "ple.layer_multipliers"] = U64List(cfg.multipliers)
    kv[A + "ple.head_offsets"] = U64List(cfg.head_offsets)
    kv[A + "ple.head_vocab_sizes"] = U64List(cfg.head_sizes)
    return kv


def write_gguf(path, kv, tensors):
    """GGUF v3, F32 tensors, 32-byte alignment; ints are uint32 unless U64List, lists uint32."""
    s = lambda x: struct.pack("<Q", len(x.encode())) + x.encode()

    def value(v):
        if isinstance(v, bool):
            return struct.pack("<I?", 7, v)
        if isinstance(v, str):
            return struct.pack("<I", 8) + s(v)
        if isinstance(v, float):
            return struct.pack("<If", 6, v)
        if isinstance(v, int):
            return struct.pack("<II", 4, v)
        if isinstance(v, U64List):
            return struct.pack("<IIQ", 9, 10, len(v)) + b"".join(struct.pack("<Q", x) for x in v)
        return struct.pack("<IIQ", 9, 4, len(v)) + b"".join(struct.pack("<I", x) for x in v)

    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + b"".join(s(k) + value(v) for k, v in kv.items())
    datas, off = [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        head += s(name) + struct.pack("<I", a.ndim) + b"".join(struct.pack("<Q", x) for x in reversed(a.shape))
        head += struct.pack("<IQ", 0, off)
        datas.append(a.tobytes())
        off += (len(datas[-1]) + 31) // 32 * 32
    with open(path, "wb") as f:
        f.write(head + b"\0" * ((32 - len(head) % 32) % 32))
        for b in datas:
            f.write(b + b"\0" * ((32 - len(b) % 32) % 32))


# ---------------------------------------------------------------------------------------------


def write_all(out_dir, seed=SEED):
    r, cfg = make_raw(seed)
    write_hf(os.path.join(out_dir, "hf"), hf_tensors(r, cfg, False), full_config())
    fcfg = full_config()
    fcfg["text_config"]["ple_embedding_dtype"] = "float8_e4m3fn"
    write_hf(os.path.join(out_dir, "hf_fp8"), hf_tensors(r, cfg, True), fcfg)
    os.makedirs(os.path.join(out_dir, "gguf"), exist_ok=True)
    write_gguf(os.path.join(out_dir, "gguf", "model.gguf"), gguf_metadata(cfg), gguf_tensors(r, cfg))
    m = q4load.load(os.path.join(out_dir, "hf"))
    st = q4.State(cfg)
    logits = q4.forward(m, PROMPT, st)
    np.save(os.path.join(out_dir, "ref_logits.npy"), logits.astype(np.float32))
    mf = q4load.load(os.path.join(out_dir, "hf_fp8"))
    np.save(os.path.join(out_dir, "ref_logits_fp8.npy"), q4.forward(mf, PROMPT, q4.State(cfg)).astype(np.float32))
    runs = {}                       # every stored result must not depend on how indexer ties break
    props, dl = q4.mtp_draft(m, PROMPT, N_DRAFT, runs)
    np.save(os.path.join(out_dir, "ref_mtp_logits.npy"), dl.astype(np.float32))
    outputs = (("tokens.txt", PROMPT), ("ref_greedy.txt", q4.greedy(m, PROMPT, N_GREEDY, runs)),
               ("ref_greedy_fp8.txt", q4.greedy(mf, PROMPT, N_GREEDY, runs)), ("ref_mtp.txt", props))
    if st.stats["tie_at_cut"] or runs["tie_at_cut"]:
        raise ValueError(f"seed {seed}: an indexer top-k cut falls on a tie; pick another seed")
    for name, data in outputs:
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(",".join(map(str, data)) + "\n")
    with open(os.path.join(out_dir, "indexer.json"), "w") as f:
        json.dump(st.stats, f)
    return m, logits, st.stats


def main():
    out_dir = sys.argv[1]
    m, logits, stats = write_all(out_dir)
    print(f"wrote {out_dir}: indexer {stats}")
    if "--check" in sys.argv[2:]:
        got = q4.forward(q4load.load(os.path.join(out_dir, "gguf", "model.gguf")), PROMPT, q4.State(m.cfg))
        err = float(np.abs(got - logits).max() / np.abs(logits).max())
        print(f"{'ok  ' if err < 1e-5 else 'FAIL'} reference on gguf/ vs hf/ rel err {err:.2e}")
        return 0 if err < 1e-5 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
