"""Writes what tests/unit/ple/ple_test.cpp checks the C++ PLE table against, all of it from the
independent numpy reference (tests/reference/qwen4_exp*.py), none from Splash's code:

  fixtures/{hf,hf_fp8,gguf}   the tiny qwen4_exp checkpoints of qwen4_exp_fixtures.py (8 table shards
                              in one safetensors file; the FP8 table with its shared scale; GGUF F32),
                              and hf_fp8_spread: the FP8 table's tensors alone, spread over 4 files
  rows_{hf,hf_fp8,gguf}.f32   the table as qwen4_exp_load.py reads it ([rows, head_dim] f32, fp8 scale
                              applied), the values every placement must return byte for byte
  hash.json                   n-gram row ids from qwen4_exp.ngram_rows for random token sequences
                              (with EOS runs) under the tiny config and the shipped geometry

Usage: ple_reference.py OUT_DIR
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "reference"))

import qwen4_exp as q4  # noqa: E402
import qwen4_exp_fixtures as fx  # noqa: E402
import qwen4_exp_load as q4load  # noqa: E402


class HashCfg:
    def __init__(self, vocab, eos, base, div, seed, n=3, hp=8):
        self.vocab, self.eos, self.base, self.div, self.seed = vocab, eos, base, div, seed
        self.ngram_size, self.heads_per_ngram = n, hp
        self.multipliers = q4.layer_multipliers(vocab, n, 0, seed)
        self.head_sizes, self.head_offsets, self.ple_rows = q4.head_geometry(base, (n - 1) * hp, 0, div)


def hash_case(name, cfg, rng, n_seqs, length):
    seqs = []
    for _ in range(n_seqs):
        toks = [int(t) for t in rng.integers(0, cfg.vocab, size=length)]
        for i in range(length):                 # EOS runs, pairs included
            if rng.random() < 0.15:
                toks[i] = cfg.eos
        rows = q4.ngram_rows([cfg.eos] * (cfg.ngram_size - 1) + toks, cfg.ngram_size - 1, cfg)
        seqs.append({"tokens": toks, "rows": rows.reshape(-1).tolist()})
    return {"name": name, "vocab": cfg.vocab, "eos": cfg.eos, "base": cfg.base, "divisible_by": cfg.div,
            "seed": cfg.seed, "ngram_size": cfg.ngram_size, "heads_per_ngram": cfg.heads_per_ngram,
            "multipliers": cfg.multipliers, "head_sizes": cfg.head_sizes, "head_offsets": cfg.head_offsets,
            "padded_rows": cfg.ple_rows, "sequences": seqs}


def main():
    out = sys.argv[1]
    fix = os.path.join(out, "fixtures")
    r, cfg = fx.make_raw(fx.SEED)
    fx.write_hf(os.path.join(fix, "hf"), fx.hf_tensors(r, cfg, False), fx.full_config())
    c8 = fx.full_config()
    c8["text_config"]["ple_embedding_dtype"] = "float8_e4m3fn"
    fx.write_hf(os.path.join(fix, "hf_fp8"), fx.hf_tensors(r, cfg, True), c8)
    # Only the PLE tensors of the FP8 export, spread over 4 files so the shards (and the scale) sit
    # in different files: the table locator needs no other tensor.
    t8 = {k: v for k, v in fx.hf_tensors(r, cfg, True).items() if q4load.PLE_PREFIX in k}
    fx.write_hf(os.path.join(fix, "hf_fp8_spread"), t8, c8, n_files=4)
    os.makedirs(os.path.join(fix, "gguf"), exist_ok=True)
    fx.write_gguf(os.path.join(fix, "gguf", "model.gguf"), fx.gguf_metadata(cfg), fx.gguf_tensors(r, cfg))
    for name, path in (("hf", "hf"), ("hf_fp8", "hf_fp8"), ("gguf", "gguf/model.gguf")):
        rows = q4load.load(os.path.join(fix, path)).ple["table_rows"]
        f32 = rows.astype(np.float32)
        if not np.array_equal(f32.astype(np.float64), rows):   # the table must be exact in f32
            raise ValueError(f"{name}: the reference table is not exact in f32")
        f32.tofile(os.path.join(out, f"rows_{name}.f32"))
    rng = np.random.default_rng(43)
    tiny = HashCfg(cfg.vocab, cfg.eos, cfg.ngram_base, cfg.ngram_div, cfg.seed)
    shipped = HashCfg(248320, 248044, 20000000, 128, 1234)     # qwen4-exp.md §1: the shipped text_config
    cases = [hash_case("tiny", tiny, rng, 4, 40), hash_case("shipped", shipped, rng, 4, 40)]
    with open(os.path.join(out, "hash.json"), "w") as f:
        json.dump({"cases": cases, "table": {"rows": cfg.ple_rows, "head_dim": cfg.ple_head_dim,
                                             "logical_rows": cfg.head_offsets[-1] + cfg.head_sizes[-1],
                                             "shards": cfg.split_parts}}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
