"""KorSTS with a fine-tuned bi-encoder: each sentence encoded alone, cosine of mean-pooled states vs. the score.

The study's KorSTS task is KLUE's cross-encoder (both sentences in one input, a regression head). At the
study's scale both its arms stay near the floor there, so this asks a narrower question of the same models:
do their token states, mean-pooled per sentence, carry similarity that fine-tuning can sharpen? Training is
Sentence-BERT's regression objective (MSE between the cosine and score / 5), AdamW with linear warm-up
(10%) and decay, batch 32, gradient clipping 1.0; Pearson × 100 on the evaluation split after every epoch
(epoch 0 = no training, the zero-shot cosine of ``bench_sts_zero_shot.py``'s last layer). Prints one JSON
object.

    python bench/bench_sts_biencoder.py --model runs/study-cpu/morpheme/model runs/study-cpu/random_init/model
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sts_zero_shot import KORSTS, read_pairs  # noqa: E402


def encode(model: torch.nn.Module, tokenizer, texts: list[str]) -> torch.Tensor:  # noqa: ANN001
    """Mean of the non-padding last-layer token states for each text (with gradients when training)."""
    enc = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    states = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    return (states * mask).sum(1) / mask.sum(1)


def pearson(model: torch.nn.Module, tokenizer, pairs: tuple) -> float:  # noqa: ANN001
    """Pearson × 100 between the cosine of the two sentences' encodings and the gold scores."""
    first, second, gold = pairs
    model.eval()
    cosines = []
    with torch.no_grad():
        for i in range(0, len(first), 128):
            a, b = encode(model, tokenizer, first[i : i + 128]), encode(model, tokenizer, second[i : i + 128])
            cosines.append(torch.nn.functional.cosine_similarity(a, b))
    model.train()
    return round(float(np.corrcoef(torch.cat(cosines).numpy(), gold)[0, 1]) * 100, 2)


def finetune(folder: str, train: tuple, evaluation: tuple, args: argparse.Namespace) -> dict:
    """Train ``folder``'s encoder on ``train`` for ``args.epochs``; Pearson on ``evaluation`` per epoch."""
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(args.seed)
    order_rng = random.Random(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder)
    first, second, gold = train
    steps = args.epochs * ((len(first) + args.batch_size - 1) // args.batch_size)
    warmup = max(1, int(0.1 * steps))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    scores, started = [pearson(model, tokenizer, evaluation)], time.time()
    for _ in range(args.epochs):
        order = list(range(len(first)))
        order_rng.shuffle(order)
        for i in range(0, len(order), args.batch_size):
            batch = order[i : i + args.batch_size]
            cosine = torch.nn.functional.cosine_similarity(
                encode(model, tokenizer, [first[j] for j in batch]),
                encode(model, tokenizer, [second[j] for j in batch]),
            )
            loss = torch.nn.functional.mse_loss(cosine, torch.tensor(gold[batch] / 5.0, dtype=torch.float))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
        scores.append(pearson(model, tokenizer, evaluation))
    return {"pearson_x100_by_epoch": scores, "train_seconds": round(time.time() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", required=True, help="Hugging Face model folders")
    parser.add_argument("--train", type=Path, default=KORSTS / "sts-train.tsv", help="KorSTS TSV to train on")
    parser.add_argument("--eval", type=Path, default=KORSTS / "sts-dev.tsv", help="KorSTS TSV to score")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.epochs < 1 or args.lr <= 0 or args.batch_size < 1:
        parser.error("--epochs and --batch-size must be at least 1 and --lr positive")
    torch.set_num_threads(args.threads)
    train, evaluation = read_pairs(args.train), read_pairs(args.eval)
    results = {folder: finetune(folder, train, evaluation, args) for folder in args.model}
    settings = {k: v for k, v in vars(args).items() if k not in ("model", "train", "eval", "threads")}
    print(json.dumps({"benchmark": "korsts_biencoder", "train": str(args.train), "eval": str(args.eval),
                      "train_pairs": len(train[2]), "eval_pairs": len(evaluation[2]), "settings": settings,
                      "results": results}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
