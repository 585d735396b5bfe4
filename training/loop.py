"""The optimizer-step loop of a pretraining run: train to ``max_steps``, log, evaluate, checkpoint, stop.

:class:`TrainLoop` is the half of :class:`kplm.training.pretrain.Trainer` that runs once everything is set
up; it relies on the attributes :meth:`Trainer.setup` creates (``engine``, ``data``, ``log``, ``stop`` …)
and on :meth:`Trainer.resume` / :meth:`Trainer.save`.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from kplm.records import is_complete, write_record
from kplm.training.checkpoint import STATE_NAME, tag_for
from kplm.training.signals import Interrupted


class TrainLoop:
    """Training steps, metrics lines and held-out evaluation of one rank (a mixin of ``Trainer``)."""

    config: Any
    engine: Any
    data: Any
    log: Any
    stop: Any
    device: Any
    world: int
    is_main: bool
    accum: int
    manual_norm: bool
    tokens_per_step: int
    flops_per_token: float
    peak_tflops: float | None
    params: int
    state: dict[str, Any]
    output: Path
    ckpt_dir: Path
    fingerprint: str
    resolved: dict[str, Any]
    started: float

    def fit(self) -> dict[str, Any]:
        """Train from the resumed step to ``max_steps``; returns the run's counts."""
        import torch

        cfg = self.config
        step = self.resume()
        if step >= cfg.max_steps and is_complete(self.output, self.fingerprint):
            self.log.info(f"already trained to step {step} (max_steps {cfg.max_steps}); nothing to do")
            return json.loads((self.output / "kplm_record.json").read_text(encoding="utf-8"))["counts"]
        self.stop.install()
        window_loss, window_steps, window_start = torch.zeros((), device=self.device), 0, time.time()
        grad_norm: float | None = None
        self.valid_loss: float | None = self.state.get("valid_loss")
        self.train_loss: float | None = self.state.get("train_loss")
        while step < cfg.max_steps:
            self.engine.train()
            lr = float(self.engine.get_lr()[0])  # the rate this step uses (the schedule moves after it)
            for micro in range(self.accum):
                batch, seed = self.data.train_batch(step, micro)
                torch.manual_seed(seed)
                loss = self.engine(**{k: v.to(self.device) for k, v in batch.items()})
                self.engine.backward(loss)
                if self.manual_norm and micro == self.accum - 1:
                    grad_norm = self._grad_norm()
                self.engine.step()
                window_loss += loss.detach().float() / self.accum
                del loss, batch
            step += 1
            window_steps += 1
            if step % cfg.log_every == 0 or step == cfg.max_steps:
                self._log_window(
                    step, lr, grad_norm, float(window_loss) / window_steps, window_steps, window_start
                )
                window_loss, window_steps, window_start = torch.zeros((), device=self.device), 0, time.time()
            if step % cfg.eval_every == 0 or step == cfg.max_steps:
                self.evaluate(step)
                window_start = time.time()
            if step % cfg.save_every == 0 or step == cfg.max_steps:
                self.save(step)
                window_start = time.time()
            signum = self.stop.agreed(self.device)
            if signum:
                if not (self.ckpt_dir / tag_for(step) / STATE_NAME).is_file():
                    self.save(step)
                self.log.info(f"{Interrupted(signum, step)}; rerun the same command to resume")
                raise Interrupted(signum, step)
        if self.valid_loss is None:
            self.evaluate(step)
        if not (self.ckpt_dir / tag_for(step) / STATE_NAME).is_file():
            self.save(step)
        counts = {
            "steps": step,
            "tokens_seen": step * self.tokens_per_step,
            "final_train_loss": self.train_loss,
            "final_valid_loss": self.valid_loss,
            "params": self.params,
            "world_size": self.world,
            "checkpoint": str(self.ckpt_dir / tag_for(step)),
        }
        if self.is_main:
            write_record(
                self.output,
                stage="pretrain",
                config=self.resolved,
                fingerprint=self.fingerprint,
                counts=counts,
                started=self.started,
            )
        return counts

    def _log_window(
        self, step: int, lr: float, grad_norm: float | None, loss: float, steps: int, started: float
    ) -> None:
        """Log one metrics line for the ``steps`` steps since ``started`` (a collective call: the loss is
        averaged over ranks)."""
        from kplm.training.metrics import memory_gib

        if not self.manual_norm:
            norm = self.engine.get_global_grad_norm()
            grad_norm = None if norm is None else float(norm)
        self.train_loss = self._mean_across_ranks(loss)
        tokens_per_s = steps * self.tokens_per_step / max(time.time() - started, 1e-9)
        values = {"loss": self.train_loss, "lr": lr, "grad_norm": grad_norm, "tokens_per_s": tokens_per_s}
        if self.peak_tflops:
            values["mfu"] = self.flops_per_token * tokens_per_s / (self.peak_tflops * 1e12 * self.world)
        key, mem = memory_gib()
        values[key] = mem
        self.log.log(step, values)

    def _grad_norm(self) -> float:
        import torch

        norms = [
            p.grad.detach().float().norm() for p in self.engine.module.parameters() if p.grad is not None
        ]
        return float(torch.linalg.vector_norm(torch.stack(norms))) if norms else 0.0

    def _mean_across_ranks(self, value: float) -> float:
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return float(t.item()) / self.world

    def evaluate(self, step: int) -> float:
        """Held-out MLM loss (mean over masked tokens of all ranks) on ``valid.npy``; logged and returned."""
        import torch
        import torch.distributed as dist

        started = time.time()
        _, mine = self.data.eval_batches(self.config.eval_batches)
        total = torch.zeros(2, dtype=torch.float64, device=self.device)
        self.engine.eval()
        with torch.no_grad():
            for j in mine:
                batch = self.data.eval_batch(0 if j is None else j)
                loss = self.engine(**{k: v.to(self.device) for k, v in batch.items()})
                if j is not None:
                    count = int((batch["labels"] != -100).sum())
                    total += torch.tensor(
                        [float(loss) * count, count], dtype=torch.float64, device=self.device
                    )
        self.engine.train()
        dist.all_reduce(total)
        self.valid_loss = float(total[0] / total[1]) if total[1] > 0 else float("nan")
        self.log.log(
            step,
            {
                "valid_loss": self.valid_loss,
                "valid_ppl": math.exp(min(self.valid_loss, 50.0)),
                "eval_s": time.time() - started,
            },
            kind="eval",
        )
        return self.valid_loss
