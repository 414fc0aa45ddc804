"""The one size search of ``batch=auto`` and ``search.model=largest``: the largest size of one axis
(the micro batch, :mod:`flopsweep.autobatch`; the blocks, :mod:`flopsweep.modelsearch`) that
trains, by doubling and then bisecting (:func:`search_max`), each size a short probe run.

On CUDA the peak memory of the probes that fit guides the search: a line through the two
largest gives the size that should just fit (:func:`predict_largest`), which is probed; the
search then gallops up from it until a size does not fit, and bisects. On the CPU the estimated
peak (:func:`flopsweep.memory.peak_bytes`) guides it against ``search.memory_budget_gib``, which is
then also the rule of what fits (:func:`budget_problem`), so that a CPU search is deterministic.
A wrong prediction costs probes, never the result.

Each probe (:func:`run_probe`) is one warm-up and one measured step in fresh worker processes
(never profiled), so an out-of-memory probe ends only that probe and leaves no allocator state
behind. :class:`SizeSearch` runs the probes of one :class:`SizeAxis`, keeps their entries, holds
the search so far after every probe (``on_probe``: what a run interrupted during the search
records) and takes over the probes of a resumed record (``reuse``, :mod:`flopsweep.reuse`).
``plan=true`` searches the memory estimate the same way (:func:`estimated_largest`).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from flopsweep import record as rec
from flopsweep.launch import SCRATCH, launch
from flopsweep.outcome import Outcome
from flopsweep.safe_folders import own_folder
from flopsweep.text import figure

if TYPE_CHECKING:
    from flopsweep.config import RunConfig
    from flopsweep.layout import Plan

log = logging.getLogger("flopsweep")

OnProbe = Callable[[dict[str, Any]], None]
"""A search's ``on_probe``: called after every probe with the search's record so far (``result`` null),
before the search goes on: what a run interrupted during the search records."""

ReusedProbes = dict[int, dict[str, Any]]
"""A search's ``reuse``: the probes of the record ``resume=true`` runs again, by size
(:func:`flopsweep.reuse.reusable_probes`): such a size is not probed again."""


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


class ProbeFailed(RuntimeError):
    """A probe failed for a reason other than memory; the search cannot go on.

    ``outcome`` is that probe's outcome (its error names the phase and rank); ``record``
    is the search so far, for ``metrics.json["run"][axis.key]`` (``batch_search``, ``model_search``).
    """

    def __init__(self, outcome: Outcome, record: dict[str, Any]) -> None:
        self.outcome = outcome
        self.record = record
        super().__init__(f"probe failed: {outcome.error}")


class NothingFits(ProbeFailed):
    """Even the first size (the starting micro batch, ``search.min_n_layer``) ran out of memory;
    ``outcome`` is that probe's."""


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
    search finds the same size every time, held to :func:`cpu_allowance`: the host's available memory
    shared by its ``nproc`` ranks less the launch's margin, or the budget where smaller, so that a
    search never makes the machine swap or the OOM killer end it (a budget over the host's memory was
    held to the budget alone).
    """
    if cfg.device == "cpu":
        allowed, what = cpu_allowance(cfg, nproc, budget)
        if estimated > allowed:
            return f"estimated peak {figure(estimated / GIB, 4)} GiB per rank, over {what}"
        return ""
    gib = cfg.search.memory_budget_gib
    if budget is not None and peak is not None and peak > budget:
        return f"peak allocated {figure(peak / GIB, 4)} GiB is over search.memory_budget_gib={gib}"
    return ""


def cpu_allowance(cfg: Any, nproc: int, budget: int | None = None) -> tuple[int, str]:
    """The estimated peak per rank (bytes, :func:`flopsweep.memory.peak_bytes`) a CPU size is held to, and
    what it is: the host's available memory shared by ``nproc`` ranks less the launch's margin
    (:func:`flopsweep.hostmem.cpu_peak_allowed`), or ``budget`` (``search.memory_budget_gib``, bytes)
    where that is smaller. A size within it passes the launch's check
    (:func:`flopsweep.hostmem.cpu_need_bytes` against the same free memory): the CPU probes
    (:func:`budget_problem`) and ``plan=true``'s ``batch=auto`` and ``search.model=largest`` rows
    (:func:`flopsweep.job.dryrun.plan_search_capacity`) use it alike."""
    from flopsweep import hostmem

    host = hostmem.cpu_peak_allowed(hostmem.available_bytes(), nproc)  # the launch's margin
    if budget is not None and budget <= host:
        return budget, f"search.memory_budget_gib={cfg.search.memory_budget_gib}"
    return host, f"the host's available memory per rank less the CPU's margin ({figure(host / GIB, 4)} GiB)"


def run_probe(plan: Plan, probe_dir: Path, budget: int | None = None) -> Probe:
    """Run ``plan.cfg`` for one warm-up and one measured step in fresh workers in ``probe_dir`` (on every
    node's ranks of a multi-node Slurm job: :func:`flopsweep.launch.launch`)
    (never profiled, no compute probe nor CPU step probe: a probe asks only "does it fit"), unless the
    CPU's budget rule refuses it first; the scratch files are removed after.

    Args:
        budget: bytes per rank the probe may use (:func:`budget_bytes`), None: the device's.

    Returns:
        The :class:`Probe`; its ``status`` is the run's, or ``over_budget``.

    Raises:
        RecordUnwritable: ``probe_dir`` or its parent (``batch_search/``, ``model_search/``) is a
            link or a file (never followed), or cannot be made.
    """
    from flopsweep.memory import peak_bytes

    cfg = dataclasses.replace(
        plan.cfg,
        steps=dataclasses.replace(plan.cfg.steps, warmup=1, measure=1),
        profile=False,  # a probe asks only "does it fit"; the measured run profiles
        predict=dataclasses.replace(plan.cfg.predict, probe=False, cpu_probe=False),  # and times its step
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
    for folder in (probe_dir.parent, probe_dir):  # real folders, never a link planted there
        own_folder(folder)
    outcome = launch(dataclasses.replace(plan, cfg=cfg), probe_dir)  # on every node of the job
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
:class:`NothingFits` records when it is the smallest size)."""


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


class SizeAxis(Protocol):
    """What one searched axis (:data:`flopsweep.autobatch.MICRO_BATCH`,
    :data:`flopsweep.modelsearch.N_LAYER`) tells :class:`SizeSearch`: its names, its bounds, how a
    probe of a size runs, and the record its search writes (``run.<key>``)."""

    name: str
    """The option, the prefix of its log lines and messages: ``batch=auto``, ``search.model=largest``."""
    key: str
    """The record's ``run.<key>`` and the job directory's folder of the probes: ``batch_search``."""
    size_key: str
    """A probe entry's size: ``micro_batch_size``, ``n_layer``."""

    def wanted(self, cfg: RunConfig) -> bool:
        """Whether ``cfg`` asks for this search (``batch=auto``, ``search.model=largest``)."""
        ...

    def bounds(self, cfg: RunConfig) -> tuple[int, int]:
        """The first size probed and the most probed, from the config (the search probes only the
        multiples of ``step(cfg)`` between them, where an axis has a ``step``: the first rounded up,
        the most rounded down; an axis may also have ``predict(search) -> size | None``, the size
        the search should reach from the probes so far, instead of :func:`predict_largest`)."""
        ...

    def least(self, cfg: RunConfig) -> str:
        """The first size as a message names it (``n_layer=1``): ``even <least> does not fit``."""
        ...

    def same(self, cfg: RunConfig) -> dict[str, Any]:
        """The keys of a resumed record's search that must equal this one's before its probes are
        taken over (:func:`flopsweep.reuse.reusable_probes`)."""
        ...

    def find(
        self,
        plan: Plan,
        job_dir: Path,
        *,
        on_probe: OnProbe | None = None,
        reuse: ReusedProbes | None = None,
    ) -> tuple[Plan, dict[str, Any]]:
        """The search run to its end: ``plan`` at the size found, and the search's record.

        Raises:
            NothingFits, ProbeFailed: see :meth:`SizeSearch.largest`.
        """
        ...

    def at(self, cfg: RunConfig, n: int) -> RunConfig:
        """``cfg`` at size ``n``, not validated: what the memory estimate of ``n`` reads."""
        ...

    def probe(self, plan: Plan, n: int, probe_dir: Path, budget: int | None) -> tuple[dict[str, Any], Probe]:
        """Probe size ``n`` of ``plan`` in ``probe_dir``: the record's entry and the :class:`Probe`."""
        ...

    def reused_estimate(self, plan: Plan, n: int) -> int | None:
        """The estimated peak per rank (bytes) that guides a reused ``ok`` probe without one; None."""
        ...

    def probe_line(self, count: int, n: int, entry: dict[str, Any], probe: Probe) -> str:
        """The log line of the ``count``-th probe."""
        ...

    def record(self, search: SizeSearch, result: int | None, **found: Any) -> dict[str, Any]:
        """The search's record so far (``result`` None until it ends), ``metrics.json["run"][key]``."""
        ...


@dataclasses.dataclass(kw_only=True)
class SizeSearch:
    """One search of the largest size of ``axis`` that trains on ``plan`` (validated), probe by probe.

    Probes run in ``job_dir/<axis.key>/<probe dir>``, within ``search.memory_budget_gib`` when that
    is set. After every probe ``on_probe`` gets the record so far (``result`` null), before the
    search goes on: what a run interrupted during the search (SIGTERM, Ctrl-C) records. A size in
    ``reuse`` (the probes of the record ``resume=true`` runs again, by size:
    :func:`flopsweep.reuse.reusable_probes`) is not probed again: its entry is taken over with
    ``"reused": true`` and its outcome stands.
    """

    axis: SizeAxis
    plan: Plan
    job_dir: Path
    on_probe: OnProbe | None = None
    reuse: ReusedProbes = dataclasses.field(default_factory=dict)
    budget: int | None = None
    """``search.memory_budget_gib`` in bytes (:func:`budget_bytes`); None: the device's memory."""
    capacity: int | None = None
    """The memory the probes' peaks are extrapolated to (:func:`guide_capacity`); None: no guide."""
    headroom: float = 0.99
    gpu_memory: int | None = None
    """The first GPU's memory, bytes (:func:`cuda_capacity`); None off CUDA."""
    probes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The record's entries, in the order probed."""
    points: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    """``(size, memory that guides)`` of the probes that fit."""
    outcomes: dict[int, Outcome] = dataclasses.field(default_factory=dict)

    @classmethod
    def start(
        cls,
        axis: SizeAxis,
        plan: Plan,
        job_dir: Path,
        *,
        on_probe: OnProbe | None = None,
        reuse: ReusedProbes | None = None,
    ) -> SizeSearch:
        """A search of ``axis`` on ``plan`` that has probed nothing yet."""
        budget = budget_bytes(plan.cfg)
        capacity, headroom = guide_capacity(plan.cfg.device, budget)
        return cls(
            axis=axis,
            plan=plan,
            job_dir=Path(job_dir),
            on_probe=on_probe,
            reuse=dict(reuse or {}),
            budget=budget,
            capacity=capacity,
            headroom=headroom,
            gpu_memory=cuda_capacity(plan.cfg.device),
        )

    @property
    def method(self) -> str:
        """The record's ``method`` (:func:`search_method`)."""
        return search_method(self.plan.cfg.device, self.capacity)

    def record(self, result: int | None = None, **found: Any) -> dict[str, Any]:
        """The axis's record of the search so far (:meth:`SizeAxis.record`)."""
        return self.axis.record(self, result, **found)

    def fits(self, n: int) -> bool:
        """Probe size ``n`` (or take over its reused probe), record it and say whether it fits.

        Raises:
            ProbeFailed: when the probe fails otherwise than by being too large (its status not in
                :data:`DOES_NOT_FIT`: an ``error``): the search cannot tell whether a larger size fits.
        """
        if n in self.reuse:
            entry = {**self.reuse[n], "reused": True}
            probe = reused_probe(self.reuse[n], self.axis.reused_estimate(self.plan, n))
        else:
            entry, probe = self.axis.probe(self.plan, n, self.job_dir / self.axis.key, self.budget)
        self.outcomes[n] = probe.outcome or unrun_outcome(probe)
        self.probes.append(entry)
        if self.on_probe is not None:
            self.on_probe(self.record())
        if probe.fits and probe.guide_bytes:
            self.points.append((n, probe.guide_bytes))
        log.info("%s", self.axis.probe_line(len(self.probes), n, entry, probe))
        if probe.status not in ("ok", *DOES_NOT_FIT):
            raise ProbeFailed(self.outcomes[n], self.record())
        return probe.fits

    def largest(self) -> int:
        """The largest size that fits, from the axis's first size to its most (:func:`search_max`,
        guided by :func:`predict_largest` where a capacity is known).

        Raises:
            NothingFits: when even the first size does not fit (its probe's outcome).
            ProbeFailed: see :meth:`fits`.
        """
        cfg = self.plan.cfg
        low, high = self.axis.bounds(cfg)
        step = getattr(self.axis, "step", lambda cfg: 1)(cfg)  # sizes are multiples of it
        first, last = -(-low // step), high // step
        capacity = self.capacity
        guess = getattr(self.axis, "predict", None) or (
            lambda s: predict_largest(s.points, s.capacity, s.headroom)
        )
        predict = (lambda: (n // step) if (n := guess(self)) is not None else None) if capacity else None
        found, _ = search_max(lambda u: self.fits(u * step), first, last, predict)
        if found is None:
            raise NothingFits(self.outcomes[first * step], self.record())
        return found * step


def estimated_largest(axis: SizeAxis, cfg: Any, layout: Any, capacity: int) -> int | None:
    """The size of ``axis`` its search should reach by the memory estimate: the largest from its
    first size to its most whose estimated peak per rank is within ``capacity`` bytes
    (:func:`flopsweep.memory.peak_bytes`, the figure a CPU probe is held to), searched as the probes
    are (:func:`search_max`). ``plan=true`` estimates a searched job there
    (:mod:`flopsweep.job.dryrun`); the run's probes, which measure, decide what it measures.

    Args:
        cfg: a resolved ``RunConfig`` of a searched job (``batch.name == "auto"``,
            ``search.model == "largest"``).
        layout: its parallel degrees (:attr:`flopsweep.layout.Plan.layout`).
        capacity: bytes per rank: the GPU's memory, or ``search.memory_budget_gib``'s when smaller.

    Returns:
        The size, or None when even the first size is estimated over ``capacity``.
    """
    from flopsweep.memory import peak_bytes

    step = getattr(axis, "step", lambda cfg: 1)(cfg)
    low, high = axis.bounds(cfg)
    fits = lambda u: peak_bytes(axis.at(cfg, u * step), layout) <= capacity  # noqa: E731
    largest, _ = search_max(fits, -(-low // step), high // step)
    return None if largest is None else largest * step
