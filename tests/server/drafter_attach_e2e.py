#!/usr/bin/python3
"""A DFlash drafter that appears beside the model while `splash serve` runs is attached without a
restart (issue 41: the demo's drafter trains in the background after the server started), and
greedy output does not change.

The real binary serves a tiny random-weight llama model with default flags (--spec auto: prompt
lookup, as nothing is paired yet) and a short --drafter-watch. Greedy completions are recorded from
a --spec off server first. Then, while a long streamed completion runs, a tiny random-weight DFlash
checkpoint (the published format: config.json + model.safetensors, written with the reference's
safetensors writer) is written to '<model>-dflash.tmp' and renamed to '<model>-dflash', as scripts/demo-drafter
does. Checks: the "Speculative · dflash · ... (attached while serving; was lookup)" line,
/status metrics.draft_method == "dflash", drafters_attached == 1, a "dflash" entry in
draft_methods with drafted tokens, and every answer (the one running across the attach, and later
ones, streamed and not, two at once) equal to --spec off's. A random drafter's proposals are
nearly all rejected, so this exercises verification and rollback, not speed.

Usage: drafter_attach_e2e.py --splash BUILD/splash [-v]
Exit 0 on success, 1 on a failed check. ~10 s. Standard library and numpy.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import serve_e2e  # noqa: E402  (Server, sse_events)
import testfiles  # noqa: E402  (write_safetensors)

ARGS = None
WORK = None
MODEL = None
PROMPTS = ["The river stone and the copper lamp. The river", "One two three four five", "Once upon a time"]


def inspect_dims(path):
    """(n_embd, n_layer, n_vocab) of the model at `path` from `splash inspect`."""
    out = subprocess.run([ARGS.splash, "inspect", path, "--no-tensors"], capture_output=True, text=True,
                         check=True).stdout
    def field(*names):
        for name in names:
            m = re.search(r"\b%s\b\D{0,20}?(\d+)" % re.escape(name), out)
            if m:
                return int(m.group(1))
        raise AssertionError("no %s in splash inspect output:\n%s" % (names, out))
    return field("n_embd", "hidden"), field("n_layer", "layers"), field("n_vocab", "vocab")


def write_random_dflash(out, n_embd, n_layer, n_vocab, block=8):
    """A one-layer DFlash drafter for the target's shape, random weights (tools/dflash/dflash_torch.py's
    tensor names and config fields)."""
    rng = np.random.default_rng(7)
    d, hd, nh, nkv, ff = n_embd, 16, 4, 2, 2 * n_embd
    taps = [0, n_layer - 1] if n_layer > 1 else [0]
    def mat(rows, cols):
        return rng.normal(0.0, 1.0 / cols ** 0.5, (rows, cols)).astype(np.float32)
    def ones(n):
        return np.ones(n, dtype=np.float32)
    t = {"fc.weight": mat(d, len(taps) * d), "hidden_norm.weight": ones(d), "norm.weight": ones(d)}
    p = "layers.0."
    t.update({p + "self_attn.q_proj.weight": mat(nh * hd, d), p + "self_attn.k_proj.weight": mat(nkv * hd, d),
              p + "self_attn.v_proj.weight": mat(nkv * hd, d), p + "self_attn.o_proj.weight": mat(d, nh * hd),
              p + "mlp.gate_proj.weight": mat(ff, d), p + "mlp.up_proj.weight": mat(ff, d),
              p + "mlp.down_proj.weight": mat(d, ff), p + "self_attn.q_norm.weight": ones(hd),
              p + "self_attn.k_norm.weight": ones(hd), p + "input_layernorm.weight": ones(d),
              p + "post_attention_layernorm.weight": ones(d)})
    cfg = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "attention_bias": False,
           "hidden_act": "silu", "hidden_size": d, "intermediate_size": ff, "num_hidden_layers": 1,
           "num_attention_heads": nh, "num_key_value_heads": nkv, "head_dim": hd, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "max_position_embeddings": 4096, "vocab_size": n_vocab,
           "tie_word_embeddings": False, "block_size": block, "num_target_layers": n_layer,
           "dflash_config": {"mask_token_id": 0, "target_layer_ids": taps}, "torch_dtype": "float32"}
    os.makedirs(out)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f)
    testfiles.write_safetensors(os.path.join(out, "model.safetensors"), t)


def complete(server, prompt, stream=False, max_tokens=40):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    status, _, text = server.request("POST", "/v1/completions", body)
    assert status == 200, text
    if not stream:
        return json.loads(text)["choices"][0]["text"]
    return "".join("".join(c.get("text", "") for c in json.loads(ev).get("choices", []))
                   for ev in serve_e2e.sse_events(text) if ev != "[DONE]")


def metrics(server):
    status, _, j = server.json("GET", "/status")
    assert status == 200
    return j["metrics"]


class DrafterAttach(unittest.TestCase):
    def test_drafter_appearing_while_serving_is_attached_and_output_unchanged(self):
        plain = serve_e2e.Server("--spec", "off").wait_ready()
        try:
            long_ref = complete(plain, PROMPTS[0], max_tokens=1500)
            refs = [complete(plain, p) for p in PROMPTS]
        finally:
            plain.stop()

        server = serve_e2e.Server("--drafter-watch", "0.1s").wait_ready()
        try:
            self.assertIn("Speculative · lookup · block 8", server.lines)
            self.assertEqual(metrics(server)["draft_method"], "lookup")
            # The drafter appears while a long streamed completion runs (the engine test
            # spec_attach_test pins an attach inside a request; here the timing is the machine's).
            result = {}
            running = threading.Thread(target=lambda: result.update(text=complete(server, PROMPTS[0], True, 1500)))
            running.start()
            n_embd, n_layer, n_vocab = inspect_dims(MODEL)
            final = os.path.splitext(MODEL)[0] + "-dflash"
            write_random_dflash(final + ".tmp", n_embd, n_layer, n_vocab)
            os.rename(final + ".tmp", final)
            line = "Speculative · dflash · block 8 · %s (attached while serving; was lookup)" % final
            deadline = time.time() + 30
            while line not in server.lines and time.time() < deadline:
                time.sleep(0.05)
            self.assertIn(line, server.lines, "\n".join(server.lines))
            running.join(120)
            self.assertEqual(result.get("text"), long_ref, "the completion running across the attach")
            while metrics(server)["draft_method"] != "dflash" and time.time() < deadline:
                time.sleep(0.05)

            self.assertEqual([complete(server, p) for p in PROMPTS], refs)
            self.assertEqual([complete(server, p, stream=True) for p in PROMPTS], refs)
            both = [None, None]
            threads = [threading.Thread(target=lambda i=i: both.__setitem__(i, complete(server, PROMPTS[i])))
                       for i in range(2)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(60)
            self.assertEqual(both, refs[:2])

            m = metrics(server)
            self.assertEqual(m["draft_method"], "dflash")
            self.assertEqual(m["drafters_attached"], 1)
            self.assertRegex(m["drafter_attached_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertIn("lookup", m["draft_methods"])
            self.assertGreater(m["draft_methods"]["dflash"]["drafted_tokens"], 0, m)
        finally:
            server.stop()


def main():
    global ARGS, WORK, MODEL
    ap = argparse.ArgumentParser()
    ap.add_argument("--splash", required=True)
    ap.add_argument("-v", action="store_true")
    ARGS, rest = ap.parse_known_args()
    WORK = tempfile.mkdtemp(prefix="splash-attach-e2e-")
    try:
        MODEL = os.path.join(WORK, "tiny.gguf")
        subprocess.run([ARGS.splash, "make-test-model", "--preset", "tiny-llama", "--out", MODEL], check=True,
                       capture_output=True)
        serve_e2e.ARGS, serve_e2e.MODEL = ARGS, MODEL
        r = unittest.main(argv=[sys.argv[0]] + (["-v"] if ARGS.v else []) + rest, exit=False)
        sys.exit(0 if r.result.wasSuccessful() else 1)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
