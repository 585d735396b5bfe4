"""The local executor for a chain of datatrove pipelines: one worker pool for the whole chain, main included.

datatrove's ``LocalPipelineExecutor`` starts a Manager and a new process pool for every pipeline and its main
process only waits. The cleaning stage is a chain of short pipelines, and on a small machine that serial part
(the forkserver importing datatrove, pyarrow and kplm, ~1.4 s, then a pool per pipeline) is what kept two
processes from running twice as fast as one. :class:`LocalChain` keeps one pool of ``workers - 1`` processes
and one Manager for every pipeline of the chain, and the main process takes ranks from the same queue as the
pool, so it is already working on the first rank while the pool starts.

Each rank still runs through datatrove's ``_run_for_rank`` on a fresh copy of the pipeline, with datatrove's
task logs, per-rank stats and completion markers, so outputs, resume and ``stats.json`` are what datatrove's
executor gives (tested byte for byte).
"""

from __future__ import annotations

import copy
import os
import queue
from pathlib import Path
from typing import Any

from datatrove.executor import LocalPipelineExecutor
from datatrove.utils.stats import PipelineStats

from kplm.errors import KplmError

#: modules the forkserver imports once, so every pool process starts with them loaded
PRELOAD = ["kplm.corpus.clean"]


def _drain(executor: LocalPipelineExecutor, ranks: Any, local_rank: int) -> PipelineStats:
    """Run ranks taken from the shared ``ranks`` queue until it is empty; the summed stats of those ranks."""
    template = executor.pipeline
    stats = PipelineStats()
    while True:
        try:
            rank = ranks.get_nowait()
        except queue.Empty:
            return stats
        executor.pipeline = copy.deepcopy(template)  # steps keep per-rank state, as in datatrove's executor
        stats += executor._run_for_rank(rank, local_rank)


class LocalChain:
    """Run the pipelines of a chain one after the other on this machine with ``workers`` processes in all.

    Use as a context manager; the pool and the Manager start on the first pipeline that has more than one
    rank left to run and are shut down on exit.
    """

    def __init__(self, workers: int):
        if workers < 1:
            raise KplmError(f"workers: must be at least 1, got {workers}")
        self.workers = workers
        self._pool: Any = None
        self._manager: Any = None

    def __enter__(self) -> LocalChain:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.terminate()  # idle here unless a rank failed: then nothing is left worth waiting for
            self._pool.join()
        if self._manager is not None:
            self._manager.shutdown()
        self._pool = self._manager = None

    def start_workers(self) -> None:
        """Start the Manager and the pool of ``workers - 1`` processes (forked from a forkserver that has
        imported :data:`PRELOAD` once, unless ``KPLM_NO_FORKSERVER_PRELOAD`` is set); no-op once started."""
        if self.workers == 1 or self._pool is not None:
            return
        import multiprocess

        context = multiprocess.get_context("forkserver")
        if not os.environ.get("KPLM_NO_FORKSERVER_PRELOAD"):
            context.set_forkserver_preload(PRELOAD)
        self._manager = multiprocess.Manager()
        self._pool = context.Pool(self.workers - 1)

    def run(self, pipeline: list, logging_dir: Path, *, tasks: int, workers: int | None = None) -> None:
        """Run ``pipeline`` as ``tasks`` ranks (only those without a completion marker), at most ``workers``
        (default: all of the chain's) at a time; a rank's failure is raised here after the others stopped."""
        workers = min(workers or self.workers, self.workers)
        logging_dir.mkdir(parents=True, exist_ok=True)
        executor = LocalPipelineExecutor(
            pipeline=pipeline, tasks=tasks, workers=workers, logging_dir=str(logging_dir)
        )
        todo = executor.get_incomplete_ranks(range(tasks))
        if not todo:
            return
        executor.save_executor_as_json()
        helpers = min(workers, len(todo)) - 1
        if helpers > 0:
            self.start_workers()
            ranks = self._manager.Queue()
        else:
            ranks = queue.SimpleQueue()
        for rank in todo:
            ranks.put(rank)
        pending = [self._pool.apply_async(_drain, (executor, ranks, i + 1)) for i in range(helpers)]
        stats = _drain(copy.copy(executor), ranks, 0)
        for result in pending:
            stats += result.get()
        with executor.logging_dir.open("stats.json", "wt") as f:
            stats.save_to_disk(f)
