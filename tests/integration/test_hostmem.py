"""The host memory limit of a cgroup (flopsweep.hostmem): read from real files laid out as the
kernel's cgroup v2 and v1 mounts lay them out, and used by the offload check before launch."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import run_py


@pytest.mark.slow
def test_a_plan_for_gpus_not_here_states_the_offload_host_memory_instead_of_refusing(tmp_path: Path) -> None:
    """plan_gpu plans another machine, whose hosts' memory is not this one's: an offload that would not
    fit here is planned, and its note gives the host memory it needs per node."""
    proc = run_py(
        "plan=true",
        "model=llama3.1-8b",
        "backend=fsdp",
        "backend.cpu_offload=true",
        "plan_gpu=H100",
        "nproc_per_node=1",
        f"hydra.run.dir={tmp_path}",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = next(csv.DictReader((tmp_path / "plan.csv").open()))
    assert row["status"] == "ok", row["note"]
    assert (
        "offload needs at least 119.7 GiB of host memory per node, about 131.6 GiB as measured on the "
        "H200's host (not checked" in row["note"]
    )
