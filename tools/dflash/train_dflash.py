#!/usr/bin/env python3
"""Trains a small DFlash block drafter for stories15M and writes it in the published checkpoint
format (config.json + model.safetensors), ready for `splash ... --draft-model <dir>`.

  /usr/bin/python3 tools/dflash/train_dflash.py --out ~/.cache/splash/demo/stories15M-dflash

Steps (each prints progress):
  1. data: the target (a llama2.c checkpoint) writes its own stories, many at once (batched, KV
     cache): after BOS a random prefix of 1..--prefix tokens sampled at --temperature / --top-p
     (it stands in for a user's prompt: text the target would not write greedily), then greedy
     (what greedy speculative decoding must predict), with a token sampled now and then mid-story
     (--mid-sample) so the greedy continuations do not converge to the same few stories. The
     residual stream after each target layer in --target-layers is recorded for every token, and
     whether the token is the target's greedy choice.
  2. train: blocks anchored at random positions of each story; the drafter sees the target's hidden
     states of every earlier position (context) and [anchor token, mask x (B-1)] and predicts the
     next B-1 tokens through the target's frozen embedding and output head. A label counts only
     while the tokens from the anchor up to it are all greedy (a sampled token is not what
     verification would accept). Loss: cross-entropy per block position, weighted
     exp(-(k-1)/gamma) so the first proposals (which gate acceptance) count most.
  3. evaluate: greedy speculative decoding simulated on held-out user-like prompts (fixed texts
     that are not in the training data; the target's greedy continuation of --eval-tokens tokens,
     drafting from each committed position as the engine does) and from BOS: the mean tokens per
     verify step (accepted + 1), as `scripts/bench-spec` reports them.
Deterministic for a given --seed and thread count. Runtime with the defaults, measured with
--threads 1 on a loaded 2-core machine (load average 3-5): ~15 min of one core (data 231 s for
1280 stories, 2400 steps at 0.26 s, evaluation ~25 s); cost grows linearly with --stories and
--steps. Held-out result and the bench-spec figures: docs/SPECULATIVE.md, docs/PERFORMANCE.md.
"""

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads OpenBLAS: no spinning helper threads
# OpenMP threads that spin while they wait: on 2 busy cores a 2-thread forward took 6x as long as a
# 1-thread one (922 vs 155 ms per generation step); sleeping waits made them equal.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dflash_torch as dt  # noqa: E402

# Held-out prompts for the evaluation: what a user of the demo might type (none is a prefix the
# training data can contain verbatim: those are sampled by the target). Not scripts/bench-spec's
# prompts, so the benchmark stays an independent check.
EVAL_PROMPTS = [
    "Once upon a time, there was a little girl named Mia. She loved to paint",
    "The cat sat by the window and looked at the rain. It wanted to go outside",
    "Sam found a shiny key in the garden.",
    "One day, a little bird could not fly. Its wing was hurt.",
    "Anna and Ben were building a tall tower of blocks in their room.",
    "There was a big old tree in the middle of the town.",
    "Lucy wanted a cookie, but her mom said no.",
    "A small boat sailed on the blue sea. On the boat was a fisherman named Joe.",
]


def log(msg):
    print(f"[train_dflash {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sample(logits, temperature, top_p, gen):
    """One token per row of logits [n, V] at `temperature`, from the smallest set of ids holding
    `top_p` of the probability."""
    probs = torch.softmax(logits / temperature, -1)
    if top_p < 1.0:  # among the 256 likeliest ids (a full sort of the vocabulary costs more than a forward)
        p_top, ids = probs.topk(256, -1)
        keep = (p_top.cumsum(-1) - p_top) < top_p  # the top id is always kept
        return ids.gather(1, torch.multinomial(p_top * keep, 1, generator=gen))[:, 0]
    return torch.multinomial(probs, 1, generator=gen)[:, 0]


@torch.no_grad()
def generate(target, n_seqs, length, taps, gen, args, batch=128):
    """Stories of `length` tokens starting with BOS (1): tokens [n, length] int64, hidden
    [n, length, len(taps) * dim] fp16 (row t = residual streams after token t), greedy [n, length]
    bool (token t is the argmax of the target's logits at t - 1; BOS counts as greedy)."""
    toks, feats, greedy = [], [], []
    t0 = time.time()
    for b0 in range(0, n_seqs, batch):
        b = min(batch, n_seqs - b0)
        n_prefix = torch.randint(1, args.prefix + 1, (b,), generator=gen)
        cache = dt.KVCache(target.n_layers, b, target.n_kv, length, target.head_dim)
        cur = torch.ones(b, 1, dtype=torch.long)
        seq, hid, flags = [cur], [], [torch.ones(b, 1, dtype=torch.bool)]
        for pos in range(length):
            logits, taps_out = target.forward(cur, pos, cache, taps=taps)
            hid.append(torch.cat([taps_out[il] for il in taps], dim=-1).half())
            if pos == length - 1:
                break
            lg = logits[:, -1]
            best = lg.argmax(-1)
            nxt = best.clone()
            draw = (pos < n_prefix) | (torch.rand(b, generator=gen) < args.mid_sample)
            rows = draw.nonzero()[:, 0]
            if rows.numel():
                nxt[rows] = sample(lg[rows], args.temperature, args.top_p, gen)
            seq.append(nxt[:, None])
            flags.append((nxt == best)[:, None])
            cur = nxt[:, None]
        toks.append(torch.cat(seq, 1))
        feats.append(torch.cat(hid, 1))
        greedy.append(torch.cat(flags, 1))
        el = time.time() - t0
        log(f"data: {b0 + b}/{n_seqs} stories ({el:.0f} s, eta {el / (b0 + b) * (n_seqs - b0 - b):.0f} s)")
    return torch.cat(toks), torch.cat(feats), torch.cat(greedy)


def block_batch(tokens, greedy, n_blocks, B, mask_id, gen):
    """Anchors s in [1, L - B], the same for every story of the batch (so the drafter runs on all
    of them at once): context rows [0, s), block [tok[s], mask...] at s..s+B-1, labels
    tok[s+1 .. s+B-1], valid while tok[s+1 .. label] are all greedy. Returns block tokens
    [b, nb*B], block positions [nb*B], labels [b, nb, B-1], valid [b, nb, B-1],
    visible [nb*B, L + nb*B]."""
    b, L = tokens.shape
    anchors = torch.randperm(L - B, generator=gen)[:n_blocks] + 1  # distinct anchors
    pos = anchors[:, None] + torch.arange(B)  # [nb, B]
    blk = torch.full((b, n_blocks, B), mask_id, dtype=torch.long)
    blk[..., 0] = tokens[:, anchors]
    lab_pos = pos[:, 1:].reshape(-1)
    labels = tokens[:, lab_pos].view(b, n_blocks, B - 1)
    valid = greedy[:, lab_pos].view(b, n_blocks, B - 1).int().cumprod(-1).bool()
    ctx_vis = torch.arange(L)[None, :] < anchors[:, None]  # [nb, L]
    ctx_vis = ctx_vis[:, None, :].expand(n_blocks, B, L).reshape(n_blocks * B, L)
    own = torch.block_diag(*[torch.ones(B, B, dtype=torch.bool)] * n_blocks)
    return blk.view(b, -1), pos.view(-1), labels, valid, torch.cat([ctx_vis, own], dim=-1)


@torch.no_grad()
def continuation(target, prompt, n_new, taps):
    """The target's greedy continuation of `prompt` (ids, BOS first): tokens [len + n_new] and
    hidden rows [len + n_new - 1, n_taps * dim] (the last token's row is never needed)."""
    cache = [None] * target.n_layers
    cur = torch.tensor([prompt])
    toks, hid = list(prompt), []
    start = 0
    for _ in range(n_new):
        logits, taps_out = target.forward(cur, start, cache, taps=taps)
        hid.append(torch.cat([taps_out[il] for il in taps], dim=-1)[0])
        start += cur.shape[1]
        nxt = int(logits[0, -1].argmax())
        toks.append(nxt)
        cur = torch.tensor([[nxt]])
    return torch.tensor(toks), torch.cat(hid)


@torch.no_grad()
def simulate(model, target, toks, hid, n_prompt):
    """Greedy speculative decoding of toks[n_prompt:] as the engine runs it: the first anchor is
    the target's first token after the prompt; each round drafts B-1 tokens from the context rows
    [0, s) and anchor toks[s], accepts the matching run k and commits k + 1 tokens. Returns
    (tokens committed, verify steps)."""
    B = model.cfg["block_size"]
    s, end, steps = n_prompt, toks.shape[0] - 1, 0
    while s < end:
        logits = dt.draft_step_logits(model, hid[:s], s, int(toks[s]), target.embed, target.head)
        truth = toks[s + 1:s + B]
        k = (logits[:truth.shape[0]].argmax(-1) == truth).int().cumprod(0).sum().item()
        steps += 1
        s += k + 1
    return end - n_prompt, steps


def evaluate_prompts(model, target, conts):
    """conts: (name, tokens, hidden, n_prompt) per prompt. Returns {name: tokens per step}."""
    return {name: (lambda c, st: c / st)(*simulate(model, target, toks, hid, n)) for name, toks, hid, n in conts}


def eval_continuations(target, args, taps):
    """The held-out prompts (BOS, then EVAL_PROMPTS when a tokenizer is found) with the target's
    greedy continuations: (name, tokens, hidden, n_prompt) each."""
    tok_path = args.tokenizer or os.path.join(os.path.dirname(os.path.abspath(args.target)), "tokenizer.bin")
    prompts = [("BOS", [1])]
    if os.path.exists(tok_path):
        tokenizer = dt.Llama2cTokenizer(tok_path, target.vocab)
        prompts += [(f"prompt {i + 1}", tokenizer.encode(p)) for i, p in enumerate(EVAL_PROMPTS)]
    else:
        log(f"no tokenizer at {tok_path}: evaluating from BOS only")
    return [(name, *continuation(target, ids, args.eval_tokens, taps), len(ids)) for name, ids in prompts]


def report(model, target, conts):
    t = time.time()
    res = evaluate_prompts(model, target, conts)
    held = [v for k, v in res.items() if k != "BOS"]
    mean = sum(held) / len(held) if held else float("nan")
    log("tokens per verify step: " + ", ".join(f"{k} {v:.2f}" for k, v in res.items()))
    log(f"held-out prompts: {mean:.2f} tokens per verify step (mean of {len(held)}); BOS {res['BOS']:.2f} "
        f"({time.time() - t:.0f} s)")
    return res, mean


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=os.path.expanduser("~/.cache/splash/demo/stories15M.bin"),
                    help="llama2.c checkpoint of the target (default: the demo's stories15M.bin)")
    ap.add_argument("--tokenizer", default="", help="llama2.c tokenizer.bin for the evaluation prompts "
                    "(default: tokenizer.bin beside --target; without one only BOS is evaluated)")
    ap.add_argument("--out", help="output directory (config.json + model.safetensors)")
    ap.add_argument("--evaluate", metavar="DIR", help="only evaluate the drafter in DIR (held-out prompts, BOS)")
    ap.add_argument("--steps", type=int, default=2400,
                    help="optimizer steps (default 2400, ~0.26 s of one core each)")
    ap.add_argument("--stories", type=int, default=1280,
                    help="training stories generated by the target (default 1280, ~0.18 s of one core each)")
    ap.add_argument("--length", type=int, default=160, help="tokens per story (<= target seq_len)")
    ap.add_argument("--prefix", type=int, default=40,
                    help="longest sampled prefix after BOS (1..N tokens per story): the stand-in for a prompt")
    ap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the prefix")
    ap.add_argument("--top-p", type=float, default=0.95, help="nucleus of the sampled tokens")
    ap.add_argument("--mid-sample", type=float, default=0.02,
                    help="chance that a token after the prefix is sampled instead of greedy")
    ap.add_argument("--block-size", type=int, default=8)
    ap.add_argument("--layers", type=int, default=2, help="drafter decoder layers")
    ap.add_argument("--target-layers", default="1,3,4", help="comma-separated target layer ids to tap")
    ap.add_argument("--batch", type=int, default=8, help="stories per step")
    ap.add_argument("--blocks", type=int, default=12, help="blocks per story per step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--gamma", type=float, default=4.0, help="loss weight decay over block positions")
    ap.add_argument("--mask-token", type=int, default=0, help="mask token id (stories15M: 0 = <unk>)")
    ap.add_argument("--eval-tokens", type=int, default=128, help="greedy tokens per evaluation prompt")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-cache", default="", help="file keeping the generated stories and hidden states "
                    "between runs (regenerated when the data flags change)")
    ap.add_argument("--cache-all-taps", action="store_true",
                    help="keep every target layer in --data-cache (to try other --target-layers on the same data)")
    args = ap.parse_args()
    if not args.out and not args.evaluate:
        ap.error("--out (train) or --evaluate (evaluate a trained drafter) is required")

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

    if args.evaluate:
        with open(os.path.join(args.evaluate, "config.json")) as f:
            cfg = json.load(f)
        model = dt.DFlashDrafter(cfg)
        model.load_state(dt.load_safetensors(os.path.join(args.evaluate, "model.safetensors")))
        report(model, target, eval_continuations(target, args, cfg["dflash_config"]["target_layer_ids"]))
        return

    key = dict(target=os.path.abspath(args.target), n=args.stories, length=args.length, seed=args.seed,
               prefix=args.prefix, temperature=args.temperature, top_p=args.top_p, mid=args.mid_sample)
    cached = torch.load(args.data_cache) if args.data_cache and os.path.exists(args.data_cache) else None
    if cached is not None and cached.get("key") == key and set(taps) <= set(cached["taps"]):
        tokens, greedy = cached["tokens"], cached["greedy"]
        D = target.dim  # the cache may hold more taps than asked for (--cache-all-taps)
        cols = torch.cat([torch.arange(D) + cached["taps"].index(il) * D for il in taps])
        feats = cached["feats"][..., cols]
        log(f"data: {tokens.shape[0]} stories from {args.data_cache}")
        # the generator must be where it would be after generating (training draws continue from it)
        gen.set_state(cached["gen_state"])
    else:
        rec = list(range(target.n_layers)) if args.cache_all_taps else taps
        tokens, feats, greedy = generate(target, args.stories, args.length, rec, gen, args)
        if args.data_cache:
            torch.save({"key": key, "taps": rec, "tokens": tokens, "feats": feats, "greedy": greedy,
                        "gen_state": gen.get_state()}, args.data_cache)
        feats = feats[..., torch.cat([torch.arange(target.dim) + rec.index(il) * target.dim for il in taps])]
    t_data = time.time() - t0
    log(f"data ready in {t_data:.0f} s: {int(greedy.sum())} of {greedy.numel()} tokens greedy")

    conts = eval_continuations(target, args, taps)  # before training: a bad tokenizer path fails early

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
    # The loss runs over the tokens the target actually writes greedily (a few thousand of the 32000
    # ids): the output-head product, most of a step, shrinks accordingly. Evaluation and the C++
    # drafter use the full head.
    vocab = torch.unique(tokens[greedy])
    remap = torch.zeros(target.vocab, dtype=torch.long)  # labels outside the set are never valid
    remap[vocab] = torch.arange(vocab.numel())
    head_sub = head[vocab]
    log(f"training loss over the {vocab.numel()} token ids the stories use greedily")
    weights = torch.exp(-torch.arange(B - 1, dtype=torch.float32) / args.gamma)
    t1 = time.time()
    ema = None
    for step in range(args.steps):
        idx = torch.randint(0, tokens.shape[0], (args.batch,), generator=gen)
        blk, pos, labels, valid, vis = block_batch(tokens[idx], greedy[idx], args.blocks, B, args.mask_token, gen)
        hidden = model(feats[idx].float(), torch.arange(tokens.shape[1]), embed[blk], pos, vis)
        hidden = hidden.view(args.batch, args.blocks, B, -1)[:, :, 1:]  # proposal rows
        logits = hidden @ head_sub.T
        labels = remap[labels]
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
        w = weights * valid
        loss = (ce.view_as(w) * w).sum() / w.sum().clamp(min=1e-6)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 50 == 0 or step == args.steps - 1:
            with torch.no_grad():
                v1 = valid[..., 0]
                acc1 = (logits[..., 0, :].argmax(-1) == labels[..., 0])[v1].float().mean().item()
            el = time.time() - t1
            log(f"step {step + 1}/{args.steps} loss {ema:.3f} top1@1 {acc1:.2f} "
                f"({el / (step + 1):.2f} s/step, eta {el / (step + 1) * (args.steps - step - 1):.0f} s)")
    t_train = time.time() - t1

    res, mean_prompts = report(model, target, conts)

    os.makedirs(args.out, exist_ok=True)
    cfg["splash_training"] = {"steps": args.steps, "stories": args.stories, "length": args.length,
                              "prefix": args.prefix, "mid_sample": args.mid_sample, "seed": args.seed,
                              "heldout_prompts_tokens_per_step": round(mean_prompts, 3),
                              "bos_tokens_per_step": round(res["BOS"], 3)}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    dt.save_safetensors(os.path.join(args.out, "model.safetensors"), model.state(),
                        {"format": "pt", "producer": "splash tools/dflash/train_dflash.py"})
    log(f"wrote {args.out} in {time.time() - t0:.0f} s total (data {t_data:.0f} s, training {t_train:.0f} s)")


if __name__ == "__main__":
    main()
