"""Session 36's new-user trial as a user types it (docs/reliability-6.md #350-#352): a sweep file of axes
without ``-m``, a ``plan=true`` sweep stopped by SIGINT, a fixed ``hydra.sweep.subdir`` in a sweep of two
jobs. Each: its exit status, its line, no traceback; a refusal makes no folder. A user's sweep file is
planted in a copy of the checkout's ``run.py``, ``conf/`` and packages, never in the checkout's ``sweep/``
(tests/unit/test_trial_36.py holds each line's check and its fix)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, RUN_PY, run_py

MINE = (
    "# @package _global_\ndevice: cpu\nsteps:\n  warmup: 1\n  measure: 1\n"
    "hydra:\n  sweeper:\n    params:\n      batch.micro_batch_size: 1,2,4\n"
)


def _one_line(proc: subprocess.CompletedProcess) -> str:
    """The refusal's one line on stderr (nothing on stdout, exit 2, no traceback)."""
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr and not proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.slow
def test_a_sweep_file_of_axes_without_m_is_one_line_and_runs_nothing(tmp_path: Path) -> None:
    """#350: ``+sweep=mine`` (``batch.micro_batch_size: 1,2,4``) without ``-m`` ran one job of micro batch
    4, exit 0 (``plan=true`` the same); ``+sweep=smoke`` got the backend check's line with a wrong fix."""
    src, work = tmp_path / "src", tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "conf", src / "conf", symlinks=False)  # conf/sweep: a link to sweep/
    for name in ("flopsweep", "hydra_plugins"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(RUN_PY, src / "run.py")
    (src / "conf" / "sweep" / "mine.yaml").write_text(MINE)
    out = tmp_path / "out"
    for extra in ([], ["plan=true"]):
        proc = subprocess.run(
            [sys.executable, str(src / "run.py"), "+sweep=mine", f"hydra.run.dir={out}", *extra],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(src)},
        )
        assert _one_line(proc) == (
            "flopsweep: Invalid config: +sweep=mine: conf/sweep/mine.yaml sweeps batch.micro_batch_size "
            "(hydra.sweeper.params), which only a multirun runs. Fix: add -m (flopsweep -m +sweep=mine)."
        )
        assert not out.exists() and list(work.iterdir()) == []
    assert _one_line(run_py("+sweep=smoke", f"hydra.run.dir={out}", cwd=work, timeout=300)) == (
        "flopsweep: Invalid config: +sweep=smoke: sweep/smoke.yaml sweeps backend, precision "
        "(hydra.sweeper.params), which only a multirun runs. Fix: add -m (flopsweep -m +sweep=smoke)."
    )
    assert not out.exists() and list(work.iterdir()) == []


def _rows(plan: Path) -> int:
    """Rows of the sweep's ``plan.csv`` so far (its header left out); 0 before the first job's."""
    try:
        return max(0, plan.read_text(errors="replace").count("\n") - 1)
    except OSError:
        return 0


@pytest.mark.slow
def test_an_interrupted_plan_sweep_prints_the_rows_its_jobs_kept(tmp_path: Path) -> None:
    """#351: SIGINT to ``-m 'seed=range(0,60)' plan=true device=cpu`` once its ``plan.csv`` holds three rows
    (the file polled, not the clock): exit 130, the table of the jobs that finished on stdout and ``kept N
    rows ...`` on stderr, where it printed ``(not shown: read_regular() missing 1 required positional
    argument: 'limit')``."""
    sweep = tmp_path / "p"
    plan = sweep / "plan.csv"
    argv = ["-m", "seed=range(0,60)", "plan=true", "device=cpu", f"hydra.sweep.dir={sweep}"]
    with open(tmp_path / "out", "w+") as out, open(tmp_path / "err", "w+") as err:  # no pipe to fill
        proc = subprocess.Popen([sys.executable, RUN_PY, *argv], cwd=ROOT, stdout=out, stderr=err)
        try:
            while proc.poll() is None and _rows(plan) < 3:
                time.sleep(0.05)
            assert proc.poll() is None, "the sweep ended before three jobs were planned"
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=300)
        finally:
            proc.kill()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stdout + stderr and "not shown" not in stderr
    last = stderr.splitlines()[-1]
    kept = re.fullmatch(
        r"flopsweep: interrupted \(KeyboardInterrupt\); kept (\d+) rows of planned set-ups in "
        + re.escape(str(plan))
        + r" \(the jobs that finished\)",
        last,
    )
    assert kept, last
    rows = [line for line in stdout.splitlines() if "| gpt-tiny |" in line]
    assert int(kept.group(1)) == len(rows) >= 3
    assert [r.split("|")[3].strip() for r in rows] == [f"seed={n}" for n in range(len(rows))]


@pytest.mark.slow
def test_a_fixed_sweep_subdir_in_a_sweep_of_two_jobs_is_one_line(tmp_path: Path) -> None:
    """#352: ``hydra.sweep.subdir=x`` in ``-m seed=0,1``: job 0 ran, job 1 stopped on ``.../x/metrics.json
    already exists`` (exit 1). Now one line before Hydra and no sweep folder; one job keeps its subdir."""
    sweep = tmp_path / "s"
    argv = ["-m", "seed=0,1", "device=cpu", "steps.warmup=1", "steps.measure=1", f"hydra.sweep.dir={sweep}"]
    assert _one_line(run_py(*argv, "hydra.sweep.subdir=x", timeout=300)) == (
        "flopsweep: Invalid config: hydra.sweep.subdir=x: every job of the sweep would write into one "
        "folder. Fix: include ${hydra.job.num}, e.g. 'hydra.sweep.subdir=x_${hydra.job.num}'."
    )
    assert not sweep.exists()
    one = run_py(
        "-m", "seed=0", "plan=true", "device=cpu", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=x"
    )
    assert one.returncode == 0 and (sweep / "x").is_dir(), one.stderr[-3000:]  # one job: its subdir kept
    shutil.rmtree(sweep)
    fixed = run_py(
        *argv, "hydra.sweep.subdir=x_${hydra.job.num}", timeout=600
    )  # the fix, as the shell passes it
    assert fixed.returncode == 0 and "Traceback" not in fixed.stderr, fixed.stderr[-3000:]
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == ["x_0", "x_1"]
    assert (sweep / "x_0" / "metrics.json").is_file() and (sweep / "x_1" / "metrics.json").is_file()
