"""One sweep job: validate, launch the ranks, write ``metrics.json`` for every outcome.

``run.py`` calls :func:`run_job` once per Hydra job with the typed config. This
process, not rank 0, writes the record, so that a run whose workers die still
leaves one. Under Slurm (and submitit_local) each task is one rank and only the task that
:func:`flopsweep.slurm.writes_record` names (global rank 0) writes it.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from flopsweep import forecast, identity
from flopsweep import record as rec
from flopsweep.autobatch import NothingFits, ProbeFailed, budget_bytes, estimated_largest, find_micro_batch
from flopsweep.config import (
    ConfigError,
    RunConfig,
)
from flopsweep.cost import power_limit_w as ranks_power_limit_w
from flopsweep.files import (
    NotRecorded,
    RecordError,
    RecordExistsError,
    RecordUnwritable,
    atomic_write_json,
    create_new,
    exists_message,
    file_kind,
    read_json,
    record_path_problem,
)
from flopsweep.launch import SCRATCH, Outcome, Terminated, last_phase, launch_local
from flopsweep.layout import Layout, tp_across_nodes
from flopsweep.metrics import (
    build_record,
    compute_metrics,
    loadavg,
    profile_warnings,
    sanity_problem,
    system_info,
)
from flopsweep.models import family
from flopsweep.modelsearch import at_n_layer, at_n_layer_unchecked, find_largest_model
from flopsweep.noise import noise_warnings
from flopsweep.peaks import PeakRow, lookup
from flopsweep.plan import OFFLOAD_KEYS, Environment, Plan, fixed_nproc, plan
from flopsweep.quiet import silence_known_warnings
from flopsweep.record import METRICS_FILE
from flopsweep.reuse import Machine, Resumed, reusable_probes
from flopsweep.signals import signals_deferred
from flopsweep.slurm import inside_submitit_task, launch_slurm_task, writes_record
from flopsweep.text import csv_cell, csv_text, plural, printable, significant

log = logging.getLogger("flopsweep")


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


LAST_RECORD: dict[str, Any] = {"path": None, "status": None}
"""The last record this process wrote (its path and status): what ``run.py`` may truthfully
say when a signal stops it."""


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run_job(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """Run one sweep point and write its record to ``info.job_dir/metrics.json``.

    With ``cfg.resume``, an ``ok`` record of the same config (ignoring
    :data:`~flopsweep.config.RUN_CONTROL_KEYS`) already in the job directory means
    the job is skipped; any other record there is moved aside first (see
    :func:`set_aside`), so that nothing is lost.

    Returns:
        The record (schema v1): the one written, or the existing one when the job
        was skipped. Its ``status`` is ``invalid`` when validation failed
        (``error.phase == "config"``, no worker started), and ``error`` (type ``NotARecord``, the
        job not run) when ``metrics.json`` was a FIFO, socket, device or directory, which is set
        aside (:func:`_special_file_error`).

    Raises:
        RecordExistsError: before any worker starts, when the job directory already holds a
            ``metrics.json`` and ``cfg.resume`` is false; when ``metrics.json`` there is a
            symbolic link (dangling, looping or not) or cannot be examined
            (:func:`flopsweep.files.record_path_problem`: the record could not take its place);
            and, with ``cfg.resume``, when it is the record of another sweep's job
            (:func:`other_run_problem`).
        KeyboardInterrupt, Terminated: after recording the interrupted run as an error.
        NotRecorded: when the record cannot be written (the directory became read-only or
            full); the message is the one line to print.
    """
    silence_known_warnings()  # before anything imports torchao (flopsweep.quiet)
    load_start = loadavg()
    job_dir = Path(info.job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    if cfg.plan:
        return plan_job(cfg, info)
    path = job_dir / METRICS_FILE
    problem = record_path_problem(path) if writes_record() else None
    if problem and (os.path.islink(path) or not os.path.lexists(path)):
        raise RecordExistsError(problem)  # a link (or no lstat): refused before anything runs, nothing moved
    if path.exists() and not cfg.resume and writes_record() and not problem:
        raise RecordExistsError(exists_message(path))
    if cfg.resume and writes_record() and (other := other_run_problem(path, info.overrides)):
        raise RecordExistsError(other)
    run = {
        "id": uuid.uuid4().hex,
        "started_at": _now(),
        "finished_at": None,
        "overrides": list(info.overrides),
        "job_num": info.job_num,
        **repeat_fields(cfg, info),
    }
    if problem:  # a FIFO, socket, device or directory: this job's error alone, the sweep goes on
        return _special_file_error(path, cfg, run, load_start)
    try:
        check_repeat_axis(cfg, info)
        p = plan(cfg, Environment.detect(), choices=info.choices)
        calibrations = forecast.calibration_records(p.cfg.predict.calibration)  # read before the run
    except ConfigError as exc:
        error = rec.error("ConfigError", str(exc), "config")
        if writes_record():
            set_aside(path)
        return _finish(path, cfg, run, "invalid", error, None, layout=None, load_start=load_start)
    cfg = p.cfg
    done = ok_record(path, cfg)
    if done is not None:
        log.info(
            "skipped (resume=true): %s already holds an ok record of this config (run %s)",
            path,
            done["run"]["id"],
        )
        return done
    previous = resumed_record(path, cfg) if cfg.resume and writes_record() else None
    aside = set_aside(path) if writes_record() else None
    resumed = Resumed(record=previous, name=aside.name) if previous is not None and aside else None
    return _launch(path, p, run, info, load_start, calibrations, resumed)


def _special_file_error(
    path: Path, cfg: RunConfig, run: dict[str, Any], load_start: list[float] | None
) -> dict[str, Any]:
    """The ``error`` record (type ``NotARecord``, phase ``config``) of a job whose ``metrics.json``
    is a FIFO, a socket, a device or a directory: that file is set aside unopened, as a corrupt
    record is (:func:`set_aside`: ``metrics.unreadable-<hex>.json``), this record takes its name,
    and the job does not run; the sweep's other jobs go on. ``resume=true`` runs it again."""
    kind = file_kind(os.lstat(path).st_mode)
    aside = set_aside(path)
    name = aside.name if aside else "?"
    message = (
        f"{path} was a {kind}, not a run record; it is set aside as {name} and this job did not run. "
        f"Fix: remove {name} if nothing needs it, then run the sweep again with resume=true"
    )
    error = rec.error("NotARecord", message, "config")
    return _finish(path, cfg, run, "error", error, None, layout=None, load_start=load_start)


def repeat_fields(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """The record's ``run.repeat`` (this job's round), ``run.repeats`` (how many rounds the sweep
    runs) and ``run.repeat_group``: with ``repeats`` over 1, a hash of the sweep directory, which
    every round of the sweep shares and a resumed sweep keeps (null otherwise). The analysis
    pools the records of one group and one set-up (``setup_id``, world size) into one row."""
    group = None
    if cfg.repeats > 1 and info.sweep_dir:
        group = hashlib.sha256(os.path.abspath(info.sweep_dir).encode()).hexdigest()[:12]
    return {"repeat": cfg.repeat, "repeats": cfg.repeats, "repeat_group": group}


def check_repeat_axis(cfg: RunConfig, info: JobInfo) -> None:
    """Refuse ``repeats`` over 1 in a job that is not one round of a repeated sweep: the rounds come
    from the basic sweeper (``hydra_plugins.flopsweep_repeats.RepeatingSweeper``), which sets ``repeat=`` on
    each job. Without it (``repeats`` swept as an axis, or another sweeper) the job would be
    measured once and recorded as if repeated.

    Raises:
        ConfigError: naming ``repeats`` and the fix.
    """
    keys = {str(o).split("=", 1)[0].lstrip("+~") for o in info.overrides}
    if cfg.repeats > 1 and "repeat" not in keys:
        raise ConfigError(
            "repeats",
            cfg.repeats,
            "did not expand into rounds of jobs (one value of a -m sweep, run by the basic sweeper)",
            "give repeats= one value, with -m and without hydra/sweeper=",
        )


def defining_overrides(overrides: list[str]) -> list[str]:
    """The overrides that decide what a job measures, sorted
    (:func:`flopsweep.identity.defining_overrides`)."""
    return identity.defining_overrides(overrides)


def same_overrides(theirs: list[str], ours: list[str]) -> bool:
    """Whether two lists of overrides set the same keys to the same values, in any order
    (:func:`flopsweep.identity.same_overrides`)."""
    return identity.same_overrides(theirs, ours)


def other_run_problem(path: Path, overrides: list[str]) -> str | None:
    """The refusal of ``resume=true`` when ``path`` holds the record of another sweep's job (or
    another single run): its :func:`defining_overrides` differ from this job's in a key or a value
    (:func:`same_overrides`: ``lr=0.035`` is ``lr=0.0350``, in any order). Resuming would
    move that record aside, where the analysis never reads it. None when there is no readable
    record, or it is this job's (a failed or changed run of it is set aside and run again)."""
    try:
        old = read_json(path) if path.is_file() else None
        theirs = defining_overrides(list(old["run"]["overrides"])) if old is not None else None
    except (RecordError, OSError, ValueError, KeyError, TypeError):
        return None  # unreadable: set aside and re-run, as before
    ours = defining_overrides(list(overrides))
    if theirs is None or same_overrides(theirs, ours):
        return None
    shown = printable(" ".join(theirs)[:300]) or "defaults"
    return (
        f"{path} is the record of another sweep or run ({shown}; this job: "
        f"{printable(' '.join(ours)[:300]) or 'defaults'}); resume=true continues only the sweep that "
        "wrote it. Fix: choose a new hydra.sweep.dir (hydra.run.dir for a single run)"
    )


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
    error = rec.error("JobLost", message, phase, rank)
    layout = None
    if phase != "launch" and world:
        try:
            layout = Layout.resolve(cfg.parallel, world).for_backend(cfg.backend.name)
        except ConfigError:
            layout = None  # the task refused it; the record keeps the world size unknown
    # Not logged: the sweep process's logger is Hydra's, whose handler would echo the line with its
    # [HYDRA] prefix after the caller's own (hydra_plugins.flopsweep_slurm._lost_task prints it once).
    return _finish(path, cfg, run, "error", error, None, layout=layout, log_result=False)


ALLOC_CONF_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")


def use_expandable_segments(device: str) -> None:
    """On CUDA, run the ranks with ``PYTORCH_ALLOC_CONF=expandable_segments:True`` (as torchtitan
    does), unless the user set either allocator variable: near a full GPU, fixed-size segments
    fragment and the allocator frees and retries inside the measured steps. The record keeps
    the setting in ``system.cuda_alloc_conf``."""
    if device == "cuda" and not any(os.environ.get(v) for v in ALLOC_CONF_VARS):
        os.environ["PYTORCH_ALLOC_CONF"] = "expandable_segments:True"


PLAN_FILE = "plan.csv"
PLAN_COLUMNS = (
    "job",
    "model",
    "overrides",
    "status",
    "world_size",
    "layout",
    "seq_len",
    "n_params",
    "model_flops_per_step",
    "est_peak_gib_per_rank",
    "fits",
    "fits_on",
    "predicted_world_size",
    "predicted_nnodes",
    "predicted_iteration_time_s",
    "predicted_tokens_per_s_per_device",
    "predicted_mfu",
    "predicted_budget_gpu_hours",
    "prediction_source",
    "note",
)


def _fits(p: Plan, peak: int, env: Environment, *, placed: bool) -> tuple[Any, str]:
    """``(fits, fits_on)`` of a plan row: whether the estimated peak per rank ``peak`` (bytes) fits
    the GPU's memory (:func:`plan_gpu_capacity`), else (CPU) the host's available memory for every
    rank; blank when there is nothing to compare with (a GPU job ``placed`` on a machine without
    GPUs)."""
    gpu = plan_gpu_capacity(p, env, placed=placed)
    if gpu is not None:
        return peak <= gpu[0], gpu[1]
    if p.device == "cpu":  # every rank of this machine shares its memory
        from flopsweep import hostmem

        free = hostmem.available_bytes()
        return peak * p.nproc_per_node <= free, f"host ({free / 2**30:.1f} GiB available)"
    return "", ""


def plan_search_capacity(p: Plan, env: Environment, *, placed: bool) -> tuple[int, str] | None:
    """The memory per rank a plan row's ``batch=auto`` or ``search.model=largest`` size is estimated
    within, ``(bytes, "N GiB" label)``: the GPU's (:func:`plan_gpu_capacity`) or
    ``search.memory_budget_gib``'s when smaller (the probes' budget; on the CPU the only memory
    known, labelled ``(search.memory_budget_gib)``); None when neither is known."""
    limits = []
    if (gpu := plan_gpu_capacity(p, env, placed=placed)) is not None:
        limits.append((gpu[0], ""))
    if (budget := budget_bytes(p.cfg)) is not None:
        limits.append((budget, " (search.memory_budget_gib)"))
    if not limits:
        return None
    capacity, which = min(limits)
    return capacity, f"{significant(capacity / 2**30)} GiB{which}"


def plan_gpu_capacity(p: Plan, env: Environment, *, placed: bool) -> tuple[int, str] | None:
    """The GPU memory a plan row is compared with, ``(bytes, label)`` (the label is ``fits_on``):
    the GPU asked for (``plan_gpu``, ``plan_gpu_memory_gib``:
    :func:`flopsweep.memory.planned_gpu_bytes`), else this machine's GPU 0; None for a CPU job and
    for a GPU job ``placed`` on a machine without GPUs (:func:`plan_environment`)."""
    from flopsweep.memory import planned_gpu_bytes

    asked = planned_gpu_bytes(p.cfg.plan_gpu, p.cfg.plan_gpu_memory_gib)
    if asked is not None:
        return asked
    if env.cuda_available and p.device == "cuda" and not placed:
        import torch

        props = torch.cuda.get_device_properties(0)
        return props.total_memory, f"{props.name} ({props.total_memory / 2**30:.1f} GiB)"
    return None


def offload_host_note(p: Plan) -> str:
    """For a plan of GPUs that are not here (``plan_gpu``, ``plan_gpu_memory_gib``), whose hosts'
    memory this machine cannot know: the host memory the offloaded states need per node
    (:func:`flopsweep.memory.offload_host_bytes` times the node's ranks, a lower bound), stated
    instead of checked; empty without offload."""
    from flopsweep.memory import offload_host_bytes, offload_host_held_bytes

    need = offload_host_bytes(p.cfg, p.layout) * p.nproc_per_node
    if not need:
        return ""
    held = offload_host_held_bytes(p.cfg, p.layout) * p.nproc_per_node
    return (
        f"offload needs at least {significant(need / 2**30, 4)} GiB of host memory per node, about "
        f"{significant(held / 2**30, 4)} GiB as measured on the H200's host (not checked: the planned "
        "GPUs' hosts are not this machine)"
    )


def plan_environment(
    cfg: RunConfig, env: Environment, here_gpu: str | None = None
) -> tuple[RunConfig, Environment, list[str]]:
    """Where ``plan=true`` places ``cfg``: ``env`` (this machine, whose GPU is ``here_gpu``:
    :func:`torch_device_name`, None without one) changed to the machine the job is planned for,
    with a note for each change.

    - A GPU job for ``plan_gpu``, a GPU of the peak table that is not this machine's (``device=cuda``
      or ``auto``; ``auto`` with ``plan_gpu`` or ``plan_gpu_memory_gib`` and no GPU here plans as on
      GPUs) is placed as on that GPU: its compute capability, bf16 support and vendor
      (:class:`flopsweep.peaks.PeakRow`, :attr:`Environment.planned_gpu`), so that the run's own
      rules refuse what it cannot run (fp8 below 8.9, bf16 on a V100, cuDNN on an AMD GPU). A plan of
      this machine's own GPU is this machine's.
    - A GPU job on a machine without GPUs and no such name (``plan_gpu_memory_gib`` alone,
      ``device=cuda``) is placed as on GPUs of compute capability 9.0 with bf16 (:data:`NO_GPU_NOTE`).
    - A plan for GPUs that are not here (``plan_gpu``, ``plan_gpu_memory_gib``) checks neither this
      host's memory nor its paths (``backend.nvme_path``): they are the target's
      (:func:`offload_host_note`, :func:`nvme_path_note` say so in the row).
    - ``nnodes`` > 1 outside Slurm is placed as the Slurm task it must run as (a run needs
      ``hydra/launcher=slurm``; the job's nodes like this one, or ``plan_gpu``'s).
    - A GPU that validation refuses (:func:`flopsweep.memory.planned_gpu_bytes`: a name the peak
      table does not know, with ``plan_gpu_memory_gib`` or without, ``plan_gpu=A100`` without its
      memory size, a size it is not sold in, a memory that is not positive) places
      nothing and notes nothing: the row is ``invalid`` with that refusal alone.
    """
    from flopsweep.memory import planned_gpu_bytes

    notes = []
    asked_gpu = cfg.plan_gpu is not None or cfg.plan_gpu_memory_gib is not None
    try:
        planned_gpu_bytes(cfg.plan_gpu, cfg.plan_gpu_memory_gib)
        refused = False
    except ConfigError:  # validate refuses the GPU asked for: it is placed nowhere
        refused = True
    if cfg.device == "auto" and asked_gpu and not env.cuda_available:  # a GPU question on a laptop
        cfg = dataclasses.replace(cfg, device="cuda")
    row = lookup(cfg.plan_gpu) if cfg.plan_gpu and cfg.device != "cpu" and not refused else None
    if row is not None and (here_gpu is None or lookup(here_gpu) is not row):
        if not env.cuda_available:
            nproc = fixed_nproc(cfg.nproc_per_node) or 1
            env = dataclasses.replace(env, cuda_available=True, gpu_count=nproc)
        env = dataclasses.replace(env, bf16_supported=row.bf16, capability=row.capability, planned_gpu=row)
        notes.append(placed_note(row, here_gpu))
    elif cfg.device == "cuda" and not env.cuda_available and not refused:
        nproc = fixed_nproc(cfg.nproc_per_node) or 1
        env = dataclasses.replace(
            env, cuda_available=True, gpu_count=nproc, bf16_supported=True, capability=(9, 0)
        )
        notes.append(NO_GPU_NOTE)
    if asked_gpu:  # the target's hosts are not this one: their memory and paths are not known here
        env = dataclasses.replace(env, host_memory_bytes=None, paths_here=False)
    if cfg.nnodes > 1 and not env.under_slurm:
        env = dataclasses.replace(env, in_submitit=True, under_slurm=True, slurm_job=True)
        notes.append(f"nnodes={cfg.nnodes}: planned as a Slurm job (a run needs hydra/launcher=slurm)")
    return cfg, env, notes


NO_GPU_NOTE = (
    "no GPU here: placed as on a GPU of capability 9.0 with bf16 (plan_gpu= names a GPU to plan for its "
    "capability)"
)
"""The plan row's note for a GPU job placed on a machine without GPUs and without a ``plan_gpu`` of
the peak table (:func:`plan_environment`)."""


def placed_note(row: PeakRow, here_gpu: str | None) -> str:
    """The plan row's note for a job placed on the GPU ``row`` (``plan_gpu``) that is not this
    machine's ``here_gpu``: ``placed as an A100 (capability 8.0, bf16)``, ``placed as a V100 SXM2
    (capability 7.0, no bf16)``, ``placed as an MI300X (AMD, capability 9.4, bf16)``."""
    article = "an" if row.name[0] in "AEFHILMNORSX" else "a"  # as the letter is said: an H100, a V100
    cap = f"capability {row.capability[0]}.{row.capability[1]}"
    cap = f"AMD, {cap}" if row.vendor == "amd" else cap
    where = "no GPU here" if here_gpu is None else f"not this machine's {here_gpu}"
    return f"{where}: placed as {article} {row.name} ({cap}, {'bf16' if row.bf16 else 'no bf16'})"


def plan_job(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """``plan=true``: validate the job and estimate it, start nothing, write no record.

    The job is placed on the machine it is planned for (:func:`plan_environment`: GPUs that are not
    here, several nodes). ``fits`` compares the estimate with ``plan_gpu``'s or
    ``plan_gpu_memory_gib``'s memory, else this machine's GPU, else (CPU) the estimate times the
    ranks with the host's available memory; blank for a GPU job placed on a machine without GPUs;
    ``fits_on`` says which. A ``search.model=largest`` job is estimated at the blocks the memory estimate
    fits (:func:`search_size`), a ``batch=auto`` job at the micro batch it fits
    (:func:`auto_batch_size`). Under ``-m`` appends one row (``model`` names the model,
    ``layout`` its parallel layout: :meth:`flopsweep.layout.Layout.label`) to ``plan.csv`` beside
    the job directories (the sweep directory, whose callback started the file afresh:
    :func:`start_plan_file`); a single run writes its ``plan.csv`` afresh, atomically.

    Returns:
        ``{"status": "plan", "plan": row}``; ``row["status"]`` is ``ok`` or ``invalid``.
    """
    env = Environment.detect()
    cfg, env, placed = plan_environment(cfg, env, torch_device_name() if env.cuda_available else None)
    elsewhere = NO_GPU_NOTE in placed or env.planned_gpu is not None  # not this machine's GPU
    row = dict.fromkeys(PLAN_COLUMNS, "")
    row.update(
        job=info.job_num if info.job_num is not None else "",
        model=cfg.model.name or getattr(cfg.model, "config", ""),  # model=hf: check fills the name
        overrides=" ".join(info.overrides),
    )
    try:
        p, searched = search_size(plan(cfg, env, choices=info.choices), env, placed=elsewhere)
        p, batched = auto_batch_size(p, env, placed=elsewhere)
        calibrations = forecast.calibration_records(p.cfg.predict.calibration)  # as a run reads them
    except ConfigError as exc:  # the run's one line, then where it was planned (the GPU's capability)
        line = str(exc)
        row.update(status="invalid", note="; ".join([line.removesuffix("."), *placed]) if placed else line)
    else:
        row.update(plan_estimate(p, env, placed=elsewhere))
        asked_gpu = cfg.plan_gpu is not None or cfg.plan_gpu_memory_gib is not None
        other_hosts = (offload_host_note(p), nvme_path_note(p.cfg), package_note(p.cfg)) if asked_gpu else ()
        notes = (*placed, batched, searched, row["note"], *other_hosts)
        row["note"] = "; ".join(n for n in notes if n)
        here = env.cuda_available and p.device == "cuda" and not elsewhere
        gpu_name = (torch_device_name() if here else None) or cfg.plan_gpu  # its datasheet and NVLink
        row.update(plan_prediction(p, gpu_name, calibrations))
    if info.job_num is None:  # a single run: its one row, replacing the last plan's
        path = Path(info.job_dir) / PLAN_FILE
        _replace_plan_file(path, [row])
    else:
        path = Path(info.job_dir).parent / PLAN_FILE
        _append_plan_row(path, row)
    return {"status": "plan", "plan": row, "plan_file": str(path)}


def plan_estimate(p: Plan, env: Environment, *, placed: bool) -> dict[str, Any]:
    """The estimated columns of an ``ok`` plan row (status, model, world size, layout, counts, the
    peak per rank, ``fits``), and in ``note`` the estimate's method (:func:`flopsweep.memory.estimate`).
    The peak is :func:`flopsweep.memory.peak_bytes` (on the CPU the offloaded states too), the
    figure the launch refuses a CPU run by (:func:`check_free_host_memory`)."""
    from flopsweep.memory import estimate, peak_bytes

    m = p.cfg.model
    est = estimate(p.cfg, p.layout)
    peak = peak_bytes(p.cfg, p.layout, est)
    tokens = p.layout.global_batch(p.cfg.batch.micro_batch_size, p.cfg.batch.grad_accum) * m.seq_len
    flops = family(m).model_flops(m, tokens, p.cfg.attention.density or 1.0)
    fits, fits_on = _fits(p, peak, env, placed=placed)
    return dict(
        status="ok",
        model=m.name,
        world_size=p.world_size,
        layout=p.layout.label(p.cfg.parallel.pp_schedule),
        seq_len=m.seq_len,  # model=hf's default is 128, not its config.json's context
        n_params=family(m).n_params(m),
        model_flops_per_step=f"{flops:.4g}",
        est_peak_gib_per_rank=significant(peak / 2**30),  # a tiny model's 0.0123, not 0.0
        fits=fits,
        fits_on=fits_on,
        note=est.method,
    )


def nvme_path_note(cfg: RunConfig) -> str:
    """For a plan of GPUs that are not here: that ``backend.nvme_path`` of an NVMe offload is the
    target machine's, checked when the run launches; empty without NVMe offload."""
    nvme = any(getattr(cfg.backend, k, "none") == "nvme" for k in ("offload_optimizer", "offload_param"))
    path = getattr(cfg.backend, "nvme_path", None)
    if not (nvme and path):
        return ""
    return f"backend.nvme_path={path} is checked when the run launches (not here: another machine's path)"


def package_note(cfg: RunConfig) -> str:
    """For a plan of GPUs that are not here: that the attention kernel's package (``xformers``) is
    the target machine's, checked when the run launches; empty for a kernel of torch itself."""
    from flopsweep.attention import KERNELS

    package = KERNELS[cfg.attention.name].package
    if package is None:
        return ""
    return (
        f"attention={cfg.attention.name}: the {package} package is checked when the run launches (not here)"
    )


def auto_batch_size(p: Plan, env: Environment, *, placed: bool) -> tuple[Plan, str]:
    """A ``batch=auto`` plan at the micro batch its row is estimated and predicted at, and the note
    that says so; ``(p, "")`` for ``batch=fixed``.

    The search measures the largest micro batch that fits (without ``cudaMalloc`` retries), found
    only by running; the row takes the largest that the memory estimate fits
    (:func:`flopsweep.autobatch.estimated_largest`, at most ``batch.max_micro_batch_size``) in the
    GPU's memory (:func:`plan_gpu_capacity`), or in ``search.memory_budget_gib`` when that is smaller
    (the probes' budget; on the CPU the only memory known). Without either (a CPU plan without a
    budget, a GPU job placed on a machine without GPUs), or when even the search's first size
    (``batch.micro_batch_size``) is estimated over it, the row stays at that first size.
    """
    batch = p.cfg.batch
    if batch.name != "auto":
        return p, ""
    start = f"batch=auto: estimated at micro batch {batch.micro_batch_size}, the search's start"
    if (limit := plan_search_capacity(p, env, placed=placed)) is None:
        return p, start
    capacity, memory = limit
    size = estimated_largest(p.cfg, p.layout, capacity)
    if size is None:
        return p, f"{start}; even that is estimated over {memory}"
    cfg = dataclasses.replace(p.cfg, batch=dataclasses.replace(batch, micro_batch_size=size))
    largest = (
        "batch.max_micro_batch_size, which the estimate fits"
        if size == batch.max_micro_batch_size
        else "the largest the estimate fits"
    )
    note = (
        f"batch=auto: predicted at micro batch {size}, {largest} in {memory}; the run measures the "
        "largest its probes fit without cudaMalloc retries"
    )
    return dataclasses.replace(p, cfg=cfg), note


def search_size(p: Plan, env: Environment, *, placed: bool = False) -> tuple[Plan, str]:
    """A ``search.model=largest`` plan at the size its row is estimated at, and the note that says
    so; ``(p, "")`` without a search. The search probes ``search.min_n_layer`` to
    ``search.max_n_layer`` blocks (:mod:`flopsweep.modelsearch`, from the first) and the size it
    measures is found only by running. As :func:`auto_batch_size` treats a micro batch, the row takes
    the largest size the memory estimate fits
    (:func:`flopsweep.modelsearch.estimated_largest_n_layer`) in the GPU's memory
    (:func:`plan_gpu_capacity`, blank for a GPU job ``placed`` on a machine without GPUs), or in
    ``search.memory_budget_gib`` when that is smaller (the probes' budget; on the CPU the only memory
    known); when even ``search.min_n_layer`` is estimated over it, that first probe. Without either
    memory a configured ``model.n_layer`` in that range is kept, one outside it is clamped into it
    (below: the search's first probe; above: the most it probes). A size other than ``model.n_layer``
    is validated again at that size. Either way the row's model is named ``<model>-L<n>``, as the
    search's probes and the run's record name it (:func:`flopsweep.modelsearch.at_n_layer`).

    Raises:
        ConfigError: when validation refuses the size (the search's probe would be refused).
    """
    from flopsweep.modelsearch import estimated_largest_n_layer

    s, n = p.cfg.search, p.cfg.model.n_layer
    if s.model != "largest":
        return p, ""
    span = f"{s.min_n_layer} to {s.max_n_layer} blocks"
    if (limit := plan_search_capacity(p, env, placed=placed)) is not None:
        capacity, memory = limit
        size = estimated_largest_n_layer(p.cfg, p.layout, capacity)
        if size is None:
            size = s.min_n_layer
            note = (
                f"search.model=largest: estimated at n_layer={size}, the search's first probe; even that "
                f"is estimated over {memory}"
            )
        else:
            largest = (
                "search.max_n_layer, which the estimate fits"
                if size == s.max_n_layer
                else "the largest the estimate fits"
            )
            note = (
                f"search.model=largest: estimated at n_layer={size}, {largest} in {memory}; the search "
                f"probes {span} and measures the largest that fits"
            )
    elif s.min_n_layer <= n <= s.max_n_layer:  # p is validated at n: only the name changes
        size, note = n, f"search.model=largest: estimated at model.n_layer={n}; the search probes {span}"
    else:
        size = min(max(n, s.min_n_layer), s.max_n_layer)
        which = "the search's first probe" if n < s.min_n_layer else "the most the search probes"
        note = (
            f"search.model=largest: estimated at n_layer={size}, {which} (model.n_layer={n} is outside "
            f"the {span} it probes)"
        )
    if size == n:
        return at_n_layer_unchecked(p, n, p.cfg.model.name), note
    return at_n_layer(p, size, p.cfg.model.name, env), note


def torch_device_name() -> str:
    """The name of GPU 0 (``torch.cuda.get_device_name``)."""
    import torch

    return torch.cuda.get_device_name(0)


def plan_prediction(
    p: Plan, device_name: str | None, records: list[tuple[str, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """``plan=true``'s predicted columns: the step time of the job on the cluster of
    ``predict.gpus_per_node`` x ``predict.nnodes`` (each null: the job's own), with its source
    (:func:`flopsweep.forecast.prediction`; no probe here: bandwidths from ``predict.*``, the
    calibration record's probe, profiled records or the NVLink of the GPU, :func:`flopsweep.forecast.link`),
    and the bandwidth's source after the compute's. The GPU is ``plan_gpu``'s when it is not this
    machine's, else this machine's, else the calibration record's. ``records``: the
    ``predict.calibration`` records already read (the plan row reads them as a run does,
    :func:`flopsweep.forecast.calibration_records`); None reads them."""
    cfg = p.cfg
    nodes = cfg.predict.nnodes or cfg.nnodes
    per_node = cfg.predict.gpus_per_node or p.nproc_per_node
    out: dict[str, Any] = {"predicted_world_size": per_node * nodes, "predicted_nnodes": nodes}
    if cfg.backend.name == "single" and per_node * nodes > 1:
        return {**out, "prediction_source": "no prediction: backend=single runs one rank; pick ddp or fsdp"}
    try:
        layout = (
            p.layout if per_node * nodes == p.world_size else Layout.resolve(cfg.parallel, per_node * nodes)
        )
        records = forecast.calibration_records(cfg.predict.calibration) if records is None else records
    except ConfigError as exc:
        return {**out, "prediction_source": f"no prediction: {exc}"}
    made = forecast.prediction(cfg, layout, records, gpus_per_node=per_node, device_name=device_name)
    fmt = lambda v, spec: "" if v is None else format(v, spec)  # noqa: E731
    return {
        **out,
        "predicted_iteration_time_s": fmt(made["iteration_time_s"], ".4g"),
        "predicted_tokens_per_s_per_device": fmt(made.get("tokens_per_s_per_device"), ".5g"),
        "predicted_mfu": fmt(made.get("mfu"), ".3f"),
        "predicted_budget_gpu_hours": fmt(made.get("budget_gpu_hours"), ".4g"),
        "prediction_source": "; ".join(
            [
                made["source"],
                *([f"bandwidth {made['bandwidth_source']}"] if made.get("bandwidth_source") else []),
            ]
        ),
    }


def _csv_text(rows: list[dict[str, Any]], *, header: bool) -> str:
    """``rows`` as ``plan.csv``'s lines, every cell through the project's one CSV-injection guard
    (:func:`flopsweep.text.csv_cell`: a ``tag=`` value, a model name or an override that begins with
    ``=``, ``+``, ``-``, ``@``, tab or CR gets a leading apostrophe; numbers stay numbers)."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=PLAN_COLUMNS)
    if header:
        writer.writeheader()
    writer.writerows({key: csv_cell(value) for key, value in row.items()} for row in rows)
    return out.getvalue()


def _replace_plan_file(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write ``plan.csv`` afresh, atomically (a new file of an unpredictable name, then a rename)."""
    fd, tmp = create_new(path.parent, f".{path.name}.")
    try:
        with open(fd, "w", newline="") as fh:
            fh.write(_csv_text(rows, header=True))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def start_plan_file(sweep_dir: Path) -> None:
    """``plan=true`` under ``-m``: start the sweep's ``plan.csv`` afresh (the header only), so that
    a second plan into one directory shows its own jobs, not the last plan's rows as well. Called
    by the sweep callback before any job; each job then appends its row (:func:`plan_job`)."""
    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    _replace_plan_file(Path(sweep_dir) / PLAN_FILE, [])


def _append_plan_row(path: Path, row: dict[str, Any]) -> None:
    """Append one row to a sweep's ``plan.csv`` in one ``write`` (``O_APPEND``: jobs in parallel
    tasks do not interleave), never through a link; a missing file is created with its header."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
        text = _csv_text([row], header=True)
    except FileExistsError:
        fd = os.open(path, flags)
        text = _csv_text([row], header=False)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def plan_cell(cell: object) -> object:
    """A cell of ``plan.csv`` as the plan table shows it: the CSV guard's apostrophe removed
    (:func:`flopsweep.text.csv_text`: ``+sweep=x`` reads as typed), control characters escaped
    (:func:`printable`: the row stays one line and writes nothing but text to the terminal) and
    ``|`` escaped as ``\\|`` (a ``tag=a|b`` must not open a column of the markdown table); numbers
    as they are."""
    if not isinstance(cell, str):
        return cell
    return printable(csv_text(cell)).replace("|", "\\|")


def plan_table(path: str) -> str:
    """``plan.csv`` as one table (pandas' markdown through tabulate), with the file's path; each
    text cell (an override's value, a note quoting it) as :func:`plan_cell` shows it. The CSV keeps
    the values (guarded against spreadsheet formulas: :func:`_csv_text`)."""
    import pandas as pd

    frame = pd.read_csv(path, keep_default_na=False)
    escaped = frame.apply(lambda column: column.map(plan_cell))
    table = escaped.to_markdown(index=False)
    return f"{table}\n(plan: no worker started, no record written; {printable(path)})"


def plan_invalid_line(path: str) -> str | None:
    """The last line a plan prints (to stderr) when some of its rows are ``invalid``: ``N of M jobs
    are invalid: see the status column``; None when every row is ``ok``. A plan is a report, so it
    still exits 0; this line keeps its refusals from passing unseen below a long table."""
    import pandas as pd

    status = pd.read_csv(path, keep_default_na=False)["status"]
    invalid = int((status == "invalid").sum())
    return (
        f"flopsweep: {invalid} of {len(status)} jobs are invalid: see the status column" if invalid else None
    )


def warn_plan_gpu(cfg: RunConfig, device_name: str | None) -> str | None:
    """The one-line warning for a run (``plan=false``) given ``plan_gpu`` or ``plan_gpu_memory_gib``,
    which only ``plan=true`` reads; None when neither is set, when ``plan=true``, or when
    ``device_name`` (this machine's GPU, ``torch.cuda.get_device_name``; None on the CPU) is the GPU
    named (its model, ``H200`` of ``H200-141GB``, in the name, case ignored). A sweep file may name
    the GPUs it is written for (``layouts-8gpu-llama8b``: ``plan_gpu: H200``), so a run on them says
    nothing; elsewhere the run goes ahead on this machine's device and the line says so (a run given
    ``plan_gpu=H100`` trained on the local device in silence: a fresh-user trial)."""
    if cfg.plan:
        return None
    here = device_name or "this machine's CPU"
    if cfg.plan_gpu is not None:
        model = str(cfg.plan_gpu).split("-")[0].strip()
        if device_name and model and re.search(rf"\b{re.escape(model)}\b", device_name, re.IGNORECASE):
            return None  # a whole word of the name: H200 is not GH200's, A10 not A100's
        return (
            f"plan_gpu={cfg.plan_gpu} is read by plan=true only; this run measures {here}, not the "
            f"{cfg.plan_gpu} it names (add plan=true to plan for it)"
        )
    if cfg.plan_gpu_memory_gib is not None:
        return (
            f"plan_gpu_memory_gib={cfg.plan_gpu_memory_gib} is read by plan=true only; this run measures "
            f"{here} (add plan=true to plan for that memory)"
        )
    return None


def check_free_host_memory(p: Plan, free: int | None = None) -> str | None:
    """Refuse, before any worker starts, a run that cannot fit the host memory free now
    (:func:`flopsweep.hostmem.available_bytes`), which would swap the machine or meet the kernel's OOM
    killer (a SIGKILL, not an ``oom`` status) and take other users' memory with it:

    - on the CPU, when the ranks of this machine need more than is free: each rank's
      :func:`flopsweep.memory.peak_bytes` (``plan=true``'s ``est_peak_gib_per_rank``: weights,
      gradients, AdamW states, activations and logits, offloaded states too) times ``nproc_per_node``;
    - on GPUs with offload, when the lower bound of what the node's ranks offload
      (:func:`flopsweep.memory.offload_host_bytes`) is more than is free; above that, when what such
      runs held (:func:`flopsweep.memory.offload_host_held_bytes`) is more, the run goes ahead and
      the returned warning goes in the log and the record's ``warnings``.

    Not checked in a Slurm task (each task is one rank: one refusing alone would leave the others
    waiting) nor where a search sizes the run: ``search.model=largest``, and ``batch=auto`` on the
    CPU, whose probes are each held to the free memory before they launch
    (:func:`flopsweep.autobatch.budget_problem`).

    Args:
        free: the free host memory, bytes; None (the launch): read now.

    Returns:
        The warning (``host_memory: ...``), or None.

    Raises:
        ConfigError: naming ``model`` (CPU) or the offload key, the need, the free memory and the fix.
    """
    cfg = p.cfg
    if inside_submitit_task() or cfg.search.model == "largest":
        return None
    if free is None:
        from flopsweep import hostmem

        free = hostmem.available_bytes()
    if cfg.device == "cpu":
        return None if cfg.batch.name == "auto" else _refuse_cpu_host_memory(p, free)
    return _check_offload_free_memory(p, free)


def _refuse_cpu_host_memory(p: Plan, free: int) -> str | None:
    """On the CPU, refuse a run whose ranks' estimated peak exceeds the free host memory (see
    :func:`check_free_host_memory`); raises ConfigError naming ``model``. Returns None, or the
    warning that the estimate failed and the memory went unchecked (an estimate's bug is no reason
    to lose the measurement)."""
    from flopsweep.memory import peak_bytes

    cfg, nproc = p.cfg, p.nproc_per_node
    try:
        per_rank = peak_bytes(cfg, p.layout)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        return f"host_memory: the free host memory was not checked: the memory estimate failed: {exc}"
    need = per_rank * nproc
    if need <= free:
        return None
    ranks = f"{plural(nproc, 'rank')} need{'s' if nproc == 1 else ''}"
    example = " (e.g. model=gpt-tiny)" if cfg.model.name != "gpt-tiny" else ""
    # fewer ranks only where one rank's need fits: sharded states grow per rank as ranks go (trial 12b)
    fewer = ", fewer ranks (nproc_per_node=1)" if nproc > 1 and per_rank <= free else ""
    raise ConfigError(
        "model",
        cfg.model.name,
        f"on the CPU {ranks} about {need / 2**30:.1f} GiB of host memory ({need / nproc / 2**30:.1f} GiB "
        f"per rank, plan=true's est_peak_gib_per_rank), and {free / 2**30:.1f} GiB is free now; it "
        "would swap or be killed by the OOM killer",
        f"pick a smaller model{example}, a smaller batch.micro_batch_size{fewer}, or set device=cuda "
        "for a GPU sweep",
    )


def _check_offload_free_memory(p: Plan, free: int) -> str | None:
    """On GPUs with offload, refuse a run whose node's ranks offload more than the free host memory
    (the lower bound), and return a warning when what such runs held is more (see
    :func:`check_free_host_memory`); None without offload or when it fits."""
    from flopsweep.memory import offload_host_bytes, offload_host_held_bytes

    lower = offload_host_bytes(p.cfg, p.layout) * p.nproc_per_node
    held = offload_host_held_bytes(p.cfg, p.layout) * p.nproc_per_node
    if not held or held <= free:
        return None
    key = next(k for k in OFFLOAD_KEYS if getattr(p.cfg.backend, k, False) in (True, "cpu"))
    value = getattr(p.cfg.backend, key)
    if lower > free:
        raise ConfigError(
            f"backend.{key}",
            value,
            f"offload puts at least {lower / 2**30:.1f} GiB of model states of "
            f"{plural(p.nproc_per_node, 'rank')} in host memory, and {free / 2**30:.1f} GiB is free now",
            "pick a smaller model, fewer nproc_per_node, offload to nvme (DeepSpeed ZeRO-3), turn offload "
            "off, or wait for the host's memory to be free",
        )
    return (
        f"host_memory: backend.{key}={value}: offload holds about {held / 2**30:.1f} GiB of host memory "
        f"({lower / 2**30:.1f} GiB of model states, plus what the H200 runs held over them), and "
        f"{free / 2**30:.1f} GiB is free; expect an out-of-memory kill (pick a smaller model, or turn "
        "offload off)"
    )


def _launch(
    path: Path,
    p: Plan,
    run: dict[str, Any],
    info: JobInfo,
    load_start: list[float] | None,
    calibrations: list[tuple[str, dict[str, Any]]] | None = None,
    resumed: Resumed | None = None,
) -> dict[str, Any]:
    """Start the ranks of a validated plan and record what happened; ``calibrations`` are the
    ``predict.calibration`` records, read before the launch
    (:func:`flopsweep.forecast.calibration_records`); ``resumed`` the record ``resume=true`` runs
    again (:func:`resumed_record`), whose searches' probes the searches take over."""
    cfg, world, layout = p.cfg, p.world_size, p.layout
    try:
        host_warning = check_free_host_memory(p)
    except ConfigError as exc:  # refused as validation refuses: no worker started
        error = rec.error("ConfigError", str(exc), "config")
        return _finish(path, cfg, run, "invalid", error, None, layout=None, load_start=load_start)
    shown = printable(" ".join(info.overrides)) or "defaults"
    log.info("launching %s on %s: %s", plural(world, "rank"), cfg.device, shown)
    use_expandable_segments(cfg.device)
    if host_warning is not None:
        log.warning("%s", host_warning)
    if cfg.plan_gpu is not None or cfg.plan_gpu_memory_gib is not None:
        name = torch_device_name() if cfg.device == "cuda" else None  # the plan checked a GPU is here
        if (line := warn_plan_gpu(cfg, name)) is not None:
            log.warning("%s", line)
    if (across := tp_across_nodes(layout, p.nproc_per_node)) is not None:
        log.warning("%s", across)
    predicted = predicted_peak_gib(cfg, layout)  # the plan's estimate, before any rank starts
    measured = [cfg]  # the config of the measured run, once the searches have sized it
    try:
        outcome, cfg = launch_run(p, path.parent, run, on_measure=measured.append, resumed=resumed)
        if cfg != p.cfg:  # batch=auto chose another micro batch, or the search another model
            predicted = predicted_peak_gib(cfg, layout)
    except (KeyboardInterrupt, Terminated) as exc:
        phase, _ = last_phase(path.parent / SCRATCH, world)
        what = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C (SIGINT)"
        stopped = f"interrupted by {what}{search_cut_short(run)}; every worker was stopped"
        error = rec.error(type(exc).__name__, stopped, phase)
        try:  # a measured run at the sizes found is recorded at those sizes
            _finish(path, measured[-1], run, "error", error, None, layout=layout, load_start=load_start)
        except NotRecorded as lost:  # the signal's own message follows; say this one first
            print(f"flopsweep: {lost}", file=sys.stderr, flush=True)
        raise
    except Exception as exc:  # noqa: BLE001 - the launcher itself broke; still record it
        error = rec.error(type(exc).__name__, str(exc), "launch")
        return _finish(path, cfg, run, "error", error, None, layout=layout, load_start=load_start)
    return record_outcome(
        path,
        cfg,
        run,
        outcome,
        layout,
        load_start=load_start,
        predicted_peak_gib=predicted,
        calibrations=calibrations,
        launch_warnings=[host_warning] if host_warning else [],
    )


def search_cut_short(run: dict[str, Any]) -> str:
    """`` during search.model=largest (2 probes finished, in run.model_search)`` when ``run`` holds a
    search without its result (the searches hold themselves there after every probe: an interrupt
    landed in it), else ``""``; for an interrupted run's error message."""
    for key, name in (("batch_search", "batch=auto"), ("model_search", "search.model=largest")):
        search = run.get(key)
        if isinstance(search, dict) and search.get("result") is None:
            finished = plural(len(search.get("probes") or []), "probe")
            return f" during {name} ({finished} finished, in run.{key})"
    return ""


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


def launch_run(
    p: Plan,
    job_dir: Path,
    run: dict[str, Any],
    *,
    on_measure: Callable[[RunConfig], None] | None = None,
    resumed: Resumed | None = None,
) -> tuple[Outcome, RunConfig]:
    """Launch the measured run of plan ``p``; with ``search.model=largest`` search the largest model
    first (:func:`flopsweep.modelsearch.find_largest_model`), then with ``batch=auto`` the micro batch.

    The searches go in ``run["model_search"]`` and ``run["batch_search"]``, each held there after
    every probe (result null until the search ends), so that a run interrupted during a search
    keeps the probes that finished; the returned config carries the sizes found. ``on_measure``
    gets that config when a searched run starts its measured run (before the workers launch),
    so that an interrupt there is recorded at the sizes measured. With ``resumed`` (the record
    ``resume=true`` runs again) each search takes over the probes that record's search of the same
    set-up finished on this kind of machine (:func:`flopsweep.reuse.reusable_probes`).
    """
    cfg = p.cfg
    if inside_submitit_task():  # this task is one rank; validation refused batch=auto here
        return launch_slurm_task(p, job_dir), cfg
    here = Machine.here(cfg.device, p.world_size) if resumed is not None else None
    if cfg.search.model == "largest":
        same = {"grow": cfg.search.grow, "micro_batch_size": cfg.batch.micro_batch_size}
        reuse = reusable_probes(
            resumed, "model_search", "n_layer", here=here, same=same, what="search.model=largest"
        )
        try:
            p, run["model_search"] = find_largest_model(
                p, job_dir, on_probe=partial(run.__setitem__, "model_search"), reuse=reuse
            )
        except NothingFits as exc:
            run["model_search"] = exc.record
            error = dict(exc.outcome.error or {})
            least = f"n_layer={cfg.search.min_n_layer}"
            error["message"] = f"search.model=largest: even {least} does not fit: {error.get('message')}"
            return Outcome(exc.outcome.status, error=error), cfg
        except ProbeFailed as exc:
            run["model_search"] = exc.record
            return exc.outcome, cfg
        cfg = p.cfg
    if cfg.batch.name != "auto":
        if on_measure is not None:
            on_measure(cfg)
        return launch_local(p, job_dir), cfg
    same = {"n_layer": cfg.model.n_layer}  # the size the model search found, or the configured one
    reuse = reusable_probes(
        resumed, "batch_search", "micro_batch_size", here=here, same=same, what="batch=auto"
    )
    try:
        size, run["batch_search"] = find_micro_batch(
            p, job_dir, on_probe=partial(run.__setitem__, "batch_search"), reuse=reuse
        )
    except NothingFits as exc:
        run["batch_search"] = exc.record
        error = dict(exc.outcome.error or {})
        start = cfg.batch.micro_batch_size
        error["message"] = f"batch=auto: even micro_batch_size={start} does not fit: {error.get('message')}"
        return Outcome(exc.outcome.status, error=error), cfg
    except ProbeFailed as exc:
        run["batch_search"] = exc.record
        return exc.outcome, cfg
    cfg = dataclasses.replace(cfg, batch=dataclasses.replace(cfg.batch, micro_batch_size=size))
    if size == cfg.batch.max_micro_batch_size:
        log.info(
            "batch=auto: every size up to batch.max_micro_batch_size=%d fits; a larger one may too "
            "(raise batch.max_micro_batch_size to search further)",
            size,
        )
    log.info("batch=auto: measuring at micro batch %d", size)
    if on_measure is not None:
        on_measure(cfg)
    return launch_local(dataclasses.replace(p, cfg=cfg), job_dir), cfg


def resumed_record(path: Path, cfg: RunConfig) -> dict[str, Any] | None:
    """The record at ``path`` that ``resume=true`` runs again, when its searches may be taken over:
    readable, not ``ok``, made with the same (validated) config as ``cfg`` by
    :func:`comparable_config` (the sizes the searches find aside); else None."""
    try:
        record = read_json(Path(path))
        same = identity.same_job(record, json.loads(json.dumps(asdict(cfg))))
        return record if record["status"] != "ok" and same and isinstance(record.get("run"), dict) else None
    except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def comparable_config(config: dict[str, Any]) -> dict[str, Any]:
    """A record's ``config`` in today's form without the keys that do not change what a run
    measures (:func:`flopsweep.identity.comparable_config`: what ``identity.job_key`` hashes)."""
    return identity.comparable_config(config)


def ok_record(path: Path, cfg: RunConfig) -> dict[str, Any] | None:
    """The record at ``path`` when it is ``ok`` and was made with the same (validated)
    config as ``cfg``, else None (also when it is missing or unreadable)."""
    try:
        record = read_json(Path(path))
        same = identity.same_job(record, json.loads(json.dumps(asdict(cfg))))
        return record if record["status"] == "ok" and same else None
    except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def set_aside(path: Path) -> Path | None:
    """Rename an existing record to ``metrics.<status>-<run id>.json``, the job's
    ``traceback_rank<N>.txt`` files to ``traceback_rank<N>.<status>-<run id>.txt`` and a
    ``batch=auto`` search's ``batch_search/`` to ``batch_search.<status>-<run id>/`` (so
    ``search.model=largest``'s ``model_search/``).

    The analysis reads only files named ``metrics.json``, so a record set aside
    leaves the tables but stays on disk. Returns the new path, or None when there
    was no record. An unreadable record is set aside as ``metrics.unreadable-<hex>.json``.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        record = read_json(path)
        status, run_id = record["status"], str(record["run"]["id"])
        if status not in rec.STATUSES or not re.fullmatch(r"[\w-]{1,64}", run_id, re.ASCII):  # a safe name
            raise ValueError(f"not a record's status and run id: {status!r}, {run_id!r}")
        label = f"{status}-{run_id}"
    except (RecordError, OSError, ValueError, KeyError, TypeError):
        label = f"unreadable-{uuid.uuid4().hex[:12]}"
    aside = path.with_name(f"metrics.{label}.json")
    if aside.exists():
        raise RecordExistsError(exists_message(aside))
    os.rename(path, aside)
    for tb in sorted(path.parent.glob("traceback_rank*.txt")):
        tb.rename(tb.with_name(f"{tb.stem}.{label}.txt"))
    for name in ("batch_search", "model_search"):  # the searches' probes and their tracebacks
        search = path.parent / name
        if search.is_dir():
            search.rename(search.with_name(f"{name}.{label}"))
    log.warning("moved the previous record aside: %s", aside)
    return aside


def record_outcome(
    path: Path,
    cfg: RunConfig,
    run: dict[str, Any],
    outcome: Outcome,
    layout: Layout,
    *,
    load_start: list[float] | None = None,
    predicted_peak_gib: float | None = None,
    calibrations: list[tuple[str, dict[str, Any]]] | None = None,
    launch_warnings: list[str] | None = None,
) -> dict[str, Any]:
    """Compute metrics for an ok outcome (or mark it invalid) and write the record.

    Args:
        layout: the plan's layout (:attr:`flopsweep.plan.Plan.layout`), the record's ``system.parallel``.
        predicted_peak_gib: the plan's memory estimate (:func:`predicted_peak_gib`), recorded as
            ``metrics.predicted_peak_gib`` beside the measured peaks.
        calibrations: the ``predict.calibration`` records read before the launch; with the
            config and the probes that every rank ran before warm-up (GEMM rate,
            ``system.interconnect``), they make ``metrics.predicted``: nothing of the measured
            steps enters it.
        launch_warnings: what the launch warned about before any worker started
            (:func:`check_free_host_memory`), first in the record's ``warnings`` whatever the status.
    """
    launched = list(launch_warnings or [])
    if outcome.status != "ok":
        return _finish(
            path,
            cfg,
            run,
            outcome.status,
            outcome.error,
            None,
            layout=layout,
            load_start=load_start,
            warnings=launched,
        )
    metrics = compute_metrics(cfg, outcome.ranks, layout)
    metrics["predicted_peak_gib"] = predicted_peak_gib
    probe = outcome.ranks[0].get("interconnect")
    metrics["predicted"] = forecast.prediction(
        cfg,
        layout,
        calibrations or [],
        gpus_per_node=layout.world_size // cfg.nnodes,
        device_name=outcome.ranks[0]["device"],
        probe=probe,
        gemm_tflops=metrics.get("measured_matmul_tflops"),
    )
    problem = sanity_problem(cfg, metrics, cfg.device)
    device_name = outcome.ranks[0]["device"]
    limit = ranks_power_limit_w(outcome.ranks)
    threads = outcome.ranks[0].get("cpu_threads")
    optimizer = outcome.ranks[0].get("optimizer")
    if problem:
        error = rec.error("TimingSanity", problem, "measure")
        return _finish(
            path,
            cfg,
            run,
            "invalid",
            error,
            None,
            layout=layout,
            device_name=device_name,
            load_start=load_start,
            warnings=launched,
            power_limit_w=limit,
            interconnect=probe,
            cpu_threads=threads,
            optimizer=optimizer,
        )
    return _finish(
        path,
        cfg,
        run,
        "ok",
        None,
        metrics,
        layout=layout,
        device_name=device_name,
        load_start=load_start,
        power_limit_w=limit,
        warnings=launched + profile_warnings(outcome.ranks) + outcome.warnings,
        interconnect=probe,
        cpu_threads=threads,
        optimizer=optimizer,
    )


def _finish(
    path: Path,
    cfg: RunConfig,
    run: dict[str, Any],
    status: str,
    error: dict[str, Any] | None,
    metrics: dict[str, Any] | None,
    *,
    layout: Layout | None,
    device_name: str | None = None,
    load_start: list[float] | None = None,
    warnings: list[str] | None = None,
    power_limit_w: float | None = None,
    interconnect: list[dict[str, Any]] | None = None,
    cpu_threads: int | None = None,
    optimizer: dict[str, Any] | None = None,
    log_result: bool = True,
) -> dict[str, Any]:
    """Write the record. ``layout`` is the plan's (None for a run that never launched: its
    ``system.world_size``, ``nproc_per_node`` and ``parallel`` are null); ``power_limit_w`` the
    GPUs' enforced power limit (W), null when no rank measured it; ``interconnect`` rank 0's probe
    (``system.interconnect``; ``[]`` on one rank, null when no rank measured); ``cpu_threads`` rank
    0's intra-op threads (``system.cpu_threads``; null when no rank measured); ``optimizer`` rank 0's
    optimizer as built (``system.optimizer``, :func:`flopsweep.backends.optimizer_facts`; null when no
    rank measured). ``log_result``:
    log the record's line (:func:`_log_result`); False where the caller prints it itself."""
    run = {**run, "finished_at": _now()}
    world = layout.world_size if layout else None
    nproc = world // cfg.nnodes if world else None
    system = system_info(
        cfg.device,
        world,
        device_name,
        nproc,
        load_start=load_start,
        layout=layout,
        power_limit_w=power_limit_w,
    )
    system["interconnect"] = interconnect
    system["cpu_threads"] = cpu_threads
    system["optimizer"] = optimizer
    if status == "ok" and metrics is not None:
        warnings = list(warnings or []) + noise_warnings(
            cv=(metrics.get("iteration_time_s") or {}).get("cv"),
            load_start=(load_start or [None])[0],
            load_end=((system.get("loadavg") or {}).get("end") or [None])[0],
            cpu_count=system.get("cpu_count"),
            ranks=nproc,
        )
    record = build_record(
        cfg=cfg, status=status, error=error, run=run, system=system, metrics=metrics, warnings=warnings
    )
    if not writes_record():  # another task of this Slurm job writes the record
        return record
    with signals_deferred():  # SIGINT/SIGTERM wait until the record is written and known
        try:
            atomic_write_json(path, record, overwrite=False)
        except RecordUnwritable as exc:
            raise NotRecorded(not_recorded_line(run, status, exc)) from None
        LAST_RECORD.update(path=str(path), status=status)
    shutil.rmtree(path.parent / SCRATCH, ignore_errors=True)
    if log_result:
        _log_result(record, path)
    return record


def not_recorded_line(run: dict[str, Any], status: str, exc: RecordUnwritable) -> str:
    """``job 3 (seed=2) was not recorded: cannot write ...: Read-only file system (the run ended ok).
    Fix: ...``: one line naming the job, the path, why, and what to do."""
    if run.get("job_num") is None:
        return f"the run was not recorded: {exc} (it ended {status}). Fix: {exc.fix}, then run it again."
    shown = printable(" ".join(run.get("overrides") or [])) or "defaults"
    return (
        f"job {run['job_num']} ({shown}) was not recorded: {exc} (it ended {status}). "
        f"Fix: {exc.fix}, then re-run the sweep with resume=true (it keeps the ok records)."
    )


def _log_result(record: dict[str, Any], path: Path) -> None:
    m, err = record["metrics"], record["error"]
    if record["status"] == "ok":
        log.info(
            "ok: %.3f s/iter (mean), %.4g model TFLOPs/device, %.0f tokens/s -> %s",
            m["iteration_time_s"]["mean"],
            m["model_tflops_per_device"],
            m["tokens_per_s"],
            path,
        )
        for warning in record["warnings"]:
            log.warning("%s", warning)
    elif record["run"]["job_num"] is None:  # a single run: run.py prints the message, once, on stderr
        log.warning("%s in %s -> %s", record["status"], err["phase"], path)
    else:
        log.warning("%s", failure_line(record, path))


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
