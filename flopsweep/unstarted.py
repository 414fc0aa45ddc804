"""The folder of a job that never started: what an interrupt (Ctrl-C, SIGTERM) before it leaves behind is
removed, so that a job leaves either its record or no folder. Torch-free, standard library only.

Hydra makes the job's folder and opens its ``run.log`` (``hydra.core.utils.run_job``) seconds before the
job starts (the first job imports torch first); a signal there ended the process with "nothing was
recorded" (:func:`flopsweep.signals.stop_before_jobs`) or ``KeyboardInterrupt`` (a later job of a sweep)
and left the folder with an empty ``run.log`` and no ``metrics.json``, and, for a single run, its lock
file beside it. From :func:`job_started` on (:func:`flopsweep.job.lifecycle.run_job`) an interrupt is
recorded in the job's ``metrics.json`` instead.

A sweep stopped before its first job started also leaves no ``multirun.yaml`` it wrote, nor the sweep
folder it made (:func:`sweep_starting`): a later ``resume=true`` of another sweep there read it as that
sweep's and was refused ("belongs to another sweep"), and a single run there was refused as inside a
sweep's folder.

The order: :func:`sweep_starting` (a sweep's ``on_multirun_start``, before anything is made),
:func:`expect` (the callback's ``on_run_start`` or ``on_multirun_start``: the folder kept, and the lock),
:func:`job_folder_made` (``on_job_start``: Hydra made the folder), :func:`job_started` (the job is recorded
from here on), and :func:`remove_unstarted` on an interrupt (the signal's handler before the first job,
``run.py`` after it).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

JOB_LOG = "run.log"
"""The log Hydra opens in the job's folder (``${hydra.job.name}.log``; ``run`` for ``run.py``)."""

PENDING: dict[str, Any] = {"folder": None, "keep": None, "lock": None, "sweep": None}
"""The job folder made and not yet started (``folder``), the folder above it that existed before the
run (``keep``: never removed, nor anything above it), the run's lock (``lock``: anything with
``close()``, released first, so that its file beside the folder is gone too) and, until a sweep's first
job starts, the sweep's folder, the folder above it that existed before and whether its ``multirun.yaml``
was there before (``sweep``: ``(folder, existed, multirun_was_there)``, :func:`sweep_starting`)."""
MULTIRUN = "multirun.yaml"
"""The sweep's composed config, which Hydra's sweeper writes in its folder before the first job."""


def existing_ancestor(folder: Path) -> Path:
    """``folder`` if it exists (as a folder or anything else, not followed), else the nearest folder above
    it that does: what :func:`remove_unstarted` keeps."""
    folder = Path(os.path.abspath(folder))
    for candidate in (folder, *folder.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(folder.anchor or "/")


def sweep_starting(sweep_dir: Path) -> None:
    """A sweep is about to make its folder and write its ``multirun.yaml`` (``on_multirun_start``, before
    anything is made): until its first job starts (:func:`job_started`), :func:`remove_unstarted` removes
    the ``multirun.yaml`` if it was not there before, then the sweep folder and the folders above it that it
    made, where empty. A ``multirun.yaml`` that was there (``resume=true``, the same sweep again) stays."""
    folder = Path(os.path.abspath(sweep_dir))
    PENDING["sweep"] = (folder, existing_ancestor(folder), os.path.lexists(folder / MULTIRUN))


def expect(keep: Path, lock: Any = None) -> None:
    """A run or sweep is about to make its folders: :func:`remove_unstarted` keeps ``keep`` and everything
    above it (a single run: :func:`existing_ancestor` of ``hydra.run.dir``, taken before its lock makes
    the folders above; a sweep: ``hydra.sweep.dir`` itself, which holds ``multirun.yaml``; only its jobs'
    folders are removed) and releases ``lock`` (anything with ``close()``)."""
    PENDING.update(folder=None, keep=Path(os.path.abspath(keep)), lock=lock)  # "sweep": sweep_starting's


def job_folder_made(folder: Path) -> None:
    """Hydra made ``folder`` for a job and opened its ``run.log``; the job has not started."""
    PENDING["folder"] = Path(os.path.abspath(folder))
    if PENDING["keep"] is None or not PENDING["folder"].is_relative_to(PENDING["keep"]):
        PENDING["keep"] = PENDING["folder"].parent  # no expect() (a launcher's task): the folder alone


def job_started() -> None:
    """The job records itself from here on (an interrupt included): nothing to remove, no lock to release
    (a sweep's is released at exit, after its last job), and the sweep has a job: its folder and
    ``multirun.yaml`` stay."""
    PENDING.update(folder=None, lock=None, sweep=None)


def _empty_log(path: Path) -> bool:
    """``path`` is a regular file of size 0 (never a link, never followed)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == 0


def remove_unstarted() -> Path | None:
    """Remove what a job that never started left: its empty ``run.log``, then its folder and each empty
    folder above it below the one :func:`expect` kept (``outputs/<date>`` of a single run), after its lock
    is released (the lock file beside the folder unlinked); and, where no job of the sweep started, what
    the sweep made (:func:`sweep_starting`, :func:`_remove_sweep`). Anything else in the folder (a log with
    lines, an earlier run's files) keeps it and everything above. Returns the job folder when it was
    removed, else None (nothing pending, or something kept). Never raises: it runs in a signal's handler
    too."""
    folder, keep, lock, sweep = PENDING["folder"], PENDING["keep"], PENDING["lock"], PENDING["sweep"]
    PENDING.update(folder=None, lock=None, sweep=None)
    if lock is not None:
        with contextlib.suppress(Exception):
            lock.close()
    removed = None
    if folder is not None:
        log = folder / JOB_LOG
        if _empty_log(log):
            with contextlib.suppress(OSError):
                os.unlink(log)
        removed = _remove_empty(folder, keep)
    if sweep is not None:
        _remove_sweep(*sweep)
    return removed


def _remove_empty(folder: Path, keep: Path | None) -> Path | None:
    """``folder`` and each folder above it below ``keep``, while empty (``rmdir``: never a link's target);
    the first one removed, or None."""
    removed = None
    for candidate in (folder, *folder.parents):
        if keep is None or candidate == keep or not candidate.is_relative_to(keep):
            break
        try:
            os.rmdir(candidate)
        except OSError:
            break
        removed = removed or candidate
    return removed


def _remove_sweep(folder: Path, existed: Path, was_there: bool) -> None:
    """A sweep that started no job in this process: where ``folder`` holds no folder either (a job a pool or
    Slurm task ran elsewhere has its folder there), its ``multirun.yaml`` is removed where it was not there
    before (a regular file only, never a link's target), then ``folder`` and the folders above it below
    ``existed`` (the nearest that was there before the sweep), while empty."""
    path = folder / MULTIRUN
    with contextlib.suppress(OSError):
        with os.scandir(folder) as entries:
            if any(e.is_dir(follow_symlinks=False) for e in entries):
                return
        if not was_there and stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)
    if folder != existed:
        _remove_empty(folder, existed)
