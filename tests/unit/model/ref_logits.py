#!/usr/bin/python3
"""Batch driver of the independent numpy reference (tests/reference/model.py) for test_model:
one process computes the logits of many (model, tokens) jobs, so numpy starts once.

  ref_logits.py JOBS   -- each line of JOBS: MODEL_PATH TOKENS_CSV OUT.npy [int8]
writes OUT.npy = [n_tokens, n_vocab] float32 logits of TOKENS run from an empty cache; `int8`
rounds every matmul input as quantized kernels do (model.int8_acts).
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))

import model as ref_model  # noqa: E402


def main():
    with open(sys.argv[1]) as f:
        jobs = [line.split() for line in f if line.strip()]
    for job in jobs:
        path, toks, out = job[:3]
        m = ref_model.load(path)
        m.int8_acts = "int8" in job[3:]
        logits = ref_model.forward(m, [int(t) for t in toks.split(",")]).astype(np.float32)
        np.save(out, logits)


if __name__ == "__main__":
    main()
