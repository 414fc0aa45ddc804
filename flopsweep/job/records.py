"""The record assembly: from a :class:`~flopsweep.job.result.JobResult` to ``metrics.json``, in
one place. :func:`measured` turns the ranks' reports into metrics (or an ``invalid`` status),
:func:`recorded` writes the record of every outcome, :func:`record_lost_job` the record of a Slurm
job that gave the sweep nothing. Free of the run path: the Slurm launcher's sweep process and the
sweep callback import it.

This process, not rank 0, writes the record, so that a run whose workers die still leaves one.
Under Slurm (and submitit_local) each task is one rank and only the task that
:func:`flopsweep.slurm.writes_record` names (global rank 0) writes it.
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from flopsweep import forecast, memory_edge, probe_fallback, tree
from flopsweep import record as rec
from flopsweep.config import ConfigError, RunConfig
from flopsweep.files import NotRecorded, RecordUnwritable, atomic_write_json
from flopsweep.job.result import JobInfo, JobResult, RankFacts
from flopsweep.job.resume import set_aside
from flopsweep.launch import SCRATCH
from flopsweep.layout import Layout
from flopsweep.memory_fix import gpu_memory_fix as own_fix
from flopsweep.metrics import build_record, compute_metrics, profile_warnings, sanity_problem, system_info
from flopsweep.noise import noise_warnings
from flopsweep.oom_note import GPU_MEMORY_FIX, OOM_ESTIMATE, oom_estimate_line
from flopsweep.outcome import last_phase
from flopsweep.plan import fixed_nproc
from flopsweep.record import METRICS_FILE
from flopsweep.safe_read import RecordError, read_json
from flopsweep.signals import signals_deferred
from flopsweep.slurm import writes_record
from flopsweep.text import figure, printable

log = logging.getLogger("flopsweep")


LAST_RECORD: dict[str, Any] = {"path": None, "status": None}
"""The last record this process wrote (its path and status): what ``run.py`` may truthfully
say when a signal stops it."""
INTERRUPTS = ("KeyboardInterrupt", "Terminated")
"""The ``error.type`` of a run a signal stopped (Ctrl-C, SIGTERM: ``lifecycle.interrupt_recorded``): its
warning is :func:`failure_line` (status, phase, type, message, path) for a single run too."""


def now() -> str:
    """The time now, UTC, to the second (ISO 8601): ``run.started_at``, ``run.finished_at``."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def measured(job: JobResult) -> JobResult:
    """launched -> measured: the metrics of an ``ok`` outcome, checked for plausibility
    (:func:`flopsweep.metrics.sanity_problem`: ``invalid``, type ``TimingSanity``), or the outcome's
    own status and error.

    ``metrics.predicted_peak_gib`` is the plan's memory estimate (again at the sizes the searches
    found, or reached when one failed: :func:`estimate_at_sizes`); ``metrics.predicted`` the
    prediction from the config, the ``predict.calibration`` records read before the launch and the
    probes every rank ran before warm-up (GEMM rate, ``system.interconnect``, with ``predict.probe``
    the compute probe): nothing of the measured steps enters it. A record that is not ``ok`` has every
    metric null and keeps both under ``run.before_run`` (:func:`before_run`; an ``invalid`` one the
    prediction made with the probes). The record's ``warnings`` start with the launch's
    (:attr:`JobResult.launch_warnings`), whatever the status; an ``oom`` whose error names the GPU's
    memory adds the ``oom_estimate`` line (:func:`flopsweep.oom_note.oom_estimate_line`), its fix the
    levers the config has not pulled, estimated on that memory off its edge
    (:func:`flopsweep.memory_fix.gpu_memory_fix`).
    """
    cfg, layout, outcome = job.cfg, job.layout, job.outcome
    estimate_at_sizes(job)
    job.warnings = list(job.launch_warnings)
    if outcome.status != "ok":
        fix = (
            partial(own_fix, cfg, margin=memory_edge.EDGE_HEADROOM) if layout is not None else GPU_MEMORY_FIX
        )  # the config as launched
        line = (
            oom_estimate_line(job.predicted_peak_gib, outcome.error, fix) if outcome.status == "oom" else None
        )
        if line:
            job.warnings.append(line)
        return job.fail(outcome.status, outcome.error)
    metrics = compute_metrics(cfg, outcome.ranks, layout)
    metrics["predicted_peak_gib"] = job.predicted_peak_gib
    job.facts = RankFacts.of(outcome.ranks)
    metrics["predicted"] = forecast.prediction(
        cfg,
        layout,
        job.calibrations,
        gpus_per_node=layout.world_size // cfg.nnodes,
        device_name=job.facts.device_name,
        probe=job.facts.interconnect,
        gemm_tflops=metrics.get("measured_matmul_tflops"),
        compute_probe=job.facts.compute_probe,
        layer_probe=job.facts.layer_probe,
    )
    metrics["predicted"] = edge_marked(
        metrics["predicted"], job.predicted_peak_gib, job.facts.device_name, cfg.backend.name
    )
    metrics["probe_s"] = probe_seconds(job.facts)
    # a probe that fell back is a record warning (printed with the others, :func:`_log_result`)
    job.warnings += probe_fallback.probe_fallback_lines(metrics["predicted"])
    if problem := sanity_problem(cfg, metrics, cfg.device):
        job.metrics = metrics  # its run.before_run keeps what was known before the run (before_run)
        return job.fail("invalid", rec.error("TimingSanity", problem, "measure"))
    job.status, job.metrics = "ok", metrics
    job.warnings += profile_warnings(outcome.ranks, job.path.parent) + outcome.warnings
    return job


def edge_marked(
    predicted: dict[str, Any], peak_gib: float | None, device_name: str | None, backend: str | None = None
) -> dict[str, Any]:
    """``predicted`` with the memory edge's flag after its ``source`` (:func:`flopsweep.memory_edge.mark`)
    where the estimate ``peak_gib`` (``metrics.predicted_peak_gib``) leaves under
    :data:`flopsweep.memory_edge.EDGE_HEADROOM` of the GPU ``device_name``'s memory (the peak table's);
    as given on the CPU, for a GPU the table does not know, or without an estimate."""
    capacity = memory_edge.device_capacity_bytes(device_name)
    peak = None if peak_gib is None else peak_gib * 2**30
    return memory_edge.mark(predicted, peak, capacity, backend)


def estimate_at_sizes(job: JobResult) -> JobResult:
    """``job.predicted_peak_gib`` again (:func:`predicted_peak_gib`) where the job's config is no
    longer the plan's, whose estimate :func:`flopsweep.job.lifecycle.ready` made: ``batch=auto`` chose
    another micro batch, ``search.model=largest`` another model, or a search failed at the sizes it
    reached; nothing for a job that never reached the launch (no layout)."""
    if job.plan is not None and job.layout is not None and job.cfg != job.plan.cfg:
        job.predicted_peak_gib = predicted_peak_gib(job.cfg, job.layout)
    return job


def before_run(job: JobResult, device_name: str | None) -> dict[str, Any] | None:
    """``run.before_run`` of a job that is not ``ok`` (:data:`flopsweep.record.BEFORE_RUN`): what it
    knew before any rank started (:data:`flopsweep.record.PRE_RUN_METRICS`), ``{"predicted_peak_gib":
    <GiB or None>, "predicted": <dict or None>}``. From ``job.metrics`` where the ranks ran (an
    ``invalid`` run: the prediction made with their probes); else ``predicted_peak_gib`` is
    :attr:`JobResult.predicted_peak_gib` and ``predicted`` :func:`flopsweep.forecast.prediction` from the
    config, the layout and the ``predict.calibration`` records, on ``device_name``'s datasheet peak: no
    probe's figure, as no rank reported one, which its ``source`` says under ``predict.probe`` or
    ``predict.layer_probe``. None for a job that never passed the launch's checks
    (:func:`flopsweep.job.lifecycle.ready`: no layout) or was not planned here (a lost Slurm job)."""
    if job.metrics is not None:
        return {key: job.metrics.get(key) for key in rec.PRE_RUN_METRICS}
    cfg, layout = job.cfg, job.layout
    if job.plan is None or layout is None:
        return None
    predicted = forecast.prediction(
        cfg, layout, job.calibrations, gpus_per_node=layout.world_size // cfg.nnodes, device_name=device_name
    )
    predicted = edge_marked(predicted, job.predicted_peak_gib, device_name, cfg.backend.name)
    return {"predicted_peak_gib": job.predicted_peak_gib, "predicted": predicted}


def probe_seconds(facts: RankFacts) -> float | None:
    """``metrics.probe_s``: rank 0's wall seconds in the step-time probes that ran before warm-up, the
    layer probe's and the compute probe's ``wall_s`` summed (3 decimals); None when neither ran."""
    walls = [
        probe["wall_s"]
        for probe in (facts.layer_probe, facts.compute_probe)
        if isinstance(probe, dict) and isinstance(probe.get("wall_s"), int | float)
    ]
    return round(sum(walls), 3) if walls else None


def probe_share(metrics: dict[str, Any] | None, wall_s: float | None) -> float | None:
    """``metrics.probe_share``: ``metrics.probe_s`` over the job's wall seconds (``run.wall_s``, 4
    decimals); None without either."""
    probe = (metrics or {}).get("probe_s")
    if not isinstance(probe, int | float) or not wall_s:
        return None
    return round(probe / wall_s, 4)


def predicted_peak_gib(cfg: RunConfig, layout: Layout) -> float | None:
    """``metrics.predicted_peak_gib``: :func:`flopsweep.memory.estimate`'s peak allocated memory of
    the busiest rank, in GiB (6 decimals: about 1 KiB), for the config and layout about to run; None (and a
    warning) if the estimate fails, which must not stop the run."""
    from flopsweep.memory import estimate

    try:
        return round(estimate(cfg, layout).total_gib, 6)
    except Exception as exc:  # noqa: BLE001 - an estimate is no reason to lose the measurement
        log.warning("metrics.predicted_peak_gib left null: the memory estimate failed: %s", exc)
        return None


def recorded(job: JobResult, *, write: bool = True) -> dict[str, Any]:
    """-> recorded: build the record of ``job`` (its ``status`` decided) and write it to ``job.path``.

    ``system.world_size``, ``nproc_per_node`` and ``parallel`` come from ``job.layout`` (null for a
    run that never launched); ``system.device_name``, ``power_limit_w``, ``interconnect``,
    ``cpu_threads`` and ``optimizer`` from what the ranks measured (:class:`RankFacts`, null when no
    rank measured). A record that is not ``ok`` has every metric null and ``run.before_run``
    (:func:`before_run`: the metrics known before the run, or null); an ``ok`` one has no
    ``run.before_run``. An ``ok`` record adds the noise warnings
    (:func:`flopsweep.noise.noise_warnings`).
    Only the task that writes records writes it (:func:`flopsweep.slurm.writes_record`), and none with
    ``write`` False (a single run its checks refused: :func:`flopsweep.job.lifecycle.keeps_refusal`); the
    job's scratch files are removed after, and its line is logged unless ``job.log_result`` is False.

    Returns:
        The record (also when another task writes it).

    Raises:
        NotRecorded: when the record cannot be written; the message is the one line to print.
    """
    cfg, layout, facts = job.cfg, job.layout, job.facts or RankFacts()
    wall = round(time.monotonic() - job.started, 3) if job.started is not None else None
    run = {**job.run, "finished_at": now(), "wall_s": wall}
    if job.metrics is not None:
        job.metrics["probe_share"] = probe_share(job.metrics, wall)
    world = layout.world_size if layout else None
    nproc = world // cfg.nnodes if world else None
    system = system_info(
        cfg.device,
        world,
        facts.device_name,
        nproc,
        load_start=job.load_start,
        layout=layout,
        power_limit_w=facts.power_limit_w,
    )
    system["interconnect"] = facts.interconnect
    system["cpu_threads"] = facts.cpu_threads
    system["optimizer"] = facts.optimizer
    if job.status != "ok":  # what was known before the run stays known, outside metrics
        run[rec.BEFORE_RUN] = before_run(job, system["device_name"])
    warnings = list(job.warnings)
    if job.status == "ok" and job.metrics is not None:
        warnings += noise_warnings(
            cv=(job.metrics.get("iteration_time_s") or {}).get("cv"),
            load_start=(job.load_start or [None])[0],
            load_end=((system.get("loadavg") or {}).get("end") or [None])[0],
            cpu_count=system.get("cpu_count"),
            ranks=nproc,
        )
    record = build_record(
        cfg=cfg,
        status=job.status,
        error=job.error,
        run=run,
        system=system,
        metrics=job.metrics,
        warnings=warnings,
    )
    if not write or not writes_record():  # refused, so not kept; or another task of this Slurm job writes it
        return record
    path = job.path
    with signals_deferred():  # SIGINT/SIGTERM wait until the record is written and known
        try:
            atomic_write_json(path, record, overwrite=False)
        except RecordUnwritable as exc:
            raise NotRecorded(not_recorded_line(run, job.status, exc)) from None
        LAST_RECORD.update(path=str(path), status=job.status)
    shutil.rmtree(path.parent / SCRATCH, ignore_errors=True)
    if job.log_result:
        _log_result(record, path)
    return record


def run_ids(sweep_dir: Path) -> dict[str, str | None]:
    """``run.id`` by path (``str``, as :func:`flopsweep.tree.find` gives it under ``sweep_dir``) of
    every ``metrics.json`` there, None for one that cannot be read or has no ``run.id``; empty when
    ``sweep_dir`` is not a folder yet. Taken before a launcher submits, it is what
    :func:`record_lost_job`'s ``previous_run_id`` is looked up in (a record with another id since
    was written by the job itself)."""
    found: dict[str, str | None] = {}
    for path in tree.find(sweep_dir, METRICS_FILE):
        try:
            found[str(path)] = read_json(path)["run"]["id"]
        except (RecordError, OSError, ValueError, KeyError, TypeError):
            found[str(path)] = None
    return found


def record_lost_job(
    cfg: RunConfig, info: JobInfo, message: str, *, submitted_at: float, previous_run_id: str | None
) -> dict[str, Any]:
    """The record of a submitted job that gave the sweep no result: Slurm cancelled it (``scancel``,
    also while it was pending), it failed, timed out or never started. Written by the sweep process
    (:class:`flopsweep.cluster.JobWatch` saw the job end), so that the sweep goes on.

    A record that a task of this job wrote (its run id is not ``previous_run_id``, the one found in
    the job directory at submission) is kept and returned, and so is, under ``resume=true``, the
    previous record when it is ``ok`` (the job would have skipped itself). Any other record is set
    aside (:func:`set_aside`). The new record is ``error`` with type ``JobLost``, ``message``, and the
    phase the least advanced rank reached (``launch`` when none started; ``world_size`` and
    ``parallel`` null then, and ``parallel`` also when the config's degrees do not fit the world).
    Its line (:func:`failure_line`) is not logged: the caller prints it, once.

    Args:
        submitted_at: the submission time, seconds since the epoch (``time.time()``): ``run.started_at``.
    """
    job_dir = Path(info.job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    path = job_dir / METRICS_FILE
    try:
        old = read_json(path) if path.exists() else None
        if old is not None and (
            old["run"]["id"] != previous_run_id or (cfg.resume and old["status"] == "ok")
        ):
            return old
    except (RecordError, OSError, ValueError, KeyError, TypeError):
        pass  # unreadable: set aside below
    if os.path.lexists(path):  # without one, the job's tracebacks are this lost attempt's: kept
        set_aside(path)
    nproc = fixed_nproc(cfg.nproc_per_node)
    world = nproc * cfg.nnodes if nproc else None
    phase, rank = last_phase(job_dir / SCRATCH, world or 1)
    started = datetime.datetime.fromtimestamp(submitted_at, datetime.timezone.utc)
    run = {
        "id": uuid.uuid4().hex,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": None,
        "overrides": list(info.overrides),
        "job_num": info.job_num,
    }
    layout = None
    if phase != "launch" and world:
        try:
            layout = Layout.resolve(cfg.parallel, world).for_backend(cfg.backend.name)
        except ConfigError:
            layout = None  # the task refused it; the record keeps the world size unknown
    # Not logged: the sweep process's logger is Hydra's, whose handler would echo the line with its
    # [HYDRA] prefix after the caller's own (hydra_plugins.flopsweep_slurm._lost_task prints it once).
    job = JobResult(path=path, cfg=cfg, run=run, layout=layout, log_result=False, started=None)
    return recorded(job.fail("error", rec.error("JobLost", message, phase, rank)))


def not_recorded_line(run: dict[str, Any], status: str, exc: RecordUnwritable) -> str:
    """``job 3 (seed=2) was not recorded: cannot write ...: Read-only file system (the run ended ok).
    Fix: ...``: one line naming the job, the path, why, and what to do."""
    if run.get("job_num") is None:
        return f"the run was not recorded: {exc} (it ended {status}). Fix: {exc.fix}, then run it again."
    from flopsweep.shown_overrides import shown as typed

    shown = printable(typed(run.get("overrides") or [])) or "defaults"
    return (
        f"job {run['job_num']} ({shown}) was not recorded: {exc} (it ended {status}). "
        f"Fix: {exc.fix}, then re-run the sweep with resume=true (it keeps the ok records)."
    )


def _log_result(record: dict[str, Any], path: Path) -> None:
    m, err = record["metrics"], record["error"]
    if record["status"] == "ok":
        log.info(
            "ok: %.3f s/iter (mean), %s model TFLOPs/device, %.0f tokens/s -> %s",
            m["iteration_time_s"]["mean"],
            figure(m["model_tflops_per_device"], 4),
            m["tokens_per_s"],
            path,
        )
        for warning in record["warnings"]:
            log.warning("%s", warning)
    elif record["run"]["job_num"] is None and err.get("type") not in INTERRUPTS:
        # A single run: run.py prints the message, once, on stderr; an interrupted one's line says only where
        # the record is (run.py's interrupted_message), so its reason is this line's, as a sweep job's is.
        if (
            record["status"] == "invalid"
        ):  # the refusal alone is the one line; the record is in the run's folder
            log.debug("%s in %s -> %s", record["status"], err["phase"], path)
        else:
            log.warning("%s in %s -> %s", record["status"], err["phase"], path)
    else:
        log.warning("%s", failure_line(record, path))
    if record["status"] == "oom":  # what the estimate said of it, on the console too
        for warning in record["warnings"]:
            if warning.startswith(OOM_ESTIMATE):
                log.warning("%s", warning)


def failure_line(record: dict[str, Any], path: Path | str) -> str:
    """``"error in measure (rank 0): InjectedFault: <message> -> PATH"``: a failed record's one line
    (its status, phase, rank, exception type and message, control characters escaped), as a sweep
    job logs it; a Slurm sweep prints it in the sweep process too
    (:meth:`flopsweep.callbacks.SweepSummary.job_done`), where the task's log is out of sight."""
    err = record.get("error") or {}
    rank = err.get("rank")
    return (
        f"{record.get('status')} in {err.get('phase')}{'' if rank is None else f' (rank {rank})'}: "
        f"{err.get('type')}: {printable(str(err.get('message')))} -> {printable(str(path))}"
    )
