#!/usr/bin/python3
"""Independent numpy reference for Splash (run with Debian's /usr/bin/python3, which has numpy).

  reference.py logits   --model PATH --tokens 1,2,3 --out logits.npy   [n_tokens, n_vocab] float32
  reference.py greedy   --model PATH --n 200 [--prompt 1,2] [--tokenizer tokenizer.bin]
  reference.py ppl      --model PATH --tokens-file ids.txt [--ctx N]
  reference.py tokenize --tokenizer tokenizer.bin --text-file FILE [--out ids.txt]
  reference.py top      --model PATH --tokens 1,2,3 --positions 0,5 [--k 5]  (JSON top-k)

PATH: a GGUF file, a llama2.c .bin checkpoint, or a safetensors model directory (HF or MLX).
See model.py for the math and the RoPE conventions of each format.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import model as ref_model  # noqa: E402
import spm  # noqa: E402


def parse_ids(s):
    return [int(t) for t in s.replace("\n", ",").replace(" ", ",").split(",") if t.strip()]


def read_ids_file(path):
    with open(path) as f:
        return parse_ids(" ".join(line.split("#")[0] for line in f))


def bos_of(m, override):
    if override is not None:
        return override
    if m.bos is None:
        raise SystemExit("the model names no BOS token; pass --bos")
    return int(m.bos)


def cmd_logits(a):
    m = ref_model.load(a.model)
    logits = ref_model.forward(m, parse_ids(a.tokens)).astype(np.float32)
    np.save(a.out, logits)
    print(f"wrote {a.out}: {logits.shape}", file=sys.stderr)


def cmd_top(a):
    m = ref_model.load(a.model)
    toks = parse_ids(a.tokens)
    logits = ref_model.forward(m, toks)
    res = []
    for p in parse_ids(a.positions):
        row = logits[p]
        ids = np.argsort(-row, kind="stable")[:a.k]
        res.append({"position": p, "ids": [int(i) for i in ids],
                    "logits": [round(float(row[i]), 6) for i in ids]})
    print(json.dumps({"tokens": toks, "top": res}))


def cmd_greedy(a):
    m = ref_model.load(a.model)
    prompt = parse_ids(a.prompt) if a.prompt else [bos_of(m, a.bos)]
    out = ref_model.greedy(m, prompt, a.n)
    print(",".join(str(t) for t in out))
    if a.tokenizer:
        print(spm.SpmVocab.from_llama2c(a.tokenizer, m.n_vocab).decode(prompt + out), file=sys.stderr)


def cmd_ppl(a):
    m = ref_model.load(a.model)
    ids = read_ids_file(a.tokens_file)
    ctx = a.ctx or m.ctx or 512
    total, count = ref_model.nll_sum(m, ids, ctx, bos_of(m, a.bos))
    print(json.dumps({"tokens": count, "ctx": ctx, "nll_mean": total / count,
                      "perplexity": math.exp(total / count)}))


def cmd_tokenize(a):
    with open(a.text_file, encoding="utf-8") as f:
        text = f.read()
    ids = spm.SpmVocab.from_llama2c(a.tokenizer).encode(text, bos=False)
    s = "\n".join(",".join(str(t) for t in ids[i:i + 32]) for i in range(0, len(ids), 32)) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(s)
        print(f"{len(ids)} tokens -> {a.out}", file=sys.stderr)
    else:
        sys.stdout.write(s)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("logits")
    s.add_argument("--model", required=True)
    s.add_argument("--tokens", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_logits)
    s = sub.add_parser("top")
    s.add_argument("--model", required=True)
    s.add_argument("--tokens", required=True)
    s.add_argument("--positions", required=True)
    s.add_argument("--k", type=int, default=5)
    s.set_defaults(fn=cmd_top)
    s = sub.add_parser("greedy")
    s.add_argument("--model", required=True)
    s.add_argument("--n", type=int, default=200)
    s.add_argument("--prompt")
    s.add_argument("--bos", type=int)
    s.add_argument("--tokenizer", help="llama2.c tokenizer.bin: print the decoded text to stderr")
    s.set_defaults(fn=cmd_greedy)
    s = sub.add_parser("ppl")
    s.add_argument("--model", required=True)
    s.add_argument("--tokens-file", required=True)
    s.add_argument("--ctx", type=int, default=0, help="window length (default: the model's context)")
    s.add_argument("--bos", type=int)
    s.set_defaults(fn=cmd_ppl)
    s = sub.add_parser("tokenize")
    s.add_argument("--tokenizer", required=True)
    s.add_argument("--text-file", required=True)
    s.add_argument("--out")
    s.set_defaults(fn=cmd_tokenize)
    a = p.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
