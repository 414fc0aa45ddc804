"""Session 24's trial, as a user types it: a YAML alias bomb in a sweep file, SIGTERM or Ctrl-C before
the first job, ``>&-`` (stdout or stderr closed) and a read-only working folder. Unit tests of each part:
``tests/unit/test_early_exits.py`` and ``tests/unit/test_conf_files.py``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, RUN_PY, run_py, run_py_signalled

from tests.unit.test_conf_files import _bomb


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "says"),
    [
        (_bomb(6), "its anchors and aliases"),
        # session 25: Hydra's six-line ValidationError block, exit 1 (tests/unit/test_sweep_file_keys.py)
        ("# @package _global_\nbackend: [fsdp, ddp]\n", "backend: [fsdp, ddp]: a list of options is a sweep"),
    ],
    ids=["alias-bomb", "group-list"],
)
def test_an_alias_bomb_in_a_sweep_file_is_refused_before_hydra_reads_it(
    tmp_path: Path, text: str, says: str
) -> None:
    """A 6-level bomb (10 million values once expanded) ran 12 minutes at 5.9 GB and ignored SIGTERM; now
    one line, exit 2, before Hydra; so is a config group given a list of options. A copy of ``run.py``
    and ``conf/`` (its ``conf/``: the file is never put in the checkout's), with this checkout's package."""
    shutil.copy(RUN_PY, tmp_path / "run.py")
    shutil.copytree(ROOT / "conf", tmp_path / "conf", symlinks=False)  # conf/sweep: a link to sweep/
    (tmp_path / "conf" / "sweep" / "mine-bomb.yaml").write_text(text)
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "run.py"), "-m", "+sweep=mine-bomb", "plan=true"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith(f"flopsweep: Invalid config: conf/sweep/mine-bomb.yaml: {says}")
    assert len(proc.stderr.splitlines()) == 1 and not proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf", "run.py"]  # no multirun/ made


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_before_the_first_job_stops_at_once_with_one_line(tmp_path: Path, sig, status) -> None:
    """While Hydra composes the config of each of 3000 jobs (before the first starts), SIGTERM and Ctrl-C
    end the process: one line, 128 + the signal, no record. Sent as the progress line appears."""
    code, output = run_py_signalled(
        "-m",
        "seed=range(0,3000)",
        "plan=true",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        when="flopsweep: composing the config of each of 3000 jobs before the first starts",
        sig=sig,
        timeout=300,
    )
    assert code == status, output[-2000:]
    lines = output.strip().splitlines()
    assert (
        lines[-1]
        == f"flopsweep: stopped by {signal.Signals(sig).name} before any job started; nothing was recorded"
    )
    assert "Traceback" not in output and not list(tmp_path.rglob("metrics.json"))


def _closed(
    *redirects: str, args: tuple[str, ...], script: tuple[str, ...] = (RUN_PY,)
) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` (or ``python SCRIPT ARGS``) started by a shell with ``redirects`` (``>&-``,
    ``2>&-``)."""
    command = f'exec "$0" "$@" {" ".join(redirects)}'
    return subprocess.run(
        ["bash", "-c", command, sys.executable, *script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_a_closed_stdout_or_stderr_leaves_the_run_and_its_status_whole(tmp_path: Path) -> None:
    """``flopsweep ... >&-`` wrote its record, then failed ("'NoneType' object has no attribute 'flush'",
    exit 120; with plan=true also "Error executing job"); with descriptor 1 reopened as os.devnull but not
    inheritable, a rank started with a pipe there and failed. Now: the run's own status, its record whole;
    ``python -m analysis DIR >&-`` (was: ``'NoneType' object has no attribute 'isatty'``; session 24: the
    table dropped, exit 0) refuses in one line, exit 2: its table is its product."""
    plan = _closed(">&-", args=("plan=true", f"hydra.run.dir={tmp_path / 'plan'}"))
    assert plan.returncode == 0 and plan.stderr == "", plan.stderr[-2000:]
    assert (tmp_path / "plan" / "plan.csv").is_file()
    run = _closed(
        ">&-",
        "2>&-",
        args=("steps.warmup=1", "steps.measure=1", f"hydra.run.dir={tmp_path / 'run'}"),
    )
    assert run.returncode == 0, run
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert record["status"] == "ok", record.get("error")
    invalid = _closed(
        ">&-", args=("plan=true", "model.seq_len=1000000000000", f"hydra.run.dir={tmp_path / 'x'}")
    )
    assert invalid.returncode == 2 and invalid.stderr.startswith("flopsweep: Invalid config: model.seq_len=")
    analysis = _closed(">&-", args=(str(ROOT / "tests" / "fixtures" / "sweep"),), script=("-m", "analysis"))
    assert analysis.returncode == 2, analysis.stderr[-2000:]
    assert analysis.stderr.splitlines() == [
        "python -m analysis: error: stdout is closed (>&-), so the table would be lost. Fix: --output FILE, "
        "or redirect it (> FILE; > /dev/null to drop it on purpose)"
    ]


@pytest.fixture
def read_only_folder(tmp_path: Path):
    """A folder no file can be made in by this user: a read-only tmpfs mounted there for root (who writes a
    mode 0555 folder), else mode 0555. Skipped where root cannot mount."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True, timeout=30
    )
    if mount.returncode != 0:
        pytest.skip(f"root cannot mount a read-only folder here: {mount.stderr.decode()[-200:]}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, timeout=30)


@pytest.mark.slow
def test_a_read_only_working_folder_is_a_refused_folder_with_another_as_the_fix(
    read_only_folder: Path,
) -> None:
    """The default ``outputs/DATE/TIME-...`` (``multirun/`` with -m) in a read-only working folder: exit 1
    and ``mkdir -p outputs/2026-12-05/06-51-01-24848-9461`` (a folder never reused) as the fix; now exit 2,
    another folder as the fix. A run, refused before any worker starts (a plan there prints its table and says
    its ``plan.csv`` was not written: ``test_plan_decide.py``)."""
    for sweep, key in ((False, "hydra.run.dir"), (True, "hydra.sweep.dir")):
        args = (*(("-m", "seed=0,1") if sweep else ()), "model=llama-tiny", "device=cpu")
        proc = run_py(*args, cwd=read_only_folder, timeout=300)
        assert proc.returncode == 2, proc.stderr[-2000:]
        [line] = proc.stderr.strip().splitlines()
        assert line.startswith(f"flopsweep: Invalid config: {key}=") and "mkdir" not in line, line
        fix = f"Fix: choose a folder you can write to ({key}=/path/you/can/write), or run from a folder you"
        assert line.endswith(f"{fix} can write to."), line
