"""Hydra callbacks (configured under ``hydra.callbacks`` in ``conf/config.yaml``) and the
two errors with which a job stops a sweep on purpose."""

from __future__ import annotations

import itertools
import logging
import os
import stat
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException
from hydra.experimental.callback import Callback

from flopsweep import tree, unstarted
from flopsweep.files import RecordUnwritable, check_writable
from flopsweep.folders import (  # noqa: F401 - the sweep folder's refusals, where they were
    MAX_JOB_FOLDERS,
    other_sweep_problem,
    plan_file_problem,
    run_folder_problem,
    sweep_folder_problem,
)
from flopsweep.free_folder import another
from flopsweep.hydrafiles import sweep_dir as sweep_dir_of
from flopsweep.job_log import job_log_name
from flopsweep.locks import (  # noqa: F401 - the lock's names, where they were
    LOCK_SUFFIX,
    SweepBusy,
    inner_lock_path,
    lock_path,
    lock_sweep_dir,
)
from flopsweep.progress import REFUSED, job_seconds, progress_line, sweep_starting  # noqa: F401 - where it was
from flopsweep.record import METRICS_FILE, STATUSES
from flopsweep.safe_read import RecordError, read_json
from flopsweep.signals import jobs_done
from flopsweep.text import article, machine_stdout, say

log = logging.getLogger("flopsweep")


FAIL_FAST_NOTE = "stopped early by fail_fast"
"""The summary's note where ``fail_fast=true`` stopped the sweep (:class:`SweepStopped`'s default note)."""


class SweepStopped(CompactHydraException):
    """The sweep stops at this job: ``fail_fast=true`` and the job was not ``ok`` (it was recorded), or
    the job was refused once Hydra composed it (``run.py``: an interpolation that cannot resolve).

    In the sweep process (Hydra's basic launcher) :class:`SweepSummary` prints ``brief`` and
    exits 1; where the job ran in another process (a Slurm task), the error reaches Hydra,
    which prints the full message without a stack trace and exits 1.

    Args:
        message: the full line, the job's error message included.
        brief: the line for a console that already shows the job's error (its log line).
        note: why the sweep stopped, as the summary line says it in brackets: :data:`FAIL_FAST_NOTE`,
            or ``stopped: job 0 was refused before it ran`` where ``fail_fast`` had no part in it.
    """

    def __init__(self, message: str, brief: str | None = None, note: str = FAIL_FAST_NOTE) -> None:
        super().__init__(message)
        self.brief = brief or message
        self.note = note


class RecordRefused(CompactHydraException):
    """A job directory already holds a ``metrics.json`` and ``resume`` is false."""


class JobNotRecorded(CompactHydraException):
    """A job's ``metrics.json`` could not be written (its directory turned read-only or full);
    the message is the one line naming the job, the path and why. The sweep stops."""


def _read_status(path: Path) -> tuple[str, str | None]:
    """(status, run id) of one record; ``("unreadable", None)`` when it cannot be read, and for a
    path that is not a regular file (a link, a FIFO, a device: never opened)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return "unreadable", None
        record = read_json(path)
        if record["status"] not in STATUSES:  # a hand-made file: counted, never shown as a status
            return "unreadable", None
        return str(record["status"]), record["run"]["id"]
    except (RecordError, OSError, ValueError, KeyError, TypeError):
        return "unreadable", None


def ok_run_ids(sweep_dir: Path) -> dict[str, str]:
    """Run id by path of the ``ok`` records under ``sweep_dir`` (the ones a resumed sweep skips)."""
    return {path: run for path, (status, run) in recorded_runs(sweep_dir).items() if status == "ok"}


def recorded_runs(sweep_dir: Path) -> dict[str, tuple[str, str]]:
    """(status, run id) by path of every readable record under ``sweep_dir`` when the sweep starts: a record
    that still holds its run id when the sweep ends was kept, not run (:func:`count_statuses`)."""
    found = {}
    for path in sorted(tree.find(sweep_dir, METRICS_FILE)):
        status, run_id = _read_status(path)
        if status != "unreadable" and run_id is not None:
            found[str(path)] = (status, run_id)
    return found


Before = Mapping[str, str | tuple[str, str]]
"""The records there when a sweep starts, by path: run id (:func:`ok_run_ids`) or status and run id
(:func:`recorded_runs`)."""

KEPT = "kept"
"""How :func:`count_statuses` counts a record that is not ``ok`` and that ``resume=true`` kept, not ran: a job
SIGKILL ended, or a round skipped for such a kill (:func:`flopsweep.job.killed_rounds.kept_on_resume`).
Shown as :data:`KEPT_SHOWN` after a job and among the skipped in the summary (:func:`summary_line`). Was
(session 41): counted as ``error``, the job's own line saying ``skipped``."""

KEPT_SHOWN = "skipped (killed before: its error record kept)"
"""The progress line's status of a :data:`KEPT` job."""


def count_statuses(sweep_dir: Path, kept: Before | None = None) -> Counter:
    """Statuses of the ``metrics.json`` records under ``sweep_dir``.

    Args:
        kept: run id (or status and run id: :func:`recorded_runs`) by path of the records that were there
            before the sweep (:func:`ok_run_ids`); a record still holding its old run id counts as
            ``skipped`` when ``ok``, else :data:`KEPT`. Unreadable records count as ``unreadable``.
    """
    return Counter(_counted(path, kept or {}) for path in sorted(tree.find(sweep_dir, METRICS_FILE)))


def _counted(path: Path, kept: Before) -> str:
    """The status under which the summary counts the record at ``path`` (:func:`count_statuses`)."""
    status, run_id = _read_status(path)
    before = kept.get(str(path))
    if run_id is None or (before[1] if isinstance(before, tuple) else before) != run_id:
        return status
    return "skipped" if status == "ok" else KEPT


def job_status(job_dir: Path, kept: Before | None = None) -> str | None:
    """The status of the record in ``job_dir`` as the sweep summary counts it (``ok``, ``oom``,
    ``error``, ``invalid``, ``skipped``, :data:`KEPT` or ``unreadable``: :func:`count_statuses`); None when
    the job left no record there (its record could not be written)."""
    path = Path(job_dir) / METRICS_FILE
    return _counted(path, kept or {}) if os.path.lexists(path) else None


def _failure(path: Path) -> str:
    """The failed record's line at ``path`` (:func:`flopsweep.job.records.failure_line`), or what kept it."""
    from flopsweep.job.records import failure_line

    try:
        return failure_line(read_json(path), path)
    except (RecordError, OSError, ValueError) as exc:
        return f"the record {path} cannot be read: {exc}"


def summary_line(counts: Counter) -> str:
    """``"6 ok, 2 oom, 1 error, 0 invalid, 3 skipped"`` (plus any unreadable records); the :data:`KEPT`
    records among the skipped, with their status: ``1 skipped (1 killed before: its error record kept)``."""
    parts = [f"{counts.get(s, 0)} {s}" for s in STATUSES]
    skipped, kept = counts.get("skipped", 0), counts.get(KEPT, 0)
    records = "its error record" if kept == 1 else "their error records"
    parts.append(f"{skipped + kept} skipped" + (f" ({kept} killed before: {records} kept)" if kept else ""))
    if counts.get("unreadable"):
        parts.append(f"{counts['unreadable']} unreadable")
    return ", ".join(parts)


def sweep_size(config: Any) -> int | None:
    """Jobs in this multirun: the product of the sweep overrides' lengths (command line and
    ``hydra.sweeper.params``, command line first, as Hydra's basic sweeper expands them), times
    ``repeats`` (the rounds that flopsweep's sweeper adds).
    An Optuna study (``hydra/sweeper=optuna_objective``) runs ``hydra.sweeper.n_trials`` jobs, whatever
    its search space holds (``range(1,33)`` is a distribution to draw from, not 32 jobs).
    None when it cannot be told (another sweeper, or the tuner, ``hydra/sweeper=tune``). Each axis's values
    are :func:`flopsweep.override_schema.listed_values`' (a ``glob()`` of a group: its option files)."""
    from flopsweep.override_parsing import override_parser
    from flopsweep.override_schema import listed_values

    try:
        if str(config.hydra.sweeper.get("_target_", "")).endswith("flopsweep_tune.TuneSweeper"):
            return None  # the tuner decides its jobs as it goes
        if config.hydra.sweeper.get("n_trials") is not None:
            return int(config.hydra.sweeper.n_trials)
        params = dict(config.hydra.sweeper.get("params") or {})
        lines = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
        by_key = {o.key_or_group: o for o in override_parser().parse_overrides(lines)}
        total = 1
        for o in by_key.values():
            if o.is_sweep_override():  # a glob of a group too (model=glob(gpt-1*)): was no total
                if (values := listed_values(o)) is None:
                    return None
                total *= len(values)
        return total * max(1, int(config.get("repeats") or 1))  # repeats=N: N rounds of the jobs
    except Exception:  # noqa: BLE001 - progress is a courtesy; never fail the sweep over it
        return None


PARTIAL_PLAN = "plan.partial.csv"
"""The name a sweep's ``plan.csv`` takes when the sweep stops before its last job
(:meth:`SweepSummary._plan_stopped`): the rows of the jobs planned before, not the whole plan."""


def is_terminal(stream: Any) -> bool:
    """True when ``stream`` is an interactive terminal (not a pipe, a file or pytest's capture) and
    ``TERM`` is not ``dumb``: the sweep progress then draws a bar, else it stays a plain line."""
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _job_num(config: Any) -> int | None:
    """The job's ``hydra.job.num`` (from 0), or None where the config has none."""
    try:
        return int(config.hydra.job.num)
    except Exception:  # noqa: BLE001 - progress is a courtesy; a line without the number
        return None


def _lock_or_exit(run_dir: Path, key: str) -> Any:
    """:func:`lock_sweep_dir`, or the refusal's one line and exit status 1 (2 for a folder refused;
    Hydra turns a
    callback's exceptions into warnings, so a raise would let the run go on). First, ``run_dir``
    (the value of ``key``, ``hydra.run.dir`` or ``hydra.sweep.dir``, also when a config file set it)
    must be a folder or missing, outside a run's own files, with no other user's link on its path
    (:func:`flopsweep.hydrafiles.output_folder_problem`), and writable, or made where this user can write
    (:func:`flopsweep.hydrafiles.unwritable_folder_problem`: the default ``outputs/...`` of a read-only
    working folder)."""
    from flopsweep.hydrafiles import output_folder_problem, unwritable_folder_problem

    if problem := output_folder_problem(key, str(run_dir)) or unwritable_folder_problem(key, str(run_dir)):
        print(f"flopsweep: {problem}", file=sys.stderr, flush=True)
        raise SystemExit(2)  # a config refused
    try:
        return lock_sweep_dir(run_dir)
    except SweepBusy as exc:
        print(f"flopsweep: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    except OSError as exc:  # never a warning from Hydra, and never a run without its lock
        print(
            f"flopsweep: cannot lock {run_dir} ({exc.strerror or exc}: {exc.filename or run_dir}); a sweep "
            f"or run never goes on without its lock. Fix: choose {article(key)} you can write to",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1) from None


def _refuse(problem: str | None, lock: Any = None, code: int = 2) -> None:
    """Print ``problem`` as flopsweep's one line and exit ``code`` (2, a config refused, as every refusal
    before launch), releasing ``lock`` (its file unlinked), when there is one; else nothing."""
    if problem is None:
        return
    if lock is not None:
        lock.close()
    print(f"flopsweep: {problem}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def job_folders_problem(config: Any) -> str | None:
    """The one-line refusal of a sweep one of whose job folders (``hydra.sweep.dir/N``, Hydra's
    default ``hydra.sweep.subdir``, N below the sweep's job count, :func:`sweep_size`) is already
    there and is not a folder (a symbolic link, dangling or not, a FIFO, a file): the job would be
    refused after the jobs before it ran (:func:`flopsweep.safe_folders.job_folder`), so the sweep is
    refused at its start. Also refused: job 0's folder (``sweep_dir/<subdir>``, the subdir resolved for
    job 0: :func:`flopsweep.hydrafiles.first_job_folder`) through another user's symbolic link
    (:func:`flopsweep.links.foreign_link`), such as a ``..`` brought in by an interpolation
    (``hydra.sweep.subdir=${oc.env:SUB}``, ``SUB=../theirs/x``) that the command line's check cannot
    see: Hydra would make that folder before the job's own check. None when there is none, or the
    jobs' folders cannot be told (another ``hydra.sweep.subdir``: each job still refuses its own). At
    most :data:`MAX_JOB_FOLDERS` entries are looked at, links never followed."""
    from omegaconf import OmegaConf

    from flopsweep.hydrafiles import first_job_folder
    from flopsweep.safe_folders import foreign_link_refusal
    from flopsweep.safe_read import file_kind

    first = first_job_folder(config)
    if first and foreign_link_refusal(sweep_dir_of(config)) is None:  # else the sweep folder's own line
        written, folder = first
        shown = f"Invalid config: hydra.sweep.subdir={written} (job 0's folder {folder})"
        if foreign := foreign_link_refusal(folder, shown):
            return f"{foreign.line}. Fix: {foreign.fix}"
    sweep_dir = sweep_dir_of(config)
    subdir = OmegaConf.to_container(config.hydra.sweep, resolve=False).get("subdir")
    total = sweep_size(config)
    if subdir != "${hydra.job.num}" or total is None:
        return None
    try:
        with os.scandir(sweep_dir) as entries:
            for entry in itertools.islice(entries, MAX_JOB_FOLDERS):
                if (
                    entry.name.isdigit()
                    and int(entry.name) < total
                    and not entry.is_dir(follow_symlinks=False)
                ):
                    kind = file_kind(entry.stat(follow_symlinks=False).st_mode)
                    return (
                        f"{entry.path} is a {kind}, not a folder flopsweep made, where job {entry.name} "
                        f"of this sweep goes; it is never followed or written through. Fix: remove "
                        f"{entry.path}, or {another(sweep_dir, 'hydra.sweep.dir')}"
                    )
    except OSError:  # missing (a new sweep), or unreadable: each job checks its own folder
        return None
    return None


class SweepSummary(Callback):
    """Prints one status line at the end of a multirun, e.g. ``6 ok, 2 oom, 1 error, 0 invalid, 3 skipped``.

    It notes the ok records present when the sweep starts, so that the jobs a
    resumed sweep skipped are counted as ``skipped``. When ``fail_fast`` stops the
    sweep, it prints the line after the job that stopped it.
    """

    def __init__(self) -> None:
        self.kept: Before = {}
        self.total: int | None = None
        self.done = self.skipped = 0
        self.started = 0.0
        self.pid: int | None = None  # the sweep process (a Slurm task runs a pickled copy)

    def __getstate__(self) -> dict[str, Any]:
        """The state a launcher pickles with the sweep's callbacks for its tasks (submitit): all but
        the lock, an open file that belongs to the sweep process alone."""
        return {key: value for key, value in self.__dict__.items() if key != "lock"}

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        """A single run locks its directory too (a second run or a sweep there is refused), and is
        refused in a sweep's folder (:func:`run_folder_problem`), before anything is written there. Hydra's
        config is set first, as ``run_job`` sets it before it reads the folder: a ``hydra.run.dir`` of
        ``${hydra:runtime.cwd}/...`` raised here, Hydra made the exception a warning, and the folder went
        unchecked (into ``conf/``: docs/reliability-4.md #276)."""
        from hydra.core.hydra_config import HydraConfig

        from flopsweep.job.plansweep import plan_scratch

        HydraConfig.instance().set_config(config)  # as run_job does next: ${hydra:runtime.cwd} resolves
        run_dir = Path(str(config.hydra.run.dir))
        keep = unstarted.existing_ancestor(run_dir)  # before the lock makes the folders above it
        if config.get("plan") and (scratch := plan_scratch(config, "run")):  # a plan still prints
            from flopsweep.job.plantable import PLAN_FILE, UNWRITABLE

            UNWRITABLE.update(path=run_dir / PLAN_FILE, error=scratch[1])
            self.scratch, run_dir = scratch[0], scratch[0]
        self.lock = _lock_or_exit(run_dir, "hydra.run.dir")
        _refuse(run_folder_problem(run_dir, job_log_name(config)), self.lock)
        if config.get("plan"):  # a plan.csv there that this plan did not make: never replaced
            _refuse(plan_file_problem("hydra.run.dir", str(run_dir), str(run_dir)), self.lock)
        unstarted.expect(keep, self.lock)  # an interrupt before the job starts removes what was made

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        self.release()

    def release(self) -> None:
        """Release the lock, its file unlinked (:meth:`flopsweep.locks.HeldLock.close`); else at exit.
        A plan's private folder (:func:`_plan_scratch`) is removed."""
        if (lock := getattr(self, "lock", None)) is not None:
            lock.close()
        if (scratch := getattr(self, "scratch", None)) is not None:
            import shutil

            self.scratch = None
            shutil.rmtree(scratch, ignore_errors=True)

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        from omegaconf import OmegaConf

        from flopsweep.files import RecordUnwritable
        from flopsweep.hydrafiles import submitit_folder, sweeper_problem

        _refuse(sweeper_problem(config))  # before anything is made
        _refuse(job_folders_problem(config))  # before the first job: refused first, not after one ran
        from flopsweep.job.plansweep import plan_scratch

        self.unwritten, asked = None, Path(str(config.hydra.sweep.dir)) / "plan.csv"
        if config.get("plan") and (scratch := plan_scratch(config, "sweep")):  # a plan still prints
            self.unwritten = (asked, scratch[1])
            self.scratch = scratch[0]
        from flopsweep.shown_overrides import keep_sweep_params

        keep_sweep_params(config)  # a sweep file's values as typed in the lines shown (budget.tokens=15e12)
        if config.get("plan"):  # an interruption prints what was planned (run.py)
            from flopsweep.job.plansweep import SWEEP_PLAN

            SWEEP_PLAN.update(plan=asked, config=config)
        unstarted.sweep_starting(sweep_dir_of(config))  # an interrupt before any job removes what it made
        from flopsweep.job.resume import SWEEP_DIR

        SWEEP_DIR["path"] = str(sweep_dir_of(config))  # an interrupted sweep's line: resume=true finishes it
        self.lock = _lock_or_exit(sweep_dir_of(config), "hydra.sweep.dir")
        # before Hydra's sweeper rewrites multirun.yaml: another sweep's, a single run's, this one's records
        hydra = OmegaConf.to_container(config.hydra, resolve=False)
        resume, log = bool(config.get("resume")), job_log_name(config)
        _refuse(sweep_folder_problem(sweep_dir_of(config), hydra, resume=resume, log=log), self.lock)
        if config.get("plan"):  # a plan.csv no sweep's plan wrote there: never replaced
            folder = str(sweep_dir_of(config))
            _refuse(plan_file_problem("hydra.sweep.dir", folder, folder), self.lock)
        target = str((config.hydra.get("launcher") or {}).get("_target_", ""))
        try:  # flopsweep's Slurm launchers make it when they submit, after their own refusals
            submitit_folder(config.hydra.get("launcher"), make="flopsweep_slurm" not in target)
        except RecordUnwritable as exc:
            _refuse(f"{exc}. Fix: {exc.fix}", self.lock, code=1)  # not writable: no config refused
        if "submitit" in target or "flopsweep_slurm" in target:
            # submitit starts each task as `python -m submitit.core._submit` in the folder the sweep was
            # started from (sbatch exports this environment): never with that folder on its path
            os.environ["PYTHONSAFEPATH"] = "1"
        if config.get("plan"):  # plan=true: a fresh table per sweep, never the last one's rows
            from flopsweep.job.plantable import start_plan_file

            start_plan_file(sweep_dir_of(config))
        self.kept = recorded_runs(sweep_dir_of(config))  # ok ones: skipped; others: kept (KEPT)
        unstarted.expect(Path(os.path.abspath(sweep_dir_of(config))), self.lock)  # the sweep's folder kept
        self.total, self.real_stdout = sweep_size(config), machine_stdout(config)  # plan_format=json: stderr
        self.done, self.skipped, self.started, self.pid = 0, 0, time.monotonic(), os.getpid()
        sweep_starting()  # the estimate's clock waits for the first job (flopsweep.progress.jobs_began)

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        """Hydra made the job's folder and opened its log; until the job starts
        (:func:`flopsweep.unstarted.job_started`), an interrupt removes them
        (:func:`flopsweep.unstarted.remove_unstarted`)."""
        unstarted.job_folder_made(Path(str(config.hydra.runtime.output_dir)))

    def job_done(self, job_dir: Path | None, *, num: int | None = None, elsewhere: bool = False) -> None:
        """Count one more job of the multirun as done and print the progress line with the status of
        its record in ``job_dir`` (None: unknown, left out) and the job's Hydra number ``num``
        (``hydra.job.num``, from 0; None: left out), :func:`progress_line`. Only in the sweep process,
        where the count lives: a Slurm or submitit task runs a pickled copy whose line nobody would see and
        whose count starts again (those launchers call this in the sweep process as each job ends,
        ``hydra_plugins.flopsweep_slurm``). A single run has no sweep progress. ``elsewhere``: the
        job ran in another process (a Slurm task), whose log line of a failure is out of sight, so
        a failed record's line (:func:`flopsweep.job.records.failure_line`) is printed here first, on stderr,
        as the job itself logs it under the basic launcher. A plan job, which writes no record, says what it
        came to (``ok, 384 ranked, 66 dropped``, ``no set-up left (over memory 15)``, ``invalid: KEY=VALUE``:
        :func:`flopsweep.job.planoutcome.plan_outcome`), where it ran in this process."""
        if not self.started or os.getpid() != self.pid:
            return
        self.done += 1
        status = job_status(job_dir, self.kept) if job_dir is not None else None
        if status is None and job_dir is not None:  # a plan writes no record: what it came to
            from flopsweep.job.planoutcome import take_outcome

            status = take_outcome(job_dir)
        now = time.monotonic()
        elapsed = now - self.started
        if elsewhere and job_dir is not None and status in ("oom", "error", "invalid"):
            print(f"flopsweep: {_failure(Path(job_dir) / METRICS_FILE)}", file=sys.stderr, flush=True)
        self.skipped += status in ("skipped", KEPT)  # resume=true: no time of its own, in no estimate
        status = KEPT_SHOWN if status == KEPT else status
        line = progress_line(
            self.done,
            self.total,
            elapsed,
            status=status,
            bar=is_terminal(sys.stdout),
            job=num,
            ran=self.done - self.skipped,
            job_s=job_seconds(self.started, now),  # not the composing before the first job
        )
        say(line)  # a closed pipe (| head) drops the line; the sweep goes on

    def on_job_end(self, config: Any, job_return: JobReturn, **kwargs: Any) -> None:
        stop = job_return._return_value if job_return.status == JobStatus.FAILED else None
        if not isinstance(stop, RecordRefused):  # a refused job did not run: its line, no progress
            self.job_done(Path(str(config.hydra.runtime.output_dir)), num=_job_num(config))
        if isinstance(stop, SweepStopped | RecordRefused) and os.getpid() == self.pid and config.get("plan"):
            self._plan_stopped(config)  # the rows kept, said partial: a plan has no records to summarise
        elif isinstance(stop, SweepStopped):
            self._print(config, f" ({stop.note})")
        if isinstance(stop, SweepStopped | RecordRefused) and os.getpid() == self.pid:
            # Stop here, in the sweep process: raised through Hydra, the error would print again
            # after "Error executing job with overrides", with Hydra's HYDRA_FULL_ERROR hint.
            line = stop.brief if isinstance(stop, SweepStopped) else str(stop)
            print(f"flopsweep: {line}", file=sys.stderr, flush=True)
            raise SystemExit(1)
        self._stop_if_unwritable(config, job_return)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        if getattr(self, "real_stdout", None) is not None:  # plan_format=csv|json: its text on stdout alone
            sys.stdout, self.real_stdout = self.real_stdout, None
        try:
            jobs_done()  # a Ctrl-C held since the last job ended (flopsweep.signals.between_jobs): now
            self._end(config)
        finally:
            self.release()

    def _end(self, config: Any) -> None:
        plan = sweep_dir_of(config) / "plan.csv"
        if config.get("plan") and plan.exists():  # plan=true: the table instead of a summary
            from flopsweep.job.plansweep import plan_lines

            try:
                lines = plan_lines(plan, config, shown=not getattr(self, "unwritten", None))
            except RecordError as exc:  # a link, a FIFO or a file over its bound planted there: never read
                lines = [
                    f"flopsweep: the sweep's plan cannot be shown: {plan}: {exc}; each job's is in its log"
                ]
            for line in lines:
                print(line, file=sys.stderr if line.startswith("flopsweep: ") else sys.stdout, flush=True)
            if getattr(self, "unwritten", None):
                from flopsweep.job.plantable import unwritten_line

                print(unwritten_line(*self.unwritten), file=sys.stderr, flush=True)
            return
        self._print(config, "")

    def _stop_if_unwritable(self, config: Any, job_return: JobReturn) -> None:
        """Stop the sweep, with one line and the summary, when this job's record could not be
        written or the next job could not be (the sweep directory became read-only, was
        replaced, or is full): every later job would run for nothing, and Hydra would fail
        with a traceback making the next job's directory. (Inside a Slurm task the sweep is
        elsewhere: the submitting process reports the job's one line.)"""
        from flopsweep.slurm import inside_submitit_task

        if inside_submitit_task():
            return
        line = note = None
        if job_return.status == JobStatus.FAILED and isinstance(job_return._return_value, JobNotRecorded):
            line, note = str(job_return._return_value), f"job {config.hydra.job.num} was not recorded"
        elif self.started and (self.total is None or self.done < self.total):
            try:
                check_writable(sweep_dir_of(config))
            except RecordUnwritable as exc:
                note = "the sweep directory cannot be written"
                line = (
                    f"the sweep stopped before its next job: {exc}. Fix: {exc.fix}, then re-run the "
                    "sweep with resume=true (it keeps the ok records)."
                )
        if line is None:
            return
        print(f"flopsweep: {line}", file=sys.stderr, flush=True)
        if config.get("plan"):
            self._plan_stopped(config)
        else:
            self._print(config, f" (stopped: {note})")
        raise SystemExit(1)  # Hydra turns a callback's exceptions into warnings

    def _plan_stopped(self, config: Any) -> None:
        """A sweep of plans that stops before its last job (a job refused after Hydra composed it, a folder
        that turned read-only): its ``plan.csv`` holds the rows of the jobs before, which nothing said were
        not the whole plan. It is renamed :data:`PARTIAL_PLAN` (the name says so; kept as ``plan.csv``
        where it cannot be), its table printed, then the line saying it is partial."""
        plan = sweep_dir_of(config) / "plan.csv"
        if not plan.is_file():
            print("flopsweep: the plan sweep stopped before any job was planned", file=sys.stderr)
            return
        partial = plan.with_name(PARTIAL_PLAN)
        try:
            os.replace(plan, partial)
        except OSError:  # the folder turned read-only: the line says it
            partial = plan
        from flopsweep.job.plansweep import SWEEP_PLAN, plan_lines

        SWEEP_PLAN["plan"] = partial  # an interrupt from here on shows these rows
        try:
            lines = plan_lines(partial, config, shown=not getattr(self, "unwritten", None))
        except Exception as exc:  # noqa: BLE001 - the line below says what it can
            lines = [f"flopsweep: the plan's rows are in {partial} (not shown: {exc})"]
        for line in lines:
            print(line, file=sys.stderr if line.startswith("flopsweep: ") else sys.stdout, flush=True)
        job = config.hydra.job.get("num", "?")
        print(
            f"flopsweep: the plan is partial: {partial} holds the rows of the jobs planned before the sweep "
            f"stopped at job {job} (why: below); job {job} and those after it were not planned",
            file=sys.stderr,
            flush=True,
        )

    def _print(self, config: Any, note: str) -> None:
        sweep_dir = sweep_dir_of(config)
        line = summary_line(count_statuses(sweep_dir, self.kept))
        # Printed only: a log line as well showed it twice under hydra.verbose.
        print(f"flopsweep summary: {line}{note} ({sweep_dir})", flush=True)
