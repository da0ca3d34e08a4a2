#!/usr/bin/python3
"""Inputs, weights and expected outputs of the qwen4_exp blocks (hyper-connections, QSA attention,
the PLE layer's math, the sigmoid-gated GDN, the MTP input) for qwen4_blocks_test.cpp, computed by
the independent numpy reference (tests/reference/qwen4_exp.py) at the tiny fixture config.

  qwen4_blocks_ref.py OUT_DIR

Every array is written as a 2-D float32 .npy (what the C++ reader takes). Values are drawn in float32
and handed to the reference as float64, so the reference sees exactly the numbers the C++ sees and
computes in float64. The QSA prompt is drawn until the indexer's top-k cut never falls on a tie or a
near tie (relative gap > 1e-3, far above f32 rounding), and at least one query drops its own block.
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))

import qwen4_exp as q4  # noqa: E402
import qwen4_exp_fixtures as fx  # noqa: E402

T = 24  # tokens per case: 6 blocks of 4 against a budget of 2 blocks


class Out:
    def __init__(self, path, seed):
        self.path = path
        self.rng = np.random.default_rng(seed)

    def save(self, name, a):
        a = np.asarray(a, dtype=np.float32)
        np.save(os.path.join(self.path, name + ".npy"), a.reshape(a.shape[0] if a.ndim > 1 else 1, -1))

    def draw(self, name, *shape, scale=1.0, offset=0.0):
        """f32 values, saved for C++, returned as float64 for the reference."""
        a = (offset + scale * self.rng.standard_normal(shape)).astype(np.float32)
        self.save(name, a)
        return a.astype(np.float64)

    def mat(self, name, rows, cols):
        return self.draw(name, rows, cols, scale=1.0 / np.sqrt(cols))

    def gain(self, name, n):
        return self.draw(name, n, scale=0.2, offset=1.0)


def hc_weights(o, cfg, p, inject=True):
    hd = cfg.hc * cfg.hidden
    return dict(norm=o.gain(p + "norm", hd), down=o.mat(p + "down", cfg.hc_rank, hd),
                up=o.mat(p + "up", hd, cfg.hc_rank), inject=o.mat(p + "inject", cfg.hc, hd) if inject else None)


def hyper_connections(o, cfg):
    bank = o.draw("hc_bank", T, cfg.hc * cfg.hidden)
    y = o.draw("hc_y", T, cfg.hidden)
    P = hc_weights(o, cfg, "hc_")
    m, inj = q4.hc_mix(cfg, P, bank)
    o.save("hc_m", m)
    o.save("hc_inject_out", inj)
    o.save("hc_added", q4.hc_add(bank, y, inj))
    mixer = hc_weights(o, cfg, "mixer_", inject=False)
    o.save("mixer_m", q4.hc_mix(cfg, mixer, bank)[0])


def indexer_margin(cfg, L, x, pos):
    """Smallest relative gap between the scores on either side of the top-k cut over all queries."""
    ni = cfg.idx_heads * cfg.idx_dim
    qk = x @ L["idx_qk"].T
    qi = q4.rope(q4.rms(qk[:, :ni].reshape(len(x), cfg.idx_heads, cfg.idx_dim), L["idx_q_norm"], cfg.eps), pos,
                 cfg.n_rot, cfg.theta)
    keys, r, gap = qk[:, ni:], cfg.idx_ratio, np.inf
    for t, p in enumerate(pos):
        nb = (p + 1) // r
        if nb <= cfg.idx_topk:
            continue
        pooled = keys[:nb * r].reshape(nb, r, -1).mean(axis=1)
        kb = q4.rope(q4.rms(pooled, L["idx_k_norm"], cfg.eps)[:, None, :], np.arange(nb) * r, cfg.n_rot,
                     cfg.theta)[:, 0]
        s = np.sort(np.maximum(qi[t] @ kb.T, 0.0).sum(axis=0))[::-1]
        gap = min(gap, (s[cfg.idx_topk - 1] - s[cfg.idx_topk]) / max(abs(s[0]), 1e-30))
    return gap


def qsa(o, cfg):
    H, hd, nh, nkv = cfg.hidden, cfg.head_dim, cfg.n_head, cfg.n_kv
    L = dict(wq=o.mat("qsa_wq", 2 * nh * hd, H), wk=o.mat("qsa_wk", nkv * hd, H), wv=o.mat("qsa_wv", nkv * hd, H),
             wo=o.mat("qsa_wo", H, nh * hd), q_norm=o.gain("qsa_q_norm", hd), k_norm=o.gain("qsa_k_norm", hd),
             idx_qk=o.mat("qsa_idx_qk", (cfg.idx_heads + 1) * cfg.idx_dim, H),
             idx_q_norm=o.gain("qsa_idx_q_norm", cfg.idx_dim), idx_k_norm=o.gain("qsa_idx_k_norm", cfg.idx_dim))
    pos = np.arange(T)
    for attempt in range(1000):
        x = (o.rng.standard_normal((T, H))).astype(np.float32).astype(np.float64)
        if indexer_margin(cfg, L, x, pos) < 1e-3:
            continue
        st = q4.State(cfg, layers=[3])
        out = q4.qsa(cfg, L, 3, x, pos, st)
        if st.stats["tie_at_cut"] == 0 and st.stats["own_block_dropped"] > 0:
            break
    else:
        raise SystemExit("qwen4_blocks_ref: no QSA input without indexer near-ties in 1000 draws")
    o.save("qsa_x", x)
    o.save("qsa_out", out)
    o.save("qsa_dense", q4.qsa(cfg, L, 3, x, pos, q4.State(cfg, layers=[3]), dense=True))
    return dict(qsa_attempts=attempt + 1, **{"qsa_" + k: v for k, v in st.stats.items()})


def ple(o, cfg):
    H, hd = cfg.hidden, cfg.hc * cfg.hidden
    P = dict(key=o.mat("ple_key", hd, cfg.ple_dim), value=o.mat("ple_value", H, cfg.ple_dim),
             norm_key=o.gain("ple_norm_key", hd), norm_query=o.gain("ple_norm_query", hd),
             norm_conv=o.gain("ple_norm_conv", hd), conv=o.draw("ple_conv", hd, cfg.ple_conv_k, scale=0.3))
    table = o.rng.standard_normal((cfg.ple_rows, cfg.ple_head_dim)).astype(np.float32).astype(np.float64)
    ids = fx.PROMPT[:T]
    gathered = table[q4.ngram_rows([cfg.eos] * (cfg.ngram_size - 1) + ids, cfg.ngram_size - 1, cfg)]
    o.save("ple_rows", gathered.reshape(T, cfg.ple_dim))       # what the table store hands the layer
    bank = o.draw("ple_bank", T, hd)
    st = q4.State(cfg, layers=[])
    o.save("ple_out", q4.ple_layer(cfg, P, lambda rows: table[rows], bank, ids, st))
    o.save("ple_conv_state", st.ple_conv)


def gdn(o, cfg):
    H, nk, dk, nv, dv = cfg.hidden, cfg.lin_nk, cfg.lin_dk, cfg.lin_nv, cfg.lin_dv
    C = 2 * nk * dk + nv * dv
    L = dict(qkv=o.mat("gdn_qkv", C, H), z=o.mat("gdn_z", nv * dv, H), b=o.mat("gdn_b", nv, H),
             a=o.mat("gdn_a", nv, H), conv=o.draw("gdn_conv", C, cfg.conv_k, scale=0.3),
             A=-np.exp(o.draw("gdn_a_log", nv, scale=0.5)), dt_bias=o.draw("gdn_dt_bias", nv, scale=0.5, offset=1.0),
             norm=o.gain("gdn_norm", dv), out=o.mat("gdn_out", H, nv * dv))
    o.save("gdn_a_neg_exp", L["A"])
    x = o.draw("gdn_x", T, H)
    xn = q4.rms(x, 1.0, cfg.eps)        # the C++ block norms its input; the test gives it gain 1
    for gate in ("sigmoid", "silu"):
        cfg.gdn_gate = gate
        st = q4.State(cfg, layers=[0])
        o.save("gdn_out_" + gate, x + q4.gdn(cfg, L, 0, xn, st))
    cfg.gdn_gate = "sigmoid"


def mtp(o, cfg):
    H, hd = cfg.hidden, cfg.hc * cfg.hidden

    class M:
        pass

    m = M()
    m.cfg = cfg
    m.mtp = dict(norm_e=o.gain("mtp_norm_e", H), norm_h=o.gain("mtp_norm_h", hd),
                 fc_embedding=o.mat("mtp_fc_embedding", H, H), fc_hidden=o.mat("mtp_fc_hidden", H, H))
    m.embed = o.draw("mtp_embedded", T, H)       # rows already looked up: ids are 0..T-1
    # streams of different scales: a per-stream norm (llama.cpp's reading) would give another result
    bank = o.draw("mtp_bank", T, cfg.hc, H) * np.arange(1, cfg.hc + 1)[None, :, None]
    o.save("mtp_bank", bank)
    bank = bank.reshape(T, hd)
    o.save("mtp_input", q4.mtp_input(m, np.arange(T), bank))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cfg = q4.Config(fx.text_config())
    o = Out(out, 43)
    hyper_connections(o, cfg)
    info = qsa(o, cfg)
    ple(o, cfg)
    gdn(o, cfg)
    mtp(o, cfg)
    info.update(hidden=cfg.hidden, hc=cfg.hc, rank=cfg.hc_rank, n_head=cfg.n_head, n_kv=cfg.n_kv,
                head_dim=cfg.head_dim, n_rot=cfg.n_rot, theta=cfg.theta, idx_heads=cfg.idx_heads,
                idx_dim=cfg.idx_dim, idx_ratio=cfg.idx_ratio, idx_topk=cfg.idx_topk, ple_dim=cfg.ple_dim,
                ple_conv_k=cfg.ple_conv_k, ngram_size=cfg.ngram_size, eps=cfg.eps, tokens=T)
    with open(os.path.join(out, "info.json"), "w") as f:
        json.dump(info, f)


if __name__ == "__main__":
    main()
