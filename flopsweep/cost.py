"""Energy per token, power, and what a token costs: the one place of their arithmetic.

Torch-free: :mod:`flopsweep.metrics` fills the record with these, :mod:`analysis.checks` checks a
record's figures against its raw fields with the same functions, and ``plan=true`` will price a
predicted rate with :func:`budget` once a prediction exists.

Units: energy in joules (J), power in watts (W), time in seconds, money in US dollars (USD).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
JOULES_PER_KWH = 3.6e6


def _all(values: Sequence[Any]) -> list[float] | None:
    """The values as floats, or None when any is missing (a sum over some ranks is no run's)."""
    if not values or any(v is None for v in values):
        return None
    return [float(v) for v in values]


def energy_figures(
    ranks: Sequence[dict[str, Any]], *, tokens: float, window_s: float, world: int
) -> dict[str, Any]:
    """The record's energy metrics from the ranks' :class:`flopsweep.energy.NvmlReader` figures.

    Args:
        ranks: one dict per rank with ``energy_j``, ``energy_sampled_j``, ``sm_clock_mhz_mean``,
            ``throttle_reasons`` and ``energy_reason`` (absent keys read as null).
        tokens: tokens trained in the measured window (tokens per step x measured steps).
        window_s: the measured window, seconds: the sum of the measured steps' times (each the
            slowest rank's), so that ``joules_per_token x tokens_per_s = power_w_mean x world``.
        world: the world size (GPUs).

    Returns:
        ``energy_j`` (J, sum over ranks), ``energy_sampled_j`` (J, the sampled power's integral,
        sum over ranks), ``joules_per_token`` (J), ``power_w_mean`` (W per GPU: energy over the
        window and the GPUs), ``sm_clock_mhz_mean`` (MHz, mean over ranks), ``throttle_reasons``
        (the names any rank saw, sorted), ``energy_reason`` (why ``energy_j`` is null: the first
        rank's reason; None when it is not). Nulls where any rank has none.
    """
    energy = _all([r.get("energy_j") for r in ranks])
    sampled = _all([r.get("energy_sampled_j") for r in ranks])
    clocks = _all([r.get("sm_clock_mhz_mean") for r in ranks])
    total = None if energy is None else sum(energy)
    seen = [r.get("throttle_reasons") for r in ranks]
    reason = next((r.get("energy_reason") for r in ranks if r.get("energy_reason")), None)
    return {
        "energy_j": total,
        "energy_sampled_j": None if sampled is None else sum(sampled),
        "joules_per_token": None if total is None or tokens <= 0 else total / tokens,
        "power_w_mean": None if total is None or window_s <= 0 else total / window_s / world,
        "sm_clock_mhz_mean": None if clocks is None else sum(clocks) / len(clocks),
        "throttle_reasons": None if None in seen else sorted({name for names in seen for name in names}),
        "energy_reason": None if total is not None else reason or "no rank reported its GPU energy",
    }


def power_limit_w(ranks: Sequence[dict[str, Any]]) -> float | None:
    """``system.power_limit_w``: the enforced power limit (W) of the ranks' GPUs, the lowest one
    when they differ; None when any rank has none (a CPU run)."""
    limits = _all([r.get("power_limit_w") for r in ranks])
    return None if limits is None else min(limits)


def usd_per_million_tokens(
    usd_per_gpu_hour: float | None, *, world: int, tokens_per_s: float
) -> float | None:
    """US dollars to train one million tokens at ``tokens_per_s`` (all ranks) on ``world`` GPUs
    rented at ``usd_per_gpu_hour`` each: ``price x world / 3600 / tokens_per_s x 1e6``. None
    without a price or a rate."""
    if usd_per_gpu_hour is None or not tokens_per_s or tokens_per_s <= 0:
        return None
    return usd_per_gpu_hour * world / SECONDS_PER_HOUR / tokens_per_s * 1e6


def budget(
    tokens: float | None,
    *,
    tokens_per_s: float,
    world: int,
    joules_per_token: float | None,
    usd_per_gpu_hour: float | None,
) -> dict[str, Any] | None:
    """What training ``tokens`` tokens costs at the measured rate (``metrics.budget``).

    Returns:
        None without ``tokens`` (``budget.tokens`` unset) or a rate; else ``tokens``,
        ``gpu_hours`` (``tokens / tokens_per_s x world / 3600``), ``days`` (on this run's
        ``world`` GPUs: ``tokens / tokens_per_s / 86400``), ``energy_kwh`` (``tokens x
        joules_per_token / 3.6e6``; the GPUs' own energy, without the host, network or cooling;
        None without energy) and ``usd`` (``gpu_hours x usd_per_gpu_hour``; None without a price).
    """
    if tokens is None or not tokens_per_s or tokens_per_s <= 0:
        return None
    seconds = tokens / tokens_per_s
    gpu_hours = seconds * world / SECONDS_PER_HOUR
    return {
        "tokens": tokens,
        "gpu_hours": gpu_hours,
        "days": seconds / SECONDS_PER_DAY,
        "energy_kwh": None if joules_per_token is None else tokens * joules_per_token / JOULES_PER_KWH,
        "usd": None if usd_per_gpu_hour is None else gpu_hours * usd_per_gpu_hour,
    }
