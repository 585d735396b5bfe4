"""Checkpoints of a pretraining run: ``<output>/checkpoints/step_XXXXXXXX/``.

Each tag folder holds DeepSpeed's own state (model, optimizer, scheduler; every rank writes its part via
``engine.save_checkpoint``) for resuming, plus, written by rank 0, ``model.safetensors`` (the consolidated
fp32 weights of the whole masked LM), the Hugging Face ``config.json`` and ``trainer_state.json``.
``trainer_state.json`` is written last: a tag folder without it is an interrupted save and is ignored.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from kplm.errors import KplmError
from kplm.records import write_json_atomic

CHECKPOINTS = "checkpoints"
STATE_NAME = "trainer_state.json"
WEIGHTS_NAME = "model.safetensors"
RESOLVED_NAME = "resolved_config.json"
_TAG = re.compile(r"^step_(\d{8,})$")


def tag_for(step: int) -> str:
    return f"step_{step:08d}"


def complete_tags(folder: Path) -> list[tuple[int, Path]]:
    """``(step, tag folder)`` of the finished checkpoints in a ``checkpoints`` folder, oldest first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = _TAG.match(path.name)
        if match and path.is_dir() and (path / STATE_NAME).is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest finished tag folder in ``folder`` (a ``checkpoints`` folder), or None."""
    tags = complete_tags(folder)
    return tags[-1][1] if tags else None


def resolve_checkpoint(path: Path) -> Path:
    """A tag folder from a run folder, its ``checkpoints`` folder or a tag folder itself."""
    path = Path(path)
    if (path / STATE_NAME).is_file() and (path / WEIGHTS_NAME).is_file():
        return path
    for folder in (path / CHECKPOINTS, path):
        tag = latest_checkpoint(folder)
        if tag is not None:
            return tag
    if not path.exists():
        raise KplmError(f"checkpoint not found: {path}")
    raise KplmError(f"{path}: no finished checkpoint here (expected {CHECKPOINTS}/step_*/{STATE_NAME})")


def save_checkpoint(
    engine: Any,
    *,
    folder: Path,
    step: int,
    weights: dict[str, Any] | None,
    hf_config: Any,
    state: dict[str, Any],
    keep_last: int,
    is_main: bool,
) -> Path:
    """Save DeepSpeed state (all ranks) and, on rank 0, the HF weights, config and trainer state.

    ``weights`` is the consolidated fp32 state dict (rank 0) from
    :func:`kplm.training.engine.full_fp32_state_dict`. Older checkpoints beyond ``keep_last`` are deleted.
    """
    import torch.distributed as dist
    from safetensors.torch import save_file

    tag = tag_for(step)
    engine.save_checkpoint(str(folder), tag=tag, client_state={"kplm_step": step}, save_latest=True)
    path = Path(folder) / tag
    if is_main:
        if weights is None:
            raise RuntimeError("rank 0 must receive the consolidated weights")
        tmp = path / f".{WEIGHTS_NAME}.tmp"
        save_file(weights, str(tmp), metadata={"format": "pt"})
        tmp.replace(path / WEIGHTS_NAME)
        hf_config.save_pretrained(str(path))
        write_json_atomic(path / STATE_NAME, state)
        for _, old in complete_tags(folder)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
        for stale in Path(folder).glob("step_*"):
            if stale.is_dir() and not (stale / STATE_NAME).exists() and _older(stale, step):
                shutil.rmtree(stale, ignore_errors=True)
    if dist.is_initialized():
        dist.barrier()
    return path


def _older(path: Path, step: int) -> bool:
    match = _TAG.match(path.name)
    return bool(match) and int(match.group(1)) < step
