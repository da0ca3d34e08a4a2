#!/usr/bin/python3
"""ctest `perplexity_reference`: `splash perplexity` against this reference's own computation of
llama-perplexity's method on a random-weight llama GGUF and a fixed text (tests/data/ppl_text.txt).

Usage: check_perplexity.py --tool build/splash [--keep DIR]

The method, written from llama.cpp's tools/perplexity description: tokenize the whole text (less one
final newline, as llama.cpp's -f reads it) with BOS first (the GGUF vocabulary adds one); cut it
into non-overlapping windows of n_ctx tokens; replace each window's first token by BOS; run the
window and score only tokens [n_ctx/2 + 1, n_ctx) from the logits at the positions before them.
PPL = exp(mean NLL), +/- PPL * sqrt(var(NLL) / (N - 1)).
KL mode: KL(base || model) per scored token over the full vocabulary, top-1 agreement, both PPLs.
Checked: the running value after every chunk, the final PPL and its uncertainty, one and several
windows per forward pass and windows fed in pieces, and the KL figures of a Q8_0 copy against the
F32 base.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import model as ref_model  # noqa: E402
import readers  # noqa: E402
import spm  # noqa: E402

TEXT = os.path.join(HERE, "..", "data", "ppl_text.txt")
N_CTX = 64
FAILED = []


def check(cond, msg):
    print(("ok    " if cond else "FAIL  ") + msg, flush=True)
    if not cond:
        FAILED.append(msg)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def log_softmax(logits):
    x = logits.astype(np.float64)
    mx = x.max(axis=-1, keepdims=True)
    return x - mx - np.log(np.exp(x - mx).sum(axis=-1, keepdims=True))


def window_log_probs(m, ids, bos, n_ctx):
    """Per window: log-probs at positions [n_ctx/2, n_ctx - 1) and the targets they predict."""
    first = n_ctx // 2
    out = []
    for c in range(len(ids) // n_ctx):
        w = list(ids[c * n_ctx:(c + 1) * n_ctx])
        w[0] = bos
        lp = log_softmax(ref_model.forward(m, w[:-1]))[first:]
        out.append((lp, np.asarray(ids[c * n_ctx + first + 1:(c + 1) * n_ctx])))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--keep")
    a = ap.parse_args()
    d = a.keep or tempfile.mkdtemp(prefix="splash_ppl_")
    os.makedirs(d, exist_ok=True)
    f32 = os.path.join(d, "ppl_f32.gguf")
    q8 = os.path.join(d, "ppl_q8_0.gguf")
    for path, t in ((f32, "f32"), (q8, "q8_0")):
        run([a.tool, "make-test-model", "--arch", "llama", "--type", t, "--seed", "11", "--out", path])

    # --- tokens, as the reference tokenizes the text with the file's own vocabulary
    g = readers.GGUFFile(f32)
    md = g.metadata
    bos = int(md["tokenizer.ggml.bos_token_id"])
    check(bool(md.get("tokenizer.ggml.add_bos_token", True)), "the test vocabulary adds BOS")
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    if text.endswith("\n"):  # llama.cpp's -f drops one final newline
        text = text[:-1]
    ids = spm.SpmVocab.from_gguf_metadata(md).encode(text, bos=False)
    ids = [bos] + ids
    n_chunk = len(ids) // N_CTX
    print(f"{len(ids)} tokens, {n_chunk} windows of {N_CTX}", flush=True)

    # --- perplexity
    m = ref_model.load(f32)
    wins = window_log_probs(m, ids, bos, N_CTX)
    nll = np.concatenate([-lp[np.arange(len(t)), t] for lp, t in wins])
    per = N_CTX - 1 - N_CTX // 2
    running = [math.exp(nll[:(c + 1) * per].mean()) for c in range(n_chunk)]
    ppl = math.exp(nll.mean())
    unc = ppl * math.sqrt((np.mean(nll ** 2) - nll.mean() ** 2) / (len(nll) - 1))
    print(f"reference: PPL = {ppl:.6f} +/- {unc:.6f} over {len(nll)} tokens", flush=True)

    base = os.path.join(d, "base.splg")
    for batch, extra in ((256, ["--save-logits", base]), (64, []), (16, [])):
        out = json.loads(run([a.tool, "perplexity", "-m", f32, "-f", TEXT, "--ctx", str(N_CTX), "--batch", str(batch),
                              "--threads", "2", "--json", *extra]))
        tag = f"--batch {batch}"
        check(out["n_text_tokens"] == len(ids), f"{tag}: {out['n_text_tokens']} tokens (reference {len(ids)})")
        check(out["n_chunk"] == n_chunk and out["n_scored"] == len(nll),
              f"{tag}: {out['n_chunk']} windows, {out['n_scored']} scored tokens")
        rel = abs(out["ppl"] - ppl) / ppl
        check(rel < 1e-4, f"{tag}: PPL {out['ppl']:.6f} vs reference {ppl:.6f} (rel {rel:.1e})")
        urel = abs(out["ppl_uncertainty"] - unc) / unc
        check(urel < 1e-3, f"{tag}: +/- {out['ppl_uncertainty']:.6f} vs {unc:.6f} (rel {urel:.1e})")
        worst = max(abs(x - y) / y for x, y in zip(out["running_ppl"], running))
        check(len(out["running_ppl"]) == n_chunk and worst < 1e-4,
              f"{tag}: running value after each of {n_chunk} windows (worst rel {worst:.1e})")
    # A window that is not in the method: scoring every token instead of the second half differs.
    all_nll = []
    for c in range(n_chunk):
        w = list(ids[c * N_CTX:(c + 1) * N_CTX])
        w[0] = bos
        lp = log_softmax(ref_model.forward(m, w[:-1]))
        all_nll.extend(-lp[np.arange(N_CTX - 1), ids[c * N_CTX + 1:(c + 1) * N_CTX]])
    check(abs(math.exp(np.mean(all_nll)) - ppl) / ppl > 1e-3, "scoring whole windows would give another PPL "
          f"({math.exp(np.mean(all_nll)):.4f}), so the check above tells the methods apart")

    # --- KL divergence of the Q8_0 copy against the F32 base
    mq = ref_model.load(q8)
    mq.int8_acts = True  # Splash's Q8_0 kernels round activations to int8 blocks of 32
    qwins = window_log_probs(mq, ids, bos, N_CTX)
    klds, same, qnll = [], 0, []
    for (lp, t), (lq, _) in zip(wins, qwins):
        p = np.exp(lp)
        klds.extend((p * (lp - lq)).sum(axis=-1))
        same += int((lp.argmax(axis=-1) == lq.argmax(axis=-1)).sum())
        qnll.extend(-lq[np.arange(len(t)), t])
    klds = np.asarray(klds)
    top = same / len(klds)
    qppl = math.exp(np.mean(qnll))
    print(f"reference: KLD mean {klds.mean():.3e}, max {klds.max():.3e}, top-1 {100 * top:.2f}%, PPL(Q) {qppl:.6f}",
          flush=True)
    out = json.loads(run([a.tool, "perplexity", "-m", q8, "--kl-base", base, "--threads", "2", "--json"]))
    check(out["n_scored"] == len(klds), f"KL: {out['n_scored']} tokens compared")
    check(abs(out["ppl_base"]["value"] - ppl) / ppl < 1e-3,
          f"KL: PPL(base) {out['ppl_base']['value']:.6f} from the saved log-probs vs {ppl:.6f}")
    check(abs(out["ppl"]["value"] - qppl) / qppl < 1e-3, f"KL: PPL(Q) {out['ppl']['value']:.6f} vs {qppl:.6f}")
    kl = out["kld_mean"]["value"]
    check(klds.mean() > 1e-5 and abs(kl - klds.mean()) < 0.05 * klds.mean() + 2e-5,
          f"KL: mean KLD {kl:.4e} vs reference {klds.mean():.4e}")
    check(abs(out["kld_max"] - klds.max()) < 0.05 * klds.max() + 2e-5,
          f"KL: max KLD {out['kld_max']:.4e} vs {klds.max():.4e}")
    check(abs(out["same_top"]["value"] - top) <= 2.0 / len(klds) + 1e-9,
          f"KL: top-1 agreement {100 * out['same_top']['value']:.2f}% vs {100 * top:.2f}%")
    # The base compared with itself: no divergence, full agreement.
    out = json.loads(run([a.tool, "perplexity", "-m", f32, "--kl-base", base, "--threads", "2", "--json"]))
    check(out["kld_mean"]["value"] < 1e-4 and out["same_top"]["value"] == 1.0,
          f"KL: the base against itself: KLD {out['kld_mean']['value']:.1e}, top-1 {100 * out['same_top']['value']:.1f}%")

    # --- refusals: a clear message naming the flag or the file, nothing evaluated
    def refused(args, code, words):
        r = subprocess.run([a.tool, "perplexity", *args], capture_output=True, text=True)
        check(r.returncode == code and words in r.stderr, f"refused ({r.returncode}): {' '.join(args[2:]) or args}: "
              f"{r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''}")
    refused(["-m", f32, "-f", TEXT, "--kl-base", base], 2, "-f is not used with --kl-base")
    refused(["-m", f32, "--save-logits", base + ".x", "--kl-base", base], 2, "cannot be combined")
    refused(["-m", f32], 2, "-f FILE is required")
    refused(["-m", f32, "-f", TEXT, "--ctx", "63"], 2, "--ctx 63 must be even")
    refused(["-m", f32, "-f", TEXT, "--ctx", "4096"], 1, "needs at least 8192")
    refused(["-m", f32, "--kl-base", base, "--ctx", "32"], 2, "differs from the base file's 64")
    damaged = os.path.join(d, "damaged.splg")
    with open(base, "rb") as f:
        blob = bytearray(f.read())
    blob[len(blob) // 2] ^= 0x40
    with open(damaged, "wb") as f:
        f.write(blob)
    refused(["-m", f32, "--kl-base", damaged], 1, "checksum mismatch")

    print(f"{len(FAILED)} failed" if FAILED else "all perplexity checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
