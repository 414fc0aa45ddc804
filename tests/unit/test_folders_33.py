"""Session 33's new-user trial of run and sweep folders (docs/reliability-4.md, rows 285 on): ``$HOME``, the
checkout, its code, tests and docs and the Python environment are no run folder; a ``.hydra`` that is no
folder, and a ``plan.csv`` a plan did not make, are refused before Hydra writes anything. No process starts
here; ``run.refusal`` is the line ``run.py`` prints before Hydra (exit 2)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from flopsweep import unstarted
from flopsweep.folders import plan_file_problem
from flopsweep.free_folder import another, free_folder  # noqa: F401 - the folder a fix names (#725)
from flopsweep.hydrafiles import output_folder_problem
from flopsweep.job import JobInfo
from flopsweep.job.lifecycle import run_job
from flopsweep.job.plantable import PLAN_COLUMNS, replace_plan_file
from run import refusal

ROOT = Path(__file__).resolve().parents[2]
KEYS = ["hydra.run.dir", "hydra.sweep.dir"]


def _said(key: str, value: Path | str, *given: str) -> str | None:
    m = ["-m", "seed=1,2"] if "sweep" in key else []
    return refusal([*m, "plan=true", "device=cpu", *given, f"{key}={value}"])


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize(
    ("where", "what"),
    [
        ("home", "is your home folder $HOME ({real})"),
        ("", "is the checkout's own folder ({real})"),
        ("benchmarks", "is the checkout's benchmarks/ ({real})"),
        ("analysis", "is the checkout's analysis/ ({real})"),
        ("tests/x", "is inside the checkout's tests/ ({parent})"),
        ("docs", "is the checkout's docs/ ({real})"),
        (".git/x", "is inside the checkout's .git/ ({parent})"),
        ("prefix/lib", "is inside the Python environment sys.prefix ({parent})"),
    ],
)
def test_home_the_checkout_and_the_python_environment_are_no_run_folder(
    tmp_path, monkeypatch, key, where, what
):
    """The trial: ``hydra.run.dir=$HOME`` (the checkout, ``analysis/``, ``tests/``, ``docs/``, ``.git/``, a
    venv's ``lib/``) ran, exit 0, writing ``.hydra/`` and ``plan.csv`` there; every later run below it was
    then refused as "inside another sweep's or run's folder". Now one line before Hydra naming the key, the
    value and a folder of its own; below ``$HOME``, ``outputs/``, ``multirun/``, ``benchmarks/results/``
    pass."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    if where == "home":
        value = home
    elif where.startswith("prefix"):
        value = Path(sys.prefix) / "lib"
    else:
        value = ROOT / where
    real, parent = os.path.realpath(value), os.path.dirname(os.path.realpath(value))
    line = _said(key, value)
    assert line is not None and line.startswith(f"Invalid config: {key}={value}: ")
    assert what.format(real=real, parent=parent) in line, line
    example = "multirun/my-sweep" if "sweep" in key else "outputs/my-run"
    base = os.path.realpath(home) if where == "home" or where.startswith("prefix") else str(ROOT)
    assert line.endswith(f"Fix: name a folder of its own, e.g. {key}={base}/{example}.")
    for allowed in (
        home / "runs" / "x",
        ROOT / "outputs" / "x",
        ROOT / "multirun" / "x",
        ROOT / "benchmarks" / "results" / "x",
    ):
        assert output_folder_problem(key, str(allowed)) is None, allowed


@pytest.mark.parametrize("kind", ["file", "link", "dangling", "fifo"])
@pytest.mark.parametrize("key", KEYS)
def test_a_hydra_that_is_no_folder_is_refused_before_hydra(tmp_path, key, kind):
    """The trial: ``mkdir d; touch d/.hydra; run.py plan=true hydra.run.dir=$PWD/d`` was refused only after
    ``plan.csv`` and ``run.log`` were written, exit 1 (a sweep's ``S/0/.hydra``: after ``multirun.yaml`` and
    ``S/0/run.log``). Now one line before Hydra, exit 2, nothing written; a real ``.hydra/`` passes."""
    folder = tmp_path / "d"
    job = folder / "0" if "sweep" in key else folder
    job.mkdir(parents=True)
    mark = job / ".hydra"
    {
        "file": mark.touch,
        "link": lambda: mark.symlink_to(tmp_path),
        "dangling": lambda: mark.symlink_to(tmp_path / "nowhere"),
        "fifo": lambda: os.mkfifo(mark),
    }[kind]()
    shown = {"file": "regular file", "link": "symbolic link", "dangling": "symbolic link", "fifo": "FIFO"}[
        kind
    ]
    assert _said(key, folder) == (
        f"Invalid config: {key}={folder}: {mark} is a {shown}, not a folder; a run writes its Hydra files "
        f"into .hydra/ and never follows or writes through it. Fix: remove {mark} if it is yours, or choose "
        f"another {key}, e.g. {key}={folder}-2."  # #845: a folder named
    )
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(
        ["d", ".hydra", *(["0"] if job != folder else [])]
    )
    mark.unlink()
    mark.mkdir()
    assert output_folder_problem(key, str(folder)) is None


def test_a_plan_refuses_a_run_folder_holding_a_plan_csv_it_did_not_make(tmp_path):
    """The trial: ``echo data > u/plan.csv; run.py plan=true hydra.run.dir=$PWD/u``: exit 0, the file
    replaced by the plan's. Now one line before Hydra (the callback's same check for a folder set elsewhere),
    exit 2, the file as it was; a run that is no plan, and a folder without one, pass."""
    folder = tmp_path / "u"
    folder.mkdir()
    (folder / "plan.csv").write_text("data\n")
    line = (
        f"Invalid config: hydra.run.dir={folder}: {folder / 'plan.csv'} is already there (a regular file); "
        f"a plan never replaces or writes through a file it did not make. Fix: {another(folder)}, "
        f"or remove {folder / 'plan.csv'} if it is yours."
    )
    assert _said("hydra.run.dir", folder) == line
    assert plan_file_problem("hydra.run.dir", str(folder), str(folder)) == line
    assert refusal(["device=cpu", f"hydra.run.dir={folder}"]) is None  # no plan: plan.csv is not its file
    assert (folder / "plan.csv").read_text() == "data\n"
    (folder / "plan.csv").unlink()
    (folder / "plan.csv").symlink_to(tmp_path / "theirs")
    assert "plan.csv is already there (a symbolic link)" in _said("hydra.run.dir", folder)
    (folder / "plan.csv").unlink()
    assert _said("hydra.run.dir", folder) is None


def test_a_plan_sweep_replaces_no_plan_csv_but_its_own_sweeps(tmp_path):
    """``-m plan=true hydra.sweep.dir=S`` with ``S/plan.csv`` a file of the user's (no ``multirun.yaml``: no
    sweep's plan) replaced it, exit 0; so did ``S/0/plan.csv`` (a plan over ``plan_clusters``). Now refused
    before Hydra; a sweep's own plan beside its ``multirun.yaml`` (a second plan, ``resume=true``) is started
    afresh as before, but never through a link."""
    sweep = tmp_path / "S"
    (sweep / "0").mkdir(parents=True)
    (sweep / "0" / "plan.csv").write_text("data\n")
    line = _said("hydra.sweep.dir", sweep)
    assert line == (
        f"Invalid config: hydra.sweep.dir={sweep}: {sweep / '0' / 'plan.csv'} is already there (a regular "
        "file, no sweep's multirun.yaml beside it); a plan never replaces or writes through a file it did "
        f"not make. Fix: {another(sweep, 'hydra.sweep.dir')}, or remove {sweep / '0' / 'plan.csv'} if it is "
        "yours."
    )
    (sweep / "plan.csv").write_text("data\n")
    assert f"{sweep / 'plan.csv'} is already there" in _said("hydra.sweep.dir", sweep, "resume=true")
    (sweep / "multirun.yaml").write_text("hydra: {}\n")  # a sweep's folder: its own plan, started afresh
    assert plan_file_problem("hydra.sweep.dir", str(sweep), str(sweep)) is None
    assert _said("hydra.sweep.dir", sweep, "resume=true") is None
    (sweep / "plan.csv").unlink()
    (sweep / "plan.csv").symlink_to(tmp_path / "theirs")
    assert "plan.csv is already there (a symbolic link)" in _said("hydra.sweep.dir", sweep, "resume=true")


def test_a_single_plans_write_never_replaces_a_file_made_meanwhile(tmp_path, hydra_compose):
    """The job's own write, should a ``plan.csv`` appear after the callback's check: hard-linked into
    place, it fails on the file there, which is kept; the plan's table still prints, with the line saying
    why the file was not written and its fix."""
    path = tmp_path / "plan.csv"
    path.write_text("data\n")
    with pytest.raises(FileExistsError):
        replace_plan_file(path, [], PLAN_COLUMNS, overwrite=False)
    assert path.read_text() == "data\n" and sorted(p.name for p in tmp_path.iterdir()) == ["plan.csv"]
    given = ["plan=true", "device=cpu", "model=gpt-tiny"]
    (tmp_path / "run.log").touch()
    unstarted.expect(tmp_path)
    unstarted.job_folder_made(tmp_path)
    try:
        record = run_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given, hydra_files={}))
    finally:
        unstarted.job_started()
    assert record["unwritten"] == (
        f"flopsweep: plan.csv could not be written: {path} (File exists); the plan above is complete. Fix: "
        f"remove {path} if it is yours, or {another(path.parent)}"
    )
    assert path.read_text() == "data\n" and "gpt-tiny" in record["plan_csv"]
