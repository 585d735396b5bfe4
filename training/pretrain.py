"""Masked-LM pretraining with DeepSpeed: the trainer behind ``deepspeed launch/pretrain.py --config X``.

Also runnable as ``python -m kplm.training.pretrain --config X`` (one rank, no launcher) or
``deepspeed --module kplm.training.pretrain --config X``. Every rank runs :class:`Trainer`: set-up, resume
and checkpoints here, the step loop, logging and evaluation in :mod:`kplm.training.loop`, the input and
resume checks in :mod:`kplm.training.checks`; rank 0 logs, writes the consolidated weights and records.
Batches are a pure function of the step (see :mod:`kplm.training.data`), so resuming from
``output/checkpoints`` needs only DeepSpeed's saved state (no data-loader or RNG state: dropout is
reseeded from the same key every micro-step), read with ``weights_only=True``
(:mod:`kplm.training.safe_load`). SIGTERM/SIGINT stop the run at the end of the current step with a
checkpoint (:mod:`kplm.training.signals`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kplm.config import to_dict
from kplm.errors import KplmError
from kplm.records import versions, write_json_atomic
from kplm.training.checkpoint import (
    CHECKPOINTS,
    RESOLVED_NAME,
    STATE_NAME,
    latest_checkpoint,
    save_checkpoint,
)
from kplm.training.checks import (
    check_inputs,
    check_resumable,
    resume_inputs,
    resume_settings,
    run_fingerprint,
)
from kplm.training.config import PretrainConfig, absolute_paths, load_pretrain_config
from kplm.training.loop import TrainLoop
from kplm.training.signals import Interrupted, StopRequest

__all__ = [
    "Trainer",
    "check_inputs",
    "check_resumable",
    "main",
    "resume_inputs",
    "resume_settings",
    "run",
    "run_fingerprint",
]


class Trainer(TrainLoop):
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
        import torch
        import torch.distributed as dist

        from kplm.training.data import Masker, PackedData, continuation_ids
        from kplm.training.engine import (
            cpu_has_fast_bf16,
            deepspeed_config,
            gpu_peak_tflops,
            has_gpu,
            init_distributed,
            initialize,
        )
        from kplm.training.metrics import MetricsLogger
        from kplm.training.model import SparseMLMLoss, build_mlm, count_params, flops_per_token, hf_config
        from kplm.training.safe_load import install_safe_loading

        cfg = self.config
        on_gpu = has_gpu()
        ds_config = deepspeed_config(cfg, on_gpu)
        if on_gpu:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        init_distributed()
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
        install_safe_loading(self.engine)  # resume reads DeepSpeed's files with weights_only=True
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
            whole_morpheme=cfg.masking == "morpheme",
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
