#!/usr/bin/env python3
"""Writes the cross-check fixture of the C++ DFlash drafter (tests/unit/spec/dflash_model_test.cpp):
tiny random drafters in the published checkpoint format, a target token table and output head, and
drafting rounds with the logits the training code's own forward (dflash_torch.draft_step_logits,
float64, every round recomputed from all context rows) gives for them.

  /usr/bin/python3 tools/dflash/make_fixture.py OUT_DIR

OUT_DIR/<variant>/ for variant in plain (GQA, head_dim != hidden/heads) and window (sliding window
of 5 positions): drafter/config.json, drafter/model.safetensors, target.safetensors
(embed [V, D], head [V, D]) and rounds.safetensors:
  hidden [n_positions, n_taps * D]  target hidden rows, one per position
  rounds [n_rounds, 3] int32        (first context position, end = anchor position, anchor token)
  logits.<r> [B - 1, V]             expected proposal logits of round r
The C++ side feeds each round's rows [first, end) incrementally (as the engine does: only rows of
newly committed tokens) and must reproduce the logits.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dflash_torch as dt  # noqa: E402

D, V, B = 32, 50, 4
TAPS = [0, 2]
ROUNDS = [(0, 5), (5, 8), (8, 9), (9, 14), (14, 15)]


def write_variant(out, seed, window):
    torch.manual_seed(seed)
    cfg = dt.make_config(hidden_size=D, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=48,
                         vocab_size=V, block_size=B, mask_token_id=V - 1, target_layer_ids=TAPS,
                         num_target_layers=3, rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=64,
                         sliding_window=window)
    model = dt.DFlashDrafter(cfg)
    with torch.no_grad():  # norms away from 1 so a missing or misplaced norm shows
        for k, p in model.params.items():
            if "norm" in k:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
    os.makedirs(os.path.join(out, "drafter"), exist_ok=True)
    with open(os.path.join(out, "drafter", "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    dt.save_safetensors(os.path.join(out, "drafter", "model.safetensors"), model.state(), {"format": "pt"})
    embed = torch.randn(V, D)
    head = torch.randn(V, D) / D ** 0.5
    dt.save_safetensors(os.path.join(out, "target.safetensors"), {"embed": embed, "head": head})

    n_pos = ROUNDS[-1][1]
    hidden = torch.randn(n_pos, len(TAPS) * D) * 2.0
    tensors = {"hidden": hidden}
    rounds = []
    m64 = dt.DFlashDrafter(cfg).double()
    m64.load_state({k: v.double() for k, v in model.state().items()})
    for r, (first, end) in enumerate(ROUNDS):
        anchor = int(torch.randint(0, V - 1, (1,)))
        rounds.append([first, end, anchor])
        with torch.no_grad():
            logits = dt.draft_step_logits(m64, hidden[:end].double(), end, anchor, embed.double(), head.double())
        tensors[f"logits.{r}"] = logits.float()
    tensors["rounds"] = torch.tensor(rounds, dtype=torch.int32)
    dt.save_safetensors(os.path.join(out, "rounds.safetensors"), tensors)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    write_variant(os.path.join(out, "plain"), 7, None)
    write_variant(os.path.join(out, "window"), 11, 5)
    print(f"wrote {out}/plain and {out}/window")


if __name__ == "__main__":
    main()
