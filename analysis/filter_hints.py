"""What ``--filter KEY=VALUE`` says when a value matches no record (docs/analysis.md, "Filters").

A filter value that matches nothing while its column exists is named in one line with the values the
records hold there (at most :data:`SHOWN_VALUES` of them, then how many in all). A config name that a
record never holds, because the run resolved it into other keys (``backend=zero3``: the record says
``backend=deepspeed`` and ``zero_stage=3``), is told as what it is recorded as, with the filter to give
(:data:`SHORTHANDS`). When no run is left at all this is the error (exit 2); when the other values still
match runs, a warning on stderr, and the runs that match are shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from analysis.query import cell_values, matches
from analysis.run_match import MIN_ID_PREFIX
from analysis.sanitize import printable
from analysis.spread import JOINED, ROUND_ONLY
from flopsweep.text import plural

__all__ = ["SHORTHANDS", "SHOWN_VALUES", "misses", "nothing_matches_line", "present"]

SHOWN_VALUES = 10
"""The most values of a column that a line lists (sorted; then ``... (N in all)``)."""

SHORTHANDS: dict[tuple[str, str], dict[str, str]] = {
    ("backend", f"zero{stage}"): {"backend": "deepspeed", "zero_stage": str(stage)} for stage in (1, 2, 3)
}
"""Config names a record never holds, and the columns it holds instead: ``backend=zero3``
(``conf/backend/zero3.yaml``, :data:`flopsweep.deepspeed_config.ZERO_SHORTHANDS`) runs DeepSpeed at
ZeRO stage 3 and is recorded as ``backend=deepspeed``, ``zero_stage=3`` (a unit test holds the two
tables equal)."""

_NAMES = {"zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3"}


def _wanted(values: Any) -> list[str]:
    return [str(v) for v in (values if isinstance(values, (list, tuple, set)) else [values])]


def _order(text: str) -> tuple[int, float, str]:
    """Numbers first, by value (``2, 4, 16``, not ``16, 2, 4``), then text, alphabetically."""
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def present(df: pd.DataFrame, column: str) -> str:
    """The values of ``column`` in ``df`` as text, sorted, at most :data:`SHOWN_VALUES` (``ddp, deepspeed,
    fsdp``; ``1, 2, ... (14 in all)``), each one a filter matches (a pooled row's run ids each:
    :func:`analysis.query.cell_values`); ``none (every cell blank)`` when it holds none."""
    held = set()
    for cell in df[column].dropna():
        items = cell_values(column, cell)
        held.update(items[1:] if column in JOINED and len(items) > 1 else items)  # the rounds', not the list
    values = sorted({printable(c) for c in held}, key=_order)
    if not values:
        return "none (every cell blank)"
    shown = ", ".join(values[:SHOWN_VALUES])
    return shown + (f", ... ({len(values)} in all)" if len(values) > SHOWN_VALUES else "")


def _pooled_rounds(df: pd.DataFrame, column: str, value: str) -> str | None:
    """Where ``column`` is a round's own (:data:`analysis.spread.ROUND_ONLY`, ``repeat``) and a row pools
    the rounds of a ``repeats=`` sweep (blank there; was "repeat has: none (every cell blank)"): how to see
    one round's own figures, naming its folder (``run_dir`` lists each round's, in round order: the one
    of round ``value`` where there is one, else the first). None otherwise."""
    if column not in ROUND_ONLY or "run_dir" not in df or "repeats" not in df:
        return None
    pooled = df[(pd.to_numeric(df["repeats"], errors="coerce") > 1) & df[column].isna()]
    if pooled.empty:
        return None
    folders = cell_values("run_dir", pooled["run_dir"].iloc[0])
    folders = folders[1:] if len(folders) > 1 else folders
    try:
        at = int(value) if 0 <= int(value) < len(folders) else 0
    except ValueError:
        at = 0
    return (
        "the rounds of a repeats= sweep are pooled into one row, whose "
        f"{column} is blank and whose figures are the rounds' mean and interval; to see one round's own "
        "figures, name its folder (run_dir lists each round's, in round order). Fix: python -m analysis "
        f"{printable(folders[at])}"
    )


def _one(df: pd.DataFrame, column: str, value: str) -> str:
    """The line of one value of ``--filter column=...`` that matches no record."""
    said = f"--filter {column}={printable(value)} matches no record"
    alias = SHORTHANDS.get((column, value.strip().lower()))
    if alias is None and (pooled := _pooled_rounds(df, column, value)):
        return f"{said}: {pooled}"
    if alias is None and column == "run_id" and 0 < len(value.strip()) < MIN_ID_PREFIX:
        said += f" (a run id's start needs {MIN_ID_PREFIX} characters or more)"
    if alias is None:
        return f"{said}; {column} has: {present(df, column)}"
    recorded = " ".join(f"{k}={v}" for k, v in alias.items())
    name = _NAMES.get(value.strip().lower(), value)
    found = {k: v for k, v in alias.items() if k in df}
    there = len(found) == len(alias) and bool(
        pd.concat([matches(df, k, v) for k, v in found.items()], axis=1).all(axis=1).any()
    )
    if there:
        use = " ".join(f"--filter {k}={v}" for k, v in alias.items())
        return f"{said}; {name} records have {recorded}: use {use}"
    return f"{said}; {name} records have {recorded}, and none is here ({column} has: {present(df, column)})"


def misses(df: pd.DataFrame, filters: Mapping[str, Any]) -> list[str]:
    """One line (:func:`_one`) per value of ``filters`` that matches no row of ``df`` on its own (compared
    as :func:`analysis.query.matches` compares), in the order given; columns not in ``df`` are left to
    :func:`analysis.query.check_columns`."""
    return [
        _one(df, column, value)
        for column, values in filters.items()
        if column in df
        for value in _wanted(values)
        if not matches(df, column, value).any()
    ]


def nothing_matches_line(df: pd.DataFrame, filters: Mapping[str, Any]) -> str:
    """The error when ``filters`` leave no row of ``df``: the first value that matches no record on its own
    (:func:`misses`, and how many more), else (each value matches some run, their combination none) the
    values each key has, bounded."""
    if missed := misses(df, filters):
        more = f" (and {plural(len(missed) - 1, 'more value')} matching none)" if len(missed) > 1 else ""
        return missed[0] + more
    seen = "; ".join(f"{k}: {present(df, k)}" for k in filters if k in df)
    return f"no run matches every --filter at once (each value matches some run); values present: {seen}"
