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
