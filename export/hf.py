"""``kplm export``: turn a pretraining checkpoint into a Hugging Face model folder.

Reads the checkpoint's consolidated ``model.safetensors`` (safetensors only, never pickle) and
``config.json``, rebuilds ``BertForMaskedLM`` / ``RobertaForMaskedLM``, loads the weights strictly, checks
the embedding against the tokenizer and writes ``save_pretrained`` safetensors, the tokenizer files and a
short model card. The result loads offline with ``AutoModelForMaskedLM.from_pretrained(folder)``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kplm.config import fingerprint
from kplm.errors import KplmError
from kplm.export.card import lineage, model_card
from kplm.export.hub import push_to_hub
from kplm.records import is_complete, read_record, write_record
from kplm.training.checkpoint import RESOLVED_NAME, STATE_NAME, WEIGHTS_NAME, resolve_checkpoint


@dataclass(kw_only=True)
class ExportConfig:
    """Export of one pretraining checkpoint."""

    checkpoint: Path = field(
        metadata={"help": "pretraining output folder (its newest checkpoint) or a checkpoints/step_* folder"}
    )
    output: Path = field(metadata={"help": "folder for the Hugging Face model (replaced if a kplm export)"})
    tokenizer: Path | None = field(
        default=None, metadata={"help": "tokenizer folder (default: the one the run was trained with)"}
    )
    dtype: Literal["fp32", "bf16"] = field(default="fp32", metadata={"help": "weight dtype of the export"})
    klue_results: Path | None = field(
        default=None, metadata={"help": "results.json of the KLUE suite, shown in the model card"}
    )
    push_to_hub: str | None = field(
        default=None,
        metadata={
            "help": "Hub repo id (user/name) to upload to; token from HF_TOKEN or the HF cache, never a flag"
        },
    )
    private: bool = field(default=True, metadata={"help": "create the Hub repo as private"})
    dry_run: bool = field(
        default=False, metadata={"help": "with --push-to-hub: list the files, upload nothing"}
    )

    def __post_init__(self) -> None:
        if self.push_to_hub is not None and not re.fullmatch(r"[\w.-]+/[\w.-]+", self.push_to_hub):
            raise ValueError(f"push_to_hub: expected a repo id like 'user/name', got {self.push_to_hub!r}")
        if self.dry_run and self.push_to_hub is None:
            raise ValueError("dry_run: only meaningful with push_to_hub")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise KplmError(f"{path}: unreadable ({e})") from None


def _run_tokenizer(tag: Path, state: dict[str, Any]) -> Path:
    """The tokenizer named in the run's resolved config (next to the checkpoints), else in the state."""
    resolved = tag.parent / RESOLVED_NAME
    if resolved.is_file():
        return Path(_read_json(resolved)["config"]["tokenizer"])
    if state.get("tokenizer"):
        return Path(state["tokenizer"])
    raise KplmError(f"{tag}: the run does not name its tokenizer; give --tokenizer")


def load_checkpoint_model(tag: Path) -> Any:
    """The masked LM of a checkpoint tag folder: HF model from ``config.json``, weights loaded strictly."""
    from safetensors.torch import load_model
    from transformers import AutoConfig, AutoModelForMaskedLM

    try:
        hf_config = AutoConfig.from_pretrained(str(tag), local_files_only=True)
    except (OSError, ValueError) as e:
        raise KplmError(f"{tag}: unreadable config.json ({e})") from None
    model = AutoModelForMaskedLM.from_config(hf_config, attn_implementation="sdpa")
    try:
        load_model(model, str(tag / WEIGHTS_NAME), strict=True)
    except (RuntimeError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise KplmError(f"{tag / WEIGHTS_NAME}: does not match config.json ({first})") from None
    return model.eval()


def _embedding_rows(tag: Path) -> int:
    """Rows of the word embedding in ``model.safetensors`` (read from the header only)."""
    from safetensors import safe_open

    with safe_open(str(tag / WEIGHTS_NAME), framework="pt") as f:
        for key in f.keys():  # noqa: SIM118 - safe_open has no __iter__
            if key.endswith(("embeddings.word_embeddings.weight", "embeddings.tok_embeddings.weight")):
                return int(f.get_slice(key).get_shape()[0])
    raise KplmError(f"{tag / WEIGHTS_NAME}: no word embedding found")


def _replaceable(output: Path) -> bool:
    if not output.exists():
        return True
    if output.is_dir() and not any(output.iterdir()):
        return True
    record = read_record(output)
    return bool(record) and record.get("stage") == "export"


def export(config: ExportConfig) -> dict[str, Any]:
    """Write the Hugging Face folder for ``config.checkpoint``; returns what was exported."""
    import torch

    from kplm.training.pack import load_tokenizer, tokenizer_fingerprint

    started = time.time()
    tag = resolve_checkpoint(config.checkpoint)
    state = _read_json(tag / STATE_NAME)
    tokenizer_dir = Path(config.tokenizer) if config.tokenizer is not None else _run_tokenizer(tag, state)
    tokenizer = load_tokenizer(tokenizer_dir)
    output = Path(config.output)
    fp = fingerprint(
        config.dtype,
        state.get("fingerprint"),
        state.get("step"),
        (tag / WEIGHTS_NAME).stat().st_size,
        tokenizer_fingerprint(tokenizer_dir),
    )
    klue = _read_json(Path(config.klue_results)) if config.klue_results else None
    if klue is not None:
        fp = fingerprint(fp, klue)
    if is_complete(output, fp):
        return _maybe_push(config, dict(read_record(output)["counts"], skipped=True))
    if not _replaceable(output):
        raise KplmError(f"output: {output} exists and is not a kplm export; choose another folder")
    rows = _embedding_rows(tag)
    if rows != len(tokenizer):
        raise KplmError(
            f"tokenizer: {tokenizer_dir} has {len(tokenizer)} tokens but the model's embedding has {rows} rows "
            f"({tag}); use the tokenizer the run was trained with"
        )
    model = load_checkpoint_model(tag)
    if config.dtype == "bf16":
        model = model.to(torch.bfloat16)
    if state.get("seq_len"):
        tokenizer.model_max_length = int(state["seq_len"])
    tmp = output.with_name(f".{output.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.config.tokenizer_class = type(tokenizer).__name__
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    card = model_card(
        state=state,
        hf_config=model.config,
        tokenizer=tokenizer,
        dtype=config.dtype,
        records=lineage(state, tag.parent.parent),
        klue_results=klue,
    )
    (tmp / "README.md").write_text(card, encoding="utf-8")
    counts = {
        "checkpoint": str(tag),
        "step": state.get("step"),
        "tokens_seen": state.get("tokens_seen"),
        "valid_loss": state.get("valid_loss"),
        "params": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "dtype": config.dtype,
    }
    write_record(tmp, stage="export", config=config, fingerprint=fp, counts=counts, started=started)
    if output.exists():
        shutil.rmtree(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, output)
    return _maybe_push(config, counts)


def _maybe_push(config: ExportConfig, counts: dict[str, Any]) -> dict[str, Any]:
    if config.push_to_hub is None:
        return counts
    hub = push_to_hub(Path(config.output), config.push_to_hub, private=config.private, dry_run=config.dry_run)
    return dict(counts, hub=hub)
