"""A sweep file's ``hydra.sweeper.params`` axis in another script's digits is refused as the command line's
is (docs/reliability-11.md #726): ``steps.measure: ٢,٣`` was refused by Hydra's grammar with "quote the value
as one string", a string ``steps.measure`` then refuses; ``seed: １,２`` the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flopsweep.conf_files import params_digits_problem, sweep_file_problem
from flopsweep.foreign_digits import foreign_digits_problem


@pytest.mark.parametrize(
    ("axis", "fixed", "digit"),
    [
        ("steps.measure=٢,٣", "steps.measure: 2,3", "'٢' (U+0662 ARABIC-INDIC DIGIT TWO)"),
        ("seed=１,２", "seed: 1,2", "'１' (U+FF11 FULLWIDTH DIGIT ONE)"),
    ],
)
def test_an_axis_in_foreign_digits_names_the_axis_to_write(axis: str, fixed: str, digit: str) -> None:
    key = axis.partition("=")[0]
    assert params_digits_problem(["backend=ddp,fsdp", axis]) == (
        f"Invalid config: {axis}: is written in another script's digits ({digit}), and {key} takes a number "
        f"in digits 0-9. Fix: write {fixed} in hydra.sweeper.params."
    )


def test_a_sweep_file_of_such_an_axis_is_refused_before_hydra(tmp_path: Path) -> None:
    from run import RUN_CONF

    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    for name in os.listdir(RUN_CONF):
        if name != "sweep":
            (conf / name).symlink_to(f"{RUN_CONF}/{name}")
    text = "# @package _global_\ndevice: cpu\nhydra:\n  sweeper:\n    params:\n      steps.measure: ٢,٣\n"
    (conf / "sweep" / "mine.yaml").write_text(text, encoding="utf-8")
    line = sweep_file_problem(["-m", "+sweep=mine", "plan=true"], str(conf))
    assert line is not None and "sweep/mine.yaml (hydra.sweeper.params): steps.measure=٢,٣: " in line
    assert line.endswith("Fix: write steps.measure: 2,3 in hydra.sweeper.params."), line
    (conf / "sweep" / "mine.yaml").write_text(text.replace("٢,٣", "2,3"), encoding="utf-8")
    assert sweep_file_problem(["-m", "+sweep=mine", "plan=true"], str(conf)) is None  # the fix, written


def test_the_command_lines_params_axis_is_read_as_its_key() -> None:
    line = foreign_digits_problem(["-m", "+sweep=smoke", "hydra.sweeper.params.seed=١,٢"])
    assert line is not None and "and hydra.sweeper.params.seed takes a number in digits 0-9" in line
