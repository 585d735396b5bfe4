"""Resume without unpickling arbitrary objects: DeepSpeed's checkpoint files read with ``weights_only=True``.

DeepSpeed's :class:`TorchCheckpointEngine` reads its ``.pt`` files with ``torch.load(weights_only=False)``,
which runs any code a crafted file carries. :func:`install_safe_loading` swaps the engine's checkpoint
engine for :class:`SafeTorchCheckpointEngine`, whose ``load`` uses ``weights_only=True`` and allows only
the few plain DeepSpeed classes (no code, only numbers) that its ZeRO 0-3 checkpoints pickle besides
tensors, dicts, lists and numbers: :data:`ALLOWED_GLOBALS`. A file holding anything else is refused with a
:class:`~kplm.errors.KplmError` that names the file and the refused object.

Found by loading fp32 and bf16 checkpoints of ZeRO 0, 1, 2 and 3 (two ranks) written by DeepSpeed 0.19:
ZeRO 1-3 optimizer states pickle the loss scaler and the ZeRO stage enum, ZeRO 1-2 the ``fragment_address``
of each parameter; fp16 runs use the dynamic loss scaler instead of the static one.
"""

from __future__ import annotations

import pickle
import re
from typing import Any

import torch
from deepspeed.runtime.checkpoint_engine.torch_checkpoint_engine import TorchCheckpointEngine
from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
from deepspeed.runtime.zero.config import ZeroStageEnum
from deepspeed.utils.tensor_fragment import fragment_address

from kplm.errors import KplmError

ALLOWED_GLOBALS: tuple[Any, ...] = (LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address)
"""The non-tensor classes DeepSpeed's checkpoints may hold; everything else is refused."""


def safe_torch_load(path: str, map_location: Any = None) -> Any:
    """``torch.load`` with ``weights_only=True`` and only :data:`ALLOWED_GLOBALS` allowed; a refused or
    unreadable file is a :class:`KplmError` naming it."""
    try:
        with torch.serialization.safe_globals(list(ALLOWED_GLOBALS)):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
        what = found.group(1) if found else str(e).splitlines()[0][:200]
        raise KplmError(
            f"{path}: refused to load this checkpoint file: it holds a pickled object that is not tensor "
            f"data or one of DeepSpeed's plain classes (not allowed: {what}); load only checkpoints you trust"
        ) from None
    except (EOFError, RuntimeError) as e:
        raise KplmError(f"{path}: unreadable checkpoint file ({str(e).splitlines()[0][:200]})") from None


class SafeTorchCheckpointEngine(TorchCheckpointEngine):
    """DeepSpeed's torch checkpoint engine (same saving) whose ``load`` is :func:`safe_torch_load`."""

    def load(self, path: str, map_location: Any = None) -> Any:
        return safe_torch_load(path, map_location=map_location)


def install_safe_loading(engine: Any) -> None:
    """Make ``engine.load_checkpoint`` read every file with :func:`safe_torch_load`.

    Only DeepSpeed's default engine is replaced: a DeepSpeed JSON that configures another checkpoint
    writer (fast / decoupled) keeps that writer's loader, which calls ``torch.load`` with torch's default
    (``weights_only=True`` since torch 2.6) and without the allow-list.
    """
    current = getattr(engine, "checkpoint_engine", None)
    if type(current) is TorchCheckpointEngine:
        safe = SafeTorchCheckpointEngine.__new__(SafeTorchCheckpointEngine)
        safe.__dict__.update(current.__dict__)  # same settings (zipfile serialisation, name)
        engine.checkpoint_engine = safe
