"""A decimal comma on a key that takes one value (a price, a budget, a bandwidth) is refused as one, with
``-m`` or without, on the command line and in a sweep file (docs/reliability-11.md #721):
``-m cost.usd_per_gpu_hour=2,50`` planned two jobs, at 2 and 50 dollars, and without ``-m`` the line said
only "add -m" (``2,50``: the second number ends in 0); a key where a comma sweep is a set-up each
(``batch.micro_batch_size=2,4``, ``optim.lr``) keeps sweeping."""

from __future__ import annotations

import os

import pytest

from flopsweep.decimal_comma import ONE_VALUE_KEYS, comma_point, decimal_comma_problem


def refusal(argv: list[str]) -> str | None:
    from run import refusal as run_refusal

    return run_refusal(argv)


BASE = ["plan=true", "model=llama3.1-8b", "plan_clusters=[H100:8]"]


@pytest.mark.parametrize("multirun", [[], ["-m"]])
@pytest.mark.parametrize(
    ("typed", "point"),
    [
        ("cost.usd_per_gpu_hour=2,50", "2.50"),
        ("cost.usd_per_gpu_hour=2,5", "2.5"),
        ("cost.usd_per_gpu_hour=0,75", "0.75"),
        ("budget.tokens=1,5e12", "1.5e12"),
        ("predict.intra_node_gbps=12,5", "12.5"),
        ("predict.inter_node_gbps=45,50", "45.50"),
    ],
)
def test_a_one_value_keys_two_numbers_are_a_decimal_comma(
    multirun: list[str], typed: str, point: str
) -> None:
    key, _, value = typed.partition("=")
    first, _, second = value.partition(",")
    line = refusal([*multirun, *BASE, typed])
    assert line == (
        f"Invalid config: {typed}: {value} looks like a decimal comma (Hydra reads a sweep of {first} and "
        f"{second}; {key} is {ONE_VALUE_KEYS[key]}, one value; a sweep of both is choice({first},{second})). "
        f"Fix: {key}={point}."
    )
    assert refusal([*multirun, *BASE, f"{key}={point}"]) is None  # the fix, typed


def test_a_sweep_of_both_and_a_set_up_sweep_are_kept() -> None:
    for typed in (
        "cost.usd_per_gpu_hour=choice(2,50)",
        "cost.usd_per_gpu_hour=2.50,3",
        "batch.micro_batch_size=2,4",
        "optim.lr=1,5",
        "budget.tokens=1e12,2e12",
    ):
        assert decimal_comma_problem([typed]) is None, typed
    assert refusal(["-m", *BASE, "cost.usd_per_gpu_hour=choice(2,50)"]) is None


def test_a_quoted_one_and_a_point_the_key_refuses() -> None:
    assert comma_point("cost.usd_per_gpu_hour", "'2,50'") == "2.50"
    assert comma_point("budget.tokens", "1,5") is None  # 1.5 tokens: refused itself, no fix of its own
    line = refusal([*BASE, "cost.usd_per_gpu_hour='2,50'"])
    assert line.endswith("Fix: cost.usd_per_gpu_hour=2.50."), line


def test_a_sweep_files_axis_and_value_are_refused_alike(tmp_path) -> None:  # noqa: ANN001 - pytest's
    from flopsweep.conf_files import sweep_file_problem
    from flopsweep.sweep_file_keys import values_problem
    from run import FILE_VALUE_CHECKS, RUN_CONF

    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    for name in os.listdir(RUN_CONF):  # conf/ as it is, its sweep folder this test's own
        if name != "sweep":
            (conf / name).symlink_to(f"{RUN_CONF}/{name}")
    header = "# @package _global_\ndevice: cpu\n"
    (conf / "sweep" / "axis.yaml").write_text(
        header + "hydra:\n  sweeper:\n    params:\n      cost.usd_per_gpu_hour: 2,50\n"
    )
    (conf / "sweep" / "plain.yaml").write_text(header + "cost:\n  usd_per_gpu_hour: 2,50\n")
    axis = sweep_file_problem(["-m", "+sweep=axis", "plan=true"], str(conf))
    assert axis is not None and axis.endswith(
        "looks like a decimal comma (Hydra reads a sweep of 2 and 50; "
        "cost.usd_per_gpu_hour is a price (US dollars per GPU-hour), one value; a sweep of both is "
        "choice(2,50)). Fix: write cost.usd_per_gpu_hour: 2.50 under hydra.sweeper.params in "
        "conf/sweep/axis.yaml."  # session 41 (#883): in the file's form
    ), axis
    plain = values_problem(["-m", "+sweep=plain", "plan=true"], FILE_VALUE_CHECKS, str(conf))
    assert plain is not None and plain.endswith(
        "Fix: write cost: {usd_per_gpu_hour: 2.50} in conf/sweep/plain.yaml."
    )
