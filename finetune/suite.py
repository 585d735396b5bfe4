"""``kplm evaluate``: fine-tune one model folder on several tasks and write one KLUE-ordered results table.

Task files are looked up under ``data_dir`` by their official names (the layout of ``shared/data``):
KLUE-NLI/STS/NER/DP ship only their dev sets here, so each is split (``split_ratio``, seeded) into a train
and an evaluation part; KorSTS trains on ``sts-train.tsv`` and scores on ``sts-dev.tsv``; KorNLI (XNLI-ko)
trains on ``xnli.dev.ko.tsv`` and scores on ``xnli.test.ko.tsv``; YNAT needs ``ynat-v1.1_train.json`` and
``ynat-v1.1_dev.json`` under ``data_dir/klue``, and KLUE-RE/MRC and WoS their official
``klue-re-v1.1_{train,dev}.json``, ``klue-mrc-v1.1_{train,dev}.json`` and ``wos-v1.1_{train,dev}.json``
there too; ``nsmc`` reads the sentiment split ``kplm study`` writes (``nsmc/sentiment_{train,test}.jsonl``).
Each task's results go to ``output/<task>/``; the combined
``results.json``/``results.md`` and the record to ``output``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kplm.config import fingerprint
from kplm.errors import KplmError
from kplm.finetune.report import write_results
from kplm.finetune.run import TRAINABLE, FinetuneConfig, finetune
from kplm.records import write_record

#: task -> ("split", file) or ("files", train file, eval file), relative to ``data_dir``.
TASK_FILES: dict[str, tuple[str, ...]] = {
    "ynat": ("files", "klue/ynat-v1.1_train.json", "klue/ynat-v1.1_dev.json"),
    "klue-sts": ("split", "klue/klue-sts-v1.1_dev.json"),
    "klue-nli": ("split", "klue/klue-nli-v1.1_dev.json"),
    "klue-ner": ("split", "klue/klue-ner-v1.1_dev.tsv"),
    "klue-re": ("files", "klue/klue-re-v1.1_train.json", "klue/klue-re-v1.1_dev.json"),
    "klue-dp": ("split", "klue/klue-dp-v1.1_dev.tsv"),
    "klue-mrc": ("files", "klue/klue-mrc-v1.1_train.json", "klue/klue-mrc-v1.1_dev.json"),
    "wos": ("files", "klue/wos-v1.1_train.json", "klue/wos-v1.1_dev.json"),
    "korsts": ("files", "korsts/sts-train.tsv", "korsts/sts-dev.tsv"),
    "kornli": ("files", "kornli/xnli.dev.ko.tsv", "kornli/xnli.test.ko.tsv"),
    "nsmc": ("files", "nsmc/sentiment_train.jsonl", "nsmc/sentiment_test.jsonl"),
}


@dataclass(kw_only=True)
class EvaluateConfig:
    """Fine-tuning of one model folder on a list of tasks, with one combined table."""

    model: Path = field(metadata={"help": "Hugging Face model folder (e.g. the output of kplm export)"})
    output: Path = field(metadata={"help": "folder for results.json, results.md and one subfolder per task"})
    data_dir: Path = field(
        metadata={"help": "folder holding klue/, korsts/ and kornli/ in their official formats"}
    )
    tasks: list[str] = field(
        default_factory=lambda: ["klue-sts", "klue-nli", "klue-ner", "korsts", "kornli"],
        metadata={"help": f"tasks to run, from: {', '.join(TRAINABLE)}"},
    )
    split_ratio: float = field(default=0.8, metadata={"help": "train share when a task's only file is split"})
    epochs: float | None = field(default=None, metadata={"help": "epochs for every task (default: presets)"})
    lr: float | None = field(
        default=None,
        metadata={"help": "learning rate for every task (default: presets, tuned for base-size models)"},
    )
    batch_size: int | None = field(
        default=None, metadata={"help": "batch size for every task (default: presets)"}
    )
    max_train_examples: int | None = field(
        default=None, metadata={"help": "cap on training examples per task"}
    )
    max_eval_examples: int | None = field(
        default=None, metadata={"help": "cap on evaluation examples per task"}
    )
    seed: int = field(default=42, metadata={"help": "seed of splits, shuffling and new heads"})
    threads: int | None = field(default=None, metadata={"help": "CPU threads for torch"})
    device: str | None = field(
        default=None, metadata={"help": "torch device, e.g. cuda:0 or cpu (default: cuda when available)"}
    )
    korsts_eval: Literal["dev", "test"] = field(
        default="dev", metadata={"help": "KorSTS split that scores the model: sts-dev.tsv or sts-test.tsv"}
    )
    select: Literal["best", "last"] = field(
        default="best",
        metadata={"help": "report the best epoch on the eval split (KLUE-baseline practice) or the last one"},
    )
    save_models: bool = field(
        default=True,
        metadata={"help": "save each task's best-epoch weights and tokenizer to output/<task>/model"},
    )

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("tasks: give at least one task")
        unknown = [t for t in self.tasks if t not in TRAINABLE]
        if unknown:
            raise ValueError(f"tasks: unknown task '{unknown[0]}' (known: {', '.join(TRAINABLE)})")
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError("tasks: a task is listed twice")
        if not 0 < self.split_ratio < 1:
            raise ValueError("split_ratio: must be between 0 and 1")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"lr: must be positive, got {self.lr}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size: must be at least 1, got {self.batch_size}")


def task_config(config: EvaluateConfig, task: str) -> FinetuneConfig:
    """The :class:`FinetuneConfig` that :func:`evaluate` runs for ``task``."""
    kind, *files = TASK_FILES[task]
    if task == "korsts" and config.korsts_eval == "test":
        files = ["korsts/sts-train.tsv", "korsts/sts-test.tsv"]
    paths = [Path(config.data_dir) / f for f in files]
    for path in paths:
        if not path.is_file():
            raise KplmError(f"{task}: data file not found: {path}")
    where = {"split_of": paths[0]} if kind == "split" else {"train_file": paths[0], "eval_file": paths[1]}
    return FinetuneConfig(
        model=config.model,
        task=task,
        output=Path(config.output) / task,
        split_ratio=config.split_ratio,
        epochs=config.epochs,
        lr=config.lr,
        batch_size=config.batch_size,
        max_train_examples=config.max_train_examples,
        max_eval_examples=config.max_eval_examples,
        seed=config.seed,
        threads=config.threads,
        save_model=config.save_models,
        select=config.select,
        device=config.device,
        **where,
    )


def evaluate(config: EvaluateConfig) -> dict[str, Any]:
    """Run :func:`~kplm.finetune.run.finetune` for every task; write the combined table; return it."""
    started = time.time()
    configs = [task_config(config, task) for task in config.tasks]  # every file checked before any training
    results = [finetune(c) for c in configs]
    output = Path(config.output)
    output.mkdir(parents=True, exist_ok=True)
    write_results(output, results)
    counts = {r["task"]: r["metrics"] for r in results}
    write_record(
        output,
        stage="evaluate",
        config=config,
        fingerprint=fingerprint(config),
        counts=counts,
        started=started,
    )
    return {"results": results, "output": str(output)}
