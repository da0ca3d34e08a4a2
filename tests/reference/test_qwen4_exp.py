#!/usr/bin/python3
"""Self-tests of the qwen4_exp reference (run by ctest reference_selftest next to test_reference)."""

import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import qwen4_exp as q4  # noqa: E402
import qwen4_exp_fixtures as fx  # noqa: E402
import qwen4_exp_load as q4load  # noqa: E402
import readers  # noqa: E402

SHIPPED_VOCAB, SHIPPED_BASE, E = 248320, 20_000_000, fx.EOS


class HashTests(unittest.TestCase):
    def test_splitmix64_known_output(self):
        # the first output of the reference splitmix64 generator seeded with 0, and with 1234567
        self.assertEqual(q4.splitmix64(0), 0xE220A8397B1DCDAF)
        self.assertEqual(q4.splitmix64(1234567), 0x599ED017FB08FC85)

    def test_shipped_multipliers(self):
        # the values the released checkpoint's layer_multipliers buffer holds (seed 1234, layer 0)
        self.assertEqual(q4.layer_multipliers(SHIPPED_VOCAB, 3, 0, 1234),
                         [23703573157769, 20109073645365, 8052911324071])
        m = q4.layer_multipliers(SHIPPED_VOCAB, 3, 1, 1234)       # a second PLE module seeds differently
        half = ((1 << 63) - 1) // SHIPPED_VOCAB // 2
        self.assertEqual(half, 18571544855136)
        for x in m:
            self.assertTrue(x % 2 == 1 and x < 2 * half and (SHIPPED_VOCAB - 1) * x < (1 << 63))

    def test_shipped_table_geometry(self):
        sizes, offsets, rows = q4.head_geometry(SHIPPED_BASE, 16, 0, 128)
        # primes found by a sieve over [base, base + 200), independent of is_prime's trial division
        span = np.ones(200, dtype=bool)
        for p in range(2, 4473):
            span[(-SHIPPED_BASE) % p::p] = False
        sieve = [SHIPPED_BASE + i for i in np.nonzero(span)[0][:16]]
        self.assertEqual(sizes, sieve)
        self.assertEqual(sizes[:3], [20000003, 20000023, 20000033])
        self.assertEqual(sizes[-1], 20000171)
        self.assertEqual(offsets[1:3], [20000003, 40000026])
        self.assertEqual(offsets[-1], 300001275)
        self.assertEqual(offsets[-1] + sizes[-1], 320001446)
        self.assertEqual(rows, 320001536)
        self.assertEqual(rows // 128, 2500012)
        self.assertEqual(rows % 128, 0)
        # a second PLE module continues the prime sequence where the first stops
        span = np.ones(800, dtype=bool)
        for p in range(2, 4473):
            span[(-SHIPPED_BASE) % p::p] = False
        self.assertEqual(q4.head_geometry(SHIPPED_BASE, 16, 1, 128)[0],
                         [SHIPPED_BASE + i for i in np.nonzero(span)[0][16:32]])

    def test_shipped_config(self):
        """The derived values a port gets wrong silently, from the published text_config."""
        c = {"vocab_size": 248320, "hidden_size": 2560, "num_hidden_layers": 48, "num_attention_heads": 24,
             "num_key_value_heads": 2, "head_dim": 256, "rms_norm_eps": 1e-6, "eos_token_id": 248044,
             "rope_parameters": {"rope_theta": 10000000, "partial_rotary_factor": 0.25,
                                 "mrope_section": [11, 11, 10], "mrope_interleaved": True},
             "layer_types": ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(48)],
             "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_key_head_dim": 128,
             "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "output_gate_type": "sigmoid",
             "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 640,
             "shared_expert_intermediate_size": 640, "hc_count": 4, "hc_lowrank": 320, "indexer_n_heads": 4,
             "indexer_kv_heads": 1, "indexer_head_dim": 128, "indexer_budget": 2048, "indexer_compress_ratio": 4,
             "ple_layer_ids": [2], "ple_embed_dim": 2560, "ple_conv_kernel_size": 4, "ngram_size": 3,
             "heads_per_ngram": 8, "ngram_vocab_size_base": 20000000, "make_ngram_vocab_size_divisible_by": 128,
             "split_ngram_parts": 128, "mtp_num_hidden_layers": 1}
        cfg = q4.Config(c)
        self.assertEqual((cfg.n_rot, cfg.idx_topk, cfg.ple_layer, cfg.kinds[1], cfg.kinds[3]),
                         (64, 512, 1, "gdn", "qsa"))
        self.assertEqual((cfg.n_ple_heads, cfg.ple_head_dim, (cfg.ple_conv_k - 1) * cfg.ngram_size), (16, 160, 9))
        self.assertEqual((cfg.seed, cfg.ple_rows, cfg.ple_rows // cfg.split_parts), (1234, 320001536, 2500012))
        self.assertEqual(cfg.multipliers, [23703573157769, 20109073645365, 8052911324071])
        st = q4.State(cfg, layers=[0, 3])
        self.assertEqual((st.ple_ids, st.ple_conv.shape, st.conv[0].shape, st.S[0].shape, st.idx_k[3].shape),
                         ([248044, 248044], (9, 10240), (3, 10240), (48, 128, 128), (0, 128)))

    def _cfg(self):
        return q4.Config(fx.text_config())

    def test_hand_windows(self):
        """Rows for windows written out by hand: sequence start, after an EOS, on an EOS, mid-run."""
        cfg = self._cfg()
        m, S, O = cfg.multipliers, cfg.head_sizes, cfg.head_offsets

        def want(w0, w1, w2):
            b = (w0 * m[0]) ^ (w1 * m[1])
            t = b ^ (w2 * m[2])
            return [b % S[h] + O[h] for h in range(8)] + [t % S[h] + O[h] for h in range(8, 16)]

        seq = [5, 9, E, 7, 8, E, E, 11]
        rows = q4.ngram_rows([E, E] + seq, 2, cfg)
        windows = [(5, E, E), (9, 5, E), (E, 9, 5), (7, E, E), (8, 7, E), (E, 8, 7), (E, E, E), (11, E, E)]
        for t, w in enumerate(windows):
            self.assertEqual(rows[t].tolist(), want(*w), (t, w))

    def test_window_rule_and_chunks(self):
        """The segment form (transformers') equals the per-position rule of the note, and hashing in
        chunks with the 2-id context carried equals hashing the whole sequence."""
        cfg = self._cfg()
        rng = np.random.default_rng(3)
        seq = [int(x) for x in rng.choice([1, 2, 3, E], size=60, p=[0.3, 0.3, 0.1, 0.3])]
        hist = [E, E] + seq
        for k in range(3):
            got = q4.shifted_ids(hist, 2, E, k)
            self.assertEqual(got, [q4.window(hist, t, E)[k] for t in range(2, len(hist))])
        whole = q4.ngram_rows(hist, 2, cfg)
        ctx, parts, i = [E, E], [], 0
        for n in (1, 5, 2, 13, 1, 38):
            chunk = seq[i:i + n]
            parts.append(q4.ngram_rows(ctx + chunk, 2, cfg))
            ctx = (ctx + chunk)[-2:]
            i += n
        np.testing.assert_array_equal(np.concatenate(parts), whole)
        self.assertTrue(whole.min() >= 0 and whole.max() < cfg.head_offsets[-1] + cfg.head_sizes[-1])


class ModelTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.model, cls.logits, cls.stats = fx.write_all(cls.tmp)
        cls.cfg = cls.model.cfg

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_indexer_is_dense_within_budget(self):
        cfg = self.cfg
        n_dense = cfg.idx_topk * cfg.idx_ratio + cfg.idx_ratio - 1       # 2 blocks + a tail of 3
        ids = fx.PROMPT[:n_dense]
        st = q4.State(cfg)
        a = q4.forward(self.model, ids, st)
        b = q4.forward(self.model, ids, q4.State(cfg), dense=True)
        self.assertEqual(st.stats["sparse"], 0)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
        # one more token and the indexer drops a block: the logits move
        ids = fx.PROMPT[:n_dense + 1]
        st = q4.State(cfg)
        a = q4.forward(self.model, ids, st)
        b = q4.forward(self.model, ids, q4.State(cfg), dense=True)
        self.assertEqual(st.stats["sparse"], 2)                             # the last query, both QSA layers
        np.testing.assert_allclose(a[:-1], b[:-1], rtol=0, atol=1e-12)
        self.assertGreater(np.abs(a[-1] - b[-1]).max(), 1e-6)

    def test_fixture_exercises_the_indexer(self):
        self.assertGreater(self.stats["sparse"], 0)
        self.assertGreater(self.stats["own_block_dropped"], 0)
        self.assertEqual(self.stats["tie_at_cut"], 0)
        with open(os.path.join(self.tmp, "indexer.json")) as f:
            self.assertEqual(json.load(f), self.stats)

    def test_selection_keeps_top_blocks_and_tail(self):
        cfg = self.cfg
        L = self.model.layers[3]
        rng = np.random.default_rng(1)
        keys = rng.standard_normal((23, cfg.idx_dim))
        q = rng.standard_normal((cfg.idx_heads, cfg.idx_dim))
        st = q4.State(cfg)
        sel = q4.select_tokens(cfg, L, q, keys, 22, st)
        self.assertEqual(len(sel), cfg.idx_topk * cfg.idx_ratio + 3)
        self.assertEqual(sel[-3:], [20, 21, 22])
        # brute force: score every block as the note writes it, keep the best idx_topk
        kb = [q4.rope(q4.rms(keys[4 * b:4 * b + 4].mean(axis=0), L["idx_k_norm"], cfg.eps)[None, None], [4 * b],
                      cfg.n_rot, cfg.theta)[0, 0] for b in range(5)]
        score = [sum(max(float(q[h] @ kb[b]), 0.0) for h in range(cfg.idx_heads)) for b in range(5)]
        best = sorted(sorted(range(5), key=lambda b: -score[b])[:cfg.idx_topk])
        self.assertEqual(sel[:-3], [4 * b + i for b in best for i in range(4)])

    def test_incremental_equals_full(self):
        cfg, ids = self.cfg, fx.PROMPT
        np.testing.assert_allclose(q4.forward(self.model, ids, q4.State(cfg)), self.logits, rtol=0, atol=1e-12)
        for sizes in ([1] * len(ids), [5, 7, 1, 11]):
            st, out, i = q4.State(cfg), [], 0
            for n in sizes:
                out.append(q4.forward(self.model, ids[i:i + n], st))
                i += n
            np.testing.assert_allclose(np.concatenate(out), self.logits, rtol=0, atol=1e-10)
            self.assertEqual(st.ple_ids, ids[-2:])
            self.assertEqual(st.ple_conv.shape, (9, cfg.hc * cfg.hidden))
            self.assertEqual(st.idx_k[3].shape, (len(ids), cfg.idx_dim))

    def test_ple_conv_is_torchs_dilated_conv(self):
        """F.conv1d(F.pad(u, (9, 0)), w, dilation=3, groups=C): out[t, c] = sum_j w[c, j] u_pad[t + 3j, c]."""
        cfg = self.cfg
        rng = np.random.default_rng(4)
        C, T = cfg.hc * cfg.hidden, 14
        u, w = rng.standard_normal((T, C)), rng.standard_normal((C, cfg.ple_conv_k))
        pad = np.concatenate([np.zeros((9, C)), u])
        want = q4.silu(np.stack([sum(w[:, j] * pad[t + 3 * j] for j in range(4)) for t in range(T)]))
        np.testing.assert_allclose(q4.ple_conv(cfg, w, u, q4.State(cfg)), want, rtol=0, atol=1e-12)
        st = q4.State(cfg)
        got = np.concatenate([q4.ple_conv(cfg, w, u[i:i + n], st) for i, n in ((0, 5), (5, 1), (6, 8))])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(st.ple_conv, u[-9:])

    def test_mtp_rows_incremental_and_draft(self):
        cfg, ids = self.cfg, fx.PROMPT
        banks = []
        q4.forward(self.model, ids, q4.State(cfg), banks=banks)
        X, lg = q4.mtp_rows(self.model, ids[1:], banks[0][:-1], 0, q4.State(cfg, layers=["mtp"]))
        st, rows = q4.State(cfg, layers=["mtp"]), []
        for i in range(len(ids) - 1):
            rows.append(q4.mtp_rows(self.model, [ids[i + 1]], banks[0][i:i + 1], i, st)[1])
        np.testing.assert_allclose(np.concatenate(rows), lg, rtol=0, atol=1e-10)
        props, dl = q4.mtp_draft(self.model, ids + [7], 3)
        self.assertEqual(props[0], int(np.argmax(q4.mtp_rows(self.model, ids[1:] + [7], banks[0], 0,
                                                             q4.State(cfg, layers=["mtp"]))[1][-1])))
        self.assertEqual(props, [int(np.argmax(r)) for r in dl])
        with open(os.path.join(self.tmp, "ref_mtp.txt")) as f:
            want = [int(x) for x in f.read().split(",")]
        self.assertEqual(q4.mtp_draft(self.model, fx.PROMPT, fx.N_DRAFT)[0], want)

    def test_mtp_input_norms_the_whole_bank(self):
        P, H, hc = self.model.mtp, self.cfg.hidden, self.cfg.hc
        rng = np.random.default_rng(2)
        bank = rng.standard_normal((1, hc * H)) * np.repeat([0.5, 1.0, 2.0, 4.0], H)   # streams of unequal scale
        tok = 9
        hn = bank[0] / np.sqrt(np.mean(bank[0] ** 2) + 1e-6) * P["norm_h"]
        e = self.model.embed[tok] / np.sqrt(np.mean(self.model.embed[tok] ** 2) + 1e-6) * P["norm_e"]
        want = np.concatenate([P["fc_hidden"] @ hn[s * H:(s + 1) * H] + P["fc_embedding"] @ e for s in range(hc)])
        np.testing.assert_allclose(q4.mtp_input(self.model, [tok], bank)[0], want, rtol=1e-12, atol=1e-12)

    def test_gguf_round_trip(self):
        hf = self.model
        gg = q4load.load(os.path.join(self.tmp, "gguf", "model.gguf"))
        self.assertEqual(vars(gg.cfg).keys(), vars(hf.cfg).keys())
        for k in ("kinds", "n_rot", "idx_topk", "ple_layer", "multipliers", "head_sizes", "head_offsets", "eos",
                  "vocab"):
            self.assertEqual(getattr(gg.cfg, k), getattr(hf.cfg, k), k)

        def same(a, b, where):
            if isinstance(a, dict):
                self.assertEqual(set(a) - {"table"}, set(b) - {"table"}, where)
                for k in a:
                    if k != "table":
                        same(a[k], b[k], f"{where}.{k}")
            elif a is None:
                self.assertIsNone(b, where)
            else:
                np.testing.assert_allclose(a, b, rtol=1e-6 if where.endswith(".A") else 0, atol=0, err_msg=where)

        same(hf.mixer, gg.mixer, "mixer")
        for il, (a, b) in enumerate(zip(hf.layers, gg.layers)):
            same(a, b, f"layer{il}")
        same(hf.ple, gg.ple, "ple")
        same(hf.mtp, gg.mtp, "mtp")
        got = q4.forward(gg, fx.PROMPT, q4.State(gg.cfg))
        self.assertLess(float(np.abs(got - self.logits).max() / np.abs(self.logits).max()), 1e-6)

    def test_generic_entry_points(self):
        """reference.py / mtp.py reach Flash-Next through model.load / model.greedy."""
        import model as ref_model
        with open(os.path.join(self.tmp, "ref_greedy.txt")) as f:
            want = [int(x) for x in f.read().split(",")]
        for path in ("hf", os.path.join("gguf", "model.gguf")):
            m = ref_model.load(os.path.join(self.tmp, path))
            self.assertIsInstance(m, q4.Model)
            self.assertEqual(ref_model.greedy(m, fx.PROMPT, len(want)), want, path)

    def test_hf_layout(self):
        d = os.path.join(self.tmp, "hf")
        st = readers.SafetensorsDir(d)
        stored = set(st.stored.values()) | set(st.where)
        self.assertTrue("model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_7.weight" in stored)
        self.assertTrue("model.visual.patch_embed.proj.weight" in stored)
        self.assertTrue("mtp.layers.0.mlp.experts.gate_up_proj" in stored)
        self.assertEqual(st.raw("model.layers.1.ple.ple_embedding.layer_multipliers")[1], "I64")
        with open(os.path.join(d, "config.json")) as f:
            self.assertIn("vision_config", json.load(f))

    def test_loader_checks_the_hash_buffers(self):
        bad = os.path.join(self.tmp, "bad")
        shutil.copytree(os.path.join(self.tmp, "hf"), bad)
        name = "model.language_model.layers.1.ple.ple_embedding.ngram_heads_offsets"
        with open(os.path.join(bad, "model.safetensors.index.json")) as f:
            path = os.path.join(bad, json.load(f)["weight_map"][name])
        sf = readers.SafetensorsFile(path)
        b, _ = sf.header[name]["data_offsets"]
        start = sf.data_start + b + 8                                   # offsets[1]
        del sf
        with open(path, "r+b") as f:
            f.seek(start)
            f.write(np.array([12345], dtype="<i8").tobytes())
        with self.assertRaisesRegex(ValueError, "head_offsets"):
            q4load.load(bad)

    def test_fp8_table(self):
        bf = self.model.ple["table_rows"]
        f8 = q4load.load(os.path.join(self.tmp, "hf_fp8")).ple["table_rows"]
        st = readers.SafetensorsDir(os.path.join(self.tmp, "hf_fp8"))
        scale = float(st.tensor("model.layers.1.ple.ple_embedding.ngram_embedding.weight_scale")[0])
        self.assertEqual(st.raw("model.layers.1.ple.ple_embedding.ngram_embedding.shard_0.weight")[1], "F8_E4M3")
        # E4M3 keeps 3 mantissa bits: half an ulp is 2^-4 of the value (2^-10 * scale for subnormals)
        bound = np.maximum(np.abs(bf) * 2.0 ** -4, scale * 2.0 ** -10) * (1 + 1e-9)
        self.assertTrue(np.all(np.abs(f8 - bf) <= bound))
        self.assertGreater(np.abs(f8 - bf).max(), 0)                 # it did quantize
        self.assertLessEqual(np.abs(f8).max(), 448 * scale * (1 + 1e-9))
        want = np.load(os.path.join(self.tmp, "ref_logits_fp8.npy"))
        got = q4.forward(q4load.load(os.path.join(self.tmp, "hf_fp8")), fx.PROMPT, q4.State(self.cfg))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)

    def test_fp8_codes(self):
        vals = readers.fp8_e4m3_values()
        self.assertEqual(vals[0x7E], 448.0)
        self.assertEqual(vals[0x01], 2.0 ** -9)
        self.assertEqual(vals[0x38], 1.0)
        self.assertTrue(np.isnan(vals[0xFF]))
        x = np.array([1.0, 1.0625, 1.1875, -3.3, 448.0, 2.0 ** -9])
        np.testing.assert_array_equal(vals[fx.fp8_encode(x)], [1.0, 1.0, 1.25, -3.25, 448.0, 2.0 ** -9])


if __name__ == "__main__":
    unittest.main()
