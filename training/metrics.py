"""Rank-0 metrics: one fixed-format line per report on stdout, ``metrics.jsonl`` in the run folder, and
Weights & Biases when enabled (scalars only, never text). Other ranks log nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any

from kplm.config import to_dict
from kplm.training.config import PretrainConfig

METRICS_NAME = "metrics.jsonl"


def memory_gib() -> tuple[str, float]:
    """Peak accelerator memory of this process (GPU), else its peak resident memory (CPU), in GiB."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return "mem", torch.cuda.max_memory_allocated() / 2**30
    return "rss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def format_line(step: int, max_steps: int, values: dict[str, Any]) -> str:
    """``[kplm] step 10/100 | loss 6.9021 | lr 2.00e-04 | …`` with a fixed format per known key."""
    formats = {
        "loss": "loss {:.4f}",
        "lr": "lr {:.3e}",
        "grad_norm": "grad_norm {:.3f}",
        "tokens_per_s": "tok/s {:,.0f}",
        "mfu": "mfu {:.1%}",
        "mem": "mem {:.2f}GiB",
        "rss": "rss {:.2f}GiB",
        "valid_loss": "valid_loss {:.4f}",
        "valid_ppl": "valid_ppl {:.2f}",
        "eval_s": "eval_s {:.1f}",
    }
    parts = [f"step {step}/{max_steps}"]
    for key, fmt in formats.items():
        value = values.get(key)
        if value is not None:
            parts.append(fmt.format(value))
    return "[kplm] " + " | ".join(parts)


class MetricsLogger:
    """Where training reports go; every method is a no-op except on the main rank."""

    def __init__(self, config: PretrainConfig, *, is_main: bool, resolved: dict[str, Any]):
        self.config, self.is_main = config, is_main
        self.max_steps = config.max_steps
        self._wandb = None
        if not is_main:
            return
        output = Path(config.output)
        output.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(output / METRICS_NAME, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        mode = os.environ.get("WANDB_MODE") or config.wandb.mode
        if mode not in ("disabled", "offline", "online"):
            mode = config.wandb.mode
        if mode != "disabled":
            import wandb

            run_id = hashlib.sha256(str(output.resolve()).encode()).hexdigest()[:16]
            self._wandb = wandb.init(
                project=config.wandb.project,
                group=config.wandb.group
                or os.environ.get("WANDB_RUN_GROUP")
                or f"{config.model.arch}-{config.model.size}",
                name=config.wandb.name or output.name,
                id=run_id,
                resume="allow",
                dir=str(output),
                mode=mode,
                config=to_dict(resolved),
                save_code=False,
                settings=wandb.Settings(console="off"),  # metrics only: no captured output
            )

    def log(self, step: int, values: dict[str, Any], *, kind: str = "train") -> None:
        if not self.is_main:
            return
        print(format_line(step, self.max_steps, values), flush=True)
        self._jsonl.write(json.dumps({"step": step, "kind": kind, **values}) + "\n")
        self._jsonl.flush()
        if self._wandb is not None:
            prefix = "valid/" if kind == "eval" else "train/"
            self._wandb.log(
                {prefix + k: v for k, v in values.items() if isinstance(v, int | float)}, step=step
            )

    def info(self, message: str) -> None:
        if self.is_main:
            print(f"[kplm] {message}", flush=True)

    def close(self) -> None:
        if not self.is_main:
            return
        self._jsonl.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None
        sys.stdout.flush()
