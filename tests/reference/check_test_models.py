#!/usr/bin/python3
"""Checks the C++ test-model generator against the independent numpy reference.

For every architecture (llama, qwen2, qwen3, qwen3_moe) and every format/type the generator writes:
  * the reference loads the file and produces finite, non-degenerate logits;
  * GGUF-F32 and safetensors-F32 of the same seed give the same logits (1e-5 relative): this is
    what catches q/k permutation or naming bugs in either writer, since the GGUF llama file stores
    permuted rows and is run with interleaved RoPE while the safetensors one uses rotate-half;
  * half types, GGML block types and MLX affine types stay close to F32 (their quantizers are
    checked through the reference's own dequantization);
  * the synthetic tokenizers agree between formats: the SPM vocabulary in the llama GGUF (read by
    the reference's tokenizer) and tokenizer.json (read by @huggingface/tokenizers under node,
    when installed) give the same ids.

Usage: check_test_models.py --tool build/splash [--keep DIR]   (runs `splash make-test-model`)
Exits non-zero on the first failed check.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import model as ref_model  # noqa: E402
import readers  # noqa: E402
import spm  # noqa: E402

TOKENS = [1, 17, 300, 42, 5, 99, 250, 7, 123, 64, 3, 211]
FAILED = []


def check(cond, msg):
    print(("ok    " if cond else "FAIL  ") + msg, flush=True)
    if not cond:
        FAILED.append(msg)


def make(tool, out, *flags):
    cmd = [tool, "make-test-model", "--out", out, *flags]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr}")
    return out


def logits(path):
    return ref_model.forward(ref_model.load(path), TOKENS)


def rel_err(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def sane(name, x):
    ok = bool(np.isfinite(x).all())
    spread = float(x.std(axis=-1).min())
    distinct = len({int(i) for i in x.argmax(axis=-1)})
    check(ok and spread > 0.3 and distinct > 1,
          f"{name}: finite logits, min per-position std {spread:.3f}, {distinct} distinct argmaxes")


def nmse(a, b):
    return float(((a - b) ** 2).mean() / (b ** 2).mean())


# Largest per-tensor weight nmse (reference dequantization vs the F32 file of the same seed) that
# each type may show on these near-normal weights; a block-layout bug gives ~1 or more.
WEIGHT_NMSE = {"f16": 1e-6, "bf16": 1e-4, "q8_0": 1e-4, "q6_k": 1e-3, "q5_k": 3e-3,
               "q4_k": 1.2e-2, "q4_k_m": 1.2e-2, "q4_0": 1.5e-2, "mlx4": 1.5e-2, "mlx8": 1e-4}


def weights_close(name, kind, qpath, fpath):
    if os.path.isdir(qpath):
        q, f = readers.SafetensorsDir(qpath), readers.SafetensorsDir(fpath)
        names = [n for n in f.where if n.endswith(".weight") and len(f.raw(n)[0].shape) == 2]
        pairs = ((q.tensor(n), f.tensor(n)) for n in names)
    else:
        q, f = readers.GGUFFile(qpath), readers.GGUFFile(fpath)
        names = [n for n in q.tensors if q.type_name(n) != "F32"]
        pairs = ((q.tensor(n), f.tensor(n)) for n in names)
    worst = max(nmse(x, y) for x, y in pairs)
    check(len(names) > 0 and worst < WEIGHT_NMSE[kind],
          f"{name}: {len(names)} matrices, worst weight nmse {worst:.2e} < {WEIGHT_NMSE[kind]:.0e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--keep", help="write the models here and keep them")
    a = ap.parse_args()
    tmp = a.keep or tempfile.mkdtemp(prefix="splash_testmodels_")
    os.makedirs(tmp, exist_ok=True)
    p = lambda n: os.path.join(tmp, n)
    try:
        for preset in ("tiny-llama", "tiny-qwen2", "tiny-qwen3"):
            base = ["--preset", preset, "--seed", "11"]
            g = make(a.tool, p(preset + ".gguf"), *base, "--type", "f32")
            s = make(a.tool, p(preset + "-f32"), *base, "--format", "safetensors", "--dtype", "f32")
            lg, ls = logits(g), logits(s)
            sane(f"{preset} gguf f32", lg)
            sane(f"{preset} safetensors f32", ls)
            e = rel_err(lg, ls)
            check(e < 1e-5, f"{preset}: GGUF-F32 vs safetensors-F32 logits, max rel err {e:.2e} < 1e-5")
            other = make(a.tool, p(preset + "-seed12.gguf"), "--preset", preset, "--seed", "12")
            check(rel_err(logits(other), lg) > 1e-2, f"{preset}: another seed gives other logits")
            for t, tol in (("f16", 1e-5), ("bf16", 1e-3), ("q8_0", 2e-3), ("q4_0", 0.3)):
                qf = make(a.tool, p(f"{preset}-{t}.gguf"), *base, "--type", t)
                weights_close(f"{preset} gguf {t}", t, qf, g)
                x = logits(qf)
                sane(f"{preset} gguf {t}", x)
                check(nmse(x, lg) < tol, f"{preset} gguf {t} vs f32: nmse {nmse(x, lg):.2e} < {tol}")
            for dt, tol in (("bf16", 1e-3), ("f16", 1e-5)):
                x = logits(make(a.tool, p(f"{preset}-{dt}"), *base, "--format", "safetensors", "--dtype", dt))
                check(nmse(x, ls) < tol, f"{preset} safetensors {dt} vs f32: nmse {nmse(x, ls):.2e} < {tol}")
            for bits, group, tol in (("4", "64", 0.3), ("8", "32", 2e-3)):
                qd = make(a.tool, p(f"{preset}-mlx{bits}"), *base, "--mlx-bits", bits, "--mlx-group", group)
                weights_close(f"{preset} mlx {bits}-bit", "mlx" + bits, qd, s)
                x = logits(qd)
                sane(f"{preset} mlx {bits}-bit", x)
                check(nmse(x, ls) < tol, f"{preset} mlx {bits}-bit g{group} vs f32: nmse {nmse(x, ls):.2e} < {tol}")

        # K-quants need rows that are multiples of 256.
        for preset in ("tiny-llama-k", "tiny-qwen3-k"):
            base = ["--preset", preset, "--seed", "5"]
            fg = make(a.tool, p(preset + "-f32.gguf"), *base, "--type", "f32")
            f = logits(fg)
            s = logits(make(a.tool, p(preset + "-f32"), *base, "--format", "safetensors"))
            check(rel_err(f, s) < 1e-5, f"{preset}: GGUF-F32 vs safetensors-F32 max rel err {rel_err(f, s):.2e}")
            # q4_k_m: llama-quantize's mix (Q4_K and Q6_K matrices in one file); its worst matrix is Q4_K.
            for t, tol in (("q8_0", 2e-3), ("q6_k", 1e-2), ("q5_k", 4e-2), ("q4_k", 0.15), ("q4_k_m", 0.15)):
                qf = make(a.tool, p(f"{preset}-{t}.gguf"), *base, "--type", t)
                weights_close(f"{preset} gguf {t}", t, qf, fg)
                x = logits(qf)
                sane(f"{preset} gguf {t}", x)
                check(nmse(x, f) < tol, f"{preset} gguf {t} vs f32: nmse {nmse(x, f):.2e} < {tol}")

        check_moe(a.tool, p)
        check_hybrids(a.tool, p)
        check_hybrid_moe(a.tool, p)
        check_tokenizers(a.tool, p)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if FAILED:
        print(f"{len(FAILED)} check(s) failed")
        return 1
    print("all test-model checks passed")
    return 0


def check_moe(tool, p):
    """qwen3_moe: stacked experts (GGUF ffn_*_exps, MLX switch_mlp) and one tensor per expert (plain
    safetensors) hold the same values; formats agree; quantized files stay near F32. Top-k routing
    is discontinuous, so quantized logits are compared with looser bounds than the dense models'
    (a weight perturbation flips near-tie expert choices)."""
    for shared in ("0", "128"):
        name = "tiny-qwen3-moe" + ("-shared" if shared != "0" else "")
        base = ["--preset", "tiny-qwen3-moe", "--seed", "11", "--shared-expert-ffn", shared]
        g = make(tool, p(name + ".gguf"), *base, "--type", "f32")
        s = make(tool, p(name + "-f32"), *base, "--format", "safetensors")
        gg, st = readers.GGUFFile(g), readers.SafetensorsDir(s)
        for proj, gname in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")):
            stacked = gg.tensor(f"blk.0.{gname}.weight")
            per = np.stack([st.tensor(f"model.layers.0.mlp.experts.{e}.{proj}.weight") for e in range(stacked.shape[0])])
            check(stacked.shape == per.shape and np.array_equal(stacked, per),
                  f"{name}: GGUF {gname} {stacked.shape} == safetensors mlp.experts.*.{proj}")
        check("blk.1.ffn_gate_inp.weight" not in gg.tensors and "blk.1.ffn_gate.weight" in gg.tensors,
              f"{name}: layer 1 (mlp_only_layers) is a dense MLP in GGUF")
        check(gg.type_name("blk.0.ffn_gate_inp.weight") == "F32", f"{name}: GGUF router stays F32")
        lg, ls = logits(g), logits(s)
        sane(f"{name} gguf f32", lg)
        check(rel_err(lg, ls) < 1e-5, f"{name}: GGUF-F32 vs safetensors-F32 logits, max rel err {rel_err(lg, ls):.2e}")
        other = make(tool, p(name + "-seed12.gguf"), "--preset", "tiny-qwen3-moe", "--seed", "12",
                     "--shared-expert-ffn", shared)
        check(rel_err(logits(other), lg) > 1e-2, f"{name}: another seed gives other logits")
        for t, tol in (("q8_0", 5e-3), ("q4_0", 0.5)):
            qf = make(tool, p(f"{name}-{t}.gguf"), *base, "--type", t)
            weights_close(f"{name} gguf {t}", t, qf, g)
            x = logits(qf)
            sane(f"{name} gguf {t}", x)
            check(nmse(x, lg) < tol, f"{name} gguf {t} vs f32: nmse {nmse(x, lg):.2e} < {tol}")
        for bits, group, tol in (("4", "64", 0.5), ("8", "32", 5e-3)):
            qd = make(tool, p(f"{name}-mlx{bits}"), *base, "--mlx-bits", bits, "--mlx-group", group)
            q = readers.SafetensorsDir(qd)
            stacked = q.tensor("model.layers.2.mlp.switch_mlp.down_proj.weight")
            per = np.stack([st.tensor(f"model.layers.2.mlp.experts.{e}.down_proj.weight") for e in range(stacked.shape[0])])
            e = nmse(stacked, per)
            check(e < WEIGHT_NMSE["mlx" + bits], f"{name} mlx {bits}-bit: stacked switch_mlp experts nmse {e:.2e}")
            x = logits(qd)
            sane(f"{name} mlx {bits}-bit", x)
            check(nmse(x, ls) < tol, f"{name} mlx {bits}-bit g{group} vs f32: nmse {nmse(x, ls):.2e} < {tol}")


def check_hybrids(tool, p):
    """qwen3_next / qwen3_5: GGUF (llama.cpp names, 1 + w norms, A = -exp(A_log), qwen35 value heads
    tiled) against safetensors of the same seed; layer_types == full_attention_interval; mixed MLX
    bits; value-head tiling exercised (2 key heads, 4 value heads)."""
    for preset in ("tiny-qwen3-next", "tiny-qwen3-5"):
        base = ["--preset", preset, "--seed", "11"]
        g = make(tool, p(preset + ".gguf"), *base, "--type", "f32")
        s = make(tool, p(preset + "-f32"), *base, "--format", "safetensors")
        lt = make(tool, p(preset + "-lt"), *base, "--format", "safetensors", "--layer-types")
        lg, ls = logits(g), logits(s)
        sane(f"{preset} gguf f32", lg)
        sane(f"{preset} safetensors f32", ls)
        e = rel_err(lg, ls)
        check(e < 1e-5, f"{preset}: GGUF-F32 vs safetensors-F32 logits, max rel err {e:.2e} < 1e-5")
        e = rel_err(logits(lt), ls)
        check(e == 0.0, f"{preset}: config layer_types == full_attention_interval (max rel err {e:.2e})")
        other = make(tool, p(preset + "-seed12.gguf"), "--preset", preset, "--seed", "12")
        check(rel_err(logits(other), lg) > 1e-2, f"{preset}: another seed gives other logits")
        qf = make(tool, p(preset + "-q8_0.gguf"), *base, "--type", "q8_0")
        weights_close(f"{preset} gguf q8_0", "q8_0", qf, g)
        sane(f"{preset} gguf q8_0", logits(qf))
        md = make(tool, p(preset + "-mlx48"), *base, "--mlx-bits", "4", "--mlx-linear-bits", "8")
        with open(os.path.join(md, "config.json")) as f:
            q = json.load(f)["quantization"]
        mixed = [k for k, v in q.items() if isinstance(v, dict) and v.get("bits") == 8]
        check(len(mixed) > 0 and all(".linear_attn." in k for k in mixed),
              f"{preset} mlx: {len(mixed)} linear-attention modules declared 8-bit in a 4-bit model")
        sane(f"{preset} mlx 4/8-bit", logits(md))
        # Per tensor: 8-bit accuracy for the linear-attention projections, 4-bit for the rest. (The
        # logits are no measure here: 4-bit weights move these random hybrids' logits by nmse ~0.7,
        # the gated norms amplifying small changes of the delta-rule output.)
        qd, fd = readers.SafetensorsDir(md), readers.SafetensorsDir(s)
        names = [n for n in fd.where if n.endswith(".weight") and len(fd.raw(n)[0].shape) == 2]
        err = {n: nmse(qd.tensor(n), fd.tensor(n)) for n in names}
        lin = max(e for n, e in err.items() if ".linear_attn." in n)
        rest = [e for n, e in err.items() if ".linear_attn." not in n]
        check(lin < WEIGHT_NMSE["mlx8"] and WEIGHT_NMSE["mlx8"] < max(rest) < WEIGHT_NMSE["mlx4"],
              f"{preset} mlx 4/8-bit: linear-attention weight nmse {lin:.2e} (8-bit), others up to {max(rest):.2e} (4-bit)")


def check_hybrid_moe(tool, p):
    """The hybrids' MoE variants (Qwen3-Next, Qwen3.5-MoE): GGUF (stacked ffn_*_exps, qwen35moe)
    == safetensors with one tensor per expert == MLX switch_mlp stacked; the dense layer of
    tiny-qwen3-next-moe (mlp_only_layers) has no router in GGUF; mixed MLX bits keep the router and
    the shared-expert gate at 8 bits with the linear attention."""
    for preset, gguf_arch in (("tiny-qwen3-next-moe", "qwen3next"), ("tiny-qwen3-5-moe", "qwen35moe")):
        base = ["--preset", preset, "--seed", "11"]
        g = make(tool, p(preset + ".gguf"), *base, "--type", "f32")
        s = make(tool, p(preset + "-f32"), *base, "--format", "safetensors")
        gf = readers.GGUFFile(g)
        check(gf.metadata["general.architecture"] == gguf_arch, f"{preset}: GGUF architecture {gguf_arch}")
        sd = readers.SafetensorsDir(s)
        dense = {1} if preset == "tiny-qwen3-next-moe" else set()
        n_layers = int(sd.config["num_hidden_layers"])
        routers = {il for il in range(n_layers) if f"blk.{il}.ffn_gate_inp.weight" in gf.tensors}
        check(routers == set(range(n_layers)) - dense, f"{preset}: GGUF routers on layers {sorted(routers)}")
        check(sd.has("model.layers.0.mlp.experts.7.down_proj.weight") and
              not sd.has("model.layers.0.mlp.switch_mlp.down_proj.weight"),
              f"{preset}: plain safetensors store one tensor per expert")
        lg, ls = logits(g), logits(s)
        sane(f"{preset} gguf f32", lg)
        e = rel_err(lg, ls)
        check(e < 1e-5, f"{preset}: GGUF-F32 vs per-expert safetensors-F32 logits, max rel err {e:.2e} < 1e-5")
        fu = make(tool, p(preset + "-fused"), *base, "--format", "safetensors", "--fused-experts")
        check(readers.SafetensorsDir(fu).has("model.layers.0.mlp.experts.gate_up_proj"),
              f"{preset}: --fused-experts writes mlp.experts.gate_up_proj")
        e = rel_err(logits(fu), ls)
        check(e == 0.0, f"{preset}: fused gate_up_proj experts == per-expert tensors (max rel err {e:.2e})")
        other = make(tool, p(preset + "-seed12.gguf"), "--preset", preset, "--seed", "12")
        check(rel_err(logits(other), lg) > 1e-2, f"{preset}: another seed gives other logits")
        qf = make(tool, p(preset + "-q8_0.gguf"), *base, "--type", "q8_0")
        weights_close(f"{preset} gguf q8_0", "q8_0", qf, g)
        md = make(tool, p(preset + "-mlx48"), *base, "--mlx-bits", "4", "--mlx-linear-bits", "8")
        qd = readers.SafetensorsDir(md)
        check(qd.has("model.layers.0.mlp.switch_mlp.gate_proj.weight"), f"{preset} mlx: stacked switch_mlp experts")
        q = qd.config["quantization"]
        mixed = [k for k, v in q.items() if isinstance(v, dict) and v.get("bits") == 8]
        ok = all(".linear_attn." in k or k.endswith(".mlp.gate") or k.endswith(".shared_expert_gate") for k in mixed)
        check(ok and any(k.endswith(".mlp.gate") for k in mixed),
              f"{preset} mlx: 8-bit modules are the linear attention, routers and shared-expert gates ({len(mixed)})")
        sane(f"{preset} mlx 4/8-bit", logits(md))


def check_tokenizers(tool, p):
    strings = ["The little model reads the text.", "Hello, world! 2024", "  two  spaces",
               "caf\u00e9 na\u00efve \u65e5\u672c", "The assistant answers the question."]
    g = readers.GGUFFile(make(tool, p("tok-llama.gguf"), "--preset", "tiny-llama"))
    v = spm.SpmVocab.from_gguf_metadata(g.metadata)
    ref_ids = [v.encode(s, bos=False) for s in strings]
    check(len(g.metadata["tokenizer.ggml.tokens"]) >= 300, "llama GGUF carries the synthetic SPM vocabulary")
    check(all(v.decode([1] + ids) == s for ids, s in zip(ref_ids, strings)),
          "SPM vocabulary round-trips text (byte fallback for non-ASCII)")
    check(sum(len(i) for i in ref_ids) < sum(len(s) for s in strings) * 0.8,
          "SPM merges shorten the token sequences")
    node = shutil.which("node")
    if not node:
        print("skip  node not found: tokenizer.json not compared")
        return
    sfile = p("strings.json")
    with open(sfile, "w") as f:
        json.dump(strings, f)
    for preset in ("tiny-llama", "tiny-qwen3"):
        d = make(tool, p(f"tok-{preset}"), "--preset", preset, "--format", "safetensors")
        r = subprocess.run([node, os.path.join(HERE, "hf_encode.mjs"), d, sfile], capture_output=True, text=True)
        if r.returncode == 77:
            print("skip  @huggingface/tokenizers not installed")
            return
        check(r.returncode == 0, f"{preset}: @huggingface/tokenizers loads the generated tokenizer.json {r.stderr[:300]}")
        if r.returncode != 0:
            continue
        hf_ids = json.loads(r.stdout)
        if preset == "tiny-llama":
            check(hf_ids == ref_ids, f"tiny-llama: tokenizer.json (HF BPE) == GGUF SPM vocabulary on {len(strings)} strings"
                  + ("" if hf_ids == ref_ids else f" {hf_ids} vs {ref_ids}"))
        else:
            with open(os.path.join(d, "tokenizer.json")) as f:
                vocab = json.load(f)["model"]["vocab"]
            inv = {i: t for t, i in vocab.items()}
            check(all(len(ids) > 0 and all(i in inv for i in ids) for ids in hf_ids),
                  "tiny-qwen3: byte-level BPE encodes every string with vocabulary ids")
            check(sum(len(i) for i in hf_ids) < sum(len(s.encode()) for s in strings) * 0.8,
                  "tiny-qwen3: merges shorten the byte sequences")


if __name__ == "__main__":
    sys.exit(main())
