"""DeepSpeed plumbing: the launcher environment, the generated DeepSpeed JSON, the learning-rate schedule
and the consolidated fp32 weights of a (possibly ZeRO-partitioned) model.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kplm.errors import KplmError
from kplm.training.config import PretrainConfig


def free_port() -> int:
    """A TCP port that was free a moment ago (for MASTER_PORT of single-machine runs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() > 0


# Dense bf16/fp16 tensor-core peak TFLOP/s (no sparsity) of GPUs, by a substring of the device name.
GPU_PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),
    ("H800", 989.0),
    ("GH200", 989.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
    ("A10G", 70.0),
    ("A10", 125.0),
    ("V100", 125.0),
)


def gpu_peak_tflops(precision: str) -> float | None:
    """Peak bf16/fp16 TFLOP/s of this process's GPU from :data:`GPU_PEAK_TFLOPS` (None: unknown, CPU, fp32)."""
    if precision == "fp32" or not has_gpu():
        return None
    import torch

    name = torch.cuda.get_device_name()
    return next((peak for key, peak in GPU_PEAK_TFLOPS if key in name), None)


def cpu_has_fast_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX); without it bf16 is emulated, slowly."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def prepare_environment(local_rank: int | None = None) -> None:
    """Fill in what the DeepSpeed launcher sets, so ``python -m kplm.training.pretrain`` runs as one rank.

    On CPU: selects DeepSpeed's CPU accelerator and gives each local rank its share of the cores
    (``OMP_NUM_THREADS``) unless the user set it.
    """
    if local_rank is not None and "LOCAL_RANK" not in os.environ:
        os.environ["LOCAL_RANK"] = str(local_rank)
    if "RANK" not in os.environ:
        os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"})
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
    if not has_gpu():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        import torch

        local = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("LOCAL_SIZE") or 0)
        if not local:
            local = int(os.environ.get("WORLD_SIZE", "1"))
        threads = max(1, (os.cpu_count() or 1) // max(1, local))
        if "OMP_NUM_THREADS" not in os.environ:
            os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def init_distributed() -> None:
    """``deepspeed.init_distributed()``, then drop the name of this rank's CPU shared-memory segment.

    On CPU with every rank on one machine, DeepSpeed's shm all-reduce creates a 67 MB POSIX shared-memory
    segment per rank (``/dev/shm/deepspeed_allreduce_buffer_<uid>_<addr>_<port>_<rank>``) and never unlinks
    it, so every run on a new port leaves RAM behind until reboot (320 runs here held 20 GB). Once all ranks
    have mapped each other's segments (the barrier), the names are not needed: unlinking keeps the mappings
    working and the kernel frees the memory when the last rank exits, even when killed.
    """
    import deepspeed
    import torch.distributed as dist

    deepspeed.init_distributed()
    if has_gpu():
        return
    dist.barrier()
    Path(shm_segment_path(dist.get_rank())).unlink(missing_ok=True)


def shm_segment_path(rank: int) -> str:
    """Where DeepSpeed's CPU all-reduce keeps ``rank``'s shared-memory segment for this job's master
    address and port (see ``deepspeed/ops/csrc/cpu/comm/shm.cpp``)."""
    addr, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    return f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_{addr}_{port}_{rank}"


def deepspeed_config(config: PretrainConfig, on_gpu: bool) -> dict[str, Any]:
    """The DeepSpeed JSON for ``config``, with ``config.deepspeed_config`` merged over it (user keys win)."""
    if config.precision == "fp16" and not on_gpu:
        raise KplmError("precision: fp16 needs a GPU; use fp32 or bf16 on CPU")
    zero: dict[str, Any] = {"stage": config.zero_stage}
    if config.zero_stage >= 2:
        zero.update(contiguous_gradients=True, overlap_comm=on_gpu)
    if config.zero_stage == 3:
        zero.update(stage3_gather_16bit_weights_on_model_save=False)
    generated: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": config.micro_batch_size,
        "gradient_accumulation_steps": config.grad_accum,
        "gradient_clipping": config.grad_clip,
        "zero_optimization": zero,
        "bf16": {"enabled": config.precision == "bf16"},
        "fp16": {"enabled": config.precision == "fp16", "loss_scale": 0, "initial_scale_power": 16},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }
    if config.deepspeed_config is None:
        return generated
    path = Path(config.deepspeed_config)
    if not path.is_file():
        raise KplmError(f"deepspeed_config: file not found: {path}")
    try:
        user = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise KplmError(f"deepspeed_config: {path} is not valid JSON ({e})") from None
    if not isinstance(user, dict):
        raise KplmError(f"deepspeed_config: {path} must hold a JSON object")
    return _merge(generated, user)


def initialize(config: PretrainConfig, model: Any, ds_config: dict[str, Any], on_gpu: bool) -> Any:
    """``deepspeed.initialize`` with a torch AdamW (no decay on biases/norms; fused on GPU, never
    DeepSpeed's compiled CPU Adam) and the warm-up/decay schedule, unless ``ds_config`` defines its own
    ``optimizer`` / ``scheduler``. Returns the engine."""
    import deepspeed
    import torch

    from kplm.training.model import param_groups

    groups = param_groups(model, config.weight_decay)
    optimizer = None
    if "optimizer" not in ds_config:
        optimizer = torch.optim.AdamW(
            groups,
            lr=config.lr,
            betas=(config.adam_beta1, config.adam_beta2),
            eps=config.adam_eps,
            **({"fused": True} if on_gpu else {}),
        )
    scheduler = None
    if "scheduler" not in ds_config:
        factor = lr_lambda(config)

        def scheduler(opt: Any) -> Any:
            return torch.optim.lr_scheduler.LambdaLR(opt, factor)

    engine, _, _, _ = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        model_parameters=groups if optimizer is None else None,
        lr_scheduler=scheduler,
        config=ds_config,
    )
    return engine


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def lr_lambda(config: PretrainConfig) -> Callable[[int], float]:
    """Multiplier of the peak LR after ``n`` optimizer steps: linear warm-up, then linear or cosine to 0."""
    warmup, total, cosine = config.warmup_steps, config.max_steps, config.schedule == "cosine"

    def factor(n: int) -> float:
        if n < warmup:
            return (n + 1) / (warmup + 1)
        progress = min(1.0, (n - warmup) / max(1, total - warmup))
        return 0.5 * (1.0 + math.cos(math.pi * progress)) if cosine else 1.0 - progress

    return factor


def full_fp32_state_dict(engine: Any, module: Any, is_main: bool) -> dict[str, Any]:
    """The full fp32 weights of ``module`` (the trained masked LM), on CPU, for rank 0; a collective call.

    Parameters come from the fp32 master copies: under ZeRO 1-3 through DeepSpeed's
    ``safe_get_full_fp32_param`` (which gathers partitions across ranks, so every rank must call this),
    with ZeRO 0 in bf16/fp16 from the mixed-precision optimizer's fp32 groups, otherwise the weights
    themselves. Tied weights appear once (as ``named_parameters`` lists them); persistent buffers follow.
    """
    import deepspeed
    from deepspeed.utils import safe_get_full_fp32_param

    masters = _unfused_masters(engine)
    state: dict[str, Any] = {}
    for name, param in module.named_parameters():
        full = safe_get_full_fp32_param(param)
        if full is None and hasattr(param, "ds_id"):
            with deepspeed.zero.GatheredParameters([param], modifier_rank=None):
                full = param.data.detach().clone()
        if full is None:
            full = masters.get(id(param), param.data)
        if is_main:
            state[name] = full.detach().float().cpu().contiguous().clone()
    if is_main:
        for name, buf in module.named_buffers():
            owner, _, leaf = name.rpartition(".")
            sub = module.get_submodule(owner) if owner else module
            if leaf not in sub._non_persistent_buffers_set and name not in state:
                state[name] = buf.detach().cpu().clone()
    return state


def _unfused_masters(engine: Any) -> dict[int, Any]:
    """param id → fp32 master copy for DeepSpeed's ZeRO-0 mixed-precision optimizer (empty otherwise)."""
    optimizer = getattr(engine, "optimizer", None)
    low, high = getattr(optimizer, "fp16_groups", None), getattr(optimizer, "fp32_groups", None)
    if not low or not high:
        return {}
    return {id(p): m for lp, hp in zip(low, high, strict=False) for p, m in zip(lp, hp, strict=False)}
