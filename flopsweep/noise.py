"""Noise in a measurement: when a run's own figures or its host say that its timing is not to be
trusted as it stands. Torch-free: the job writes these warnings into the record, and the analysis
flags the same runs from the record's figures (also for records written before the warnings).

Two findings:

- ``noisy_steps``: the coefficient of variation (std / mean) of the measured step times is over
  :data:`NOISY_CV` (5%). A steady GPU step varies well under 1%; a difference of a few percent
  between set-ups cannot be read from steps that vary more than that.
- ``host_load``: the host's load average leaves the run fewer idle cores than it needs. The run
  needs one core per rank on the host (a GPU rank's host thread launches its kernels; a CPU rank
  computes on at least one). The 1-minute load at the job's start, before its ranks run, is the
  other tenants' load; at the end it includes the run's own ranks. Either over the host's cores
  (``os.cpu_count()``) means that runnable threads waited for a core during the window.
"""

from __future__ import annotations

import math

NOISY_CV = 0.05
"""The step coefficient of variation over which a run is ``noisy_steps`` (flag ``noisy``)."""

NOISE_KINDS = ("noisy_steps", "host_load")
"""The prefixes of the noise warnings (``<kind>: ...``)."""


def _number(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def noisy(cv: object) -> bool:
    """Whether a step coefficient of variation is over :data:`NOISY_CV` (False when unknown)."""
    value = _number(cv)
    return value is not None and value > NOISY_CV


def overloaded(load_start: object, load_end: object, cpu_count: object, ranks: object) -> bool:
    """Whether the host lacked idle cores for the run: the 1-minute load at the start (other
    tenants) plus ``ranks`` over ``cpu_count``, or the load at the end (the run included) over
    ``cpu_count``. False when the core count or both loads are unknown."""
    cores, start, end, need = _number(cpu_count), _number(load_start), _number(load_end), _number(ranks)
    if cores is None or cores <= 0:
        return False
    return (start is not None and start + (need or 1) > cores) or (end is not None and end > cores)


def noise_warnings(
    *, cv: object, load_start: object, load_end: object, cpu_count: object, ranks: object
) -> list[str]:
    """The record's noise warnings (:data:`NOISE_KINDS`), each one line with its figures."""
    out = []
    if noisy(cv):
        out.append(
            f"noisy_steps: the measured step times vary by {float(cv):.1%} (coefficient of variation, over "
            f"{NOISY_CV:.0%}): differences of that size between set-ups cannot be told apart; "
            "measure with repeats=, on a quiet machine"
        )
    if overloaded(load_start, load_end, cpu_count, ranks):
        out.append(
            f"host_load: the host's 1-minute load average was {load_start} at the start and {load_end} at "
            f"the end, on {cpu_count} cores for {ranks} rank(s) needing a core each: the run competed for "
            "cores, its step times are high (its throughput low) by an unknown amount"
        )
    return out
