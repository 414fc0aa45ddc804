"""batch=auto: the search itself, and a real CPU run through run.py."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from helpers import make_plan, read_record, run_py, run_py_signalled

from flopsweep.memory import estimate
from flopsweep.record import null_metrics


def auto_run(run_dir: Path, *overrides: str, returncode: int) -> dict:
    """``python run.py batch=auto ...`` in ``run_dir``; checks the exit code, returns the record."""
    proc = run_py("batch=auto", *overrides, f"hydra.run.dir={run_dir}", timeout=600)
    assert proc.returncode == returncode, proc.stderr[-2000:]
    return read_record(run_dir / "metrics.json")  # a failed record's metrics all null (DESIGN.md)


@pytest.mark.slow
def test_batch_auto_records_its_search_and_measures_at_the_result(tmp_path: Path) -> None:
    args = ["batch.max_micro_batch_size=4", "steps.warmup=1", "steps.measure=2"]
    record = auto_run(tmp_path, *args, returncode=0)
    search = record["run"]["batch_search"]
    assert [p["micro_batch_size"] for p in search["probes"]] == [1, 2, 4]
    assert all(p["status"] == "ok" for p in search["probes"])
    assert search["result"] == 4 and record["config"]["batch"]["micro_batch_size"] == 4
    assert search["largest_fitting"] == 4 and "counted on CUDA only" in search["reason"]
    assert [p["cuda_alloc_retries"] for p in search["probes"]] == [None] * 3
    assert record["status"] == "ok"
    # Each probe ran in its own directory and left no scratch files.
    assert sorted(p.name for p in (tmp_path / "batch_search").iterdir()) == ["mbs1", "mbs2", "mbs4"]
    assert not list((tmp_path / "batch_search").rglob(".flopsweep"))


@pytest.mark.slow
def test_a_batch_search_interrupted_keeps_its_finished_probes_in_the_record(tmp_path: Path) -> None:
    """SIGTERM once the first probe is logged: the error record written on the way out has
    ``run.batch_search`` with every probe that finished and no result (it used to have none)."""
    code, log = run_py_signalled(
        "batch=auto",
        "device=cpu",
        "batch.max_micro_batch_size=8",  # probes 1, 2, 4, 8: the signal lands in the second
        f"hydra.run.dir={tmp_path}",
        when="batch=auto: micro batch 1 -> ",
    )
    assert code == 143, log[-3000:]
    record = json.loads((tmp_path / "metrics.json").read_text())
    assert record["status"] == "error" and record["error"]["type"] == "Terminated", record["error"]
    search = record["run"]["batch_search"]
    assert search["result"] is None and search["largest_fitting"] is None and search["reason"] is None
    logged = [int(n) for n in re.findall(r"batch=auto: micro batch (\d+) -> ", log)]
    assert [p["micro_batch_size"] for p in search["probes"]] == logged != []
    assert search["probes"][0]["micro_batch_size"] == 1 and search["probes"][0]["status"] == "ok"
    assert (search["start"], search["limit"]) == (1, 8)
    assert "interrupted by SIGTERM during batch=auto (" in record["error"]["message"]
    assert "batch=auto: measuring at" not in log  # it was stopped during the search


@pytest.mark.slow
def test_resume_skips_an_ok_batch_auto_run(tmp_path: Path) -> None:
    args = ["batch=auto", "batch.max_micro_batch_size=2", "steps.warmup=1", "steps.measure=1"]
    first = run_py(*args, f"hydra.run.dir={tmp_path}", timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    run_id = json.loads((tmp_path / "metrics.json").read_text())["run"]["id"]
    again = run_py(*args, f"hydra.run.dir={tmp_path}", "resume=true", timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "skipped (resume=true)" in again.stdout + again.stderr
    assert json.loads((tmp_path / "metrics.json").read_text())["run"]["id"] == run_id


@pytest.mark.slow
def test_batch_auto_when_nothing_fits_keeps_the_probes_error_and_search(
    tmp_path: Path, hydra_compose
) -> None:
    record = auto_run(tmp_path, "fault={kind:oom,rank:0,phase:init}", returncode=1)
    assert record["status"] == "oom"
    # the memory estimate of the size the search reached is run.before_run's; every metric is null
    plan = make_plan(hydra_compose(["batch=auto", "fault={kind:oom,rank:0,phase:init}"]))
    reached = record["config"]["batch"]["micro_batch_size"]
    batch = dataclasses.replace(plan.cfg.batch, micro_batch_size=reached)
    expected = round(estimate(dataclasses.replace(plan.cfg, batch=batch), plan.layout).total_gib, 6)
    assert record["run"]["before_run"]["predicted_peak_gib"] == expected > 0
    assert record["metrics"] == null_metrics()
    error = record["error"]
    # The starting probe's own phase, rank and cause, not a made-up one.
    assert (error["phase"], error["rank"]) == ("init", 0)
    assert error["message"].startswith("batch=auto: even micro_batch_size=1 does not fit: ")
    assert "injected" in error["message"].lower() or "memory" in error["message"].lower()
    search = record["run"]["batch_search"]
    assert search["probes"] == [
        {
            "micro_batch_size": 1,
            "status": "oom",
            "peak_cuda_allocated_bytes": None,
            "cuda_alloc_retries": None,
        }
    ]
    assert search["result"] is None and search["largest_fitting"] is None


@pytest.mark.slow
def test_batch_auto_with_profile_profiles_only_the_measured_run(tmp_path: Path) -> None:
    """``batch=auto profile=true``: the probes only ask whether a size fits; none writes a trace,
    and the run measured at the size found has its breakdown and trace."""
    record = auto_run(
        tmp_path,
        "batch.max_micro_batch_size=2",
        "steps.warmup=1",
        "steps.measure=1",
        "profile=true",
        returncode=0,
    )
    assert [p["micro_batch_size"] for p in record["run"]["batch_search"]["probes"]] == [1, 2]
    assert not list((tmp_path / "batch_search").rglob("profile")), list(
        (tmp_path / "batch_search").rglob("*")
    )
    assert record["metrics"]["breakdown"]["ranks"] == 1
    assert (tmp_path / "profile" / "rank0.trace.json.gz").is_file()
