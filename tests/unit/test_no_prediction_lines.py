"""Every line a plan prints where it predicts nothing is in the house form of a refusal: ``no
prediction: KEY=VALUE: why. Fix: what to do`` (a plan row's ``prediction_source``, a dropped set-up's
``reason``), and a job placed on ``predict.gpus_per_node`` x ``predict.nnodes`` is refused in those keys.
Each reason is made by the code that makes it in a plan (:func:`flopsweep.forecast.prediction`, the
step model's pieces, :func:`flopsweep.job.dryrun.plan_prediction`, :func:`flopsweep.job.dryrun.plan_job`).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from flopsweep import forecast
from flopsweep.layout import Layout
from flopsweep.workload import PredictionError

HOUSE = re.compile(r"[\w.]+=[^:\s]+: [^\n]+\. Fix: [^\n]+")
"""``KEY=VALUE: why. Fix: fix`` on one line."""


def _house(line: str, head: str = "no prediction: ") -> str:
    assert line.startswith(head), line
    body = line.removeprefix(head)
    assert HOUSE.fullmatch(body) and body.count("Fix:") == 1, line
    return body


def test_a_collective_with_no_bandwidth_names_its_key(hydra_compose) -> None:
    """Two DDP ranks measured at a GEMM rate, with no GPU named: nothing gives the all-reduce's
    bandwidth in the node, and the reason names the key that does."""
    cfg = hydra_compose(["model=gpt-tiny", "backend=ddp", "nproc_per_node=2", "device=cpu"])
    made = forecast.prediction(
        cfg, Layout.resolve(cfg.parallel, 2), [], gpus_per_node=2, device_name=None, gemm_tflops=1.0
    )
    assert made["iteration_time_s"] is None
    body = _house(made["source"])
    assert body.startswith("predict.intra_node_gbps=null: no bus bandwidth for ") and "(in a node)" in body


def test_no_gemm_rate_and_a_compiler_chosen_recompute_name_theirs(hydra_compose) -> None:
    cpu = hydra_compose(["model=gpt-tiny", "device=cpu"])
    made = forecast.prediction(cpu, Layout.data_parallel(1), [], gpus_per_node=1, device_name=None)
    assert _house(made["source"]).startswith("predict.calibration=null: uncalibrated")
    budget = hydra_compose(["model=llama3.2-1b", "activation_checkpointing=memory_budget", "compile=true"])
    made = forecast.prediction(budget, Layout.data_parallel(1), [], gpus_per_node=8, device_name="H100")
    assert _house(made["source"]).startswith("activation_checkpointing=memory_budget: the compiler decides")


def test_a_calibration_that_leaves_no_compute_time_names_the_record(hydra_compose) -> None:
    from flopsweep.compute_time import compute_from_calibration

    cfg = hydra_compose(["model=gpt-tiny", "device=cpu"])
    work = forecast.workload(cfg, Layout.data_parallel(1))
    with pytest.raises(PredictionError) as err:
        compute_from_calibration(
            work, calibration=work, iteration_time_s=0.5, source="cal/metrics.json", exposed_comm_s=0.6
        )
    assert _house(str(err.value), head="") == (
        "predict.calibration=cal/metrics.json: its 0.5 s step leaves no compute time once its optimizer "
        "(0 s) and exposed communication (0.6 s) are taken out. Fix: give another record of this set-up "
        "(predict.calibration=PATH)"
    )


def test_a_record_without_its_counts_names_them() -> None:
    from flopsweep.predict import workload_from_record

    with pytest.raises(PredictionError) as err:
        workload_from_record({"config": {}, "model": {"n_params": None}, "metrics": {}})
    assert _house(str(err.value), head="").startswith("model.n_params=null: a calibration record without")


def test_a_failing_step_model_is_one_line_with_its_fix(hydra_compose, monkeypatch) -> None:
    """A failure inside the step model (here injected) costs no record: one line naming the model,
    the error and the fix."""

    def fails(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(forecast, "_prediction", fails)
    cfg = hydra_compose(["model=gpt-tiny", "device=cpu"])
    made = forecast.prediction(cfg, Layout.data_parallel(1), [], gpus_per_node=1, device_name="H100")
    assert _house(made["source"]) == (
        "model=gpt-tiny: the step model failed (ZeroDivisionError: division by zero). Fix: give "
        "predict.calibration=PATH (a record of this set-up), and report the failure"
    )


def test_a_one_rank_backend_predicted_on_more_ranks_says_the_keys(hydra_compose) -> None:
    """:func:`plan_prediction` of a one-rank plan asked for 8 GPUs (``predict.gpus_per_node=8``)."""
    from flopsweep.job.dryrun import plan_prediction
    from flopsweep.plan import Environment, plan

    cfg = hydra_compose(["model=gpt-tiny", "device=cpu", "backend=single"])
    p = plan(cfg, Environment(cpu_count=2))
    asked = dataclasses.replace(p.cfg, predict=dataclasses.replace(p.cfg.predict, gpus_per_node=8))
    out = plan_prediction(dataclasses.replace(p, cfg=asked), "H100", records=[])
    assert out["predicted_world_size"] == 8
    assert _house(out["prediction_source"]) == (
        "backend=single: runs one rank, and the prediction is of 8 (predict.nnodes=1 x "
        "predict.gpus_per_node=8). Fix: pick backend=ddp or backend=fsdp, or set predict.gpus_per_node=1 "
        "and predict.nnodes=1"
    )


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            ["predict.gpus_per_node=8"],
            "predict.gpus_per_node x nnodes = 8. Fix: set predict.gpus_per_node=1 and nnodes=1",
        ),
        (
            ["predict.nnodes=2"],
            "nproc_per_node x predict.nnodes = 2. Fix: set nproc_per_node=1 and predict.nnodes=1",
        ),
        (["nproc_per_node=4"], "nproc_per_node x nnodes = 4. Fix: set nproc_per_node=1 and nnodes=1"),
    ],
)
def test_a_job_placed_by_the_predict_keys_is_refused_in_them(
    hydra_compose, tmp_path: Path, extra, said
) -> None:
    """The default ``backend=single`` with ``predict.gpus_per_node=8`` said ``Fix: set nproc_per_node=1``, a
    key the command line never gave: the plan placed the job on the predict keys, and says those."""
    from flopsweep.job import JobInfo
    from flopsweep.job.dryrun import plan_job

    args = ["model=gpt-tiny", "plan=true", "plan_gpu=H100", "backend=single", *extra]
    row = plan_job(hydra_compose(args), JobInfo(job_dir=tmp_path, overrides=args))["plan"]
    assert row["status"] == "invalid"
    head = "Invalid config: backend='single': runs at most 1 rank but "
    assert row["reason"] == f"{head}{said}, or pick backend=ddp, fsdp, deepspeed."
