"""Loaders of qwen4_exp checkpoints into the canonical weights of qwen4_exp.py.

Hugging Face directory (transformers' Qwen4ExpForConditionalGeneration):
  config.json with a nested text_config (the vision_config and any model.visual.* tensor ignored);
  text model under model.language_model.* (readers.SafetensorsDir reads it as model.*), lm_head.*,
  mtp.* at the top level. Norm gains are stored as w (1-centred: the model uses 1 + w) except
  linear_attn.norm. The PLE table is split into ngram_embedding.shard_{i}.weight (concatenated in
  index order; each shard's rows come from its header), bf16 or F8_E4M3 with one shared
  ngram_embedding.weight_scale. The I64 buffers layer_multipliers / ngram_heads_offsets /
  ngram_heads_vocab_sizes must equal the formulas (transformers recomputes them; SGLang and vLLM
  load them), or the loader refuses the file.
GGUF (llama.cpp's conversion/qwen4exp.py): qwen4exp.* metadata, norms stored as 1 + w, ssm_a = A,
  GDN value heads tiled (Qwen3.5 order: value head j at position (j % r) * nk + j // r), index_qk_proj
  split into indexer.q_proj / k_proj, conv1d squeezed to [C, K], one per_layer_token_embd table,
  the MTP block as blk.<n_layers> with nextn.{eh_proj = [fc_embedding | fc_hidden], enorm, hnorm,
  hc_head_*}. Hash constants come from the metadata and are checked like the HF buffers.
"""

import json
import os

import numpy as np

import qwen4_exp as q4
import readers

PLE_PREFIX = "ple_embedding."
HF_MODEL_TYPES = ("qwen4_exp", "qwen3_8_flash_next")   # the second: an early naming some exports keep


def _check_constants(cfg, mult, offsets, sizes, where):
    want = (cfg.multipliers, cfg.head_offsets, cfg.head_sizes)
    for name, got, w in zip(("layer_multipliers", "head_offsets", "head_vocab_sizes"), (mult, offsets, sizes), want):
        if [int(x) for x in got] != list(w):
            raise ValueError(f"{where}: stored {name} {list(got)[:4]}... differ from the formula {list(w)[:4]}...")


def _table_fn(rows_array):
    return lambda ids: rows_array[np.asarray(ids)]


def hf_text_config(path):
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    return c.get("text_config", c)


def load_hf(path):
    st = readers.SafetensorsDir(path)
    cfg = q4.Config(hf_text_config(path))
    m = q4.Model(cfg)
    t = st.tensor
    one = lambda n: 1.0 + t(n)
    m.embed, m.lm_head = t("model.embed_tokens.weight"), t("lm_head.weight")
    m.mixer = _hf_hc(st, "model.hyper_connection_mixer.")
    for il in range(cfg.n_layers):
        p = f"model.layers.{il}."
        m.layers.append(_hf_layer(st, cfg, p, cfg.kinds[il]))
        if il == cfg.ple_layer:
            a = p + "ple."
            m.ple = dict(key=t(a + "key_proj.weight"), value=t(a + "value_proj.weight"),
                         norm_key=one(a + "norm_key.weight"), norm_query=one(a + "norm_query.weight"),
                         norm_conv=one(a + "norm_conv.weight"),
                         conv=t(a + "conv1d.weight").reshape(cfg.hc * cfg.hidden, -1))
            b = a + PLE_PREFIX
            _check_constants(cfg, st.raw(b + "layer_multipliers")[0], st.raw(b + "ngram_heads_offsets")[0],
                             st.raw(b + "ngram_heads_vocab_sizes")[0], path)
            rows = _hf_table(st, b + "ngram_embedding.", cfg, path)
            m.ple.update(table=_table_fn(rows), table_rows=rows)
    if st.has("mtp.fc_embedding.weight"):
        m.mtp = dict(fc_embedding=t("mtp.fc_embedding.weight"), fc_hidden=t("mtp.fc_hidden.weight"),
                     norm_e=one("mtp.pre_fc_norm_embedding.weight"), norm_h=one("mtp.pre_fc_norm_hidden.weight"),
                     mixer=_hf_hc(st, "mtp.hyper_connection_mixer."),
                     layer=_hf_layer(st, cfg, "mtp.layers.0.", "qsa"))
    return m


def _hf_table(st, prefix, cfg, where):
    shards = sorted((int(n[len(prefix) + len("shard_"):].split(".")[0]), n) for n in st.where
                    if n.startswith(prefix + "shard_") and n.endswith(".weight"))
    if not shards or [i for i, _ in shards] != list(range(len(shards))):
        raise ValueError(f"{where}: PLE table shards missing or not numbered 0..n-1")
    rows = np.concatenate([st.tensor(n) for _, n in shards])
    if st.has(prefix + "weight_scale"):
        scale = st.tensor(prefix + "weight_scale").reshape(-1)
        if scale.size != 1:
            raise ValueError(f"{where}: ngram_embedding.weight_scale must hold one value, has {scale.size}")
        rows = rows * scale[0]
    elif any(st.raw(n)[1] == "F8_E4M3" for _, n in shards):
        raise ValueError(f"{where}: an F8_E4M3 PLE table needs ngram_embedding.weight_scale")
    need = cfg.head_offsets[-1] + cfg.head_sizes[-1]
    if rows.shape[0] < need or rows.shape[1] != cfg.ple_head_dim:
        raise ValueError(f"{where}: PLE table {rows.shape} too small for {need} rows of {cfg.ple_head_dim}")
    return rows


def _hf_hc(st, p):
    opt = st.tensor(p + "block_inject_weight.weight") if st.has(p + "block_inject_weight.weight") else None
    return dict(norm=1.0 + st.tensor(p + "hc_norm.weight"), down=st.tensor(p + "input_mix_weight_down.weight"),
                up=st.tensor(p + "input_mix_weight_up.weight"), inject=opt)


def _hf_layer(st, cfg, p, kind):
    t = st.tensor
    one = lambda n: 1.0 + t(n)
    L = dict(hc_attn=_hf_hc(st, p + "attn_hyper_connection."), hc_mlp=_hf_hc(st, p + "mlp_hyper_connection."))
    if kind == "gdn":
        a = p + "linear_attn."
        L.update(qkv=t(a + "in_proj_qkv.weight"), z=t(a + "in_proj_z.weight"), b=t(a + "in_proj_b.weight"),
                 a=t(a + "in_proj_a.weight"), conv=t(a + "conv1d.weight").reshape(-1, cfg.conv_k),
                 A=-np.exp(t(a + "A_log")), dt_bias=t(a + "dt_bias"), norm=t(a + "norm.weight"),
                 out=t(a + "out_proj.weight"))
    else:
        a = p + "self_attn."
        L.update(wq=t(a + "q_proj.weight"), wk=t(a + "k_proj.weight"), wv=t(a + "v_proj.weight"),
                 wo=t(a + "o_proj.weight"), q_norm=one(a + "q_norm.weight"), k_norm=one(a + "k_norm.weight"),
                 idx_qk=t(a + "indexer.index_qk_proj.weight"), idx_q_norm=one(a + "indexer.q_layernorm.weight"),
                 idx_k_norm=one(a + "indexer.k_layernorm.weight"))
    b = p + "mlp."
    gu = t(b + "experts.gate_up_proj")
    f = gu.shape[1] // 2
    L.update(router=t(b + "gate.weight"), exp_gate=gu[:, :f], exp_up=gu[:, f:], exp_down=t(b + "experts.down_proj"),
             sh_gate=t(b + "shared_expert.gate_proj.weight"), sh_up=t(b + "shared_expert.up_proj.weight"),
             sh_down=t(b + "shared_expert.down_proj.weight"), sh_inp=t(b + "shared_expert_gate.weight").reshape(-1))
    return L


# ---------------------------------------------------------------------------------------------
# GGUF


def untile(a, axis, nk, r, hd):
    """llama.cpp's tiled value-head order back to Hugging Face's grouped order ([r, nk, hd] -> [nk, r, hd])."""
    a = np.moveaxis(a, axis, 0)
    rest = a.shape[1:]
    a = a.reshape(r, nk, hd, *rest).swapaxes(0, 1).reshape(nk * r * hd, *rest)
    return np.ascontiguousarray(np.moveaxis(a, 0, axis))


def gguf_config(md):
    """The text_config the qwen4exp metadata describes (PLE sizes come from the stored head sizes)."""
    A = "qwen4exp."
    g = lambda k, d=None: md.get(A + k, d)
    n_layers = int(g("block_count")) - int(g("nextn_predict_layers", 0))
    ratios = g("attention.compress_ratios")
    iv = int(g("full_attention_interval", 4))
    kinds = ["full_attention" if (ratios[i] if ratios else (i + 1) % iv == 0) else "linear_attention"
             for i in range(n_layers)]
    head_dim = int(g("attention.key_length"))
    nv = int(g("ssm.time_step_rank"))
    c = dict(vocab_size=None, hidden_size=int(g("embedding_length")), num_hidden_layers=n_layers,
             num_attention_heads=int(g("attention.head_count")), num_key_value_heads=int(g("attention.head_count_kv")),
             head_dim=head_dim, rms_norm_eps=float(g("attention.layer_norm_rms_epsilon")),
             rope_parameters=dict(rope_theta=float(g("rope.freq_base")),
                                  partial_rotary_factor=int(g("rope.dimension_count")) / head_dim),
             layer_types=kinds, linear_num_key_heads=int(g("ssm.group_count")),
             linear_key_head_dim=int(g("ssm.state_size")), linear_num_value_heads=nv,
             linear_value_head_dim=int(g("ssm.inner_size")) // nv, linear_conv_kernel_dim=int(g("ssm.conv_kernel")),
             output_gate_type="sigmoid", num_experts=int(g("expert_count")),
             num_experts_per_tok=int(g("expert_used_count")),
             norm_topk_prob=bool(g("expert_weights_norm", True)), hc_count=int(g("hyper_connection.count")),
             hc_lowrank=int(g("hyper_connection.low_rank")), indexer_n_heads=int(g("attention.indexer.head_count")),
             indexer_kv_heads=1, indexer_head_dim=int(g("attention.indexer.key_length")),
             indexer_budget=int(g("attention.indexer.top_k")),
             indexer_compress_ratio=int(max(ratios) if ratios else 4),
             mtp_num_hidden_layers=int(g("nextn_predict_layers", 0)))
    if g("ple.layers"):
        sizes = [int(x) for x in g("ple.head_vocab_sizes")]
        npg, hp = int(g("ple.ngram_size")), int(g("ple.heads_per_ngram"))
        c.update(ple_layer_ids=[int(x) + 1 for x in g("ple.layers")], ngram_size=npg, heads_per_ngram=hp,
                 ple_embed_dim=int(g("embedding_length_per_layer_input")) * (npg - 1) * hp,
                 ple_conv_kernel_size=int(g("ple.conv_kernel")), ngram_vocab_size_base=sizes[0],
                 eos_token_id=int(g("ple.eos_token_id")))
    return c


def load_gguf(path):
    gf = readers.GGUFFile(path)
    md = gf.metadata
    if md.get("general.architecture") != "qwen4exp":
        raise ValueError(f"{path}: not a qwen4exp GGUF")
    c = gguf_config(md)
    t = gf.tensor
    c["vocab_size"] = int(gf.tensors["token_embd.weight"][1][1])
    cfg = q4.Config(c)
    if cfg.ple_layer is not None:
        # the padding multiple is not stored: take the table's own row count as the padded size
        _check_constants(cfg, md["qwen4exp.ple.layer_multipliers"], md["qwen4exp.ple.head_offsets"],
                         md["qwen4exp.ple.head_vocab_sizes"], path)
    m = q4.Model(cfg)
    m.embed = t("token_embd.weight")
    m.lm_head = t("output.weight") if "output.weight" in gf.tensors else m.embed
    m.mixer = dict(norm=t("output_hc_norm.weight"), down=t("output_hc_down.weight"), up=t("output_hc_up.weight"),
                   inject=None)
    for il in range(cfg.n_layers):
        b = f"blk.{il}."
        m.layers.append(_gguf_layer(gf, cfg, b, cfg.kinds[il]))
        if il == cfg.ple_layer:
            rows = t("per_layer_token_embd.weight")
            m.ple = dict(key=t(b + "ple_key.weight"), value=t(b + "ple_value.weight"),
                         norm_key=t(b + "ple_norm_key.weight"), norm_query=t(b + "ple_norm_query.weight"),
                         norm_conv=t(b + "ple_norm_conv.weight"), conv=t(b + "ple_conv1d.weight"),
                         table=_table_fn(rows), table_rows=rows)
    if cfg.mtp_layers:
        b = f"blk.{cfg.n_layers}."
        eh = t(b + "nextn.eh_proj.weight")
        H = cfg.hidden
        m.mtp = dict(fc_embedding=eh[:, :H], fc_hidden=eh[:, H:], norm_e=t(b + "nextn.enorm.weight"),
                     norm_h=t(b + "nextn.hnorm.weight"),
                     mixer=dict(norm=t(b + "nextn.hc_head_norm.weight"), down=t(b + "nextn.hc_head_down.weight"),
                                up=t(b + "nextn.hc_head_up.weight"), inject=None),
                     layer=_gguf_layer(gf, cfg, b, "qsa"))
    return m


def _gguf_layer(gf, cfg, b, kind):
    t = gf.tensor
    hc = lambda s: dict(norm=t(b + f"hc_{s}_norm.weight"), down=t(b + f"hc_{s}_down.weight"),
                        up=t(b + f"hc_{s}_up.weight"), inject=t(b + f"hc_{s}_inject.weight"))
    L = dict(hc_attn=hc("attn"), hc_mlp=hc("ffn"))
    if kind == "gdn":
        nk, dk, nv, dv = cfg.lin_nk, cfg.lin_dk, cfg.lin_nv, cfg.lin_dv
        r, kd = nv // nk, nk * dk
        qkv, conv = t(b + "attn_qkv.weight"), t(b + "ssm_conv1d.weight")
        L.update(qkv=np.concatenate([qkv[:2 * kd], untile(qkv[2 * kd:], 0, nk, r, dv)]),
                 conv=np.concatenate([conv[:2 * kd], untile(conv[2 * kd:], 0, nk, r, dv)]),
                 z=untile(t(b + "attn_gate.weight"), 0, nk, r, dv), b=untile(t(b + "ssm_beta.weight"), 0, nk, r, 1),
                 a=untile(t(b + "ssm_alpha.weight"), 0, nk, r, 1), A=untile(t(b + "ssm_a"), 0, nk, r, 1),
                 dt_bias=untile(t(b + "ssm_dt.bias"), 0, nk, r, 1), norm=t(b + "ssm_norm.weight"),
                 out=untile(t(b + "ssm_out.weight"), 1, nk, r, dv))
    else:
        L.update(wq=t(b + "attn_q.weight"), wk=t(b + "attn_k.weight"), wv=t(b + "attn_v.weight"),
                 wo=t(b + "attn_output.weight"), q_norm=t(b + "attn_q_norm.weight"), k_norm=t(b + "attn_k_norm.weight"),
                 idx_qk=np.concatenate([t(b + "indexer.q_proj.weight"), t(b + "indexer.k_proj.weight")]),
                 idx_q_norm=t(b + "indexer.q_norm.weight"), idx_k_norm=t(b + "indexer.k_norm.weight"))
    if b + "ffn_gate_up_exps.weight" in gf.tensors:
        gu = t(b + "ffn_gate_up_exps.weight")
        f = gu.shape[1] // 2
        gate, up = gu[:, :f], gu[:, f:]
    else:
        gate, up = t(b + "ffn_gate_exps.weight"), t(b + "ffn_up_exps.weight")
    L.update(router=t(b + "ffn_gate_inp.weight"), exp_gate=gate, exp_up=up, exp_down=t(b + "ffn_down_exps.weight"),
             sh_gate=t(b + "ffn_gate_shexp.weight"), sh_up=t(b + "ffn_up_shexp.weight"),
             sh_down=t(b + "ffn_down_shexp.weight"), sh_inp=t(b + "ffn_gate_inp_shexp.weight").reshape(-1))
    return L


def load(path):
    return load_hf(path) if os.path.isdir(path) else load_gguf(path)
