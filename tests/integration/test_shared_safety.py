"""Issue 30, safe on a shared machine: no code run from others' files (class 1), no file written
through a planted link (2), no record path that is a link (5), locks that cannot be sidestepped (6),
no environment that lifts limits (7), ``plan=true`` tables and Ctrl-C during ``--notebook`` (15)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run_py

from flopsweep.callbacks import lock_sweep_dir
from flopsweep.config import RunConfig
from flopsweep.free_folder import another
from flopsweep.job import JobInfo, run_job

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


@pytest.mark.slow
def test_notebook_never_imports_modules_planted_in_or_above_the_output_folder(tmp_path: Path) -> None:
    """An ``analysis`` package, a ``pandas.py`` and an ``ipykernel_launcher.py`` planted in the output
    folder and the folder above it: none runs; the notebook is written with the real analysis."""
    out = tmp_path / "shared" / "out"
    marker = tmp_path / "PLANTED_CODE_RAN"
    plant = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for folder in (out, out.parent):
        (folder / "analysis").mkdir(parents=True)
        (folder / "analysis" / "__init__.py").write_text(plant)
        (folder / "flopsweep").mkdir()
        (folder / "flopsweep" / "record.py").write_text(plant)
        for module in ("pandas.py", "ipykernel_launcher.py", "IPython.py"):
            (folder / module).write_text(plant)
    cmd = [sys.executable, "-m", "analysis", str(SWEEP), "--notebook", str(out / "results.ipynb")]
    done = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists(), marker.read_text()
    nb = json.loads((out / "results.ipynb").read_text())
    source = "".join(next(c for c in nb["cells"] if c.get("id") == "import")["source"])
    assert "sys.path" not in source and "parents" not in source


@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_fifo_at_the_record_path_is_that_jobs_error_set_aside_unopened(
    tmp_path: Path, kind: str, resume: bool
) -> None:
    """Before, a FIFO at one job's ``metrics.json`` raised, and the sweep stopped at that job. Now the
    FIFO (or a directory) is set aside as a corrupt record is, unopened, and this job's ``error``
    record takes its name; the job does not run (no worker, no world)."""
    path = tmp_path / "metrics.json"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    record = run_job(RunConfig(device="cpu", resume=resume), JobInfo(job_dir=tmp_path, overrides=[]))
    assert record["status"] == "error" and record["system"]["world_size"] is None
    error = record["error"]
    assert (error["type"], error["phase"]) == ("NotARecord", "config")
    what = "FIFO" if kind == "fifo" else "directory"
    assert error["message"].startswith(f"{path} was a {what}, not a run record; it is set aside as metrics.")
    assert "resume=true" in error["message"] and "\n" not in error["message"]
    (aside,) = tmp_path.glob("metrics.unreadable-*.json")
    assert stat.S_ISFIFO(os.lstat(aside).st_mode) if kind == "fifo" else aside.is_dir()
    assert aside.name in error["message"]
    assert json.loads(path.read_text())["error"]["type"] == "NotARecord"  # a regular file now


@pytest.mark.slow
def test_a_single_run_with_resume_takes_the_lock(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    held = lock_sweep_dir(run_dir)  # this test process plays a running sweep or run
    try:
        proc = run_py("device=cpu", "resume=true", f"hydra.run.dir={run_dir}", timeout=300)
    finally:
        held.close()
    assert proc.returncode == 1 and "another sweep or run" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not (run_dir / "metrics.json").exists()


@pytest.mark.slow
def test_a_second_plan_into_one_folder_shows_only_its_own_jobs_and_names_the_model(tmp_path: Path) -> None:
    import csv

    for seeds in ("1,2,3", "4"):
        proc = run_py(
            "-m", f"seed={seeds}", "plan=true", "device=cpu", f"hydra.sweep.dir={tmp_path}", timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert [(r["job"], r["model"], r["status"]) for r in rows] == [("0", "gpt-tiny", "ok")]
    assert "seed=4" in rows[0]["overrides"] and "| gpt-tiny " in proc.stdout
    assert [p.name for p in tmp_path.glob(".plan.csv*")] == []  # no temporary file left


@pytest.mark.slow
def test_ctrl_c_during_notebook_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """A cell that sleeps is added to the notebook's cells; SIGINT arrives while it runs."""
    script = (
        "import sys, analysis.notebook_cells as n\n"
        "n.CELLS.insert(4, ('code', 'slow', '# Sleep.\\nimport time\\ntime.sleep(600)'))\n"
        "from analysis.__main__ import main\n"
        f"sys.exit(main([{str(SWEEP)!r}, '--notebook', 'out/results.ipynb']))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=tmp_path, env=_env(), stderr=subprocess.PIPE, text=True
    )
    lines = []
    for line in proc.stderr:  # bounded by the notebook's own cells before the sleeping one
        lines.append(line)
        if "executing cell 4/" in line and "Sleep." in line:  # whatever the notebook's cell count
            break
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    err = "".join(lines) + rest
    assert proc.returncode == 130, err[-3000:]
    assert err.splitlines()[-1] == "python -m analysis: interrupted; out/results.ipynb not written"
    assert "Traceback" not in err and not (tmp_path / "out" / "results.ipynb").exists()


def test_resume_into_another_sweeps_folder_keeps_its_multirun_yaml(tmp_path: Path) -> None:
    """Before, ``resume=true`` into another sweep's folder let Hydra overwrite its ``multirun.yaml``
    (the jobs were refused one by one afterwards). Now the sweep stops first, in one line; the same
    sweep resumes (``resume``, ``hydra.*`` and run controls aside). ``plan=true``: nothing runs."""
    first = ["-m", "model=gpt-tiny", "seed=1,2", "device=cpu", "plan=true", f"hydra.sweep.dir={tmp_path}"]
    assert run_py(*first, timeout=300).returncode == 0
    saved = (tmp_path / "multirun.yaml").read_bytes()
    other = run_py(*[a.replace("seed=1,2", "seed=3") for a in first], "resume=true", timeout=300)
    assert other.returncode == 2, other.stderr[-2000:]
    line = other.stderr.strip().splitlines()[-1]
    assert line.startswith(f"flopsweep: {tmp_path / 'multirun.yaml'} belongs to another sweep (overrides ")
    assert (
        "'device=cpu model=gpt-tiny seed=1,2' there, 'device=cpu model=gpt-tiny seed=3' here" in line
        and f"Fix: {another(tmp_path, 'hydra.sweep.dir')}" in line  # a free folder named (#725)
    )
    assert (tmp_path / "multirun.yaml").read_bytes() == saved
    same = run_py(*first, "resume=true", "timeout_s=600", timeout=300)
    assert same.returncode == 0, same.stderr[-2000:]


@pytest.mark.slow
def test_a_fifo_at_one_jobs_record_does_not_stop_the_sweep(tmp_path: Path) -> None:
    """Job 0's ``metrics.json`` is a FIFO: that job is an ``error`` record, job 1 runs ``ok``."""
    (tmp_path / "0").mkdir()
    os.mkfifo(tmp_path / "0" / "metrics.json")
    proc = run_py(
        "-m", "seed=1,2", "model=gpt-tiny", "device=cpu", "precision=fp32", "steps.warmup=1",
        "steps.measure=1", f"hydra.sweep.dir={tmp_path}", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    statuses = [json.loads((tmp_path / str(j) / "metrics.json").read_text())["status"] for j in (0, 1)]
    assert statuses == ["error", "ok"]
    assert "flopsweep summary: 1 ok, 0 oom, 1 error, 0 invalid, 0 skipped" in proc.stdout + proc.stderr
