"""One sweep job's lifecycle: planned -> sized -> launched -> measured -> recorded.

``run.py`` calls :func:`run_job` once per Hydra job with the typed config. Each step takes the
job's one :class:`~flopsweep.job.result.JobResult` and fills in what it finds:

- :func:`planned`: validated and placed on this machine (:func:`flopsweep.plan.plan`), the
  ``resume=true`` decision (:mod:`flopsweep.job.resume`), the launch's checks of the host
  (:mod:`flopsweep.job.hostcheck`);
- :func:`sized`: ``search.model=largest``, then ``batch=auto``, each one
  :class:`flopsweep.sizesearch.SizeSearch` along its axis;
- :func:`launched`: the measured run's ranks (local, or this Slurm node's agent's;
  :func:`followed` on the other nodes' agents of a multi-node job);
- :func:`flopsweep.job.records.measured`: metrics, or the outcome's status;
- :func:`flopsweep.job.records.recorded`: ``metrics.json``, for every outcome.

A step that ends the job sets its status; the steps after it but the record do nothing.
``plan=true`` runs none of them: :func:`flopsweep.job.dryrun.plan_job`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from flopsweep import forecast
from flopsweep import record as rec
from flopsweep.autobatch import MICRO_BATCH
from flopsweep.config import ConfigError, RunConfig
from flopsweep.files import JobFolderUnwritable, NotRecorded, RecordExistsError, RecordUnwritable
from flopsweep.gpu_memory import canonical_gpu_name
from flopsweep.hydrafiles import write_hydra_files
from flopsweep.job.device_fix import no_gpu_error
from flopsweep.job.dryrun import plan_job
from flopsweep.job.hostcheck import check_free_host_memory, use_expandable_segments
from flopsweep.job.killed_rounds import ERROR_TYPE as KILLED_ROUND
from flopsweep.job.killed_rounds import killed_round_line
from flopsweep.job.placement import torch_device_name, warn_plan_gpu
from flopsweep.job.records import estimate_at_sizes, measured, now, predicted_peak_gib, recorded
from flopsweep.job.result import JobInfo, JobResult
from flopsweep.job.resume import other_run_problem, resumed_record, set_aside, skipped_record
from flopsweep.launch import SCRATCH, Terminated, launch_local
from flopsweep.launcher_choice import job_launcher
from flopsweep.layout import tp_across_nodes
from flopsweep.lockstep import NodeGroup, node_group
from flopsweep.metrics import loadavg
from flopsweep.modelsearch import N_LAYER
from flopsweep.node_agent import launch_node_agent
from flopsweep.oom_note import over_memory_line
from flopsweep.outcome import Outcome, gathered_before, last_phase
from flopsweep.override_parsing import override_key
from flopsweep.plan import Environment, NoGpuError, plan
from flopsweep.quiet import silence_known_warnings
from flopsweep.record import METRICS_FILE
from flopsweep.reuse import Machine, Resumed, reusable_probes, reused_line
from flopsweep.safe_folders import job_folder
from flopsweep.safe_read import file_kind
from flopsweep.seqsearch import SEQ_LEN
from flopsweep.signals import signals_deferred
from flopsweep.sizesearch import NothingFits, ProbeFailed
from flopsweep.slurm import writes_record
from flopsweep.text import plural, printable
from flopsweep.unstarted import job_started, remove_unstarted

log = logging.getLogger("flopsweep")

SEARCHES = (N_LAYER, SEQ_LEN, MICRO_BATCH)
"""The searched axes in the order :func:`sized` runs them: the model's blocks (``search.grow=n_layer``)
or its sequence (``search.grow=seq_len``) at the start micro batch, then the micro batch at the size found."""


def run_job(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """Run one sweep point and write its record to ``info.job_dir/metrics.json``.

    With ``cfg.resume``, an ``ok`` record of the same config (ignoring
    :data:`~flopsweep.identity.RUN_CONTROL_KEYS`) already in the job directory means
    the job is skipped; any other record there is moved aside first (see
    :func:`~flopsweep.job.resume.set_aside`), so that nothing is lost.

    Returns:
        The record (schema v1): the one written, or the existing one when the job
        was skipped. Its ``status`` is ``invalid`` when validation failed
        (``error.phase == "config"``, no worker started; not written for a single run:
        :func:`keeps_refusal`), and ``error`` (type ``NotARecord``, the
        job not run) when ``metrics.json`` was a FIFO, socket, device or directory, which is set
        aside (:func:`special_file`). With ``cfg.plan``: the plan row
        (:func:`flopsweep.job.dryrun.plan_job`).

    Raises:
        RecordExistsError: before any worker starts, when the job directory is a symbolic link,
            FIFO or file (:func:`flopsweep.safe_folders.job_folder`: never followed; its subclass
            :class:`flopsweep.files.JobFolderUnwritable`, as for ``.hydra/``), or already holds a
            ``metrics.json`` and ``cfg.resume`` is false; when ``metrics.json`` there is a
            symbolic link (dangling, looping or not) or cannot be examined
            (:func:`flopsweep.record.record_path_problem`: the record could not take its place);
            and, with ``cfg.resume``, when it is the record of another sweep's job
            (:func:`~flopsweep.job.resume.other_run_problem`).
        KeyboardInterrupt, Terminated: after recording the interrupted run as an error.
        NotRecorded: when the record cannot be written (the directory became read-only or
            full); the message is the one line to print.
    """
    silence_known_warnings()  # before anything imports torchao (flopsweep.quiet)
    load_start = loadavg()
    if cfg.plan_gpu:  # plan_gpu=h100: H100 in every row, label and line, as the peak table spells it
        cfg.plan_gpu = canonical_gpu_name(str(cfg.plan_gpu))
    job_dir = Path(info.job_dir)
    try:
        job_folder(job_dir)  # a link planted at the job's folder: refused, never followed
    except RecordUnwritable as exc:
        raise JobFolderUnwritable(f"{exc}. Fix: {exc.fix}, then run again") from None
    if cfg.plan:
        return planned_job(cfg, info, job_dir)
    path = job_dir / METRICS_FILE
    problem = refuse_existing(path, cfg, info)
    job = JobResult(path=path, cfg=cfg, run=new_run(cfg, info), load_start=load_start)
    if problem:  # a FIFO, socket, device or directory: this job's error alone, the sweep goes on
        job_started()
        if writes_record():
            hydra_files_written(job_dir, info)
        with signals_deferred():  # the record of a job that has started is written before a signal (#800)
            return recorded(special_file(job))
    in_sweep = keeps_refusal(info)
    kept = None if in_sweep else planned(job, info)  # a single run: its checks before it starts
    if job.status == "invalid" and not in_sweep:  # refused: nothing written (run.py: its line)
        remove_unstarted()  # the folder Hydra made for it, where it holds only its empty run.log
        return recorded(job, write=False)
    with start_recorded(job):  # from here an interrupt is this job's error record
        if writes_record():  # after the checks: a refused run leaves the directory's .hydra/ as it was
            hydra_files_written(job_dir, info)
        if in_sweep:
            kept = planned(job, info)
    if kept is not None:
        return kept
    with ExitStack() as held:  # from the ranks' end to the record on disk, SIGINT and SIGTERM wait (#800)
        pending: list[int] | None = None
        with node_group(job, job_dir) as group:  # several Slurm nodes: the agents agree, then node 0's leads
            if job.status is None:
                with failures_recorded(job):
                    if group is not None and not group.leads:  # another node's agent: node 0's decides
                        followed(job, group)
                    else:
                        sized(job)
                        launched(job)
                    if group is None:  # not across the group's close: it may wait for the other nodes
                        pending = held.enter_context(signals_deferred())
        if pending is None:
            pending = held.enter_context(signals_deferred())
        return measured_and_recorded(job, pending)


def measured_and_recorded(job: JobResult, pending: list[int]) -> dict[str, Any]:
    """launched -> recorded with SIGINT and SIGTERM held (``pending``: those that came, from
    :func:`flopsweep.signals.signals_deferred`, raised by the caller once the record is written). A
    signal after the ranks ended had raised in the metrics or the record's assembly (0.3 s after the last
    step of ``model=llama-tiny device=cpu backend=ddp nproc_per_node=2``) and left no record: an ``ok``
    one now keeps its figures with a ``teardown_signal`` warning, as one in the ranks' teardown does
    (:func:`flopsweep.outcome.gathered_before`).

    Raises:
        NotRecorded: when the record cannot be written (its line printed first when a signal is held,
            which then ends the process).
    """
    if job.status is None:
        measured(job)
    if pending and job.status == "ok":
        what = "Ctrl-C (SIGINT)" if pending[0] == signal.SIGINT else "SIGTERM"  # as interrupt_name says it
        job.warnings.append(
            f"teardown_signal: interrupted by {what} after the ranks ended, while the run was recorded; "
            "the measurement is whole"
        )
    try:
        return recorded(job)
    except NotRecorded as lost:
        if pending:  # the signal's own line follows; say this one first
            print(f"flopsweep: {lost}", file=sys.stderr, flush=True)
        raise


def planned_job(cfg: RunConfig, info: JobInfo, job_dir: Path) -> dict[str, Any]:
    """``plan=true``: the plan (:func:`flopsweep.job.dryrun.plan_job`), which writes no record. A sweep's
    job keeps its folder, its ``.hydra/`` and its log (its row is in the sweep's ``plan.csv``, its outcome in
    the progress line); one interrupted before its row is written leaves none of them (nor, as the sweep's
    first, the sweep's ``multirun.yaml``). A single plan that is refused (``run.py`` prints its line, exit 2:
    :func:`refused_plan`) leaves nothing: no ``plan.csv``, no ``.hydra/``, and the folder Hydra made for it
    is removed where it holds only its empty ``run.log`` (:func:`flopsweep.unstarted.remove_unstarted`);
    a plan that is not refused writes its ``.hydra/`` after its ``plan.csv``.

    Raises:
        RecordExistsError: a single plan into a run's folder whose ``metrics.json`` is the record of another
            config (:func:`~flopsweep.job.resume.other_run_problem`): its ``.hydra/`` files are that run's.
    """
    if info.job_num is not None:
        # until its rows are in the sweep's plan.csv (append_plan_row), an interrupt removes its folder
        record = plan_job(cfg, info)
        job_started()  # a plan writes no record; its folder holds its .hydra/ and its log
        hydra_files_written(job_dir, info)
        from flopsweep.job.planoutcome import note_outcome

        note_outcome(info.job_dir, record)  # a sweep's progress line says what the plan came to
        return record
    if other := other_run_problem(job_dir / METRICS_FILE, info.overrides, plan=True):
        raise RecordExistsError(other)  # a real run's folder of another config: its .hydra/ is that run's
    record = plan_job(cfg, info)  # until it is known not refused, an interrupt removes the folder
    if refused_plan(record):
        remove_unstarted()
        return record
    job_started()
    hydra_files_written(job_dir, info)
    return record


def keeps_refusal(info: JobInfo) -> bool:
    """Whether a job that its checks refuse before any worker starts (``invalid``, phase ``config``:
    :func:`planned`) keeps a record. A sweep's job does (its ``metrics.json``, ``.hydra/`` and log: the
    sweep's summary and ``resume=true`` read it, nothing is lost); a single run does not: ``run.py``
    prints its one line, exit 2, and nothing is written (no ``metrics.json``, no ``.hydra/``, an earlier
    record left in place, the folder Hydra made removed where it holds only its empty ``run.log``), as a
    refused ``plan=true`` (:func:`planned_job`). Was (session 43): an ``invalid`` ``metrics.json``."""
    return info.job_num is not None


def refused_plan(record: dict[str, Any]) -> bool:
    """True for a single plan's record that ``run.py`` answers with a refusal's line and exit 2: the job
    refused before planning (``status`` ``invalid``: its GPU, a key of ``plan_clusters``), or its one row is
    ``invalid`` (``repeat=1``, a model the CPU cannot hold)."""
    return record.get("status") == "invalid" or (record.get("plan") or {}).get("status") == "invalid"


def refuse_existing(path: Path, cfg: RunConfig, info: JobInfo) -> str | None:
    """Refuse, before anything runs, a ``metrics.json`` that must not be replaced (see
    :func:`run_job`'s ``RecordExistsError``); return the problem of one that is no regular file
    (:func:`flopsweep.record.record_path_problem`), which :func:`special_file` records."""
    problem = rec.record_path_problem(path) if writes_record() else None
    if problem and (os.path.islink(path) or not os.path.lexists(path)):
        raise RecordExistsError(problem)  # a link (or no lstat): refused before anything runs, nothing moved
    if path.exists() and not cfg.resume and writes_record() and not problem:
        raise RecordExistsError(rec.exists_message(path))
    if cfg.resume and writes_record() and (other := other_run_problem(path, info.overrides)):
        raise RecordExistsError(other)
    return problem


def hydra_files_written(job_dir: Path, info: JobInfo) -> None:
    """Write the job's ``.hydra/`` files (:func:`flopsweep.hydrafiles.write_hydra_files`: never through
    a link, never opening a FIFO).

    Raises:
        JobFolderUnwritable: one line, when ``.hydra`` is not a folder (a link, a FIFO) or a file there
            cannot be written; nothing has run.
    """
    try:
        write_hydra_files(job_dir, info.hydra_files)
    except RecordUnwritable as exc:
        raise JobFolderUnwritable(f"{exc}. Fix: {exc.fix}, then run again") from None


def new_run(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """The record's ``run`` as the job starts: a new id, the start time, the overrides, the job
    number and the repeat fields (:func:`repeat_fields`)."""
    return {
        "id": uuid.uuid4().hex,
        "started_at": now(),
        "finished_at": None,
        "overrides": list(info.overrides),
        "job_num": info.job_num,
        **repeat_fields(cfg, info),
    }


def special_file(job: JobResult) -> JobResult:
    """The ``error`` (type ``NotARecord``, phase ``config``) of a job whose ``metrics.json``
    is a FIFO, a socket, a device or a directory: that file is set aside unopened, as a corrupt
    record is (:func:`~flopsweep.job.resume.set_aside`: ``metrics.unreadable-<hex>.json``), this
    record takes its name, and the job does not run; the sweep's other jobs go on. ``resume=true``
    runs it again."""
    path = job.path
    kind = file_kind(os.lstat(path).st_mode)
    aside = set_aside(path)
    name = aside.name if aside else "?"
    message = (
        f"{path} was a {kind}, not a run record; it is set aside as {name} and this job did not run. "
        f"Fix: remove {name} if nothing needs it, then run the sweep again with resume=true"
    )
    return job.fail("error", rec.error("NotARecord", message, "config"))


def repeat_fields(cfg: RunConfig, info: JobInfo) -> dict[str, Any]:
    """The record's ``run.repeat`` (this job's round), ``run.repeats`` (how many rounds the sweep
    runs) and ``run.repeat_group``: with ``repeats`` over 1, a hash of the sweep directory, which
    every round of the sweep shares and a resumed sweep keeps (null otherwise). The analysis
    pools the records of one group, one set-up (``setup_id``, world size) and one tag into one row."""
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
    keys = {override_key(str(o)) for o in info.overrides}
    if cfg.repeats > 1 and "repeat" not in keys:
        raise ConfigError(
            "repeats",
            cfg.repeats,
            "did not expand into rounds of jobs (one value of a -m sweep, run by the basic sweeper)",
            "give repeats= one value, with -m and without hydra/sweeper=",
        )


def planned(job: JobResult, info: JobInfo) -> dict[str, Any] | None:
    """-> planned: validate and place the job (:func:`flopsweep.plan.plan`; ``invalid`` when refused,
    any record there set aside), read ``predict.calibration``'s records, and decide ``resume=true``:
    an ``ok`` record of this config is returned (the job is skipped, nothing else runs), and so is a round
    the OOM killer ended or one skipped for it (:func:`~flopsweep.job.killed_rounds.kept_on_resume`); any
    other record is set aside, and one of the same set-up lends its searches' probes
    (:attr:`JobResult.resumed`). Then the launch's checks (:func:`ready`)."""
    path = job.path
    try:
        check_repeat_axis(job.cfg, info)
        env = Environment.detect()
        p = plan(job.cfg, env, choices=info.choices)
        calibrations = forecast.prediction_records(p.cfg)  # read before the run
    except ConfigError as exc:
        if isinstance(
            exc, NoGpuError
        ):  # its fix proven here: device=cpu where the CPU takes it, else plan=true
            exc = no_gpu_error(exc.given, env)
        if writes_record() and keeps_refusal(info):  # a single run's refusal leaves the folder as it was
            set_aside(path)
        job.fail("invalid", rec.error("ConfigError", str(exc), "config"))
        return None
    job.plan, job.cfg, job.calibrations = p, p.cfg, calibrations
    if (kept := skipped_record(path, p.cfg, killed=writes_record())) is not None:
        record, line = kept  # an ok record (INFO); a kill the OOM killer's (a warning; none: a later round)
        if line is not None:
            log.log(logging.INFO if record.get("status") == "ok" else logging.WARNING, "%s", line)
        return record  # not run again (session 41: the sweep's check before any job skips it too)
    previous = resumed_record(path, p.cfg) if p.cfg.resume and writes_record() else None
    aside = set_aside(path) if writes_record() else None
    job.resumed = Resumed(record=previous, name=aside.name) if previous is not None and aside else None
    ready(job, info)
    return None


def config_json(cfg: RunConfig) -> dict[str, Any]:
    """``cfg`` as its record's ``config`` holds it (JSON types)."""
    return json.loads(json.dumps(asdict(cfg)))


def ready(job: JobResult, info: JobInfo) -> JobResult:
    """The launch's checks and notes, before any worker starts: an earlier round of the set-up that
    SIGKILL ended (:func:`~flopsweep.job.killed_rounds.killed_round_line`: ``invalid``, not run again),
    the free host memory (:func:`~flopsweep.job.hostcheck.check_free_host_memory`: ``invalid`` as
    validation refuses, or a warning kept for the record), the launch's log line, the CUDA allocator's
    setting, a ``plan_gpu`` the run does not read, tensor parallelism across nodes, a ``model=hf``
    file's ``head_dim`` left to its class (:func:`flopsweep.models.hf.head_dim_note`), and the memory estimate
    (``metrics.predicted_peak_gib``; ``run.before_run``'s in a record that is not ``ok``)."""
    p, cfg = job.plan, job.cfg
    if (killed := killed_round_line(config_json(cfg), info.sweep_dir)) is not None:
        log.warning("skipped: %s", killed)  # the OOM killer's SIGKILL in an earlier round (session 40)
        return job.fail("invalid", rec.error(KILLED_ROUND, killed, "config"))
    try:
        host_warning = check_free_host_memory(p, overrides=info.overrides)
    except ConfigError as exc:  # refused as validation refuses: no worker started
        return job.fail("invalid", rec.error("ConfigError", str(exc), "config"))
    job.layout = p.layout
    job.launch_warnings = [host_warning] if host_warning else []
    from flopsweep.shown_overrides import shown as typed

    shown = printable(typed(info.overrides)) or "defaults"
    log.info("launching %s on %s: %s", plural(p.world_size, "rank"), cfg.device, shown)
    use_expandable_segments(cfg.device)
    if host_warning is not None:
        log.warning("%s", host_warning)
    if cfg.plan_gpu is not None or cfg.plan_gpu_memory_gib is not None:
        name = torch_device_name() if cfg.device == "cuda" else None  # the plan checked a GPU is here
        if (line := warn_plan_gpu(cfg, name)) is not None:
            log.warning("%s", line)
    if (across := tp_across_nodes(p.layout, p.nproc_per_node)) is not None:
        log.warning("%s", across)
    if cfg.model.arch == "hf":  # a head_dim the file left to its class: Qwen3's 128 (session 39)
        from flopsweep.models.hf import head_dim_note

        if (line := head_dim_note(cfg.model)) is not None:
            log.warning("%s", line)
            job.launch_warnings.append(line)
    job.predicted_peak_gib = predicted_peak_gib(cfg, p.layout)  # the plan's estimate, before any rank starts
    if cfg.device == "cuda" and (line := over_memory(job.predicted_peak_gib, cfg)) is not None:
        log.warning("%s", line)
        job.launch_warnings.append(line)
    return job


def over_memory(predicted_gib: float | None, cfg: RunConfig) -> str | None:
    """:func:`flopsweep.oom_note.over_memory_line` for GPU 0 of this machine (the first the ranks see),
    its fix the levers ``cfg`` (resolved) has not pulled, estimated on that GPU off its memory edge
    (:func:`flopsweep.memory_fix.gpu_memory_fix`); None when no GPU is visible or the estimate fits it."""
    from flopsweep.memory_edge import EDGE_HEADROOM
    from flopsweep.memory_fix import gpu_memory_fix
    from flopsweep.sizesearch import cuda_capacity

    capacity = cuda_capacity("cuda")
    if capacity is None:
        return None
    return over_memory_line(
        predicted_gib, capacity, torch_device_name(), partial(gpu_memory_fix, cfg, margin=EDGE_HEADROOM)
    )


def _log_reused(what: str, reuse: dict[int, dict[str, Any]], record: Any, size_key: str) -> None:
    """Log which of the offered probes a search took over (:func:`flopsweep.reuse.reused_line`)."""
    if line := reused_line(what, reuse, record, size_key):
        log.info("%s", line)


def sized(job: JobResult) -> JobResult:
    """planned -> sized: run the searches the config asks for (:data:`SEARCHES`), each
    :class:`~flopsweep.sizesearch.SizeSearch` on the plan the one before sized.

    Each search holds itself in ``job.run[axis.key]`` after every probe (result null until it
    ends), so that a run interrupted during a search keeps the probes that finished. With
    ``job.resumed`` each search takes over the probes that record's search of the same set-up
    finished on this kind of machine (:func:`flopsweep.reuse.reusable_probes`). A search that
    fails ends the job with its probe's outcome (:attr:`JobResult.outcome`; ``even <first size>
    does not fit`` when nothing fits), at the sizes reached."""
    p = job.plan
    here = Machine.here(p.cfg.device, p.world_size) if job.resumed is not None else None
    for axis in SEARCHES:
        if not axis.wanted(p.cfg):
            continue
        same = axis.same(p.cfg)
        reuse = reusable_probes(job.resumed, axis.key, axis.size_key, here=here, same=same, what=axis.name)
        hold = partial(job.run.__setitem__, axis.key)
        try:
            p, job.run[axis.key] = axis.find(p, job.path.parent, on_probe=hold, reuse=reuse)
        except NothingFits as exc:
            job.run[axis.key] = exc.record
            _log_reused(axis.name, reuse, exc.record, axis.size_key)
            error = dict(exc.outcome.error or {})
            error["message"] = f"{axis.name}: even {axis.least(p.cfg)} does not fit: {error.get('message')}"
            job.outcome, job.cfg = Outcome(exc.outcome.status, error=error), p.cfg
            return job
        except ProbeFailed as exc:
            job.run[axis.key] = exc.record
            _log_reused(axis.name, reuse, exc.record, axis.size_key)
            job.outcome, job.cfg = exc.outcome, p.cfg
            return job
        _log_reused(axis.name, reuse, job.run[axis.key], axis.size_key)
    job.sized, job.cfg = p, p.cfg
    return job


def launched(job: JobResult) -> JobResult:
    """sized -> launched: start the measured run's ranks at the sizes found (this Slurm task's one
    rank under Slurm) and keep their outcome; nothing when a search already ended the job."""
    if job.outcome is not None:  # a search failed: its probe's outcome is the job's
        return job
    p = job.sized
    job.measuring = p.cfg  # an interrupt from here on is recorded at the sizes measured
    if job_launcher() != "local":  # chosen by the job's config (hydra.launcher), not by the environment
        job.outcome = launch_node_agent(p, job.path.parent)
        return job
    job.outcome = launch_local(p, job.path.parent)
    return job


def followed(job: JobResult, group: NodeGroup) -> JobResult:
    """Instead of :func:`sized` and :func:`launched` on every node's agent but node 0's of a
    multi-node Slurm job: run this node's ranks of every run node 0's agent starts, its searches'
    probes and the measured run (:meth:`flopsweep.lockstep.NodeGroup.follow`); node 0's agent
    decides the sizes and writes the record."""
    job.sized, job.measuring = job.plan, job.plan.cfg
    job.outcome = group.follow(job.plan)
    return job


@contextmanager
def failures_recorded(job: JobResult) -> Iterator[None]:
    """Around :func:`sized` and :func:`launched`: an interrupt (Ctrl-C, SIGTERM) is recorded as an
    ``error`` in the phase the ranks reached (:func:`search_cut_short` names a search it cut short),
    at the sizes measured (as configured during a search; ``run.before_run.predicted_peak_gib`` the
    estimate of those sizes), then raised again; any other exception (the launcher itself broke) ends
    the job as an ``error`` in phase ``launch``. Either record keeps the metrics known before the run
    under ``run.before_run`` (:func:`flopsweep.job.records.before_run`). A second signal while the interrupt
    is recorded is held until the record is written, then raised (a SIGTERM after a Ctrl-C: exit 143); it
    had left the folder without a record."""
    try:
        yield
    except (KeyboardInterrupt, Terminated) as exc:
        with signals_deferred():  # a second signal (Ctrl-C again, SIGTERM): raised once the record is written
            scratch = job.path.parent / SCRATCH  # the measured run's (a probe's is in its own folder)
            local = job.measuring is not None and job_launcher() == "local"
            if local and (whole := gathered_before(scratch, interrupt_name(exc))) is not None:
                job.cfg, job.outcome = job.measuring, whole  # every figure was in: the measurement is kept
                recorded(measured(job))
                raise
            phase, _ = last_phase(scratch, job.plan.world_size)
            job.cfg = (
                job.measuring or job.plan.cfg
            )  # a measured run at the sizes found is recorded at those sizes
            estimate_at_sizes(job)  # run.before_run.predicted_peak_gib of the sizes recorded
            interrupt_recorded(job, exc, phase, f"{search_cut_short(job.run)}; every worker was stopped")
        raise
    except Exception as exc:  # noqa: BLE001 - the launcher itself broke; still record it
        job.cfg = job.plan.cfg
        job.fail("error", rec.error(type(exc).__name__, str(exc), "launch"))


@contextmanager
def start_recorded(job: JobResult) -> Iterator[None]:
    """Around the job's checks before any worker starts (:func:`planned`): the job has started
    (:func:`flopsweep.unstarted.job_started`: its folder is kept), and an interrupt (Ctrl-C, SIGTERM) is
    recorded as an ``error`` in phase ``launch``, "interrupted by SIGTERM before any worker started",
    then raised again, as :func:`failures_recorded` does later. It had left the folder with its
    ``.hydra/`` and ``run.log`` and no record ("no run had been recorded yet"). A single run's checks run
    before it (:func:`keeps_refusal`): an interrupt there leaves nothing, as a refusal does (``run.py``
    removes the folder: :func:`flopsweep.unstarted.remove_unstarted`)."""
    job_started()
    try:
        yield
    except (KeyboardInterrupt, Terminated) as exc:
        with signals_deferred():  # as failures_recorded: a second signal waits for the record
            interrupt_recorded(job, exc, "launch", " before any worker started")
        raise


def interrupt_recorded(job: JobResult, exc: BaseException, phase: str, when: str) -> None:
    """Record ``job`` as the ``error`` ``exc`` (``KeyboardInterrupt``, :class:`~flopsweep.launch.Terminated`)
    made in ``phase``: "interrupted by Ctrl-C (SIGINT)" or "by SIGTERM", then ``when``. A record that cannot
    be written is its own line on stderr (the signal's line follows)."""
    job.fail("error", rec.error(type(exc).__name__, f"interrupted by {interrupt_name(exc)}{when}", phase))
    try:
        recorded(job)
    except NotRecorded as lost:  # the signal's own message follows; say this one first
        print(f"flopsweep: {lost}", file=sys.stderr, flush=True)


def interrupt_name(exc: BaseException) -> str:
    """``SIGTERM`` for :class:`~flopsweep.launch.Terminated`, else ``Ctrl-C (SIGINT)``."""
    return "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C (SIGINT)"


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
