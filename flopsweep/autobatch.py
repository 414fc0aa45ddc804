"""``batch=auto``: the largest micro batch that fits (:class:`flopsweep.sizesearch.SizeSearch`,
the one search of ``search.model=largest`` too, along :data:`MICRO_BATCH`), and then the largest of
those whose measured step needs no ``cudaMalloc`` retries (:func:`choose_micro_batch`).

The peaks of the probes of Llama 3.2 1B eager on an H200 (8, 16, 32, 24, 20, 18, 19 without the
guide of :func:`flopsweep.sizesearch.predict_largest`; 19 fits, 20 does not) predict 19, so the
guided search probes 8, 16, 19, 20. A probe that fits but whose measured step retried
``cudaMalloc`` (``torch.cuda.memory_stats()["num_alloc_retries"]``, the window's
``cuda_alloc_retries``) is slower than it need be: the search bisects between the largest size
without retries and the smallest with them, and measures at the largest without (every size
retrying: the largest that fit). The search, the largest size that fit, the choice and its reason
are recorded in ``metrics.json`` under ``batch_search``; the job then measures at the size chosen.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopsweep.sizesearch import OnProbe, Probe, ReusedProbes, SizeSearch, run_probe
from flopsweep.sizesearch import estimated_largest as estimated_size

if TYPE_CHECKING:
    from flopsweep.config import RunConfig
    from flopsweep.layout import Plan

log = logging.getLogger("flopsweep")


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


class MicroBatch:
    """The micro batch as :class:`flopsweep.sizesearch.SizeAxis`: probes from
    ``batch.micro_batch_size`` to ``batch.max_micro_batch_size``, each in
    ``batch_search/mbs<N>/`` at the plan's model."""

    name = "batch=auto"
    key = "batch_search"
    size_key = "micro_batch_size"

    def wanted(self, cfg: RunConfig) -> bool:
        return cfg.batch.name == "auto"

    def bounds(self, cfg: RunConfig) -> tuple[int, int]:
        return cfg.batch.micro_batch_size, cfg.batch.max_micro_batch_size

    def least(self, cfg: RunConfig) -> str:
        return f"micro_batch_size={cfg.batch.micro_batch_size}"

    def same(self, cfg: RunConfig) -> dict[str, Any]:
        """What a resumed record's search must share to lend its probes: the model size it probed at
        (the size the model search found, or the configured one)."""
        return {"n_layer": cfg.model.n_layer}

    def at(self, cfg: RunConfig, n: int) -> RunConfig:
        return dataclasses.replace(cfg, batch=dataclasses.replace(cfg.batch, micro_batch_size=n))

    def probe(self, plan: Plan, n: int, probe_dir: Path, budget: int | None) -> tuple[dict[str, Any], Probe]:
        probe = run_probe(dataclasses.replace(plan, cfg=self.at(plan.cfg, n)), probe_dir / f"mbs{n}", budget)
        return batch_probe_entry(n, probe), probe

    def reused_estimate(self, plan: Plan, n: int) -> int | None:
        return reused_estimate(plan, self.at(plan.cfg, n))

    def probe_line(self, count: int, n: int, entry: dict[str, Any], probe: Probe) -> str:
        reused = " (reused: resume=true)" if entry.get("reused") else ""
        return f"batch=auto: micro batch {n} -> {probe.status}{reused}"

    def record(self, search: SizeSearch, result: int | None, **found: Any) -> dict[str, Any]:
        """``run.batch_search``: ``{method, start, limit, n_layer, gpu_memory_bytes, probes,
        largest_fitting, reason, result}`` and ``memory_budget_gib`` under a budget."""
        cfg = search.plan.cfg
        out = {
            "method": search.method + ", then the largest without cudaMalloc retries",
            "start": cfg.batch.micro_batch_size,
            "limit": cfg.batch.max_micro_batch_size,
            "n_layer": cfg.model.n_layer,
            "gpu_memory_bytes": search.gpu_memory,
            "probes": search.probes,
            "largest_fitting": found.get("largest"),
            "reason": found.get("reason"),
            "result": result,
        }
        if search.budget is not None:
            out["memory_budget_gib"] = cfg.search.memory_budget_gib
        return out

    def find(
        self,
        plan: Plan,
        job_dir: Path,
        *,
        on_probe: OnProbe | None = None,
        reuse: ReusedProbes | None = None,
    ) -> tuple[Plan, dict[str, Any]]:
        """``plan`` at the micro batch :func:`find_micro_batch` chooses, and the search's record."""
        size, record = find_micro_batch(plan, job_dir, on_probe=on_probe, reuse=reuse)
        if size == plan.cfg.batch.max_micro_batch_size:
            log.info(
                "batch=auto: every size up to batch.max_micro_batch_size=%d fits; a larger one may too "
                "(raise batch.max_micro_batch_size to search further)",
                size,
            )
        log.info("batch=auto: measuring at micro batch %d", size)
        return dataclasses.replace(plan, cfg=self.at(plan.cfg, size)), record


MICRO_BATCH = MicroBatch()
"""``batch=auto``'s axis of :class:`flopsweep.sizesearch.SizeSearch`."""


def find_micro_batch(
    plan: Plan,
    job_dir: Path,
    *,
    on_probe: OnProbe | None = None,
    reuse: ReusedProbes | None = None,
) -> tuple[int, dict[str, Any]]:
    """Search the largest ``micro_batch_size`` for ``plan.cfg`` (validated, ``batch.name == "auto"``),
    then the largest without ``cudaMalloc`` retries (:func:`choose_micro_batch`); each probe runs on
    the plan's layout (:func:`flopsweep.sizesearch.run_probe`), within ``search.memory_budget_gib``
    when that is set.

    Probes start at ``batch.micro_batch_size`` and stop at ``batch.max_micro_batch_size``.
    Each runs in ``job_dir/batch_search/mbs<N>/`` with ``profile=false``.

    Args:
        on_probe: called after every probe with the record of the search so far (``result``,
            ``largest_fitting`` and ``reason`` null), before the search goes on: what a run
            interrupted during the search (SIGTERM, Ctrl-C) records.
        reuse: probes of the record that ``resume=true`` runs again, by micro batch
            (:func:`flopsweep.reuse.reusable_probes`): such a size is not probed again; its entry
            is taken over with ``"reused": true`` and its outcome stands (an ``ok`` one without a
            measured peak guides by its estimate, computed again).

    Returns:
        ``(size, record)`` where the record lists every probe with its status and peak
        memory, for ``metrics.json["run"]["batch_search"]``.

    Raises:
        NothingFits: when even ``batch.micro_batch_size`` runs out of memory (or over the budget).
        ProbeFailed: when a probe ends in ``error`` or ``invalid`` (not ``oom``).
    """
    search = SizeSearch.start(MICRO_BATCH, plan, job_dir, on_probe=on_probe, reuse=reuse)
    largest = search.largest()
    while (n := next_retry_probe(search.probes)) is not None:
        search.fits(n)
    size, reason = choose_micro_batch(search.probes)
    log.info("batch=auto: micro batch %d: %s", size, reason)
    return size, search.record(size, largest=largest, reason=reason)


def estimated_largest(cfg: Any, layout: Any, capacity: int) -> int | None:
    """The micro batch ``batch=auto`` should reach by the memory estimate: the largest size from
    ``batch.micro_batch_size`` to ``batch.max_micro_batch_size`` whose estimated peak per rank is
    within ``capacity`` bytes (:func:`flopsweep.sizesearch.estimated_largest`). ``plan=true``
    predicts a ``batch=auto`` job there (:func:`flopsweep.job.dryrun.auto_batch_size`); the run's
    probes, which measure, decide what it measures. None when even ``batch.micro_batch_size`` is
    estimated over ``capacity``."""
    return estimated_size(MICRO_BATCH, cfg, layout, capacity)


def batch_probe_entry(n: int, probe: Probe) -> dict[str, Any]:
    """One probe of ``run.batch_search.probes``: the micro batch ``n``, status, peak allocated memory
    (bytes, max over ranks), ``cuda_alloc_retries`` (the most over the ranks; null off CUDA) and,
    over the budget, the reason."""
    ranks = (probe.outcome.ranks if probe.outcome else None) or []
    retries = [r.get("cuda_alloc_retries") for r in ranks]
    entry = {
        "micro_batch_size": n,
        "status": probe.status,
        "peak_cuda_allocated_bytes": probe.peak_cuda_allocated_bytes,
        "cuda_alloc_retries": None if None in retries or not retries else max(retries),
    }
    return entry | ({"reason": probe.reason} if probe.status == "over_budget" else {})


def reused_estimate(plan: Plan, cfg: Any) -> int | None:
    """:func:`flopsweep.memory.peak_bytes` per rank (bytes) of ``cfg`` on ``plan``'s layout: what
    guides a CPU search, which a reused ``batch_search`` probe does not keep; None when it fails."""
    from flopsweep.memory import peak_bytes

    try:
        return peak_bytes(cfg, plan.layout)
    except Exception:  # noqa: BLE001 - a guide only: without it the search doubles instead
        return None
