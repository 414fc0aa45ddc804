"""Session 39 (docs/reliability-10.md #623): the plan's tables past the project's 160 columns: the table
over clusters 162-164 wide with a cluster name of 25 characters (``H100-NVL-94GB:128x8:ib400``), a
single plan's table 177 with ``cost.usd_per_gpu_hour`` and ``budget.tokens``. Each now hides its least
read columns, in a fixed order (``planrender.HIDDEN_FIRST``, ``planfit.HIDDEN_FIRST``), until it fits
``planfit.WIDTH`` and names them in a line under it; a table that fits hides none."""

from __future__ import annotations

from pathlib import Path

from flopsweep.job.planfit import HIDDEN_FIRST, WIDTH
from flopsweep.job.planprint import TERMINAL_COLUMNS, plan_table

ARGS = ["plan=true", "model=llama3.1-8b", "space.backends=[fsdp]", "space.micro_batches=[8]"]
PRICED = ["cost.usd_per_gpu_hour=2", "budget.tokens=15e12"]


def _table(hydra_compose, tmp_path: Path, cluster: str) -> list[str]:
    from flopsweep.job import JobInfo
    from flopsweep.job.plandecide import decide_job

    given = [*ARGS, *PRICED, f"plan_clusters=[{cluster}]"]
    text = decide_job(hydra_compose(given), JobInfo(job_dir=tmp_path, overrides=given))["plan_text"]
    return text.split("\n\n")[0].splitlines()


def test_the_cluster_table_hides_its_least_read_column_to_fit_and_names_it(hydra_compose, tmp_path: Path):
    lines = _table(hydra_compose, tmp_path, "H100-NVL-94GB:128x8:ib400")
    assert max(map(len, lines)) <= WIDTH == 160
    assert lines[-1] == "hidden to fit 160 columns: J/tok (plan.csv keeps every column)"
    assert "J/tok" not in lines[0] and "GPU-h" in lines[0] and "budget$" in lines[0]
    short = _table(hydra_compose, tmp_path / "s", "H100:8")
    assert "J/tok" in short[0] and not any(x.startswith("hidden") for x in short)


def test_a_single_plans_table_hides_what_another_column_says_never_what_the_job_is(tmp_path: Path):
    columns = list(TERMINAL_COLUMNS)
    row = {c: "1" for c in columns} | {
        "model": "llama3.1-8b",
        "status": "ok",
        "layout": "dp1024",
        "world_size": "1024",
        "predicted_world_size": "1024",
        "fits": "True",
        "overrides": "",
        "reason": "",
        "job": "",
        "predicted_budget_usd": "2040000.123456",
        "predicted_budget_gpu_hours": "816100.123456",
        "predicted_iteration_time_s": "1.6054321",
        "prediction_source": "nearest",
        "note": "n",
    }
    text = ",".join(columns) + "\n" + ",".join(row[c] for c in columns) + "\n"
    lines = plan_table(str(tmp_path / "plan.csv"), text=text).splitlines()
    table = [x for x in lines if x.startswith("|")]
    said = next(x for x in lines if x.startswith("hidden to fit"))
    hidden = said.removeprefix("hidden to fit 160 columns: ").split(" (")[0].split(", ")
    assert max(map(len, table)) <= 160 and hidden == list(HIDDEN_FIRST[: len(hidden)]), said
    assert all(f" {h} " not in table[0] for h in hidden)
    assert all(f" {h} " in table[0] for h in ("model", "world", "layout", "status"))
