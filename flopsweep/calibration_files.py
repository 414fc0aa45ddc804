"""The files ``predict.calibration`` names: every readable ``metrics.json`` of a file or a folder that
may calibrate a prediction (:func:`calibration_records`), read safely (no link followed, bounded,
each file once), each kept as its :func:`flopsweep.predict.calibration_view`. Shared by the job's
prediction (:mod:`flopsweep.forecast`) and the shipped records' generator (:mod:`flopsweep.shipped`);
imports no torch.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from flopsweep import predict as pr
from flopsweep import tree
from flopsweep.budget import BUDGET_ENV, MIN_BUDGET, ReadBudget
from flopsweep.config import ConfigError
from flopsweep.plausible import calibration_problems
from flopsweep.record import METRICS_FILE
from flopsweep.safe_read import RecordError, file_kind
from flopsweep.text import printable

log = logging.getLogger("flopsweep.forecast")  # the warnings' logger name, as before the split

MAX_CALIBRATION_FILES = 10_000
"""The most records read from a ``predict.calibration`` folder (a bound on every search)."""


CALIBRATION_FIX = "give a run's metrics.json or a sweep folder that holds some, or null"
"""The fix every ``predict.calibration`` error names."""


def check_calibration_path(path: str) -> Path:
    """``path`` (``~`` expanded) when it can be read at all, by ``lstat`` alone: the job's first check
    (:func:`calibration_records`) and ``run.py``'s before Hydra (:mod:`flopsweep.plan_command_line`).

    Raises:
        ConfigError: naming ``predict.calibration``, the value and :data:`CALIBRATION_FIX`, when
            ``path`` does not exist, is a symbolic link (never followed, to a file or a folder alike:
            :func:`flopsweep.safe_read.file_kind`), or is neither a regular file nor a folder (a FIFO,
            a device, a socket).
    """
    root = Path(path).expanduser()
    if not os.path.lexists(root):
        where = "" if root.is_absolute() else f" ({os.path.abspath(root)})"
        raise ConfigError("predict.calibration", path, f"does not exist{where}", CALIBRATION_FIX)
    kind = file_kind(os.lstat(root).st_mode)
    if kind == "symbolic link":
        why = "is a symbolic link (not followed: name the record or folder it points to)"
        raise ConfigError("predict.calibration", path, why, CALIBRATION_FIX)
    if kind not in ("regular file", "directory"):
        raise ConfigError(
            "predict.calibration", path, f"is a {kind}, not a record or a folder", CALIBRATION_FIX
        )
    return root


def calibration_records(
    path: str | None, budget: ReadBudget | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``(path, view)`` of every readable ``metrics.json`` at ``path`` (a file, or a folder walked
    by :func:`flopsweep.tree.find`: no link followed, at most :data:`flopsweep.tree.MAX_DEPTH`
    levels deep, at most :data:`MAX_CALIBRATION_FILES` records) that may calibrate: an ``ok``
    record failing a check the analysis makes (:func:`flopsweep.plausible.calibration_problems`:
    a step time of 0, infinite or absurd, degrees that do not multiply to the world size, figures
    that disagree) is refused. Each file is read once (a hard link to one read already is not),
    under ``budget`` (:class:`flopsweep.budget.ReadBudget`: the bytes read and the views kept), and
    only its :func:`flopsweep.predict.calibration_view` is kept. In a folder, what is skipped is
    logged with the reason. The job (before it launches) and ``plan=true`` (each row) both read it
    here, so that each problem is the same one-line error in both: the run's record and the plan's
    row are ``invalid``.

    Raises:
        ConfigError: naming ``predict.calibration``, the value and :data:`CALIBRATION_FIX`, when
            ``path`` does not exist, is a link or neither a file nor a folder
            (:func:`check_calibration_path`), is a file that is not a record (unreadable, not JSON, not a
            run's record) or fails its checks, or is a folder that holds no record that may
            calibrate; naming :data:`flopsweep.budget.BUDGET_ENV` when its value is not a budget.
    """
    if not path:
        return []
    root = check_calibration_path(path)
    try:
        budget = budget or ReadBudget()
    except ValueError:
        value, least = os.environ.get(BUDGET_ENV), MIN_BUDGET
        fix = f"give a whole number of bytes, at least {least}, or unset it"
        raise ConfigError(BUDGET_ENV, value, "is not a read budget in bytes", fix) from None
    if not root.is_dir():
        try:
            record = _record(root, budget)
            if problems := calibration_problems(record):
                raise RecordError(f"it fails its checks: {'; '.join(problems)[:300]}")
            return [(str(root), budget.keep(pr.calibration_view(record)))]
        except (RecordError, OSError) as exc:
            raise ConfigError(
                "predict.calibration", path, f"is not a record that may calibrate ({exc})", CALIBRATION_FIX
            ) from None
    unsearched: dict[str, str] = {}
    found, duplicates = tree.unique_files(
        tree.find(root, METRICS_FILE, unsearched, limit=MAX_CALIBRATION_FILES)
    )
    if duplicates:  # one line, however many names a file has
        log.warning(
            "predict.calibration: %d %s to records found already skipped (each file is read once)",
            duplicates,
            "name (a hard link)" if duplicates == 1 else "names (hard links)",
        )
    out, skipped = [], {}
    for file in found:
        try:
            record = _record(file, budget)
            if problems := calibration_problems(record):
                raise RecordError(f"fails its checks: {'; '.join(problems)[:300]}")
            out.append((str(file), budget.keep(pr.calibration_view(record))))
        except (RecordError, OSError) as exc:
            skipped[printable(str(file))] = str(exc)
    said = {**unsearched, **skipped}
    deep = [shown for shown, why in unsearched.items() if why.startswith(tree.DEEPER.split("{")[0])]
    named = next(iter(skipped or deep or unsearched), None) if not out else None
    said.pop(named, None)  # the refusal below says its reason: once, not twice
    for shown, why in said.items():
        log.warning("predict.calibration: skipping %s: %s", shown, printable(why))
    if not out:
        what, fix = f"holds no {METRICS_FILE}", CALIBRATION_FIX
        if skipped:
            first = printable(next(iter(skipped.values())))
            what = f"{what} that may calibrate ({len(skipped)} skipped; the first: {first})"
        elif deep:
            what = (
                f"holds no {METRICS_FILE} within {tree.MAX_DEPTH} levels: folders nested deeper are not "
                f"searched (flopsweep's limit of a walk; not entered below {named})"
            )
            fix = f"name a folder at most {tree.MAX_DEPTH} levels above the records, or {CALIBRATION_FIX}"
        elif unsearched:
            what = (
                f"{what} in the folders it could list ({len(unsearched)} not searched; the first: {named}: "
            )
            what += f"{unsearched[str(named)]})"
        raise ConfigError("predict.calibration", path, printable(what)[:400], fix)
    return out


def _record(path: Path, budget: ReadBudget) -> dict[str, Any]:
    """A record read through ``budget`` (:meth:`flopsweep.budget.ReadBudget.read_json`) that has a
    run's ``config`` and ``status``.

    Raises:
        RecordError: not a record (the message says why), or the budget is spent.
    """
    record = budget.read_json(path)
    if not isinstance(record.get("config"), dict) or "status" not in record:
        raise RecordError("a JSON object without a run's config and status")
    return record
