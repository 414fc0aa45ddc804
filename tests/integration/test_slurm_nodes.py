"""Two Slurm nodes (issue 44, item 2): ``.ci/slurm-up.sh`` starts two ``slurmd`` on one host (nodes
named by this host's short name and ``localhost``), and a ``nnodes=2`` sweep goes through the real
hydra-submitit-launcher path with gloo ranks: FSDP2 and HSDP across the two nodes train as the
one-node run of the same world size does, the interconnect probe runs over both nodes, and a node
that goes down mid-run is recorded as such (and the job is not requeued behind the sweep's back)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from helpers import records, run_py

from integration.test_slurm import CPU_JOB, Sweep, _slurm, cluster, job_name  # noqa: F401 - fixtures

ACROSS = ["nnodes=2", "backend=fsdp", "model=gpt-tiny"]
"""Two Slurm nodes (one job spans both), FSDP2, the tiny model."""


def _nodes() -> list[str]:
    """The cluster's node names (``sinfo``), in the order Slurm lists them."""
    return _slurm("sinfo", "-h", "-N", "-o", "%N").split()


@pytest.mark.slurm
def test_fsdp_and_hsdp_across_two_nodes_train_as_one_node_does(tmp_path: Path, job_name: str) -> None:  # noqa: F811
    """``nnodes=2 nproc_per_node=2``: FSDP2 over the 4 ranks, and HSDP with its 2 replicas one per
    node, each give the first and last losses of the same layout on 4 ranks of one machine (no
    Slurm), every node agent says which node it ran on (both nodes), and the
    interconnect probe measured every collective over the 4 ranks. Each node's one Slurm task is the
    agent that spawned that node's two ranks (its log line names the node and the global ranks)."""
    nodes = _nodes()
    assert len(nodes) >= 2, f"the test cluster has one node ({nodes}): start it with bash .ci/slurm-up.sh"
    swept = "parallel.dp_replicate=1,2"
    slurm_dir, local_dir = tmp_path / "slurm", tmp_path / "local"
    proc = run_py(
        "-m", *CPU_JOB, *ACROSS, swept, f"hydra.launcher.name={job_name}", f"hydra.sweep.dir={slurm_dir}",
        timeout=420,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "flopsweep summary: 2 ok, 0 oom, 0 error, 0 invalid" in proc.stdout, proc.stdout[-2000:]
    local = run_py(
        "-m", "device=cpu", "precision=fp32", "steps.warmup=1", "steps.measure=2", "backend=fsdp",
        "model=gpt-tiny", "nproc_per_node=4", swept, f"hydra.sweep.dir={local_dir}", timeout=420,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]
    across, alone = records(slurm_dir), records(local_dir)
    assert [r["status"] for r in across + alone] == ["ok"] * 4
    for job, (two, one) in enumerate(zip(across, alone, strict=True)):
        assert two["config"]["nnodes"] == 2
        assert two["system"]["world_size"] == one["system"]["world_size"] == 4
        assert two["system"]["parallel"] == one["system"]["parallel"]
        assert two["system"]["parallel"]["dp_replicate"] == job + 1
        for key in ("loss_first", "loss_last"):
            assert two["metrics"][key] == pytest.approx(one["metrics"][key], rel=1e-5, abs=1e-6), (job, key)
        probe = two["system"]["interconnect"]
        assert probe and {p["collective"] for p in probe} >= {"all_gather", "reduce_scatter", "all_reduce"}
        assert all(p["ranks"] == 4 and p["busbw_gbps"] > 0 for p in probe), probe
        log = (slurm_dir / str(job) / "run.log").read_text()
        agents = [
            line.split("node agent ")[1]
            for line in log.splitlines()
            if "node agent " in line and "spawns" in line
        ]
        ran_on = {(a.split(" on ")[1].split(":")[0], a[0], a.split("spawns ")[1]) for a in agents}
        assert len(agents) == len(ran_on) == 2, log[-2000:]  # one agent per node
        assert {(r, s) for _, r, s in ran_on} == {("0", "ranks 0 to 1 of 4"), ("1", "ranks 2 to 3 of 4")}
        assert {node for node, _, _ in ran_on} == set(nodes[:2]), ran_on


def _resume(node: str) -> None:
    """Bring ``node`` back (it may have come back by itself: ReturnToService=2) and wait until every
    node is idle again, so that later tests find the cluster as it was."""
    resume = ["scontrol", "update", f"nodename={node}", "state=resume"]
    subprocess.run(resume, capture_output=True, timeout=30, check=False)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        states = _slurm("sinfo", "-h", "-N", "-o", "%T").split()
        if states and all(s in ("idle", "mixed", "allocated") for s in states):
            return
        time.sleep(0.5)
    pytest.fail(f"node {node} did not come back: {_slurm('sinfo', '-N', '-l')}")


@pytest.mark.slurm
def test_a_node_that_goes_down_mid_run_is_recorded_as_node_failed(tmp_path: Path, job_name: str) -> None:  # noqa: F811
    """A two-node job in its measured steps loses its second node (``scontrol update state=down``,
    as an administrator or a health check does): Slurm ends the job ``NODE_FAIL`` and SIGTERMs the
    other node's rank, which records the phase it reached; the launcher adds the end Slurm gave, so
    the record says ``NodeFailed``; the job was submitted ``--no-requeue``, so it does not come back
    to measure again behind the sweep."""
    phases = [tmp_path / "0" / ".flopsweep" / f"rank{r}_phase.txt" for r in (0, 1)]
    with Sweep(tmp_path, job_name, *ACROSS, "nproc_per_node=1", "steps.measure=100000") as run:
        running = run.wait_for("): RUNNING", timeout=180)
        job_id = running.split("(id ", 1)[1].split(")", 1)[0]
        end = time.monotonic() + 180
        # both ranks in their measured steps (the second node's rank may lag the first's by a step)
        while not all(p.exists() and p.read_text() == "measure" for p in phases):
            assert time.monotonic() < end, "the job never reached measure:\n" + run.output[-2000:]
            time.sleep(0.5)
        second = _slurm("squeue", "-h", "-j", job_id, "-o", "%N")
        node = _slurm("scontrol", "show", "hostnames", second.strip()).split()[1]
        try:
            _slurm("scontrol", "update", f"nodename={node}", "state=down", "reason=flopsweep-test")
            assert run.end(timeout=240) == 0, run.output[-3000:]
        finally:
            _resume(node)
        assert "NODE_FAIL" in run.output, run.output[-3000:]
    (record,) = records(tmp_path)
    assert record["status"] == "error" and record["error"]["type"] == "NodeFailed", record["error"]
    assert f"Slurm ended job {job_id} NODE_FAIL (its node failed)" in record["error"]["message"]
    assert record["error"]["phase"] == "measure" and record["metrics"]["tokens_per_s"] is None
    requeued = _slurm("squeue", "-h", "-j", job_id, "-t", "PENDING,RUNNING", "-o", "%i").strip()
    assert not requeued, requeued
    assert json.loads((tmp_path / "0" / "metrics.json").read_text())["run"]["id"] == record["run"]["id"]
