#!/usr/bin/python3
"""Tiny hybrid checkpoints laid out the way each defining tool writes them, from one set of raw
random weights, with the reference's logits and greedy tokens. Written from the tools' published
layouts (transformers' Qwen3-Next / Qwen3.5 checkpoints, mlx-lm's sanitize() + quantize + save), not
from Splash's generator, so that a misreading Splash's writer and reader share cannot hide.

For each case (qwen3_next: MoE, as every published Qwen3-Next; qwen3_5: dense, tied embeddings;
qwen3_5_moe) it writes under OUT/<case>/:
  hf/   transformers layout, F32: zero-centred norm gains w (the model uses 1 + w), conv1d
        [C, 1, K], Qwen3-Next experts one tensor each (mlp.experts.<e>.*_proj), Qwen3.5-MoE experts
        fused (mlp.experts.gate_up_proj [E, 2f, d], mlp.experts.down_proj [E, d, f]), Qwen3.5 text
        model under model.language_model.*, its config under text_config.
  mlx/  what `mlx_lm.convert -q` leaves (4-bit, group 64): gains stored as 1 + w, conv1d moved to
        [C, K, 1], experts stacked into mlp.switch_mlp.{gate,up,down}_proj [E, rows, cols], the MoE
        router (mlp.gate) and mlp.shared_expert_gate at 8 bits (its quant_predicate), every other
        Linear/Embedding whose rows are whole groups quantized, BF16 scales, biases and plain
        tensors (A_log kept F32), tied lm_head dropped, Qwen3.5 under language_model.model.* / language_model.lm_head,
        config.json with the quantization block (and its quantization_config copy).
  gguf/model.gguf  what llama.cpp's convert_hf_to_gguf (conversion/qwen.py) writes, F32: norm gains
        1 + w (not linear_attn.norm), ssm_a = -exp(A_log), conv1d squeezed to [C, K], experts stacked
        (ffn_*_exps), Qwen3-Next's in_proj_qkvz split into attn_qkv + attn_gate with ssm_ba kept
        grouped, Qwen3.5's value heads tiled (qwen35 / qwen35moe).
  tokens.txt       the prompt (comma-separated ids)
  ref_logits.npy   [n_tokens, vocab] float32: the reference on hf/ (raw weights, 1 + w)
  ref_greedy.txt   N_GREEDY greedy continuation ids from the reference on hf/
The raw weights are chosen so that both layouts hold exactly the same values: matrices are the
dequantized values of the MLX codes written to mlx/, norm gains multiples of 1/64 (w and 1 + w both exact in BF16), the other
vectors BF16-rounded.

Usage: hybrid_fixtures.py OUT_DIR [--check]   (--check: the reference on mlx/ and gguf/ must equal hf/)
"""

import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import model as ref_model  # noqa: E402
import readers  # noqa: E402
import testfiles  # noqa: E402

BITS, GROUP = 4, 64
N_GREEDY = 8
PROMPT = [3, 17, 101, 42, 5, 99, 250, 7, 123, 64, 11, 200]

DIMS = dict(dim=128, n_layers=4, n_head=4, n_kv=2, head_dim=32, n_ff=128, vocab=256,
            nk=2, dk=32, nv=4, dv=32, conv_k=4, n_exp=4, top_k=2, f_exp=64, f_shared=64)


def bf16_round(a):
    """Rounds float32 to the nearest BF16 value (ties to even), returned as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


class Raw:
    """Random raw weights under transformers' text-model names (model.layers.N...)."""

    def __init__(self, arch, moe, seed):
        self.rng = np.random.default_rng(seed)
        self.arch, self.moe = arch, moe
        self.w = {}
        self.q = {}          # matrix name -> (codes, scales, biases, bits) of its MLX form
        self.norms = set()   # zero-centred gains (stored shifted by mlx-lm)

    def mat(self, name, rows, cols):
        bits = 8 if name.endswith("mlp.gate.weight") or name.endswith("shared_expert_gate.weight") else BITS
        self.w[name], self.q[name] = self._one(rows, cols, bits)

    def experts(self, name, n, rows, cols):
        parts = [self._one(rows, cols, BITS) for _ in range(n)]
        self.w[name] = np.stack([p[0] for p in parts])
        self.q[name] = tuple(np.stack([p[1][i] for p in parts]) for i in range(3)) + (BITS,)

    def _one(self, rows, cols, bits):
        """A matrix an MLX file holds exactly: the dequantized values of its codes."""
        a = (self.rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
        q, s, b = mlx_affine(a, bits, GROUP)
        v = np.repeat(s, GROUP, axis=-1).astype(np.float64) * q + np.repeat(b, GROUP, axis=-1)
        return v.astype(np.float32), (q, s, b, bits)

    def gain(self, name, n):
        self.w[name] = (self.rng.integers(-12, 13, n) / 64.0).astype(np.float32)
        self.norms.add(name)

    def vec(self, name, n, scale, offset=0.0):
        self.w[name] = bf16_round((offset + scale * self.rng.standard_normal(n)).astype(np.float32))


def mlx_affine(a, bits, group):
    """MLX affine quantization of each group of `group` values along the last axis: codes, and
    BF16-valued scales and biases, with w ~= scale * q + bias, q in [0, 2^bits - 1]."""
    lead = a.shape[:-1]
    g = a.reshape(-1, a.shape[-1] // group, group).astype(np.float64)
    lo, hi = g.min(axis=2), g.max(axis=2)
    levels = (1 << bits) - 1
    scale = bf16_round(np.where(hi > lo, (hi - lo) / levels, 1.0).astype(np.float32))
    bias = bf16_round(lo.astype(np.float32))
    q = np.clip(np.round((g - bias[..., None]) / scale[..., None]), 0, levels).astype(np.int64)
    return q.reshape(*lead, a.shape[-1]), scale.reshape(*lead, -1), bias.reshape(*lead, -1)


def make_raw(arch, moe, seed):
    d = DIMS
    r = Raw(arch, moe, seed)
    dim, kd, vd = d["dim"], d["nk"] * d["dk"], d["nv"] * d["dv"]
    conv_dim = 2 * kd + vd
    r.mat("model.embed_tokens.weight", d["vocab"], dim)
    for il in range(d["n_layers"]):
        p = f"model.layers.{il}."
        r.gain(p + "input_layernorm.weight", dim)
        r.gain(p + "post_attention_layernorm.weight", dim)
        if (il + 1) % 4 == 0:
            a = p + "self_attn."
            r.mat(a + "q_proj.weight", 2 * d["n_head"] * d["head_dim"], dim)   # [q | gate] per head
            r.mat(a + "k_proj.weight", d["n_kv"] * d["head_dim"], dim)
            r.mat(a + "v_proj.weight", d["n_kv"] * d["head_dim"], dim)
            r.mat(a + "o_proj.weight", dim, d["n_head"] * d["head_dim"])
            r.gain(a + "q_norm.weight", d["head_dim"])
            r.gain(a + "k_norm.weight", d["head_dim"])
        else:
            a = p + "linear_attn."
            if arch == "qwen3_next":
                r.mat(a + "in_proj_qkvz.weight", 2 * kd + 2 * vd, dim)
                r.mat(a + "in_proj_ba.weight", 2 * d["nv"], dim)
            else:
                r.mat(a + "in_proj_qkv.weight", conv_dim, dim)
                r.mat(a + "in_proj_z.weight", vd, dim)
                r.mat(a + "in_proj_b.weight", d["nv"], dim)
                r.mat(a + "in_proj_a.weight", d["nv"], dim)
            r.vec(a + "conv1d.weight", conv_dim * d["conv_k"], 0.3)
            r.w[a + "conv1d.weight"] = r.w[a + "conv1d.weight"].reshape(conv_dim, 1, d["conv_k"])
            r.vec(a + "dt_bias", d["nv"], 0.5, 1.0)
            r.vec(a + "A_log", d["nv"], 0.5)
            r.vec(a + "norm.weight", d["dv"], 0.1, 1.0)   # plain gain in every layout
            r.mat(a + "out_proj.weight", dim, vd)
        m = p + "mlp."
        if moe:
            r.mat(m + "gate.weight", d["n_exp"], dim)
            r.experts(m + "experts.gate_proj", d["n_exp"], d["f_exp"], dim)
            r.experts(m + "experts.up_proj", d["n_exp"], d["f_exp"], dim)
            r.experts(m + "experts.down_proj", d["n_exp"], dim, d["f_exp"])
            r.mat(m + "shared_expert.gate_proj.weight", d["f_shared"], dim)
            r.mat(m + "shared_expert.up_proj.weight", d["f_shared"], dim)
            r.mat(m + "shared_expert.down_proj.weight", dim, d["f_shared"])
            r.mat(m + "shared_expert_gate.weight", 1, dim)
        else:
            r.mat(m + "gate_proj.weight", d["n_ff"], dim)
            r.mat(m + "up_proj.weight", d["n_ff"], dim)
            r.mat(m + "down_proj.weight", dim, d["n_ff"])
    r.gain("model.norm.weight", dim)
    if arch == "qwen3_next":
        r.mat("lm_head.weight", d["vocab"], dim)
    return r


def text_config(arch, moe):
    d = DIMS
    c = {"hidden_size": d["dim"], "num_hidden_layers": d["n_layers"], "num_attention_heads": d["n_head"],
         "num_key_value_heads": d["n_kv"], "head_dim": d["head_dim"], "intermediate_size": d["n_ff"],
         "vocab_size": d["vocab"], "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
         "linear_num_key_heads": d["nk"], "linear_key_head_dim": d["dk"], "linear_num_value_heads": d["nv"],
         "linear_value_head_dim": d["dv"], "linear_conv_kernel_dim": d["conv_k"], "full_attention_interval": 4,
         "hidden_act": "silu", "attention_bias": False, "tie_word_embeddings": arch != "qwen3_next"}
    if moe:
        c.update(num_experts=d["n_exp"], num_experts_per_tok=d["top_k"], moe_intermediate_size=d["f_exp"],
                 shared_expert_intermediate_size=d["f_shared"], decoder_sparse_step=1, mlp_only_layers=[],
                 norm_topk_prob=True)
    if arch == "qwen3_next":
        c.update(model_type="qwen3_next", architectures=["Qwen3NextForCausalLM"], rope_theta=10000.0,
                 partial_rotary_factor=0.25)
        if not moe:
            c.update(num_experts=0, num_experts_per_tok=0, decoder_sparse_step=1, mlp_only_layers=[],
                     moe_intermediate_size=0, shared_expert_intermediate_size=0)
        return c
    c.update(model_type="qwen3_5_moe_text" if moe else "qwen3_5_text", attn_output_gate=True,
             layer_types=["full_attention" if (il + 1) % 4 == 0 else "linear_attention"
                          for il in range(d["n_layers"])],
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                              "mrope_interleaved": True, "mrope_section": [2, 1, 1]},
             mtp_num_hidden_layers=1)
    return c


def full_config(arch, moe):
    c = text_config(arch, moe)
    if arch == "qwen3_next":
        return c
    mt = "qwen3_5_moe" if moe else "qwen3_5"
    cls = "Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"
    return {"architectures": [cls], "model_type": mt, "text_config": c, "tie_word_embeddings": c["tie_word_embeddings"]}


def hf_tensors(r):
    """transformers' checkpoint: w as drawn, conv1d [C, 1, K], its expert layout and prefixes."""
    out = {}
    for n, a in r.w.items():
        if ".mlp.experts." in n:
            base, proj = n.rsplit(".experts.", 1)
            if r.arch == "qwen3_next":
                for e in range(a.shape[0]):
                    out[f"{base}.experts.{e}.{proj}.weight"] = a[e]
            elif proj == "gate_proj":
                out[base + ".experts.gate_up_proj"] = np.concatenate([a, r.w[base + ".experts.up_proj"]], axis=1)
            elif proj == "down_proj":
                out[base + ".experts.down_proj"] = a
            continue
        out[n] = a
    if r.arch != "qwen3_next":
        out = {("model.language_model." + n[len("model."):] if n.startswith("model.") else n): a
               for n, a in out.items()}
    return out


def mlx_tensors(r):
    """mlx-lm's sanitized, quantized checkpoint of the same weights, and its quantization block."""
    plain, quant = {}, {"group_size": GROUP, "bits": BITS, "mode": "affine"}
    for n, a in r.w.items():
        if n in r.q:
            a = r.q[n]
        if ".mlp.experts." in n:
            base, proj = n.rsplit(".experts.", 1)
            n = f"{base}.switch_mlp.{proj}.weight"
        if n in r.norms:
            a = a + np.float32(1.0)        # sanitize(): the zero-centred gains become 1 + w
        if n.endswith("conv1d.weight"):
            a = np.ascontiguousarray(np.moveaxis(a, 2, 1))   # [C, 1, K] -> [C, K, 1]
        plain[n] = a
    if r.arch != "qwen3_next":
        plain = {("language_model." + n): a for n, a in plain.items()}
    out, dtypes = {}, {}
    for n, a in plain.items():
        module = n[:-len(".weight")] if n.endswith(".weight") else None
        # Every nn.Linear / nn.Embedding / SwitchLinear here has rows of whole groups, so mlx-lm
        # quantizes them all (the 8-bit ones are listed by module path); conv1d and vectors stay.
        if isinstance(a, tuple):
            q, s, b, bits = a
            if bits != BITS:
                quant[module] = {"group_size": GROUP, "bits": bits}
            lead = q.shape[:-1]
            out[n] = readers.mlx_pack(q.reshape(-1, q.shape[-1]), bits).reshape(*lead, -1)
            out[module + ".scales"], out[module + ".biases"] = s, b
            dtypes[module + ".scales"] = dtypes[module + ".biases"] = "BF16"
        else:
            out[n] = a
            dtypes[n] = "F32" if n.endswith("A_log") else "BF16"   # cast_predicate keeps A_log
    return out, dtypes, quant


def _tiled(a, axis, nk, r, hd):
    """llama.cpp's grouped -> tiled reorder of value heads along `axis` ([nk, r, hd] -> [r, nk, hd])."""
    a = np.moveaxis(a, axis, 0)
    rest = a.shape[1:]
    a = a.reshape(nk, r, hd, *rest).swapaxes(0, 1).reshape(nk * r * hd, *rest)
    return np.ascontiguousarray(np.moveaxis(a, 0, axis))


def gguf_tensors(r):
    """What llama.cpp's convert_hf_to_gguf (conversion/qwen.py) writes, F32: norms + 1 (not
    linear_attn.norm), ssm_a = -exp(A_log), conv1d squeezed, experts stacked, Qwen3-Next's
    in_proj_qkvz split into attn_qkv / attn_gate (ssm_ba kept grouped), Qwen3.5's value heads tiled."""
    d = DIMS
    nk, dk, nv, dv = d["nk"], d["dk"], d["nv"], d["dv"]
    rr, kd = nv // nk, nk * dk
    tile = r.arch == "qwen3_5" and nv != nk
    out = {}
    w = r.w
    out["token_embd.weight"] = w["model.embed_tokens.weight"]
    out["output_norm.weight"] = w["model.norm.weight"] + 1
    if "lm_head.weight" in w:
        out["output.weight"] = w["lm_head.weight"]
    for il in range(d["n_layers"]):
        p, b = f"model.layers.{il}.", f"blk.{il}."
        out[b + "attn_norm.weight"] = w[p + "input_layernorm.weight"] + 1
        out[b + "post_attention_norm.weight"] = w[p + "post_attention_layernorm.weight"] + 1
        if (il + 1) % 4 == 0:
            a = p + "self_attn."
            for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
                out[b + gg + ".weight"] = w[a + hf + ".weight"]
            out[b + "attn_q_norm.weight"] = w[a + "q_norm.weight"] + 1
            out[b + "attn_k_norm.weight"] = w[a + "k_norm.weight"] + 1
        else:
            a = p + "linear_attn."
            conv = w[a + "conv1d.weight"].reshape(-1, d["conv_k"])
            A, dt = -np.exp(w[a + "A_log"].astype(np.float64)).astype(np.float32), w[a + "dt_bias"]
            out_proj = w[a + "out_proj.weight"]
            if r.arch == "qwen3_next":
                g = w[a + "in_proj_qkvz.weight"].reshape(nk, 2 * dk + 2 * rr * dv, -1)
                q, k = g[:, :dk].reshape(kd, -1), g[:, dk:2 * dk].reshape(kd, -1)
                v = g[:, 2 * dk:2 * dk + rr * dv].reshape(nv * dv, -1)
                out[b + "attn_qkv.weight"] = np.concatenate([q, k, v])
                out[b + "attn_gate.weight"] = np.ascontiguousarray(g[:, 2 * dk + rr * dv:].reshape(nv * dv, -1))
                out[b + "ssm_ba.weight"] = w[a + "in_proj_ba.weight"]
            else:
                qkv, z = w[a + "in_proj_qkv.weight"], w[a + "in_proj_z.weight"]
                bb, aa = w[a + "in_proj_b.weight"], w[a + "in_proj_a.weight"]
                if tile:
                    qkv = np.concatenate([qkv[:2 * kd], _tiled(qkv[2 * kd:], 0, nk, rr, dv)])
                    z, bb, aa = _tiled(z, 0, nk, rr, dv), _tiled(bb, 0, nk, rr, 1), _tiled(aa, 0, nk, rr, 1)
                    A, dt = _tiled(A, 0, nk, rr, 1), _tiled(dt, 0, nk, rr, 1)
                    conv = np.concatenate([conv[:2 * kd], _tiled(conv[2 * kd:], 0, nk, rr, dv)])
                    out_proj = _tiled(out_proj, 1, nk, rr, dv)
                out[b + "attn_qkv.weight"], out[b + "attn_gate.weight"] = qkv, z
                out[b + "ssm_beta.weight"], out[b + "ssm_alpha.weight"] = bb, aa
            out[b + "ssm_conv1d.weight"] = conv
            out[b + "ssm_a"] = A
            out[b + "ssm_dt.bias"] = dt
            out[b + "ssm_norm.weight"] = w[a + "norm.weight"]
            out[b + "ssm_out.weight"] = out_proj
        m = p + "mlp."
        if r.moe:
            out[b + "ffn_gate_inp.weight"] = w[m + "gate.weight"]
            for proj in ("gate", "up", "down"):
                out[b + f"ffn_{proj}_exps.weight"] = w[m + f"experts.{proj}_proj"]
                out[b + f"ffn_{proj}_shexp.weight"] = w[m + f"shared_expert.{proj}_proj.weight"]
            out[b + "ffn_gate_inp_shexp.weight"] = w[m + "shared_expert_gate.weight"]
        else:
            for proj in ("gate", "up", "down"):
                out[b + f"ffn_{proj}.weight"] = w[m + f"{proj}_proj.weight"]
    return out


def gguf_metadata(arch, moe):
    d = DIMS
    ga = "qwen3next" if arch == "qwen3_next" else ("qwen35moe" if moe else "qwen35")
    kv = {"general.architecture": ga, "general.name": "tiny"}
    P = ga + "."
    kv.update({P + "block_count": d["n_layers"], P + "context_length": 4096, P + "embedding_length": d["dim"],
               P + "feed_forward_length": d["n_ff"], P + "attention.head_count": d["n_head"],
               P + "attention.head_count_kv": d["n_kv"], P + "attention.key_length": d["head_dim"],
               P + "attention.value_length": d["head_dim"], P + "rope.freq_base": 10000.0,
               P + "attention.layer_norm_rms_epsilon": 1e-6, P + "ssm.conv_kernel": d["conv_k"],
               P + "ssm.state_size": d["dk"], P + "ssm.group_count": d["nk"], P + "ssm.time_step_rank": d["nv"],
               P + "ssm.inner_size": d["nv"] * d["dv"], P + "full_attention_interval": 4,
               P + "rope.dimension_count": d["head_dim"] // 4})
    if moe:
        kv.update({P + "expert_count": d["n_exp"], P + "expert_used_count": d["top_k"],
                   P + "expert_feed_forward_length": d["f_exp"], P + "expert_shared_feed_forward_length": d["f_shared"],
                   P + "expert_weights_norm": True})
    if ga != "qwen3next":
        kv[P + "rope.dimension_sections"] = [2, 1, 1, 0]
    return kv


def write_gguf(path, kv, tensors):
    """GGUF v3, F32 tensors, 32-byte alignment."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    def value(v):
        if isinstance(v, bool):
            return struct.pack("<I?", 7, v)
        if isinstance(v, str):
            return struct.pack("<I", 8) + s(v)
        if isinstance(v, float):
            return struct.pack("<If", 6, v)
        if isinstance(v, int):
            return struct.pack("<II", 4, v)
        return struct.pack("<IIQ", 9, 4, len(v)) + b"".join(struct.pack("<I", x) for x in v)

    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    head += b"".join(s(k) + value(v) for k, v in kv.items())
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


def write_case(out_dir, name, arch, moe, seed):
    r = make_raw(arch, moe, seed)
    d = os.path.join(out_dir, name)
    cfg = full_config(arch, moe)
    testfiles.write_hf_dir(os.path.join(d, "hf"), cfg, hf_tensors(r))
    t, dtypes, quant = mlx_tensors(r)
    mdir = os.path.join(d, "mlx")
    os.makedirs(mdir, exist_ok=True)
    with open(os.path.join(mdir, "config.json"), "w") as f:
        json.dump(dict(cfg, quantization=quant, quantization_config=quant), f, indent=2)
    testfiles.write_safetensors(os.path.join(mdir, "model.safetensors"), t, dtypes)
    os.makedirs(os.path.join(d, "gguf"), exist_ok=True)
    write_gguf(os.path.join(d, "gguf", "model.gguf"), gguf_metadata(arch, moe), gguf_tensors(r))
    m = ref_model.load(os.path.join(d, "hf"))
    logits = ref_model.forward(m, PROMPT).astype(np.float32)
    np.save(os.path.join(d, "ref_logits.npy"), logits)
    greedy = _greedy(m)
    # The MLX folder as our quantized kernels compute it (matmul inputs rounded to int8 per 32
    # values, model.int8_acts): the float reference moves by up to ~0.1-0.3 of the logit range
    # under that rounding on these tiny random models, far more than any layout question.
    mq = ref_model.load(os.path.join(d, "mlx"))
    mq.int8_acts = True
    np.save(os.path.join(d, "ref_logits_mlx_int8.npy"), ref_model.forward(mq, PROMPT).astype(np.float32))
    with open(os.path.join(d, "ref_greedy_mlx_int8.txt"), "w") as f:
        f.write(",".join(map(str, _greedy(mq))) + "\n")
    with open(os.path.join(d, "tokens.txt"), "w") as f:
        f.write(",".join(map(str, PROMPT)) + "\n")
    with open(os.path.join(d, "ref_greedy.txt"), "w") as f:
        f.write(",".join(map(str, greedy)) + "\n")
    return d, logits


def _greedy(m):
    toks, out = list(PROMPT), []
    for _ in range(N_GREEDY):
        nxt = int(np.argmax(ref_model.forward(m, toks)[-1]))
        out.append(nxt)
        toks.append(nxt)
    return out


CASES = (("qwen3_next", "qwen3_next", True, 1), ("qwen3_5", "qwen3_5", False, 2), ("qwen3_5_moe", "qwen3_5", True, 3))


def main():
    out_dir = sys.argv[1]
    check = "--check" in sys.argv[2:]
    failed = False
    for name, arch, moe, seed in CASES:
        d, logits = write_case(out_dir, name, arch, moe, seed)
        if check:
            for other in ("mlx", "gguf/model.gguf"):
                got = ref_model.forward(ref_model.load(os.path.join(d, other)), PROMPT)
                err = float(np.abs(got - logits).max() / np.abs(logits).max())
                ok = err < 1e-5
                failed |= not ok
                print(f"{'ok  ' if ok else 'FAIL'} {name}: reference on {other} vs hf/ rel err {err:.2e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
