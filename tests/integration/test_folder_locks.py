"""The locks and folders of sweeps and runs, end to end (session 22): a second sweep into a folder of
records, a single run into a sweep's folder and a sweep into a single run's folder refused in one
line before anything is written; no lock file left after any command; a sweep whose folder lies
under a read-only folder takes its lock inside its folder."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flopsweep.free_folder import another  # the folder a fix names (#725)
from tests.helpers import ROOT, run_py

ONE_RANK = ("device=cpu", "precision=fp32", "nproc_per_node=1", "steps.warmup=0", "steps.measure=1")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(proc: subprocess.CompletedProcess) -> str:
    """The one line of a refused command (exit 2, a config refused; no traceback, no Hydra warning)."""
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "UserWarning" not in proc.stderr, proc.stderr[-2000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("flopsweep: ")]
    return line


@pytest.mark.slow
def test_sweeps_and_runs_into_each_others_folders_are_refused_before_writing(tmp_path: Path) -> None:
    """Before: a different sweep into a sweep's folder overwrote its ``multirun.yaml`` (that sweep
    could no longer be resumed), a single run into a 2-job sweep's folder was recorded there (the
    analysis saw 3 runs, a resume "3 skipped"), and a 1-job sweep into a single run's folder printed
    "1 ok, ..., 1 skipped". Now each is one line, exit 2, every file as it was, no lock file left."""
    sweep, run = tmp_path / "S", tmp_path / "R"
    first = run_py("-m", "seed=5,6", *ONE_RANK, f"hydra.sweep.dir={sweep}", timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    before = _snapshot(sweep)

    other = _refused(run_py("-m", "seed=7", *ONE_RANK, f"hydra.sweep.dir={sweep}", timeout=300))
    assert other.startswith(f"flopsweep: {sweep / 'multirun.yaml'} belongs to another sweep (overrides ")
    assert "resume=true with the command line that started it" in other
    again = _refused(run_py("-m", "seed=5,6", *ONE_RANK, f"hydra.sweep.dir={sweep}", timeout=300))
    assert again.startswith(
        f"flopsweep: {sweep / '0' / 'metrics.json'} already exists and 1 more job records"
    )
    assert "Fix: add resume=true" in again
    single = _refused(run_py(*ONE_RANK, f"hydra.run.dir={sweep}", timeout=300))
    assert single.startswith(f"flopsweep: hydra.run.dir={sweep} is a sweep's folder (")
    assert _snapshot(sweep) == before

    resumed = run_py("-m", "seed=5,6", *ONE_RANK, "resume=true", f"hydra.sweep.dir={sweep}", timeout=300)
    assert resumed.returncode == 0 and "0 ok, 0 oom, 0 error, 0 invalid, 2 skipped" in resumed.stdout

    single_ok = run_py(*ONE_RANK, f"hydra.run.dir={run}", timeout=300)
    assert single_ok.returncode == 0 and json.loads((run / "metrics.json").read_text())["status"] == "ok", (
        single_ok.stderr[-2000:]
    )
    kept = _snapshot(run)
    into_run = _refused(run_py("-m", "seed=5", *ONE_RANK, f"hydra.sweep.dir={run}", timeout=300))
    assert into_run == (
        f"flopsweep: {run} is a single run's folder ({run / 'metrics.json'} is there); the sweep's records "
        f"would be counted with it, and its resume would skip it. Fix: {another(run, 'hydra.sweep.dir')}"
    )
    assert _snapshot(run) == kept
    assert sorted(p.name for p in tmp_path.rglob("*flopsweep-lock")) == []  # every holder unlinked its own


NAMESPACE = """
set -e
mount -t tmpfs tmpfs {top} && mkdir {top}/run && mount -t tmpfs tmpfs {top}/run && mount -o remount,ro {top}
exec {python} -c '
import os, subprocess, sys
from flopsweep.locks import lock_sweep_dir
sweep = ["-m", "seed=5,6", "plan=true", "device=cpu", "hydra.sweep.dir={top}/run"]
held = lock_sweep_dir("{top}/run")
print("held", held.path)
busy = subprocess.run([sys.executable, "run.py", *sweep], capture_output=True, text=True, timeout=300)
print("busy", busy.returncode, busy.stderr.strip().splitlines()[-1], "Warning" in busy.stderr)
held.close()
free = subprocess.run([sys.executable, "run.py", *sweep], capture_output=True, text=True, timeout=300)
print("free", free.returncode, sorted(os.listdir("{top}/run")))
'
"""


@pytest.mark.slow
def test_a_sweep_under_a_read_only_folder_takes_its_lock_inside_its_folder(tmp_path: Path) -> None:
    """Before, ``hydra.sweep.dir=/scratch/$USER`` under a ``/scratch`` that takes no new file ran
    without its lock (a ``PermissionError`` that Hydra printed as a warning): two sweeps ran at once.
    A real read-only folder (a tmpfs remounted read-only in a mount namespace, the sweep folder a
    writable tmpfs inside it): the lock is ``S/.flopsweep-lock``; a second sweep is refused in one
    line naming the holder; once released, the sweep runs and leaves no lock file."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) for a mount namespace with a read-only tmpfs")
    top = tmp_path / "q"
    top.mkdir()
    script = NAMESPACE.format(top=top, python=sys.executable)
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0 and "mount" in proc.stderr and "held" not in proc.stdout:
        pytest.skip(f"no mount namespace here (tmpfs cannot be mounted: {proc.stderr.strip()[-200:]})")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == f"held {top}/run/.flopsweep-lock"
    assert lines[1].startswith("busy 1 flopsweep: another sweep or run (pid ") and lines[1].endswith(" False")
    assert f"is writing into {top}/run;" in lines[1]
    assert lines[2] == "free 0 ['0', '1', 'multirun.yaml', 'plan.csv']"


@pytest.mark.slow
def test_a_nested_sweep_and_a_resume_onto_a_foreign_record_are_refused_before_writing(tmp_path: Path) -> None:
    """Session 23's new-user trial: a sweep into ``X/0/sub`` under the sweep ``X`` ran (exit 0, the
    analysis of ``X`` mixed both), and ``resume=true`` onto another sweep's record in ``Z/0`` (no
    ``multirun.yaml``) was refused by job 0 only after ``Z/multirun.yaml`` and ``Z/0/run.log`` were written,
    exit 1. Now both are one line, exit 2, before anything is written."""
    outer, inner, foreign = tmp_path / "X", tmp_path / "X" / "0" / "sub", tmp_path / "Z"
    first = run_py("-m", "plan=true", "device=cpu", "seed=1,2", f"hydra.sweep.dir={outer}", timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    before = _snapshot(outer)
    nested = _refused(
        run_py("-m", "plan=true", "device=cpu", "seed=3", f"hydra.sweep.dir={inner}", timeout=300)
    )
    assert nested.startswith(f"flopsweep: hydra.sweep.dir={inner} is inside another sweep's or run's folder ")
    assert nested.endswith(
        f"Fix: choose a hydra.sweep.dir outside {outer / '0'}, e.g. hydra.sweep.dir={outer}/0-2"
    )
    assert _snapshot(outer) == before and not inner.exists()

    (foreign / "0").mkdir(parents=True)
    record = {"status": "ok", "run": {"overrides": ["model=llama-tiny", "device=cpu"]}}
    (foreign / "0" / "metrics.json").write_text(json.dumps(record))
    kept = _snapshot(foreign)
    resumed = _refused(
        run_py("-m", "model=gpt-tiny", *ONE_RANK, "resume=true", f"hydra.sweep.dir={foreign}", timeout=300)
    )
    assert resumed.startswith(
        f"flopsweep: hydra.sweep.dir={foreign}: {foreign / '0' / 'metrics.json'} is the "
    )
    assert _snapshot(foreign) == kept and sorted(p.name for p in foreign.rglob("*")) == ["0", "metrics.json"]
    assert sorted(p.name for p in tmp_path.rglob("*flopsweep-lock")) == []
