"""A GPU cluster's command ("the command that runs it") carries no ``device=cpu``
(docs/reliability-14.md #1068)."""

from __future__ import annotations

from flopsweep.job.planrender import override_line
from flopsweep.plan_assess import Row


def test_a_cluster_s_command_drops_device_cpu_and_keeps_the_rest() -> None:
    """``plan=true model=llama3.1-8b device=cpu 'plan_clusters=[H100:8]'`` printed ``flopsweep
    model=llama3.1-8b device=cpu backend=fsdp ... nproc_per_node=8 nnodes=1``: run as shown, 8 CPU ranks."""
    row = Row(cluster="H100:1x8", setup=None, overrides=["backend=fsdp", "nproc_per_node=8", "nnodes=1"])
    typed = ["plan=true", "model=llama3.1-8b", "device=cpu", "plan_clusters=[H100:8]", "seed=3"]
    assert (
        override_line(row, typed)
        == "flopsweep model=llama3.1-8b seed=3 backend=fsdp nproc_per_node=8 nnodes=1"
    )
    assert override_line(row, [*typed[:2], "device='cpu'"]).split()[1:3] == [
        "model=llama3.1-8b",
        "backend=fsdp",
    ]
    assert "device=cuda" in override_line(row, ["model=llama3.1-8b", "device=cuda"])  # a GPU's: kept as given
