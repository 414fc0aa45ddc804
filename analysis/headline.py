"""The verdict a report opens with: the winning set-up, its 95% interval, the runner-up, and whether
the winner beats it significantly (their intervals do not overlap, :func:`analysis.significance.overlap`).

The HTML report (``--format html``) and the notebook put these lines above their first chart; the
terminal and markdown tables keep the one-line verdict under the table
(:func:`analysis.significance.verdict`).
"""

from __future__ import annotations

import pandas as pd

from analysis.catalogue import CI_METRICS, HIGHER_IS_BETTER, RANK_METRIC
from analysis.drawing import series_labels, short
from analysis.load import rankable
from analysis.significance import ci_of, overlap
from flopsweep.text import figure

__all__ = ["headline", "setup_names"]


def setup_names(runs: pd.DataFrame, *, model: bool = False) -> pd.Series:
    """A name per row of ``runs`` made of what tells its rows apart: the model when several are shown
    (or ``model``), the backend (with its ZeRO stage), and each other knob that differs
    (:func:`analysis.drawing.series_labels`), e.g. ``fsdp``, ``deepspeed ZeRO-3`` or
    ``fsdp, layout=dp2 tp2``; rows that no shown knob tells apart get their ``run_dir`` too."""
    names = series_labels(runs, x=None, series="backend")
    if "model" in runs and (model or runs["model"].nunique() > 1):
        names = runs["model"].map(short) + ": " + names
    names = names.str.rstrip(": ").where(names.str.rstrip(": ").ne(""), "the only set-up")
    if "run_dir" in runs and names.duplicated(keep=False).any() and runs["run_dir"].nunique() > 1:
        alike = names.duplicated(keep=False)
        names = names.where(~alike, names + " (" + runs["run_dir"].astype(str) + ")")
    return names


def _figure(row: pd.Series, metric: str) -> str:
    """``502.7 [493.6, 512.2]``: the row's ``metric`` and its 95% interval (``no interval`` without one)."""
    ci = ci_of(row, metric)
    where = f" over {row['ci_over']}" if "ci_over" in row and isinstance(row["ci_over"], str) else ""
    interval = f"95% interval [{figure(ci[0], 4)}, {figure(ci[1], 4)}]{where}" if ci else "no 95% interval"
    return f"{figure(row[metric], 4)} ({interval})"


def headline(runs: pd.DataFrame, metric: str = RANK_METRIC) -> list[str]:
    """The verdict's lines for ``runs`` (a frame of :func:`analysis.load`, repeats pooled or not),
    ranked on ``metric`` among the rows that may be ranked (:func:`analysis.load.rankable`):

    1. ``Winner by METRIC (higher is better): NAME, VALUE (95% interval [LOW, HIGH] over steps).``
    2. ``Runner-up: NAME, VALUE (...).`` (absent with one set-up)
    3. whether the winner beats the runner-up: ``Significant: ...`` when the two 95% intervals do not
       overlap, ``Not significant: ...`` when they do (a tie at this level: measure with ``repeats=``),
       or that it is unknown when either has no interval.

    One line saying no run can be ranked when none can; names from :func:`setup_names`.
    """
    if metric not in runs:
        return [f"No verdict: the runs have no {metric}."]
    ranked = runs[rankable(runs, metric)]
    if ranked.empty:
        return [f"No verdict: no ok run has {metric} (every run failed, or none passed the checks)."]
    better = "higher" if metric in HIGHER_IS_BETTER else "lower"
    order = ranked.sort_values(metric, ascending=better == "lower", kind="stable")
    # the winner and the runner-up named by what tells the two apart (every knob that differs among
    # a hundred runs would make a paragraph of each name); the model whenever several were run
    names = setup_names(order.head(2), model="model" in order and order["model"].nunique() > 1)
    win = order.iloc[0]
    lines = [f"Winner by {metric} ({better} is better): {names.iloc[0]}, {_figure(win, metric)}."]
    if len(order) < 2:
        return [*lines, "No runner-up: only one set-up was measured."]
    second = order.iloc[1]
    lines.append(f"Runner-up: {names.iloc[1]}, {_figure(second, metric)}.")
    a, b = ci_of(win, metric), ci_of(second, metric)
    if metric not in CI_METRICS or a is None or b is None:
        lines.append("Whether the winner beats the runner-up is unknown: one of them has no 95% interval.")
    elif overlap(a, b):
        lines.append(
            "Not significant: the two 95% intervals overlap, so the winner does not beat the runner-up "
            "at this level (a tie?). Measure with more repeats= to tell them apart."
        )
    else:
        lines.append("Significant: the winner beats the runner-up (their 95% intervals do not overlap).")
    return lines
