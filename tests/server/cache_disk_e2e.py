#!/usr/bin/python3
"""End-to-end tests of the prefix cache's SSD tier (spec 5.4, 5.6) through `splash serve` on a tiny
random-weight Qwen3 model (real Qwen3 tokenizer and chat template) with a small KV pool:

- demotion and promotion: more conversations than the pool holds; the first one, asked again after
  the others pushed it out of memory, is read back from disk (cached_tokens > 0, /status disk
  restores) and answers the same greedy tokens as its cold run;
- persistent cache: a clean stop writes the cached pages to --cache-dir, the next start prints how
  many it took back, and the first request after the restart hits them with the same answer;
- a second server on the same --cache-dir runs on a temporary cache and leaves the directory alone;
- write-behind: with --persistent-cache a ~2.5K-token conversation reaches the disk a short delay
  after it was published (--cache-write-behind, hidden, shortens the 10 s); after kill -9 the next
  start takes it back and the same request hits it with the same answer.

Usage: cache_disk_e2e.py --splash BUILD/splash --tokenizer-json .../tokenizer.json [-v]
Exit 0 on success, 1 on a failed check, 77 (ctest skip) when the tokenizer.json is missing.
About 30 s. Standard library only.
"""
import argparse
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_e2e  # noqa: E402  (Server, run_cli)

ARGS = None
WORK = None
MODEL = None
WORDS = ("river stone lamp garden copper window forest signal harbor meadow pencil engine candle "
         "bridge violet orbit thunder basket mirror saddle lantern pepper marble canyon").split()


LONG_MODEL = None  # a 4K context for the write-behind case


def prompt(conv, n_words=260):
    rng = random.Random(conv)
    return "Conversation %d. " % conv + " ".join(rng.choice(WORDS) for _ in range(n_words))


def ask(server, conv, n_words=260):
    body = {"model": "q.gguf", "messages": [{"role": "user", "content": prompt(conv, n_words)}], "max_tokens": 8,
            "temperature": 0}
    status, _, j = server.json("POST", "/v1/chat/completions", body)
    assert status == 200, j
    usage = j["usage"]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return j["choices"][0]["message"]["content"], cached, usage["prompt_tokens"]


def status(server):
    code, _, j = server.json("GET", "/status")
    assert code == 200
    return j


class SsdTier(unittest.TestCase):
    def test_demotion_and_promotion(self):
        s = serve_e2e.Server("--max-cache-disk", "64M", model=MODEL).wait_ready()
        try:
            self.assertTrue(any(l.startswith("SSD cache: 64 MiB for KV pages") for l in s.lines), s.lines)
            first, cached, n_prompt = ask(s, 0)
            self.assertEqual(cached, 0)
            pool = status(s)["kv"]["pages_allocated"]
            # More conversations than the pool holds push conversation 0 out of memory, onto disk.
            n_conv = 1
            while n_conv * (n_prompt // 32) < 2 * pool:
                ask(s, n_conv)
                n_conv += 1
            d = status(s)["disk"]
            self.assertTrue(d["enabled"])
            self.assertGreater(d["kv_demotions"], 0, d)
            self.assertLessEqual(d["used_bytes"], 64 << 20)
            again, cached, _ = ask(s, 0)
            self.assertGreater(cached, 0, "conversation 0 read back from disk")
            self.assertEqual(again, first, "same greedy tokens as the cold run")
            d = status(s)["disk"]
            self.assertGreater(d["kv_restores"], 0, d)
            self.assertGreater(d["read_bytes"], 0, d)
            self.assertEqual(d["read_failures"], 0, d)
        finally:
            self.assertIn(s.stop(), (143, -15))

    def test_persistent_restart_hits(self):
        cache_dir = os.path.join(WORK, "prefix-cache")
        flags = ("--max-cache-disk", "64M", "--persistent-cache", "--cache-dir", cache_dir)
        s = serve_e2e.Server(*flags, model=MODEL).wait_ready()
        try:
            self.assertTrue(any("took back 0 restore points over 0 KV blocks" in l for l in s.lines), s.lines)
            first, cached, n_prompt = ask(s, 100)
            self.assertEqual(cached, 0)
            self.assertTrue(status(s)["disk"]["persistent"])
        finally:
            self.assertEqual(s.stop(), 143, s.stderr)
        namespaces = os.listdir(cache_dir)
        self.assertEqual(len(namespaces), 1, namespaces)
        ns = os.path.join(cache_dir, namespaces[0])
        self.assertTrue(os.path.exists(os.path.join(ns, "namespace.txt")))
        self.assertIn("qwen3", open(os.path.join(ns, "namespace.txt")).read())

        s = serve_e2e.Server(*flags, model=MODEL).wait_ready()
        try:
            line = [l for l in s.lines if l.startswith("Persistent cache ")]
            self.assertEqual(len(line), 1, s.lines)
            m = re.search(r"took back (\d+) restore points over (\d+) KV blocks \(([\d.]+) MiB\); left (\d+)", line[0])
            self.assertTrue(m, line[0])
            self.assertGreaterEqual(int(m.group(2)), n_prompt // 32 - 1, line[0])
            again, cached, _ = ask(s, 100)
            self.assertGreaterEqual(cached, 32 * (n_prompt // 32 - 1), "the first request after the restart hits")
            self.assertEqual(again, first)
            d = status(s)["disk"]
            self.assertGreater(d["taken_back"]["kv_blocks"], 0, d)
            self.assertGreater(d["kv_restores"], 0, d)

            # A second server on the same directory: a warning, a temporary cache, the directory untouched.
            before = {f: os.path.getsize(os.path.join(ns, f)) for f in os.listdir(ns)}
            t = serve_e2e.Server(*flags, model=MODEL)
            t.wait_ready(timeout=60)
            try:
                self.assertFalse(any(l.startswith("Persistent cache ") for l in t.lines), t.lines)
                self.assertTrue(any("(temporary, unlinked)" in l for l in t.lines), t.lines)
                self.assertFalse(status(t)["disk"]["persistent"])
                ask(t, 100)
            finally:
                t.stop()
            self.assertIn("in use by another Splash server", t.stderr)
            self.assertEqual(before, {f: os.path.getsize(os.path.join(ns, f)) for f in os.listdir(ns)})
        finally:
            s.stop()

    def test_write_behind_survives_kill_9(self):
        cache_dir = os.path.join(WORK, "write-behind")
        flags = ("--max-cache-disk", "64M", "--persistent-cache", "--cache-dir", cache_dir,
                 "--cache-write-behind", "0.3s")
        s = serve_e2e.Server(*flags, model=LONG_MODEL).wait_ready()
        try:
            first, cached, n_prompt = ask(s, 300, n_words=2400)
            self.assertEqual(cached, 0)
            self.assertGreaterEqual(n_prompt, 2048 + 64, "a restore point deep enough to be written behind")
            deadline = time.time() + 30
            while status(s)["disk"]["write_behind"]["durable"] < 1 and time.time() < deadline:
                time.sleep(0.1)
            d = status(s)["disk"]
            self.assertEqual(d["write_behind"]["durable"], 1, d)
            self.assertEqual(status(s)["cache"]["kv_evictions"], 0, "written behind, not evicted")
        finally:
            self.assertEqual(s.stop(signal.SIGKILL), -signal.SIGKILL)

        s = serve_e2e.Server(*flags, model=LONG_MODEL).wait_ready()
        try:
            lines = [l for l in s.lines if l.startswith("Persistent cache ")]
            # kill -9 was not a clean stop: the start says so and serves on probation (spec 5.6).
            self.assertTrue(any("did not stop cleanly; serving on probation" in l for l in lines), lines)
            line = [l for l in lines if "took back" in l]
            self.assertEqual(len(line), 1, s.lines)
            m = re.search(r"took back (\d+) restore points over (\d+) KV blocks", line[0])
            self.assertTrue(m, line[0])
            self.assertGreaterEqual(int(m.group(1)), 1, line[0])
            self.assertGreaterEqual(int(m.group(2)), (n_prompt - 1) // 32, line[0])
            again, cached, _ = ask(s, 300, n_words=2400)
            self.assertGreaterEqual(cached, 32 * ((n_prompt - 1) // 32), "the request after kill -9 hits")
            self.assertEqual(again, first, "same greedy tokens")
        finally:
            s.stop()

    def test_flag_checks(self):
        r = serve_e2e.run_cli("serve", "--model", MODEL, "--persistent-cache")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--persistent-cache needs --max-cache-disk", r.stderr)
        r = serve_e2e.run_cli("serve", "--model", MODEL, "--max-cache-disk", "1G", "--cache-dir", WORK)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--cache-dir needs --persistent-cache", r.stderr)
        r = serve_e2e.run_cli("serve", "--help")
        for flag in ("--max-cache-disk", "--persistent-cache", "--cache-dir"):
            self.assertIn(flag, r.stdout)
        groups = [r.stdout.find("\n" + g + ":") for g in ("Memory and context", "SSD cache", "API")]
        self.assertTrue(all(p >= 0 for p in groups) and groups == sorted(groups), groups)


def main():
    global ARGS, WORK, MODEL, LONG_MODEL
    ap = argparse.ArgumentParser()
    ap.add_argument("--splash", required=True)
    ap.add_argument("--tokenizer-json", required=True)
    ap.add_argument("-v", action="store_true")
    ARGS, rest = ap.parse_known_args()
    serve_e2e.ARGS = ARGS
    if not os.path.exists(ARGS.tokenizer_json):
        print("skip: %s is missing (run npm ci in tools/node)" % ARGS.tokenizer_json)
        return 77
    WORK = tempfile.mkdtemp(prefix="splash_cache_disk_e2e_")
    try:
        MODEL = os.path.join(WORK, "q.gguf")
        # A 512-token context keeps the KV pool at 64 pages, so a few conversations overflow it.
        r = serve_e2e.run_cli("make-test-model", "--preset", "tiny-qwen3", "--ctx", "512", "--tokenizer",
                              ARGS.tokenizer_json, "--out", MODEL)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        # Same file name (the served model id the requests name), in its own folder.
        os.makedirs(os.path.join(WORK, "long"))
        LONG_MODEL = os.path.join(WORK, "long", "q.gguf")
        r = serve_e2e.run_cli("make-test-model", "--preset", "tiny-qwen3", "--ctx", "4096", "--tokenizer",
                              ARGS.tokenizer_json, "--out", LONG_MODEL)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        os.environ["TMPDIR"] = WORK
        prog = unittest.main(argv=[sys.argv[0]] + rest + (["-v"] if ARGS.v else []), exit=False)
        leftovers = [f for f in os.listdir(WORK) if f.startswith("splash-cache")]
        if leftovers:
            print("temporary cache files left in TMPDIR:", leftovers)
            return 1
        return 0 if prog.result.wasSuccessful() else 1
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
