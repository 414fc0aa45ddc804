"""Session 25: an interrupt (Ctrl-C, SIGTERM) while Hydra had made a job's folder and the job had not yet
started left the folder with an empty ``run.log`` (a single run: its lock file beside it too) and no record.
Now what the job left is removed (:mod:`flopsweep.unstarted`, run by the signal's handler before the first
job and by ``run.py`` after it), and from the job's checks on the interrupt is the job's ``error`` record
(:func:`flopsweep.job.lifecycle.start_recorded`, tests/integration/test_unstarted.py: the record runs git).
The signal's timing cannot be made deterministic in a process (no pause hook there), so the parts are tested
here, in process."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from flopsweep import signals, unstarted
from flopsweep.locks import lock_sweep_dir


@pytest.fixture(autouse=True)
def nothing_pending():
    unstarted.PENDING.update(folder=None, keep=None, lock=None)
    yield
    unstarted.PENDING.update(folder=None, keep=None, lock=None)


def _made_by_hydra(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)  # hydra.core.utils.run_job
    (folder / unstarted.JOB_LOG).touch()  # its log handler opens run.log
    unstarted.job_folder_made(folder)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_single_run_stopped_before_its_job_leaves_nothing_not_even_its_lock(tmp_path):
    run_dir = tmp_path / "outputs" / "2026-12-05" / "10-31-00-ab12"
    keep = unstarted.existing_ancestor(run_dir)  # before the lock makes outputs/2026-12-05
    assert keep == tmp_path
    lock = lock_sweep_dir(
        run_dir
    )  # its file beside the folder: outputs/2026-12-05/.10-31-00-ab12.flopsweep-lock
    unstarted.expect(keep, lock)
    _made_by_hydra(run_dir)
    assert _tree(tmp_path) == [
        "outputs",
        "outputs/2026-12-05",
        "outputs/2026-12-05/.10-31-00-ab12.flopsweep-lock",
        "outputs/2026-12-05/10-31-00-ab12",
        "outputs/2026-12-05/10-31-00-ab12/run.log",
    ]
    assert unstarted.remove_unstarted() == run_dir
    assert _tree(tmp_path) == [] and lock.closed
    assert unstarted.remove_unstarted() is None  # once: nothing pending any more


def test_a_folder_that_existed_or_holds_anything_else_is_kept(tmp_path):
    run_dir = tmp_path / "mine"
    run_dir.mkdir()
    unstarted.expect(unstarted.existing_ancestor(run_dir))
    _made_by_hydra(run_dir)
    assert unstarted.remove_unstarted() is None and _tree(tmp_path) == ["mine"]  # the user's folder stays
    other = tmp_path / "a" / "b"
    unstarted.expect(unstarted.existing_ancestor(other))
    _made_by_hydra(other)
    (other / unstarted.JOB_LOG).write_text("[flopsweep][INFO] - a line\n")  # a log with lines is kept
    (other / "notes.txt").write_text("x")
    assert unstarted.remove_unstarted() is None
    assert _tree(tmp_path) == ["a", "a/b", "a/b/notes.txt", "a/b/run.log", "mine"]


def test_a_log_that_is_a_link_is_never_followed_or_removed(tmp_path):
    target = tmp_path / "target.log"
    target.touch()
    job = tmp_path / "sweep" / "0"
    job.mkdir(parents=True)
    (job / unstarted.JOB_LOG).symlink_to(target)
    unstarted.expect(tmp_path / "sweep")
    unstarted.job_folder_made(job)
    assert unstarted.remove_unstarted() is None
    assert target.exists() and (job / unstarted.JOB_LOG).is_symlink()


def test_a_sweeps_folder_stays_and_only_the_unstarted_jobs_folder_goes(tmp_path):
    sweep = tmp_path / "multirun" / "x"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    unstarted.expect(sweep)
    _made_by_hydra(sweep / "0")
    unstarted.job_started()  # job 0 ran and recorded itself
    assert unstarted.remove_unstarted() is None and (sweep / "0").is_dir()
    _made_by_hydra(sweep / "1")  # job 1: interrupted before it started
    assert unstarted.remove_unstarted() == sweep / "1"
    assert _tree(sweep) == ["0", "0/run.log", "multirun.yaml"]


def test_the_stop_handler_runs_the_cleanup_before_its_line_and_exit(tmp_path, monkeypatch, capfd):
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    run_dir = tmp_path / "out"
    unstarted.expect(tmp_path)
    _made_by_hydra(run_dir)

    def exit_status(code: int) -> None:  # os._exit would end pytest
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", exit_status)
    try:
        signals.stop_before_jobs({}, unstarted.remove_unstarted)
        with pytest.raises(SystemExit) as stopped:
            signals._stop(signal.SIGTERM, None)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
        signals._CLEANUP.clear()
    assert stopped.value.code == 143 and not run_dir.exists()
    assert (
        capfd.readouterr().err
        == "flopsweep: stopped by SIGTERM before any job started; nothing was recorded\n"
    )
