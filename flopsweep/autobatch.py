"""``batch=auto``: the largest micro batch that fits, by doubling and then bisecting.

Each probe is a short run (one warm-up and one measured step, never profiled: with
``profile=true`` only the final measured run writes a trace) in fresh worker
processes, so an out-of-memory probe ends only that probe and leaves no allocator
state behind. The search and its result are recorded in ``metrics.json`` under
``batch_search``; the job then measures at the size it found.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopsweep.config import BatchConfig, RunConfig
from flopsweep.launch import SCRATCH, Outcome, launch_local


@dataclass(kw_only=True)
class AutoBatchConfig(BatchConfig):
    """``batch=auto``: search the largest micro batch that fits, starting at ``micro_batch_size``."""

    name: str = "auto"
    micro_batch_size: int = 1
    max_micro_batch_size: int = 256
    """The search never probes above this."""


log = logging.getLogger("flopsweep")


def search_max(fits: Callable[[int], bool], start: int, limit: int) -> tuple[int | None, list[int]]:
    """Largest ``n`` in ``[start, limit]`` with ``fits(n)``, assuming fitting is monotone.

    Doubles from ``start`` until a size does not fit (or ``limit`` is reached), then
    bisects between the last size that fit and the first that did not.

    Returns:
        ``(largest fitting size or None if even start does not fit, sizes probed in order)``.
    """
    probed: list[int] = []

    def probe(n: int) -> bool:
        probed.append(n)
        return fits(n)

    if not probe(start):
        return None, probed
    good, bad = start, None
    while bad is None and good < limit:
        n = min(good * 2, limit)
        if probe(n):
            good = n
        else:
            bad = n
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        if probe(mid):
            good = mid
        else:
            bad = mid
    return good, probed


class ProbeFailed(RuntimeError):
    """A probe failed for a reason other than memory; the search cannot go on.

    ``outcome`` is that probe's outcome (its error names the phase and rank); ``record``
    is the search so far, for ``metrics.json["run"]["batch_search"]``.
    """

    def __init__(self, outcome: Outcome, record: dict[str, Any]) -> None:
        self.outcome = outcome
        self.record = record
        super().__init__(f"probe failed: {outcome.error}")


class NothingFits(ProbeFailed):
    """Even the starting micro batch ran out of memory; ``outcome`` is that probe's."""


def find_micro_batch(cfg: RunConfig, job_dir: Path) -> tuple[int, dict[str, Any]]:
    """Search the largest ``micro_batch_size`` for ``cfg`` (validated, ``batch.name == "auto"``).

    Probes start at ``batch.micro_batch_size`` and stop at ``batch.max_micro_batch_size``.
    Each runs in ``job_dir/batch_search/mbs<N>/`` with ``profile=false``.

    Returns:
        ``(size, record)`` where the record lists every probe with its status and peak
        memory, for ``metrics.json["run"]["batch_search"]``.

    Raises:
        NothingFits: when even ``batch.micro_batch_size`` runs out of memory.
        ProbeFailed: when a probe ends in ``error`` or ``invalid`` (not ``oom``).
    """
    probes: list[dict[str, Any]] = []
    outcomes: dict[int, Outcome] = {}

    def record(size: int | None) -> dict[str, Any]:
        return {
            "method": "double then bisect",
            "start": cfg.batch.micro_batch_size,
            "limit": cfg.batch.max_micro_batch_size,
            "probes": probes,
            "result": size,
        }

    def fits(n: int) -> bool:
        probe_cfg = dataclasses.replace(
            cfg,
            batch=dataclasses.replace(cfg.batch, micro_batch_size=n),
            steps=dataclasses.replace(cfg.steps, warmup=1, measure=1),
            profile=False,  # a probe asks only "does it fit"; the measured run profiles
        )
        probe_dir = Path(job_dir) / "batch_search" / f"mbs{n}"
        outcome = outcomes[n] = launch_local(probe_cfg, probe_dir)
        shutil.rmtree(probe_dir / SCRATCH, ignore_errors=True)
        peaks = [
            r["peak_cuda_allocated_bytes"] for r in outcome.ranks or [] if r["peak_cuda_allocated_bytes"]
        ]
        peak = max(peaks) if peaks else None
        probes.append({"micro_batch_size": n, "status": outcome.status, "peak_cuda_allocated_bytes": peak})
        log.info("batch=auto: micro batch %d -> %s", n, outcome.status)
        if outcome.status not in ("ok", "oom"):
            raise ProbeFailed(outcome, record(None))
        return outcome.status == "ok"

    size, _ = search_max(fits, cfg.batch.micro_batch_size, cfg.batch.max_micro_batch_size)
    if size is None:
        raise NothingFits(outcomes[cfg.batch.micro_batch_size], record(None))
    return size, record(size)
