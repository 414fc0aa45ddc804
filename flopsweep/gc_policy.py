"""When Python's garbage collector runs during a run: torchtitan's convention, as a context.

Python's automatic collection starts whenever enough objects were allocated since the last one,
so it falls inside optimizer steps at random: a host-bound step (DeepSpeed ZeRO-3's per-parameter
hooks, small models in eager mode) pays a pause of milliseconds to tens of milliseconds at some
steps and not at others, and the ranks of a job stall on the slowest. torchtitan therefore turns
the automatic collection off and collects generation 1 every ``training.gc_freq`` steps (default
50; ``torchtitan/tools/utils.py`` ``GarbageCollection``). ``steps.gc_freq=N`` does the same here;
0, the default, leaves Python's automatic collection on, as every record before the key ran. Measured
on the CPU (session 26): 40 steps of a one-rank ZeRO-3 gpt-tiny saw 4 generation-0 collections,
0.3 ms in all; on one H100, ZeRO-3 gpt-1.3b: 360 collections, 58-70 ms over 40 steps of 370-530 ms
(0.3-0.4%), so the default stays (``benchmarks/results/h100/session26/gc_steps.jsonl``).
"""

from __future__ import annotations

import gc
from types import TracebackType


class GarbageCollection:
    """Collect every ``every`` optimizer steps instead of automatically (``every`` > 0), counting
    the steps of the whole run (warm-up and measured), or leave Python's collector as it is
    (``every`` == 0).

    Entering turns automatic collection off and collects generations 0 and 1 once (what the
    model's build left); leaving turns it back on if it was on. Raises ValueError for ``every`` < 0.
    """

    def __init__(self, every: int) -> None:
        if every < 0:
            raise ValueError(f"steps.gc_freq={every}: must be >= 0. Fix: set steps.gc_freq=50 (or 0)")
        self.every = every
        self.steps = 0
        self.collections = 0
        self._was_enabled = gc.isenabled()

    def __enter__(self) -> GarbageCollection:
        self._was_enabled = gc.isenabled()
        if self.every:
            gc.disable()
            gc.collect(1)
        return self

    def step_done(self) -> None:
        """Count one optimizer step; collect generation 1 at every ``every``-th."""
        self.steps += 1
        if self.every and self.steps % self.every == 0:
            gc.collect(1)
            self.collections += 1

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.every and self._was_enabled:
            gc.enable()
