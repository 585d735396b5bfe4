"""Stop on SIGTERM/SIGINT at a step boundary with a checkpoint, agreed on by every rank.

Schedulers (Slurm's time limit, preemption) and the DeepSpeed launcher end runs with SIGTERM, users with
Ctrl-C. The handler only records the signal; at the end of every optimizer step the ranks take the MAX of
their records (one tiny all-reduce), so all of them see the stop at the same step even when the signal
reached only some ranks (the launcher signals its ranks one after another), save that step and exit.
"""

from __future__ import annotations

import os
import signal
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(Exception):
    """Training stopped on SIGTERM/SIGINT after a checkpoint of the current step was written."""

    def __init__(self, signum: int, step: int):
        super().__init__(f"stopped by {signal.Signals(signum).name} at step {step}")
        self.signum, self.step = signum, step

    @property
    def exit_status(self) -> int:
        """128 + the signal number, as a shell reports a process ended by that signal."""
        return 128 + self.signum


class StopRequest:
    """Records SIGTERM/SIGINT while installed; a second signal restores the default action and re-sends it."""

    def __init__(self) -> None:
        self.signum = 0
        self._old: dict[int, Any] = {}

    def install(self) -> None:
        self.signum = 0
        for sig in STOP_SIGNALS:
            self._old[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        self._old = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum:  # asked twice: stop now, without a checkpoint
            self.restore()
            os.kill(os.getpid(), signum)
            return
        self.signum = signum

    def agreed(self, device: Any) -> int:
        """The signal any rank has received (0: none); a collective call, made by all ranks every step."""
        import torch
        import torch.distributed as dist

        flag = torch.tensor([self.signum], dtype=torch.int64, device=device)
        if dist.is_initialized():
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        self.signum = self.signum or int(flag.item())
        return self.signum
