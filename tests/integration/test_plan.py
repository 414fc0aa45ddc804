"""``plan=true``: every job validated and estimated, no worker started, no record written."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import run_py
from unit.test_plan import P  # shared with the unit tier


@pytest.mark.slow
def test_plan_on_a_gpu_sweep_starts_nothing(tmp_path: Path) -> None:
    proc = run_py("-m", "+sweep=backends", "plan=true", f"hydra.sweep.dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert [r["status"] for r in rows] == ["ok"] * 6
    assert {r["n_params"] for r in rows} == {str(P)}
    assert "launching" not in proc.stdout + proc.stderr and not list(tmp_path.rglob("metrics.json"))
    assert proc.stdout.count("| backend=") == 6  # one table, a row per job


@pytest.mark.slow
def test_plan_on_the_cpu_says_whether_the_host_memory_holds_it(tmp_path: Path) -> None:
    """``plan=true device=cpu``: ``fits`` compares the estimate with the host's available memory;
    a model whose states exceed the machine is an ``invalid`` row, not a crash."""
    import psutil

    big = "gpt-13b" if 16 * 13e9 > psutil.virtual_memory().total else None
    models = "gpt-tiny" + (f",{big}" if big else "")
    proc = run_py(
        "-m", f"model={models}", "device=cpu", "plan=true", f"hydra.sweep.dir={tmp_path}", timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert (rows[0]["status"], rows[0]["fits"]) == ("ok", "True")
    if big:
        assert rows[1]["status"] == "invalid" and "this machine lets a process use" in rows[1]["note"]


def test_a_plan_with_invalid_rows_says_so_last_and_exits_0(tmp_path: Path) -> None:
    """``plan=true`` is a report (exit 0), but its last line, on stderr, counts the invalid rows;
    a plan whose rows are all ``ok`` prints no such line."""
    proc = run_py(
        "-m",
        "model=gpt-tiny",
        "device=cpu",
        "nproc_per_node=1",
        "batch.micro_batch_size=1,0",  # 0: refused, an invalid row
        "plan=true",
        f"hydra.sweep.dir={tmp_path}",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert [r["status"] for r in rows] == ["ok", "invalid"]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("flopsweep: 1 of 2 jobs are invalid: see the status column; job 1: "), last
    assert "micro_batch_size" in last and "Fix" in last, last  # the cut-off note column's reason

    from flopsweep.job import plan_invalid_line

    ok = tmp_path / "ok.csv"
    ok.write_text("job,status\n0,ok\n1,ok\n")
    assert plan_invalid_line(str(ok)) is None
