"""Session 34 (docs/reliability-5.md #300): a non-plan sweep stopped by a job refused once Hydra composed it
says so in its summary, not ``(stopped early by fail_fast)``, with ``fail_fast`` unset. The refusal is
``run.py``'s (an interpolation that cannot resolve), so the sweep runs as a user runs it."""

from __future__ import annotations

from pathlib import Path

from helpers import run_py


def test_a_sweep_stopped_by_a_refused_job_does_not_blame_fail_fast(tmp_path: Path) -> None:
    proc = run_py(
        "-m", "device=cpu", "model=gpt-tiny", "steps.measure=${oc.env:HOME},3", f"hydra.sweep.dir={tmp_path}"
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert "fail_fast" not in output, output
    assert (
        "flopsweep summary: 0 ok, 0 oom, 0 error, 0 invalid, 0 skipped (stopped: job 0 was refused before it "
        f"ran) ({tmp_path})"
    ) in proc.stdout
    assert "flopsweep: Invalid config: steps.measure=" in proc.stderr and not (tmp_path / "1").exists()
