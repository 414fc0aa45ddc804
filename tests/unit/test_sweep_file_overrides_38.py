"""Session 38 (docs/reliability-9.md #473): a sweep file's ``override /hydra/sweeper: tune`` (or of any
group the primary config overrides itself) was dropped by Hydra, which keeps the first override it reads,
the primary config's: the basic sweeper ran, exit 0, no word. Now one line before Hydra, whose fix (the
pick on the command line) is fed back and passes; a launcher pick, which Hydra honours, passes. The files
are planted in a ``conf/`` of ``tmp_path``, never in the checkout's ``sweep/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from flopsweep.sweep_file_defaults import defaults_problem

HEAD = "# @package _global_\n"
ARGV = ["-m", "+sweep=mine", "device=cpu"]


def _conf(tmp_path: Path, *entries: str) -> str:
    """A ``conf/`` whose primary config picks ``model`` and overrides ``hydra/sweeper`` as
    ``conf/config.yaml`` does; ``sweep/mine.yaml``: a defaults list of ``entries``."""
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "gpt-tiny.yaml").write_text("name: gpt-tiny\n")
    (conf / "sweep").mkdir()
    (conf / "config.yaml").write_text(
        "defaults:\n  - base_config\n  - model: gpt-tiny\n  - override hydra/sweeper: basic_batched\n"
        "  - override hydra/job_logging: flopsweep\n  - _self_\n"
    )
    listed = "defaults:\n" + "".join(f"  - {e}\n" for e in entries) if entries else ""
    (conf / "sweep" / "mine.yaml").write_text(f"{HEAD}{listed}device: cpu\n")
    return str(conf)


FIX = "Fix: drop this line and pick it on the command line, -m +sweep=mine {pick} (its pick wins)."


def test_a_sweep_files_override_of_the_sweeper_is_refused_with_the_command_lines_pick(tmp_path: Path) -> None:
    """#473: Hydra ran the basic sweeper, 1 job, exit 0; the fix typed back passes, line dropped or not."""
    conf = _conf(tmp_path, "override /hydra/sweeper: tune")
    assert defaults_problem(ARGV, conf) == (
        "Invalid config: conf/sweep/mine.yaml (defaults: override /hydra/sweeper: tune): conf/config.yaml "
        "overrides hydra/sweeper itself (basic_batched), and Hydra keeps the first override it reads, so "
        "this one is dropped and basic_batched runs. " + FIX.format(pick="hydra/sweeper=tune")
    )
    assert defaults_problem(["-m", "+sweep=mine", "hydra/sweeper=tune"], conf) is None
    assert defaults_problem(["-m", "+sweep=mine", "hydra/sweeper=tune"], _conf(tmp_path / "b")) is None


def test_every_group_the_primary_config_overrides_is_the_same_line(tmp_path: Path) -> None:
    """#473: the class is the primary config's own override (``hydra/job_logging`` too), not the sweeper."""
    line = defaults_problem(ARGV, _conf(tmp_path, "override /hydra/job_logging: default"))
    assert line is not None
    assert "conf/config.yaml overrides hydra/job_logging itself (flopsweep)" in line
    assert line.endswith(FIX.format(pick="hydra/job_logging=default"))
    conf = _conf(tmp_path / "b", "override /hydra/job_logging: default")
    assert defaults_problem([*ARGV, "hydra/job_logging=default"], conf) is None


@pytest.mark.parametrize(
    "entry", ["/hydra/sweeper: tune", "overide /hydra/sweeper: tune", "override /hydra/sweepr: tune"]
)
def test_a_misformed_pick_of_an_overridden_group_gives_the_command_lines_pick(
    tmp_path: Path, entry: str
) -> None:
    """#473: the fix of a pick written wrong (``- override /hydra/sweeper: tune``) was itself dropped; now
    each such fix is the command line's pick, and the file without the line, typed back, passes."""
    line = defaults_problem(ARGV, _conf(tmp_path, entry))
    assert line is not None
    assert line.startswith(f"Invalid config: conf/sweep/mine.yaml (defaults: {entry}): ")
    assert line.endswith(FIX.format(pick="hydra/sweeper=tune"))
    assert defaults_problem([*ARGV, "hydra/sweeper=tune"], _conf(tmp_path / "b")) is None


def test_a_launcher_pick_and_the_primary_configs_own_option_pass(tmp_path: Path) -> None:
    """#473: Hydra honours ``override /hydra/launcher: pool`` in a sweep file (no default overrides the
    launcher; its pool values are ``pool_problem``'s), and a file's override naming the primary config's own
    option changes nothing; an override of a plain pick (``/model``) stays honoured."""
    conf = _conf(tmp_path, "override /hydra/launcher: pool", "override /hydra/sweeper: basic_batched")
    assert defaults_problem(ARGV, conf) is None
    assert defaults_problem(ARGV, _conf(tmp_path / "b", "override /model: gpt-tiny")) is None
