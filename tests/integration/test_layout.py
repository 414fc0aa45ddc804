"""The parallel layout: degrees, ``dp_shard=-1``, the product check, refusals, the data-parallel
rank of each global rank, ``batch.global_batch_size``, and ``system.parallel`` in the record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import run_py

from flopsweep.config import ParallelConfig, RunConfig
from flopsweep.layout import DEGREES


def test_an_invalid_run_records_no_layout(tmp_path: Path) -> None:
    """A run refused before launch has no world: ``system.parallel`` is null, as ``world_size``."""
    from flopsweep.job import JobInfo, run_job

    record = run_job(
        RunConfig(device="cpu", parallel=ParallelConfig(pp=2)),
        JobInfo(job_dir=tmp_path, overrides=[], job_num=0),
    )
    assert record["status"] == "invalid" and record["error"]["type"] == "ConfigError"
    assert record["system"]["parallel"] is None and record["system"]["world_size"] is None
    assert json.loads((tmp_path / "metrics.json").read_text())["system"]["parallel"] is None


@pytest.mark.slow
def test_a_two_rank_run_records_its_layout(tmp_path: Path) -> None:
    """A real 2-rank gloo FSDP2 run: ``system.parallel`` holds integer degrees whose product is the
    world size, and ``batch.global_batch_size`` set ``grad_accum`` (8 / (micro 2 x 2 ranks) = 2)."""
    proc = run_py(
        "device=cpu",
        "nproc_per_node=2",
        "backend=fsdp",
        "precision=fp32",
        "batch.micro_batch_size=2",
        "batch.global_batch_size=8",
        "steps.warmup=1",
        "steps.measure=2",
        f"hydra.run.dir={tmp_path}",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "ok", record["error"]
    parallel = record["system"]["parallel"]
    assert parallel == {"dp_replicate": 1, "dp_shard": 2, "tp": 1, "pp": 1, "cp": 1, "ep": 1}
    assert all(type(v) is int for v in parallel.values())
    assert math.prod(parallel.values()) == record["system"]["world_size"] == 2
    assert record["config"]["batch"]["grad_accum"] == 2
    assert record["metrics"]["global_batch_size"] == 8
    assert record["metrics"]["tokens_per_step"] == 8 * record["config"]["model"]["seq_len"]


def test_a_lost_slurm_job_records_the_layout_its_ranks_reached(tmp_path: Path) -> None:
    """The sweep process has no plan for a lost job: the layout comes from the config's degrees and
    its integer ``nproc_per_node``, and only when a rank started (else null, as ``world_size``)."""
    from flopsweep.job import JobInfo, record_lost_job

    cfg = RunConfig(device="cpu", nproc_per_node="2", nnodes=1)
    scratch = tmp_path / "started" / ".flopsweep"
    scratch.mkdir(parents=True)
    for rank in (0, 1):
        (scratch / f"rank{rank}_phase.txt").write_text("measure")
    info = JobInfo(job_dir=tmp_path / "started", overrides=[], job_num=0)
    record = record_lost_job(cfg, info, "cancelled", submitted_at=0.0, previous_run_id=None)
    assert record["error"]["phase"] == "measure" and record["system"]["world_size"] == 2
    assert record["system"]["parallel"] == dict.fromkeys(DEGREES, 1) | {"dp_shard": 2}
    info = JobInfo(job_dir=tmp_path / "never", overrides=[], job_num=1)
    record = record_lost_job(cfg, info, "cancelled", submitted_at=0.0, previous_run_id=None)
    assert record["error"]["phase"] == "launch" and record["system"]["parallel"] is None
