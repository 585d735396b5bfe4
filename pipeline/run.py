"""``kplm run``: one YAML file describes a whole run; the stages run in order, each skipped when its output
is already complete for the same config and inputs.

Stages and their folders under ``output``::

    corpus/     kplm.corpus.clean      read, normalise, filter, deduplicate → Parquet shards
    pii/        kplm.pipeline.pii_stage pseudonymise personal information (skipped with ``pii.policy: off``)
    tokenizer/  kplm.tokenizer         MeCab-ko morpheme-aware WordPiece vocabulary, a HF tokenizer folder
    packed/     kplm.training.pack     token ids packed into fixed-length sequences (memory-mapped .npy)
    pretrain/   launch/pretrain.py     DeepSpeed masked-LM pretraining (checkpoints, logs)
    model/      kplm.export            the Hugging Face model folder
    finetune/   kplm.finetune          optional: the KLUE fine-tuning suite on the exported model

Each section of the YAML holds that stage's own config fields (see ``kplm <stage> --help``) except its
input and output folders, which the runner fills in. All sections are validated before anything runs.
Relative paths in ``sources`` resolve against the config file's folder; ``output`` against the current one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kplm.config import build, load_yaml, to_dict
from kplm.errors import KplmError
from kplm.records import write_json_atomic

DEMO_CONFIG = Path(__file__).resolve().parent / "configs" / "demo.yaml"
STAGES = ("corpus", "pii", "tokenizer", "pack", "pretrain", "export", "finetune")


@dataclass(kw_only=True)
class RunConfig:
    """A whole pipeline run (the top level of a run YAML)."""

    sources: list[str] = field(
        metadata={"help": "corpus files or folders (.jsonl[.gz], .txt, .parquet; local or fsspec)"}
    )
    output: Path = field(
        default=Path("runs/demo"), metadata={"help": "folder that receives every stage's output"}
    )
    corpus: dict[str, Any] = field(default_factory=dict, metadata={"help": "kplm corpus clean settings"})
    pii: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "PII settings; policy: off | tag | mask"}
    )
    tokenizer: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "kplm tokenizer train settings"}
    )
    pack: dict[str, Any] = field(default_factory=dict, metadata={"help": "sequence packing settings"})
    pretrain: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "pretraining settings (launch/pretrain.py)"}
    )
    nproc: int = field(
        default=1, metadata={"help": "pretraining ranks on this machine (deepspeed --num_gpus)"}
    )
    export: dict[str, Any] = field(default_factory=dict, metadata={"help": "kplm export settings"})
    finetune: dict[str, Any] | None = field(
        default=None,
        metadata={"help": "kplm evaluate settings (e.g. data_dir, tasks); absent: no KLUE fine-tuning"},
    )
    fill_mask_example: str = field(
        default="대한민국의 수도는 [MASK]이다.",
        metadata={"help": "sentence shown through the exported model at the end"},
    )

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError("sources: give at least one corpus file or folder")
        if self.nproc < 1:
            raise ValueError(f"nproc: must be at least 1, got {self.nproc}")


@dataclass
class Stage:
    """One planned stage: its name, its output folder, its validated config and the call that runs it."""

    name: str
    output: Path
    config: Any
    run: Callable[[Any], dict[str, Any] | None]


def load_run_config(path: Path | None, *, output: Path | None = None) -> tuple[RunConfig, Path]:
    """Read and validate a run YAML (the demo config when ``path`` is None); returns it and its folder."""
    path = Path(path) if path else DEMO_CONFIG
    data = load_yaml(path)
    if output is not None:
        data["output"] = str(output)
    config = build(RunConfig, data, where=str(path))
    base = path.resolve().parent
    config.sources = [
        s if "://" in s or Path(s).is_absolute() else str((base / s).resolve()) for s in config.sources
    ]
    return config, base


def plan(config: RunConfig, where: str) -> list[Stage]:
    """Validate every stage's section and return the stages to run, in order."""
    from kplm.corpus.clean import CleanConfig, clean
    from kplm.export.hf import ExportConfig, export
    from kplm.pipeline.pii_stage import PiiStageConfig, scrub_corpus
    from kplm.tokenizer import TokenizerConfig, train_tokenizer
    from kplm.training.pack import PackConfig, pack

    out = Path(config.output)

    def section(cls: type, name: str, values: dict[str, Any], **paths: Any) -> Any:
        taken = [k for k in paths if k in values]
        if taken:
            raise KplmError(f"{where}: {name}.{taken[0]}: set by the runner, remove it from the config")
        return build(cls, {**values, **paths}, where=f"{where}: {name}")

    stages = [
        Stage(
            "corpus",
            out / "corpus",
            section(CleanConfig, "corpus", config.corpus, input=config.sources, output=str(out / "corpus")),
            clean,
        )
    ]
    text_dir = out / "corpus"
    pii = section(PiiStageConfig, "pii", config.pii, input=str(text_dir), output=str(out / "pii"))
    extra_tokens: list[str] = []
    if pii.policy != "off":
        stages.append(Stage("pii", out / "pii", pii, scrub_corpus))
        text_dir = out / "pii"
        extra_tokens = pii.placeholders()
    tok_values = dict(config.tokenizer)
    tok_values["extra_tokens"] = sorted({*tok_values.get("extra_tokens", []), *extra_tokens})
    stages.append(
        Stage(
            "tokenizer",
            out / "tokenizer",
            section(
                TokenizerConfig, "tokenizer", tok_values, input=[str(text_dir)], output=str(out / "tokenizer")
            ),
            train_tokenizer,
        )
    )
    pack_config = section(
        PackConfig,
        "pack",
        config.pack,
        corpus=str(text_dir),
        tokenizer=str(out / "tokenizer"),
        output=str(out / "packed"),
    )
    stages.append(Stage("pack", out / "packed", pack_config, pack))
    pretrain_values = {"seq_len": pack_config.seq_len, **config.pretrain}
    pretrain_config = section(
        _pretrain_config_class(),
        "pretrain",
        pretrain_values,
        data=str(out / "packed"),
        tokenizer=str(out / "tokenizer"),
        output=str(out / "pretrain"),
    )
    if getattr(pretrain_config, "masking", None) == "morpheme" and not pack_config.morpheme_boundaries:
        raise KplmError(f"{where}: pretrain.masking: morpheme needs pack.morpheme_boundaries: true")
    stages.append(Stage("pretrain", out / "pretrain", pretrain_config, _pretrainer(config.nproc)))
    export_config = section(
        ExportConfig,
        "export",
        config.export,
        checkpoint=str(out / "pretrain"),
        tokenizer=str(out / "tokenizer"),
        output=str(out / "model"),
    )
    stages.append(Stage("export", out / "model", export_config, export))
    if config.finetune is not None:
        from kplm.finetune.suite import EvaluateConfig, evaluate

        suite = section(
            EvaluateConfig,
            "finetune",
            config.finetune,
            model=str(out / "model"),
            output=str(out / "finetune"),
        )
        stages.append(Stage("finetune", out / "finetune", suite, evaluate))
    return stages


def _pretrain_config_class() -> type:
    from kplm.training.config import PretrainConfig

    return PretrainConfig


def _pretrainer(nproc: int) -> Callable[[Any], dict[str, Any] | None]:
    """Write the resolved pretraining YAML and launch ``deepspeed`` on it (what users run on clusters)."""

    def run(config: Any) -> dict[str, Any] | None:
        import yaml

        from kplm.training import launch_pretraining

        path = Path(config.output) / "pretrain.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            yaml.safe_dump(to_dict(config), allow_unicode=True, sort_keys=False), encoding="utf-8"
        )
        launch_pretraining(path, nproc)
        state = Path(config.output) / "kplm_record.json"
        return json.loads(state.read_text(encoding="utf-8")).get("counts") if state.exists() else None

    return run


def run(
    config_path: Path | None = None,
    *,
    output: Path | None = None,
    until: str | None = None,
    show_example: bool = True,
) -> dict[str, Any]:
    """Run every stage of a run config (the embedded demo when ``config_path`` is None).

    Returns a summary with each stage's counts and wall time; also written to ``<output>/run_summary.json``.
    """
    if until is not None and until not in STAGES:
        raise KplmError(f"--until: unknown stage '{until}' (stages: {', '.join(STAGES)})")
    config, _ = load_run_config(config_path, output=output)
    stages = plan(config, str(config_path or DEMO_CONFIG))
    summary: dict[str, Any] = {"config": to_dict(config), "stages": {}}
    for stage in stages:
        started = time.time()
        print(f"[kplm] {stage.name:<9} → {stage.output}", flush=True)
        counts = stage.run(stage.config)
        seconds = round(time.time() - started, 1)
        summary["stages"][stage.name] = {"output": str(stage.output), "seconds": seconds, "counts": counts}
        if counts and counts.get("status") in ("submitted", "running"):  # e.g. corpus on Slurm
            print(
                f"[kplm] {stage.name:<9} {counts['status']} as cluster jobs; rerun this command when they have "
                "finished to go on",
                flush=True,
            )
            summary["waiting_for"] = stage.name
            break
        print(f"[kplm] {stage.name:<9} done in {seconds:.1f}s{_brief(counts)}", flush=True)
        if stage.name == until:
            break
    write_json_atomic(Path(config.output) / "run_summary.json", summary)
    if "export" in summary["stages"] and show_example:
        model_dir = summary["stages"]["export"]["output"]
        print(f"[kplm] exported model: {model_dir}")
        for line in fill_mask_lines(model_dir, config.fill_mask_example):
            print(f"[kplm] {line}")
    return summary


def _brief(counts: dict[str, Any] | None) -> str:
    if not counts:
        return ""
    keys = [k for k, v in counts.items() if isinstance(v, int | float) and not isinstance(v, bool)][:4]
    return (
        " ("
        + ", ".join(
            f"{k}={counts[k]:,}" if isinstance(counts[k], int) else f"{k}={counts[k]:.4g}" for k in keys
        )
        + ")"
    )


def fill_mask_lines(model_dir: str | Path, sentence: str, top_k: int = 3) -> list[str]:
    """Run the exported model through transformers' fill-mask pipeline on one sentence."""
    from transformers import pipeline as hf_pipeline

    fill = hf_pipeline("fill-mask", model=str(model_dir), tokenizer=str(model_dir), device="cpu")
    sentence = sentence.replace("[MASK]", fill.tokenizer.mask_token)
    lines = [f"fill-mask: {sentence}"]
    lines += [f"  {p['score']:.3f}  {p['token_str']}" for p in fill(sentence, top_k=top_k)]
    return lines
