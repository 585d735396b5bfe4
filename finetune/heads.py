"""Encoder + custom task head models (KLUE-DP's biaffine parser, WoS's slot classifiers) and their files.

Such a model is an ``AutoModel`` encoder plus a small head that no ``AutoModelFor*`` class covers. It is
saved as the encoder's own ``save_pretrained`` folder (``model.safetensors`` + ``config.json``, so the
fine-tuned encoder reloads with ``AutoModel.from_pretrained``), ``head.safetensors`` with the head's
weights and ``head.json`` with the head's kind and constructor arguments; :func:`load_head_model` rebuilds
the whole model from those files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

HEAD_WEIGHTS = "head.safetensors"
HEAD_CONFIG = "head.json"


class EncoderHead(torch.nn.Module):
    """Base of encoder + head models: subclasses keep their constructor arguments in ``self.head_args``."""

    kind = ""

    def __init__(self, encoder: Any, **head_args: Any) -> None:
        super().__init__()
        self.encoder = encoder
        self.head_args = head_args

    def save_pretrained(self, folder: str | Path) -> None:
        """Encoder via ``save_pretrained``; head weights as safetensors; head kind/arguments as JSON."""
        from safetensors.torch import save_file

        folder = Path(folder)
        self.encoder.save_pretrained(str(folder))
        head = {
            k: v.detach().cpu().contiguous()
            for k, v in self.state_dict().items()
            if not k.startswith("encoder.")
        }
        save_file(head, str(folder / HEAD_WEIGHTS))
        text = json.dumps({"kind": self.kind, "args": self.head_args}, ensure_ascii=False, indent=1)
        (folder / HEAD_CONFIG).write_text(text, encoding="utf-8")


def load_head_model(folder: str | Path, cls: type[EncoderHead]) -> EncoderHead:
    """Rebuild a saved ``cls`` model: ``AutoModel`` encoder, then the head from its safetensors file."""
    from safetensors.torch import load_file
    from transformers import AutoModel

    folder = Path(folder)
    spec = json.loads((folder / HEAD_CONFIG).read_text(encoding="utf-8"))
    if spec.get("kind") != cls.kind:
        raise ValueError(f"{folder}: head kind {spec.get('kind')!r} is not {cls.kind!r}")
    model = cls(AutoModel.from_pretrained(str(folder)), **spec["args"])
    missing, unexpected = model.load_state_dict(load_file(str(folder / HEAD_WEIGHTS)), strict=False)
    if unexpected or any(not k.startswith("encoder.") for k in missing):
        raise ValueError(f"{folder}: head weights do not match ({unexpected or missing})")
    return model.eval()
