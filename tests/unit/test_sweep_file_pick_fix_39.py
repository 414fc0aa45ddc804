"""Session 39 (docs/reliability-9.md #482): a sweep file's pick of a group the primary config overrides
itself (``hydra/sweeper``) is fixed on the command line, chosen where each refusal is made
(``sweep_file_defaults._fix`` with the :class:`~flopsweep.sweep_file_defaults.Picks` passed in), no longer
by rewriting another check's finished line, which matched its wording (``Fix: - override ...``) and
would have stopped in silence at any new wording. Each form of a bad pick gets the command line's pick,
and the file without the line, typed back, passes. Files are planted in ``tmp_path``'s ``conf/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from flopsweep.sweep_file_defaults import Picks, _fix, defaults_problem
from tests.unit.test_sweep_file_overrides_38 import ARGV, FIX, _conf

PICK = FIX.format(pick="hydra/sweeper=tune")


@pytest.mark.parametrize(
    "entry",
    [
        "override /hydra/sweeper:tune",  # one text (text_entry_problem)
        "override /hydra/sweeper: [tune]",  # a list of one (_option_problem)
        "override //hydra/sweeper: tune",  # an empty part (_form_problem)
        "override /hydra/sweeper@x: tune",  # a package
        "overide /hydra/sweeper: tune",  # a misspelt keyword
        "override /hydra/sweepr: tune",  # did you mean ...?
    ],
)
def test_every_form_of_a_pick_of_an_overridden_group_is_fixed_on_the_command_line(
    tmp_path: Path, entry: str
) -> None:
    line = defaults_problem(ARGV, _conf(tmp_path, entry))
    assert line is not None and "\n" not in line
    assert line.startswith(f"Invalid config: conf/sweep/mine.yaml (defaults: {entry}): ")
    assert line.endswith(PICK) and line.count("Fix:") == 1
    assert defaults_problem([*ARGV, "hydra/sweeper=tune"], _conf(tmp_path / "b")) is None


def test_the_fix_is_chosen_from_the_picks_not_from_a_message() -> None:
    """``_fix`` decides from what it is given: the primary config's own override and the command line."""
    picks = Picks(
        {"hydra/sweeper": "basic_batched", "model": "gpt-tiny"}, {"hydra/sweeper": "basic_batched"}, ARGV
    )
    cli = "drop this line and pick it on the command line, -m +sweep=mine hydra/sweeper=tune (its pick wins)"
    assert _fix("hydra/sweeper", "tune", picks) == cli
    assert _fix("hydra/sweeper", "tune", picks, ask=True) == f"{cli}."
    assert _fix("hydra/sweeper", "basic_batched", picks) == "- override /hydra/sweeper: basic_batched"
    assert _fix("model", "gpt-125m", picks, ask=True) == "did you mean - override /model: gpt-125m?"
    given = Picks(dict(picks), picks.overridden, [*ARGV, "hydra/sweeper=tune"])
    assert _fix("hydra/sweeper", "tune", given) == "- override /hydra/sweeper: tune"
    assert _fix("hydra/sweeper", "tune", dict(picks)) == "- override /hydra/sweeper: tune"
