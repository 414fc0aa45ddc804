"""How :func:`flopsweep.predict.pick_calibration` orders the records of one set-up: the micro batch a
calibration key holds and its distance from a record's (:func:`micro_batch_distance`), and the records'
start times (``run.started_at``, ISO 8601: :func:`started_seconds`, :func:`seconds_apart`). Torch-free;
out of :mod:`flopsweep.predict` (a module stays under 600 lines), which imports it."""

from __future__ import annotations

import json
import math
from typing import Any

MICRO_BATCH = ("config", "batch", "micro_batch_size")
"""Where a record keeps its micro batch (:func:`micro_batch_distance`)."""


def micro_batch_distance(micro_batch: Any, wanted: int | None) -> tuple[float, int]:
    """How far a record's ``micro_batch`` (sequences per rank and step) is from the ``wanted`` one, as
    :func:`flopsweep.predict.pick_calibration` orders them: ``(|ln(micro_batch / wanted)|, -micro_batch)``,
    the nearest ratio first (tokens scale a step by their ratio), on a tie the larger micro batch (its step
    holds less of the fixed cost per step that scaling by tokens would multiply: 1 and 4 for 2 take 4).
    ``(0, 0)`` for every record without ``wanted``; ``(inf, 0)`` for one without a positive micro batch."""
    if wanted is None:
        return 0.0, 0
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1:
        return math.inf, 0
    return abs(math.log(micro_batch / wanted)), -micro_batch


def key_micro_batch(key: str) -> int | None:
    """The micro batch of a :func:`flopsweep.predict.calibration_key` (its last value), None for a key made
    without it."""
    try:
        values = json.loads(key)
    except ValueError:
        return None
    last = values[-1] if isinstance(values, list) and values else None
    return last if isinstance(last, int) and not isinstance(last, bool) and last >= 1 else None


def loose_key(key: str) -> str:
    """A full :func:`flopsweep.predict.calibration_key` made without its micro batch (as
    ``micro_batch=False`` makes it)."""
    values = json.loads(key)
    values[-1] = None
    return json.dumps(values, sort_keys=True, default=str)


def started_seconds(when: Any) -> float:
    """``run.started_at`` (ISO 8601, naive read as UTC) in seconds since the epoch; -inf when unreadable
    (such a record sorts after every dated one)."""
    from datetime import datetime, timezone

    try:
        at = datetime.fromisoformat(str(when))
    except (TypeError, ValueError):
        return -math.inf
    return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).timestamp()


def seconds_apart(a: Any, b: str | None) -> float:
    """Seconds between two ISO 8601 times; 0 without ``b``, infinite for an unreadable ``a``."""
    from datetime import datetime

    if b is None:
        return 0.0
    try:
        return abs((datetime.fromisoformat(str(a)) - datetime.fromisoformat(b)).total_seconds())
    except (TypeError, ValueError):
        return math.inf
