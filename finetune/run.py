"""``kplm finetune``: fine-tune a Hugging Face encoder folder on one KLUE task and score it KLUE's way.

The dispatcher: each task family lives in its own module and plugs into the shared loop of
:mod:`.loop` (AdamW, linear warm-up/decay, gradient clipping 1.0, evaluation after every epoch):

* :mod:`.task_cls`: YNAT, KLUE-NLI, KorNLI (classification), KLUE-STS, KorSTS (regression), KLUE-NER;
* :mod:`.task_re`: KLUE-RE with entity-marker tokens; :mod:`.task_dp`: KLUE-DP with a biaffine parser;
* :mod:`.task_mrc`: KLUE-MRC span extraction with a doc stride; :mod:`.task_wos`: WoS as ontology
  classification (a simpler baseline than KLUE-baseline's TRADE/SUMBT).

Any ``AutoModel``-loadable folder works, e.g. the output of ``kplm export``. Without a train file,
``split_of`` cuts one file (e.g. a KLUE dev set) into a seeded train and evaluation part and the results
name both parts. The reported metrics are those of the best epoch by the task's main metric; with
``save_model`` that epoch's weights (safetensors) and tokenizer go to ``output/model``. Runs on ``device``
(default: CUDA when available); ``max_length`` is lowered to what the model's position embeddings hold.
Writes ``results.json``, ``results.md`` and ``kplm_record.json`` to ``output``.
"""

from __future__ import annotations

import importlib
import json
import logging
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kplm.config import fingerprint
from kplm.errors import KplmError
from kplm.finetune.data import GROUPED_SPLITS, load_task_file, split_examples
from kplm.finetune.presets import preset
from kplm.finetune.report import write_results
from kplm.records import content_digests, content_identity, is_complete, previous_inputs, write_record

log = logging.getLogger(__name__)

#: task -> module (under kplm.finetune) holding its ``Task`` class.
TASK_MODULES = {
    "ynat": "task_cls",
    "klue-sts": "task_cls",
    "klue-nli": "task_cls",
    "klue-ner": "task_cls",
    "klue-re": "task_re",
    "klue-dp": "task_dp",
    "klue-mrc": "task_mrc",
    "wos": "task_wos",
    "korsts": "task_cls",
    "kornli": "task_cls",
    "nsmc": "task_cls",
}
TRAINABLE = tuple(TASK_MODULES)
TaskName = Literal[
    "ynat",
    "klue-sts",
    "klue-nli",
    "klue-ner",
    "klue-re",
    "klue-dp",
    "klue-mrc",
    "wos",
    "korsts",
    "kornli",
    "nsmc",
]


@dataclass(kw_only=True)
class FinetuneConfig:
    """Fine-tuning of one model folder on one task."""

    model: Path = field(metadata={"help": "Hugging Face model folder (e.g. the output of kplm export)"})
    task: TaskName = field(metadata={"help": "task to fine-tune on"})
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
    device: str | None = field(
        default=None, metadata={"help": "torch device, e.g. cuda:0 or cpu (default: cuda when available)"}
    )
    select: Literal["best", "last"] = field(
        default="best",
        metadata={
            "help": "epoch whose scores are reported: best on the eval split (KLUE-baseline's dev practice; "
            "optimistic when the eval split is a test set) or last (a fixed budget)"
        },
    )
    save_model: bool = field(
        default=True,
        metadata={"help": "save the best epoch's weights (safetensors) and tokenizer to output/model"},
    )
    doc_stride: int = field(
        default=128, metadata={"help": "KLUE-MRC: tokens shared by consecutive windows of a long context"}
    )
    max_answer_length: int = field(
        default=30, metadata={"help": "KLUE-MRC: longest answer span considered, in tokens"}
    )
    n_best: int = field(
        default=20, metadata={"help": "KLUE-MRC: start/end candidates per window in answer search"}
    )

    def __post_init__(self) -> None:
        if self.split_of is None and (self.train_file is None or self.eval_file is None):
            raise ValueError("split_of: give either split_of or both train_file and eval_file")
        if self.split_of is not None and (self.train_file is not None or self.eval_file is not None):
            raise ValueError("split_of: give either split_of or train_file/eval_file, not both")
        if not 0 < self.split_ratio < 1:
            raise ValueError("split_ratio: must be between 0 and 1")
        positive = ("lr", "batch_size", "epochs", "max_length", "max_train_examples", "max_eval_examples")
        for name in (*positive, "doc_stride", "max_answer_length", "n_best"):
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
        group = GROUPED_SPLITS.get(config.task)
        return split_examples(examples, Path(config.split_of).stem, config.split_ratio, config.seed, group)
    train = load_task_file(config.task, config.train_file)
    dev = load_task_file(config.task, config.eval_file)
    return train, dev, Path(config.train_file).stem, Path(config.eval_file).stem


def _fingerprint(config: FinetuneConfig) -> tuple[str, dict[str, list]]:
    """Config plus size and content digest of the model's weights and of the data files (a finished output
    with this fingerprint is reused instead of trained again), and those files' digests."""
    files = [Path(config.model) / n for n in ("model.safetensors", "config.json")]
    files += [Path(p) for p in (config.split_of, config.train_file, config.eval_file) if p is not None]
    digests = content_digests([p for p in files if p.is_file()], previous_inputs(Path(config.output)))
    stamps = content_identity(digests)
    settings = {k: v for k, v in vars(config).items() if k not in ("threads", "device")}
    if config.split_of is not None and config.task in GROUPED_SPLITS:
        # results of the by-example split (before the grouped one existed) must not be reused
        settings["split_rule"] = f"grouped_by_{GROUPED_SPLITS[config.task]}_v1"
    return fingerprint(settings, stamps), digests


def _task(config: FinetuneConfig, hp: dict[str, Any]) -> Any:
    module = importlib.import_module(f"kplm.finetune.{TASK_MODULES[config.task]}")
    return module.Task(config.task, hp, config)


def finetune(config: FinetuneConfig) -> dict[str, Any]:
    """Fine-tune ``config.model`` on ``config.task``, evaluate with the KLUE metrics after every epoch,
    report the best epoch's scores (and save its weights to ``output/model`` with ``save_model``).

    An output folder already finished from the same config, model and data is not redone: its saved
    result is returned.
    """
    import torch

    from kplm.finetune.loop import replace_folder, train

    started = time.time()
    fp, digests = _fingerprint(config)
    output = Path(config.output)
    saved = output / "results.json"
    if is_complete(output, fp) and saved.is_file():
        return json.loads(saved.read_text(encoding="utf-8"))["results"][0]
    if config.threads:
        torch.set_num_threads(config.threads)
    train_examples, dev, train_name, eval_name = _read_splits(config)
    if config.max_train_examples and config.max_train_examples < len(train_examples):
        train_examples = train_examples[: config.max_train_examples]
        train_name += f" first {len(train_examples)}"
    if config.max_eval_examples and config.max_eval_examples < len(dev):
        dev = dev[: config.max_eval_examples]
        eval_name += f" first {len(dev)}"
    hp = config.hyperparameters()
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    folder = Path(config.model)
    if not (folder / "config.json").is_file():
        raise KplmError(f"model folder not found or without config.json: {folder}")
    task = _task(config, hp)
    task.load(folder, train_examples)
    try:
        task.device = torch.device(config.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        task.model.to(task.device)
    except (RuntimeError, AssertionError) as e:
        raise KplmError(f"device: cannot use {config.device!r}: {str(e).splitlines()[0]}") from None
    lowered = task.fit_length()
    if lowered is not None:
        log.warning("%s: max_length lowered to %d, the model's position limit", config.task, lowered)
    train_features = task.encode(train_examples, training=True)
    eval_features = task.encode(dev, training=False)
    if not train_features:
        raise KplmError(f"{train_name}: no usable training examples for {config.task}")
    output.mkdir(parents=True, exist_ok=True)
    staging = output / "model.tmp"

    def save_best() -> None:
        if staging.exists():
            shutil.rmtree(staging)
        task.save(staging)

    training = train(
        task,
        train_features,
        lambda: task.evaluate(dev, eval_features),
        config.seed,
        on_best=save_best if config.save_model else None,
        select=config.select,
    )
    model_dir = None
    if config.save_model:
        replace_folder(staging, output / "model")
        model_dir = str(output / "model")
    result = {
        "task": config.task,
        "model": str(config.model),
        "train_split": train_name,
        "eval_split": eval_name,
        "train_examples": len(train_examples),
        "eval_examples": len(dev),
        "hyperparameters": hp,
        "training": training,
        "best_epoch": training["best_epoch"],
        "metrics": training["best_metrics"],
        "saved_model": model_dir,
        "seconds": round(time.time() - started, 2),
    }
    write_results(output, [result])
    counts = {**result["metrics"], "best_epoch": result["best_epoch"], "saved_model": model_dir}
    write_record(
        output,
        stage="finetune",
        config=config,
        fingerprint=fp,
        counts=counts,
        started=started,
        inputs=digests,
    )
    return result


__all__ = ["TRAINABLE", "FinetuneConfig", "finetune"]
