#!/usr/bin/python3
"""Self-tests of the numpy reference (python3 -m unittest, run with /usr/bin/python3).

The block encoders below place chosen integer codes element by element from the layout tables
(position -> byte, bit), a different formulation from the vectorized decoders in ggml_dequant.py,
so a traversal-order mistake in either shows up as a mismatch.
"""

import json
import os
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ggml_dequant as gd  # noqa: E402
import model as ref_model  # noqa: E402
import readers  # noqa: E402
import spm  # noqa: E402
import testfiles  # noqa: E402

DEMO = os.path.expanduser(os.environ.get("SPLASH_DEMO_DIR", "~/.cache/splash/demo"))
VOCAB = os.environ.get("SPLASH_VOCAB_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../shared/reference/vocab"))


def f16b(x):
    return np.array([x], dtype="<f2").view(np.uint8)


class BlockTests(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(7)

    def test_q4_0_q8_0_known_values(self):
        # Q4_0: d = 0.5; byte j holds value j (low nibble) and value j+16 (high nibble).
        qs = np.array([(j & 15) | ((15 - j) << 4) for j in range(16)], dtype=np.uint8)
        blk = np.concatenate([f16b(0.5), qs])
        want = [(j - 8) * 0.5 for j in range(16)] + [(15 - j - 8) * 0.5 for j in range(16)]
        np.testing.assert_array_equal(gd.dequantize("Q4_0", blk, 32), want)
        q8 = np.arange(-16, 16, dtype=np.int8)
        blk = np.concatenate([f16b(-0.25), q8.view(np.uint8)])
        np.testing.assert_array_equal(gd.dequantize("Q8_0", blk, 32), q8 * -0.25)

    def test_q4_1_q5_0_q5_1(self):
        codes = self.rng.integers(0, 32, 32)
        qs = np.array([(codes[j] & 15) | ((codes[j + 16] & 15) << 4) for j in range(16)], np.uint8)
        qh = sum(int(codes[j] >> 4) << j for j in range(32))
        qhb = np.array([qh], dtype="<u4").view(np.uint8)
        blk = np.concatenate([f16b(0.125), qhb, qs])
        np.testing.assert_array_equal(gd.dequantize("Q5_0", blk, 32), (codes - 16) * 0.125)
        blk = np.concatenate([f16b(0.125), f16b(-1.0), qhb, qs])
        np.testing.assert_array_equal(gd.dequantize("Q5_1", blk, 32), codes * 0.125 - 1.0)
        c4 = codes & 15
        qs4 = np.array([c4[j] | (c4[j + 16] << 4) for j in range(16)], np.uint8)
        blk = np.concatenate([f16b(2.0), f16b(0.5), qs4])
        np.testing.assert_array_equal(gd.dequantize("Q4_1", blk, 32), c4 * 2.0 + 0.5)

    @staticmethod
    def pack_k4_scales(sc, mn):
        b = np.zeros(12, dtype=np.int64)
        for j in range(8):
            if j < 4:
                b[j] |= sc[j] & 63
                b[j + 4] |= mn[j] & 63
            else:
                b[j + 4] |= (sc[j] & 15) | ((mn[j] & 15) << 4)
                b[j - 4] |= (sc[j] >> 4) << 6
                b[j] |= (mn[j] >> 4) << 6
        return b.astype(np.uint8)

    def test_q4_k_q5_k(self):
        sc = self.rng.integers(0, 64, 8)
        mn = self.rng.integers(0, 64, 8)
        codes = self.rng.integers(0, 32, 256)
        qs = np.zeros(128, dtype=np.int64)
        qh = np.zeros(32, dtype=np.int64)
        for e in range(256):
            sb = e // 32
            qs[32 * (sb // 2) + e % 32] |= (codes[e] & 15) << (4 * (sb % 2))
            qh[e % 32] |= (codes[e] >> 4) << sb
        d, dmin = 0.0625, 0.03125
        want5 = np.array([d * sc[e // 32] * codes[e] - dmin * mn[e // 32] for e in range(256)])
        want4 = np.array([d * sc[e // 32] * (codes[e] & 15) - dmin * mn[e // 32] for e in range(256)])
        head = np.concatenate([f16b(d), f16b(dmin), self.pack_k4_scales(sc, mn)])
        blk4 = np.concatenate([head, qs.astype(np.uint8)])
        blk5 = np.concatenate([head, qh.astype(np.uint8), qs.astype(np.uint8)])
        self.assertEqual(blk4.size, 144)
        self.assertEqual(blk5.size, 176)
        np.testing.assert_allclose(gd.dequantize("Q4_K", blk4, 256), want4, rtol=0, atol=1e-12)
        np.testing.assert_allclose(gd.dequantize("Q5_K", blk5, 256), want5, rtol=0, atol=1e-12)

    def test_q6_k(self):
        codes = self.rng.integers(0, 64, 256)
        sc = self.rng.integers(-128, 128, 16)
        ql = np.zeros(128, dtype=np.int64)
        qh = np.zeros(64, dtype=np.int64)
        for e in range(256):
            h, v = divmod(e, 128)
            k, l = divmod(v, 32)
            ql[64 * h + l + 32 * (k % 2)] |= (codes[e] & 15) << (4 * (k // 2))
            qh[32 * h + l] |= (codes[e] >> 4) << (2 * k)
        d = 0.01
        dd = float(np.float16(d))
        want = np.array([dd * sc[e // 16] * (codes[e] - 32) for e in range(256)])
        blk = np.concatenate([ql.astype(np.uint8), qh.astype(np.uint8),
                              sc.astype(np.int8).view(np.uint8), f16b(d)])
        self.assertEqual(blk.size, 210)
        np.testing.assert_allclose(gd.dequantize("Q6_K", blk, 256), want, rtol=0, atol=1e-12)

    def test_q2_k_q3_k(self):
        low = self.rng.integers(0, 4, 256)
        high = self.rng.integers(0, 2, 256)
        qs = np.zeros(64, dtype=np.int64)
        hm = np.zeros(32, dtype=np.int64)
        for e in range(256):
            half, v = divmod(e, 128)
            plane, w = divmod(v, 32)
            qs[32 * half + w] |= low[e] << (2 * plane)
            hm[w] |= high[e] << (4 * half + plane)
        sc4 = self.rng.integers(0, 16, 16)
        mn4 = self.rng.integers(0, 16, 16)
        d, dmin = 0.5, 0.25
        blk2 = np.concatenate([(sc4 | (mn4 << 4)).astype(np.uint8), qs.astype(np.uint8), f16b(d), f16b(dmin)])
        want2 = np.array([d * sc4[e // 16] * low[e] - dmin * mn4[e // 16] for e in range(256)])
        np.testing.assert_allclose(gd.dequantize("Q2_K", blk2, 256), want2, rtol=0, atol=1e-12)
        sc6 = self.rng.integers(0, 64, 16)  # stored with a bias of 32
        sb = np.zeros(12, dtype=np.int64)
        for i in range(16):
            if i < 8:
                sb[i] |= sc6[i] & 15
            else:
                sb[i - 8] |= (sc6[i] & 15) << 4
            sb[8 + i % 4] |= (sc6[i] >> 4) << (2 * (i // 4))
        blk3 = np.concatenate([hm.astype(np.uint8), qs.astype(np.uint8), sb.astype(np.uint8), f16b(d)])
        self.assertEqual(blk3.size, 110)
        want3 = np.array([d * (sc6[e // 16] - 32) * (low[e] - (0 if high[e] else 4)) for e in range(256)])
        np.testing.assert_allclose(gd.dequantize("Q3_K", blk3, 256), want3, rtol=0, atol=1e-12)

    def test_half_types(self):
        x = np.array([1.5, -2.25, 65504.0, 2.0 ** -24], dtype=np.float32)
        np.testing.assert_array_equal(gd.dequantize("F16", x.astype("<f2").view(np.uint8), 4), x)
        bf = (x.view(np.uint32) >> 16).astype("<u2")
        want = (bf.astype(np.uint32) << 16).view(np.float32)
        np.testing.assert_array_equal(gd.dequantize("BF16", bf.view(np.uint8), 4), want)
        self.assertEqual(want[0], 1.5)

    def test_mlx_packing(self):
        # 4-bit: first value in the lowest nibble of the first word.
        codes = readers.mlx_pack(np.array([[1, 2, 3, 4, 5, 6, 7, 8]]), 4)
        self.assertEqual(int(codes[0, 0]), 0x87654321)
        # 8-bit: first value in the lowest byte.
        self.assertEqual(int(readers.mlx_pack(np.array([[1, 2, 3, 4]]), 8)[0, 0]), 0x04030201)
        # 3-bit: eight values fill three bytes, value i at bits [3i, 3i+3).
        q = np.array([[1, 2, 3, 4, 5, 6, 7, 0] * 4])
        word = readers.mlx_pack(q, 3)[0, 0]
        self.assertEqual(int(word) & 0xFFFFFF, sum(v << (3 * i) for i, v in enumerate(q[0, :8])))
        for bits in (2, 3, 4, 5, 6, 8):
            q = self.rng.integers(0, 1 << bits, (3, 64))
            np.testing.assert_array_equal(readers.mlx_unpack(readers.mlx_pack(q, bits), bits, 64), q)


class TokenizerTests(unittest.TestCase):
    @unittest.skipUnless(os.path.exists(os.path.join(VOCAB, "ggml-vocab-llama-spm.gguf")), "no vocab data")
    def test_llama_spm_matches_llama_cpp_reference(self):
        g = readers.GGUFFile(os.path.join(VOCAB, "ggml-vocab-llama-spm.gguf"))
        v = spm.SpmVocab.from_gguf_metadata(g.metadata)
        with open(os.path.join(VOCAB, "ggml-vocab-llama-spm.gguf.inp"), encoding="utf-8") as f:
            inputs = f.read().split("\n__ggml_vocab_test__\n")
        with open(os.path.join(VOCAB, "ggml-vocab-llama-spm.gguf.out")) as f:
            outputs = f.read().split("\n")
        self.assertGreater(len(inputs), 30)
        for text, want in zip(inputs, outputs):
            self.assertEqual(v.encode(text, bos=False), [int(t) for t in want.split()], repr(text))


class RopeLayoutTests(unittest.TestCase):
    """The same weights written as HF safetensors (rotate-half) and as GGUF (llama: q/k permuted and
    interleaved RoPE; qwen: unpermuted and NEOX) must give the same logits."""

    def check_arch(self, arch, head_dim=16):
        cfg, w = testfiles.tiny_weights(arch, seed=3, head_dim=head_dim)
        toks = [1, 5, 9, 77, 3, 100, 42, 8]
        with tempfile.TemporaryDirectory() as d:
            testfiles.write_hf_dir(os.path.join(d, "hf"), cfg, w)
            testfiles.write_hf_dir(os.path.join(d, "sharded"), cfg, w, shards=3)
            testfiles.write_gguf_from_hf(os.path.join(d, "m.gguf"), cfg, w)
            a = ref_model.forward(ref_model.load(os.path.join(d, "hf")), toks)
            b = ref_model.forward(ref_model.load(os.path.join(d, "m.gguf")), toks)
            c = ref_model.forward(ref_model.load(os.path.join(d, "sharded")), toks)
        self.assertGreater(np.std(a), 0.05)
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-9)
        np.testing.assert_array_equal(c, a)
        return a

    def test_llama(self):
        self.check_arch("llama")

    def test_qwen2_bias(self):
        self.check_arch("qwen2")

    def test_qwen3_head_dim(self):
        self.check_arch("qwen3", head_dim=32)  # 4 heads * 32 != dim 64

    def test_permutation_matters(self):
        # Without the permutation, a llama GGUF read with interleaved RoPE must differ.
        cfg, w = testfiles.tiny_weights("llama", seed=3)
        with tempfile.TemporaryDirectory() as d:
            testfiles.write_hf_dir(os.path.join(d, "hf"), cfg, w)
            m = ref_model.load(os.path.join(d, "hf"))
            a = ref_model.forward(m, [1, 2, 3, 4])
            m.rope = "interleaved"
            b = ref_model.forward(m, [1, 2, 3, 4])
        self.assertGreater(np.abs(a[1:] - b[1:]).max(), 1e-3)
        np.testing.assert_allclose(a[0], b[0], atol=1e-12)  # position 0: no rotation

    def test_mlx_quantized(self):
        cfg, w = testfiles.tiny_weights("qwen3", seed=5, head_dim=32)
        toks = [3, 1, 4, 1, 5, 9, 2, 6]
        for bits, group in ((4, 64), (8, 32), (3, 32), (6, 64)):
            with tempfile.TemporaryDirectory() as d:
                dense = testfiles.write_mlx_dir(os.path.join(d, "q"), cfg, w, bits, group)
                testfiles.write_hf_dir(os.path.join(d, "dense"), cfg, dense)
                q = ref_model.forward(ref_model.load(os.path.join(d, "q")), toks)
                r = ref_model.forward(ref_model.load(os.path.join(d, "dense")), toks)
            np.testing.assert_allclose(q, r, rtol=0, atol=1e-5, err_msg=f"bits {bits}")
            self.assertGreater(np.std(r), 0.05)


class MoeTests(unittest.TestCase):
    """moe.py's routing and expert mixing against closed forms."""

    def setUp(self):
        rng = np.random.default_rng(3)
        E, d, f = 6, 16, 8
        self.h = rng.standard_normal((5, d))
        self.L = dict(moe_router=rng.standard_normal((E, d)), moe_gate=rng.standard_normal((E, f, d)),
                      moe_up=rng.standard_normal((E, f, d)), moe_down=rng.standard_normal((E, d, f)),
                      moe_sh_gate=None, moe_sh_up=None, moe_sh_down=None, moe_sh_inp=None)

    @staticmethod
    def mlp(g, u, dn, h):
        a = h @ g.T
        return (a / (1 + np.exp(-a)) * (h @ u.T)) @ dn.T

    def test_all_experts_is_the_softmax_mixture(self):
        class M:
            moe_top_k, moe_norm_topk = 6, False
        p = np.exp(self.h @ self.L["moe_router"].T)
        p /= p.sum(axis=1, keepdims=True)
        want = sum(p[:, e:e + 1] * self.mlp(self.L["moe_gate"][e], self.L["moe_up"][e], self.L["moe_down"][e], self.h)
                   for e in range(6))
        np.testing.assert_allclose(ref_model.moe.ffn(self.L, self.h, M), want, rtol=1e-10, atol=1e-10)

    def test_identical_experts_with_renormalization_equal_one_mlp(self):
        class M:
            moe_top_k, moe_norm_topk = 2, True
        for k in ("moe_gate", "moe_up", "moe_down"):
            self.L[k] = np.repeat(self.L[k][:1], 6, axis=0)
        want = self.mlp(self.L["moe_gate"][0], self.L["moe_up"][0], self.L["moe_down"][0], self.h)
        np.testing.assert_allclose(ref_model.moe.ffn(self.L, self.h, M), want, rtol=1e-10, atol=1e-10)

    def test_route_ties_and_shared_gate(self):
        idx, w = ref_model.moe.route(np.eye(3)[:1], np.array([[0.0, 0, 0], [1, 0, 0], [1, 0, 0]]), 2, True)
        self.assertEqual(list(idx[0]), [1, 2])  # tie between experts 1 and 2: lower index first
        np.testing.assert_allclose(w[0], [0.5, 0.5])

        class M:
            moe_top_k, moe_norm_topk = 1, True
        L = dict(self.L, moe_sh_gate=self.L["moe_gate"][0], moe_sh_up=self.L["moe_up"][0],
                 moe_sh_down=self.L["moe_down"][0], moe_sh_inp=np.zeros(16))
        shared = self.mlp(L["moe_sh_gate"], L["moe_sh_up"], L["moe_sh_down"], self.h)
        np.testing.assert_allclose(ref_model.moe.ffn(L, self.h, M) - ref_model.moe.ffn(self.L, self.h, M),
                                   0.5 * shared, rtol=1e-10, atol=1e-10)  # sigmoid(0) = 0.5


@unittest.skipUnless(os.path.exists(os.path.join(DEMO, "stories15M.bin")), "demo weights missing")
class HybridLayoutTests(unittest.TestCase):
    """The three converters' layouts of one set of hybrid weights (hybrid_fixtures.py) read back to
    the same model: transformers (w, conv [C, 1, K]), mlx-lm (1 + w, conv [C, K, 1], switch_mlp,
    quantized), llama.cpp GGUF (1 + w, ssm_a, split qkv, tiled value heads)."""

    def test_every_layout_gives_the_transformers_logits(self):
        import hybrid
        import hybrid_fixtures
        with tempfile.TemporaryDirectory() as tmp:
            for name, arch, moe, seed in hybrid_fixtures.CASES:
                d, want = hybrid_fixtures.write_case(tmp, name, arch, moe, seed)
                for other, shifted in (("hf", False), ("mlx", True)):
                    st = readers.SafetensorsDir(os.path.join(d, other))
                    self.assertEqual(hybrid.stored_gains_shifted(st, arch), shifted, (name, other))
                for other in ("mlx", os.path.join("gguf", "model.gguf")):
                    got = ref_model.forward(ref_model.load(os.path.join(d, other)), hybrid_fixtures.PROMPT)
                    err = float(np.abs(got - want).max() / np.abs(want).max())
                    self.assertLess(err, 1e-5, (name, other))


class Stories15MTests(unittest.TestCase):
    def test_greedy_matches_golden_and_known_sentence(self):
        m = ref_model.load(os.path.join(DEMO, "stories15M.bin"))
        toks = ref_model.greedy(m, [1], 40)
        v = spm.SpmVocab.from_llama2c(os.path.join(DEMO, "tokenizer.bin"), m.n_vocab)
        text = v.decode([1] + toks)
        self.assertTrue(text.startswith("Once upon a time, there was a little girl named Lily. "
                                        "She loved to play outside"), text)
        with open(os.path.join(HERE, "golden", "stories15M_greedy200.ids")) as f:
            golden = [int(t) for t in f.read().strip().split(",")]
        self.assertEqual(len(golden), 200)
        self.assertEqual(toks, golden[:40])

    def test_top5_golden(self):
        m = ref_model.load(os.path.join(DEMO, "stories15M.bin"))
        with open(os.path.join(HERE, "golden", "stories15M_top5.json")) as f:
            g = json.load(f)
        logits = ref_model.forward(m, g["tokens"])
        for row in g["top"]:
            got = logits[row["position"]]
            self.assertEqual(list(np.argsort(-got, kind="stable")[:5]), row["ids"])
            np.testing.assert_allclose(got[row["ids"]], row["logits"], atol=1e-5)

    def test_tokenizer_reproduces_ppl_ids(self):
        v = spm.SpmVocab.from_llama2c(os.path.join(DEMO, "tokenizer.bin"))
        with open(os.path.join(HERE, "..", "data", "ppl_text.txt"), encoding="utf-8") as f:
            text = f.read()
        with open(os.path.join(HERE, "golden", "ppl_text.ids")) as f:
            ids = [int(t) for t in f.read().replace("\n", ",").split(",") if t]
        first = text.split("\n\n")[0]
        enc = v.encode(first, bos=False)
        self.assertEqual(enc, ids[:len(enc)])
        self.assertEqual(v.decode([1] + ids), text)


if __name__ == "__main__":
    unittest.main()
