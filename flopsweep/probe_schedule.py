"""How a probe steps a copy of the run until its time is steady, torch-free: the schedule of the layer
probe's shallow copies (:mod:`flopsweep.layer_probe`) and of the CPU probe's (:mod:`flopsweep.cpu_probe`,
a shorter :class:`Steps`).

A copy's first step is never timed (:data:`MIN_UNTIMED`: compilation, the allocator's first blocks); it
stops once its last :data:`SETTLE_STEPS` steps agree on every rank, the slowest at most
``1 + predict.layer_probe_settle`` times the fastest and not still falling (:func:`settled`), and their
median is its time; a copy that does not settle runs :data:`WARMUP_STEPS` + :data:`MEASURED_STEPS`
steps and times the last :data:`MEASURED_STEPS`, as every copy did before the early stop, and more, up
to :data:`MAX_MEASURED_STEPS` timed, while the median's standard error on some rank is over
:data:`STEADY_ERROR` of it (:func:`median_error`; the ranks agree after each step): a copy's slope is
multiplied by ``(n_layer - L1) / L1`` in the layer probe's prediction, so noisy copies (DeepSpeed's
host-bound ones, a loaded host) are timed longer, steady ones shorter. :func:`schedule` runs it; the
ranks' agreement is the caller's (one small all-reduce after a step, outside its timing).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable

WARMUP_STEPS = 2
"""Untimed steps of a shallow copy that did not settle early (compilation, the allocator, DeepSpeed's
first step); with ``predict.layer_probe_settle=0``, of every copy."""
MEASURED_STEPS = 5
"""Timed steps of a shallow copy that did not settle early; the median is kept."""
MIN_UNTIMED = 1
"""Steps of every copy that are never timed (the first: compilation, the allocator's first blocks)."""
SETTLE_STEPS = 3
"""The fewest timed steps of a copy: the early stop takes the last this many once they agree
(:func:`settled`)."""
MAX_MEASURED_STEPS = 15
"""Timed steps of each shallow copy at most (module docstring)."""
STEADY_ERROR = 0.01
"""A copy is timed until its median's standard error (:func:`median_error`) is within this share of
the median on every rank, or :data:`MAX_MEASURED_STEPS` were timed."""


@dataclasses.dataclass(frozen=True)
class Steps:
    """A copy's steps when it does not settle early (:func:`schedule`): ``warmup`` untimed, then
    ``measured`` timed, and more while its median is unsteady, up to ``most`` timed; with ``budget_s``, it
    stops once its steps after the first (untimed) took that many seconds on some rank, 2 of them at least."""

    warmup: int = WARMUP_STEPS
    measured: int = MEASURED_STEPS
    most: int = MAX_MEASURED_STEPS
    budget_s: float | None = None


LAYER_STEPS = Steps()
"""``predict.layer_probe``'s schedule (the constants above); :mod:`flopsweep.cpu_probe` has a shorter one."""


def median_error(times: list[float]) -> float:
    """The standard error of the median of ``times`` over the median: ``1.2533 x 1.4826 x MAD /
    sqrt(n) / median`` (the median absolute deviation scaled to a normal sample's standard
    deviation, times the median's large-sample efficiency factor ``sqrt(pi / 2)``); ``inf`` for fewer
    than 3 times or a median of 0."""
    if len(times) < 3:
        return float("inf")
    median = statistics.median(times)
    if median <= 0:
        return float("inf")
    mad = statistics.median(abs(t - median) for t in times)
    return 1.2533 * 1.4826 * mad / len(times) ** 0.5 / median


def settled(times: list[float], settle: float) -> bool:
    """Whether the last :data:`SETTLE_STEPS` of a copy's steps (s, in order) agree: the slowest is at
    most ``1 + settle`` times the fastest (``predict.layer_probe_settle``; 0: never, the early stop
    is off), and they are not each faster than the one before (a copy still warming up can fall by
    less than ``settle`` a step: gpt-1.3b's ZeRO-3 steps fell from 0.52 to 0.385 s on one H200).
    Fewer steps than that never agree."""
    window = times[-SETTLE_STEPS:]
    if settle <= 0 or len(window) < SETTLE_STEPS or min(window) <= 0:
        return False
    falling = all(later < earlier for earlier, later in zip(window, window[1:], strict=False))
    return not falling and max(window) <= (1 + settle) * min(window)


def schedule(
    step: Callable[[], tuple[float, float]],
    settle: float,
    agree: Callable[[bool], bool] = bool,
    noisy: Callable[[list[float]], bool] = lambda timed: False,
    steps: Steps = LAYER_STEPS,
    spent: Callable[[bool], bool] = bool,
) -> tuple[list[float], list[float], int]:
    """Step a copy as the probe does (module docstring): ``step()`` runs one step and returns
    its seconds and its host's issue seconds; ``agree(mine)`` says whether every rank's copy settled
    (:func:`settled` on this rank's steps after the first; the ranks must call it together);
    ``noisy(timed)`` whether a copy that did not settle is to be timed on (its :func:`median_error` over
    :data:`STEADY_ERROR` on some rank; together too);
    ``steps`` the schedule of a copy that does not settle (:class:`Steps`, the constants below by default);
    ``spent(mine)`` whether some rank's steps took ``steps.budget_s`` (called only with a budget).

    Returns:
        ``(times, hosts, first)``: every step's seconds and host seconds, in order, and the index of
        the first timed step: ``len(times) - 3`` when the copy stopped early (:data:`SETTLE_STEPS`),
        else :data:`WARMUP_STEPS` of ``WARMUP_STEPS + MEASURED_STEPS`` steps run, or more, up to
        ``WARMUP_STEPS + MAX_MEASURED_STEPS``, while ``noisy`` says so.
    """
    times: list[float] = []
    hosts: list[float] = []
    most = steps.warmup + steps.measured
    while True:
        seconds, host = step()
        times.append(seconds)
        hosts.append(host)
        if steps.budget_s is not None and len(times) >= MIN_UNTIMED + 2:
            if spent(sum(times[MIN_UNTIMED:]) >= steps.budget_s):
                return times, hosts, MIN_UNTIMED
        if settle > 0 and MIN_UNTIMED + SETTLE_STEPS <= len(times) < most:
            if agree(settled(times[MIN_UNTIMED:], settle)):
                return times, hosts, len(times) - SETTLE_STEPS
        if len(times) >= most and (
            len(times) >= steps.warmup + steps.most or not noisy(times[steps.warmup :])
        ):
            return times, hosts, steps.warmup
