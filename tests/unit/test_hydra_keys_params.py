"""One axis of ``hydra.sweeper.params`` on the command line
(:func:`flopsweep.hydra_keys.params_axis_problem`): without a sweep file's axes,
``hydra.sweeper.params`` is null and ``hydra.sweeper.params.seed=3`` (or ``=``, ``+``, quoted) stopped
Hydra with "AssertionError: Unexpected type for root: NoneType" in a traceback, exit 1; beside a sweep
file, an axis it lacks without ``+`` was Hydra's seven-line "Key 'seed' is not in struct". The command
lines themselves run in ``tests/integration/test_refusals.py`` (``sweep_function_params_axis_*`` rows)."""

from __future__ import annotations

import pytest

from flopsweep.hydra_keys import params_axis_problem
from run import refusal


def _one_line(line: str | None, override: str) -> str:
    assert line is not None
    assert line.startswith(f"Invalid config: {override}: ") and "\n" not in line and " Fix: " in line, line
    return line


@pytest.mark.parametrize(
    ("beside", "override", "words", "fix"),
    [
        ([], "hydra.sweeper.params.seed=", "gives the sweep axis seed no value", None),
        ([], "hydra.sweeper.params.seed=null", "gives the sweep axis seed no value", None),
        ([], "hydra.sweeper.params.seed=3", "hydra.sweeper.params is null without a sweep file", "seed=3"),
        ([], "hydra.sweeper.params.seed='0,1'", "an AssertionError traceback", "seed=0,1"),
        ([], "+hydra.sweeper.params.seed=3", "hydra.sweeper.params is null", "seed=3"),
        ([], "++hydra.sweeper.params.seed=3", "hydra.sweeper.params is null", "seed=3"),
        ([], "~hydra.sweeper.params.seed", "no sweep file (+sweep=NAME) gives axes", None),
        (["+sweep=smoke"], "hydra.sweeper.params.backend=", "gives the sweep axis backend no value", None),
        (["+sweep=smoke"], "hydra.sweeper.params.seed=3", "smoke.yaml has no sweep axis seed (its "
         "axes: backend, precision)", "+hydra.sweeper.params.seed=3"),
        (["+sweep=smoke"], "+hydra.sweeper.params.backend=ddp", "backend is already an axis of sweep/",
         "hydra.sweeper.params.backend=ddp"),
        (["+sweep=smoke"], "~hydra.sweeper.params.seed", "sweep/smoke.yaml has no axis seed", None),
    ],
)  # fmt: skip
def test_an_axis_hydra_cannot_set_is_one_line_whose_fix_passes(beside, override, words, fix) -> None:
    argv = ["-m", *beside, override]
    line = _one_line(params_axis_problem(argv), override)
    assert words in line
    assert refusal(argv) == line  # run.py's, before Hydra
    if fix is not None:
        assert refusal(["-m", *beside, fix]) is None, fix


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "+sweep=smoke", "+hydra.sweeper.params.seed='0,1'"],  # a new axis, added
        ["-m", "+sweep=smoke", "++hydra.sweeper.params.seed=3"],
        ["-m", "+sweep=smoke", "hydra.sweeper.params.backend='ddp,fsdp'"],  # an axis of the file, set
        ["-m", "+sweep=smoke", "~hydra.sweeper.params.backend"],  # an axis of the file, deleted
        ["-m", "--config-name", "config", "hydra.sweeper.params.seed=3"],  # another config: Hydra's
    ],
)
def test_an_axis_a_sweep_file_has_or_adds_is_left_to_hydra(argv: list[str]) -> None:
    assert params_axis_problem(argv) is None
