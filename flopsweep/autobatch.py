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

The probe (:func:`run_probe`), the memory-budget rule (:func:`budget_problem`,
``search.memory_budget_gib``) and the search itself (:func:`search_max`, :func:`predict_largest`)
are shared with ``search.model=largest`` (:mod:`flopsweep.modelsearch`), which searches
``model.n_layer`` the same way.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopsweep import record as rec
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


GIB = 2**30

DOES_NOT_FIT = ("oom", "over_budget", "killed", "refused")
"""Probe statuses that mean "too large" (a search goes on below them); any other failure ends it
(:class:`ProbeFailed`). ``refused``: validation refused the size (the host memory that offload needs)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Probe:
    """One probe run: does ``plan.cfg`` train (one warm-up and one measured step)?

    Attributes:
        status: the run's status (``ok``, ``oom``, ``error``, ``invalid``); ``over_budget``
            when it broke the memory budget (:func:`budget_problem`; on the CPU then no worker
            started); ``killed`` when a rank was killed by SIGKILL, most often the kernel's OOM
            killer when offload fills the host's memory. Only ``ok`` fits; :data:`DOES_NOT_FIT`
            let a search go on.
        outcome: the run's outcome; None when it was not launched.
        peak_cuda_allocated_bytes: the peak allocated GPU memory, max over ranks (None off CUDA
            or when it did not run to the end).
        estimated_peak_bytes: ``flopsweep.memory.peak_bytes`` per rank (the CPU's budget rule);
            None when the size was refused before it was estimated.
        step_time_s: the measured step's time (slowest rank), seconds; None unless ``ok``.
        reason: why it does not fit, one line (empty when it fits).
    """

    status: str
    outcome: Outcome | None
    peak_cuda_allocated_bytes: int | None
    estimated_peak_bytes: int | None
    step_time_s: float | None
    reason: str = ""

    @property
    def fits(self) -> bool:
        return self.status == "ok"

    @property
    def guide_bytes(self) -> int | None:
        """The memory that guides the search: the measured peak on CUDA, else the estimate."""
        if self.outcome is None or self.outcome.ranks is None:
            return None
        return self.peak_cuda_allocated_bytes or self.estimated_peak_bytes


def budget_bytes(cfg: Any) -> int | None:
    """``search.memory_budget_gib`` in bytes: the memory per rank that probes treat as the
    device's capacity (None: the device's own)."""
    gib = cfg.search.memory_budget_gib
    return int(gib * GIB) if gib else None


def budget_problem(cfg: Any, *, estimated: int, peak: int | None, budget: int | None, nproc: int) -> str:
    """Why a probe of ``cfg`` breaks the memory budget, or ``""``.

    On CUDA the rule is the measured ``peak`` allocated memory (bytes, max over ranks) against
    ``budget`` (bytes per rank; None: no rule, the GPU's own out-of-memory error decides). On
    the CPU, which counts no device memory, it is the ``estimated`` peak per rank
    (``flopsweep.memory.peak_bytes``: the offloaded states too), deterministic, so that a CPU
    search finds the same size every time; without a budget a CPU probe is held to the host's
    available memory shared by its ``nproc`` ranks, so that a search never makes the machine swap
    or the OOM killer end it.
    """
    gib = cfg.search.memory_budget_gib
    if cfg.device == "cpu":
        what = f"search.memory_budget_gib={gib}"
        if budget is None:
            from flopsweep import hostmem

            budget = hostmem.available_bytes() // max(1, nproc)
            what = f"the host's available memory per rank ({budget / GIB:.4g} GiB)"
        if estimated > budget:
            return f"estimated peak {estimated / GIB:.4g} GiB per rank, over {what}"
        return ""
    if budget is not None and peak is not None and peak > budget:
        return f"peak allocated {peak / GIB:.4g} GiB is over search.memory_budget_gib={gib}"
    return ""


def run_probe(plan: Plan, probe_dir: Path, budget: int | None = None) -> Probe:
    """Run ``plan.cfg`` for one warm-up and one measured step in fresh workers in ``probe_dir``
    (never profiled: a probe asks only "does it fit"), unless the CPU's budget rule refuses it
    first; the scratch files are removed after.

    Args:
        budget: bytes per rank the probe may use (:func:`budget_bytes`), None: the device's.

    Returns:
        The :class:`Probe`; its ``status`` is the run's, or ``over_budget``.
    """
    from flopsweep.memory import peak_bytes

    cfg = dataclasses.replace(
        plan.cfg,
        steps=dataclasses.replace(plan.cfg.steps, warmup=1, measure=1),
        profile=False,  # a probe asks only "does it fit"; the measured run profiles
    )
    estimated = peak_bytes(cfg, plan.layout)
    rule = {"estimated": estimated, "budget": budget, "nproc": plan.nproc_per_node}
    if cfg.device == "cpu" and (reason := budget_problem(cfg, peak=None, **rule)):  # before any launch
        return Probe(
            status="over_budget",
            outcome=None,
            peak_cuda_allocated_bytes=None,
            estimated_peak_bytes=estimated,
            step_time_s=None,
            reason=reason,
        )
    outcome = launch_local(dataclasses.replace(plan, cfg=cfg), probe_dir)
    shutil.rmtree(probe_dir / SCRATCH, ignore_errors=True)
    ranks = outcome.ranks or []
    peaks = [r["peak_cuda_allocated_bytes"] for r in ranks if r.get("peak_cuda_allocated_bytes")]
    peak = max(peaks) if peaks else None
    times = [r["step_times_s"][-1] for r in ranks if r.get("step_times_s")]
    error = outcome.error or {}
    status, reason = outcome.status, "" if outcome.status == "ok" else str(error.get("type"))
    if status == "ok" and cfg.device != "cpu" and (over := budget_problem(cfg, peak=peak, **rule)):
        status, reason = "over_budget", over
    if error.get("type") == "WorkerKilled" and "SIGKILL" in str(error.get("message")):
        status, reason = "killed", str(error["message"])  # most often the host's OOM killer
    return Probe(
        status=status,
        outcome=outcome,
        peak_cuda_allocated_bytes=peak,
        estimated_peak_bytes=estimated,
        step_time_s=max(times) if times and status == "ok" else None,
        reason=reason,
    )


def find_micro_batch(
    plan: Plan,
    job_dir: Path,
    *,
    on_probe: Callable[[dict[str, Any]], None] | None = None,
    reuse: dict[int, dict[str, Any]] | None = None,
) -> tuple[int, dict[str, Any]]:
    """Search the largest ``micro_batch_size`` for ``plan.cfg`` (validated, ``batch.name == "auto"``),
    then the largest without ``cudaMalloc`` retries (:func:`choose_micro_batch`); each probe runs on
    the plan's layout (:func:`run_probe`), within ``search.memory_budget_gib`` when that is set.

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
    cfg = plan.cfg
    budget = budget_bytes(cfg)
    capacity, headroom = guide_capacity(cfg.device, budget)
    gpu_memory, job_dir = cuda_capacity(cfg.device), Path(job_dir)
    probes: list[dict[str, Any]] = []
    points: list[tuple[int, int]] = []  # (size, peak allocated bytes) of the probes that fit
    outcomes: dict[int, Outcome] = {}

    def record(size: int | None, largest: int | None = None, reason: str | None = None) -> dict[str, Any]:
        out = {
            "method": search_method(cfg.device, capacity) + ", then the largest without cudaMalloc retries",
            "start": cfg.batch.micro_batch_size,
            "limit": cfg.batch.max_micro_batch_size,
            "n_layer": cfg.model.n_layer,
            "gpu_memory_bytes": gpu_memory,
            "probes": probes,
            "largest_fitting": largest,
            "reason": reason,
            "result": size,
        }
        if budget is not None:
            out["memory_budget_gib"] = cfg.search.memory_budget_gib
        return out

    def fits(n: int) -> bool:
        probe_cfg = dataclasses.replace(cfg, batch=dataclasses.replace(cfg.batch, micro_batch_size=n))
        if n in (reuse or {}):
            entry, probe = (
                {**reuse[n], "reused": True},
                reused_probe(reuse[n], reused_estimate(plan, probe_cfg)),
            )
        else:
            probe = run_probe(
                dataclasses.replace(plan, cfg=probe_cfg), job_dir / "batch_search" / f"mbs{n}", budget
            )
            entry = batch_probe_entry(n, probe)
        outcomes[n] = probe.outcome or unrun_outcome(probe)
        probes.append(entry)
        if on_probe is not None:
            on_probe(record(None))
        if probe.fits and probe.guide_bytes:
            points.append((n, probe.guide_bytes))
        log.info(
            "batch=auto: micro batch %d -> %s%s",
            n,
            probe.status,
            " (reused: resume=true)" if reuse and n in reuse else "",
        )
        if probe.status not in ("ok", *DOES_NOT_FIT):
            raise ProbeFailed(outcomes[n], record(None))
        return probe.fits

    predict = (lambda: predict_largest(points, capacity, headroom)) if capacity else None
    largest, _ = search_max(fits, cfg.batch.micro_batch_size, cfg.batch.max_micro_batch_size, predict)
    if largest is None:
        raise NothingFits(outcomes[cfg.batch.micro_batch_size], record(None))
    while (n := next_retry_probe(probes)) is not None:
        fits(n)
    size, reason = choose_micro_batch(probes)
    log.info("batch=auto: micro batch %d: %s", size, reason)
    return size, record(size, largest, reason)


def estimated_largest(cfg: Any, layout: Any, capacity: int) -> int | None:
    """The micro batch ``batch=auto`` should reach by the memory estimate: the largest size from
    ``batch.micro_batch_size`` to ``batch.max_micro_batch_size`` whose estimated peak per rank
    (:func:`flopsweep.memory.peak_bytes`) is within ``capacity``, searched as the probes are
    (:func:`search_max`, doubling then bisecting) under the rule a CPU probe is held to
    (:func:`budget_problem`: the estimate against the budget, whole). ``plan=true`` predicts a
    ``batch=auto`` job there (:func:`flopsweep.job.auto_batch_size`); the run's probes, which measure,
    decide what it measures.

    Args:
        cfg: a resolved ``RunConfig`` with ``batch.name == "auto"``.
        layout: its parallel degrees (:attr:`flopsweep.layout.Plan.layout`).
        capacity: bytes per rank: the GPU's memory, or ``search.memory_budget_gib``'s when smaller.

    Returns:
        The size, or None when even ``batch.micro_batch_size`` is estimated over ``capacity``.
    """
    return largest_within(
        lambda n: dataclasses.replace(cfg, batch=dataclasses.replace(cfg.batch, micro_batch_size=n)),
        layout,
        capacity,
        cfg.batch.micro_batch_size,
        cfg.batch.max_micro_batch_size,
    )


def largest_within(
    sized: Callable[[int], Any], layout: Any, capacity: int, low: int, high: int
) -> int | None:
    """The largest ``n`` from ``low`` to ``high`` whose config ``sized(n)`` has an estimated peak per
    rank (:func:`flopsweep.memory.peak_bytes`, the figure a CPU probe is held to) within ``capacity``
    bytes, searched as the probes are (:func:`search_max`); None when even ``low`` is over it. The
    one search of :func:`estimated_largest` (micro batch) and
    :func:`flopsweep.modelsearch.estimated_largest_n_layer` (blocks)."""
    from flopsweep.memory import peak_bytes

    largest, _ = search_max(lambda n: peak_bytes(sized(n), layout) <= capacity, low, high)
    return largest


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


def search_method(device: str, capacity: int | None) -> str:
    """The record's ``method`` of a search: how it probes and what memory guides it."""
    if not capacity:
        return "double then bisect"
    return "double then bisect, guided by " + ("peak memory" if device == "cuda" else "the estimated peak")


def unrun_outcome(probe: Probe) -> Outcome:
    """The outcome of a probe that ran no worker: ``oom`` for a size over the budget (type
    ``OverMemoryBudget``), ``invalid`` for one validation refused (type ``ConfigError``)."""
    if probe.status == "refused":
        return Outcome("invalid", error=rec.error("ConfigError", probe.reason, "config"))
    return Outcome("oom", error=rec.error("OverMemoryBudget", probe.reason, "launch"))


REUSED_ERROR_TYPES = {"oom": "OutOfMemoryError", "over_budget": "OverMemoryBudget", "killed": "WorkerKilled"}
"""The ``error.type`` of a reused probe that did not fit, by its status (what
:class:`flopsweep.autobatch.NothingFits` records when it is the smallest size)."""


def reused_probe(entry: dict[str, Any], estimated_peak_bytes: int | None = None) -> Probe:
    """The :class:`Probe` of a reused probe ``entry`` (a status of
    :data:`flopsweep.reuse.REUSED_STATUSES`): an ``ok`` one fits, with its measured peak (bytes) or its
    ``estimated_peak_bytes`` (the entry's, else this argument) to guide the search; one too large
    has an outcome whose error says it was reused (what ``NothingFits`` records for the smallest
    size). Its step time is not kept (the entry has tokens/s)."""
    status = entry["status"]
    reason = str(entry.get("reason") or "")
    if status == "ok":
        outcome = Outcome("ok", ranks=[])
    else:
        message = (
            f"a probe of the run resumed (reused, not run again): {status}{f': {reason}' if reason else ''}"
        )
        error = rec.error(REUSED_ERROR_TYPES[status], message, "launch")
        outcome = Outcome("oom" if status in ("oom", "over_budget") else "error", error=error)
    return Probe(
        status=status,
        outcome=outcome,
        peak_cuda_allocated_bytes=entry.get("peak_cuda_allocated_bytes"),
        estimated_peak_bytes=entry.get("estimated_peak_bytes") or estimated_peak_bytes,
        step_time_s=None,
        reason=reason,
    )


def guide_capacity(device: str, budget: int | None) -> tuple[int | None, float]:
    """The memory a line through the probes' peaks is extrapolated to, and the share of it they
    may reach (:func:`predict_largest`): the budget, whole; else the GPU's memory at 99%; None
    off CUDA without a budget."""
    if budget is not None:
        return budget, 1.0
    return cuda_capacity(device), 0.99


def cuda_capacity(device: str) -> int | None:
    """Memory of the first visible GPU in bytes, or None off CUDA (the search then only doubles
    and bisects). The probes' workers are spawned, so this process touching CUDA is harmless
    (``system_info`` reads the device name here too)."""
    if device != "cuda":
        return None
    import torch

    return int(torch.cuda.get_device_properties(0).total_memory) if torch.cuda.is_available() else None
