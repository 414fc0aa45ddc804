"""The memory one invocation may spend on records: the bytes read and what is kept of them.

Torch-free. Each read is bounded by :data:`flopsweep.safe_read.MAX_RECORD_BYTES`, but not the total:
150 hard links to one record just under that cap exhausted the host's memory in the analysis and
in ``predict.calibration=``. A :class:`ReadBudget` reads each file once (a hard link to a file read
already, the same device and inode, is not read again) and charges the bytes of each file read,
and the memory of what the caller keeps of it (:meth:`ReadBudget.keep`: a table row, a calibration
view), against one total (:func:`budget_bytes`); a record that would go past it is skipped with the
reason (:class:`BudgetSpent`), the others are still read. Callers keep only what they need of a
record (:func:`flopsweep.predict.calibration_view`), never the whole parsed file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from flopsweep.safe_read import MAX_RECORD_BYTES, RecordError, read_json
from flopsweep.text import format_bytes

BUDGET_ENV = "FLOPSWEEP_READ_BUDGET"
"""Environment variable: the budget in bytes (a whole number, at least :data:`MIN_BUDGET`), in
place of :func:`default_budget`."""

MAX_BUDGET = 2**30
"""The default budget's ceiling, 1 GiB: some 100,000 real records (2 to 11 KiB each, and a row of
about 10 KiB kept per record)."""

MEMORY_SHARE = 4
"""The default budget is at most the host's free memory over this (the parse of one record, and the
table built from the rows, come on top of the budget)."""

MIN_BUDGET = MAX_RECORD_BYTES
"""The smallest budget: one record of the largest size read can always be read."""


class BudgetError(ValueError):
    """:data:`BUDGET_ENV` set to something that is not a budget; one line naming it and the fix."""


class BudgetSpent(RecordError):
    """A record not read, or not kept, because the budget of this invocation is spent; the message
    names the budget and how to raise it."""


def default_budget() -> int:
    """The budget without :data:`BUDGET_ENV`: :data:`MAX_BUDGET`, or a :data:`MEMORY_SHARE` th of the
    host memory free for this process (:func:`flopsweep.hostmem.available_bytes`: a cgroup limit
    counts) when that is less; at least :data:`MIN_BUDGET`. Bytes."""
    from flopsweep.hostmem import available_bytes

    try:
        free = available_bytes()
    except (OSError, ValueError):  # no /proc (some sandboxes): the ceiling alone
        free = MAX_BUDGET * MEMORY_SHARE
    return max(MIN_BUDGET, min(MAX_BUDGET, free // MEMORY_SHARE))


def budget_bytes() -> int:
    """The budget of this invocation, in bytes: :data:`BUDGET_ENV` when set, else
    :func:`default_budget`.

    Raises:
        BudgetError: one line naming :data:`BUDGET_ENV`, its value and the fix, when it is not a
            whole number of bytes of at least :data:`MIN_BUDGET`.
    """
    text = os.environ.get(BUDGET_ENV, "").strip()
    if not text:
        return default_budget()
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < MIN_BUDGET:
        raise BudgetError(
            f"{BUDGET_ENV}={text[:40]!r} is not a whole number of bytes of at least {MIN_BUDGET} "
            f"(one record's cap): give e.g. {MAX_BUDGET}, or unset it for the default"
        )
    return value


def deep_size(value: Any) -> int:
    """The memory of a JSON-like value in bytes (``sys.getsizeof`` of it and of every dict, list,
    text and number in it; each object once); iterative, so any depth is safe."""
    total, seen, stack = 0, set(), [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total


class ReadBudget:
    """What one invocation (an analysis, a job's ``predict.calibration``) may read and keep.

    Args:
        total: bytes; None reads :func:`budget_bytes`.
    """

    def __init__(self, total: int | None = None) -> None:
        self.total = budget_bytes() if total is None else total
        self.left = self.total
        self._seen: dict[tuple[int, int], str] = {}

    def _spent(self, what: str, size: int) -> BudgetSpent:
        return BudgetSpent(
            f"{what} ({format_bytes(size)}) would pass the {format_bytes(self.total)} that one invocation "
            f"reads and keeps of records ({format_bytes(max(self.left, 0))} left): set {BUDGET_ENV} "
            "(bytes) higher, or name fewer records"
        )

    def read_json(self, path: Path) -> dict[str, Any]:
        """:func:`flopsweep.safe_read.read_json` of ``path``, its size charged first.

        Raises:
            RecordError: for a file already read under another name (a hard link: same device and
                inode), and as :func:`~flopsweep.safe_read.read_json` does.
            BudgetSpent: when the file's size is more than is left.
        """
        st = self.charge(path)
        record = read_json(path)
        try:  # a file that grew while read (up to read_json's cap) is charged what it grew
            self.left -= max(0, os.lstat(path).st_size - st.st_size)
        except OSError:
            pass
        return record

    def charge(self, path: Path) -> os.stat_result:
        """Charge the file ``path`` (not followed) as :meth:`read_json` does before it reads: its size, and
        its device and inode as read; its ``os.lstat``. :func:`analysis.read_once.kept_row` charges a
        record it read already this way.

        Raises:
            RecordError: for a file already read under another name (a hard link: same device and
                inode), or one that cannot be stat'ed.
            BudgetSpent: when the file's size is more than is left.
        """
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise RecordError(f"cannot read the file: {exc.strerror or exc}") from None
        key = (st.st_dev, st.st_ino)
        if key in self._seen:
            raise RecordError(f"the same file as {self._seen[key]} (a hard link): read once")
        if st.st_size > self.left:
            raise self._spent("not read: the file", st.st_size)
        self._seen[key] = os.fsencode(path).decode("utf-8", "backslashreplace")
        self.left -= st.st_size
        return st

    def keep(self, value: Any, what: str = "what is kept of the record") -> Any:
        """``value``, its memory (:func:`deep_size`) charged: the part of a record a caller keeps.

        Raises:
            BudgetSpent: when that is more than is left (the caller drops it and says so).
        """
        size = deep_size(value)
        if size > self.left:
            raise self._spent(f"not kept: {what}", size)
        self.left -= size
        return value
