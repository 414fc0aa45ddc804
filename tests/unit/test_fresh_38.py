"""Session 38's fresh-user trial on a clean clone (docs/reliability-9.md #478-#479): two fixes that did not
give a command to type. Each printed fix is fed back to the same check."""

from __future__ import annotations

import pytest

from run import refusal


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (["+sweep=nope"], "-m +sweep=smoke"),  # was: e.g. +sweep=attention-2k (a GPU sweep, and no -m)
        (["-m", "+sweep=nope"], "+sweep=smoke"),  # -m given already
        (["+sweep=smok"], "-m +sweep=smoke"),  # the nearest name, with the -m a sweep file needs
        (["-m", "+sweep=memry"], "+sweep=memory"),
    ],
)
def test_an_unknown_sweep_files_fix_is_a_command_that_runs(argv: list[str], fix: str) -> None:
    line = refusal(argv)
    assert line is not None and line.endswith(f"e.g. {fix}.")
    assert refusal(["-m", fix.removeprefix("-m ")]) is None  # with the command line's -m, or the fix's


@pytest.mark.parametrize(
    ("gpu", "named"), [("B999", "H100"), ("foo", "H100"), ("MI300", "MI300X"), ("h200x", "H200")]
)
def test_an_unknown_plan_gpus_fix_names_one_to_type(gpu: str, named: str) -> None:
    line = refusal(["plan=true", f"plan_gpu={gpu}"])
    assert line is not None and line.endswith(f"Fix: use one of those, e.g. plan_gpu={named}.")
    assert refusal(["plan=true", f"plan_gpu={named}"]) is None
