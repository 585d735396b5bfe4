"""What a pretraining run must agree with before it starts: its tokenizer and packed data, and the settings
of the checkpoints it would resume; plus the run fingerprint that decides whether a finished run is reused.

Used by every rank (:class:`kplm.training.pretrain.Trainer`) and, before any rank starts, by
:func:`kplm.training.launch.launch_pretraining`, so bad input is one clear line, not a failure in each rank.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from kplm.config import fingerprint, to_dict
from kplm.errors import KplmError
from kplm.training.checkpoint import RESOLVED_NAME, latest_checkpoint
from kplm.training.config import PretrainConfig
from kplm.training.pack import load_tokenizer, read_meta, tokenizer_fingerprint

_UNFINGERPRINTED = (
    "output",
    "data",
    "tokenizer",
    "wandb",
    "log_every",
    "eval_every",
    "save_every",
    "keep_last",
)


# Settings that may change between a run and its resumption (they do not change what a step computes).
_RESUMABLE = (*_UNFINGERPRINTED, "max_steps", "eval_batches", "peak_tflops")


def resume_settings(config: PretrainConfig) -> dict[str, Any]:
    """The settings a checkpoint must share with the config that resumes it."""
    return {k: v for k, v in to_dict(config).items() if k not in _RESUMABLE}


def resume_inputs(config: PretrainConfig) -> dict[str, Any]:
    """Fingerprints of the tokenizer and packed data a checkpoint was trained on."""
    return {
        "tokenizer": tokenizer_fingerprint(config.tokenizer),
        "data": read_meta(config.data).get("fingerprint"),
    }


def check_resumable(config: PretrainConfig, ckpt_dir: Path) -> None:
    """Refuse to resume checkpoints written by a run with other settings (another model size, batch, seed …)
    or on another tokenizer or packed data (e.g. after an upstream stage was rerun with a changed config)."""
    resolved = ckpt_dir / RESOLVED_NAME
    if latest_checkpoint(ckpt_dir) is None or not resolved.is_file():
        return
    try:
        written = json.loads(resolved.read_text(encoding="utf-8"))
        before = written["resume_settings"]
    except (ValueError, KeyError):
        return
    inputs_before, inputs_now = written.get("resume_inputs"), resume_inputs(config)
    if inputs_before:
        moved = [k for k in ("tokenizer", "data") if inputs_before.get(k) != inputs_now[k]]
        if moved:
            raise KplmError(
                f"{ckpt_dir} holds checkpoints trained on another {' and '.join(moved)} "
                f"(its fingerprint changed since they were written); delete that folder to start over, "
                "or choose another output folder"
            )
    now = json.loads(json.dumps(resume_settings(config), default=str))
    defaults = {f.name: f.default for f in dataclasses.fields(PretrainConfig)}
    changed = [
        k
        for k in sorted(set(before) | set(now))
        if (before[k] != now.get(k) if k in before else now.get(k) != defaults.get(k, object()))
    ]
    if changed:
        diffs = "; ".join(f"{k}: {before.get(k)} → {now.get(k)}" for k in changed[:3])
        raise KplmError(
            f"{ckpt_dir} holds checkpoints of a run with other settings ({diffs}); "
            "delete that folder to start over, or choose another output folder"
        )


def run_fingerprint(config: PretrainConfig) -> str:
    """What decides a run's result: its settings, the packed data and the tokenizer (not paths or logging)."""
    meta = read_meta(config.data)
    settings = {k: v for k, v in to_dict(config).items() if k not in _UNFINGERPRINTED}
    return fingerprint(settings, meta.get("fingerprint"), tokenizer_fingerprint(config.tokenizer))


def check_inputs(config: PretrainConfig) -> tuple[Any, dict[str, Any]]:
    """Load the tokenizer and pack metadata and check they belong together; returns both."""
    tokenizer = load_tokenizer(config.tokenizer)
    meta = read_meta(config.data)
    if meta["seq_len"] != config.seq_len:
        raise KplmError(
            f"seq_len: {config.seq_len}, but {config.data} was packed with seq_len {meta['seq_len']}"
        )
    tok_fp = tokenizer_fingerprint(config.tokenizer)
    if meta.get("tokenizer_fingerprint") != tok_fp or meta.get("vocab_size") != len(tokenizer):
        raise KplmError(
            f"tokenizer: {config.tokenizer} is not the tokenizer {config.data} was packed with "
            f"({meta.get('tokenizer')}, {meta.get('vocab_size')} tokens)"
        )
    if config.masking == "morpheme" and not meta.get("morpheme_boundaries"):
        raise KplmError(
            f"masking: morpheme needs morpheme boundaries, but {config.data} was packed without them "
            "(pack again with morpheme_boundaries: true)"
        )
    return tokenizer, meta
