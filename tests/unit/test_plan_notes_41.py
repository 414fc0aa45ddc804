"""A CPU ``batch=auto`` plan's note says what holds on the CPU, not "without cudaMalloc retries"
(docs/reliability-12.md #905)."""

from __future__ import annotations

from pathlib import Path


def test_a_cpu_batch_auto_note_says_what_its_probes_hold_to(hydra_compose, tmp_path: Path) -> None:
    from flopsweep.job import JobInfo, plan_job

    args = ["model=gpt-tiny", "device=cpu", "nproc_per_node=1", "batch=auto", "search.memory_budget_gib=0.5"]
    row = plan_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=[]))["plan"]
    assert row["status"] == "ok", row["note"]
    assert (
        "(search.memory_budget_gib); the run measures the largest its probes fit, each held to its estimated "
        "peak within the same memory (the CPU has no cudaMalloc retries to count); "
    ) in row["note"], row["note"]
    assert "without cudaMalloc retries" not in row["note"]
