"""Sweep-level progress: job i/N with the elapsed time and an estimate from the jobs done."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_second_sweep_into_a_busy_directory_is_refused(tmp_path) -> None:
    """One sweep per directory: a second one (or a resume) stops at once with one line, no job run."""
    from helpers import run_py

    from flopsweep.callbacks import lock_sweep_dir

    held = lock_sweep_dir(tmp_path)  # this test process plays the running sweep
    try:
        proc = run_py("-m", "seed=1,2", "device=cpu", f"hydra.sweep.dir={tmp_path}", timeout=120)
    finally:
        held.close()
    assert proc.returncode == 1 and "another sweep" in proc.stderr and str(tmp_path) in proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.rglob("metrics.json"))


def test_a_closed_pipe_drops_the_lines_and_the_process_goes_on() -> None:
    """``| head`` closes the reader: ``flopsweep.text.say`` (the ranks' log lines, the sweep's progress
    lines) drops what follows instead of raising ``BrokenPipeError`` into the run (the fresh-user
    trial of session 18: every job of a tuning sweep piped into ``head`` was recorded as an error)."""
    import subprocess
    import sys

    import helpers

    code = (
        "import sys\nfrom flopsweep.text import say\n"
        "for i in range(20000): say('x' * 100)\nsys.stderr.write('done')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=helpers.ROOT
    )
    assert proc.stdout.read(100)  # a few lines, then the reader goes
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err.endswith("done"), err[-2000:]
