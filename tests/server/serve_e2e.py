#!/usr/bin/python3
"""End-to-end tests of `splash serve`: start the real binary on a tiny random-weight Qwen3 model (the
real Qwen3 tokenizer and chat template) on a free loopback port and talk to it over HTTP.

Usage: serve_e2e.py --splash BUILD/splash --tokenizer-json .../tokenizer.json [-v]
Exit 0 on success, 1 on a failed check, 77 (ctest skip) when the tokenizer.json is missing.
Standard library only (Debian's /usr/bin/python3).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ARGS = None
WORK = None
MODEL = None
KEY = "e2e-secret"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `splash serve` whose stdout is collected by a thread."""

    def __init__(self, *flags, model=None, env=None):
        self.port = free_port()
        cmd = [ARGS.splash, "serve", "--model", model or MODEL, "--port", str(self.port), "--threads", "2"]
        cmd += list(flags)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines = []
        self.ready = threading.Event()
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("Ready · "):
                self.ready.set()
        self.ready.set()

    def wait_ready(self, timeout=120):
        self.ready.wait(timeout)
        if self.proc.poll() is not None or not any(l.startswith("Ready · ") for l in self.lines):
            self.stop()
            raise AssertionError("server did not become ready:\n%s\n%s" % ("\n".join(self.lines), self.stderr))
        return self

    def request(self, method, path, body=None, headers=None, key=KEY, raw=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        h = {"Host": "127.0.0.1:%d" % self.port}
        if key:
            h["Authorization"] = "Bearer " + key
        if body is not None or raw is not None:
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        text = resp.read().decode("utf-8", "replace")
        conn.close()
        return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), text

    def json(self, method, path, body=None, **kw):
        status, headers, text = self.request(method, path, body, **kw)
        return status, headers, json.loads(text)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr = self.proc.stderr.read()
        return self.proc.returncode


def run_cli(*args, timeout=120):
    return subprocess.run([ARGS.splash] + list(args), capture_output=True, text=True, timeout=timeout)


def sse_events(text):
    """The data payloads of an SSE body, in order."""
    out = []
    for block in text.split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                out.append(line[6:])
    return out


class CommandLine(unittest.TestCase):
    def test_help_lists_every_flag(self):
        r = run_cli("serve", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for flag in ["--model", "--host", "--port", "--api-key", "--allowed-host", "--allowed-origin", "--no-webui",
                     "--max-memory", "--max-context", "--kv-format", "--queue-size", "--request-timeout",
                     "--max-request-size", "--served-model-name", "--threads", "--default-reasoning-effort",
                     "--disable-ane", "--language-only", "--idle-release", "--announce-served-name",
                     "--max-image-pixels", "--decode-share", "--allow-idle-sleep"]:
            self.assertIn(flag, r.stdout, flag)
        self.assertIn("SPLASH_PORT or 8000", r.stdout)
        self.assertIn("/status show the effective context", r.stdout.replace("\n", " "))
        # Groups in the spec's order.
        pos = [r.stdout.find("\n" + g + ":") for g in ["Model", "Network and access", "Memory and context", "API",
                                                        "Requests"]]
        self.assertTrue(all(p >= 0 for p in pos) and pos == sorted(pos), pos)

    def test_bad_values_exit_2_naming_the_flag(self):
        for flags, name in [(["--port", "0"], "--port"), (["--max-context", "257K"], "--max-context"),
                            (["--max-memory", "0"], "--max-memory"), (["--kv-format", "q4"], "--kv-format"),
                            (["--allowed-origin", "http://*.x.com"], "--allowed-origin"),
                            (["--api-key", "has space"], "--api-key"),
                            (["--request-timeout", "-1"], "--request-timeout"),
                            (["--idle-release", "never"], "--idle-release"),
                            (["--served-model-name", "a/../b"], "--served-model-name"),
                            (["--announce-served-name"], "--announce-served-name needs --served-model-name"),
                            (["--decode-share", "-1"], "--decode-share"), (["--decode-share", "nan"], "--decode-share"),
                            (["--max-image-pixels", "0"], "--max-image-pixels")]:
            r = run_cli("serve", "--model", MODEL, *flags)
            self.assertEqual(r.returncode, 2, (flags, r.stderr))
            self.assertIn(name, r.stderr, flags)
            self.assertNotIn("Loading", r.stdout)

    def test_port_in_use_exits_1_before_loading(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            r = run_cli("serve", "--model", MODEL, "--port", str(port))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"error: cannot bind 127\.0\.0\.1:%d: \S" % port)
        self.assertNotIn("Loading", r.stdout)

    def test_max_context_above_the_model_window_is_refused(self):
        r = run_cli("serve", "--model", MODEL, "--port", str(free_port()), "--max-context", "4096")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("--max-context 4096 exceeds the 2048 tokens the model and this machine's memory allow; "
                      "omit it or pass at most 2048", r.stderr)
        self.assertRegex(r.stderr, r"\nhard budget: \d+ bytes \(\d+\.\d\d MiB\)\n")

    def test_max_memory_too_small_is_refused_with_the_breakdown(self):
        r = run_cli("serve", "--model", MODEL, "--port", str(free_port()), "--max-memory", "100M")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("require", r.stderr)
        self.assertIn("but the memory budget is 104857600 bytes", r.stderr)
        self.assertRegex(r.stderr, r"\ndeficit: [1-9]\d* bytes")

    def test_sigint_exits_130(self):
        srv = Server().wait_ready()
        self.assertEqual(srv.stop(signal.SIGINT), 130)
        self.assertIn("Stopping · releasing engine resources", srv.lines)


class Serving(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--api-key", KEY, "--max-context", "256", "--max-request-size", "64K").wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def chat(self, **extra):
        body = {"model": "q.gguf", "messages": [{"role": "user", "content": "Say something."}], "max_tokens": 8,
                "temperature": 0}
        body.update(extra)
        return body

    def test_ready_line(self):
        ready = [l for l in self.srv.lines if l.startswith("Ready")]
        self.assertEqual(ready, ["Ready · q.gguf · context 256 · http://127.0.0.1:%d" % self.srv.port])
        self.assertIn("Loading · " + MODEL, self.srv.lines)
        self.assertIn("Chat template · native", self.srv.lines)
        self.assertTrue(any(re.fullmatch(r"Weights loaded in \d+\.\d\d s\.", l) for l in self.srv.lines))

    def test_health_and_ready_are_public(self):
        for path, expect in [("/health", {"status": "ok"}), ("/ready", {"status": "ready"})]:
            status, _, body = self.srv.json("GET", path, key=None)
            self.assertEqual((status, body), (200, expect))

    def test_models(self):
        status, _, body = self.srv.json("GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual([m["id"] for m in body["data"]], ["q.gguf"])
        self.assertEqual(body["data"][0]["max_model_len"], 256)
        self.assertEqual(body["data"][0]["context_length"], 256)
        self.assertEqual(body["data"][0]["owned_by"], "splash")
        status, _, body = self.srv.json("GET", "/v1/models/nope")
        self.assertEqual(status, 404)
        self.assertEqual(body["error"]["code"], "model_not_found")

    def test_key_required(self):
        status, headers, body = self.srv.json("GET", "/v1/models", key=None)
        self.assertEqual(status, 401)
        self.assertTrue(headers.get("www-authenticate", "").startswith("Bearer"))
        status, _, _ = self.srv.request("GET", "/v1/models", key="wrong")
        self.assertEqual(status, 401)

    def test_bad_host_forbidden(self):
        status, _, body = self.srv.json("GET", "/v1/models", headers={"Host": "attacker.example"})
        self.assertEqual(status, 403)
        self.assertEqual(body["error"]["code"], "forbidden")

    def test_unknown_model_and_path(self):
        status, _, body = self.srv.json("POST", "/v1/chat/completions", self.chat(model="gpt-4"))
        self.assertEqual((status, body["error"]["code"]), (404, "model_not_found"))
        status, _, body = self.srv.json("GET", "/v9/nothing")
        self.assertEqual(status, 404)
        self.assertIn("message", body["error"])

    def test_chat_non_stream_and_stream_agree(self):
        status, _, body = self.srv.json("POST", "/v1/chat/completions", self.chat())
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["model"], "q.gguf")
        choice = body["choices"][0]
        self.assertEqual(choice["message"]["role"], "assistant")
        self.assertIn(choice["finish_reason"], ("stop", "length"))
        usage = body["usage"]
        self.assertLessEqual(usage["completion_tokens"], 8)
        self.assertEqual(usage["total_tokens"], usage["prompt_tokens"] + usage["completion_tokens"])
        self.assertIn("cached_tokens", usage["prompt_tokens_details"])
        # prompt_tokens is the templated prompt's length: /apply-template then /tokenize say the same.
        _, _, templ = self.srv.json("POST", "/apply-template", {"messages": self.chat()["messages"]})
        self.assertIn("<|im_start|>user\nSay something.<|im_end|>", templ["prompt"])
        _, _, toks = self.srv.json("POST", "/tokenize", {"content": templ["prompt"]})
        self.assertEqual(usage["prompt_tokens"], len(toks["tokens"]))

        status, headers, text = self.srv.request(
            "POST", "/v1/chat/completions", self.chat(stream=True, stream_options={"include_usage": True}))
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/event-stream"))
        events = sse_events(text)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
        streamed = "".join((c["choices"][0]["delta"].get("content") or "") + (c["choices"][0]["delta"].get("reasoning_content") or "")
                           for c in chunks if c.get("choices"))
        whole = (choice["message"].get("reasoning_content") or "") + (choice["message"].get("content") or "")
        # Greedy decoding of the same prompt: the same text either way (the reasoning split may
        # strip whitespace at the boundary, so compare without it).
        self.assertEqual(re.sub(r"\s", "", streamed), re.sub(r"\s", "", whole))
        finals = [c for c in chunks if c.get("choices") and c["choices"][0].get("finish_reason")]
        self.assertEqual(len(finals), 1)
        self.assertEqual(finals[0]["choices"][0]["finish_reason"], choice["finish_reason"])
        usage_chunks = [c for c in chunks if c.get("usage") and not c.get("choices")]
        self.assertEqual(len(usage_chunks), 1)
        self.assertEqual(usage_chunks[0]["usage"]["completion_tokens"], usage["completion_tokens"])

    def test_completions(self):
        status, _, body = self.srv.json("POST", "/v1/completions",
                                        {"prompt": "Once upon a time", "max_tokens": 5, "temperature": 0,
                                         "ignore_eos": True})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "text_completion")
        self.assertEqual(body["usage"]["completion_tokens"], 5)
        self.assertEqual(body["choices"][0]["finish_reason"], "length")

    def test_context_length_exceeded(self):
        status, _, body = self.srv.json("POST", "/v1/completions", {"prompt": [100] * 300, "max_tokens": 1})
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["code"], "context_length_exceeded")
        self.assertIn("256", body["error"]["message"])
        status, _, body = self.srv.json("POST", "/v1/chat/completions", self.chat(max_tokens=1000))
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["code"], "context_length_exceeded")

    def test_body_too_large(self):
        raw = json.dumps({"prompt": "x" * (70 * 1024)}).encode()
        try:
            status, _, text = self.srv.request("POST", "/v1/completions", raw=raw)
        except (ConnectionResetError, BrokenPipeError):
            self.fail("connection reset instead of a 413")
        self.assertEqual(status, 413)
        self.assertEqual(json.loads(text)["error"]["code"], "request_too_large")

    def test_disconnect_cancels(self):
        _, _, before = self.srv.json("GET", "/status")
        sock = socket.create_connection(("127.0.0.1", self.srv.port))
        body = json.dumps({"prompt": "Hello", "max_tokens": 200, "ignore_eos": True, "stream": True}).encode()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + KEY.encode() +
                     b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
                     b"\r\n\r\n" + body)
        self.assertIn(b"200", sock.recv(64))
        sock.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            _, _, st = self.srv.json("GET", "/status")
            if st["requests"]["cancelled"] > before["requests"]["cancelled"]:
                break
            time.sleep(0.1)
        self.assertGreater(st["requests"]["cancelled"], before["requests"]["cancelled"])
        self.assertEqual(st["state"]["active_lanes"], 0)

    def test_status_and_metrics(self):
        status, _, st = self.srv.json("GET", "/status")
        self.assertEqual(status, 200)
        self.assertEqual(st["maximum_context_tokens"], 256)
        self.assertTrue(st["ready"])
        self.assertEqual(st["memory_plan"]["maximum_context_tokens"], 256)
        self.assertEqual(st["memory_plan"]["model"]["attention_layers"], 2)
        self.assertEqual(st["memory_plan"]["model"]["kv_heads"], 2)
        self.assertEqual(st["memory_plan"]["model"]["head_dimension"], 32)
        self.assertEqual(st["memory_plan"]["model"]["kv_format"], "int8")
        # int8 page: 2 layers x (K, V) x 64-byte-padded (2 heads x 32 tokens x 32 B + 2 x 32 x 4 B scales).
        self.assertEqual(st["memory_plan"]["model"]["kv_page_bytes"], 2 * 2 * (2 * 32 * 32 + 2 * 32 * 4))
        self.assertEqual(st["ane_ffn"]["state"], "unavailable")
        self.assertEqual(st["instance"]["port"], self.srv.port)
        self.assertEqual(st["scheduler"]["decode_share"], 0.5)
        self.assertEqual(st["vision"]["max_image_pixels"], 4194304)
        self.assertTrue(st["sleep_inhibitor"]["enabled"])
        status, headers, text = self.srv.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(headers["content-type"].startswith("text/plain; version=0.0.4"))
        self.assertIn("\nsplash_ready 1\n", "\n" + text)
        self.assertRegex(text, r'splash_requests_total\{state="completed"\} \d+\n')


class ServedModelNames(unittest.TestCase):
    """Spec 2.3: responses report the real id unless --announce-served-name (then the first alias);
    every name is accepted and /v1/models lists the real id first, the aliases with `root`."""

    def check(self, announce):
        flags = ["--served-model-name", "org/alias", "--served-model-name", "second", "--max-context", "256"]
        srv = Server(*(flags + (["--announce-served-name"] if announce else []))).wait_ready()
        try:
            want = "org/alias" if announce else "q.gguf"
            self.assertEqual([l for l in srv.lines if l.startswith("Ready")],
                             ["Ready · %s · context 256 · http://127.0.0.1:%d" % (want, srv.port)])
            _, _, models = srv.json("GET", "/v1/models")
            self.assertEqual([(m["id"], m.get("root")) for m in models["data"]],
                             [("q.gguf", None), ("org/alias", "q.gguf"), ("second", "q.gguf")])
            _, _, st = srv.json("GET", "/status")
            self.assertEqual(st["instance"]["model"], want)
            msgs = [{"role": "user", "content": "Hi"}]
            for name in ["q.gguf", "org/alias", "second"]:
                for path, body in [("/v1/chat/completions", {"messages": msgs}),
                                   ("/v1/completions", {"prompt": "Once"}),
                                   ("/v1/responses", {"input": "Hi", "max_output_tokens": 4}),
                                   ("/v1/messages", {"messages": msgs})]:
                    body = dict(body, model=name, max_tokens=4, temperature=0)
                    if path == "/v1/responses":
                        del body["max_tokens"]
                    status, _, out = srv.json("POST", path, body)
                    self.assertEqual(status, 200, (path, out))
                    self.assertEqual(out["model"], want, (name, path))
                # Streaming chunks report it too.
                status, _, text = srv.request("POST", "/v1/chat/completions",
                                              {"model": name, "messages": msgs, "max_tokens": 3, "stream": True})
                self.assertEqual(status, 200)
                chunks = [json.loads(d) for d in sse_events(text) if d != "[DONE]"]
                self.assertTrue(chunks and all(c["model"] == want for c in chunks), chunks)
        finally:
            srv.stop()

    def test_real_id_by_default(self):
        self.check(announce=False)

    def test_announce_served_name_reports_the_first_alias(self):
        self.check(announce=True)


class SleepInhibitor(unittest.TestCase):
    """Spec 10: a systemd-inhibit sleep lock is held while requests run, never under
    --allow-idle-sleep. A stand-in systemd-inhibit on PATH records that it ran (logind is not there)."""

    def fake_path(self, name):
        d = os.path.join(WORK, name)
        os.makedirs(d, exist_ok=True)
        prog = os.path.join(d, "systemd-inhibit")
        with open(prog, "w") as f:
            f.write('#!/bin/sh\necho "$*" >> "%s/runs"\necho $$ > "%s/pid"\nexec sleep 1000\n' % (d, d))
        os.chmod(prog, 0o755)
        return d, dict(os.environ, PATH=d + os.pathsep + os.environ.get("PATH", ""))

    def busy(self, srv):
        """Concurrent long generations, so the server is busy for well over a poll interval."""
        body = {"prompt": "Once", "max_tokens": 200, "ignore_eos": True, "temperature": 0}
        ts = [threading.Thread(target=srv.json, args=("POST", "/v1/completions", body)) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    def test_held_while_requests_run(self):
        d, env = self.fake_path("inhibit_on")
        srv = Server("--max-context", "256", env=env).wait_ready()
        try:
            time.sleep(0.5)
            self.assertFalse(os.path.exists(os.path.join(d, "runs")), "held while idle")
            for _ in range(5):
                self.busy(srv)
                if os.path.exists(os.path.join(d, "runs")):
                    break
            with open(os.path.join(d, "runs")) as f:
                self.assertIn("--what=sleep", f.read())
            with open(os.path.join(d, "pid")) as f:
                pid = int(f.read())
            # Counted once it outlives the settle time, which may come after the requests ended.
            deadline = time.time() + 10
            while time.time() < deadline:
                _, _, st = srv.json("GET", "/status")
                if st["sleep_inhibitor"]["acquisitions"] >= 1:
                    break
                time.sleep(0.1)
            deadline = time.time() + 10
            while time.time() < deadline:
                _, _, st = srv.json("GET", "/status")
                if not st["sleep_inhibitor"]["held"]:
                    break
                time.sleep(0.2)
            self.assertEqual(st["sleep_inhibitor"]["enabled"], True)
            self.assertFalse(st["sleep_inhibitor"]["held"], st["sleep_inhibitor"])
            self.assertGreaterEqual(st["sleep_inhibitor"]["acquisitions"], 1)
            self.assertFalse(os.path.exists("/proc/%d" % pid), "the inhibitor outlived the requests")
        finally:
            srv.stop()

    def test_allow_idle_sleep_never_inhibits(self):
        d, env = self.fake_path("inhibit_off")
        srv = Server("--max-context", "256", "--allow-idle-sleep", "--decode-share", "0", "--max-image-pixels", "1024",
                     env=env).wait_ready()
        try:
            self.busy(srv)
            time.sleep(0.5)
            self.assertFalse(os.path.exists(os.path.join(d, "runs")))
            _, _, st = srv.json("GET", "/status")
            self.assertEqual(st["sleep_inhibitor"], {"enabled": False, "held": False, "acquisitions": 0,
                                                     "failures": 0, "reason": "--allow-idle-sleep"})
            self.assertEqual(st["scheduler"]["decode_share"], 0)
            self.assertEqual(st["vision"]["max_image_pixels"], 1024)
        finally:
            srv.stop()


class Shutdown(unittest.TestCase):
    def test_sigterm_exits_143_within_a_second(self):
        srv = Server().wait_ready()
        t0 = time.time()
        code = srv.stop(signal.SIGTERM, timeout=5)
        self.assertEqual(code, 143)
        self.assertLess(time.time() - t0, 1.0)
        self.assertIn("Stopping · releasing engine resources", srv.lines)


def main():
    global ARGS, WORK, MODEL
    ap = argparse.ArgumentParser()
    ap.add_argument("--splash", required=True)
    ap.add_argument("--tokenizer-json", required=True)
    ap.add_argument("-v", action="store_true")
    ARGS, rest = ap.parse_known_args()
    if not os.path.exists(ARGS.tokenizer_json):
        print("skip: %s is missing (run npm ci in tools/node)" % ARGS.tokenizer_json)
        return 77
    WORK = tempfile.mkdtemp(prefix="splash_serve_e2e_")
    try:
        MODEL = os.path.join(WORK, "q.gguf")
        r = run_cli("make-test-model", "--preset", "tiny-qwen3", "--tokenizer", ARGS.tokenizer_json, "--out", MODEL)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        prog = unittest.main(argv=[sys.argv[0]] + rest + (["-v"] if ARGS.v else []), exit=False)
        return 0 if prog.result.wasSuccessful() else 1
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
