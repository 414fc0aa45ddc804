"""A record that is not ``ok`` has every metric null and keeps what was known before its ranks started
under ``run.before_run``: ``predicted_peak_gib`` and ``predicted`` (``flopsweep.record.PRE_RUN_METRICS``,
``BEFORE_RUN``); an ``oom`` whose error names the GPU's memory says how the estimate compared
(``flopsweep.oom_note``). The records of real failed runs are checked in
``tests/integration/test_failures.py``."""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

import pytest
from helpers import make_plan

from analysis.load import PRE_RUN_COLUMNS, row
from flopsweep import record as rec
from flopsweep.figure_types import type_problems
from flopsweep.job.records import (
    _log_result,
    before_run,
    estimate_at_sizes,
    measured,
    predicted_peak_gib,
)
from flopsweep.job.result import JobResult
from flopsweep.memory import estimate
from flopsweep.metrics import build_record
from flopsweep.oom_note import GPU_MEMORY_FIX, device_capacity_gib, oom_estimate_line
from flopsweep.outcome import Outcome

TORCH_OOM = (  # torch 2.11's message, as the H100 run of olmoe-1b-7b micro batch 2 recorded it
    "CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of 79.18 GiB of which "
    "322.19 MiB is free. Including non-PyTorch memory, this process has 78.86 GiB memory in use."
)
OLD_TORCH_OOM = (  # torch 2.0 and before
    "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 39.59 GiB total capacity; 38.2 GiB already "
    "allocated; 3.19 MiB free; 38.4 GiB reserved in total by PyTorch)"
)
PRE_RUN = {
    "predicted_peak_gib": 85.3,
    "predicted": {"iteration_time_s": 1.5, "tokens_per_s": 2.0, "source": "x"},
}
MEASURED = {"iteration_time_s": {"mean": 1.0}, "tokens_per_s": 9.0, "peak_cuda_allocated_bytes": 2**30}


def _job(tmp_path: Path, cfg, **kw) -> JobResult:
    run = {"id": "x", "started_at": None, "finished_at": None, "overrides": [], "job_num": None}
    return JobResult(path=tmp_path / "metrics.json", cfg=cfg, run=run, **kw)


def _run(**extra) -> dict:
    return {"id": "x", "started_at": None, "finished_at": None, "overrides": [], "job_num": 0, **extra}


@pytest.mark.parametrize("status", ["oom", "error", "invalid"])
def test_build_record_of_a_failed_run_nulls_every_metric(status: str, hydra_compose) -> None:
    assert rec.PRE_RUN_METRICS == ("predicted_peak_gib", "predicted") and rec.BEFORE_RUN == "before_run"
    cfg = hydra_compose(["device=cpu"])
    err = rec.error("OutOfMemoryError", TORCH_OOM, "warmup", 0)
    before = {"predicted_peak_gib": 85.3, "predicted": {**PRE_RUN["predicted"], "mfu": float("nan")}}
    made = build_record(
        cfg=cfg,
        status=status,
        error=err,
        run=_run(before_run=before),
        system={},
        metrics={**MEASURED, **PRE_RUN},
        warnings=[],
    )
    assert made["metrics"] == rec.null_metrics()  # DESIGN.md: not ok, every metric null
    assert made["run"]["before_run"] == {
        "predicted_peak_gib": 85.3,
        "predicted": {**PRE_RUN["predicted"], "mfu": None},
    }
    assert made["warnings"] == [
        "non_finite: run.before_run.predicted.mfu was not a finite number and is recorded as null"
    ]
    ok = build_record(
        cfg=cfg, status="ok", error=None, run=_run(), system={}, metrics={**MEASURED, **PRE_RUN}
    )
    assert ok["metrics"]["tokens_per_s"] == 9.0  # an ok record keeps what it measured
    assert ok["metrics"]["predicted_peak_gib"] == 85.3 and "before_run" not in ok["run"]


@pytest.mark.parametrize(
    "message, gib",
    [
        (TORCH_OOM, 79.18),
        (OLD_TORCH_OOM, 39.59),
        ("GPU 0 has a total capacity of 512.00 MiB of which 0 bytes is free", 0.5),
        ("injected fault: oom on rank 1 in measure", None),  # fault.kind=oom names no device
        ("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes", None),
        ("CUDA error: out of memory", None),
        ("GPU 0 has a total capacity of 0.00 GiB", None),
        (None, None),
    ],
)
def test_the_device_memory_is_read_from_torchs_oom_message(message, gib) -> None:
    got = device_capacity_gib(message)
    assert got == pytest.approx(gib) if gib is not None else got is None


def test_the_oom_line_sets_the_estimate_beside_the_gpus_memory() -> None:
    over = oom_estimate_line(85.3, rec.error("OutOfMemoryError", TORCH_OOM, "warmup", 0))
    assert over == (
        "oom_estimate: the memory estimate before the run was 85.3 GiB per rank "
        "(run.before_run.predicted_peak_gib), over the GPU's 79.2 GiB (the capacity the out-of-memory error "
        "names): it said the run would not fit "
        f"(plan=true shows it before a run: est_peak_gib_per_rank, fits). Fix: {GPU_MEMORY_FIX}"
    )
    assert (
        "batch.micro_batch_size" in over
        and "activation_checkpointing=full" in over
        and "backend=fsdp" in over
    )
    under = oom_estimate_line(60.04, {"message": TORCH_OOM})
    assert "was 60.0 GiB per rank" in under and "within the GPU's 79.2 GiB" in under
    assert "needed more than estimated" in under
    for predicted in (None, True, float("nan"), 0.0, -1.0, "85"):
        assert oom_estimate_line(predicted, {"message": TORCH_OOM}) is None
    assert oom_estimate_line(85.3, {"message": "injected fault: oom"}) is None
    assert oom_estimate_line(85.3, None) is None


def test_measured_keeps_the_estimate_and_warns_of_an_oom_it_foresaw(tmp_path: Path, hydra_compose) -> None:
    cfg = hydra_compose(["device=cpu"])
    err = rec.error("OutOfMemoryError", TORCH_OOM, "warmup", 0)
    job = _job(tmp_path, cfg, predicted_peak_gib=85.3, launch_warnings=["host: x"])
    job.outcome = Outcome("oom", error=err)
    measured(job)
    assert (job.status, job.error, job.metrics) == ("oom", err, None)
    assert job.predicted_peak_gib == 85.3
    assert job.warnings[0] == "host: x" and job.warnings[1].startswith("oom_estimate: ")
    for status, error in (
        ("error", rec.error("InjectedFault", "x", "warmup", 0)),
        ("oom", {"message": "oom"}),
    ):
        other = _job(tmp_path, cfg, predicted_peak_gib=85.3)
        other.outcome = Outcome(status, error=error)
        assert measured(other).warnings == []  # no GPU capacity named: nothing to compare with


def test_before_run_gives_the_estimate_and_a_prediction_without_measured_steps(
    tmp_path: Path, hydra_compose
) -> None:
    plan = make_plan(hydra_compose(["device=cpu", "nproc_per_node=2", "backend=ddp"]))
    expected = round(estimate(plan.cfg, plan.layout).total_gib, 6)
    job = _job(tmp_path, plan.cfg, plan=plan, layout=plan.layout)
    job.predicted_peak_gib = predicted_peak_gib(plan.cfg, plan.layout)
    made = before_run(job, "cpu")
    assert made["predicted_peak_gib"] == expected > 0
    assert set(made["predicted"]) >= {"iteration_time_s", "tokens_per_s", "source"}
    assert isinstance(made["predicted"]["source"], str) and made["predicted"]["source"]
    # a search that failed at another micro batch: the estimate of the sizes reached
    batch = dataclasses.replace(plan.cfg.batch, micro_batch_size=plan.cfg.batch.micro_batch_size * 4)
    bigger = dataclasses.replace(plan.cfg, batch=batch)
    job.cfg = bigger
    estimate_at_sizes(job)
    assert job.predicted_peak_gib == round(estimate(bigger, plan.layout).total_gib, 6) > expected
    # never launched (refused by the launch's checks) or not planned here (a lost Slurm job): null
    assert before_run(_job(tmp_path, plan.cfg, plan=plan), "cpu") is None
    assert before_run(_job(tmp_path, plan.cfg, layout=plan.layout), "cpu") is None
    # an implausible (invalid) run's: what its metrics say, the prediction made with the ranks' probes
    job.metrics = {**MEASURED, **PRE_RUN}
    assert before_run(job, "cpu") == PRE_RUN


def test_the_analysis_shows_the_estimate_of_a_failed_run_and_no_measured_figure(hydra_compose) -> None:
    cfg = hydra_compose(["device=cpu"])
    err = rec.error("OutOfMemoryError", TORCH_OOM, "warmup", 0)
    made = build_record(
        cfg=cfg,
        status="oom",
        error=err,
        run=_run(before_run=PRE_RUN),
        system={},
        metrics={**MEASURED, **PRE_RUN},
    )
    out = row(made, "x")
    assert out["predicted_peak_gib"] == 85.3 and out["predicted_iteration_time_s"] == 1.5
    assert out["predicted_source"] == "x" and out["predicted_tokens_per_s"] == 2.0
    assert set(PRE_RUN_COLUMNS) == {
        "predicted_peak_gib",
        "predicted_iteration_time_s",
        "predicted_tokens_per_s",
        "predicted_source",
        "predicted_compute_source",
    }
    assert out["peak_memory_error"] is None and out["prediction_error"] is None  # nothing measured to compare
    assert out["peak_cuda_allocated_gib"] is None and out["tokens_per_s"] is None
    assert out["iteration_time_s_mean"] is None or math.isnan(out["iteration_time_s_mean"])


@pytest.mark.parametrize("job_num", [None, 3])
def test_the_oom_line_is_logged_after_the_oom_itself(job_num, hydra_compose, caplog) -> None:
    cfg = hydra_compose(["device=cpu"])
    run = {"id": "x", "started_at": None, "finished_at": None, "overrides": [], "job_num": job_num}
    err = rec.error("OutOfMemoryError", TORCH_OOM, "warmup", 0)
    line = oom_estimate_line(85.3, err)
    made = build_record(
        cfg=cfg, status="oom", error=err, run=run, system={}, metrics=PRE_RUN, warnings=[line]
    )
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        _log_result(made, Path("sweep/3/metrics.json"))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and said[0].startswith("oom in warmup") and said[1] == line
    caplog.clear()
    other = build_record(
        cfg=cfg, status="error", error=err, run=run, system={}, metrics=None, warnings=[line]
    )
    with caplog.at_level(logging.WARNING, logger="flopsweep"):
        _log_result(other, Path("sweep/3/metrics.json"))
    assert [r.getMessage() for r in caplog.records if r.getMessage() == line] == []


@pytest.mark.parametrize(
    "before",
    [
        None,
        "85.3",
        [85.3],
        {"predicted_peak_gib": "big", "predicted": "fast"},
        {"predicted_peak_gib": [1], "predicted": {"iteration_time_s": {"a": 1}, "tokens_per_s": True}},
    ],
)
def test_a_hand_edited_before_run_of_a_wrong_type_is_a_blank_cell(before, hydra_compose) -> None:
    cfg = hydra_compose(["device=cpu"])
    err = rec.error("OutOfMemoryError", TORCH_OOM, "warmup", 0)
    made = build_record(cfg=cfg, status="oom", error=err, run=_run(), system={}, metrics=None)
    made["run"]["before_run"] = before
    out = row(made, "x")
    assert out["predicted_peak_gib"] is None and out["predicted_iteration_time_s"] is None
    assert out["predicted_tokens_per_s"] is None and out["implausible"] is None
    # an ok record is type-checked (flopsweep.figure_types): one holding a wrong one is flagged
    ok = build_record(cfg=cfg, status="ok", error=None, run=_run(), system={}, metrics=None)
    ok["run"]["before_run"] = {"predicted_peak_gib": "big"}
    assert 'run.before_run.predicted_peak_gib "big": expected a number >= 0 (GiB), not text' in type_problems(
        ok
    )


@pytest.mark.parametrize(
    ("predicted", "capacity", "said"),
    [
        (
            106.0,
            79.18 * 2**30,
            "the memory estimate is 106.0 GiB per rank (metrics.predicted_peak_gib), over",
        ),
        (60.0, 79.18 * 2**30, None),  # fits: no line
        (79.18, 79.18 * 2**30, None),  # at the capacity: still no line
        (None, 79.18 * 2**30, None),  # the estimate failed
        (106.0, None, None),  # no GPU visible
        (float("nan"), 79.18 * 2**30, None),
        (True, 79.18 * 2**30, None),  # a bool is no size
        (106.0, 0, None),
    ],
)
def test_the_launch_warns_when_the_estimate_is_over_the_gpus_memory(predicted, capacity, said) -> None:
    """The H100 OLMoE case of 2026-12-05 (estimated 106 GiB, 79.2 GiB GPU, out of memory in warm-up):
    said before any rank starts, with the GPU's name and the fix; nothing where it fits or a figure
    is missing."""
    from flopsweep.oom_note import GPU_MEMORY_FIX, OVER_MEMORY, over_memory_line

    line = over_memory_line(predicted, capacity, "NVIDIA H100 80GB HBM3")
    if said is None:
        assert line is None
        return
    assert line.startswith(OVER_MEMORY) and said in line
    assert "over this GPU's 79.2 GiB (NVIDIA H100 80GB HBM3): the run will likely run out of memory" in line
    assert line.endswith(f"Fix: {GPU_MEMORY_FIX}") and "\n" not in line
    assert "(NVIDIA" not in over_memory_line(predicted, capacity, None)
