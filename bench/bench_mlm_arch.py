"""Held-out masked-LM loss per architecture at a fixed small budget: which encoder leaves the loss plateau?

At a CPU budget of a few million tokens, a post-LN BERT/RoBERTa learns token frequencies and then sits on the
masked-LM loss plateau (held-out loss near the unigram cross-entropy); ModernBERT (pre-LN, rotary positions,
GeGLU) leaves it within a few hundred steps. This benchmark trains each ``--arch`` in turn on the same packed
sequences, masks, initialisation seed and schedule, with kplm's own model code (``hf_config``, ``build_mlm``,
the sparse MLM loss, the AdamW groups and the warm-up/decay schedule) in plain PyTorch on one process, and
prints one JSON object with every architecture's held-out loss curve, tokens/s and the unigram reference.

    python bench/bench_mlm_arch.py --pack runs/study-cpu/morpheme/packed --arch roberta modernbert \\
        --steps 1400 --lr 2e-3
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from kplm.training.config import ModelConfig, PretrainConfig
from kplm.training.data import Masker, PackedData
from kplm.training.engine import lr_lambda
from kplm.training.model import SparseMLMLoss, build_mlm, count_params, hf_config, param_groups
from kplm.training.pack import read_meta


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pack", type=Path, required=True, help="a kplm pack folder (train.npy, valid.npy)")
    p.add_argument("--arch", nargs="+", default=["roberta", "modernbert"], help="architectures to compare")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=16, help="sequences per step")
    p.add_argument("--steps", type=int, default=1400)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--eval-batches", type=int, default=20, help="held-out micro-batches per evaluation")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument(
        "--seed", type=int, default=0, help="initialisation seed (data order and masks: the pack's)"
    )
    return p.parse_args()


def unigram_reference(pack: Path, vocab: int, special: list[int]) -> float:
    """Cross-entropy (nats) of predicting held-out non-special tokens from training-token frequencies."""
    train = np.load(pack / "train.npy", mmap_mode="r")
    counts = np.zeros(vocab, dtype=np.float64)
    for start in range(0, len(train), 8192):
        counts += np.bincount(np.asarray(train[start : start + 8192]).ravel(), minlength=vocab)[:vocab]
    counts[special] = 0
    probs = (counts + 1) / (counts + 1).sum()
    valid = np.asarray(np.load(pack / "valid.npy")).ravel()
    valid = valid[~np.isin(valid, special)]
    return float(-np.log(probs[valid]).mean())


def train_arch(arch: str, args: argparse.Namespace, data: PackedData, meta: dict) -> dict:
    """Train one architecture for ``args.steps`` steps; its held-out loss curve and throughput."""
    torch.manual_seed(args.seed)
    model_config = ModelConfig(
        arch=arch, size="tiny", num_layers=args.layers, hidden=args.hidden, heads=args.heads, ffn=args.ffn,
        dropout=args.dropout,
    )  # fmt: skip
    config = hf_config(
        model_config, vocab_size=meta["vocab_size"], seq_len=meta["seq_len"], ids=meta["special_ids"]
    )
    model = SparseMLMLoss(build_mlm(config))
    schedule = PretrainConfig(
        data=args.pack, tokenizer=args.pack, output=args.pack, max_steps=args.steps, warmup_steps=args.warmup
    )
    optimizer = torch.optim.AdamW(param_groups(model, 0.01), lr=args.lr, betas=(0.9, 0.98), eps=1e-6)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(schedule))

    def held_out() -> float:
        model.eval()
        with torch.no_grad():
            losses = [model(**data.eval_batch(j)).item() for j in range(args.eval_batches)]
        model.train()
        return round(float(np.mean(losses)), 4)

    curve, seconds = [], 0.0
    model.train()
    for step in range(args.steps):
        batch, dropout_seed = data.train_batch(step, 0)
        torch.manual_seed(dropout_seed)
        started = time.perf_counter()
        model(**batch).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        seconds += time.perf_counter() - started
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            curve.append({"step": step + 1, "valid_loss": held_out()})
            print(json.dumps({"arch": arch, **curve[-1]}), flush=True)
    tokens = args.steps * args.batch * meta["seq_len"]
    return {"params": count_params(model), "curve": curve, "final_valid_loss": curve[-1]["valid_loss"],
            "train_seconds": round(seconds, 1), "tokens_per_s": round(tokens / seconds)}  # fmt: skip


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    meta = read_meta(args.pack)
    ids = meta["special_ids"]
    masker = Masker(mask_id=ids["mask"], special_ids=ids["all"], vocab_size=meta["vocab_size"])
    data = PackedData(
        args.pack, seq_len=meta["seq_len"], micro_batch_size=args.batch, grad_accum=1, world_size=1, rank=0,
        seed=int(meta.get("seed", 42)), masker=masker, pad_id=ids["pad"],
    )  # fmt: skip
    results = {arch: train_arch(arch, args, data, meta) for arch in args.arch}
    print(
        json.dumps(
            {
                "benchmark": "mlm_arch_plateau",
                "pack": str(args.pack),
                "settings": {k: v for k, v in vars(args).items() if k not in ("pack", "arch")},
                "tokens_per_arch": args.steps * args.batch * meta["seq_len"],
                "unigram_reference": round(unigram_reference(args.pack, meta["vocab_size"], ids["all"]), 4),
                "load_average": os.getloadavg(),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
