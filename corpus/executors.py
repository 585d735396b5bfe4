"""Where the cleaning stage's datatrove pipelines run: this machine, a Slurm cluster or a Ray cluster.

The stage is a chain of datatrove pipelines (per-rank steps, then global duplicate-finding steps, then per-rank
filter steps, see :func:`kplm.corpus.clean.plan_stages`). :class:`ExecutorSettings` (part of the ``corpus:``
config) picks how the same chain runs:

- ``local``: one pipeline after the other, ``workers`` processes each, on one process pool kept for the whole
  chain (:class:`~kplm.corpus.local_chain.LocalChain`, datatrove's per-rank machinery);
- ``ray``: datatrove's ``RayPipelineExecutor``, one pipeline after the other on a Ray cluster (``ray_address``)
  or a Ray instance started on this machine; a pipeline with failed ranks stops the chain with a clear error;
- ``slurm``: datatrove's ``SlurmPipelineExecutor``, one job array per pipeline, each depending (``afterok``)
  on the one before; the last job writes the report and the record. Submission returns at once: run the same
  command again after the jobs finished and it returns the finished counts (or resubmits the unfinished ranks).

Every executor uses datatrove's completion markers in ``<work>/logs/<pipeline>/completions``, so a rerun only
runs the ranks that did not finish. With Slurm or Ray the output and work folders must be on a file system that
every node sees.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kplm.corpus.local_chain import LocalChain
from kplm.errors import KplmError

_SLURM_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
_SBATCH_ARG = re.compile(r"^[a-z][a-z0-9-]*(=.+)?$")


@dataclass(kw_only=True)
class ExecutorSettings:
    """How the stage's pipelines are executed (fields shared by every executor, then per executor)."""

    executor: Literal["local", "slurm", "ray"] = field(
        default="local",
        metadata={"help": "where the pipelines run: local processes, Slurm job arrays or a Ray cluster"},
    )
    tasks: int = field(
        default=1, metadata={"help": "number of shards (ranks) the input files are split into"}
    )
    workers: int = field(
        default=0,
        metadata={
            "help": "ranks run at the same time (local: processes, 0 = 1; slurm/ray: concurrent tasks, "
            "0 = no limit)"
        },
    )
    slurm_partition: str = field(default="", metadata={"help": "slurm: partition (required for slurm)"})
    slurm_time: str = field(
        default="24:00:00", metadata={"help": "slurm: time limit per job ([D-]HH:MM:SS or minutes)"}
    )
    slurm_cpus_per_task: int = field(default=1, metadata={"help": "slurm: CPUs per task"})
    slurm_mem_per_cpu_gb: int = field(default=2, metadata={"help": "slurm: memory per CPU in GB"})
    slurm_job_name: str = field(
        default="kplm-corpus", metadata={"help": "slurm: job name prefix (each pipeline adds its name)"}
    )
    slurm_qos: str = field(
        default="", metadata={"help": "slurm: quality of service (empty = cluster default)"}
    )
    slurm_sbatch_args: list[str] = field(
        default_factory=list,
        metadata={"help": "slurm: extra sbatch options as key=value or key (e.g. account=nlp, exclusive)"},
    )
    slurm_env_command: str = field(
        default="",
        metadata={
            "help": "slurm: shell command that activates the Python environment in a job (empty = source "
            "this interpreter's virtual environment, if any)"
        },
    )
    ray_address: str = field(
        default="",
        metadata={"help": "ray: cluster address (e.g. auto); empty = start a Ray instance on this machine"},
    )
    ray_cpus_per_task: int = field(default=1, metadata={"help": "ray: CPUs reserved per task"})
    ray_mem_per_cpu_gb: float = field(default=2.0, metadata={"help": "ray: memory reserved per CPU in GB"})

    def __post_init__(self) -> None:
        for name in ("tasks", "slurm_cpus_per_task", "slurm_mem_per_cpu_gb", "ray_cpus_per_task"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}")
        if self.workers < 0:
            raise ValueError(f"workers: must be 0 (default) or positive, got {self.workers}")
        if self.ray_mem_per_cpu_gb <= 0:
            raise ValueError(f"ray_mem_per_cpu_gb: must be positive, got {self.ray_mem_per_cpu_gb}")
        if self.executor == "slurm" and not self.slurm_partition:
            raise ValueError("slurm_partition: required with executor: slurm")
        if not _SLURM_TIME.match(self.slurm_time):
            raise ValueError(f"slurm_time: expected [D-]HH:MM:SS or minutes, got {self.slurm_time!r}")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.slurm_job_name):
            raise ValueError(
                f"slurm_job_name: only letters, digits, '_', '.', '-', got {self.slurm_job_name!r}"
            )
        for arg in self.slurm_sbatch_args:
            if not _SBATCH_ARG.match(arg.lstrip("-")):
                raise ValueError(
                    f"slurm_sbatch_args: expected key=value or key (e.g. account=nlp), got {arg!r}"
                )


def sbatch_args(settings: ExecutorSettings) -> dict[str, str]:
    """``slurm_sbatch_args`` as datatrove's ``sbatch_args`` mapping (``exclusive`` → ``{"exclusive": ""}``)."""
    pairs = (arg.lstrip("-").partition("=") for arg in settings.slurm_sbatch_args)
    return {key: value for key, _, value in pairs}


def env_command(settings: ExecutorSettings) -> str:
    """The command a Slurm job runs first to get kplm's Python environment."""
    if settings.slurm_env_command:
        return settings.slurm_env_command
    if sys.prefix != sys.base_prefix:  # running inside a virtual environment: activate the same one
        return f"source {shlex.quote(str(Path(sys.prefix) / 'bin' / 'activate'))}"
    return f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:$PATH"


def _cache_loguru_lib_dirs() -> None:
    """Datatrove adds a loguru handler for every rank it runs, and loguru recomputes the interpreter's library
    folders (~40 ``sysconfig.get_path`` calls, ~15 ms) for every handler it adds: cache that pure function once
    per process (a private loguru helper; skipped when it is not there)."""
    try:
        from loguru._better_exceptions import ExceptionFormatter
    except ImportError:
        return
    lib_dirs = getattr(ExceptionFormatter, "_get_lib_dirs", None)
    if callable(lib_dirs) and not hasattr(lib_dirs, "cache_info"):
        ExceptionFormatter._get_lib_dirs = staticmethod(functools.cache(lib_dirs))


_cache_loguru_lib_dirs()


def run_chain(
    stages: list[tuple[str, list, int]],
    logs: Path,
    settings: ExecutorSettings,
    *,
    what: str = "corpus cleaning",
) -> dict[str, Any] | None:
    """Run the pipelines ``(name, steps, tasks)`` in order with the configured executor.

    Local and Ray runs return None when every pipeline finished; a Slurm run submits the chain and returns
    ``{"status": "submitted", "jobs": {pipeline: job id}}`` (job id -1: already complete, nothing submitted).
    """
    if settings.executor == "slurm":
        return submit_slurm(stages, logs, settings)
    if settings.executor == "ray":
        with ray_session(settings, logs):
            for name, pipeline, tasks in stages:
                workers = min(concurrency(settings, tasks), tasks)
                run_ray(pipeline, logs / name, tasks=tasks, workers=workers, settings=settings, what=what)
        return None
    most = max((min(concurrency(settings, tasks), tasks) for _, _, tasks in stages), default=1)
    with LocalChain(most) as chain:
        for name, pipeline, tasks in stages:
            run_logged(
                chain, pipeline, logs / name, tasks=tasks, workers=concurrency(settings, tasks), what=what
            )
    return None


def concurrency(settings: ExecutorSettings, tasks: int) -> int:
    """Ranks of a pipeline of ``tasks`` ranks to run at the same time (``workers``; 0 = 1 process locally,
    all of them on a cluster)."""
    if settings.workers:
        return min(settings.workers, tasks)
    return 1 if settings.executor == "local" else tasks


def run_executor(
    pipeline: list, logging_dir: Path, *, tasks: int, workers: int, what: str = "corpus cleaning"
) -> None:
    """Run one datatrove pipeline on this machine with ``workers`` processes, its logs kept in ``logging_dir``."""
    with LocalChain(max(1, workers)) as chain:
        run_logged(chain, pipeline, logging_dir, tasks=tasks, workers=workers, what=what)


def run_logged(
    chain: LocalChain, pipeline: list, logging_dir: Path, *, tasks: int, workers: int, what: str
) -> None:
    """``chain.run`` with datatrove's stderr output in ``logging_dir/executor.log`` (pool processes started
    here keep writing to this first log) and a rank's failure raised as a :class:`KplmError` naming the logs."""
    logging_dir.mkdir(parents=True, exist_ok=True)
    try:
        with stderr_to(logging_dir / "executor.log"):
            chain.run(pipeline, logging_dir, tasks=tasks, workers=workers)
    except KplmError:
        raise
    except Exception as e:  # the traceback is in the rank's task log
        raise KplmError(f"{what} failed ({type(e).__name__}: {e}); see {logging_dir}/logs") from e


def ray_executor(
    pipeline: list, logging_dir: Path, *, tasks: int, workers: int, settings: ExecutorSettings
) -> Any:
    """Datatrove's RayPipelineExecutor for one pipeline of the chain."""
    from datatrove.executor import RayPipelineExecutor

    return RayPipelineExecutor(
        pipeline=pipeline,
        tasks=tasks,
        workers=workers,
        logging_dir=str(logging_dir),
        cpus_per_task=settings.ray_cpus_per_task,
        mem_per_cpu_gb=settings.ray_mem_per_cpu_gb,
    )


@contextlib.contextmanager
def ray_session(settings: ExecutorSettings, logs: Path) -> Iterator[None]:
    """Connect to the Ray cluster (``ray_address``) or start a Ray instance here, for the whole chain."""
    try:
        import ray
    except ImportError:
        raise KplmError("executor: ray needs the ray package (pip install ray)") from None
    if ray.is_initialized():  # the caller set Ray up: use it as it is
        yield
        return
    logs.mkdir(parents=True, exist_ok=True)
    with stderr_to(logs / "ray.log"):
        try:
            ray.init(
                address=settings.ray_address or None,
                num_cpus=None if settings.ray_address else _local_ray_cpus(settings),
                include_dashboard=False,
                log_to_driver=False,
            )
        except Exception as e:
            raise KplmError(f"executor: ray: cannot start or reach Ray ({type(e).__name__}: {e})") from e
    try:
        yield
    finally:
        ray.shutdown()


def _local_ray_cpus(settings: ExecutorSettings) -> int:
    """CPUs of a Ray instance started here: ``workers`` tasks' worth, else all of this machine's."""
    if settings.workers:
        return settings.workers * settings.ray_cpus_per_task
    return os.cpu_count() or 1


def run_ray(
    pipeline: list,
    logging_dir: Path,
    *,
    tasks: int,
    workers: int,
    settings: ExecutorSettings,
    what: str = "corpus cleaning",
) -> None:
    """Run one pipeline on Ray (inside :func:`ray_session`) and check every rank finished: datatrove's Ray
    executor only logs failed tasks."""
    executor = ray_executor(pipeline, logging_dir, tasks=tasks, workers=workers, settings=settings)
    logging_dir.mkdir(parents=True, exist_ok=True)
    try:
        with stderr_to(logging_dir / "executor.log"):
            executor.run()
    except Exception as e:
        raise KplmError(f"{what} failed on Ray ({type(e).__name__}: {e}); see {logging_dir}") from e
    missing = executor.get_incomplete_ranks(range(tasks))
    if missing:
        raise KplmError(
            f"{what} failed on Ray: ranks {missing} of {logging_dir.name} did not finish; see {logging_dir}/logs"
        )


def slurm_executors(stages: list[tuple[str, list, int]], logs: Path, settings: ExecutorSettings) -> list[Any]:
    """One datatrove SlurmPipelineExecutor per pipeline, each depending on the one before."""
    from datatrove.executor import SlurmPipelineExecutor

    executors: list[Any] = []
    for name, pipeline, tasks in stages:
        executors.append(
            SlurmPipelineExecutor(
                pipeline=pipeline,
                tasks=tasks,
                workers=min(settings.workers, tasks) if settings.workers else -1,  # -1: no limit
                time=settings.slurm_time,
                partition=settings.slurm_partition,
                cpus_per_task=settings.slurm_cpus_per_task,
                mem_per_cpu_gb=settings.slurm_mem_per_cpu_gb,
                job_name=f"{settings.slurm_job_name}-{name}",
                qos=settings.slurm_qos,
                env_command=env_command(settings),
                sbatch_args=sbatch_args(settings),
                depends=executors[-1] if executors else None,
                logging_dir=str(logs / name),
                slurm_logs_folder=str(logs / name / "slurm_logs"),
                mail_user=None,
                with_srun=False,  # one node per task: the array task runs the pipeline directly
            )
        )
    return executors


def submit_slurm(
    stages: list[tuple[str, list, int]], logs: Path, settings: ExecutorSettings
) -> dict[str, Any]:
    """Submit the chain of job arrays (the last one launches its dependencies first).

    The job ids are kept in ``<logs>/slurm_jobs.json``; while ``squeue`` still lists any of them, a rerun
    returns ``{"status": "running", ...}`` instead of submitting the unfinished ranks a second time."""
    marker = logs / "slurm_jobs.json"
    if marker.exists():
        jobs = json.loads(marker.read_text(encoding="utf-8"))
        active = slurm_active([job for job in jobs.values() if job != "-1"])
        if active:
            return {"status": "running", "jobs": jobs, "active": active, "logs": str(logs)}
    executors = slurm_executors(stages, logs, settings)
    logs.mkdir(parents=True, exist_ok=True)
    try:
        with stderr_to(logs / "submit.log"):
            executors[-1].run()
    except FileNotFoundError as e:
        raise KplmError(f"executor: slurm: '{e.filename}' not found (is this a Slurm login node?)") from None
    except Exception as e:  # sbatch refused the job: its message is in the exception
        raise KplmError(
            f"executor: slurm: submission failed ({type(e).__name__}: {e}); see {logs}/submit.log"
        ) from e
    jobs = {name: str(executor.job_id) for (name, _, _), executor in zip(stages, executors, strict=True)}
    marker.write_text(json.dumps(jobs, indent=1), encoding="utf-8")
    return {"status": "submitted", "jobs": jobs, "logs": str(logs)}


def slurm_active(job_ids: list[str]) -> list[str]:
    """The jobs (array tasks) among ``job_ids`` that Slurm still has queued or running."""
    if not job_ids:
        return []
    try:
        result = subprocess.run(
            ["squeue", "--noheader", "--format=%i", f"--jobs={','.join(job_ids)}"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        raise KplmError("executor: slurm: 'squeue' not found (is this a Slurm login node?)") from None
    # squeue exits non-zero for job ids it no longer knows: those jobs are over
    return result.stdout.split() if result.returncode == 0 else []


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Send file descriptor 2 (this process and the worker processes it starts) to ``path``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("a") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
