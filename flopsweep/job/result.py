"""What one job is (:class:`JobInfo`, from Hydra) and what it has found so far (:class:`JobResult`),
the one object the lifecycle's steps (:mod:`flopsweep.job.lifecycle`) pass on and the record
assembly (:func:`flopsweep.job.records.recorded`) writes.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopsweep.cost import power_limit_w as ranks_power_limit_w

if TYPE_CHECKING:
    from flopsweep.config import RunConfig
    from flopsweep.layout import Layout, Plan
    from flopsweep.outcome import Outcome


@dataclass(frozen=True, kw_only=True)
class JobInfo:
    """Where and as what the job runs (from Hydra)."""

    job_dir: Path
    overrides: list[str]
    job_num: int | None = None
    choices: dict[str, str] = dataclasses.field(default_factory=dict)
    """The option Hydra picked in each config group (``HydraConfig.get().runtime.choices``):
    validation refuses a schema node picked as an option and a ZeRO stage that contradicts
    ``backend=zero<N>`` (:func:`flopsweep.plan.check_choices`)."""
    sweep_dir: str | None = None
    """``hydra.sweep.dir`` of a sweep (None for a single run): it names the repeat group."""
    hydra_files: dict[str, str] = dataclasses.field(default_factory=dict)
    """The job's ``.hydra/`` files, name -> text (:func:`flopsweep.hydrafiles.hydra_files`), which
    :func:`flopsweep.job.lifecycle.run_job` writes once its checks pass; empty: none."""


@dataclass(frozen=True, kw_only=True)
class RankFacts:
    """What rank 0 (and the ranks) measured of the machine, the record's ``system.*``; each null
    when no rank measured (a run that never ran its steps)."""

    device_name: str | None = None
    """``system.device_name``: rank 0's device (``torch.cuda.get_device_name``, ``cpu``)."""
    power_limit_w: float | None = None
    """``system.power_limit_w``: the GPUs' enforced power limit, W (:func:`flopsweep.cost.power_limit_w`)."""
    interconnect: list[dict[str, Any]] | None = None
    """``system.interconnect``: rank 0's probe of the links (``[]`` on one rank)."""
    cpu_threads: int | None = None
    """``system.cpu_threads``: rank 0's intra-op threads."""
    compute_probe: dict[str, Any] | None = None
    """``predict.probe=true``: rank 0's compute probe (``metrics.predicted.probe``); else None."""
    layer_probe: dict[str, Any] | None = None
    """``predict.layer_probe=true``: rank 0's layer probe (``metrics.predicted.layer_probe``); else None."""
    optimizer: dict[str, Any] | None = None
    """``system.optimizer``: rank 0's optimizer as built (:func:`flopsweep.backends.optimizer_facts`)."""

    @classmethod
    def of(cls, ranks: list[dict[str, Any]]) -> RankFacts:
        """The facts of the ranks' reports (``ranks[0]`` is rank 0's)."""
        first = ranks[0]
        return cls(
            device_name=first["device"],
            power_limit_w=ranks_power_limit_w(ranks),
            interconnect=first.get("interconnect"),
            cpu_threads=first.get("cpu_threads"),
            compute_probe=first.get("compute_probe"),
            layer_probe=first.get("layer_probe"),
            optimizer=first.get("optimizer"),
        )


@dataclass(kw_only=True)
class JobResult:
    """One job from its config to its record. :func:`flopsweep.job.run_job` passes it through the
    steps planned -> sized -> launched -> measured -> recorded; each fills in what it finds, and a
    step that ends the job sets ``status`` (:meth:`fail`), after which only ``recorded`` runs."""

    path: Path
    """The job's ``metrics.json``."""
    cfg: RunConfig
    """The config the record is written with: as given until validated, then the validated one
    (:attr:`Plan.cfg`), then at the sizes the searches found (or reached, when one failed)."""
    run: dict[str, Any]
    """The record's ``run`` (id, times, overrides, job number, repeat group); the searches hold
    themselves in it (``batch_search``, ``model_search``) after every probe."""
    load_start: list[float] | None = None
    """The host's load average at the job's start (``system.loadavg.start``)."""
    started: float | None = dataclasses.field(default_factory=time.monotonic)
    """``time.monotonic()`` when the job started (the object was made): ``run.wall_s`` is the seconds
    from it to the record; None where the job's start was not seen here (a lost Slurm job)."""
    plan: Plan | None = None
    """planned: the validated plan, as configured (before the searches)."""
    calibrations: list[tuple[str, dict[str, Any]]] = dataclasses.field(default_factory=list)
    """planned: the ``predict.calibration`` records, read before the launch."""
    resumed: Any = None
    """planned: the record ``resume=true`` runs again, whose searches' probes are taken over (a
    :class:`flopsweep.reuse.Resumed`; typed loosely so that the record assembly, which the sweep
    process imports, does not import the searches)."""
    layout: Layout | None = None
    """The plan's layout once the launch's checks passed (``system.parallel``); None: never launched."""
    launch_warnings: list[str] = dataclasses.field(default_factory=list)
    """What the launch warned about before any worker started, first in the record's ``warnings``."""
    predicted_peak_gib: float | None = None
    """``metrics.predicted_peak_gib`` (``run.before_run``'s when not ``ok``): the memory estimate of the
    config measured."""
    sized: Plan | None = None
    """sized: the plan at the sizes the searches found (the plan itself without a search)."""
    measuring: RunConfig | None = None
    """launched: the config of the measured run, once it starts: what an interrupt records."""
    outcome: Outcome | None = None
    """launched: what the ranks (or a search that failed) reported."""
    status: str | None = None
    """The record's status once decided (``ok``, ``oom``, ``error``, ``invalid``)."""
    error: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None
    """measured: the record's ``metrics`` (``ok`` only)."""
    facts: RankFacts | None = None
    """measured: what the ranks measured of the machine."""
    warnings: list[str] = dataclasses.field(default_factory=list)
    """measured: the record's ``warnings`` (the launch's, the profiler's, the ranks')."""
    log_result: bool = True
    """Log the record's line when written; False where the caller prints it itself."""

    def fail(self, status: str, error: dict[str, Any] | None) -> JobResult:
        """End the job as ``status`` with ``error`` (an :func:`flopsweep.record.error` dict)."""
        self.status, self.error = status, error
        return self
