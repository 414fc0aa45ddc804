"""One measured step (``steps.measure=1``): no spread to measure, so ``iteration_time_s.std`` and
``cv`` are null and a ``one_step`` warning says so (and that the step was cold under ``steps.warmup=0``);
the checks, the analysis and the noise flags read null as "no spread", never as 0."""

from __future__ import annotations

import copy
import math

import pytest
from helpers import fixture_record, put, rescaled

from analysis.load import load, rankable
from flopsweep.metrics import _summary, warnings_for
from flopsweep.noise import noise_warnings, noisy
from flopsweep.plausible import calibration_problems, record_problems


def test_one_value_has_no_std_or_cv_and_two_values_do():
    one = _summary([2.0])
    assert (one["mean"], one["median"], one["min"], one["max"]) == (2.0, 2.0, 2.0, 2.0)
    assert one["std"] is None and one["cv"] is None
    two = _summary([1.0, 3.0])
    assert two["std"] == 1.0 and two["cv"] == 0.5


@pytest.mark.parametrize(("warmup", "cold"), [(0, True), (2, False)], ids=["not-warmed-up", "warmed-up"])
def test_one_measured_step_is_named_in_the_warnings(warmup, cold):
    metrics = {"iteration_time_s": _summary([2.0]), "warmup_steps": warmup}
    (line,) = warnings_for(metrics)
    assert line.startswith(
        "one_step: one measured step gives no spread (iteration_time_s.std and cv are null)"
    )
    assert ("not warmed up (steps.warmup=0)" in line) is cold
    assert line.endswith(
        "(fix: steps.measure=3 steps.warmup=1 or more)" if cold else "(fix: steps.measure=3 or more)"
    )
    assert warnings_for({"iteration_time_s": _summary([2.0, 2.0]), "warmup_steps": 0}) == []


def test_null_cv_is_no_noise_not_zero():
    assert noisy(None) is False
    assert noise_warnings(cv=None, load_start=None, load_end=None, cpu_count=None, ranks=1) == []


def _one_step_record() -> dict:
    base = fixture_record()
    m = base["metrics"]
    m["iteration_time_s"]["values"] = m["iteration_time_s"]["values"][:1]
    rec = rescaled(base, world=base["system"]["world_size"], tokens_per_device=m["tokens_per_s_per_device"])
    rec["config"]["steps"]["measure"] = 1
    rec["metrics"]["iteration_time_s"].update(std=None, cv=None)
    return rec


def test_a_one_step_record_with_null_spread_passes_the_checks_and_a_zero_spread_still_does():
    rec = _one_step_record()
    assert record_problems(rec) == []
    assert calibration_problems(rec) == []
    old = copy.deepcopy(rec)  # written before session 33: std 0.0 and cv 0.0 from one value
    old["metrics"]["iteration_time_s"].update(std=0.0, cv=0.0)
    assert record_problems(old) == []


def test_the_analysis_loads_a_one_step_record_with_a_blank_cv_and_ranks_it(tmp_path):
    put(tmp_path / "one", _one_step_record())
    df = load(tmp_path)
    assert len(df) == 1
    assert math.isnan(float(df["iteration_time_s_cv"].iloc[0]))
    assert df["implausible"].isna().all()
    assert bool(rankable(df).iloc[0]) is True
