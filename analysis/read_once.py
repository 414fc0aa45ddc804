"""Each record read once per ``with read_once():`` block, however many loads name it.

``benchmarks/make_results.py`` runs ``python -m analysis`` for each of its 38 tables in one process, over
records many of them share (``. ../h200x2 --prediction-errors`` reads them all); each table's
:func:`analysis.load.load` parsed, upgraded, checked and flattened every record again. Inside the block a
record's ``(record, schema_version, row)`` is kept the first time and handed out again while the file is
the same (its name, device, inode, size and modification time): each load still charges its budget for
the file (:meth:`flopsweep.budget.ReadBudget.charge`: its bytes, a hard link refused as before) and gets its
own copy of the row. What the row's checks log (:func:`analysis.load.row`) is logged the first time only.
Outside a block nothing is kept. Torch-free.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from analysis.schema import read_record
from flopsweep.budget import ReadBudget

Kept = tuple[dict[str, Any], Any, dict[str, Any]]
"""``(record, schema_version, row)`` of one file: :func:`analysis.schema.read_record` and its row."""

_kept: dict[tuple[Any, ...], Kept] | None = None


@contextlib.contextmanager
def read_once() -> Iterator[None]:
    """Keep each record read inside the block (:func:`kept_row`), dropped when the outermost block ends."""
    global _kept
    outer = _kept
    _kept = {} if outer is None else outer
    try:
        yield
    finally:
        _kept = outer


def kept_row(
    path: Path, run_dir: str, budget: ReadBudget, row: Callable[[Any, str, Any], dict[str, Any]]
) -> Kept:
    """``(record, schema_version, row)`` of the record ``path``: :func:`analysis.schema.read_record` through
    ``budget`` and ``row(record, run_dir, schema_version)`` (:func:`analysis.load.row`); inside
    :func:`read_once`, what that gave for the same file and ``run_dir`` before, the budget charged for the
    file (``budget.charge``). The row is the caller's own (a shallow copy); the record is shared: read it,
    never change it.

    Raises:
        RecordError, BudgetSpent: as ``read_record`` and ``row`` do (a file read already: as
            ``budget.charge``).
    """

    def read() -> Kept:
        record, version = read_record(path, budget)
        return record, version, row(record, run_dir, version)

    try:
        st = os.lstat(path)
    except OSError:  # read_record's own line
        st = None
    if _kept is None or st is None:
        return read()
    key = (os.fsencode(path), run_dir, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _kept:
        _kept[key] = read()
    else:
        budget.charge(path)
    record, version, made = _kept[key]
    return record, version, dict(made)
