#!/usr/bin/env python3
"""Trains a small DFlash block drafter for stories15M and writes it in the published checkpoint
format (config.json + model.safetensors), ready for `splash ... --draft-model <dir>`.

  /usr/bin/python3 tools/dflash/train_dflash.py --out ~/.cache/splash/demo/stories15M-dflash

Steps (each prints progress):
  1. data: the target (a llama2.c checkpoint) writes its own stories: a short random prefix sampled at
     temperature 1 (diversity), then greedy (what greedy speculative decoding must predict). The
     residual stream after each target layer in --target-layers is recorded for every token.
  2. train: blocks anchored at random positions of each story; the drafter sees the target's hidden
     states of every earlier position (context) and [anchor token, mask x (B-1)] and predicts the
     next B-1 tokens through the target's frozen embedding and output head. Loss: cross-entropy per
     block position, weighted exp(-(k-1)/gamma) so the first proposals (which gate acceptance)
     count most.
  3. evaluate: greedy block acceptance on held-out stories (mean accepted proposals per block and
     the mean tokens per verify step, accepted + 1).
Deterministic for a given --seed and thread count. Runtime: data generation (~1.3 s of CPU per
story) and --steps (~1.5 s of CPU each).
"""

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads OpenBLAS: no spinning helper threads
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dflash_torch as dt  # noqa: E402


def log(msg):
    print(f"[train_dflash {time.strftime('%H:%M:%S')}] {msg}", flush=True)


@torch.no_grad()
def generate(target, n_seqs, length, taps, gen, batch=64, max_random=11):
    """Stories of `length` tokens starting with BOS (1): tokens [n, length], hidden
    [n, length, len(taps) * dim] (fp16; row t = residual streams after token t)."""
    toks, feats = [], []
    for b0 in range(0, n_seqs, batch):
        b = min(batch, n_seqs - b0)
        n_random = torch.randint(1, max_random + 1, (b,), generator=gen)
        cache = [None] * target.n_layers
        cur = torch.ones(b, 1, dtype=torch.long)
        seq, hid = [cur], []
        for pos in range(length):
            logits, taps_out = target.forward(cur, pos, cache, taps=taps)
            hid.append(torch.cat([taps_out[il] for il in taps], dim=-1).half())
            if pos == length - 1:
                break
            lg = logits[:, -1]
            cur = lg.argmax(-1, keepdim=True)
            if pos < int(n_random.max()):  # sampling is the slow part: only while a prefix needs it
                sampled = torch.multinomial(torch.softmax(lg, -1), 1, generator=gen)
                cur = torch.where((pos < n_random)[:, None], sampled, cur)
            seq.append(cur)
        toks.append(torch.cat(seq, 1))
        feats.append(torch.cat(hid, 1))
        log(f"data: {b0 + b}/{n_seqs} stories")
    return torch.cat(toks), torch.cat(feats)


def block_batch(tokens, feats, n_blocks, B, mask_id, gen):
    """Anchors s in [1, L - B]: context rows [0, s), block [tok[s], mask...] at s..s+B-1, labels
    tok[s+1 .. s+B-1]. Returns block tokens [b, nb*B], block positions [b, nb*B], labels [b, nb, B-1],
    visible [b, nb*B, L + nb*B]."""
    b, L = tokens.shape
    anchors = torch.randint(1, L - B + 1, (b, n_blocks), generator=gen)
    offs = torch.arange(B)
    pos = anchors[..., None] + offs  # [b, nb, B]
    blk = torch.full((b, n_blocks, B), mask_id, dtype=torch.long)
    blk[..., 0] = tokens.gather(1, anchors)
    labels = tokens.gather(1, pos[..., 1:].reshape(b, -1)).view(b, n_blocks, B - 1)
    ctx_vis = torch.arange(L)[None, None, :] < anchors[..., None]  # [b, nb, L]
    ctx_vis = ctx_vis[:, :, None, :].expand(b, n_blocks, B, L).reshape(b, n_blocks * B, L)
    own = torch.block_diag(*[torch.ones(B, B, dtype=torch.bool)] * n_blocks)
    vis = torch.cat([ctx_vis, own[None].expand(b, -1, -1)], dim=-1)
    return blk.view(b, -1), pos.view(b, -1), labels, vis


def forward_blocks(model, feats, blk, pos, vis, embed):
    """Batched training forward: per sequence its own positions and visibility."""
    outs = []
    L = feats.shape[1]
    for i in range(feats.shape[0]):  # per sequence: positions differ, the drafter takes one set
        outs.append(model(feats[i:i + 1].float(), torch.arange(L), embed[blk[i]][None], pos[i], vis[i]))
    return torch.cat(outs)


@torch.no_grad()
def evaluate(model, target, tokens, feats, B, mask_id, n_anchors=16):
    """Greedy acceptance: for anchors along held-out stories, how many proposals match the target's
    own greedy continuation (the stories are greedy after their short random prefix, so the next
    tokens are that continuation)."""
    accepted = []
    gen = torch.Generator().manual_seed(1234)
    L = tokens.shape[1]
    for i in range(tokens.shape[0]):
        for s in torch.randint(16, L - B + 1, (n_anchors,), generator=gen).tolist():
            logits = dt.draft_step_logits(model, feats[i, :s].float(), s, int(tokens[i, s]), target.embed,
                                          target.head)
            prop = logits.argmax(-1)
            truth = tokens[i, s + 1:s + B]
            ok = (prop == truth).int().cumprod(0).sum().item()
            accepted.append(ok)
    mean = sum(accepted) / len(accepted)
    return mean, mean + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=os.path.expanduser("~/.cache/splash/demo/stories15M.bin"),
                    help="llama2.c checkpoint of the target (default: the demo's stories15M.bin)")
    ap.add_argument("--out", required=True, help="output directory (config.json + model.safetensors)")
    ap.add_argument("--steps", type=int, default=400, help="optimizer steps (default 400)")
    ap.add_argument("--stories", type=int, default=160, help="training stories generated by the target")
    ap.add_argument("--eval-stories", type=int, default=16)
    ap.add_argument("--length", type=int, default=192, help="tokens per story (<= target seq_len)")
    ap.add_argument("--random-prefix", type=int, default=11,
                    help="longest prefix sampled at temperature 1 before the greedy part (1..N tokens per story); "
                    "longer prefixes give more diverse stories (short ones mostly converge to the same few)")
    ap.add_argument("--block-size", type=int, default=8)
    ap.add_argument("--layers", type=int, default=2, help="drafter decoder layers")
    ap.add_argument("--target-layers", default="1,3,4", help="comma-separated target layer ids to tap")
    ap.add_argument("--batch", type=int, default=8, help="stories per step")
    ap.add_argument("--blocks", type=int, default=12, help="blocks per story per step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--gamma", type=float, default=4.0, help="loss weight decay over block positions")
    ap.add_argument("--mask-token", type=int, default=0, help="mask token id (stories15M: 0 = <unk>)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-cache", default="", help="file keeping the generated stories and hidden states "
                    "between runs (regenerated when the data flags change)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    t0 = time.time()
    target = dt.Llama2c(args.target)
    taps = [int(x) for x in args.target_layers.split(",")]
    if any(il < 0 or il >= target.n_layers for il in taps):
        sys.exit(f"--target-layers: ids must be in [0, {target.n_layers})")
    if args.length > target.seq_len or args.length < 2 * args.block_size:
        sys.exit(f"--length must be in [{2 * args.block_size}, {target.seq_len}]")
    B = args.block_size
    log(f"target {args.target}: dim {target.dim}, {target.n_layers} layers, vocab {target.vocab}; "
        f"taps {taps}, block {B}, {args.layers} drafter layer(s)")

    key = dict(target=os.path.abspath(args.target), n=args.stories + args.eval_stories, length=args.length,
               taps=taps, seed=args.seed)
    cached = torch.load(args.data_cache) if args.data_cache and os.path.exists(args.data_cache) else None
    if cached is not None and cached.get("key") == key:
        tokens, feats = cached["tokens"], cached["feats"]
        log(f"data: {tokens.shape[0]} stories from {args.data_cache}")
    else:
        tokens, feats = generate(target, args.stories + args.eval_stories, args.length, taps, gen,
                                 max_random=args.random_prefix)
        if args.data_cache:
            torch.save({"key": key, "tokens": tokens, "feats": feats}, args.data_cache)
    tr_tok, tr_feat = tokens[:args.stories], feats[:args.stories]
    ev_tok, ev_feat = tokens[args.stories:], feats[args.stories:]
    log(f"data ready in {time.time() - t0:.0f} s")

    cfg = dt.make_config(hidden_size=target.dim, n_layers=args.layers, n_heads=target.n_heads,
                         n_kv_heads=target.n_heads, head_dim=target.head_dim, intermediate_size=target.hidden,
                         vocab_size=target.vocab, block_size=B, mask_token_id=args.mask_token,
                         target_layer_ids=taps, num_target_layers=target.n_layers,
                         max_position_embeddings=target.seq_len)
    model = dt.DFlashDrafter(cfg)
    embed, head = target.embed, target.head
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    warm = max(1, args.steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps)))
    # The loss runs over the tokens the target actually writes (its stories use a few thousand of the
    # 32000 ids): the output-head product, most of a step, shrinks accordingly. Evaluation and the
    # C++ drafter use the full head.
    vocab = torch.unique(tokens)
    remap = torch.full((target.vocab,), -1, dtype=torch.long)
    remap[vocab] = torch.arange(vocab.numel())
    head_sub = head[vocab]
    log(f"training loss over the {vocab.numel()} token ids the stories use")
    weights = torch.exp(-torch.arange(B - 1, dtype=torch.float32) / args.gamma)
    weights = weights / weights.sum()
    t1 = time.time()
    ema = None
    for step in range(args.steps):
        idx = torch.randint(0, tr_tok.shape[0], (args.batch,), generator=gen)
        blk, pos, labels, vis = block_batch(tr_tok[idx], tr_feat[idx], args.blocks, B, args.mask_token, gen)
        hidden = forward_blocks(model, tr_feat[idx], blk, pos, vis, embed)
        hidden = hidden.view(args.batch, args.blocks, B, -1)[:, :, 1:]  # proposal rows
        logits = hidden @ head_sub.T
        labels = remap[labels]
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
        loss = (ce.view(args.batch, args.blocks, B - 1) * weights).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 25 == 0 or step == args.steps - 1:
            with torch.no_grad():
                acc1 = (logits[..., 0, :].argmax(-1) == labels[..., 0]).float().mean().item()
            el = time.time() - t1
            log(f"step {step + 1}/{args.steps} loss {ema:.3f} top1@1 {acc1:.2f} "
                f"({el / (step + 1):.2f} s/step, eta {el / (step + 1) * (args.steps - step - 1):.0f} s)")

    mean_acc, tokens_per_step = evaluate(model, target, ev_tok, ev_feat, B, args.mask_token)
    log(f"held-out greedy acceptance: {mean_acc:.2f} of {B - 1} proposals per block, "
        f"{tokens_per_step:.2f} tokens per verify step")

    os.makedirs(args.out, exist_ok=True)
    cfg["splash_training"] = {"steps": args.steps, "stories": args.stories, "length": args.length,
                              "seed": args.seed, "heldout_mean_accepted": round(mean_acc, 3)}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    dt.save_safetensors(os.path.join(args.out, "model.safetensors"), model.state(),
                        {"format": "pt", "producer": "splash tools/dflash/train_dflash.py"})
    log(f"wrote {args.out} in {time.time() - t0:.0f} s total")


if __name__ == "__main__":
    main()
