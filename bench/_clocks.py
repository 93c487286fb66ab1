"""Wall and CPU clocks for the first-call benchmarks (compile_time, fresh_process), and the garbage
collector's share of them.

On a machine shared by several jobs the wall clock of one process mostly measures the others; its
CPU time (time.process_time, every thread of the process) barely moves with their load. So each
timed part records both, and the garbage collector's own CPU time is metered apart (gc.callbacks):
a full collection walks every tracked object of the process (about 0.27 s once TorchAir's 145,000
objects join torch's 316,000), and where one falls is decided by allocation counts, not by the
code being timed.
"""
from __future__ import annotations

import gc
import time

perf = time.perf_counter
cpu = time.process_time


class GcMeter:
    """CPU seconds spent in the garbage collector, and full (generation 2) collections, since reset()."""

    def __init__(self):
        self._started = 0.0
        self.reset()
        gc.callbacks.append(self._callback)

    def reset(self) -> None:
        self.seconds, self.full = 0.0, 0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = cpu()
            return
        self.seconds += cpu() - self._started
        self.full += info.get("generation") == 2

    def close(self) -> None:
        gc.callbacks.remove(self._callback)


class Phases:
    """Inclusive wall and CPU seconds per named part (parts may nest; the caller subtracts)."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.frozen = False  # set after the first call: later calls are not timed

    def wrap(self, owner, name: str, key: str, first_only: bool = False) -> None:
        """Replace owner.name with a timed version adding to `key` (once only with first_only)."""
        original = getattr(owner, name)
        phases = self

        def timed(*args, **kwargs):
            if phases.frozen or (first_only and key in phases.wall):
                return original(*args, **kwargs)
            wall0, cpu0 = perf(), cpu()
            try:
                return original(*args, **kwargs)
            finally:
                phases.wall[key] = phases.wall.get(key, 0.0) + perf() - wall0
                phases.cpu[key] = phases.cpu.get(key, 0.0) + cpu() - cpu0

        setattr(owner, name, timed)

    def get(self, clock: str, key: str) -> float:
        return getattr(self, clock).get(key, 0.0)
