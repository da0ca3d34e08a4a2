#!/usr/bin/env python3
"""End-to-end test of `--model OWNER/REPO[:VARIANT]` against the mock hub (mock_hub.py): every
"must show" item of the model-download issue. Builds its repositories from tiny random-weight models
(`splash make-test-model`), runs the real binary with HF_ENDPOINT at the mock and HF_HUB_CACHE in a
temporary folder, and checks output, exit codes, the cache layout and the bytes the mock served.

  python3 tests/hub/hub_e2e.py --splash build/splash      (~10-20 s)
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mock_hub import MockHub  # noqa: E402

FAILURES = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else "\n     " + detail.replace("\n", "\n     ")),
          flush=True)
    if not cond:
        FAILURES.append(what)


def make_model(splash, out, *args):
    subprocess.run([splash, "make-test-model", *args, "--out", out], check=True, stdout=subprocess.DEVNULL)


def read_tree(d):
    files = {}
    for dirpath, _, names in os.walk(d):
        for n in names:
            p = os.path.join(dirpath, n)
            files[os.path.relpath(p, d)] = open(p, "rb").read()
    return files


def patch_gguf_tensor_type(data, new_type):
    """The same GGUF with every tensor's type id replaced in its header (payloads untouched: only the
    header is read before the refusal)."""
    buf = bytearray(data)
    off = 8
    n_tensors, n_kv = struct.unpack_from("<QQ", buf, off)
    off += 16

    def skip_value(t, off):
        sizes = {0: 1, 1: 1, 7: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 10: 8, 11: 8, 12: 8}
        if t in sizes:
            return off + sizes[t]
        if t == 8:
            (n,) = struct.unpack_from("<Q", buf, off)
            return off + 8 + n
        et, count = struct.unpack_from("<IQ", buf, off)
        off += 12
        for _ in range(count):
            off = skip_value(et, off)
        return off

    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", buf, off)
        off += 8 + n
        (t,) = struct.unpack_from("<I", buf, off)
        off = skip_value(t, off + 4)
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", buf, off)
        off += 8 + n
        (nd,) = struct.unpack_from("<I", buf, off)
        off += 4 + 8 * nd
        struct.pack_into("<I", buf, off, new_type)
        off += 4 + 8
    return bytes(buf)


class Env:
    def __init__(self, splash, tmp, url):
        self.splash, self.tmp, self.url = splash, tmp, url
        self.n = 0

    def env(self, cache, **extra):
        e = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        e.update({"HF_ENDPOINT": self.url, "HF_HUB_CACHE": cache, "HF_HOME": os.path.join(self.tmp, "hf_home")})
        e.update(extra)
        return e

    def run(self, model, cache, *args, **extra):
        cmd = [self.splash, "run", "--model", model, "-p", "Once", "-n", "2", "--temp", "0", *args]
        p = subprocess.run(cmd, env=self.env(cache, **extra), capture_output=True, text=True, errors="replace", timeout=60)
        return p.returncode, p.stdout + p.stderr

    def start_run(self, model, cache, **extra):
        cmd = [self.splash, "run", "--model", model, "-p", "Once", "-n", "2", "--temp", "0"]
        return subprocess.Popen(cmd, env=self.env(cache, **extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")

    def cache(self):
        self.n += 1
        return os.path.join(self.tmp, "cache%d" % self.n)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def serve_and_complete(env, model, cache, *flags):
    port = free_port()
    cmd = [env.splash, "serve", "--model", model, "--port", str(port)] + list(flags)
    p = subprocess.Popen(cmd, env=env.env(cache), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         errors="replace")
    lines = []
    ready = False
    deadline = time.time() + 60
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("Ready · "):
            ready = True
            break
    answer = None
    if ready:
        req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port,
                                     data=json.dumps({"prompt": "Once", "max_tokens": 8, "temperature": 0}).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            answer = json.loads(r.read())
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
    return ready, answer, "".join(lines) + (p.stdout.read() or "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--splash", required=True)
    args = ap.parse_args()
    splash = os.path.abspath(args.splash)
    tmp = tempfile.mkdtemp(prefix="splash_hub_e2e_")
    t0 = time.time()
    hub = MockHub()
    try:
        # --- repositories built from tiny models
        mdir = os.path.join(tmp, "models")
        os.makedirs(mdir)
        q8, q4 = os.path.join(mdir, "q8.gguf"), os.path.join(mdir, "q4.gguf")
        make_model(splash, q8, "--preset", "tiny-llama", "--type", "q8_0", "--seed", "1")
        make_model(splash, q4, "--preset", "tiny-llama", "--type", "q4_0", "--seed", "1")
        mlx = os.path.join(mdir, "mlx")
        make_model(splash, mlx, "--preset", "tiny-llama", "--format", "safetensors", "--mlx-bits", "4")
        q8b, q4b = open(q8, "rb").read(), open(q4, "rb").read()
        readme = b"# tiny test model\n"
        hub.add_repo("test/Tiny-GGUF", {"Tiny-Llama-Q8_0.gguf": q8b, "Tiny-Llama-Q4_0.gguf": q4b,
                                        "mmproj-Tiny-F16.gguf": b"not a model", "README.md": readme})
        hub.add_repo("test/Ambiguous-GGUF", {"Tiny-UD-Q4_0.gguf": q4b, "Tiny-XL-Q4_0.gguf": q4b + b"\0" * 32,
                                             "Tiny-Q8_0.gguf": q8b})
        hub.add_repo("test/Gated-GGUF", {"Tiny-Q8_0.gguf": q8b}, gated=True)
        hub.add_repo("test/Tiny-MLX", read_tree(mlx))
        mamba = read_tree(mlx)
        cfg = json.loads(mamba["config.json"])
        cfg["architectures"] = ["MambaForCausalLM"]
        cfg["model_type"] = "mamba"
        mamba["config.json"] = json.dumps(cfg).encode()
        hub.add_repo("test/Mamba-MLX", mamba)
        # Padded past the first header range request (1 MiB), as a real model's weights would be.
        iq = patch_gguf_tensor_type(q8b, 16) + b"\0" * (4 << 20)
        hub.add_repo("test/IQ-GGUF", {"Tiny-IQ2_XXS.gguf": iq})
        url = hub.start()
        env = Env(splash, tmp, url)
        size_q8 = len(q8b)
        print("mock hub at %s, GGUF %d bytes, setup %.1f s" % (url, size_q8, time.time() - t0), flush=True)

        # 1. Full download, then serve answers /v1/completions.
        cache = env.cache()
        ready, answer, out = serve_and_complete(env, "test/Tiny-GGUF:Q8_0", cache)
        check(ready and answer is not None and answer["choices"][0]["finish_reason"] in ("length", "stop"),
              "serve test/Tiny-GGUF:Q8_0 downloads, loads and answers /v1/completions", out)
        check("Selected Tiny-Llama-Q8_0.gguf from test/Tiny-GGUF." in out and "Fetching 1 file(s)" in out,
              "installer lines (Selected, Fetching)", out)
        check("Ready · test/Tiny-GGUF:Q8_0 · " in out, "the model id is the repository id", out)
        check("Downloading Tiny-Llama-Q8_0.gguf (166.88 KiB)\n" in out
              and "Downloading Tiny-Llama-Q8_0.gguf: 166.88 KiB / 166.88 KiB  100%" in out,
              "progress as plain lines when stderr is not a terminal", out)
        commit = hub.repos["test/Tiny-GGUF"].commit
        repo_dir = os.path.join(cache, "models--test--Tiny-GGUF")
        snap = os.path.join(repo_dir, "snapshots", commit, "Tiny-Llama-Q8_0.gguf")
        sha = hashlib.sha256(q8b).hexdigest()
        check(os.path.islink(snap) and os.readlink(snap) == "../../blobs/" + sha
              and open(os.path.join(repo_dir, "refs", "main")).read() == commit
              and open(os.path.join(repo_dir, "blobs", sha), "rb").read() == q8b,
              "Hugging Face cache layout: blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs, refs/main")
        check(hub.bytes_served("test/Tiny-GGUF", ("Q8_0.gguf",), "download") == size_q8
              and hub.bytes_served("test/Tiny-GGUF", ("Q4_0.gguf",)) == 0,
              "only the selected variant was fetched (its header probe, then once in full)", str(hub.served))

        # 2. A second start downloads nothing.
        before = hub.bytes_served()
        rc, out = env.run("test/Tiny-GGUF:Q8_0", cache)
        check(rc == 0 and hub.bytes_served() == before and "Fetching" not in out,
              "a second start downloads nothing", "rc=%d served %d -> %d\n%s" % (rc, before, hub.bytes_served(), out))

        # 3. Interrupted download: dropped mid-file, resumed within the run (Range) ...
        cache = env.cache()
        before = hub.bytes_served("test/Tiny-GGUF", ("Q4_0.gguf",), "download")
        hub.drops = [0, 60000, 20000]  # the header probe, then two cut transfers
        rc, out = env.run("test/Tiny-GGUF:Q4_0", cache)
        served = hub.bytes_served("test/Tiny-GGUF", ("Q4_0.gguf",), "download") - before
        check(rc == 0 and served < 2 * len(q4b), "a connection dropped mid-file is resumed (Range) within the run",
              "rc=%d served=%d size=%d\n%s" % (rc, served, len(q4b), out))
        hub.drops = []
        # ... and across runs: the first run gives up with a partial .incomplete file, the next resumes it.
        cache = env.cache()
        before = hub.bytes_served("test/Tiny-GGUF", ("Q4_0.gguf",), "download")
        hub.drops = [None, 50000] + [0] * 20
        rc1, out1 = env.run("test/Tiny-GGUF:Q4_0", cache)
        hub.drops = []
        partial = [f for f in os.listdir(os.path.join(cache, "models--test--Tiny-GGUF", "blobs"))
                   if f.endswith(".incomplete")]
        rc2, out2 = env.run("test/Tiny-GGUF:Q4_0", cache)
        served = hub.bytes_served("test/Tiny-GGUF", ("Q4_0.gguf",), "download") - before
        check(rc1 == 1 and "the next start resumes it" in out1 and len(partial) == 1 and rc2 == 0
              and served < 2 * len(q4b), "an interrupted run leaves .incomplete and the next start resumes it",
              "rc1=%d rc2=%d partial=%s served=%d size=%d\n%s\n%s" % (rc1, rc2, partial, served, len(q4b), out1, out2))

        # 4. Gated repository without and with a token; the token never printed.
        cache = env.cache()
        rc, out = env.run("test/Gated-GGUF:Q8_0", cache)
        check(rc == 1 and "cannot resolve test/Gated-GGUF: " in out and "set HF_TOKEN" in out
              and "error: model download or verification failed" in out, "gated without a token: 401, set HF_TOKEN", out)
        rc, out = env.run("test/Gated-GGUF:Q8_0", cache, HF_TOKEN="hf_wrong_token_zz9")
        check(rc == 1 and "set HF_TOKEN" in out and "hf_wrong_token_zz9" not in out,
              "gated with a wrong token: refused, the token not printed", out)
        rc, out = env.run("test/Gated-GGUF:Q8_0", cache, HF_TOKEN=hub.token)
        check(rc == 0 and hub.token not in out, "gated with HF_TOKEN downloads; the token is not printed", out)
        os.makedirs(os.path.join(tmp, "hf_home"), exist_ok=True)
        with open(os.path.join(tmp, "hf_home", "token"), "w") as f:
            f.write(hub.token + "\n")
        rc, out = env.run("test/Gated-GGUF:Q8_0", env.cache())
        os.remove(os.path.join(tmp, "hf_home", "token"))
        check(rc == 0 and hub.token not in out, "the token saved by 'hf auth login' ($HF_HOME/token) is used", out)

        # 5. Unknown repository, unknown revision.
        rc, out = env.run("test/Nope", env.cache())
        check(rc == 1 and "cannot resolve test/Nope: repository not found" in out, "unknown repository", out)
        rc, out = env.run("test/Tiny-GGUF:Q8_0", env.cache(), "--revision", "v9")
        check(rc == 1 and "revision 'v9' not found" in out, "unknown revision", out)

        # 6. GGUF variants: ambiguous, missing, none given.
        rc, out = env.run("test/Ambiguous-GGUF:Q4_0", env.cache())
        check(rc == 1 and "no single GGUF matches :Q4_0 (files in the repository root: Tiny-Q8_0.gguf, "
              "Tiny-UD-Q4_0.gguf, Tiny-XL-Q4_0.gguf)" in out, "ambiguous variant lists the candidates", out)
        rc, out = env.run("test/Tiny-GGUF:Q5_K", env.cache())
        check(rc == 1 and "no single GGUF matches :Q5_K (files in the repository root: Tiny-Llama-Q4_0.gguf, "
              "Tiny-Llama-Q8_0.gguf)" in out, "missing variant lists the candidates", out)
        rc, out = env.run("test/Tiny-GGUF", env.cache())
        check(rc == 1 and "select a GGUF with OWNER/REPO:VARIANT (files in the repository root:" in out,
              "a GGUF repository without a variant asks for one", out)
        rc, out = env.run("test/Ambiguous-GGUF:ud-q4_0", env.cache())
        check(rc == 0 and "Selected Tiny-UD-Q4_0.gguf" in out, "variants match case-insensitively", out)

        # 7. Unsupported models refused before any weight is fetched.
        before = hub.bytes_served("test/Mamba-MLX", (".safetensors",))
        rc, out = env.run("test/Mamba-MLX", env.cache())
        check(rc == 1 and "unsupported architecture" in out and "MambaForCausalLM" in out
              and hub.bytes_served("test/Mamba-MLX", (".safetensors",)) == before,
              "unsupported architecture refused with zero weight bytes served", out)
        rc, out = env.run("test/IQ-GGUF:IQ2_XXS", env.cache())
        served = hub.bytes_served("test/IQ-GGUF")
        check(rc == 1 and "tensor types Splash cannot load: IQ2_XXS" in out and served <= (1 << 20) < len(iq) // 4
              and hub.bytes_served("test/IQ-GGUF", kind="download") == 0,
              "unloadable GGUF tensor types refused from the header alone",
              "served=%d of %d\n%s" % (served, len(iq), out))

        # 8. MLX / safetensors repository.
        cache = env.cache()
        rc, out = env.run("test/Tiny-MLX", cache)
        snapdir = os.path.join(cache, "models--test--Tiny-MLX", "snapshots", hub.repos["test/Tiny-MLX"].commit)
        check(rc == 0 and os.path.islink(os.path.join(snapdir, "model.safetensors"))
              and os.path.islink(os.path.join(snapdir, "tokenizer.json")), "MLX repository downloaded and run", out)

        # 9. --offline / HF_HUB_OFFLINE with and without cached files; an unreachable Hub uses the cache.
        n_req = len(hub.requests)
        rc, out = env.run("test/Tiny-MLX", cache, "--offline")
        check(rc == 0 and len(hub.requests) == n_req and "Using the cached copy of test/Tiny-MLX@" in out,
              "--offline with cached files: no request", out)
        rc, out = env.run("test/Tiny-MLX", cache, HF_HUB_OFFLINE="1")
        check(rc == 0 and len(hub.requests) == n_req, "HF_HUB_OFFLINE=1 with cached files: no request", out)
        rc, out = env.run("test/Tiny-MLX", env.cache(), "--offline")
        check(rc == 1 and "cannot resolve test/Tiny-MLX: offline mode" in out and "no cached copy" in out,
              "--offline without cached files", out)
        rc, out = env.run("test/Tiny-MLX", cache, HF_ENDPOINT="http://127.0.0.1:%d" % free_port())
        check(rc == 0 and "Could not reach the Hub (" in out, "an unreachable Hub falls back to the cached copy", out)

        # 10. Two processes at once: both succeed, the file is downloaded once.
        cache = env.cache()
        before = hub.bytes_served("test/Tiny-GGUF", ("Q8_0.gguf",), "download")
        hub.chunk_delay = 0.15
        a = env.start_run("test/Tiny-GGUF:Q8_0", cache)
        time.sleep(0.3)
        b = env.start_run("test/Tiny-GGUF:Q8_0", cache)
        out_a, out_b = a.communicate(timeout=60)[0], b.communicate(timeout=60)[0]
        hub.chunk_delay = 0
        served = hub.bytes_served("test/Tiny-GGUF", ("Q8_0.gguf",), "download") - before
        check(a.returncode == 0 and b.returncode == 0 and served == size_q8
              and "Waiting for another process" in out_a + out_b,
              "two processes at once: both succeed, one downloads while the other waits",
              "rc=%s/%s served=%d size=%d\n%s\n%s" % (a.returncode, b.returncode, served, size_q8, out_a, out_b))

        # 12. A download whose bytes do not hash to the Hub's sha256 is refused, nothing is linked, and a
        # later clean download succeeds.
        cache = env.cache()
        hub.corrupt.add("test/Tiny-GGUF")
        rc, out = env.run("test/Tiny-GGUF:Q8_0", cache)
        hub.corrupt.discard("test/Tiny-GGUF")
        snaps = os.path.join(cache, "models--test--Tiny-GGUF", "snapshots")
        linked = [f for _, _, fs in os.walk(snaps) for f in fs if f.endswith(".gguf")]
        blobs_dir = os.path.join(cache, "models--test--Tiny-GGUF", "blobs")
        blobs = os.listdir(blobs_dir) if os.path.isdir(blobs_dir) else []
        check(rc == 1 and "checksum mismatch (expected sha256 " in out and not linked
              and not [b for b in blobs if not b.endswith(".lock")],
              "a corrupted download fails the hash check and leaves no blob or snapshot link",
              "rc=%d linked=%s blobs=%s\n%s" % (rc, linked, blobs, out))
        rc, out = env.run("test/Tiny-GGUF:Q8_0", cache)
        check(rc == 0, "the next start downloads the file cleanly", out)

        # 11. --draft-model OWNER/REPO: the draft is fetched like the target (Hub cache), loaded as the
        #     drafter, and greedy answers stay the target's own.
        cache = env.cache()
        ready, plain, out = serve_and_complete(env, "test/Tiny-GGUF:Q8_0", cache, "--spec", "off")
        check(ready and plain is not None and "Speculative · off" in out, "serve --spec off", out)
        ready, drafted, out = serve_and_complete(env, "test/Tiny-GGUF:Q8_0", cache, "--draft-model", "test/Tiny-MLX")
        draft_snap = os.path.join(cache, "models--test--Tiny-MLX", "snapshots", hub.repos["test/Tiny-MLX"].commit)
        check(ready and drafted is not None and ("Draft · " + draft_snap) in out
              and "Speculative · draft · block 8 · " + draft_snap in out
              and os.path.islink(os.path.join(draft_snap, "model.safetensors")),
              "--draft-model OWNER/REPO is downloaded into the Hub cache and drafts", out)
        check(drafted is not None and plain is not None
              and drafted["choices"][0]["text"] == plain["choices"][0]["text"],
              "greedy answer with the Hub draft == without", "%s\n%s" % (plain, drafted))
        ready, _, out = serve_and_complete(env, "test/Tiny-GGUF:Q8_0", cache, "--draft-model", "test/Nope")
        check(not ready and "--draft-model" in out and "repository not found" in out,
              "an unknown draft repository stops the start with its name", out)

        # 12. --model text checks (exit 2 from serve before anything else).
        p = subprocess.run([splash, "serve", "--model", "a--b/c"], env=env.env(env.cache()), capture_output=True,
                           text=True, timeout=30)
        check(p.returncode == 2 and "is not a repository id" in p.stderr, "a bad repository id is a usage error",
              p.stderr)
    finally:
        hub.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s), %.1f s" % (len(FAILURES), time.time() - t0))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
