"""The fine-tuning loop every task shares, with per-epoch evaluation and best-epoch selection.

A task module (``task_cls``, ``task_re``, ``task_dp``, ``task_mrc``, ``task_wos``) defines a ``Task``
subclass of :class:`TaskBase`: it loads tokenizer and model, turns examples into features (dicts of lists
and scalars), collates features into a batch whose ``model(**batch).loss`` is the training loss, and scores
the model on the evaluation examples with the task's KLUE metrics. :func:`train` runs AdamW with linear
warm-up/decay and gradient clipping 1.0 (KLUE-baseline's optimiser), evaluates after every epoch (and after
a final partial epoch), keeps the scores of the epoch with the best main metric and calls ``on_best`` so
that the task can save that epoch's weights.
"""

from __future__ import annotations

import math
import random
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch


def pad_collate(chunk: list[dict[str, Any]], pads: dict[str, float]) -> dict[str, torch.Tensor]:
    """Stack the keys of ``pads`` over ``chunk``: list values are right-padded with that key's pad value,
    scalars become a 1-D tensor; floats give float tensors, everything else long tensors."""
    batch = {}
    for key, pad in pads.items():
        values = [f[key] for f in chunk]
        if isinstance(values[0], list):
            width = max(len(v) for v in values)
            first = next((v[0] for v in values if v), 0)
            dtype = torch.float if isinstance(first, float) else torch.long
            out = torch.full((len(values), width), pad, dtype=dtype)
            for row, v in enumerate(values):
                if v:
                    out[row, : len(v)] = torch.tensor(v, dtype=dtype)
            batch[key] = out
        else:
            dtype = torch.float if isinstance(values[0], float) else torch.long
            batch[key] = torch.tensor(values, dtype=dtype)
    return batch


def batches(n: int, size: int, rng: random.Random | None = None) -> Iterator[list[int]]:
    """Index chunks of ``size`` over ``range(n)``, shuffled with ``rng`` when given."""
    order = list(range(n))
    if rng is not None:
        rng.shuffle(order)
    for i in range(0, n, size):
        yield order[i : i + size]


class TaskBase:
    """Shared state of a task: its name, hyperparameters, config, tokenizer, model and torch device.

    Subclasses set ``main_metric`` and implement ``load``, ``encode``, ``collate`` and ``evaluate``;
    ``save`` writes ``save_pretrained`` weights (safetensors) and the tokenizer.
    """

    main_metric = ""

    def __init__(self, name: str, hp: dict[str, Any], config: Any) -> None:
        self.name, self.hp, self.config = name, hp, config
        self.tokenizer: Any = None
        self.model: Any = None
        self.device = torch.device("cpu")

    def batch(self, chunk: list[dict[str, Any]], pads: dict[str, float]) -> dict[str, torch.Tensor]:
        """:func:`pad_collate` of ``chunk``, on the task's device."""
        return {k: v.to(self.device) for k, v in pad_collate(chunk, pads).items()}

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def load(self, folder: Path, train: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def encode(self, examples: list[dict[str, Any]], training: bool) -> list[dict[str, Any]]:
        raise NotImplementedError

    def collate(self, chunk: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def evaluate(self, examples: list[dict[str, Any]], features: list[dict[str, Any]]) -> dict[str, float]:
        raise NotImplementedError

    def save(self, folder: Path) -> None:
        """Weights as ``model.safetensors`` plus config and tokenizer files, loadable with ``Auto*``."""
        self.model.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))

    def fit_length(self) -> int | None:
        """Lower ``hp["max_length"]`` to what the encoder's position embeddings hold (RoBERTa-style models
        lose ``pad_token_id + 1`` positions); return the new limit when it was lowered, else ``None``."""
        config = getattr(self.model, "config", None) or self.model.encoder.config
        limit = config.max_position_embeddings
        if config.model_type in ("roberta", "xlm-roberta", "camembert"):
            limit -= (config.pad_token_id or 0) + 1
        if self.hp["max_length"] <= limit:
            return None
        self.hp["max_length"] = limit
        return limit

    @property
    def eval_batch_size(self) -> int:
        return max(int(self.hp["batch_size"]), 32)


def _optimizer(model: Any, hp: dict[str, Any]) -> torch.optim.Optimizer:
    plain = ("bias", "LayerNorm", "layer_norm")
    decay = [p for n, p in model.named_parameters() if not any(k in n for k in plain)]
    no_decay = [p for n, p in model.named_parameters() if any(k in n for k in plain)]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": hp["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=hp["lr"],
        eps=1e-8,
    )


def _score(metrics: dict[str, float], key: str) -> float:
    value = metrics.get(key, float("nan"))
    return -math.inf if value != value else value


def train(
    task: TaskBase,
    features: list[dict[str, Any]],
    evaluate: Callable[[], dict[str, float]],
    seed: int,
    on_best: Callable[[], None] | None = None,
    select: str = "best",
) -> dict[str, Any]:
    """Train ``task.model`` on ``features`` for ``hp["epochs"]`` (may be fractional) epochs.

    Returns the step count, first/last batch loss, training and evaluation seconds (``on_best``'s saving
    counts as evaluation), every evaluated epoch's mean loss and metrics,
    and ``best_epoch``/``best_metrics``: the evaluated epoch with the highest ``task.main_metric`` (the
    earliest on ties), or with ``select="last"`` simply the last one (a fixed epoch budget, for evaluation
    splits that are test sets). ``on_best`` runs right after each new best evaluation.
    """
    from tqdm import tqdm
    from transformers import get_linear_schedule_with_warmup

    hp, model = task.hp, task.model
    steps_per_epoch = math.ceil(len(features) / hp["batch_size"])
    total = max(1, math.ceil(steps_per_epoch * hp["epochs"]))
    optimizer = _optimizer(model, hp)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(total * hp["warmup_ratio"]), total)
    rng, step, losses, began = random.Random(seed), 0, [], time.time()
    epochs: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    epoch_losses: list[float] = []
    eval_seconds = 0.0
    with tqdm(total=total, desc=f"finetune {task.name}", unit="step", disable=None) as bar:
        while step < total:
            model.train()
            for index in batches(len(features), hp["batch_size"], rng):
                loss = model(**task.collate([features[i] for i in index])).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(float(loss.detach()))
                epoch_losses.append(losses[-1])
                step += 1
                bar.update(1)
                if step >= total:
                    break
            model.eval()
            evaluating = time.time()
            with torch.no_grad():
                scores = evaluate()
            epoch = round(step / steps_per_epoch, 3)
            record = {
                "epoch": epoch,
                "mean_loss": round(sum(epoch_losses) / len(epoch_losses), 4),
                "metrics": {k: round(v, 4) for k, v in scores.items()},
            }
            epochs.append(record)
            epoch_losses = []
            if (
                best is None
                or select == "last"
                or _score(record["metrics"], task.main_metric) > _score(best["metrics"], task.main_metric)
            ):
                best = record
                if on_best is not None:
                    on_best()
            eval_seconds += time.time() - evaluating
    return {
        "steps": total,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "seconds": round(time.time() - began - eval_seconds, 2),
        "eval_seconds": round(eval_seconds, 2),
        "epochs": epochs,
        "best_epoch": best["epoch"],
        "best_metrics": best["metrics"],
        "main_metric": task.main_metric,
    }


def replace_folder(tmp: Path, final: Path) -> None:
    """Move the finished folder ``tmp`` to ``final`` (an older ``final`` is removed first)."""
    if final.exists():
        shutil.rmtree(final)
    tmp.replace(final)
