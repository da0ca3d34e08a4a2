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
  tokens.txt       the prompt (comma-separated ids)
  ref_logits.npy   [n_tokens, vocab] float32: the reference on hf/ (raw weights, 1 + w)
  ref_greedy.txt   N_GREEDY greedy continuation ids from the reference on hf/
The raw weights are chosen so that both layouts hold exactly the same values: matrices are the
dequantized values of the MLX codes written to mlx/, norm gains multiples of 1/64 (w and 1 + w both exact in BF16), the other
vectors BF16-rounded.

Usage: hybrid_fixtures.py OUT_DIR [--check]   (--check: the reference on mlx/ must equal hf/)
"""

import json
import os
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
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
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
            mlx = ref_model.forward(ref_model.load(os.path.join(d, "mlx")), PROMPT)
            err = float(np.abs(mlx - logits).max() / np.abs(logits).max())
            ok = err < 1e-5
            failed |= not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: reference on mlx/ vs hf/ rel err {err:.2e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
