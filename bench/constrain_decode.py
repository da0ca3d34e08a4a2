#!/usr/bin/python3
"""Decode speed with and without structured output (docs/PERFORMANCE.md, "Structured output"): one
`splash serve`, then rounds of greedy requests of --tokens tokens with ignore_eos, each round in the
order A B C C B A: no constraint, a GBNF grammar (one looping state: the per-position mask memo),
and a JSON schema whose string field runs long (bench/data/schemas.json "agent.write_file"). Prints
every request's timings.predicted_per_second and the server's CPU time per generated token, and
the medians. A benchmark, not a test: record the load average it prints.

  bench/constrain_decode.py --splash build/splash --model M.gguf [--rounds 3] [--tokens 128] [--spec off]
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--splash", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--spec", default="off")
    a = ap.parse_args()
    port = free_port()
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([a.splash, "serve", "--model", a.model, "--port", str(port), "--spec", a.spec],
                            stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(1200):
            log.seek(0)
            if any(line.startswith("Ready") for line in log):
                break
            if proc.poll() is not None:
                raise RuntimeError("serve exited")
            time.sleep(0.1)

        def cpu_s():
            with open("/proc/%d/stat" % proc.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        def post(body):
            req = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % port, json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=900) as r:
                return json.loads(r.read())

        schemas = {s["name"]: s["schema"] for s in json.load(open(os.path.join(ROOT, "bench/data/schemas.json")))}
        base = {"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": a.tokens,
                "temperature": 0, "ignore_eos": True}
        cases = {
            "none": {},
            "gbnf": {"grammar": 'root ::= [a-zA-Z0-9 ,.]+'},
            "json_schema": {"response_format": {"type": "json_schema",
                                                "json_schema": {"name": "w", "schema": schemas["agent.write_file"]}}},
        }
        for name, extra in cases.items():  # warm: compile, first masks
            post({**base, **extra, "max_tokens": 8})
        speed = {k: [] for k in cases}
        cpu = {k: [] for k in cases}
        order = list(cases) + list(reversed(cases))
        print("load average at start: %.2f %.2f %.2f" % os.getloadavg())
        for _ in range(a.rounds):
            for name in order:
                c0 = cpu_s()
                r = post({**base, **cases[name]})
                n = r["usage"]["completion_tokens"]
                speed[name].append(r["timings"]["predicted_per_second"])
                cpu[name].append((cpu_s() - c0) * 1000 / max(1, n))
                print("%-12s %4d tokens  %7.1f tok/s  %6.2f ms CPU/token" % (name, n, speed[name][-1], cpu[name][-1]))
        print("load average at end: %.2f %.2f %.2f" % os.getloadavg())
        ref = statistics.median(speed["none"])
        for name in cases:
            s = statistics.median(speed[name])
            print("median %-12s %7.1f tok/s (%.1f%% of none)  %6.2f ms CPU/token" %
                  (name, s, 100 * s / ref, statistics.median(cpu[name])))
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
