"""Masked-LM pretraining with DeepSpeed: the trainer behind ``deepspeed launch/pretrain.py --config X``.

Also runnable as ``python -m kplm.training.pretrain --config X`` (one rank, no launcher) or
``deepspeed --module kplm.training.pretrain --config X``. Every rank runs :class:`Trainer`; rank 0 logs,
writes the consolidated weights and the records. Batches are a pure function of the step (see
:mod:`kplm.training.data`), so resuming from ``output/checkpoints`` needs only DeepSpeed's saved state (no
data-loader or RNG state: dropout is reseeded from the same key every micro-step). SIGTERM/SIGINT stop
the run at the end of the current step with a checkpoint (:mod:`kplm.training.signals`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from kplm.config import fingerprint, to_dict
from kplm.errors import KplmError
from kplm.records import is_complete, versions, write_json_atomic, write_record
from kplm.training.checkpoint import (
    CHECKPOINTS,
    RESOLVED_NAME,
    STATE_NAME,
    latest_checkpoint,
    save_checkpoint,
    tag_for,
)
from kplm.training.config import PretrainConfig, absolute_paths, load_pretrain_config
from kplm.training.pack import load_tokenizer, read_meta, tokenizer_fingerprint
from kplm.training.signals import Interrupted, StopRequest

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
    return tokenizer, meta


class Trainer:
    """One rank of a pretraining run: build the engine, resume, train, evaluate, checkpoint, record."""

    def __init__(self, config: PretrainConfig):
        self.config = config
        self.started = time.time()
        self.tokenizer, self.meta = check_inputs(config)
        self.fingerprint = run_fingerprint(config)
        self.output = Path(config.output).resolve()
        self.ckpt_dir = self.output / CHECKPOINTS
        check_resumable(config, self.ckpt_dir)
        self.stop = StopRequest()

    # ----------------------------------------------------------------- setup
    def setup(self, local_rank: int | None = None) -> None:
        """Initialise torch.distributed and DeepSpeed, build the model, optimizer, schedule and data.

        ``local_rank`` is the launcher's ``--local_rank`` (used only where ``LOCAL_RANK`` is not set).
        """
        from kplm.training.engine import prepare_environment

        prepare_environment(local_rank)
        import deepspeed
        import torch
        import torch.distributed as dist

        from kplm.training.data import Masker, PackedData, continuation_ids
        from kplm.training.engine import (
            cpu_has_fast_bf16,
            deepspeed_config,
            gpu_peak_tflops,
            has_gpu,
            initialize,
        )
        from kplm.training.metrics import MetricsLogger
        from kplm.training.model import SparseMLMLoss, build_mlm, count_params, flops_per_token, hf_config

        cfg = self.config
        on_gpu = has_gpu()
        ds_config = deepspeed_config(cfg, on_gpu)
        if on_gpu:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        deepspeed.init_distributed()
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.is_main = self.rank == 0
        ids = self.meta["special_ids"]
        self.hf_config = hf_config(cfg.model, vocab_size=len(self.tokenizer), seq_len=cfg.seq_len, ids=ids)
        torch.manual_seed(cfg.seed)
        mlm = build_mlm(self.hf_config)
        if cfg.gradient_checkpointing:
            mlm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.params = count_params(mlm)
        self.flops_per_token = flops_per_token(self.hf_config, self.params, cfg.seq_len, cfg.mask_prob)
        self.engine = initialize(cfg, SparseMLMLoss(mlm), ds_config, on_gpu)
        self.mlm = self.engine.module.mlm
        self.device = self.engine.device
        self.micro = int(ds_config["train_micro_batch_size_per_gpu"])
        self.accum = int(ds_config["gradient_accumulation_steps"])
        masker = Masker(
            mask_id=ids["mask"],
            special_ids=ids["all"],
            vocab_size=len(self.tokenizer),
            prob=cfg.mask_prob,
            whole_eojeol=cfg.masking == "eojeol",
            continuation_ids=continuation_ids(self.tokenizer),
        )
        self.data = PackedData(
            cfg.data,
            seq_len=cfg.seq_len,
            micro_batch_size=self.micro,
            grad_accum=self.accum,
            world_size=self.world,
            rank=self.rank,
            seed=cfg.seed,
            masker=masker,
            pad_id=ids["pad"],
        )
        self.tokens_per_step = self.data.global_batch * cfg.seq_len
        # MFU needs the device's peak: the configured one, else a known GPU's bf16/fp16 peak (none on CPU).
        self.peak_tflops = cfg.peak_tflops or gpu_peak_tflops(cfg.precision)
        # Plain fp32 without ZeRO has no optimizer wrapper that reports the gradient norm: compute it here.
        self.manual_norm = not (
            self.engine.zero_optimization() or self.engine.bfloat16_enabled() or self.engine.fp16_enabled()
        )
        self.resolved = {
            "config": to_dict(absolute_paths(cfg)),
            "deepspeed": ds_config,
            "world_size": self.world,
            "global_batch": self.data.global_batch,
            "params": self.params,
            "hf_config": self.hf_config.to_dict(),
            "fingerprint": self.fingerprint,
            "resume_settings": resume_settings(cfg),
            "resume_inputs": resume_inputs(cfg),
            "versions": versions(),
        }
        if self.is_main:
            write_json_atomic(self.ckpt_dir / RESOLVED_NAME, self.resolved)
        self.log = MetricsLogger(cfg, is_main=self.is_main, resolved=self.resolved)
        self.log.info(
            f"{cfg.model.arch}-{cfg.model.size}: {self.params:,} parameters, {self.world} rank(s), "
            f"global batch {self.data.global_batch} × {cfg.seq_len} tokens, precision {cfg.precision}, "
            f"ZeRO {self.engine.zero_optimization_stage()}, {len(self.data.train):,} training sequences"
        )
        if not on_gpu and self.engine.bfloat16_enabled() and not cpu_has_fast_bf16():
            self.log.info(
                "note: this CPU has no AVX512-BF16/AMX, so bf16 is emulated and slower than fp32 here"
            )

    # ---------------------------------------------------------------- resume
    def resume(self) -> int:
        """Load the newest finished checkpoint (same on every rank); returns the step to continue from."""
        import torch.distributed as dist

        found = [str(latest_checkpoint(self.ckpt_dir) or "") if self.is_main else None]
        dist.broadcast_object_list(found, src=0)
        if not found[0]:
            self.state: dict[str, Any] = {}
            return 0
        tag = Path(found[0])
        started = time.time()
        try:
            path, client = self.engine.load_checkpoint(str(self.ckpt_dir), tag=tag.name)
        except (RuntimeError, ValueError, KeyError, AssertionError, OSError) as e:
            detail = str(e).splitlines()[0][:300]
            raise KplmError(
                f"{tag}: cannot resume from this checkpoint ({type(e).__name__}: {detail})"
            ) from None
        if path is None:
            raise KplmError(f"{tag}: DeepSpeed found no state to resume from")
        self.state = json.loads((tag / STATE_NAME).read_text(encoding="utf-8"))
        step = int(client.get("kplm_step", self.state["step"]))
        self.log.info(f"resumed from {tag} at step {step} in {time.time() - started:.2f} s")
        return step

    # ----------------------------------------------------------------- train
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
            step += 1
            window_steps += 1
            if step % cfg.log_every == 0 or step == cfg.max_steps:
                if not self.manual_norm:
                    norm = self.engine.get_global_grad_norm()
                    grad_norm = None if norm is None else float(norm)
                self.train_loss = self._mean_across_ranks(float(window_loss) / window_steps)
                seconds = max(time.time() - window_start, 1e-9)
                tokens_per_s = window_steps * self.tokens_per_step / seconds
                values = {
                    "loss": self.train_loss,
                    "lr": lr,
                    "grad_norm": grad_norm,
                    "tokens_per_s": tokens_per_s,
                }
                if self.peak_tflops:
                    values["mfu"] = (
                        self.flops_per_token * tokens_per_s / (self.peak_tflops * 1e12 * self.world)
                    )
                from kplm.training.metrics import memory_gib

                key, mem = memory_gib()
                values[key] = mem
                self.log.log(step, values)
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

    def save(self, step: int) -> None:
        """Checkpoint ``step``: DeepSpeed state on all ranks, consolidated weights and state on rank 0."""
        from kplm.training.engine import full_fp32_state_dict

        weights = full_fp32_state_dict(self.engine, self.mlm, self.is_main)
        state = {
            "step": step,
            "max_steps": self.config.max_steps,
            "tokens_seen": step * self.tokens_per_step,
            "global_batch": self.data.global_batch,
            "seq_len": self.config.seq_len,
            "world_size": self.world,
            "arch": self.config.model.arch,
            "size": self.config.model.size,
            "params": self.params,
            "train_loss": self.train_loss,
            "valid_loss": self.valid_loss,
            "tokenizer": str(Path(self.config.tokenizer).resolve()),
            "data": str(Path(self.config.data).resolve()),
            "fingerprint": self.fingerprint,
            "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        path = save_checkpoint(
            self.engine,
            folder=self.ckpt_dir,
            step=step,
            weights=weights if self.is_main else None,
            hf_config=self.hf_config,
            state=state,
            keep_last=self.config.keep_last,
            is_main=self.is_main,
        )
        self.log.info(f"saved {path}")

    def close(self) -> None:
        self.stop.restore()
        log = getattr(self, "log", None)
        if log is not None:
            log.close()


def run(config: PretrainConfig, local_rank: int | None = None) -> dict[str, Any]:
    """Check inputs, set up, train to ``max_steps``, tear down this rank's process group; returns counts."""
    import torch.distributed as dist

    trainer = Trainer(config)
    try:
        trainer.setup(local_rank)
        return trainer.fit()
    finally:
        trainer.close()
        if dist.is_initialized():
            dist.destroy_process_group()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="kplm masked-LM pretraining (one rank; use the deepspeed launcher)"
    )
    parser.add_argument(
        "--config", required=True, type=Path, help="pretraining YAML (a PretrainConfig mapping)"
    )
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None, help="set by the launcher")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m kplm.training.pretrain``; errors in input are one line, exit status 2."""
    args = parse_args(argv)
    try:
        run(load_pretrain_config(args.config), args.local_rank)
    except KplmError as e:
        print(f"kplm: error: {e}", file=sys.stderr, flush=True)
        return 2
    except Interrupted as e:
        return e.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main())
