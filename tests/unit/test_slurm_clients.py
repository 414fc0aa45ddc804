"""Slurm clients against hostile peers (issue 30, class 8): fake ``sbatch``, ``squeue``, ``sinfo`` and
``scancel`` executables on PATH, written by each test, that never answer, always fail, or answer
what is no job state. The code under test (flopsweep.cluster, the launcher plug-in) is real; only
the cluster it talks to is a small shell script."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("launcher", "device", "visible", "fix"),
    [
        ({"parallel_jobs": 2}, "cpu", 8, "set hydra.launcher.parallel_jobs=1"),
        ({"parallel_jobs": 3, "gpus_per_node": 2}, "cuda", 4, "set hydra.launcher.parallel_jobs=2"),
        ({"parallel_jobs": 0}, "cuda", 4, "set 1"),
    ],
)
def test_parallel_jobs_needs_gpus_of_their_own(launcher: dict, device: str, visible: int, fix: str) -> None:
    from flopsweep.config import ConfigError
    from hydra_plugins.flopsweep_slurm import check_parallel

    with pytest.raises(ConfigError, match="hydra.launcher.parallel_jobs") as caught:
        check_parallel(launcher, device=device, visible_gpus=visible)
    assert fix in str(caught.value)
    check_parallel({"parallel_jobs": 2, "gpus_per_node": 2}, device="cuda", visible_gpus=4)
    check_parallel({}, device="cpu")


def test_a_rank_killed_by_sigabrt_keeps_its_python_stack(tmp_path) -> None:
    """A rank's faulthandler stack (flopsweep.worker) reaches the record of a rank killed by a signal."""
    import signal

    from flopsweep.outcome import collect

    (tmp_path / "rank1_phase.txt").write_text("measure")
    stack = 'Fatal Python error: Aborted\n\nThread 0x1 (most recent call first):\n  File "x.py", line 3 in f'
    (tmp_path / "rank1_stack.txt").write_text(stack)
    outcome = collect(tmp_path, {0: 0, 1: -signal.SIGABRT}, 2)
    assert outcome.status == "error" and outcome.error["type"] == "WorkerKilled"
    assert outcome.error["message"].startswith("rank 1 was killed by SIGABRT")
    assert (
        outcome.error["phase"] == "measure" and 'File "x.py", line 3 in f' in outcome.error["traceback_text"]
    )
