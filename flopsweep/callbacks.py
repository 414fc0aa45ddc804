"""Hydra callbacks (configured under ``hydra.callbacks`` in ``conf/config.yaml``)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from flopsweep.metrics import METRICS_FILE, STATUSES

log = logging.getLogger("flopsweep")


def count_statuses(sweep_dir: Path) -> Counter:
    """Statuses of the ``metrics.json`` records under ``sweep_dir``; unreadable ones count as ``unreadable``."""
    counts: Counter = Counter()
    for path in sorted(Path(sweep_dir).rglob(METRICS_FILE)):
        try:
            counts[json.loads(path.read_text())["status"]] += 1
        except (OSError, ValueError, KeyError, TypeError):
            counts["unreadable"] += 1
    return counts


def summary_line(counts: Counter) -> str:
    """``"6 ok, 2 oom, 1 error, 0 invalid"`` (plus any unreadable records)."""
    parts = [f"{counts.get(s, 0)} {s}" for s in STATUSES]
    if counts.get("unreadable"):
        parts.append(f"{counts['unreadable']} unreadable")
    return ", ".join(parts)


class SweepSummary(Callback):
    """Prints one status line at the end of a multirun, e.g. ``6 ok, 2 oom, 1 error, 0 invalid``."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        line = summary_line(count_statuses(sweep_dir))
        log.info("sweep %s: %s", sweep_dir, line)
        print(f"flopsweep summary: {line} ({sweep_dir})", flush=True)
