"""A sweep file's plain value that its own ``hydra.sweeper.params`` axis replaces is still type-checked,
and an axis's fix says ``(its default)`` of the value, not of the list (docs/reliability-12.md #902,
#903). The files are planted in a ``conf/`` of ``tmp_path`` beside links to the checkout's groups."""

from __future__ import annotations

import os
from pathlib import Path

from flopsweep.conf_files import sweep_file_problem
from flopsweep.sweep_file_fix import in_file_form
from flopsweep.sweep_file_keys import values_problem
from run import FILE_MERGE_CHECKS, FILE_VALUE_CHECKS, RUN_CONF

HEAD = "# @package _global_\ndevice: cpu\n"
ARGV = ["-m", "+sweep=x"]


def _conf(tmp_path: Path, text: str) -> str:
    conf = tmp_path / "conf"
    (conf / "sweep").mkdir(parents=True)
    for name in os.listdir(RUN_CONF):
        if name != "sweep":
            (conf / name).symlink_to(f"{RUN_CONF}/{name}")
    (conf / "sweep" / "x.yaml").write_text(HEAD + text)
    return str(conf)


def _problem(argv: list[str], conf: str) -> str | None:
    return sweep_file_problem(argv, conf) or values_problem(argv, FILE_VALUE_CHECKS, conf, FILE_MERGE_CHECKS)


AXIS = "hydra: {sweeper: {params: {steps.measure: '3,2'}}}\n"


def test_a_plain_value_the_files_own_axis_replaces_is_checked_and_its_fixes_pass(tmp_path):
    line = _problem(ARGV, _conf(tmp_path, "steps: {measure: 1.5}\n" + AXIS))
    assert line == (
        "Invalid config: conf/sweep/x.yaml: steps.measure=1.5: is not a whole number (Hydra reads the file's "
        "value before the hydra.sweeper.params axis steps.measure=3,2, which replaces it). Fix: set "
        "steps.measure to a whole number, e.g. steps: {measure: 5} (its default) in conf/sweep/x.yaml, or "
        "drop steps.measure there."
    )
    assert _problem(ARGV, _conf(tmp_path / "fixed", "steps: {measure: 5}\n" + AXIS)) is None
    assert _problem(ARGV, _conf(tmp_path / "dropped", AXIS)) is None


def test_the_command_lines_value_is_named_before_the_files_axis(tmp_path):
    line = _problem([*ARGV, "steps.measure=4"], _conf(tmp_path, "steps: {measure: 1.5}\n" + AXIS))
    assert "before the command line's steps.measure=4, which replaces it" in line


def test_its_default_is_said_of_the_value_where_the_list_has_others():
    head = "Invalid config: s.yaml (hydra.sweeper.params): batch.micro_batch_size=1.5: is not a whole number."
    fix = " Fix: set batch.micro_batch_size to a whole number, e.g. batch.micro_batch_size=4 (its default)."
    two = in_file_form(head + fix, "s.yaml", axis="batch.micro_batch_size=1.5,2")
    assert two.endswith(
        "e.g. batch.micro_batch_size: 4,2 (4 is its default) under hydra.sweeper.params in s.yaml."
    )
    one = in_file_form(head + fix, "s.yaml", axis="batch.micro_batch_size=1.5")
    assert one.endswith("e.g. batch.micro_batch_size: 4 (its default) under hydra.sweeper.params in s.yaml.")
