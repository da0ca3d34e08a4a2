#!/usr/bin/python3
"""Reference for the multi-token-prediction (MTP) head of Qwen3-Next / Qwen3.5 checkpoints used as a
speculative drafter, written from the published model definitions (Qwen3-Next `mtp.*` tensors; the
MTP modules of vLLM / SGLang describe the same computation):

* Tensors: mtp.fc.weight [dim, 2 dim]; mtp.pre_fc_norm_embedding.weight, mtp.pre_fc_norm_hidden.weight,
  mtp.norm.weight (zero-centred RMSNorms: y = x / rms(x) * (1 + w)); mtp.layers.0.* a gated
  full-attention decoder layer named like the model's own layers. Its MLP is a dense SwiGLU, or in
  the MoE models (Qwen3-Next, Qwen3.5-MoE: the MTP layer is built as one of the model's decoder
  layers, sparse there) the sparse MoE block of moe.py (router mlp.gate, experts, shared expert with
  shared_expert_gate): here, whenever the layer has a router. The MTP head uses the model's token
  table and output head. GGUF (llama.cpp's layout): block_count counts one more block,
  blk.<n_layers>, holding nextn.eh_proj / enorm / hnorm / shared_head_norm and the layer's tensors
  under their usual names (norms stored as 1 + w; MoE: ffn_gate_inp, ffn_*_exps, ffn_*_shexp).
* Row i (at the target's position i): e = norm_e(embed(x_{i+1})), h = norm_h(g_i) where g_i is
  the target's final hidden state of token x_i AFTER the target's final norm; x = fc([e | h]);
  x = layer(x) with the head's own K/V cache (causal, RoPE at i); g' = norm(x); logits = head(g')
  predict x_{i+2}.
* Drafting after n committed tokens: rows 0..n-2 give the first proposal (argmax of the last row);
  each further proposal feeds (previous proposal, previous g') as the row at the next position.

qwen4_exp (Flash-Next) checkpoints draft with their own head, qwen4_exp.mtp_draft (same conventions).

CLI (used by tests/unit/engine/spec_mtp_test.cpp):
  mtp.py --model DIR|FILE.gguf --tokens 1,2,3,... --n-draft K --out OUT.f32
writes [K, n_vocab] float32 logits of the K drafting steps (raw, row-major) and prints the
proposals as a comma-separated line.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hybrid  # noqa: E402
import model as ref_model  # noqa: E402
import moe  # noqa: E402
import qwen4_exp  # noqa: E402
import readers  # noqa: E402


def load_mtp(path, m):
    if not os.path.isdir(path):
        return _load_mtp_gguf(m)
    st = readers.SafetensorsDir(path)
    t = lambda n: st.tensor(n).astype(np.float64)
    one = lambda n: 1.0 + t(n)
    p = "mtp.layers.0."
    a = p + "self_attn."
    L = dict(attn_norm=one(p + "input_layernorm.weight"), ffn_norm=one(p + "post_attention_layernorm.weight"),
             wq=t(a + "q_proj.weight"), wk=t(a + "k_proj.weight"), wv=t(a + "v_proj.weight"),
             wo=t(a + "o_proj.weight"), q_norm=one(a + "q_norm.weight"), k_norm=one(a + "k_norm.weight"))
    if st.has(p + "mlp.gate.weight"):
        c = st.config.get("text_config", st.config)
        L.update(_f64(moe.hf_layer(st, p, int(c["num_experts"]))))
    else:
        L.update(gate=t(p + "mlp.gate_proj.weight"), up=t(p + "mlp.up_proj.weight"), down=t(p + "mlp.down_proj.weight"))
    return dict(fc=t("mtp.fc.weight"), norm_e=one("mtp.pre_fc_norm_embedding.weight"),
                norm_h=one("mtp.pre_fc_norm_hidden.weight"), norm=one("mtp.norm.weight"), L=L)


def _f64(d):
    return {k: None if v is None else np.asarray(v, dtype=np.float64) for k, v in d.items()}


def _load_mtp_gguf(m):
    """llama.cpp's layout: block n_layers holds nextn.{eh_proj, enorm, hnorm, shared_head_norm} and the
    layer under its usual names; zero-centred norms are stored as 1 + w already."""
    g = m.gguf
    t = lambda n: g.tensor(n).astype(np.float64)
    b = f"blk.{m.n_layers}."
    L = dict(attn_norm=t(b + "attn_norm.weight"), ffn_norm=t(b + "post_attention_norm.weight"),
             wq=t(b + "attn_q.weight"), wk=t(b + "attn_k.weight"), wv=t(b + "attn_v.weight"),
             wo=t(b + "attn_output.weight"), q_norm=t(b + "attn_q_norm.weight"), k_norm=t(b + "attn_k_norm.weight"))
    if b + "ffn_gate_inp.weight" in g.tensors:
        L.update(_f64(moe.gguf_layer(g, b)))
    else:
        L.update(gate=t(b + "ffn_gate.weight"), up=t(b + "ffn_up.weight"), down=t(b + "ffn_down.weight"))
    return dict(fc=t(b + "nextn.eh_proj.weight"), norm_e=t(b + "nextn.enorm.weight"),
                norm_h=t(b + "nextn.hnorm.weight"), norm=t(b + "nextn.shared_head_norm.weight"), L=L)


class MtpCache:
    def __init__(self, m):
        self.k = {0: np.zeros((0, m.n_head_kv, m.head_dim))}
        self.v = {0: np.zeros((0, m.n_head_kv, m.head_dim))}


def mtp_rows(m, mtp, cache, tokens, hidden, pos0):
    """Rows at positions pos0.. : tokens [T], hidden [T, dim] -> (g' [T, dim], logits [T, n_vocab])."""
    rms = hybrid._rms
    T = len(tokens)
    e = rms(m.tok_embd[np.asarray(tokens)].astype(np.float64), mtp["norm_e"], m.eps)
    h = rms(hidden, mtp["norm_h"], m.eps)
    x = np.concatenate([e, h], axis=1) @ mtp["fc"].T
    L = mtp["L"]
    pos = np.arange(pos0, pos0 + T)
    x = x + hybrid._full_attention(m, L, 0, rms(x, L["attn_norm"], m.eps), pos, cache, lambda v: v)
    f = rms(x, L["ffn_norm"], m.eps)
    if moe.is_sparse(L):
        x = x + moe.ffn(L, f, m)
    else:
        x = x + hybrid._silu(f @ L["gate"].T) * (f @ L["up"].T) @ L["down"].T
    g = rms(x, mtp["norm"], m.eps)
    return g, g @ m.output.T


def draft(m, mtp, tokens, n_draft):
    """Proposals and their logits [n_draft, n_vocab] after the committed `tokens` (>= 2)."""
    hidden = []
    hybrid.forward(m, tokens, hybrid.HybridCache(m), hidden=hidden)
    g_target = hidden[0]
    n = len(tokens)
    cache = MtpCache(m)
    g, logits = mtp_rows(m, mtp, cache, tokens[1:], g_target[:n - 1], 0)
    out_logits = [logits[-1]]
    props = [int(np.argmax(logits[-1]))]
    g = g[-1:]
    for k in range(1, n_draft):
        g, logits = mtp_rows(m, mtp, cache, [props[-1]], g, n - 2 + k)
        out_logits.append(logits[-1])
        props.append(int(np.argmax(logits[-1])))
    return props, np.stack(out_logits)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--n-draft", type=int, default=4)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    m = ref_model.load(a.model)
    tokens = [int(t) for t in a.tokens.split(",")]
    if isinstance(m, qwen4_exp.Model):          # Flash-Next: its own head (qwen4_exp.mtp_draft)
        if m.mtp is None:
            sys.exit("mtp.py: the checkpoint has no mtp.* tensors")
        props, logits = qwen4_exp.mtp_draft(m, tokens, a.n_draft)
    elif not getattr(m, "hybrid", False):
        sys.exit("mtp.py: the model is not a qwen3_next / qwen3_5 hybrid or qwen4_exp")
    else:
        props, logits = draft(m, load_mtp(a.model, m), tokens, a.n_draft)
    logits.astype(np.float32).tofile(a.out)
    print(",".join(str(p) for p in props))


if __name__ == "__main__":
    main()
