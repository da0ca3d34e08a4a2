#!/usr/bin/python3
"""End-to-end test of the oMLX integration flags of `splash serve` (issue 38): --idle-release frees the
weights and the KV pool after an idle spell and loads them again on the next request; --language-only
and --disable-ane are accepted and reported.

A random-weight Qwen3 whose weights are large enough (~300 MiB resident) that the release shows in
the server's VmRSS. Checks: /status weights.released and state "released" after the idle time, /ready
still 200, VmRSS down by most of what the weights took; then a greedy completion gives the same text
as before the release, its timings carry load_ms, /status counts the restore with its duration, and
the process is back to its loaded size. A request longer than the idle time is not released under,
and a reload that fails (the model moved away) answers 503, is counted, and the next one succeeds.
With an SSD tier (--max-cache-disk) the RAM prefix cache goes there at the release, and the first
request after the reload reads its prefix from it.

Usage: idle_release_e2e.py --splash BUILD/splash --tokenizer-json .../tokenizer.json
Exit 0 on success, 1 on a failed check, 77 (ctest skip) when the tokenizer.json is missing.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ARGS = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp.status, text


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


class Server:
    def __init__(self, model, *flags):
        self.port = free_port()
        cmd = [ARGS.splash, "serve", "--model", model, "--port", str(self.port), "--threads", "2"] + list(flags)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready.wait(180)
        if self.proc.poll() is not None or not any(l.startswith("Ready · ") for l in self.lines):
            self.stop()
            raise AssertionError("server did not become ready:\n" + "\n".join(self.lines))

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("Ready · "):
                self.ready.set()
        self.ready.set()

    def status(self):
        code, text = request(self.port, "GET", "/status")
        assert code == 200, text
        return json.loads(text)

    def complete(self):
        code, text = request(self.port, "POST", "/v1/completions",
                             {"prompt": "The weights come back", "max_tokens": 12, "temperature": 0})
        assert code == 200, text
        return json.loads(text)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def test_idle_release(model):
    s = Server(model, "--idle-release", "2s")
    try:
        st = s.status()
        check(st["weights"]["idle_release_seconds"] == 2 and st["weights"]["released"] is False,
              "weights loaded, idle_release_seconds 2: %s" % st["weights"])
        before = s.complete()
        text = before["choices"][0]["text"]
        check(before["usage"]["completion_tokens"] > 0, "a completion before the release: %r" % text)
        check("load_ms" not in before["timings"], "no load_ms while the weights are loaded")
        loaded_kib = rss_kib(s.proc.pid)
        # Released once 2 s pass without requests (/status does not count as one).
        deadline = time.time() + 30
        while time.time() < deadline and not s.status()["weights"]["released"]:
            time.sleep(0.25)
        st = s.status()
        check(st["weights"]["released"] is True and st["weights"]["state"] == "released"
              and st["weights"]["releases"] == 1, "released after 2 s idle: %s" % st["weights"])
        check(st["kv"]["allocated_bytes"] == 0, "no KV pool while released")
        check(request(s.port, "GET", "/ready")[0] == 200 and st["ready"] is True, "/ready stays true")
        released_kib = rss_kib(s.proc.pid)
        check(released_kib < loaded_kib - 200 * 1024,
              "VmRSS fell from %d to %d KiB (the weights are ~300 MiB)" % (loaded_kib, released_kib))
        check(any(l.startswith("Released · ") for l in s.lines), "console says Released")

        after = s.complete()
        check(after["choices"][0]["text"] == text, "same greedy text after the reload: %r" % after["choices"][0]["text"])
        check(after["timings"].get("load_ms", 0) > 0, "the request's timings report the wait: %s" % after["timings"])
        st = s.status()
        check(st["weights"]["released"] is False and st["weights"]["restores"] == 1
              and st["weights"]["last_restore_ms"] > 0, "restore counted with its time: %s" % st["weights"])
        check(rss_kib(s.proc.pid) > released_kib + 200 * 1024, "the weights are resident again")
        # A second request does not wait.
        again = s.complete()
        check("load_ms" not in again["timings"] and again["choices"][0]["text"] == text, "no wait once loaded")
    finally:
        s.stop()


def test_busy_and_failed_reload(model):
    """A request longer than the idle time is not released under; a reload that fails answers 503
    naming the cause, is counted, and the next request tries again."""
    s = Server(model, "--idle-release", "1s")
    try:
        code, text = request(s.port, "POST", "/v1/completions",
                             {"prompt": "a long one", "max_tokens": 500, "temperature": 0, "ignore_eos": True})
        body = json.loads(text)
        check(code == 200 and body["timings"]["predicted_ms"] > 1500,
              "a request of %.0f ms, longer than --idle-release 1s" % body["timings"]["predicted_ms"])
        check(s.status()["weights"]["releases"] == 0, "nothing released while it ran")
        deadline = time.time() + 30
        while time.time() < deadline and not s.status()["weights"]["released"]:
            time.sleep(0.25)
        check(s.status()["weights"]["released"], "released once idle")
        moved = model + ".away"
        os.rename(model, moved)
        try:
            code, text = request(s.port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
        finally:
            os.rename(moved, model)
        check(code == 503 and "runtime_unavailable" in text and "could not be loaded again" in text,
              "a failed reload is a 503 naming it: %d %s" % (code, text))
        w = s.status()["weights"]
        check(w["restore_failures"] == 1 and w["released"] and w.get("last_restore_error"),
              "the failure is counted: %s" % w)
        check(s.complete()["usage"]["completion_tokens"] > 0, "the next request loads the model")
        check(s.status()["weights"]["restores"] == 1, "and counts the restore")
    finally:
        s.stop()


def test_prefix_survives_on_disk(model):
    """With an SSD tier the release moves the RAM prefix cache there, so the first request after the
    reload still skips the shared prefix."""
    s = Server(model, "--idle-release", "2s", "--max-cache-disk", "256M")
    try:
        prompt = " ".join("word%d" % i for i in range(300))
        body = {"prompt": prompt, "max_tokens": 2, "temperature": 0}
        code, text = request(s.port, "POST", "/v1/completions", body)
        first = json.loads(text)
        check(code == 200 and first["usage"]["prompt_tokens"] > 500, "a long prompt: %s" % first["usage"])
        deadline = time.time() + 30
        while time.time() < deadline and not s.status()["weights"]["released"]:
            time.sleep(0.25)
        st = s.status()
        check(st["weights"]["released"] and st["disk"]["kv_blocks"] > 0,
              "released, the prompt's pages on the SSD tier: %d blocks" % st["disk"]["kv_blocks"])
        code, text = request(s.port, "POST", "/v1/completions", body)
        again = json.loads(text)
        cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
        check(code == 200 and cached > 0.9 * first["usage"]["prompt_tokens"] and again["timings"].get("load_ms", 0) > 0,
              "after the reload %d of %d prompt tokens come from the disk tier" % (cached, again["usage"]["prompt_tokens"]))
    finally:
        s.stop()


def test_flags(model):
    s = Server(model, "--language-only", "--disable-ane", "--idle-release", "off")
    try:
        ready = [l for l in s.lines if l.startswith("Ready · ")][0]
        check(" · language only · " in ready, "Ready line says language only: " + ready)
        st = s.status()
        check(st["weights"]["idle_release_seconds"] is None, "--idle-release off: idle_release_seconds null")
        check(st["ane_ffn"]["state"] == "unavailable" and st["ane_ffn"]["disabled_by_flag"] is True
              and "--disable-ane" in st["ane_ffn"]["reason"], "ane_ffn reports --disable-ane: %s" % st["ane_ffn"])
        check(st["input_modalities"] == ["text"] and st["vision"]["reason"] == "--language-only", "text only")
        code, text = request(s.port, "POST", "/v1/chat/completions", {
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}],
            "max_tokens": 4})
        check(code == 400 and "image" in text, "an image is refused with a 400: %s" % text)
    finally:
        s.stop()


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--splash", required=True)
    ap.add_argument("--tokenizer-json", required=True)
    ARGS = ap.parse_args()
    if not os.path.exists(ARGS.tokenizer_json):
        print("skip: %s is missing (run npm ci in tools/node)" % ARGS.tokenizer_json)
        return 77
    work = tempfile.mkdtemp(prefix="splash_idle_release_")
    try:
        model = os.path.join(work, "m")
        # dim 512 over the 151,936-token vocabulary: ~300 MiB of embedding and output rows in bf16.
        r = subprocess.run([ARGS.splash, "make-test-model", "--preset", "tiny-qwen3", "--dim", "512", "--heads", "8",
                            "--kv-heads", "4", "--head-dim", "64", "--ffn", "1024", "--layers", "2", "--dtype", "bf16",
                            "--tokenizer", ARGS.tokenizer_json, "--out", model], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        test_idle_release(model)
        test_busy_and_failed_reload(model)
        test_prefix_survives_on_disk(model)
        test_flags(model)
        return 0
    except AssertionError as e:
        print("FAIL:", e)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
