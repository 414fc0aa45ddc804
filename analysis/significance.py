"""Whether two set-ups can be told apart by their 95% intervals (:mod:`analysis.spread` makes the intervals).

Two intervals that overlap mean the difference is not significant at this level (a conservative
test: non-overlapping 95% intervals imply p < 0.05; overlapping ones may still differ a little):
:func:`overlap`, a row's interval (:func:`ci_of`), the verdict on the best two rows (:func:`verdict`)
and a speedup's interval from the intervals of the run and the baseline (:func:`speedup_interval`), each
end finite or None with the reason.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pandas as pd

from analysis.catalogue import CI_METRICS, HIGHER_IS_BETTER
from flopsweep.text import figure

__all__ = ["NO_BOUND", "SpeedupInterval", "ci_of", "like_kinds", "overlap", "speedup_interval", "verdict"]


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two intervals ``(low, high)`` share a point."""
    return a[0] <= b[1] and b[0] <= a[1]


def ci_of(row: pd.Series, metric: str) -> tuple[float, float] | None:
    """The row's interval of ``metric``, or None when it has none."""
    low, high = row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high")
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return None
    return float(low), float(high)


def verdict(runs: pd.DataFrame, metric: str, ranked: pd.Series) -> tuple[list[int], str | None]:
    """Whether the best two ``ranked`` rows of ``runs`` on ``metric`` can be told apart: the
    index labels of the two when their intervals overlap (else none), and one line saying so
    (None when ``metric`` has no interval or fewer than two rows are ranked). Only rows of the best's device
    kind are judged (:func:`like_kinds`): a folder that mixes kinds has the line end ``(the folder mixes 2
    device kinds: ...; judged within the best's)``, or, where the best has no such other row, ``Not judged:
    the best by <metric> (<kind>) has no other run of its device kind; ...``. Models are compared on one
    device kind (which model uses the GPU best is a question the table answers)."""
    from analysis.spread import setup_text

    if metric not in CI_METRICS:
        return [], None
    order = runs[ranked].sort_values(metric, ascending=metric not in HIGHER_IS_BETTER, kind="stable")
    kinds = like_kinds(order)
    mixed = ""
    if kinds.nunique() > 1:  # a CPU run and an H200 record are no contest: the best's own kind only
        named = list(dict.fromkeys(kinds))
        said = "; ".join(named[:4]) + ("; ..." if len(named) > 4 else "")
        mixed = f" (the folder mixes {len(named)} device kinds: {said}; judged within the best's)"
        order = order[kinds.eq(kinds.iloc[0])]
        if len(order) < 2:
            return [], (
                f"Not judged: the best by {metric} ({named[0]}) has no other run of its device kind; the "
                f"folder mixes {len(named)}: {said}."
            )
    text = setup_text(order)
    again = text.ne("") & text.duplicated()  # a set-up's other rows, unpooled: never judged against it
    top = order[~again].head(2)
    if len(top) < 2:
        return [], None
    (ia, a), (ib, b) = list(top.iterrows())
    ca, cb = ci_of(a, metric), ci_of(b, metric)
    if ca is None or cb is None:
        return [], f"The best two by {metric} have no 95% interval: whether they differ is unknown."
    shown = (
        f"{figure(a[metric], 4)} [{figure(ca[0], 4)}, {figure(ca[1], 4)}] and {figure(b[metric], 4)} "
        f"[{figure(cb[0], 4)}, {figure(cb[1], 4)}]"
    )
    same = _same_setup_note(order, again, ia) + mixed
    if overlap(ca, cb):
        return [ia, ib], (
            f"Not significant: the best two by {metric}, {shown} (95% intervals), overlap; "
            f"neither is the winner (tie?). Measure with more repeats= to tell them apart.{same}"
        )
    return [], f"Significant: the best by {metric}, {shown} (95% intervals), do not overlap.{same}"


def like_kinds(runs: pd.DataFrame) -> pd.Series:
    """One text per row naming what makes two rows comparable at all, the device kind (``device_name``:
    ``cpu``, ``NVIDIA H200``): :func:`verdict` judges only rows of one text (a CPU llama-tiny run and a
    shipped H200 record were said to ``not overlap``, session 43). Two models on one kind are comparable: the
    table's metrics are per device (MFU, model TFLOPs per device)."""

    def text(column: str) -> pd.Series:
        if column not in runs:
            return pd.Series("?", index=runs.index, dtype=object)
        return runs[column].astype(object).map(lambda v: "?" if v is None or v != v else str(v))

    return text("device_name")


def _same_setup_note(order: pd.DataFrame, again: pd.Series, best: object) -> str:
    """`` (Rows 2 and 3 repeat a set-up above them: ...)`` where :func:`verdict` left out rows that measure a
    set-up already ranked (:func:`analysis.spread.setup_text`; not pooled, as neither a ``run.repeat_group``
    nor one known code joins them, :func:`analysis.spread.pool_group`: an Optuna study's draws from edited
    code), else ""."""
    if not again.any():
        return ""
    rows = [order.index.get_loc(i) + 1 for i in order.index[again]]
    said = ", ".join(str(r) for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
    return (
        f" (ranked rows {said} measure a set-up ranked above them again, in runs that neither a repeat group "
        "nor one known code (code_id) joins, so they are not pooled: compared once, never with themselves; "
        "repeats=N pools a set-up's rounds)"
    )


class SpeedupInterval(NamedTuple):
    """A speedup's 95% interval (:func:`speedup_interval`): each end finite, or None with ``reason``
    saying why it has no finite value."""

    low: float | None
    """The low end, a ratio (0 where the denominator's interval has no upper bound: its infimum)."""
    high: float | None
    """The high end, a ratio; None where the denominator's interval reaches 0 (no upper bound)."""
    reason: str | None = None
    """Why an end is None (``the baseline's 95% interval reaches 0, so ...``); None when both are finite."""


def speedup_interval(
    run: tuple[float, float] | None, base: tuple[float, float] | None, lower: bool
) -> SpeedupInterval | None:
    """The interval of a speedup from the intervals of the run and the baseline: the extreme
    ratios (``run_low / base_high``, ``run_high / base_low``; for a lower-is-better metric the
    baseline over the run), a conservative bound. None when either interval is unknown.

    An end is never ``inf`` or NaN: where the denominator's interval reaches 0 (a time's t-interval
    clipped at 0 s, a baseline near 0), the numerator's is unbounded or the ratio overflows a float,
    that end is None and :attr:`SpeedupInterval.reason` says why; a denominator with no upper bound
    gives a low end of 0, its infimum."""
    if run is None or base is None:
        return None
    num, den = (base, run) if lower else (run, base)
    names = ("baseline", "run") if lower else ("run", "baseline")  # the numerator's, the denominator's
    low, why_low = _ratio_end(num[0], den[1], "low", names)
    high, why_high = _ratio_end(num[1], den[0], "high", names)
    reason = "; ".join(w for w in (why_low, why_high) if w) or None
    return SpeedupInterval(low, high, reason)


NO_BOUND = "(a ratio over 0 or less has no bound)"
"""Why a speedup's end over an interval that reaches 0 has no value (:attr:`SpeedupInterval.reason`)."""


def _ratio_end(
    top: float, bottom: float, side: str, names: tuple[str, str]
) -> tuple[float | None, str | None]:
    """One end of :func:`speedup_interval`, ``top / bottom``, and why it is None: finite, or 0 where
    ``bottom`` is unbounded (the infimum), else None with the reason."""
    if math.isinf(bottom) and bottom > 0 and math.isfinite(top):
        return 0.0, None
    if math.isnan(top) or math.isnan(bottom):
        return None, f"no {side} end: an end of the intervals is not a number"
    if not bottom > 0:
        return None, f"no {side} end: the {names[1]}'s 95% interval reaches {figure(bottom, 4)} {NO_BOUND}"
    ratio = top / bottom
    if math.isfinite(ratio):
        return ratio, None
    if not math.isfinite(top):
        return None, f"no {side} end: the {names[0]}'s 95% interval has no upper bound"
    return (
        None,
        f"no {side} end: {figure(top, 4)} / {figure(bottom, 4)} is past the largest float (the "
        f"{names[1]}'s end is near 0)",
    )
