"""Packing a sweep on Slurm (issue 44, item 3): a sweep is one Slurm job array, and
``hydra.launcher.array_parallelism`` (hydra-submitit-launcher's key, submitit's ``--array=0-N%K``)
caps how many of its jobs run at once; Slurm starts the next as soon as one ends and gives each its
own cores (and GPUs). The private two-node cluster could run all four jobs below at once (each asks
one core; the nodes have two each), so a cap of 2 is Slurm's doing, read back from the records."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from helpers import records

from integration.test_slurm import cluster, job_name, sweep  # noqa: F401 - fixtures


def _seconds(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp).timestamp()


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most ``(start, end)`` spans that hold one instant: counted at each start, a span holding
    ``t`` when ``start <= t < end`` (the records' times are whole seconds, truncated: two spans that
    only touch never count as one instant)."""
    return max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)


def test_most_at_once_counts_overlaps_not_touches() -> None:
    assert most_at_once([(0, 10), (10, 20), (20, 30)]) == 1
    assert most_at_once([(0, 10), (5, 20), (6, 7), (12, 30)]) == 3
    assert most_at_once([(0, 10), (0, 10)]) == 2


@pytest.mark.slurm
def test_array_parallelism_caps_the_jobs_running_at_once(tmp_path: Path, job_name: str) -> None:  # noqa: F811
    """Four one-rank jobs with ``hydra.launcher.array_parallelism=2``: submitit asks Slurm for the
    array ``0-3%2``, all four records are ``ok``, and their run spans (``run.started_at`` to
    ``run.finished_at``) never put more than two jobs in one instant, and two at some instant (the
    cap packs, it does not serialise)."""
    four = ("nproc_per_node=1", "backend=single", "seed=1,2,3,4", "hydra.launcher.array_parallelism=2")
    proc = sweep(tmp_path, job_name, *four, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 4 ok, 0 oom, 0 error, 0 invalid" in proc.stdout, proc.stdout[-2000:]
    (script,) = (tmp_path / ".submitit").rglob("*_submission.sh")
    assert "#SBATCH --array=0-3%2" in script.read_text()
    recs = records(tmp_path)
    assert sorted(r["config"]["seed"] for r in recs) == [1, 2, 3, 4]
    spans = [(_seconds(r["run"]["started_at"]), _seconds(r["run"]["finished_at"])) for r in recs]
    assert all(start < end for start, end in spans), spans
    assert most_at_once(spans) == 2, spans
