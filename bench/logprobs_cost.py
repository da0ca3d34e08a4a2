#!/usr/bin/python3
"""Decode speed with and without logprobs (docs/PERFORMANCE.md, "Log-probabilities"): one `splash
serve` per binary (--spec off), then rounds of greedy requests of --tokens tokens with
ignore_eos, each round: logprobs off, logprobs on (chat top_logprobs 20 when the model has a chat
template, else completions logprobs 5). Prints every round's timings.predicted_per_second and the
server's CPU time per generated token (utime + stime of the process from /proc, which a loaded
shared host disturbs far less than wall time), and the medians. With --base (a build without the
feature, e.g. the parent commit's), its logprobs-off speed runs in the same rounds, interleaved, for
the "unchanged when off" comparison. A benchmark, not a test: record the load average it prints.

  bench/logprobs_cost.py --splash build/splash --model M.gguf [--base /tmp/base/splash] [--rounds 5] [--tokens 256]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, model, threads):
        self.port = free_port()
        args = [binary, "serve", "--model", model, "--host", "127.0.0.1", "--port", str(self.port), "--spec", "off"]
        if threads:
            args += ["--threads", str(threads)]
        # The log goes to a file: a pipe nobody reads would fill up and stall the server.
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, text=True)
        for _ in range(1200):
            self.log.seek(0)
            if any(line.startswith("Ready") for line in self.log):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.log.seek(0)
        raise RuntimeError("%s did not get Ready:\n%s" % (binary, self.log.read()))

    def post(self, path, body):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def cpu_s(self):
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def run(server, chat, tokens, logprobs):
    """(decode tok/s, server CPU ms per generated token) of one request."""
    cpu0 = server.cpu_s()
    common = {"max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    if chat:
        body = {"messages": [{"role": "user", "content": "Tell me a story."}], **common}
        if logprobs:
            body.update(logprobs=True, top_logprobs=20)
        j = server.post("/v1/chat/completions", body)
    else:
        body = {"prompt": "Once upon a time", **common}
        if logprobs:
            body["logprobs"] = 5
        j = server.post("/v1/completions", body)
    assert j["usage"]["completion_tokens"] == tokens, j["usage"]
    return j["timings"]["predicted_per_second"], (server.cpu_s() - cpu0) * 1000.0 / tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--splash", required=True)
    ap.add_argument("--base")
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    new = Server(a.splash, a.model, a.threads)
    base = Server(a.base, a.model, a.threads) if a.base else None
    try:
        try:
            new.post("/apply-template", {"messages": [{"role": "user", "content": "x"}]})
            chat = True
        except urllib.error.HTTPError:
            chat = False
        what = "chat top_logprobs 20" if chat else "completions logprobs 5"
        print("model %s, %d tokens, on = %s, load %s" % (os.path.basename(a.model), a.tokens, what, os.getloadavg()))
        rows = {"off": [], "on": [], "base": []}
        for s in (new, base):  # warm-up
            if s:
                run(s, chat, 16, False)
        for i in range(a.rounds):
            rows["off"].append(run(new, chat, a.tokens, False))
            rows["on"].append(run(new, chat, a.tokens, True))
            if base:
                rows["base"].append(run(base, chat, a.tokens, False))
            print("round %d: " % (i + 1) + "  ".join("%s %.1f tok/s %.3f cpu-ms/tok" % (k, v[-1][0], v[-1][1])
                                                     for k, v in rows.items() if v))
        for n, what in ((0, "tok/s"), (1, "cpu-ms/tok")):
            med = {k: statistics.median(x[n] for x in v) for k, v in rows.items() if v}
            print("median %s: " % what + "  ".join("%s %.3f" % kv for kv in med.items()) +
                  "  on/off %.3f" % (med["on"] / med["off"]) + ("  off/base %.3f" % (med["off"] / med["base"]) if base else ""))
        print("load %s" % (os.getloadavg(),))
    finally:
        new.stop()
        if base:
            base.stop()


if __name__ == "__main__":
    main()
