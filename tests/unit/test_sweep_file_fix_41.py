"""Session 41 (docs/reliability-12.md #883, #884): a sweep file's refused value gets its fix in the file's
own form (``sweep_file_fix.in_file_form``), and each fix, written in the file, passes. The command line's
fix (``steps.measure=3``) typed back had stopped Hydra (``In 'sweep/X': ValidationError ... could not be
converted to Integer``, exit 1: Hydra merges the file's value first), and a ``hydra.sweeper.params`` axis
was refused again though the command line's axis replaces it. The files are planted in a ``conf/`` of
``tmp_path`` beside links to the checkout's groups, never in its ``sweep/``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flopsweep.conf_files import sweep_file_problem
from flopsweep.sweep_file_fix import in_file_form
from flopsweep.sweep_file_keys import values_problem
from run import FILE_MERGE_CHECKS, FILE_VALUE_CHECKS, RUN_CONF

HEAD = "# @package _global_\ndevice: cpu\n"
SHOWN = "Invalid config: conf/sweep/x.yaml: "
IN = " in conf/sweep/x.yaml"


def _conf(tmp_path: Path, text: str) -> str:
    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    for name in os.listdir(RUN_CONF):  # conf/ as it is, its sweep folder this test's own
        if name != "sweep":
            (conf / name).symlink_to(f"{RUN_CONF}/{name}")
    (conf / "sweep" / "x.yaml").write_text(HEAD + text)
    return str(conf)


def _values(argv: list[str], conf: str) -> str | None:
    return values_problem(argv, FILE_VALUE_CHECKS, conf, FILE_MERGE_CHECKS)


CASES = [
    (
        "steps: {measure: 3.0}\n",
        "steps.measure=3",
        "steps.measure=3.0: is a whole number written as a float",
        "write it without a point or exponent: steps: {measure: 3}",
    ),
    (
        "cost:\n  usd_per_gpu_hour: 2,50\n",
        "cost.usd_per_gpu_hour=2.50",
        "cost.usd_per_gpu_hour='2,50': 2,50 looks like a decimal comma (cost.usd_per_gpu_hour is a price (US "
        "dollars per GPU-hour), with a point)",
        "write cost: {usd_per_gpu_hour: 2.50}",
    ),
]


@pytest.mark.parametrize(("text", "typed", "said", "fix"), CASES)
@pytest.mark.parametrize("multirun", [[], ["-m"]])
def test_a_files_value_gets_the_files_fix_which_passes(
    tmp_path: Path, text: str, typed: str, said: str, fix: str, multirun: list[str]
) -> None:
    argv = [*multirun, "+sweep=x"]
    assert _values(argv, _conf(tmp_path, text)) == f"{SHOWN}{said}. Fix: {fix}{IN}."
    written = (
        fix.removeprefix("write ").rpartition(": ")[2] if "exponent" in fix else fix.removeprefix("write ")
    )
    assert _values(argv, _conf(tmp_path / "fixed", written + "\n")) is None


@pytest.mark.parametrize(("text", "typed", "said", "fix"), CASES)
@pytest.mark.parametrize("multirun", [[], ["-m"]])
def test_the_same_key_on_the_command_line_is_still_one_line(
    tmp_path: Path, text: str, typed: str, said: str, fix: str, multirun: list[str]
) -> None:
    """Typed back, the command line's fix left Hydra's ValidationError (the file's value is merged first)."""
    argv = [*multirun, "+sweep=x", typed]
    key = typed.partition("=")[0]
    assert _values(argv, _conf(tmp_path, text)) == (
        f"{SHOWN}{said} (Hydra reads the file's value before the command line's {typed}, which replaces it). "
        f"Fix: {fix}{IN}, or drop {key} there."
    )
    assert _values(argv, _conf(tmp_path / "dropped", "seed: 1\n")) is None


AXIS = "hydra:\n  sweeper:\n    params:\n      batch.micro_batch_size: {}\n"


def test_an_axis_of_the_file_gets_its_fix_in_the_params_and_the_command_lines_axis_replaces_it(tmp_path):
    conf = _conf(tmp_path, AXIS.format("1.5,2"))
    line = sweep_file_problem(["-m", "+sweep=x"], conf)
    assert line == (
        "Invalid config: conf/sweep/x.yaml (hydra.sweeper.params): batch.micro_batch_size=1.5: is not a "
        "whole number. Fix: set batch.micro_batch_size to a whole number, e.g. batch.micro_batch_size: 4,2 "
        f"(4 is its default) under hydra.sweeper.params{IN}."
    )
    fixed = _conf(tmp_path / "fixed", AXIS.format("4,2"))
    assert (
        sweep_file_problem(["-m", "+sweep=x"], fixed) is None and _values(["-m", "+sweep=x"], fixed) is None
    )
    for given in ("batch.micro_batch_size=1,2", "batch.micro_batch_size=4"):  # Hydra's sweeper: it replaces
        argv = ["-m", "+sweep=x", given]
        assert sweep_file_problem(argv, conf) is None and _values(argv, conf) is None


def test_a_fix_that_names_another_key_or_drops_the_key_is_kept():
    line = "Invalid config: sweep/x.yaml: search.model=largest: no. Fix: drop search.model=largest."
    assert in_file_form(line, "sweep/x.yaml") == line
    other = "Invalid config: sweep/x.yaml: seed=1.5: no. Fix: set seed=1 or model=gpt-tiny."
    assert in_file_form(other, "sweep/x.yaml") == other
    plain = "Invalid config: sweep/x.yaml: seed=1.5: no. Fix: set seed=1."
    assert (
        in_file_form(plain, "sweep/x.yaml")
        == "Invalid config: sweep/x.yaml: seed=1.5: no. Fix: set seed: 1 in sweep/x.yaml."
    )


def test_a_decimal_comma_in_a_flow_mapping_is_named_as_one_and_its_fix_passes(tmp_path: Path) -> None:
    """#885: ``cost: {usd_per_gpu_hour: 2,50}`` was ``cost.50=null: no such key ... none of the keys of cost
    is near 50`` (YAML: two entries, ``usd_per_gpu_hour: 2`` and a key ``50``)."""
    from flopsweep.sweep_file_keys import shape_problem

    conf = _conf(tmp_path, "cost: {usd_per_gpu_hour: 2,50}\n")
    assert shape_problem(["+sweep=x"], conf) == (
        f"{SHOWN}cost.usd_per_gpu_hour='2,50': 2,50 looks like a decimal comma (cost.usd_per_gpu_hour is a "
        "price (US dollars per GPU-hour), with a point); in a {...} mapping YAML reads the comma as the end "
        "of an entry: usd_per_gpu_hour: 2 and a key 50. Fix: write cost: {usd_per_gpu_hour: 2.50}"
        f"{IN}."
    )
    fixed = _conf(tmp_path / "fixed", "cost: {usd_per_gpu_hour: 2.50}\n")
    assert shape_problem(["+sweep=x"], fixed) is None and _values(["+sweep=x"], fixed) is None
    assert shape_problem(["+sweep=x"], _conf(tmp_path / "two", "steps: {warmup: 1, measure: 2}\n")) is None
