"""The sweep objective (flopsweep.objective): the float a job returns to Hydra, its direction from
MetricSpec.better, a one-line refusal of a key that is no figure of merit, and a real Optuna study."""

from __future__ import annotations

import math

import pytest

from flopsweep import objective
from flopsweep.config import ConfigError

OK = {
    "status": "ok",
    "metrics": {
        "model_tflops_per_device": 1.5,
        "tflops_per_device": None,  # Llama
        "iteration_time_s": {"mean": 0.25},
        "peak_cuda_allocated_bytes": 3 * 2**30,
    },
}


def test_the_value_of_each_kind_of_objective() -> None:
    assert objective.value(OK, objective.DEFAULT) == 1.5
    assert objective.value(OK, "iteration_time_s_mean") == 0.25  # a nested column
    assert objective.value(OK, "peak_cuda_allocated_gib") == 3.0  # the column, scaled
    assert objective.value(OK, "peak_cuda_allocated_bytes") == 3 * 2**30  # the metric key, raw
    assert math.isnan(objective.value(OK, "tflops_per_device"))  # null: NaN
    for status in ("oom", "error", "invalid", "plan"):
        assert math.isnan(objective.value({**OK, "status": status}, objective.DEFAULT))


def test_the_direction_comes_from_the_spec() -> None:
    assert objective.direction("model_tflops_per_device") == "maximize"
    assert objective.direction("iteration_time_s_mean") == "minimize"
    assert objective.direction("cuda_alloc_retries") == "minimize"


@pytest.mark.parametrize(
    ("name", "why"),
    [("nope", "is not a metric"), ("global_batch_size", "no better direction"), ("breakdown", "no better")],
)
def test_a_key_that_is_no_figure_of_merit_is_refused(name: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as info:
        objective.spec_of(name)
    assert str(info.value).startswith(f"Invalid config: objective={name!r}") and "\n" not in str(info.value)
    assert "model_tflops_per_device" in str(info.value)


@pytest.mark.parametrize(
    ("name", "missing"),
    [
        ("usd_per_million_tokens", ["cost.usd_per_gpu_hour"]),
        ("budget_days", ["budget.tokens"]),
        ("budget_gpu_hours", ["budget.tokens"]),
        ("budget_energy_kwh", ["budget.tokens"]),
        ("budget_usd", ["budget.tokens", "cost.usd_per_gpu_hour"]),
    ],
)
def test_an_objective_whose_figure_needs_an_unset_key_is_refused_before_hydra(name, missing) -> None:
    """The plan said "no set-up fits ... commonest reason: ok" (every row ok, none with a figure)."""
    from run import refusal

    for argv in (
        ["plan=true", "model=llama3.1-8b", f"objective={name}", "plan_clusters=[H100:8]"],
        ["-m", "hydra/sweeper=tune", f"objective={name}", "device=cpu", "seed=0,1"],  # an axis to tune (#323)
        [f"objective={name}", "device=cpu", *(f"{k}=null" for k in missing)],
    ):
        line = refusal(argv)
        assert line is not None and "\n" not in line, argv
        assert line.startswith(f"Invalid config: objective={name!r}: needs {' and '.join(missing)}")
        assert f"or objective={objective.DEFAULT}" in line
        fix = [objective.EXAMPLES[k][0] for k in missing]
        nulls = argv[-1].endswith("=null")  # given as null: replaced, as adding it gives it twice (refused)
        words = f"replace {', '.join(f'{k}=null with {e}' for k, e in zip(missing, fix, strict=True))}"
        assert f"Fix: {words if nulls else 'add ' + ' '.join(fix)} (" in line
        kept = [a for a in argv if a.partition("=")[0] not in missing]  # each null replaced by its fix
        assert refusal([*kept, *fix]) is None  # the fix, added as written, passes
    line = refusal(["-m", f"objective={name}", "+sweep=llama"])  # the file's values read with the line's
    assert line is not None and "sweep/llama.yaml" in line and f"needs {' and '.join(missing)}" in line
    assert refusal(["-m", f"objective={name}", "+sweep=llama", *fix]) is None


def test_the_job_refuses_an_objective_whose_key_is_unset() -> None:
    """A +sweep= file's objective (the command line cannot tell): the job's validate refuses it."""
    import dataclasses

    from helpers import validate

    from flopsweep.config import BudgetConfig, CostConfig, RunConfig

    cfg = RunConfig(device="cpu", objective="budget_usd")
    with pytest.raises(ConfigError, match="needs budget.tokens and cost.usd_per_gpu_hour") as info:
        validate(cfg)
    assert info.value.key == "objective"
    set_up = dataclasses.replace(cfg, cost=CostConfig(usd_per_gpu_hour=2.5), budget=BudgetConfig(tokens=1e12))
    assert validate(set_up).objective == "budget_usd"
    assert objective.inputs_problem("mfu", {}) is None
