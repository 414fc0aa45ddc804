"""``profile=true``: the step breakdown from a Chrome trace, and a real 2-rank gloo run."""

from __future__ import annotations

import pytest
from helpers import records, run_py

from flopsweep.annotations import OPTIMIZER_ANNOTATION, STEP_ANNOTATION
from flopsweep.profile import (
    PARTS,
    read_trace,
)


@pytest.mark.slow
def test_profile_true_on_two_gloo_ranks_writes_traces_and_a_breakdown(tmp_path) -> None:
    """A real DDP run: each rank's trace is a readable Chrome trace, and the parts add up to the
    profiled step's wall time measured apart from the trace (perf_counter) within 5%."""
    out = run_py("backend=ddp", "nproc_per_node=2", "device=cpu", "profile=true", f"hydra.run.dir={tmp_path}")
    [record] = records(tmp_path)
    assert record["status"] == "ok", (record["error"], out.stderr[-2000:])
    b = record["metrics"]["breakdown"]
    assert b["ranks"] == 2 and b["view"] == "cpu" and b["trace_dir"] == "profile"
    assert sum(b[p] for p in PARTS) == pytest.approx(b["wall_s"], rel=0.05)
    assert b["compute_s"] > 0 and b["optimizer_s"] > 0 and b["comm_s"] > 0
    for rank in (0, 1):
        events = read_trace(tmp_path / "profile" / f"rank{rank}.trace.json.gz")
        assert any(e.get("name") == STEP_ANNOTATION for e in events)
        assert any(e.get("name") == OPTIMIZER_ANNOTATION for e in events)
    # The measured steps are not the profiled one: their count is unchanged.
    assert len(record["metrics"]["iteration_time_s"]["values"]) == record["config"]["steps"]["measure"]
    # Kineto's own lines ("USDT:... profiler_start") stay off the console.
    assert "USDT" not in out.stdout + out.stderr and "profiler_st" not in out.stdout + out.stderr


@pytest.mark.slow
def test_profile_true_under_deepspeed_zero3(tmp_path) -> None:
    out = run_py(
        "backend=zero3",
        "nproc_per_node=2",
        "device=cpu",
        "precision=fp32",
        "profile=true",
        "steps.measure=2",
        f"hydra.run.dir={tmp_path}",
    )
    [record] = records(tmp_path)
    assert record["status"] == "ok", (record["error"], out.stderr[-2000:])
    b = record["metrics"]["breakdown"]
    assert sum(b[p] for p in PARTS) == pytest.approx(b["wall_s"], rel=0.05)
    assert b["optimizer_s"] > 0 and b["comm_s"] > 0


@pytest.mark.slow
def test_a_file_named_profile_leaves_the_run_ok_with_a_warning(tmp_path) -> None:
    """A file ``profile`` in the run directory: no rank profiles (both agree before the step), the
    measured figures are recorded, status ok, one warning names the file, and the file is untouched."""
    (tmp_path / "profile").write_text("mine")
    out = run_py(
        "backend=ddp",
        "nproc_per_node=2",
        "device=cpu",
        "profile=true",
        "steps.warmup=1",
        "steps.measure=2",
        f"hydra.run.dir={tmp_path}",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    [record] = records(tmp_path)
    assert record["status"] == "ok" and record["error"] is None
    assert record["metrics"]["breakdown"] is None and record["metrics"]["tokens_per_s"] > 0
    [warning] = [w for w in record["warnings"] if w.startswith("profile_failed: ")]
    assert f"{tmp_path / 'profile'} is a file, not a directory" in warning, warning
    assert (tmp_path / "profile").read_text() == "mine"
    assert (out.stdout + out.stderr).count("profile_failed: ") == 1  # the job's log line, once
