"""An uncalibrated CPU plan's fix says ``drop device=cpu`` only where device=cpu was given, and each form
typed back is accepted (docs/reliability-13.md row 1007)."""

from __future__ import annotations

import pytest

from flopsweep.config import ConfigError
from flopsweep.job.dryrun import plan_prediction
from flopsweep.plan import Environment, plan

NO_GPU = Environment(cpu_count=2, host_memory_bytes=1024 * 2**30)


def _source(hydra_compose, overrides: list[str]) -> str:
    return plan_prediction(plan(hydra_compose(overrides), NO_GPU), None)["prediction_source"]


def test_no_device_given_says_set_plan_gpu_and_that_is_accepted(hydra_compose):
    given = ["plan=true", "model=gpt-125m"]
    assert plan(hydra_compose(given), NO_GPU).device_given == "auto"
    source = _source(hydra_compose, given)
    assert source.endswith("or set plan_gpu=NAME for its datasheet peak (e.g. set plan_gpu=H100)"), source
    assert "device=cpu" not in source
    from run import refusal

    assert refusal([*given, "plan_gpu=H100"]) is None  # typed back
    plan(hydra_compose([*given, "plan_gpu=H100"]), NO_GPU)


def test_device_cpu_given_still_says_drop_it(hydra_compose):
    given = ["plan=true", "model=gpt-125m", "device=cpu"]
    source = _source(hydra_compose, given)
    assert source.endswith("(e.g. drop device=cpu and set plan_gpu=H100)"), source
    with pytest.raises(ConfigError, match="drop device=cpu"):
        plan(hydra_compose([*given, "plan_gpu=H100"]), NO_GPU)


def test_a_host_row_s_fix_drops_device_cpu_only_where_it_was_given(tmp_path):
    import csv

    from flopsweep.job.planprint import plan_unfit_line
    from flopsweep.job.plantable import PLAN_COLUMNS

    row = {"job": 0, "status": "ok", "model": "gpt-1.3b", "est_peak_gib_per_rank": 35.3, "fits": False}
    row |= {"fits_on": "host (21.1 GiB free now for 1 rank)", "world_size": 1}
    path = tmp_path / "plan.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=PLAN_COLUMNS)
        writer.writeheader()
        writer.writerow(row)
    line = plan_unfit_line(str(path), "H100", device="auto")
    assert line is not None and line.endswith(
        "or set plan_gpu=NAME to plan it for a GPU (e.g. set plan_gpu=H100)."
    )
    assert "drop device=cpu" in (plan_unfit_line(str(path), "H100", device="cpu") or "")
    from run import refusal

    assert refusal(["-m", "plan=true", "model=glob(gpt-1*)", "plan_gpu=H100"]) is None  # typed back
