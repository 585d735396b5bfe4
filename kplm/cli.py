"""The ``kplm`` command line.

Each command is a plain function taking its stage's config dataclass; the flags are generated from that
dataclass (see :mod:`kplm.cliargs`), so ``kplm corpus clean --help`` documents exactly the fields a run
YAML's ``corpus:`` section accepts. A command's parser is built only when it is called, so ``kplm --help``
answers without importing torch.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from kplm import __version__
from kplm.errors import KplmError

# command words → (module, config class, function, one-line description)
COMMANDS: dict[tuple[str, ...], tuple[str, str, str, str]] = {
    ("corpus", "clean"): (
        "kplm.corpus.clean",
        "CleanConfig",
        "clean",
        "read, normalise, filter and deduplicate source files into Parquet shards",
    ),
    ("pii", "detect"): (
        "kplm.pii.files",
        "PiiFileConfig",
        "detect_file",
        "find personal information in a JSONL file; adds a 'pii' list of spans to each record",
    ),
    ("pii", "scrub"): (
        "kplm.pii.files",
        "PiiFileConfig",
        "scrub_file",
        "pseudonymise personal information in a JSONL file (tag, mask or surrogate policy)",
    ),
    ("pii", "eval"): (
        "kplm.pii.evaluate",
        "PiiEvalConfig",
        "evaluate",
        "score PII detection (precision, recall, F2, leak recall) on the shipped labelled set and KLUE-NER dev",
    ),
    ("pii", "train-person"): (
        "kplm.pii.person_crf_train",
        "PersonTrainConfig",
        "train_person",
        "train the learned PERSON tagger (CRF) from KLUE-NER dev into --output; prints held-out precision/recall",
    ),
    ("tokenizer", "train"): (
        "kplm.tokenizer",
        "TokenizerConfig",
        "train_tokenizer",
        "train a MeCab-ko morpheme-aware WordPiece vocabulary; writes a Hugging Face tokenizer folder",
    ),
    ("tokenizer", "report"): (
        "kplm.tokenizer",
        "TokenizerReportConfig",
        "report_tokenizer",
        "measure a tokenizer on your text (tokens/eojeol, [UNK], morpheme-boundary P/R, round trip) next to other vocabularies",
    ),
    ("finetune",): (
        "kplm.finetune.run",
        "FinetuneConfig",
        "finetune",
        "fine-tune a Hugging Face model folder on one KLUE task and score it with the KLUE metrics",
    ),
    ("evaluate",): (
        "kplm.finetune.suite",
        "EvaluateConfig",
        "evaluate",
        "fine-tune one model on several KLUE tasks and write one KLUE-ordered results table",
    ),
    ("pack",): (
        "kplm.training.pack",
        "PackConfig",
        "pack",
        "encode a corpus folder and pack it into fixed-length training sequences",
    ),
    ("export",): (
        "kplm.export.hf",
        "ExportConfig",
        "export",
        "turn a pretraining checkpoint into a Hugging Face model folder (safetensors + tokenizer + card)",
    ),
}

# commands that also take their main input as a positional argument
POSITIONAL = {("export",): "checkpoint", ("tokenizer", "report"): "tokenizer"}

USAGE = f"""usage: kplm <command> [options]

kplm {__version__}: raw Korean text in, a pretrained Korean BERT/RoBERTa encoder out.

commands:
  run [CONFIG]        run the whole pipeline from one YAML config (no CONFIG: the embedded
                      sample corpus, a few minutes on 2 CPU cores); stages whose output is
                      complete for the same config are skipped
  study CONFIG        run several pipeline arms, fine-tune each with several seeds, and
                      write one report (loss curves, scores, comparisons, wall times)
{chr(10).join(f"  {' '.join(words):<19} {desc}" for words, (_, _, _, desc) in COMMANDS.items())}

Pretraining itself runs under the DeepSpeed launcher:
  deepspeed [--num_gpus N | --hostfile FILE] launch/pretrain.py --config pretrain.yaml

Run 'kplm <command> --help' for a command's options. Errors in input or config are reported
as one line naming the file, line or field, with exit status 2.
"""


def _run_command(argv: list[str]) -> Any:
    parser = argparse.ArgumentParser(
        prog="kplm run",
        description="Run the whole kplm pipeline (corpus → pii → tokenizer → pack → pretrain → export) from one YAML "
        "config. Without CONFIG, runs the embedded demo: the project's own Korean sample corpus through every stage "
        "with a tiny model, then prints the exported model's folder and a fill-mask example.",
    )
    parser.add_argument(
        "config", nargs="?", type=Path, help="run config YAML (default: the embedded demo config)"
    )
    parser.add_argument("--output", type=Path, help="override the config's output folder")
    parser.add_argument(
        "--until", help="stop after this stage (corpus, pii, tokenizer, pack, pretrain, export)"
    )
    args = parser.parse_args(argv)
    from kplm.pipeline.run import run

    summary = run(args.config, output=args.output, until=args.until)
    return {name: stage["seconds"] for name, stage in summary["stages"].items()}


def _study_command(argv: list[str]) -> Any:
    parser = argparse.ArgumentParser(
        prog="kplm study",
        description="Run a study: several pipeline arms (e.g. morpheme vs plain vocabulary, PII on/off, random "
        "init) from one YAML, fine-tune every arm's model with several seeds, and write report.md with loss "
        "curves, scores (mean ± std over seeds), arm comparisons and wall times. Stages that arms share run once.",
    )
    parser.add_argument("config", type=Path, help="study YAML (see pipeline/configs/study-cpu.yaml)")
    args = parser.parse_args(argv)
    from kplm.pipeline.study import study

    return study(args.config)


def _stage_command(words: tuple[str, ...], argv: list[str]) -> Any:
    from kplm.cliargs import add_config_arguments, config_from_args
    from kplm.config import load_yaml

    module_name, class_name, function_name, description = COMMANDS[words]
    module = importlib.import_module(module_name)
    config_class = getattr(module, class_name)
    parser = argparse.ArgumentParser(
        prog="kplm " + " ".join(words), description=description[0].upper() + description[1:] + "."
    )
    parser.add_argument(
        "--config", type=Path, help="YAML file with these options (flags given here override it)"
    )
    add_config_arguments(parser, config_class)
    positional = POSITIONAL.get(words)
    if positional:  # e.g. `kplm export CHECKPOINT --output DIR` as well as `--checkpoint CHECKPOINT`
        parser.add_argument(
            f"{positional}_arg", nargs="?", metavar=positional.upper(), help=f"same as --{positional}"
        )
    args = parser.parse_args(argv)
    if positional and getattr(args, f"{positional}_arg"):
        if getattr(args, positional) is not None:
            parser.error(f"give {positional.upper()} or --{positional}, not both")
        setattr(args, positional, getattr(args, f"{positional}_arg"))
    base = load_yaml(args.config) if args.config else None
    config = config_from_args(config_class, args, base)
    return getattr(module, function_name)(config)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kplm`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if argv[0] == "--version":
        print(f"kplm {__version__}")
        return 0
    try:
        if argv[0] == "run":
            result = _run_command(argv[1:])
        elif argv[0] == "study":
            result = _study_command(argv[1:])
        else:
            words = next(
                (w for w in sorted(COMMANDS, key=len, reverse=True) if tuple(argv[: len(w)]) == w), None
            )
            if words is None:
                known = sorted({w[0] for w in COMMANDS} | {"run", "study"})
                print(
                    f"kplm: error: unknown command '{' '.join(argv[:2])}' (commands: {', '.join(known)}; see kplm --help)",
                    file=sys.stderr,
                )
                return 2
            result = _stage_command(words, argv[len(words) :])
    except KplmError as e:
        print(f"kplm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kplm: interrupted", file=sys.stderr)
        return 130
    if result is not None:
        print(json.dumps(result, ensure_ascii=False, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
