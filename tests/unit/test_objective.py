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
