"""``kplm finetune``: fine-tune a Hugging Face encoder folder on one KLUE task and score it KLUE's way.

Sentence(-pair) classification (YNAT, KLUE-NLI, KorNLI), regression (KLUE-STS, KorSTS) and character
tagging (KLUE-NER) with a plain PyTorch loop (AdamW, linear warm-up/decay, gradient clipping 1.0) on any
``AutoModelFor*``-loadable folder, e.g. the output of ``kplm export``. Without a train file, ``split_of``
cuts one file (e.g. a KLUE dev set) into a seeded train and evaluation part and the results name both
parts. Writes ``results.json``, ``results.md`` and ``kplm_record.json`` to ``output``.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kplm.config import fingerprint
from kplm.errors import KplmError
from kplm.finetune import metrics
from kplm.finetune.data import NER_LABELS, NLI_LABELS, YNAT_LABELS, load_task_file, split_examples
from kplm.finetune.presets import preset
from kplm.finetune.report import write_results
from kplm.records import is_complete, write_record

TRAINABLE = ("ynat", "klue-sts", "klue-nli", "klue-ner", "korsts", "kornli")
LABELS = {"ynat": YNAT_LABELS, "klue-nli": NLI_LABELS, "kornli": NLI_LABELS, "klue-ner": NER_LABELS}
REGRESSION = ("klue-sts", "korsts")


@dataclass(kw_only=True)
class FinetuneConfig:
    """Fine-tuning of one model folder on one task."""

    model: Path = field(metadata={"help": "Hugging Face model folder (e.g. the output of kplm export)"})
    task: Literal["ynat", "klue-sts", "klue-nli", "klue-ner", "korsts", "kornli"] = field(
        metadata={"help": "task to fine-tune on"}
    )
    output: Path = field(metadata={"help": "folder for results.json, results.md and the record"})
    train_file: Path | None = field(
        default=None, metadata={"help": "training file in the task's official format"}
    )
    eval_file: Path | None = field(
        default=None, metadata={"help": "evaluation file in the task's official format"}
    )
    split_of: Path | None = field(
        default=None,
        metadata={"help": "instead of train/eval files: split this one file into train and eval"},
    )
    split_ratio: float = field(default=0.8, metadata={"help": "share of split_of used for training"})
    lr: float | None = field(default=None, metadata={"help": "learning rate (default: the task's preset)"})
    batch_size: int | None = field(default=None, metadata={"help": "batch size (default: the task's preset)"})
    epochs: float | None = field(
        default=None, metadata={"help": "training epochs (default: the task's preset)"}
    )
    warmup_ratio: float | None = field(
        default=None, metadata={"help": "warm-up share of steps (default: preset)"}
    )
    weight_decay: float | None = field(
        default=None, metadata={"help": "AdamW weight decay (default: preset)"}
    )
    max_length: int | None = field(
        default=None, metadata={"help": "max tokens per example (default: preset)"}
    )
    large_preset: bool = field(
        default=False, metadata={"help": "use KLUE-baseline's roberta-large preset row"}
    )
    max_train_examples: int | None = field(
        default=None, metadata={"help": "use at most this many training examples"}
    )
    max_eval_examples: int | None = field(
        default=None, metadata={"help": "use at most this many eval examples"}
    )
    seed: int = field(default=42, metadata={"help": "seed of the split, the shuffling and the new head"})
    threads: int | None = field(
        default=None, metadata={"help": "CPU threads for torch (default: torch's choice)"}
    )

    def __post_init__(self) -> None:
        if self.split_of is None and (self.train_file is None or self.eval_file is None):
            raise ValueError("split_of: give either split_of or both train_file and eval_file")
        if self.split_of is not None and (self.train_file is not None or self.eval_file is not None):
            raise ValueError("split_of: give either split_of or train_file/eval_file, not both")
        if not 0 < self.split_ratio < 1:
            raise ValueError("split_ratio: must be between 0 and 1")
        for name in ("lr", "batch_size", "epochs", "max_length", "max_train_examples", "max_eval_examples"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name}: must be positive")
        if self.warmup_ratio is not None and not 0 <= self.warmup_ratio < 1:
            raise ValueError("warmup_ratio: must be in [0, 1)")

    def hyperparameters(self) -> dict[str, Any]:
        """The task's preset with this config's overrides applied."""
        values = preset(self.task, large=self.large_preset)
        for name in values:
            if getattr(self, name, None) is not None:
                values[name] = getattr(self, name)
        return values


def _read_splits(config: FinetuneConfig) -> tuple[list, list, str, str]:
    if config.split_of is not None:
        examples = load_task_file(config.task, config.split_of)
        return split_examples(examples, Path(config.split_of).stem, config.split_ratio, config.seed)
    train = load_task_file(config.task, config.train_file)
    dev = load_task_file(config.task, config.eval_file)
    return train, dev, Path(config.train_file).stem, Path(config.eval_file).stem


def _load(config: FinetuneConfig) -> tuple[Any, Any]:
    from transformers import (
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    folder = Path(config.model)
    if not (folder / "config.json").is_file():
        raise KplmError(f"model folder not found or without config.json: {folder}")
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    if config.task == "klue-ner":
        if not tokenizer.is_fast:
            raise KplmError(
                f"{folder}: KLUE-NER needs a fast tokenizer (tokenizer.json) for character offsets"
            )
        labels = LABELS["klue-ner"]
        model = AutoModelForTokenClassification.from_pretrained(
            str(folder),
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id={x: i for i, x in enumerate(labels)},
        )
    elif config.task in REGRESSION:
        model = AutoModelForSequenceClassification.from_pretrained(
            str(folder), num_labels=1, problem_type="regression"
        )
    else:
        labels = LABELS[config.task]
        model = AutoModelForSequenceClassification.from_pretrained(
            str(folder),
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id={x: i for i, x in enumerate(labels)},
            problem_type="single_label_classification",
        )
    return tokenizer, model


def _encode_pairs(tokenizer: Any, examples: list, task: str, max_length: int) -> list[dict[str, Any]]:
    out = []
    for ex in examples:
        enc = tokenizer(ex["text_a"], ex["text_b"], truncation=True, max_length=max_length)
        label = float(ex["label"]) if task in REGRESSION else LABELS[task].index(ex["label"])
        out.append({**{k: enc[k] for k in ("input_ids", "attention_mask")}, "labels": label})
    return out


def _encode_ner(tokenizer: Any, examples: list, max_length: int) -> list[dict[str, Any]]:
    """Tokenise each sentence's text; a token's label is the first ``B-`` tag in its characters, else the
    tag of its first character. ``spans`` keep each token's character range for decoding."""
    out = []
    for ex in examples:
        text = "".join(ex["chars"])
        if len(text) != len(ex["chars"]):
            raise KplmError(f"{ex['guid']}: a KLUE-NER row holds more than one character")
        enc = tokenizer(text, truncation=True, max_length=max_length, return_offsets_mapping=True)
        labels, spans = [], []
        for start, end in enc["offset_mapping"]:
            if end <= start:
                labels.append(-100)
                spans.append(None)
                continue
            tags = ex["tags"][start:end]
            tag = next((t for t in tags if t.startswith("B-")), tags[0])
            labels.append(NER_LABELS.index(tag))
            spans.append((start, end))
        out.append(
            {
                "input_ids": enc["input_ids"],
                "attention_mask": enc["attention_mask"],
                "labels": labels,
                "spans": spans,
            }
        )
    return out


def _decode_ner(spans: list, predicted: list[int], n_chars: int) -> list[str]:
    """Character tags from token predictions: ``B-X`` on a token's first character, ``I-X`` on the rest;
    characters no token covers (spaces) get ``I-X`` when they sit inside an entity of type X, else ``O``."""
    tags = ["O"] * n_chars
    covered = [False] * n_chars
    for span, label_id in zip(spans, predicted, strict=False):
        if span is None:
            continue
        tag = NER_LABELS[label_id]
        start, end = span
        tags[start] = tag
        inner = "O" if tag == "O" else "I-" + tag[2:]
        for i in range(start, end):
            covered[i] = True
            if i > start:
                tags[i] = inner
    previous = "O"
    for i in range(n_chars):
        if covered[i]:
            previous = tags[i]
            continue
        following = next((tags[j] for j in range(i + 1, n_chars) if covered[j]), "O")
        if previous != "O" and following == "I-" + previous[2:]:
            tags[i] = following
    return tags


def _batches(features: list[dict[str, Any]], size: int, pad_id: int, shuffle: random.Random | None) -> Any:
    import torch

    order = list(range(len(features)))
    if shuffle is not None:
        shuffle.shuffle(order)
    for i in range(0, len(order), size):
        chunk = [features[j] for j in order[i : i + size]]
        width = max(len(f["input_ids"]) for f in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for r, f in enumerate(chunk):
            ids[r, : len(f["input_ids"])] = torch.tensor(f["input_ids"])
            mask[r, : len(f["attention_mask"])] = torch.tensor(f["attention_mask"])
        batch = {"input_ids": ids, "attention_mask": mask}
        if isinstance(chunk[0]["labels"], list):
            labels = torch.full((len(chunk), width), -100, dtype=torch.long)
            for r, f in enumerate(chunk):
                labels[r, : len(f["labels"])] = torch.tensor(f["labels"])
        else:
            dtype = torch.float if isinstance(chunk[0]["labels"], float) else torch.long
            labels = torch.tensor([f["labels"] for f in chunk], dtype=dtype)
        batch["labels"] = labels
        yield order[i : i + size], batch


def _train(model: Any, features: list, hp: dict[str, Any], pad_id: int, seed: int) -> dict[str, Any]:
    import torch
    from tqdm import tqdm
    from transformers import get_linear_schedule_with_warmup

    steps_per_epoch = math.ceil(len(features) / hp["batch_size"])
    total = max(1, math.ceil(steps_per_epoch * hp["epochs"]))
    decay = [
        p for n, p in model.named_parameters() if not any(k in n for k in ("bias", "LayerNorm", "layer_norm"))
    ]
    no_decay = [
        p for n, p in model.named_parameters() if any(k in n for k in ("bias", "LayerNorm", "layer_norm"))
    ]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": hp["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=hp["lr"],
        eps=1e-8,
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, int(total * hp["warmup_ratio"]), total)
    rng, step, losses, began = random.Random(seed), 0, [], time.time()
    model.train()
    with tqdm(total=total, desc="finetune", unit="step", disable=None) as bar:
        while step < total:
            for _, batch in _batches(features, hp["batch_size"], pad_id, rng):
                loss = model(**batch).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(float(loss.detach()))
                step += 1
                bar.update(1)
                if step >= total:
                    break
    seconds = time.time() - began
    return {"steps": total, "first_loss": losses[0], "last_loss": losses[-1], "seconds": round(seconds, 2)}


def _predict(model: Any, features: list, batch_size: int, pad_id: int) -> list[Any]:
    import torch

    model.eval()
    outputs: list[Any] = [None] * len(features)
    with torch.no_grad():
        for index, batch in _batches(features, batch_size, pad_id, None):
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            for row, i in enumerate(index):
                outputs[i] = logits[row]
    return outputs


def _score(task: str, examples: list, features: list, outputs: list) -> dict[str, float]:
    if task in REGRESSION:
        preds = [float(o.reshape(-1)[0]) for o in outputs]
        gold = [ex["label"] for ex in examples]
        return {"pearsonr": metrics.sts_pearsonr(preds, gold), "f1": metrics.sts_f1(preds, gold)}
    if task == "klue-ner":
        gold = [ex["tags"] for ex in examples]
        pred = [
            _decode_ner(f["spans"], o.argmax(-1).tolist(), len(ex["chars"]))
            for ex, f, o in zip(examples, features, outputs, strict=True)
        ]
        return {
            "entity_macro_f1": metrics.ner_entity_macro_f1(gold, pred),
            "char_macro_f1": metrics.ner_char_macro_f1(gold, pred, NER_LABELS),
        }
    preds = [LABELS[task][int(o.argmax())] for o in outputs]
    gold = [ex["label"] for ex in examples]
    if task == "ynat":
        return {"macro_f1": metrics.ynat_macro_f1(preds, gold)}
    return {"accuracy": metrics.nli_accuracy(preds, gold)}


def _fingerprint(config: FinetuneConfig) -> str:
    """Config plus size and modification time of the model's weights and of the data files: a finished
    output with this fingerprint is reused instead of trained again."""
    files = [Path(config.model) / n for n in ("model.safetensors", "config.json")]
    files += [Path(p) for p in (config.split_of, config.train_file, config.eval_file) if p is not None]
    stamps = {str(p): [p.stat().st_size, p.stat().st_mtime_ns] if p.is_file() else None for p in files}
    settings = {k: v for k, v in vars(config).items() if k != "threads"}
    return fingerprint(settings, stamps)


def finetune(config: FinetuneConfig) -> dict[str, Any]:
    """Fine-tune ``config.model`` on ``config.task``, evaluate with the KLUE metrics, write the results.

    An output folder already finished from the same config, model and data is not redone: its saved
    result is returned.
    """
    import torch

    started = time.time()
    fp = _fingerprint(config)
    saved = Path(config.output) / "results.json"
    if is_complete(config.output, fp) and saved.is_file():
        return json.loads(saved.read_text(encoding="utf-8"))["results"][0]
    if config.threads:
        torch.set_num_threads(config.threads)
    train, dev, train_name, eval_name = _read_splits(config)
    if config.max_train_examples and config.max_train_examples < len(train):
        train = train[: config.max_train_examples]
        train_name += f" first {len(train)}"
    if config.max_eval_examples and config.max_eval_examples < len(dev):
        dev = dev[: config.max_eval_examples]
        eval_name += f" first {len(dev)}"
    hp = config.hyperparameters()
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    tokenizer, model = _load(config)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if config.task == "klue-ner":
        train_features = _encode_ner(tokenizer, train, hp["max_length"])
        eval_features = _encode_ner(tokenizer, dev, hp["max_length"])
    else:
        train_features = _encode_pairs(tokenizer, train, config.task, hp["max_length"])
        eval_features = _encode_pairs(tokenizer, dev, config.task, hp["max_length"])
    training = _train(model, train_features, hp, pad_id, config.seed)
    outputs = _predict(model, eval_features, max(hp["batch_size"], 32), pad_id)
    scores = _score(config.task, dev, eval_features, outputs)
    result = {
        "task": config.task,
        "model": str(config.model),
        "train_split": train_name,
        "eval_split": eval_name,
        "train_examples": len(train),
        "eval_examples": len(dev),
        "hyperparameters": hp,
        "training": training,
        "metrics": {k: round(v, 4) for k, v in scores.items()},
        "seconds": round(time.time() - started, 2),
    }
    output = Path(config.output)
    output.mkdir(parents=True, exist_ok=True)
    write_results(output, [result])
    write_record(
        output, stage="finetune", config=config, fingerprint=fp, counts=result["metrics"], started=started
    )
    return result


__all__ = ["FinetuneConfig", "TRAINABLE", "finetune"]
