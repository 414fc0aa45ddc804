"""A single plan's table (no ``-m``, no ``plan_clusters``) keeps its one row's overrides below it and
leaves out ``pred_world`` where it is the ``world`` column's (docs/reliability-9.md #523): ``plan=true
model=llama3.1-8b plan_gpu=H100 nnodes=2 nproc_per_node=8 backend=fsdp cost.usd_per_gpu_hour=2
budget.tokens=1e12`` printed a 300-character table, its overrides cell the whole command line."""

from __future__ import annotations

from pathlib import Path

ARGS = [
    "plan=true",
    "model=llama3.1-8b",
    "plan_gpu=H100",
    "nnodes=2",
    "nproc_per_node=8",
    "backend=fsdp",
    "cost.usd_per_gpu_hour=2",
    "budget.tokens=1e12",
]


def _table(hydra_compose, tmp_path: Path, args: list[str]) -> list[str]:
    from flopsweep.job import JobInfo, plan_table, run_job

    record = run_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=args))
    return plan_table(record["plan_file"]).splitlines()


def test_a_single_plans_overrides_are_said_below_its_table(hydra_compose, tmp_path: Path) -> None:
    lines = _table(hydra_compose, tmp_path, ARGS)
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert "overrides" not in header and "pred_world" not in header, header
    assert {"model", "world", "tokens/s/GPU", "days", "USD"} <= set(header), header
    assert "overrides: " + " ".join(ARGS[1:]) in lines
    assert max(len(line) for line in lines[:3]) < 180, lines[0]  # was 300


def test_the_file_keeps_the_columns_the_table_leaves_out(hydra_compose, tmp_path: Path) -> None:
    import csv

    from flopsweep.job import JobInfo, run_job

    args = [*ARGS, "predict.nnodes=4", "predict.gpus_per_node=8"]
    record = run_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=args))
    with Path(record["plan_file"]).open(newline="") as f:
        row = next(csv.DictReader(f))
    assert row["predicted_world_size"] == row["world_size"] == "32"
    assert row["overrides"] == " ".join(args)
