"""A key given twice is refused with an override to type (docs/reliability-9.md #525): ``plan=true
plan_clusters=[H100:8] ... plan_clusters=[A100-40GB:8]`` said "Fix: give plan_clusters once: keep one.",
naming none; a sweep's said ``name=a,b,c``."""

from __future__ import annotations

import shlex

import pytest


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


def _fix(line: str) -> str:
    return line.rsplit("Fix: ", 1)[1]


def test_a_cluster_list_given_twice_names_the_last_to_keep() -> None:
    base = ["plan=true", "model=llama3.1-8b"]
    line = refusal([*base, "plan_clusters=[H100:8]", "plan_clusters=[A100-40GB:8]"])
    assert _fix(line) == (
        "give plan_clusters once: keep one, e.g. 'plan_clusters=[A100-40GB:8]' (the last, which Hydra "
        "would run)."
    )
    typed = shlex.split(_fix(line).split("e.g. ", 1)[1].split(" (the last")[0])
    assert refusal([*base, *typed]) is None


@pytest.mark.parametrize(
    ("given", "merged"),
    [
        # 2,3 alone is a decimal comma of a price (docs/reliability-11.md #721): 2.5,3 a sweep
        (["cost.usd_per_gpu_hour=2.5,3", "cost.usd_per_gpu_hour=4"], "cost.usd_per_gpu_hour=2.5,3,4"),
        (["budget.tokens=1e12", "budget.tokens=1e12,2e12"], "budget.tokens=1e12,2e12"),
    ],
)
def test_two_sweeps_of_a_key_are_given_as_one(given: list[str], merged: str) -> None:
    base = ["-m", "plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]"]
    line = refusal([*base, *given])
    assert _fix(line).endswith(f"(a sweep lists every value): {merged}."), line
    assert refusal([*base, merged]) is None
