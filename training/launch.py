"""Start a pretraining run on this machine under the DeepSpeed launcher (what ``kplm run`` calls).

The launcher runs the installed module ``kplm.training.pretrain`` (``deepspeed --module``), so this works
from any folder, without the repository's ``launch/`` scripts. Multi-node runs are started by hand or by a
scheduler instead: see ``launch/hostfile.example`` and ``launch/slurm_pretrain.sbatch``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from kplm.errors import KplmError


def deepspeed_command() -> list[str]:
    """The ``deepspeed`` launcher of this Python environment."""
    beside = Path(sys.executable).with_name("deepspeed")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("deepspeed")
    if found:
        return [found]
    return [sys.executable, "-c", "from deepspeed.launcher.runner import main; main()"]


def launch_pretraining(config_path: Path, nproc: int) -> None:
    """Run ``deepspeed --num_gpus nproc --module kplm.training.pretrain --config config_path``.

    The config is validated here first (errors name the field, nothing is started); a run whose output
    is already complete for the same settings and inputs is skipped. On CPU each of the ``nproc`` ranks
    gets ``cpu_count // nproc`` threads unless ``OMP_NUM_THREADS`` is set. Raises :class:`KplmError`
    when the launcher or any rank fails.
    """
    from kplm.records import is_complete
    from kplm.training.checkpoint import CHECKPOINTS
    from kplm.training.checks import check_inputs, check_resumable, run_fingerprint
    from kplm.training.config import load_pretrain_config
    from kplm.training.engine import free_port, has_gpu

    config_path = Path(config_path)
    if nproc < 1:
        raise KplmError(f"nproc: must be at least 1, got {nproc}")
    config = load_pretrain_config(config_path)
    check_inputs(config)
    check_resumable(config, Path(config.output) / CHECKPOINTS)
    if is_complete(Path(config.output), run_fingerprint(config)):
        print(f"[kplm] pretraining in {config.output} is already complete; skipped", flush=True)
        return
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if not has_gpu():
        env.setdefault("DS_ACCELERATOR", "cpu")
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
        env["LOCAL_WORLD_SIZE"] = str(nproc)
    command = [
        *deepspeed_command(),
        "--num_gpus",
        str(nproc),
        "--master_port",
        str(free_port()),
        "--module",
        "kplm.training.pretrain",
        "--config",
        str(config_path.resolve()),
    ]
    print(f"[kplm] {shlex.join(command)}", flush=True)
    try:
        result = subprocess.run(command, env=env, check=False)
    except OSError as e:
        raise KplmError(f"cannot start the deepspeed launcher ({e})") from None
    if result.returncode in (128 + 2, 128 + 15):
        raise KplmError(
            f"pretraining stopped by a signal (status {result.returncode}) after checkpointing the current "
            f"step; run the same command again to resume (config {config_path})"
        )
    if result.returncode != 0:
        raise KplmError(
            f"pretraining failed: deepspeed exited with status {result.returncode} "
            f"(config {config_path}; the ranks' output above shows the cause)"
        )
