"""Issue 44, item 1: one launch path. Under ``hydra/launcher=slurm`` each node's one Slurm task is the
node agent that spawns the node's ranks with the local supervisor (``flopsweep.node_agent``), so the
searches that start probe runs from the job process (``batch=auto``) run under Slurm as they do on one
machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import records

from integration.test_slurm import cluster, job_name, sweep  # noqa: F401 - fixtures


@pytest.mark.slurm
def test_batch_auto_under_slurm_searches_then_measures_at_the_size_found(
    tmp_path: Path,
    job_name: str,  # noqa: F811
) -> None:
    """``batch=auto`` on one Slurm node: the node agent runs the probes (micro batch 1, then 2), each
    on the two spawned ranks, and measures at the largest that fit; one Slurm task ran."""
    proc = sweep(tmp_path, job_name, "backend=ddp", "batch=auto", "batch.max_micro_batch_size=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 1 ok, 0 oom, 0 error, 0 invalid" in proc.stdout, proc.stdout[-2000:]
    (record,) = records(tmp_path)
    assert record["status"] == "ok", record["error"]
    search = record["run"]["batch_search"]
    assert [p["micro_batch_size"] for p in search["probes"]] == [1, 2]
    assert all(p["status"] == "ok" for p in search["probes"]), search["probes"]
    assert search["result"] == 2 and record["config"]["batch"]["micro_batch_size"] == 2
    assert record["system"]["world_size"] == 2 and [p["rank"] for p in record["metrics"]["per_rank"]] == [
        0,
        1,
    ]
    assert sorted(p.name for p in (tmp_path / "0" / "batch_search").iterdir()) == ["mbs1", "mbs2"]
    log = (tmp_path / "0" / "run.log").read_text()
    assert log.count("node agent 0 of 1 on ") == 1, log[-2000:]
    assert not list((tmp_path / ".submitit").glob("*/*_1_result.pkl"))  # the agent was the job's one task


@pytest.mark.slurm
def test_batch_auto_across_two_nodes_probes_on_every_node_in_lockstep(
    tmp_path: Path,
    job_name: str,  # noqa: F811
) -> None:
    """``batch=auto`` with ``nnodes=2`` (one gloo rank per node): node 0's agent decides each probe
    and the size measured, and every probe, then the measured run, starts on both nodes' ranks (a
    probe of world size 2 trains only when both take part); node 1's agent runs each step node 0's
    publishes, in order, and the record is node 0's."""
    two_nodes = ("nnodes=2", "nproc_per_node=1", "backend=ddp", "steps.measure=1")
    proc = sweep(tmp_path, job_name, *two_nodes, "batch=auto", "batch.max_micro_batch_size=2", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 1 ok, 0 oom, 0 error, 0 invalid" in proc.stdout, proc.stdout[-2000:]
    (record,) = records(tmp_path)
    assert record["status"] == "ok", record["error"]
    search = record["run"]["batch_search"]
    assert [(p["micro_batch_size"], p["status"]) for p in search["probes"]] == [(1, "ok"), (2, "ok")]
    assert search["result"] == 2 and record["config"]["batch"]["micro_batch_size"] == 2
    assert record["config"]["nnodes"] == 2 and record["system"]["world_size"] == 2
    assert [p["rank"] for p in record["metrics"]["per_rank"]] == [0, 1]
    job = tmp_path / "0"
    assert sorted(p.name for p in (job / "batch_search").iterdir()) == ["mbs1", "mbs2"]
    assert not list(job.rglob(".flopsweep"))  # every run's scratch folder was removed
    log = (job / "run.log").read_text()
    steps = [line.split("runs its ranks of ")[1] for line in log.splitlines() if "runs its ranks of " in line]
    assert steps == ["batch_search/mbs1", "batch_search/mbs2", "."], log[-3000:]  # node 1's, in order
    assert log.count("node agent 0 of 2 on ") == log.count("node agent 1 of 2 on ") == 1, log[-3000:]
    assert log.count("batch=auto: micro batch ") == 3  # two probe lines and the choice, node 0's alone


@pytest.mark.slurm
def test_a_rank_of_node_one_that_fails_in_a_probe_ends_the_search_with_its_error(
    tmp_path: Path,
    job_name: str,  # noqa: F811
) -> None:
    """``batch=auto`` on 2 nodes, rank 1 (node 1's) raising in warm-up (``fault=``): the first probe
    fails on node 1, node 0's agent stops its own rank and ends the search there (no second probe, no
    measured run), and the record names rank 1, its phase and the probe."""
    fault = ("fault.kind=raise", "fault.rank=1", "fault.phase=warmup")
    two_nodes = ("nnodes=2", "nproc_per_node=1", "backend=ddp", "batch=auto", "batch.max_micro_batch_size=2")
    proc = sweep(tmp_path, job_name, *two_nodes, *fault, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 0 ok, 0 oom, 1 error, 0 invalid" in proc.stdout, proc.stdout[-2000:]
    (record,) = records(tmp_path)
    error = record["error"]
    assert (record["status"], error["type"], error["rank"], error["phase"]) == (
        "error",
        "InjectedFault",
        1,
        "warmup",
    )
    probes = record["run"]["batch_search"]["probes"]
    assert [(p["micro_batch_size"], p["status"]) for p in probes] == [(1, "error")]
    log = (tmp_path / "0" / "run.log").read_text()
    steps = [line.split("runs its ranks of ")[1] for line in log.splitlines() if "runs its ranks of " in line]
    assert steps == ["batch_search/mbs1"], log[-3000:]
