"""Shared inputs of the training and export tests: a tiny WordPiece tokenizer trained on real NSMC reviews,
a two-shard corpus folder, its packed sequences and a short real pretraining run (built once per session
under pytest's base temporary folder and reused by every test module that asks for it).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
NSMC = REPO.parent / "shared" / "data" / "nsmc" / "reviews.jsonl.gz"
N_REVIEWS = 5000
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def nsmc_texts(n: int = N_REVIEWS) -> list[str]:
    """The first ``n`` non-empty NSMC reviews (real informal Korean)."""
    texts = []
    with gzip.open(NSMC, "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"].strip()
            if text:
                texts.append(text)
                if len(texts) >= n:
                    break
    return texts


def build_tokenizer(folder: Path, texts: list[str], vocab_size: int = 3000) -> Path:
    """Train a WordPiece vocabulary with HF ``tokenizers`` and save it as a ``BertTokenizer`` folder."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizer

    wordpiece = BertWordPieceTokenizer(lowercase=False, strip_accents=False, clean_text=True)
    wordpiece.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS)
    tokenizer = BertTokenizer(vocab=wordpiece.get_vocab(), do_lower_case=False, strip_accents=False)
    tokenizer.save_pretrained(str(folder))
    return folder


def write_corpus(folder: Path, texts: list[str], shards: int = 2) -> Path:
    """Write ``texts`` as a kplm corpus folder (Parquet shards through ``ShardWriter``)."""
    from kplm.corpus.shards import ShardWriter

    per = -(-len(texts) // shards)
    for s in range(shards):
        with ShardWriter(folder / f"part-{s:05d}.parquet") as writer:
            for i, text in enumerate(texts[s * per : (s + 1) * per], start=s * per):
                writer.write(id=f"nsmc-{i}", text=text, source="nsmc", metadata={"n": i})
    return folder


def workspace(base: Path) -> dict[str, Path]:
    """Tokenizer, corpus and packed data under ``base`` (built on first use, then reused)."""
    from kplm.training.pack import PackConfig, pack

    paths = {"tokenizer": base / "tokenizer", "corpus": base / "corpus", "packed": base / "packed"}
    if not (paths["packed"] / "kplm_record.json").exists():
        texts = nsmc_texts()
        build_tokenizer(paths["tokenizer"], texts)
        write_corpus(paths["corpus"], texts)
        pack(
            PackConfig(
                corpus=paths["corpus"], tokenizer=paths["tokenizer"], output=paths["packed"], seq_len=64
            )
        )
    return paths


def pretrain_yaml(path: Path, ws: dict[str, Path], output: Path, **overrides: Any) -> Path:
    """Write a tiny-model pretraining YAML for the workspace ``ws``."""
    config: dict[str, Any] = {
        "data": str(ws["packed"]),
        "tokenizer": str(ws["tokenizer"]),
        "output": str(output),
        "model": {"arch": "bert", "size": "tiny"},
        "seq_len": 64,
        "micro_batch_size": 8,
        "grad_accum": 2,
        "max_steps": 6,
        "lr": 1e-3,
        "warmup_steps": 2,
        "precision": "fp32",
        "zero_stage": 0,
        "save_every": 2,
        "keep_last": 2,
        "log_every": 1,
        "eval_every": 3,
        "eval_batches": 2,
        "seed": 7,
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


def run_command(
    command: list[str], timeout: int = 300, env: dict[str, str | None] | None = None
) -> subprocess.CompletedProcess:
    """Run a training command with CPU settings (wandb off unless ``env`` says otherwise); fail with its
    output when it fails."""
    env = {
        **os.environ,
        "DS_ACCELERATOR": "cpu",
        "PYTHONUNBUFFERED": "1",
        "WANDB_MODE": "disabled",
        **(env or {}),
    }
    env = {k: v for k, v in env.items() if v is not None}
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} exited with {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
            f"\n--- stderr\n{result.stderr[-6000:]}"
        )
    return result


def single_rank(config_path: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -m kplm.training.pretrain --config X``: one rank, no launcher."""
    return run_command(
        [sys.executable, "-m", "kplm.training.pretrain", "--config", str(config_path)], timeout
    )


def metrics(output: Path, kind: str = "train") -> dict[int, dict[str, Any]]:
    """The last ``metrics.jsonl`` entry of each step of one kind (train or eval)."""
    found: dict[int, dict[str, Any]] = {}
    for line in (output / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry["kind"] == kind:
            found[entry["step"]] = entry
    return found


def trained_run(base: Path) -> dict[str, Path]:
    """A finished 6-step tiny BERT run (checkpoints at steps 4 and 6 kept), built once under ``base``."""
    ws = workspace(base)
    output = base / "run_a"
    if not (output / "kplm_record.json").exists():
        single_rank(pretrain_yaml(base / "run_a.yaml", ws, output))
    return {**ws, "run": output}
