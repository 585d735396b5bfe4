"""``kplm study``: several pipeline arms from one YAML, each fine-tuned with several seeds, in one report.

A study answers "does this choice matter downstream?" with numbers: every arm is a ``kplm run`` config
(the study's ``run`` section with the arm's ``overrides`` merged in), or a randomly initialised copy of
another arm's architecture and vocabulary (``random_init_of``). Each arm's model is fine-tuned on the same
tasks with every seed of ``finetune.seeds``; :mod:`kplm.pipeline.study_report` writes ``report.md`` with
the loss curves, the scores (mean and spread over seeds) and the wall time of every step.

Arms share work: a stage whose config (and every upstream stage's) equals one an earlier arm already ran
is linked to that arm's folder instead of being run again, so the corpus is cleaned once for all arms.

With ``nsmc_sentiment`` the study first splits the NSMC file by a hash of each review's text: a held-out
part becomes a sentiment task (ratings 1–4 negative, 9–10 positive) and never reaches pretraining, the rest
is the pretraining source. Identical texts always fall on the same side.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kplm.config import build, fingerprint, load_yaml, to_dict
from kplm.errors import KplmError
from kplm.pipeline.run import RunConfig, plan
from kplm.records import is_complete, read_record, write_json_atomic, write_record

SHARED_DATA_DIRS = ("klue", "korsts", "kornli")


@dataclass(kw_only=True)
class SentimentSplitConfig:
    """How NSMC is split into a pretraining source and a held-out sentiment task."""

    source: str = field(metadata={"help": "NSMC reviews (jsonl or jsonl.gz with text and rating)"})
    holdout_permille: int = field(
        default=40, metadata={"help": "share of distinct review texts held out from pretraining, in ‰"}
    )
    train_examples: int = field(default=8000, metadata={"help": "sentiment training examples"})
    test_examples: int = field(default=2000, metadata={"help": "sentiment test examples"})

    def __post_init__(self) -> None:
        if not 0 < self.holdout_permille < 1000:
            raise ValueError("holdout_permille: must be between 1 and 999")
        if self.train_examples < 1 or self.test_examples < 1:
            raise ValueError("train_examples/test_examples: must be positive")


@dataclass(kw_only=True)
class Comparison:
    """A claim the report checks: ``arm`` beats ``other`` on ``task``'s ``metric`` by ``min_gain`` points."""

    arm: str = field(metadata={"help": "arm expected to score higher"})
    other: str = field(metadata={"help": "arm it is compared with"})
    task: str = field(metadata={"help": "fine-tuning task, e.g. korsts"})
    metric: str = field(metadata={"help": "metric key of that task, e.g. pearsonr"})
    min_gain: float = field(default=0.0, metadata={"help": "minimum gain, in points (metrics are 0–100)"})


@dataclass(kw_only=True)
class StudyConfig:
    """A study: a base run config, the arms that vary it, and the fine-tuning every arm gets."""

    output: Path = field(metadata={"help": "study folder: data/, one folder per arm, report.md"})
    run: dict[str, Any] = field(metadata={"help": "the kplm run config every arm starts from"})
    arms: dict[str, dict[str, Any]] = field(
        metadata={"help": "arm name -> {overrides: {...}} or {random_init_of: ARM}"}
    )
    finetune: dict[str, Any] = field(
        metadata={"help": "kplm evaluate settings (tasks, data_dir, epochs, …) without model/output/seed"}
    )
    seeds: list[int] = field(default_factory=lambda: [1, 2], metadata={"help": "fine-tuning seeds"})
    nsmc_sentiment: SentimentSplitConfig | None = field(
        default=None, metadata={"help": "hold NSMC reviews out of pretraining as a sentiment task"}
    )
    compare: list[Comparison] = field(
        default_factory=list, metadata={"help": "arm comparisons checked in the report"}
    )
    full_scale: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "full-scale estimate inputs (see study_report.full_scale)"}
    )

    def __post_init__(self) -> None:
        if not self.arms:
            raise ValueError("arms: give at least one arm")
        if not self.seeds:
            raise ValueError("seeds: give at least one seed")
        for name, arm in self.arms.items():
            keys = set(arm)
            if not keys <= {"overrides", "random_init_of"} or len(keys) > 1:
                raise ValueError(f"arms.{name}: give either overrides: {{...}} or random_init_of: ARM")
            source = arm.get("random_init_of")
            if source is not None and (source not in self.arms or "random_init_of" in self.arms[source]):
                raise ValueError(
                    f"arms.{name}.random_init_of: '{source}' is not a pretrained arm of this study"
                )
        for key in ("model", "output", "seed"):
            if key in self.finetune:
                raise ValueError(f"finetune.{key}: set by the study, remove it")
        for i, row in enumerate(self.compare):
            for name in (row.arm, row.other):
                if name not in self.arms:
                    raise ValueError(f"compare[{i}]: '{name}' is not an arm of this study")


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in, recursively for nested sections (``base`` is not changed)."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def split_nsmc(config: SentimentSplitConfig, out: Path) -> dict[str, Any]:
    """Write ``out/nsmc_pretrain.jsonl`` and ``out/nsmc/sentiment_{train,test}.jsonl``; returns counts."""
    import gzip

    fp = fingerprint("nsmc_split_v1", to_dict(config), os.path.getsize(config.source))
    if is_complete(out, fp):
        return read_record(out)["counts"]
    started = time.time()
    (out / "nsmc").mkdir(parents=True, exist_ok=True)
    held: dict[str, tuple[str, set[int]]] = {}
    counts = {"lines": 0, "pretrain": 0, "held_out": 0, "held_out_unlabelled": 0, "unreadable": 0}
    opener = gzip.open if config.source.endswith(".gz") else open
    tmp = out / "nsmc_pretrain.jsonl.tmp"
    with (
        opener(config.source, "rt", encoding="utf-8", errors="strict") as f,
        open(tmp, "w", encoding="utf-8") as w,
    ):
        for line in f:
            counts["lines"] += 1
            try:
                record = json.loads(line)
                text, rating = str(record["text"]).strip(), int(record["rating"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                counts["unreadable"] += 1  # left to the corpus stage, which quarantines it with its line
                text, rating = line, 0
            key = hashlib.sha1(text.encode("utf-8")).hexdigest()
            if int(key[:8], 16) % 1000 >= config.holdout_permille:
                w.write(line if line.endswith("\n") else line + "\n")
                counts["pretrain"] += 1
                continue
            counts["held_out"] += 1
            label = 0 if 1 <= rating <= 4 else 1 if rating >= 9 else None
            if label is None or not text:
                counts["held_out_unlabelled"] += 1
            else:
                held.setdefault(key, (text, set()))[1].add(label)
    os.replace(tmp, out / "nsmc_pretrain.jsonl")
    # a text rated both negative and positive (duplicates disagree) has no label: dropped and counted
    counts["held_out_conflicting"] = sum(1 for _, labels in held.values() if len(labels) > 1)
    ordered = [(held[k][0], min(held[k][1])) for k in sorted(held) if len(held[k][1]) == 1]  # hash order
    need = config.test_examples + config.train_examples
    if len(ordered) < need:
        raise KplmError(
            f"nsmc_sentiment: {len(ordered)} labelled held-out reviews, {need} asked; raise holdout_permille"
        )
    parts = {"test": ordered[: config.test_examples], "train": ordered[config.test_examples : need]}
    for name, rows in parts.items():
        with open(out / "nsmc" / f"sentiment_{name}.jsonl", "w", encoding="utf-8") as w:
            for text, label in rows:
                w.write(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n")
        counts[f"sentiment_{name}"] = len(rows)
        counts[f"sentiment_{name}_positive"] = sum(label for _, label in rows)
    write_record(out, stage="study-data", config=config, fingerprint=fp, counts=counts, started=started)
    return counts


def _stage_key(stage_config: Any, arm_out: Path) -> str:
    """The stage's config with the arm's own folder abstracted away (equal keys = interchangeable outputs)."""
    text = json.dumps(to_dict(stage_config), sort_keys=True, default=str)
    return text.replace(str(arm_out), "<ARM>")


def _link(target: Path, link: Path) -> None:
    if link.is_symlink() or link.exists():
        if link.is_symlink() and link.resolve() == target.resolve():
            return
        raise KplmError(f"{link}: exists and is not this study's link to {target}; remove it")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent), target_is_directory=True)


def run_arm(name: str, run_data: dict[str, Any], out: Path, done: dict[str, Path]) -> dict[str, Any]:
    """Run one pretrained arm's stages (up to export), linking stages an earlier arm already ran."""
    config = build(RunConfig, {**run_data, "output": str(out)}, where=f"study: arms.{name}")
    stages = [s for s in plan(config, f"study: arms.{name}") if s.name != "finetune"]
    times: dict[str, Any] = {}
    chain = ""
    for stage in stages:
        chain = fingerprint(chain, stage.name, _stage_key(stage.config, out))
        started = time.time()
        if chain in done and done[chain] != stage.output:
            _link(done[chain], stage.output)
            times[stage.name] = {"shared_with": str(done[chain])}
            print(f"[kplm study] {name}: {stage.name} shared with {done[chain]}", flush=True)
            continue
        print(f"[kplm study] {name}: {stage.name} → {stage.output}", flush=True)
        counts = stage.run(stage.config)
        done.setdefault(chain, stage.output)
        skipped = bool(counts and counts.get("skipped"))
        times[stage.name] = {"seconds": round(time.time() - started, 1), "skipped": skipped}
    return {"model": str(out / "model"), "stages": times}


def random_init_model(source_model: Path, out: Path, seed: int) -> dict[str, Any]:
    """A freshly initialised copy of ``source_model``'s architecture with its tokenizer (an untrained arm)."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    fp = fingerprint("random_init_v1", seed, (source_model / "config.json").read_text(encoding="utf-8"))
    if is_complete(out, fp):
        return {"model": str(out), "stages": {"random_init": {"seconds": 0.0, "skipped": True}}}
    started = time.time()
    torch.manual_seed(seed)
    model = AutoModelForMaskedLM.from_config(AutoConfig.from_pretrained(source_model))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(source_model).save_pretrained(out)
    counts = {"params": sum(p.numel() for p in model.parameters()), "seed": seed, "source": str(source_model)}
    write_record(
        out, stage="random-init", config={"seed": seed}, fingerprint=fp, counts=counts, started=started
    )
    return {"model": str(out), "stages": {"random_init": {"seconds": round(time.time() - started, 1)}}}


def finetune_arm(model: Path, out: Path, settings: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """``kplm evaluate`` on one arm's model with every seed; returns {seed: {task: metrics}} and times."""
    from kplm.finetune.suite import EvaluateConfig, evaluate

    scores: dict[str, Any] = {}
    times: dict[str, float] = {}
    for seed in seeds:
        config = build(
            EvaluateConfig,
            {**settings, "model": str(model), "output": str(out / f"seed-{seed}"), "seed": seed},
            where="study: finetune",
        )
        started = time.time()
        result = evaluate(config)
        times[f"seed-{seed}"] = round(time.time() - started, 1)
        scores[str(seed)] = {r["task"]: r["metrics"] for r in result["results"]}
    return {"scores": scores, "seconds": times}


@dataclass
class StudyPlan:
    """A validated study: its config, the base run config and fine-tuning settings with paths resolved."""

    config: StudyConfig
    out: Path
    run_data: dict[str, Any]
    settings: dict[str, Any]


def load_study(config_path: Path) -> StudyPlan:
    """Read a study YAML and validate every arm's run config and the fine-tuning section; runs nothing."""
    from kplm.finetune.suite import EvaluateConfig

    config = build(StudyConfig, load_yaml(config_path), where=str(config_path))
    base = Path(config_path).resolve().parent
    out = Path(config.output)
    run_data = dict(config.run)
    run_data["sources"] = [_resolve(base, s) for s in run_data.get("sources", [])]
    corpus = dict(run_data.get("corpus", {}))
    if corpus.get("decontaminate"):
        corpus["decontaminate"] = [_resolve(base, s) for s in corpus["decontaminate"]]
        run_data["corpus"] = corpus
    settings = dict(config.finetune)
    if "data_dir" in settings:
        settings["data_dir"] = _resolve(base, settings["data_dir"])
    if config.nsmc_sentiment is not None:
        config.nsmc_sentiment.source = _resolve(base, config.nsmc_sentiment.source)
        run_data["sources"] = [str(out / "data" / "nsmc_pretrain.jsonl"), *run_data["sources"]]
    for name, arm in config.arms.items():
        if "overrides" in arm:
            arm_data = {**merge(run_data, arm["overrides"]), "output": str(out / name)}
            plan(
                build(RunConfig, arm_data, where=f"{config_path}: arms.{name}"), f"{config_path}: arms.{name}"
            )
    build(EvaluateConfig, {**settings, "model": ".", "output": "."}, where=f"{config_path}: finetune")
    return StudyPlan(config=config, out=out, run_data=run_data, settings=settings)


def study(config_path: Path) -> dict[str, Any]:
    """Run a study YAML end to end and write ``<output>/study.json`` and ``<output>/report.md``."""
    from kplm.pipeline.study_report import write_report

    prepared = load_study(config_path)
    config, out, run_data, settings = prepared.config, prepared.out, prepared.run_data, prepared.settings
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"config": to_dict(config), "data": None, "arms": {}}
    if config.nsmc_sentiment is not None:
        summary["data"] = split_nsmc(config.nsmc_sentiment, out / "data")
        shared = Path(settings.get("data_dir", Path(config_path).resolve().parent))
        settings["data_dir"] = str(_task_data_dir(out / "data", shared))
    done: dict[str, Path] = {}
    pretrained = {n: a for n, a in config.arms.items() if "random_init_of" not in a}
    for name, arm in pretrained.items():
        arm_run = merge(run_data, arm.get("overrides", {}))
        summary["arms"][name] = run_arm(name, arm_run, out / name, done)
    for name, arm in config.arms.items():
        if name not in pretrained:
            source = Path(summary["arms"][arm["random_init_of"]]["model"])
            summary["arms"][name] = random_init_model(source, out / name / "model", config.seeds[0])
    for name, arm_summary in summary["arms"].items():
        print(f"[kplm study] {name}: fine-tuning with seeds {config.seeds}", flush=True)
        arm_summary["finetune"] = finetune_arm(
            Path(arm_summary["model"]), out / name / "finetune", settings, config.seeds
        )
    write_json_atomic(out / "study.json", summary)
    write_report(out, summary, config)
    return {"output": str(out), "report": str(out / "report.md")}


def _resolve(base: Path, path: str) -> str:
    """``path`` against the study file's folder unless it is a URL or absolute."""
    return path if "://" in path or Path(path).is_absolute() else str((base / path).resolve())


def _task_data_dir(data: Path, shared: Path) -> Path:
    """``data`` holding the NSMC sentiment split plus links to the shared KLUE/KorSTS/KorNLI folders."""
    for name in SHARED_DATA_DIRS:
        if (shared / name).is_dir():
            _link(shared / name, data / name)
    return data
