"""The locks of run and sweep folders (session 22): a lock inside the folder when the one beside it
cannot be made, never a run without one; lock files unlinked by their holder, none left by a refused
call; sweeps and single runs refused in each other's folders, and a second sweep in a folder of
records, before anything is written; the files of an attempt that left no record set aside."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest
import yaml

from flopsweep.callbacks import run_folder_problem, sweep_folder_problem
from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)
from flopsweep.job.resume import set_aside
from flopsweep.locks import SweepBusy, inner_lock_path, lock_path, lock_sweep_dir

LONG = "x" * 245
"""A folder name that takes no ``.<name>.flopsweep-lock`` beside it (over 255 bytes: ENAMETOOLONG)."""


def _locks(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*flopsweep-lock"))


def test_a_released_lock_is_unlinked_and_a_refused_one_leaves_no_file(tmp_path: Path) -> None:
    """Before, every command left ``.<id>.flopsweep-lock`` beside its folder for good (86 in one
    ``outputs/<date>/``). Now the holder unlinks it while holding it; a refused call leaves none."""
    sweep = tmp_path / "S"
    held = lock_sweep_dir(sweep)
    assert held.path == lock_path(sweep) and _locks(tmp_path) == [".S.flopsweep-lock"]
    for other in (sweep, sweep / "0", tmp_path):  # the same folder, one inside it, one above it
        with pytest.raises(SweepBusy, match=f"pid {os.getpid()}"):
            lock_sweep_dir(other)
    assert _locks(tmp_path) == [".S.flopsweep-lock"]  # the refused ones made none
    held.close()
    held.close()  # twice: nothing more
    assert held.closed and _locks(tmp_path) == []
    lock_sweep_dir(sweep / "0").close()  # free again, and unlinked again
    assert _locks(tmp_path) == []


def test_a_waiter_on_an_unlinked_lock_file_holds_nothing(tmp_path: Path) -> None:
    """The unlink-on-release race: a waiter that opened the file before its holder unlinked it gets
    its ``flock`` on a file no path names any more; the next lock is taken on a new file at the
    path, and while that is held every other one is refused."""
    sweep = tmp_path / "S"
    first = lock_sweep_dir(sweep)
    stale = os.open(first.path, os.O_RDONLY)
    first.close()
    try:
        fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the old inode: locked, but unlinked
        second = lock_sweep_dir(sweep)
        assert os.lstat(second.path).st_ino != os.fstat(stale).st_ino
        with pytest.raises(SweepBusy, match="is writing into"):
            lock_sweep_dir(sweep)
        second.close()
    finally:
        os.close(stale)
    assert _locks(tmp_path) == []
    third = lock_sweep_dir(sweep)  # its path renamed over by another file: that file is not unlinked
    (tmp_path / "new").write_text("")
    os.replace(tmp_path / "new", third.path)
    third.close()
    assert _locks(tmp_path) == [".S.flopsweep-lock"]


def test_the_lock_goes_inside_a_folder_whose_parent_takes_no_lock_file(tmp_path: Path) -> None:
    """Before, a folder whose parent took no new file (``/scratch/$USER`` under a ``/scratch`` that is
    not the user's) ran without its lock (Hydra turned the PermissionError into a warning). Here the
    real condition is a name too long for the lock beside it: the lock goes inside the folder, every
    lock of the folder, above it and inside it sees it, and it is unlinked on release."""
    folder = tmp_path / LONG
    folder.mkdir()
    held = lock_sweep_dir(folder)
    assert held.path == inner_lock_path(folder) == folder / ".flopsweep-lock"
    for other in (folder, folder / "0"):
        with pytest.raises(SweepBusy, match=f"pid {os.getpid()}"):
            lock_sweep_dir(other)
    held.close()
    assert _locks(tmp_path) == []
    with pytest.raises(SweepBusy) as info:  # missing: neither place takes a lock file
        lock_sweep_dir(tmp_path / ("y" * 245))
    line = str(info.value)
    assert line.startswith(f"cannot make the lock file of {tmp_path / ('y' * 245)} (") and "\n" not in line
    assert "never goes on without its lock. Fix: make" in line and _locks(tmp_path) == []


def test_a_lock_taken_inside_the_folder_by_another_process_is_seen(tmp_path: Path) -> None:
    """Two processes may take different places (one could not write beside the folder): each tries
    the other place once it holds its own, so the second is refused, naming the holder."""
    sweep = tmp_path / "S"
    sweep.mkdir()
    fd = os.open(sweep / ".flopsweep-lock", os.O_RDONLY | os.O_CREAT, 0o644)  # another sweep's lock
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(
            SweepBusy, match=f"another sweep or run \\(pid {os.getpid()}\\) is writing into {sweep};"
        ):
            lock_sweep_dir(sweep)
        assert _locks(tmp_path) == ["S/.flopsweep-lock"]  # no lock beside it left behind
    finally:
        os.close(fd)


def _hydra(task: list[str]) -> dict:
    return {"job": {"config_name": "config"}, "overrides": {"task": task}, "sweeper": {"params": {}}}


def test_sweeps_and_runs_in_each_others_folders_are_refused_in_one_line(tmp_path: Path) -> None:
    """A second, different sweep into a folder of records (without ``resume``) is refused, naming
    ``resume=true`` and the command that started it; the same sweep again, naming ``resume=true``; a
    sweep into a single run's folder and a single run into a sweep's folder, each refused. A folder
    without records (a plan's) is taken over as before, and a job's search records are no sweep."""
    sweep, run = tmp_path / "S", tmp_path / "R"
    (sweep / "0").mkdir(parents=True)
    ours = _hydra(["seed=5,6", "device=cpu"])
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": ours}))
    assert sweep_folder_problem(sweep, _hydra(["seed=7", "device=cpu"]), resume=False) is None  # no records
    (sweep / "0" / "metrics.json").write_text(json.dumps({"status": "ok"}))
    other = sweep_folder_problem(sweep, _hydra(["seed=7", "device=cpu"]), resume=False)
    assert other.startswith(
        f"{sweep / 'multirun.yaml'} belongs to another sweep (overrides 'device=cpu seed=5,6'"
    )
    assert other.endswith(
        f"this sweep would overwrite it. Fix: {another(sweep, 'hydra.sweep.dir')}, or continue that "
        "sweep: resume=true with the command line that started it (hydra.overrides.task in its "
        "multirun.yaml)"
    )
    again = sweep_folder_problem(sweep, _hydra(["device=cpu", "seed=5,6", "fault={kind:none}"]), resume=False)
    assert again.startswith(
        f"{sweep / '0' / 'metrics.json'} already exists: this sweep ran in {sweep} before"
    )
    assert "Fix: add resume=true" in again
    assert sweep_folder_problem(sweep, ours, resume=True) is None
    assert run_folder_problem(sweep).startswith(
        f"hydra.run.dir={sweep} is a sweep's folder ({sweep / 'multirun.yaml'}"
    )
    (sweep / "multirun.yaml").unlink()
    assert f"({sweep / '0' / 'metrics.json'} is there)" in run_folder_problem(sweep)

    (run / "batch_search" / "mbs4").mkdir(parents=True)
    (run / "batch_search" / "mbs4" / "metrics.json").write_text("{}")  # a search's probe: no sweep
    assert run_folder_problem(run) is None and sweep_folder_problem(run, ours, resume=False) is None
    (run / "metrics.json").write_text("{}")
    for resume in (False, True):
        assert sweep_folder_problem(run, ours, resume=resume) == (
            f"{run} is a single run's folder ({run / 'metrics.json'} is there); the sweep's records would be "
            f"counted with it, and its resume would skip it. Fix: {another(run, 'hydra.sweep.dir')}"
        )


def test_the_files_of_an_attempt_without_a_record_are_set_aside(tmp_path: Path) -> None:
    """Before, a run killed with SIGKILL left its ranks' ``traceback_rank<N>.txt`` beside the next
    attempt's ok record. Now, with no record there, they (and its searches' folders) are renamed
    ``traceback_rank<N>.unrecorded-<hex>.txt`` as a failed record's are, before the new attempt."""
    for rank in (0, 1):
        (tmp_path / f"traceback_rank{rank}.txt").write_text("KeyboardInterrupt\n")
    (tmp_path / "batch_search").mkdir()
    (tmp_path / "keep.txt").write_text("not a run's file")
    assert set_aside(tmp_path / "metrics.json") is None
    names = sorted(p.name for p in tmp_path.iterdir())
    assert [n.split(".")[0] for n in names] == ["batch_search", "keep", "traceback_rank0", "traceback_rank1"]
    label = names[0].split(".", 1)[1]
    assert label.startswith("unrecorded-") and names[3] == f"traceback_rank1.{label}.txt"
    assert not list(tmp_path.glob("traceback_rank?.txt")) and (tmp_path / "keep.txt").exists()


def test_sweeps_and_runs_nested_in_each_others_folders_are_refused(tmp_path: Path) -> None:
    """Before (session 23's new-user trial), a sweep into ``multirun/x/0/sub`` ran, and the analysis of
    ``multirun/x`` mixed both sweeps. Now a sweep or run inside a sweep's or run's folder (``multirun.yaml``,
    a record or ``.hydra/`` above it), and a sweep whose folder holds another sweep's below it, are refused
    in one line naming the key, the value, the owner and the fix; side-by-side folders are not."""
    ours = _hydra(["seed=5,6", "device=cpu"])
    outer = tmp_path / "x"
    (outer / "0" / ".hydra").mkdir(parents=True)
    (outer / "multirun.yaml").write_text(yaml.safe_dump({"hydra": ours}))
    inner = outer / "0" / "sub"
    for resume in (False, True):
        assert sweep_folder_problem(inner, ours, resume=resume) == (
            f"hydra.sweep.dir={inner} is inside another sweep's or run's folder {outer / '0'} "
            f"({outer / '0' / '.hydra'} is there); its analysis would mix the two. "
            f"Fix: choose a hydra.sweep.dir outside {outer / '0'}, e.g. "
            f"{free_folder(outer / '0', 'hydra.sweep.dir')}"
        )
    deeper = outer / "new" / "deeper"  # no job folder between: the sweep's multirun.yaml names it
    assert f"folder {outer} ({outer / 'multirun.yaml'} is there)" in sweep_folder_problem(
        deeper, ours, resume=False
    )
    assert run_folder_problem(deeper) == (
        f"hydra.run.dir={deeper} is inside another sweep's or run's folder {outer} "
        f"({outer / 'multirun.yaml'} is there); its analysis would mix the two. "
        f"Fix: choose a hydra.run.dir outside {outer}, e.g. {free_folder(outer)}"
    )
    run = tmp_path / "R"
    run.mkdir()
    (run / "metrics.json").write_text("{}")
    assert f"inside another sweep's or run's folder {run} ({run / 'metrics.json'}" in run_folder_problem(
        run / "r2"
    )

    # the reverse: a sweep whose folder already holds another sweep's folder, two levels down
    (inner).mkdir()
    (inner / "multirun.yaml").write_text(yaml.safe_dump({"hydra": ours}))
    top = tmp_path / "top"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "multirun.yaml").write_text(yaml.safe_dump({"hydra": ours}))
    assert sweep_folder_problem(top, ours, resume=False) == (
        f"hydra.sweep.dir={top} holds another sweep's folder {top / 'a' / 'b'} "
        f"({top / 'a' / 'b' / 'multirun.yaml'} is there); its analysis would mix the two. "
        f"Fix: {another(top, 'hydra.sweep.dir')}, one that holds no other sweep's folder"
    )
    # the outer sweep itself (its own jobs' .hydra/ and records below it) and a sibling are not refused
    (outer / "1").mkdir()
    (outer / "1" / "metrics.json").write_text(
        json.dumps({"status": "ok", "run": {"overrides": ["seed=6", "device=cpu"]}})
    )
    (inner / "multirun.yaml").unlink()
    assert sweep_folder_problem(outer, ours, resume=True) is None
    assert sweep_folder_problem(tmp_path / "y", ours, resume=False) is None
    assert run_folder_problem(tmp_path / "y") is None


def test_resume_onto_a_foreign_record_is_refused_at_the_start(tmp_path: Path) -> None:
    """Before, ``resume=true`` into a folder with another sweep's record in ``S/0`` and no ``multirun.yaml``
    was refused only by job 0, after the sweeper had written ``S/multirun.yaml`` and ``S/0/run.log``: the
    folder then claimed to be the refused sweep's. Now the sweep's jobs are expanded (command line and
    ``hydra.sweeper.params``) and a record that is none of them is refused before anything is written."""
    sweep = tmp_path / "z"
    (sweep / "0").mkdir(parents=True)
    record = {"status": "ok", "run": {"overrides": ["model=llama-tiny", "device=cpu", "steps.measure=1"]}}
    (sweep / "0" / "metrics.json").write_text(json.dumps(record))
    ours = _hydra(["model=gpt-tiny", "device=cpu", "steps.measure=1", "resume=true"])
    assert sweep_folder_problem(sweep, ours, resume=True) == (
        f"hydra.sweep.dir={sweep}: {sweep / '0' / 'metrics.json'} is the record of another sweep or run "
        "(device=cpu model=llama-tiny steps.measure=1), no job of this sweep; resume=true continues only the "
        f"sweep that wrote it. Fix: {another(sweep, 'hydra.sweep.dir')}"
    )
    assert sorted(p.name for p in sweep.rglob("*")) == ["0", "metrics.json"]  # nothing written
    # this sweep's own record (any job of it, from the command line or hydra.sweeper.params) is resumed
    assert (
        sweep_folder_problem(
            sweep, _hydra(["model=gpt-tiny,llama-tiny", "device=cpu", "steps.measure=1"]), resume=True
        )
        is None
    )
    params = _hydra(["device=cpu", "steps.measure=1"])
    params["sweeper"]["params"] = {"model": "llama-tiny,gpt-tiny"}
    assert sweep_folder_problem(sweep, params, resume=True) is None
    params["overrides"]["task"] = [
        "device=cpu",
        "steps.measure=1.0",
    ]  # a float: no job of it wrote an int's record
    assert "is the record of another sweep or run" in sweep_folder_problem(sweep, params, resume=True)
    # its rounds (repeat=N), run controls and hydra.* in the record are no part of a job's identity
    record["run"]["overrides"] += ["repeat=1", "resume=true", "hydra.run.dir=x"]
    (sweep / "0" / "metrics.json").write_text(json.dumps(record))
    assert (
        sweep_folder_problem(
            sweep, _hydra(["model=llama-tiny", "device=cpu", "steps.measure=1"]), resume=True
        )
        is None
    )
    # an Optuna study's jobs cannot be told here: each job still refuses a foreign record itself
    assert sweep_folder_problem(sweep, {**ours, "sweeper": {"n_trials": 4}}, resume=True) is None
