"""Session 37's trial of Ctrl-C in a sweep (docs/reliability-7.md #392, #395): a sweep stopped while Hydra
composed its jobs left its ``multirun.yaml`` (and the folder) with no job, which a later ``resume=true`` of
another sweep read as that sweep's. The signal is sent on a line the sweep prints there, not on a clock."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from helpers import ROOT, RUN_PY, run_py_signalled


@pytest.mark.slow
def test_a_sweep_stopped_while_hydra_composes_its_jobs_leaves_no_folder(tmp_path) -> None:
    """SIGINT on ``composing the config of each of 60 jobs`` (printed after ``multirun.yaml`` is written,
    before the first job): exit 130, the stop's one line, and no sweep folder, where ``multirun.yaml``
    stayed alone in it."""
    sweep = tmp_path / "multirun" / "S"
    code, output = run_py_signalled(
        "-m",
        "seed=range(0,60)",
        "plan=true",
        "device=cpu",
        f"hydra.sweep.dir={sweep}",
        when="composing the config of each of 60 jobs",
        sig=signal.SIGINT,
        timeout=300,
    )
    assert code == 130, output[-3000:]
    assert (
        output.splitlines()[-1] == "flopsweep: stopped by SIGINT before any job started; nothing was recorded"
    )
    assert "Traceback" not in output
    assert not (tmp_path / "multirun").exists(), sorted(p.name for p in sweep.rglob("*"))


AT_TORCH = """
import runpy, signal, sys
def hook(frame, event, arg):
    code = frame.f_code
    if event == "call" and code.co_name == "<module>" and code.co_filename.endswith("torch/__init__.py"):
        sys.setprofile(None)
        signal.raise_signal(signal.SIGINT)
sys.argv = [{run_py!r}, *{argv!r}]
sys.setprofile(hook)
runpy.run_path({run_py!r}, run_name="__main__")
"""
"""``run.py`` with ``argv``, SIGINT raised (a real signal) as torch's ``__init__`` starts to run."""


@pytest.mark.slow
def test_a_ctrl_c_in_a_plans_torch_import_stops_before_the_job(tmp_path) -> None:
    """#392: a plan imported torch in its job, after the job's handlers were in place: a SIGINT in that import
    was swallowed by torch's C code (its numpy import), then ``ImportError: cannot load module more than
    once per process``, the job failed and the sweep ran on, exit 1. torch is now imported before any job
    starts, for a plan too: the signal lands there and ends the process, exit 130, the folder removed."""
    sweep = tmp_path / "S"
    argv = ["-m", "seed=0,1", "plan=true", "device=cpu", f"hydra.sweep.dir={sweep}"]
    code = AT_TORCH.format(run_py=RUN_PY, argv=argv)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "flopsweep: stopped by SIGINT before any job started; nothing was recorded"
    )
    assert "Traceback" not in proc.stderr and not sweep.exists()
