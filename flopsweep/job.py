"""One sweep job: validate, launch the ranks, write ``metrics.json`` for every outcome.

``run.py`` calls :func:`run_job` once per Hydra job with the typed config. This
process, not rank 0, writes the record, so that a run whose workers die still
leaves one. Under Slurm (and submitit_local) each task is one rank and only the task that
:func:`flopsweep.slurm.writes_record` names (global rank 0) writes it.
"""

from __future__ import annotations

import datetime
import logging
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopsweep.config import ConfigError, RunConfig, validate
from flopsweep.launch import SCRATCH, Outcome, launch_local
from flopsweep.metrics import (
    METRICS_FILE,
    atomic_write_json,
    build_record,
    compute_metrics,
    sanity_problem,
    system_info,
)
from flopsweep.slurm import inside_submitit_task, launch_slurm_task, writes_record

log = logging.getLogger("flopsweep")


@dataclass(frozen=True, kw_only=True)
class JobInfo:
    """Where and as what the job runs (from Hydra)."""

    job_dir: Path
    overrides: list[str]
    job_num: int | None = None


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run_job(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """Run one sweep point and write its record to ``info.job_dir/metrics.json``.

    Returns:
        The record (schema v1). Its ``status`` is ``invalid`` when validation failed
        (``error.phase == "config"``, no worker started).

    Raises:
        RecordExistsError: when the job directory already holds a ``metrics.json``
            (checked before any worker starts).
        KeyboardInterrupt: after recording the interrupted run as an error.
    """
    job_dir = Path(info.job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    path = job_dir / METRICS_FILE
    if path.exists() and writes_record():
        atomic_write_json(path, {}, overwrite=False)  # raises with the path in the message
    run = {
        "id": uuid.uuid4().hex,
        "started_at": _now(),
        "finished_at": None,
        "overrides": list(info.overrides),
        "job_num": info.job_num,
    }
    try:
        cfg = validate(cfg)
    except ConfigError as exc:
        error = {
            "type": "ConfigError",
            "message": str(exc),
            "phase": "config",
            "rank": None,
            "traceback": None,
        }
        return _finish(path, cfg, run, "invalid", error, None, world_size=None)
    world = int(cfg.nproc_per_node) * cfg.nnodes
    log.info("launching %d rank(s) on %s: %s", world, cfg.device, " ".join(info.overrides) or "defaults")
    try:
        outcome = launch_slurm_task(cfg, job_dir) if inside_submitit_task() else launch_local(cfg, job_dir)
    except KeyboardInterrupt:
        error = {
            "type": "KeyboardInterrupt",
            "message": "interrupted by the user",
            "phase": "launch",
            "rank": None,
            "traceback": None,
        }
        _finish(path, cfg, run, "error", error, None, world_size=world)
        raise
    except Exception as exc:  # noqa: BLE001 - the launcher itself broke; still record it
        error = {
            "type": type(exc).__name__,
            "message": str(exc),
            "phase": "launch",
            "rank": None,
            "traceback": None,
        }
        return _finish(path, cfg, run, "error", error, None, world_size=world)
    return record_outcome(path, cfg, run, outcome, world)


def record_outcome(
    path: Path, cfg: RunConfig, run: dict[str, Any], outcome: Outcome, world: int
) -> dict[str, Any]:
    """Compute metrics for an ok outcome (or mark it invalid) and write the record."""
    if outcome.status != "ok":
        return _finish(path, cfg, run, outcome.status, outcome.error, None, world_size=world)
    metrics = compute_metrics(cfg, outcome.ranks)
    problem = sanity_problem(cfg, metrics)
    if problem:
        error = {
            "type": "TimingSanity",
            "message": problem,
            "phase": "measure",
            "rank": None,
            "traceback": None,
        }
        return _finish(
            path, cfg, run, "invalid", error, None, world_size=world, device_name=outcome.ranks[0]["device"]
        )
    return _finish(
        path, cfg, run, "ok", None, metrics, world_size=world, device_name=outcome.ranks[0]["device"]
    )


def _finish(
    path: Path,
    cfg: RunConfig,
    run: dict[str, Any],
    status: str,
    error: dict[str, Any] | None,
    metrics: dict[str, Any] | None,
    *,
    world_size: int | None,
    device_name: str | None = None,
) -> dict[str, Any]:
    run = {**run, "finished_at": _now()}
    system = system_info(cfg.device, world_size or 0, device_name)
    record = build_record(cfg=cfg, status=status, error=error, run=run, system=system, metrics=metrics)
    if not writes_record():  # another task of this Slurm job writes the record
        return record
    atomic_write_json(path, record, overwrite=False)
    shutil.rmtree(path.parent / SCRATCH, ignore_errors=True)
    _log_result(record, path)
    return record


def _log_result(record: dict[str, Any], path: Path) -> None:
    m, err = record["metrics"], record["error"]
    if record["status"] == "ok":
        log.info(
            "ok: %.3f s/iter, %.1f TFLOPs/device, %.0f tokens/s -> %s",
            m["iteration_time_s"]["mean"],
            m["tflops_per_device"],
            m["tokens_per_s"],
            path,
        )
    else:
        log.warning(
            "%s in %s (rank %s): %s: %s -> %s",
            record["status"],
            err["phase"],
            err["rank"],
            err["type"],
            err["message"],
            path,
        )
