"""``--filter run_dir=...`` and ``--filter run_id=...`` in the forms the table shows them (docs/analysis.md,
"Filters"): a pooled row of a ``repeats=`` sweep holds every round's folder and id (``rep/0, rep/2``;
:data:`analysis.spread.JOINED`), and a long cell ends in ``…`` (:data:`analysis.display.MAX_CELL`), so
``run_id=ab063…`` copied from the table, or the id's first characters, matched no record. Torch-free.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import pandas as pd

__all__ = ["MIN_ID_PREFIX", "SHORTENED", "matched_line", "short_match"]

MIN_ID_PREFIX = 4
"""The fewest leading characters of a run id that ``--filter run_id=`` takes as a prefix (git's short
hashes' least); fewer must be the whole id or end in ``…``."""

SHORTENED = ("…", "...")
"""The ends a table gives a cut cell (``ab063…``); a filter value ending in one is a prefix."""

MAX_NAMED = 5
"""The most rows :func:`matched_line` names (then how many more)."""


def _path(text: str) -> str:
    """``text`` as one folder, wherever it was written from (``rep/0/``, ``./rep/0``, ``/tmp/x/rep/0``)."""
    return os.path.normpath(os.path.abspath(text))


def short_match(column: str, wanted: str, held: Iterable[str]) -> bool:
    """Whether the filter value ``wanted`` (lower case, as :func:`analysis.query.normalize` gives it) names
    one of ``held`` (a cell's values, :func:`analysis.query.cell_values`: the whole text, then each round's)
    in a shortened form: the start of one ending in ``…`` or ``...`` (``ab063…``, ``rep/1, rep/…``);
    for ``run_id`` its first :data:`MIN_ID_PREFIX` characters or more; for ``run_dir`` the same folder
    written another way (absolute, ``./``, a trailing ``/``)."""
    held = [h.strip().lower() for h in held]
    for end in SHORTENED:
        if wanted.endswith(end) and (start := wanted[: -len(end)].strip()):
            return any(h.startswith(start) for h in held)
    if column == "run_id":
        return len(wanted) >= MIN_ID_PREFIX and any(h.startswith(wanted) for h in held)
    if column == "run_dir" and wanted:
        return _path(wanted) in {_path(h) for h in held}
    return False


def matched_line(rows: pd.DataFrame, filters: dict[str, Any]) -> str | None:
    """One line naming the rows a ``run_dir`` or ``run_id`` filter matched (``--filter run_id=ab063
    matches 1 row: rep/1, rep/3 (2 rounds pooled)``), each by its folders, at most :data:`MAX_NAMED`;
    None when no such filter was given."""
    given = [
        f"{k}={v if not isinstance(v, list | tuple) else ','.join(map(str, v))}"
        for k, v in filters.items()
        if k in ("run_dir", "run_id")
    ]
    if not given:
        return None
    named = []
    for _, row in rows.head(MAX_NAMED).iterrows():
        where = str(row.get("run_dir", "")) if pd.notna(row.get("run_dir")) else str(row.name)
        reps = pd.to_numeric(row.get("repeats"), errors="coerce")
        named.append(where + (f" ({int(reps)} rounds pooled)" if pd.notna(reps) and reps > 1 else ""))
    more = f"; and {len(rows) - MAX_NAMED} more" if len(rows) > MAX_NAMED else ""
    count = f"{len(rows)} row" + ("" if len(rows) == 1 else "s")
    return f"--filter {' '.join(given)} matches {count}: {'; '.join(named)}{more}"
