"""``batch=auto``: the largest micro batch that fits, by doubling and then bisecting, and then the
largest of those whose measured step needs no ``cudaMalloc`` retries (:func:`choose_micro_batch`).

On CUDA the peak memory of the probes that fit guides the search: a line through the two
largest gives the size that should just fit (:func:`predict_largest`), which is probed; the
search then gallops up from it until a size does not fit, and bisects. The peaks of the
probes of Llama 3.2 1B eager on an H200 (8, 16, 32, 24, 20, 18, 19 without the guide; 19
fits, 20 does not) predict 19, so the guided search probes 8, 16, 19, 20.

Each probe is a short run (one warm-up and one measured step, never profiled: with
``profile=true`` only the final measured run writes a trace) in fresh worker
processes, so an out-of-memory probe ends only that probe and leaves no allocator
state behind. A probe that fits but whose measured step retried ``cudaMalloc``
(``torch.cuda.memory_stats()["num_alloc_retries"]``, the window's ``cuda_alloc_retries``) is
slower than it need be: the search bisects between the largest size without retries and the
smallest with them, and measures at the largest without (every size retrying: the largest that
fit). The search, the largest size that fit, the choice and its reason are recorded in
``metrics.json`` under ``batch_search``; the job then measures at the size chosen.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopsweep.launch import SCRATCH, Outcome, launch_local

if TYPE_CHECKING:
    from flopsweep.layout import Plan

log = logging.getLogger("flopsweep")


def search_max(
    fits: Callable[[int], bool], start: int, limit: int, predict: Callable[[], int | None] | None = None
) -> tuple[int | None, list[int]]:
    """Largest ``n`` in ``[start, limit]`` with ``fits(n)``, assuming fitting is monotone.

    Doubles from ``start`` until a size does not fit (or ``limit`` is reached), then
    bisects between the last size that fit and the first that did not.

    With ``predict`` (called after a size fits; it returns the largest size that should fit,
    e.g. extrapolated from peak memory, or None), a prediction above the largest fitting size
    is probed instead of the doubled size. When it fits, the search gallops up from it
    (+1, +2, +4, ...) until a size does not fit, then bisects. A wrong prediction only costs
    probes: the result is the same.

    Returns:
        ``(largest fitting size or None if even start does not fit, sizes probed in order)``.
    """
    probed: list[int] = []

    def probe(n: int) -> bool:
        probed.append(n)
        return fits(n)

    if not probe(start):
        return None, probed
    good, bad, step = start, None, 0  # step > 0: galloping up from a predicted size
    while True:
        top = limit if bad is None else bad - 1
        if good >= top:
            return good, probed
        if bad is not None:
            n = (good + bad) // 2
        elif step:
            n, step = min(good + step, top), step * 2
        else:
            guess = predict() if predict is not None else None
            if guess is not None and guess > good:
                n, step = min(guess, top), 1
            else:
                n = min(good * 2, limit)
        if probe(n):
            good = n
        else:
            bad = n


def predict_largest(points: list[tuple[int, int]], capacity: int, headroom: float = 0.99) -> int | None:
    """The largest micro batch whose peak memory stays under ``headroom x capacity``, by a line
    through the two largest probes that fit.

    Args:
        points: ``(micro_batch_size, peak bytes)`` of the probes that fit.
        capacity: the device's memory, bytes.
        headroom: the share of ``capacity`` the peak allocated memory may reach (the CUDA
            context and the allocator's fragmentation need the rest). On an H200, Llama 3.2 1B
            eager fit at micro batch 19 with a peak of 98.1% and ran out of memory at 20.

    Returns:
        The size, or None with fewer than two sizes or a line that does not rise.
    """
    latest = dict(sorted(points))  # one peak per size
    if len(latest) < 2:
        return None
    (n1, p1), (n2, p2) = sorted(latest.items())[-2:]
    slope = (p2 - p1) / (n2 - n1)
    if slope <= 0:
        return None
    return n2 + int((headroom * capacity - p2) // slope)


def retry_bounds(probes: list[dict[str, Any]]) -> tuple[int | None, int | None]:
    """``(largest size that fit without cudaMalloc retries, smallest larger size that fit with
    retries)`` among ``probes`` (each with ``micro_batch_size``, ``status`` and ``cuda_alloc_retries``:
    the most over its ranks in the measured step; None off CUDA, counted as none). Either is None
    when no probe is such a size."""
    fit = {p["micro_batch_size"]: p.get("cuda_alloc_retries") or 0 for p in probes if p["status"] == "ok"}
    clean = [n for n, retries in fit.items() if retries == 0]
    good = max(clean) if clean else None
    retrying = [n for n, retries in fit.items() if retries > 0 and (good is None or n > good)]
    return good, (min(retrying) if retrying else None)


def next_retry_probe(probes: list[dict[str, Any]]) -> int | None:
    """The size to probe next to find where the retries start: halfway between the bounds of
    :func:`retry_bounds`, or None when they are adjacent, one is missing, or that size was probed
    already (it ran out of memory: fitting was not monotone there)."""
    good, bad = retry_bounds(probes)
    if good is None or bad is None or bad - good <= 1:
        return None
    n = (good + bad) // 2
    return None if any(p["micro_batch_size"] == n for p in probes) else n


def choose_micro_batch(probes: list[dict[str, Any]]) -> tuple[int | None, str]:
    """The micro batch ``batch=auto`` measures, and why, from its probes' figures (see
    :func:`retry_bounds`): the largest that fit without ``cudaMalloc`` retries (each retry frees the
    allocator's cache and synchronises the device: fms-fsdp#63; Llama 3.2 1B on FSDP2 ran 1.70x the
    tokens/s at micro batch 16 than at the 21 that fit), else, when every size that fit retried,
    the largest that fit. None when nothing fit.

    Returns:
        ``(size, reason)``; the reason is one line for the log and ``batch_search.reason``.
    """
    fit = [p["micro_batch_size"] for p in probes if p["status"] == "ok"]
    if not fit:
        return None, "no probe fit"
    largest, (good, bad) = max(fit), retry_bounds(probes)
    if all(p.get("cuda_alloc_retries") is None for p in probes):
        return largest, f"the largest size that fit ({largest}); cudaMalloc retries are counted on CUDA only"
    if good == largest:
        return largest, f"the largest size that fit ({largest}), with no cudaMalloc retries"
    if good is None:
        return largest, f"every size that fit retried cudaMalloc; the largest that fit ({largest})"
    return good, (
        f"the largest size that fit without cudaMalloc retries ({good}); {bad} and up to {largest} fit "
        "but retried (slower)"
    )


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


def find_micro_batch(plan: Plan, job_dir: Path) -> tuple[int, dict[str, Any]]:
    """Search the largest ``micro_batch_size`` for ``plan.cfg`` (validated, ``batch.name == "auto"``);
    each probe runs on the plan's layout.

    Probes start at ``batch.micro_batch_size`` and stop at ``batch.max_micro_batch_size``.
    Each runs in ``job_dir/batch_search/mbs<N>/`` with ``profile=false``.

    Returns:
        ``(size, record)`` where the record lists every probe with its status and peak
        memory, for ``metrics.json["run"]["batch_search"]``.

    Raises:
        NothingFits: when even ``batch.micro_batch_size`` runs out of memory.
        ProbeFailed: when a probe ends in ``error`` or ``invalid`` (not ``oom``).
    """
    cfg = plan.cfg
    capacity = cuda_capacity(cfg.device)
    probes: list[dict[str, Any]] = []
    points: list[tuple[int, int]] = []  # (size, peak allocated bytes) of the probes that fit
    outcomes: dict[int, Outcome] = {}

    def record(size: int | None, largest: int | None = None, reason: str | None = None) -> dict[str, Any]:
        return {
            "method": "double then bisect"
            + (", guided by peak memory" if capacity else "")
            + ", then the largest without cudaMalloc retries",
            "start": cfg.batch.micro_batch_size,
            "limit": cfg.batch.max_micro_batch_size,
            "probes": probes,
            "largest_fitting": largest,
            "reason": reason,
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
        outcome = outcomes[n] = launch_local(dataclasses.replace(plan, cfg=probe_cfg), probe_dir)
        shutil.rmtree(probe_dir / SCRATCH, ignore_errors=True)
        peaks = [
            r["peak_cuda_allocated_bytes"] for r in outcome.ranks or [] if r["peak_cuda_allocated_bytes"]
        ]
        peak = max(peaks) if peaks else None
        retries = [r.get("cuda_alloc_retries") for r in outcome.ranks or []]
        probes.append(
            {
                "micro_batch_size": n,
                "status": outcome.status,
                "peak_cuda_allocated_bytes": peak,
                "cuda_alloc_retries": None if None in retries or not retries else max(retries),
            }
        )
        if outcome.status == "ok" and peak:
            points.append((n, peak))
        log.info("batch=auto: micro batch %d -> %s", n, outcome.status)
        if outcome.status not in ("ok", "oom"):
            raise ProbeFailed(outcome, record(None))
        return outcome.status == "ok"

    predict = (lambda: predict_largest(points, capacity)) if capacity else None
    largest, _ = search_max(fits, cfg.batch.micro_batch_size, cfg.batch.max_micro_batch_size, predict)
    if largest is None:
        raise NothingFits(outcomes[cfg.batch.micro_batch_size], record(None))
    while (n := next_retry_probe(probes)) is not None:
        fits(n)
    size, reason = choose_micro_batch(probes)
    log.info("batch=auto: micro batch %d: %s", size, reason)
    return size, record(size, largest, reason)


def cuda_capacity(device: str) -> int | None:
    """Memory of the first visible GPU in bytes, or None off CUDA (the search then only doubles
    and bisects). The probes' workers are spawned, so this process touching CUDA is harmless
    (``system_info`` reads the device name here too)."""
    if device != "cuda":
        return None
    import torch

    return int(torch.cuda.get_device_properties(0).total_memory) if torch.cuda.is_available() else None
