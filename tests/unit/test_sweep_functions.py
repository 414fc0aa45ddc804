"""Hydra's sweep functions (``glob``, ``range``, ``interval``, ``tag``, ``shuffle``, ``sort``) on the
command line: refused in one line before Hydra where the sweep cannot run as written, checked value by
value where it can (:func:`flopsweep.override_multirun.sweep_function_problem`,
:func:`flopsweep.override_schema.sweep_values`).

``seed=glob(*)`` beside a plan key stopped ``run.py`` with Hydra's ``ConfigLoader is not set`` traceback
(flopsweep's own reading of the command line asked Hydra to expand a glob), ``model.n_head=glob(*)``
with an ``AttributeError``; alone it launched 0 jobs and said ``0 ok``, exit 0.
"""

from __future__ import annotations

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from flopsweep.override_schema import sweep_values
from run import refusal

FORMS = (
    "glob(*)",
    "glob(*,exclude=x)",
    "range(1,3)",
    "range(1.5,3.5,0.5)",
    "interval(0,1)",
    "tag(a,choice(1,2))",
    "tag(a,range(1,3))",
    "shuffle(range(1,3))",
    "sort(2,1)",
)
"""Each sweep function Hydra's grammar reads as a sweep of a key."""

BESIDE = (
    [],
    ["hydra/sweeper=tune"],
    ["plan=true", "plan_clusters=[H100:8]"],  # plan_command_line reads every key's values
    ["plan_gpu=H100", "plan_gpu_memory_gib=80"],
)

KEYS = ("seed", "model.n_head", "model.name", "plan_gpu", "space.top", "budget.tokens", "precision", "tag")


def _one_line(line: str | None, override: str) -> str:
    assert line is not None
    assert line.startswith(f"Invalid config: {override}: ") and "\n" not in line and " Fix: " in line, line
    return line


@pytest.mark.parametrize("beside", BESIDE)
@pytest.mark.parametrize("form", FORMS)
def test_every_sweep_function_of_every_key_is_one_line_or_none_never_a_traceback(beside, form) -> None:
    for key in KEYS:
        line = refusal(["-m", *beside, f"{key}={form}"])
        assert line is None or (line.startswith("Invalid config: ") and "\n" not in line), (key, line)


@pytest.mark.parametrize("key", ["seed", "timeout_s", "model.n_layer", "tag", "budget.tokens"])
def test_a_glob_of_a_key_that_is_no_group_is_one_line(key: str) -> None:
    override = f"{key}=glob(*)"
    line = _one_line(refusal(["-m", override]), override)
    assert f"{key} is a key, so the sweep would run no job" in line
    assert f"Fix: list its values, e.g. {key}=1,2,3" in line


def test_a_glob_of_a_group_is_hydras_to_expand() -> None:
    assert refusal(["-m", "precision=glob(fp*)", "steps.measure=1"]) is None


@pytest.mark.parametrize("sweeper", [[], ["hydra/sweeper=tune"], ["hydra/sweeper=basic_batched"]])
def test_an_interval_under_a_sweeper_that_lists_values_is_one_line(sweeper: list[str]) -> None:
    line = _one_line(refusal(["-m", *sweeper, "seed=interval(0,4)"]), "seed=interval(0,4)")
    assert "interval() is a range for Optuna to sample" in line
    # seed is a whole number: Optuna samples it with int(interval()) (reliability-13.md #1001)
    assert "or 'seed=int(interval(0,4))' with hydra/sweeper=optuna_objective" in line


@pytest.mark.parametrize(
    ("override", "shown", "words"),
    [
        # a float range on a whole-number key: the range's line, not its first value's (reliability-5.md #294)
        (
            "seed=range(1.5,3.5,0.5)",
            "seed=range(1.5,3.5,0.5)",
            "a range with a float start, stop or step gives floats",
        ),
        ("steps.measure=range(0.5,3)", "steps.measure=range(0.5,3)", "e.g. steps.measure=range(0,3,1)"),
        ("model.n_layer=range(0,3)", "model.n_layer=0", "must be a positive integer"),
        ("plan_gpu_memory_gib=range(-1,3)", "plan_gpu_memory_gib=-1", "must be a positive number of GiB"),
        ("precision=range(1,3)", "precision=range(1,3)", "1 is no option of precision"),
    ],
)
def test_a_ranges_values_are_checked_as_a_choices_are(override: str, shown: str, words: str) -> None:
    assert words in _one_line(refusal(["-m", override]), shown)


def test_sweep_values_lists_choices_and_ranges_and_leaves_globs_and_intervals_to_hydra() -> None:
    parser = OverridesParser.create()
    expected = {
        "a=3": [3],
        "a=null": [None],
        "a=1,2": [1, 2],
        "a=tag(t,choice(1,2))": [1, 2],
        "a=sort(2,1)": [1, 2],
        "a=range(1.5,3,0.5)": [1.5, 2.0, 2.5],
        "a=range(0,100000000)": list(range(1000)),  # RANGE_VALUES_CHECKED, not the whole range
        "a=glob(*)": [],
        "a=interval(0,1)": [],
    }
    assert {text: sweep_values(parser.parse_override(text)) for text in expected} == expected
