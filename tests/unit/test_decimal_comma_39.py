"""A price written with a decimal comma is named as one (docs/reliability-9.md #529): ``plan=true
cost.usd_per_gpu_hour=2,5`` said only "Fix: add -m (flopsweep -m cost.usd_per_gpu_hour=2,5 ...)", a sweep of
2 and 5 dollars; ``[H100:8@2,5]`` was named a decimal comma since session 35."""

from __future__ import annotations

import pytest


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


BASE = ["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]"]


@pytest.mark.parametrize(
    ("typed", "point"),
    [
        # a price's own line since session 40 (test_decimal_comma_keys_40.py, docs/reliability-11.md #721)
        ("predict.compute_scale=1,5", "1.5"),
        ("predict.compute_scale=0,75", "0.75"),
        ("space.min_headroom=0,2", "0.2"),
    ],
)
def test_a_float_keys_two_numbers_name_the_decimal_point(typed: str, point: str) -> None:
    key, _, value = typed.partition("=")
    line = refusal([*BASE, typed])
    assert line.endswith(
        f"Fix: add -m (flopsweep -m {typed} ...), or, if {value} is a decimal comma, write it with a point: "
        f"{key}={point}."
    ), line
    assert refusal([*BASE, f"{key}={point}"]) is None  # the fix, typed


@pytest.mark.parametrize("typed", ["seed=0,1", "predict.compute_scale=2,10", "budget.tokens=1,5"])
def test_no_decimal_point_where_it_is_a_sweep_or_refused(typed: str) -> None:
    line = refusal([*BASE, typed])
    assert line.endswith(f"Fix: add -m (flopsweep -m {typed} ...)."), line
